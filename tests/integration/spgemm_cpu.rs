//! The CPU SpGEMM engine against a straightforward dense product: shapes (empty, rectangular,
//! dense rows and columns), cancellation, masks, row batches, errors, determinism across thread
//! counts, and agreement of every accumulator and schedule.

use gmcl::generate::rng::SplitMix64;
use gmcl::spgemm::cpu::{Accumulator, CpuEngine, Tuning};
use gmcl::spgemm::{self, EngineKind, Pattern, SpgemmOptions};
use gmcl::{BuildOptions, Csr, EdgeList, Error, Scalar};
use proptest::prelude::*;

/// A random `nrows × ncols` matrix, each position stored with probability `density`, values in
/// [-2, 2) (never zero). No duplicate entries.
fn random<T: Scalar>(nrows: usize, ncols: usize, density: f64, seed: u64) -> Csr<T> {
    let mut rng = SplitMix64::new(seed);
    let mut dense = vec![T::ZERO; nrows * ncols];
    for x in dense.iter_mut() {
        if rng.next_f64() < density {
            let v = rng.next_f64() * 4.0 - 2.0;
            *x = T::from_f64(if v == 0.0 { 1.0 } else { v });
        }
    }
    Csr::from_dense(nrows, ncols, &dense)
}

/// A scale-`s` R-MAT matrix (a = 0.57, b = c = 0.19) with `edges` edges, duplicates summed.
fn rmat(scale: u32, edges: usize, seed: u64) -> Csr<f64> {
    let mut rng = SplitMix64::new(seed);
    let n = 1usize << scale;
    let mut e = Vec::with_capacity(edges);
    let mut w = Vec::with_capacity(edges);
    for _ in 0..edges {
        let (mut r, mut c) = (0u32, 0u32);
        for _ in 0..scale {
            let x = rng.next_f64();
            let (down, right) = if x < 0.57 {
                (0, 0)
            } else if x < 0.76 {
                (0, 1)
            } else if x < 0.95 {
                (1, 0)
            } else {
                (1, 1)
            };
            r = (r << 1) | down;
            c = (c << 1) | right;
        }
        e.push((r, c));
        w.push(0.5 + rng.next_f64());
    }
    let el = EdgeList::square(n, e, Some(w));
    Csr::from_edges(&el, &BuildOptions::default()).unwrap()
}

/// The dense product, summed over every k, with the structure of the sparse product (an entry
/// exists when some stored A[i,k] meets some stored B[k,j]) and the sum of |A[i,k]·B[k,j]| for
/// rounding tolerances.
struct Reference {
    vals: Vec<f64>,
    present: Vec<bool>,
    magnitude: Vec<f64>,
    ncols: usize,
}

fn reference<T: Scalar>(a: &Csr<T>, b: &Csr<T>) -> Reference {
    let (n, m, p) = (a.nrows(), a.ncols(), b.ncols());
    let (da, db) = (a.to_dense(), b.to_dense());
    let mut present = vec![false; n * p];
    for i in 0..n {
        for &k in a.row(i).0 {
            for &j in b.row(k as usize).0 {
                present[i * p + j as usize] = true;
            }
        }
    }
    let mut vals = vec![0.0; n * p];
    let mut magnitude = vec![0.0; n * p];
    for i in 0..n {
        for k in 0..m {
            let x = da[i * m + k].to_f64();
            for j in 0..p {
                let y = db[k * p + j].to_f64();
                vals[i * p + j] += x * y;
                magnitude[i * p + j] += (x * y).abs();
            }
        }
    }
    Reference {
        vals,
        present,
        magnitude,
        ncols: p,
    }
}

