//! The CPU SpGEMM engine on R-MAT pairs `A4·B8` (A: 4·2^s edges, B: 8·2^s, a = 0.57,
//! b = c = 0.19, values in [0.5, 1.5), duplicates summed), the pairs `scripts/bench_graphblas.py`
//! compares with GraphBLAS; each accumulator forced in turn, and both schedules.
//!
//! `GMCL_BENCH_SCALES` picks the scales (default "13,15"); `GMCL_BENCH_THREADS` the rayon
//! threads (default 2, as in the GraphBLAS comparison).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gmcl::spgemm::cpu::{Accumulator, CpuEngine, Tuning};
use gmcl::spgemm::{intermediate_products, SpgemmOptions};
use gmcl::{BuildOptions, Csr, EdgeList};

/// A 2^scale square R-MAT matrix with `edges` edges (SplitMix64 stream from `seed`).
fn rmat(scale: u32, edges: usize, seed: u64) -> Csr<f64> {
    let mut s = seed;
    let mut unit = move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut e = Vec::with_capacity(edges);
    let mut w = Vec::with_capacity(edges);
    for _ in 0..edges {
        let (mut r, mut c) = (0u32, 0u32);
        for _ in 0..scale {
            let x = unit();
            r = (r << 1) | (x >= 0.76) as u32;
            c = (c << 1) | ((0.57..0.76).contains(&x) || x >= 0.95) as u32;
        }
        e.push((r, c));
        w.push(0.5 + unit());
    }
    let el = EdgeList::square(1 << scale, e, Some(w));
    Csr::from_edges(&el, &BuildOptions::default()).expect("valid R-MAT edges")
}

fn bench_spgemm(c: &mut Criterion) {
    let scales: Vec<u32> = std::env::var("GMCL_BENCH_SCALES")
        .unwrap_or_else(|_| "13,15".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let threads: usize = std::env::var("GMCL_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    let mut g = c.benchmark_group("spgemm_cpu");
    g.sample_size(10);
    for s in scales {
        let a = rmat(s, 4 << s, 1000 + s as u64);
        let b = rmat(s, 8 << s, 2000 + s as u64);
        let products = intermediate_products(&a, &b).expect("square operands");
        g.throughput(Throughput::Elements(products));
        let variants = [
            ("auto", Tuning::default()),
            (
                "auto-two-pass",
                Tuning {
                    single_pass: false,
                    ..Tuning::default()
                },
            ),
            (
                "dense",
                Tuning {
                    accumulator: Accumulator::Dense,
                    ..Tuning::default()
                },
            ),
            (
                "hash",
                Tuning {
                    accumulator: Accumulator::Hash,
                    ..Tuning::default()
                },
            ),
            (
                "chunked",
                Tuning {
                    accumulator: Accumulator::Chunked,
                    chunk_cols: 1 << 12,
                    ..Tuning::default()
                },
            ),
        ];
        for (name, tuning) in variants {
            let e = CpuEngine::with_tuning(tuning);
            g.bench_with_input(
                BenchmarkId::new(name, format!("s{s}-A4B8")),
                &s,
                |bch, _| {
                    bch.iter(|| {
                        pool.install(|| e.multiply(&a, &b, &SpgemmOptions::default()))
                            .expect("product")
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench_spgemm);
criterion_main!(benches);
