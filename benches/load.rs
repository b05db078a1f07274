//! Loading an edge list and building its CSR matrix: `gmcl::io::load` on a synthetic `.el`
//! file in the page cache, then `Csr::<f32>::from_edges` with default options.
//!
//! `GMCL_BENCH_EDGES` sets the number of edges (default 4 million); ids are below 2^20.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gmcl::io::{load, Format};
use gmcl::{BuildOptions, Csr};
use std::io::Write;
use std::path::Path;

/// Writes `edges` random edges with ids below 2^20 (xorshift, fixed seed).
fn write_el(path: &Path, edges: usize) {
    let file = std::fs::File::create(path).expect("create the bench file");
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    // xorshift64, not generate::rng::SplitMix64: the file must stay the one the performance
    // log's loading figures were measured on.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut ib = itoa::Buffer::new();
    for _ in 0..edges {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let u = (s >> 20) & ((1 << 20) - 1);
        let v = (s >> 40) & ((1 << 20) - 1);
        w.write_all(ib.format(u).as_bytes()).unwrap();
        w.write_all(b" ").unwrap();
        w.write_all(ib.format(v).as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
}

fn bench_load(c: &mut Criterion) {
    let edges: usize = std::env::var("GMCL_BENCH_EDGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.el");
    write_el(&path, edges);
    // Warm the page cache.
    let _ = std::fs::read(&path).expect("read the bench file");

    let mut g = c.benchmark_group("load");
    g.sample_size(10);
    g.throughput(Throughput::Elements(edges as u64));
    g.bench_function("parse .el", |b| {
        b.iter(|| load(&path, Some(Format::El)).unwrap().edges.len())
    });
    g.bench_function("parse .el + CSR f32", |b| {
        b.iter(|| {
            let l = load(&path, Some(Format::El)).unwrap();
            Csr::<f32>::from_edges(&l.edges, &BuildOptions::default())
                .unwrap()
                .nnz()
        })
    });
    let l = load(&path, Some(Format::El)).unwrap();
    g.bench_function("CSR f32 only", |b| {
        b.iter(|| {
            Csr::<f32>::from_edges(&l.edges, &BuildOptions::default())
                .unwrap()
                .nnz()
        })
    });
    g.finish();
}

criterion_group!(benches, bench_load);
criterion_main!(benches);