/// Checks `c` against the reference on rows `rows` (row `rows.start` is row 0 of `c`), keeping
/// only the entries of `mask` when given. `rel` is the rounding tolerance relative to the sum of
/// magnitudes.
fn check<T: Scalar>(
    c: &Csr<T>,
    r: &Reference,
    rows: std::ops::Range<usize>,
    mask: Option<&Csr<T>>,
    rel: f64,
) {
    assert_eq!(c.nrows(), rows.len());
    assert_eq!(c.ncols(), r.ncols);
    for (li, i) in rows.enumerate() {
        let (cols, vals) = c.row(li);
        assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {i} not sorted");
        let want: Vec<usize> = (0..r.ncols)
            .filter(|&j| r.present[i * r.ncols + j])
            .filter(|&j| mask.map_or(true, |m| m.row(i).0.contains(&(j as u32))))
            .collect();
        let got: Vec<usize> = cols.iter().map(|&j| j as usize).collect();
        assert_eq!(got, want, "structure of row {i}");
        for (&j, &v) in cols.iter().zip(vals) {
            let at = i * r.ncols + j as usize;
            let err = (v.to_f64() - r.vals[at]).abs();
            assert!(
                err <= rel * r.magnitude[at] + 1e-300,
                "C[{i},{j}] = {v:?}, want {} (error {err})",
                r.vals[at]
            );
        }
    }
}

fn cpu<T: Scalar>(a: &Csr<T>, b: &Csr<T>, opts: &SpgemmOptions) -> Csr<T> {
    let (c, stats) = spgemm::multiply(EngineKind::Cpu, a, b, opts).unwrap();
    assert_eq!(stats.nnz, c.nnz() as u64);
    c
}

fn engines() -> Vec<CpuEngine> {
    let mut v = Vec::new();
    for acc in [
        Accumulator::Auto,
        Accumulator::Dense,
        Accumulator::Hash,
        Accumulator::Chunked,
    ] {
        for single_pass in [true, false] {
            v.push(CpuEngine::with_tuning(Tuning {
                accumulator: acc,
                chunk_cols: 64,
                single_pass,
                task_products: 64,
                ..Tuning::default()
            }));
        }
    }
    v
}

#[test]
fn empty_shapes() {
    for (n, m, p) in [(0, 0, 0), (0, 5, 3), (4, 0, 3), (3, 4, 0), (3, 3, 3)] {
        let a = Csr::<f64>::empty(n, m);
        let b = Csr::<f64>::empty(m, p);
        for e in engines() {
            let c = e.multiply(&a, &b, &SpgemmOptions::default()).unwrap();
            assert_eq!((c.nrows(), c.ncols(), c.nnz()), (n, p, 0));
            assert_eq!(c.row_ptr(), vec![0u64; n + 1].as_slice());
        }
        let (_, st) = spgemm::multiply(EngineKind::Cpu, &a, &b, &SpgemmOptions::default()).unwrap();
        assert_eq!(st.intermediate_products, 0);
    }
}

#[test]
fn dense_row_and_column() {
    // A has one full row and one full column; B likewise.
    let n = 70;
    let mut da = vec![0.0f64; n * n];
    let mut db = vec![0.0f64; n * n];
    for k in 0..n {
        da[3 * n + k] = 1.0 + k as f64;
        da[k * n + 5] = 2.0;
        db[k * n + 7] = 0.5;
        db[11 * n + k] = -1.0 - k as f64;
    }
    let a = Csr::from_dense(n, n, &da);
    let b = Csr::from_dense(n, n, &db);
    let r = reference(&a, &b);
    for e in engines() {
        check(
            &e.multiply(&a, &b, &SpgemmOptions::default()).unwrap(),
            &r,
            0..n,
            None,
            1e-14,
        );
    }
}

#[test]
fn cancellation_keeps_the_structure() {
    // Row 0 of C: 1·1 + 1·(-1) = 0 at column 0, kept as an explicit zero.
    let a = Csr::from_dense(2, 2, &[1.0f64, 1.0, 0.0, 2.0]);
    let b = Csr::from_dense(2, 3, &[1.0f64, 0.0, 3.0, -1.0, 4.0, 0.0]);
    for e in engines() {
        let c = e.multiply(&a, &b, &SpgemmOptions::default()).unwrap();
        assert_eq!(c.row(0).0, &[0, 1, 2]);
        assert_eq!(c.row(0).1, &[0.0, 4.0, 3.0]);
        assert_eq!(c.row(1).0, &[0, 1]);
        assert_eq!(c.row(1).1, &[-2.0, 8.0]);
    }
}

#[test]
fn mismatched_shapes_fail_with_a_clear_message() {
    let a = Csr::<f32>::empty(3, 4);
    let b = Csr::<f32>::empty(5, 2);
    let e = spgemm::multiply(EngineKind::Cpu, &a, &b, &SpgemmOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Invalid(_)));
    assert_eq!(
        e.to_string(),
        "cannot multiply: A is 3 x 4 but B is 5 x 2 (A's columns must equal B's rows)"
    );
    assert!(spgemm::cpu::multiply(&a, &b, &SpgemmOptions::default()).is_err());
}

#[test]
fn gpu_engine_runs_or_is_reported_unavailable() {
    let a = Csr::<f64>::from_dense(2, 2, &[1.0, 2.0, 0.0, 3.0]);
    let r = spgemm::multiply(EngineKind::Gpu, &a, &a, &SpgemmOptions::default());
    match gmcl::gpu::unavailable_reason() {
        Some(_) => {
            let e = r.unwrap_err();
            assert!(matches!(e, Error::EngineUnavailable(_)));
            assert!(e.to_string().contains("--engine cpu"), "{e}");
        }
        None => assert_eq!(r.unwrap().0.to_dense(), vec![1.0, 8.0, 0.0, 9.0]),
    }
}

#[test]
fn masks_and_row_batches() {
    let a = random::<f64>(40, 30, 0.15, 1);
    let b = random::<f64>(30, 50, 0.15, 2);
    let mask = random::<f64>(40, 50, 0.3, 3);
    let r = reference(&a, &b);
    for e in engines() {
        for rows in [0..40, 0..0, 7..8, 13..40] {
            for m in [None, Some(&mask)] {
                let opts = SpgemmOptions {
                    mask: m.map(Pattern::of),
                    rows: Some(rows.clone()),
                    ..Default::default()
                };
                let c = e.multiply(&a, &b, &opts).unwrap();
                check(&c, &r, rows.clone(), m, 1e-14);
            }
        }
    }
    // A mask of the wrong shape, a batch out of range.
    let bad = Csr::<f64>::empty(40, 49);
    let opts = SpgemmOptions {
        mask: Some(Pattern::of(&bad)),
        rows: None,
        ..Default::default()
    };
    assert!(spgemm::multiply(EngineKind::Cpu, &a, &b, &opts).is_err());
    let opts = SpgemmOptions {
        mask: None,
        rows: Some(30..41),
        ..Default::default()
    };
    assert!(spgemm::multiply(EngineKind::Cpu, &a, &b, &opts).is_err());
}

#[test]
fn square_power_law_product() {
    let a = rmat(9, 4000, 5);
    let r = reference(&a, &a);
    let c = cpu(&a, &a, &SpgemmOptions::default());
    check(&c, &r, 0..a.nrows(), None, 1e-14);
    let (_, st) = spgemm::multiply(EngineKind::Cpu, &a, &a, &SpgemmOptions::default()).unwrap();
    assert_eq!(
        st.intermediate_products,
        spgemm::intermediate_products(&a, &a).unwrap()
    );
    assert_eq!(
        spgemm::intermediate_products_per_row(&a, &a)
            .unwrap()
            .iter()
            .sum::<u64>(),
        st.intermediate_products
    );
}

#[test]
fn accumulators_and_schedules_agree_bitwise() {
    // Many columns and a few chunks: long rows go dense, chunked or hashed depending on the knob.
    let a = rmat(12, 20_000, 7);
    let b = rmat(12, 40_000, 8);
    let want = CpuEngine::default()
        .multiply(&a, &b, &SpgemmOptions::default())
        .unwrap();
    for mut e in engines() {
        e.tuning.chunk_cols = 512;
        let c = e.multiply(&a, &b, &SpgemmOptions::default()).unwrap();
        assert_eq!(c, want, "{:?}", e.tuning);
    }
    // Auto with a small dense limit: chunked long rows, hashed short ones.
    let e = CpuEngine::with_tuning(Tuning {
        dense_max_cols: 1024,
        chunk_cols: 256,
        chunk_min_products: 64,
        ..Tuning::default()
    });
    assert_eq!(e.multiply(&a, &b, &SpgemmOptions::default()).unwrap(), want);
    let f = a.cast::<f32>();
    let g = b.cast::<f32>();
    let want32 = CpuEngine::default()
        .multiply(&f, &g, &SpgemmOptions::default())
        .unwrap();
    for e in engines() {
        assert_eq!(
            e.multiply(&f, &g, &SpgemmOptions::default()).unwrap(),
            want32
        );
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let a = rmat(13, 40_000, 11);
    let b = rmat(13, 70_000, 12);
    let mask = rmat(13, 100_000, 13);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let two = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for opts in [
        SpgemmOptions::default(),
        SpgemmOptions {
            mask: Some(Pattern::of(&mask)),
            rows: Some(100..6000),
            ..Default::default()
        },
    ] {
        let c1 = one.install(|| cpu(&a, &b, &opts));
        let c2 = two.install(|| cpu(&a, &b, &opts));
        assert!(c1.nnz() > 0);
        assert_eq!(c1.row_ptr(), c2.row_ptr());
        assert_eq!(c1.col_idx(), c2.col_idx());
        let bits = |c: &Csr<f64>| c.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&c1), bits(&c2));
        let (f, g) = (a.cast::<f32>(), b.cast::<f32>());
        let d1 = one.install(|| cpu(&f, &g, &opts));
        let d2 = two.install(|| cpu(&f, &g, &opts));
        assert_eq!(d1, d2);
        let bits32 = |c: &Csr<f32>| c.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits32(&d1), bits32(&d2));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn matches_the_dense_product_f64(
        n in 0usize..14, m in 0usize..14, p in 0usize..14,
        da in 0.0f64..1.0, db in 0.0f64..1.0, seed in any::<u64>(),
    ) {
        let a = random::<f64>(n, m, da, seed);
        let b = random::<f64>(m, p, db, seed ^ 0x5555);
        let r = reference(&a, &b);
        for e in engines() {
            check(&e.multiply(&a, &b, &SpgemmOptions::default()).unwrap(), &r, 0..n, None, 1e-14);
        }
    }

    #[test]
    fn matches_the_dense_product_f32(
        n in 0usize..14, m in 0usize..14, p in 0usize..14,
        da in 0.0f64..1.0, db in 0.0f64..1.0, seed in any::<u64>(),
    ) {
        let a = random::<f32>(n, m, da, seed);
        let b = random::<f32>(m, p, db, seed ^ 0xAAAA);
        let r = reference(&a, &b);
        for e in engines() {
            check(&e.multiply(&a, &b, &SpgemmOptions::default()).unwrap(), &r, 0..n, None, 1e-5);
        }
    }

    #[test]
    fn masked_batches_match(
        n in 1usize..12, m in 0usize..12, p in 0usize..12,
        lo in 0usize..12, len in 0usize..12, seed in any::<u64>(),
    ) {
        let a = random::<f64>(n, m, 0.4, seed);
        let b = random::<f64>(m, p, 0.4, seed ^ 1);
        let mask = random::<f64>(n, p, 0.5, seed ^ 2);
        let start = lo.min(n);
        let rows = start..(start + len).min(n);
        let r = reference(&a, &b);
        let opts = SpgemmOptions { mask: Some(Pattern::of(&mask)), rows: Some(rows.clone()), ..Default::default() };
        for e in engines() {
            check(&e.multiply(&a, &b, &opts).unwrap(), &r, rows.clone(), Some(&mask), 1e-14);
        }
    }
}
