//! The GPU engine (gMAGNUS) against the CPU engine, the reference: same structure, values within
//! rounding, on random, R-MAT, empty, one-row, one-dense-row, very wide and (ignored by default)
//! huge inputs, with masks, row batches and forced memory limits. Outputs are poisoned before the
//! kernels write them.
//!
//! Without a usable GPU these tests say so and pass, unless `GMCL_REQUIRE_GPU=1` (set on the GPU
//! machine), where a missing GPU fails them.

use gmcl::generate::rng::SplitMix64;
use gmcl::generate::{self, RmatParams};
use gmcl::spgemm::gpu::{GpuEngine, GpuTuning};
use gmcl::spgemm::{cpu::CpuEngine, Pattern, SpgemmOptions};
use gmcl::{BuildOptions, Csr, Scalar};

/// The engine with poisoned outputs and heavy rows through the outer product (never the
/// dense-row accumulator, which has tests of its own), or `None` (after saying why) where no
/// GPU is usable.
fn engine(memory_limit: Option<u64>) -> Option<GpuEngine> {
    match GpuEngine::open() {
        Ok(e) => Some(e.with_tuning(GpuTuning {
            memory_limit,
            poison: true,
            dense_from: Some(u64::MAX),
            ..Default::default()
        })),
        Err(why) => {
            assert!(
                std::env::var("GMCL_REQUIRE_GPU").map_or(true, |v| v != "1"),
                "GMCL_REQUIRE_GPU=1 but the GPU engine is unavailable: {why}"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// A random sparse matrix with about `per_row` entries per row, values in [-2, 2) (never 0).
fn random<T: Scalar>(nrows: usize, ncols: usize, per_row: usize, seed: u64) -> Csr<T> {
    let mut rng = SplitMix64::new(seed);
    let mut ptr = vec![0u64];
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for _ in 0..nrows {
        let mut row: Vec<u32> = (0..per_row)
            .map(|_| (rng.next_u64() % ncols.max(1) as u64) as u32)
            .collect();
        row.sort_unstable();
        row.dedup();
        for c in row {
            cols.push(c);
            let v = rng.next_f64() * 4.0 - 2.0;
            vals.push(T::from_f64(if v == 0.0 { 1.0 } else { v }));
        }
        ptr.push(cols.len() as u64);
    }
    if ncols == 0 {
        return Csr::empty(nrows, 0);
    }
    Csr::from_parts(nrows, ncols, ptr, cols, vals).unwrap()
}

/// A symmetric R-MAT graph (weights in [0.5, 1.5)) from gmcl's generator.
fn rmat<T: Scalar>(scale: u32, edge_factor: u64, seed: u64) -> Csr<T> {
    let mut p = RmatParams::new(scale, edge_factor << scale);
    p.seed = seed;
    p.weights = true;
    let el = generate::generate(&p).unwrap();
    let opts = BuildOptions {
        symmetrize: true,
        drop_self_loops: true,
        ..Default::default()
    };
    Csr::<f64>::from_edges(&el, &opts).unwrap().cast()
}

fn abs<T: Scalar>(m: &Csr<T>) -> Csr<f64> {
    let mut m: Csr<f64> = m.cast();
    for v in m.values_mut() {
        *v = v.abs();
    }
    m
}

/// Checks the GPU's C against the CPU engine's: identical structure, and each value within
/// rounding of the reference, measured against the sum of the magnitudes of its products.
fn assert_same<T: Scalar>(gpu: &Csr<T>, cpu: &Csr<T>, magnitude: &Csr<f64>, what: &str) {
    assert_eq!(
        (gpu.nrows(), gpu.ncols()),
        (cpu.nrows(), cpu.ncols()),
        "{what}: shape"
    );
    assert_eq!(gpu.row_ptr(), cpu.row_ptr(), "{what}: row offsets");
    assert_eq!(gpu.col_idx(), cpu.col_idx(), "{what}: columns");
    let eps = if T::NAME == "f32" {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    };
    for (i, ((g, c), m)) in gpu
        .values()
        .iter()
        .zip(cpu.values())
        .zip(magnitude.values())
        .enumerate()
    {
        let (g, c) = (g.to_f64(), c.to_f64());
        assert!(
            (g - c).abs() <= 64.0 * eps * m.max(f64::MIN_POSITIVE),
            "{what}: entry {i} (column {}): GPU {g} vs CPU {c} (magnitude {m})",
            gpu.col_idx()[i]
        );
    }
}

/// Multiplies on both engines (with the options) and compares; returns C's entry count.
fn check<T: Scalar>(
    e: &GpuEngine,
    a: &Csr<T>,
    b: &Csr<T>,
    opts: &SpgemmOptions,
    what: &str,
) -> usize {
    let cpu = CpuEngine::default().multiply(a, b, opts).unwrap();
    let (gpu, stats) = e.multiply(a, b, opts).unwrap();
    let mag = CpuEngine::default()
        .multiply(&abs(a), &abs(b), opts)
        .unwrap();
    assert_same(&gpu, &cpu, &mag, what);
    assert_eq!(stats.nnz as usize, gpu.nnz(), "{what}: stats");
    cpu.nnz()
}

/// [`check`] in f64, then again with the operands cast to f32; returns C's entries.
fn check_both(e: &GpuEngine, a: &Csr<f64>, b: &Csr<f64>, what: &str) -> usize {
    let none = SpgemmOptions::default();
    let nnz = check(e, a, b, &none, &format!("f64 {what}"));
    let (a, b): (Csr<f32>, Csr<f32>) = (a.cast(), b.cast());
    check(e, &a, &b, &none, &format!("f32 {what}"));
    nnz
}

#[test]
fn random_products_match_the_cpu_engine() {
    let Some(e) = engine(None) else { return };
    for (seed, (m, k, n, per_row)) in [
        (10, 10, 10, 3),
        (100, 80, 120, 5),
        (1000, 1000, 1000, 8),
        (2000, 500, 3000, 30),
        (300, 2000, 40000, 60),
        (5000, 5000, 5000, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let a = random::<f64>(m, k, per_row, seed as u64);
        let b = random::<f64>(k, n, per_row, seed as u64 + 100);
        assert!(check_both(&e, &a, &b, &format!("{m}x{k}x{n}")) > 0);
    }
}

#[test]
fn rmat_squares_match_the_cpu_engine() {
    let Some(e) = engine(None) else { return };
    for (scale, ef) in [(10, 8), (12, 16), (14, 8)] {
        let a = rmat::<f64>(scale, ef, 7);
        check_both(&e, &a, &a, &format!("rmat s{scale} ef{ef}"));
    }
}

/// The engine with heavy rows from `dense_from` products on in the dense-row accumulator, its
/// window `window` columns wide (default: what shared memory holds), outputs poisoned.
fn dense_engine(dense_from: Option<u64>, window: Option<u32>) -> Option<GpuEngine> {
    engine(None).map(|e| {
        e.with_tuning(GpuTuning {
            poison: true,
            dense_from,
            dense_window: window,
            ..Default::default()
        })
    })
}

#[test]
fn dense_rows_match_the_cpu_engine() {
    // Every row past the hash tables in the dense-row accumulator (dense_from 0): rank windows
    // as wide as the shared memory allows; shared memory of 8192 columns (rank windows of
    // about 10^5 columns, so several windows per row, each found from the cursors the last
    // window left in B's rows, and chunks of a few thousand values); windows of 64 and 1024
    // columns (too small
    // for rank windows: cleared and scanned whole); then the default routing.
    for (from, window) in [
        (Some(0), None),
        (Some(0), Some(8192)),
        (Some(0), Some(64)),
        (Some(0), Some(1024)),
        (None, None),
    ] {
        let Some(e) = dense_engine(from, window) else {
            return;
        };
        let what = |s: &str| format!("{s}, dense from {from:?}, window {window:?}");
        for (scale, ef) in [(10, 8), (12, 16)] {
            let a = rmat::<f64>(scale, ef, 7);
            check_both(&e, &a, &a, &what(&format!("rmat s{scale} ef{ef}")));
        }
        for (m, k, n, per_row) in [(300, 2000, 40000, 60), (64, 3000, 5000, 40)] {
            let a = random::<f64>(m, k, per_row, 31);
            let b = random::<f64>(k, n, per_row, 32);
            check_both(&e, &a, &b, &what(&format!("{m}x{k}x{n}")));
        }
        // One fully dense row of A over a wide B: more columns than one default window holds,
        // more A entries than the kernels keep cursors for (kernels/dense.cu's DENSE_CURSORS).
        let k = 6000;
        let mut a = random::<f32>(8, k, 4, 11).to_dense();
        for x in a.iter_mut().take(k) {
            *x = 1.5;
        }
        let a = Csr::from_dense(8, k, &a);
        let b = random::<f32>(k, 200_000, 30, 12);
        check(
            &e,
            &a,
            &b,
            &SpgemmOptions::default(),
            &what("dense row, 200000 columns"),
        );
    }
}

/// The engine with `tuning` and poisoned outputs, or `None` where no GPU is usable.
fn tuned(tuning: GpuTuning) -> Option<GpuEngine> {
    engine(None).map(|e| {
        e.with_tuning(GpuTuning {
            poison: true,
            ..tuning
        })
    })
}

/// Products whose rows take the dense-row accumulator's paths, checked against the CPU engine
/// (`what` names each): an R-MAT square, C of 70,000 columns, and C wider than one rank window
/// when the shared memory is that of 8192 columns.
fn check_dense_products(e: &GpuEngine, what: &dyn Fn(&str) -> String) {
    let a = rmat::<f64>(12, 16, 5);
    check_both(e, &a, &a, &what("rmat s12 ef16"));
    let a = random::<f64>(300, 2000, 40, 41);
    let b = random::<f64>(2000, 70000, 20, 42);
    check_both(e, &a, &b, &what("300x2000x70000"));
    let a = random::<f64>(64, 3000, 40, 43);
    let b = random::<f64>(3000, 600_000, 40, 44);
    check_both(e, &a, &b, &what("64x3000x600000"));
}

#[test]
fn rows_past_a_lower_hash_limit_match_the_cpu_engine() {
    // Rows with more products than the hash limit leave the hash tables for the dense-row
    // accumulator (rank windows, or windows of 1024 columns), whatever dense_from says; with
    // the dense-row accumulator off the limit is ignored.
    for (limit, from, window) in [
        (0, Some(0), None),
        (100, Some(0), None),
        (1000, Some(0), Some(1024)),
        (1000, Some(0), Some(8192)),
        (100, Some(u64::MAX), None),
    ] {
        let Some(e) = tuned(GpuTuning {
            hash_limit: Some(limit),
            dense_from: from,
            dense_window: window,
            ..Default::default()
        }) else {
            return;
        };
        check_dense_products(&e, &|s| {
            format!("{s}, hash limit {limit}, dense from {from:?}")
        });
    }
}

#[test]
fn dense_rows_split_by_size_match_the_cpu_engine() {
    // The dense rows of at most `dense_small_top` products run in blocks several to a
    // multiprocessor, the others in a block each on another stream: both at once for the low
    // caps, the small blocks' own cap by default, one shape for a cap below the dense rows.
    // C 600,000 columns wide takes no small blocks (a rank window of all of it does not fit).
    for top in [Some(600), Some(3000), None, Some(0)] {
        let Some(e) = tuned(GpuTuning {
            dense_small_top: top,
            ..Default::default()
        }) else {
            return;
        };
        let what = |s: &str| format!("{s}, small dense rows up to {top:?}");
        check_dense_products(&e, &what);
        let a = rmat::<f64>(13, 4, 4);
        let b = rmat::<f64>(13, 8, 1008);
        check_both(&e, &a, &b, &what("rmat s13 ef4 times ef8"));
    }
}

#[test]
fn empty_and_tiny_inputs() {
    let Some(e) = engine(None) else { return };
    let none = SpgemmOptions::default();
    let z = Csr::<f32>::empty(0, 0);
    let (c, _) = e.multiply(&z, &z, &none).unwrap();
    assert_eq!((c.nrows(), c.ncols(), c.nnz()), (0, 0, 0));
    let a = Csr::<f32>::empty(5, 7);
    let b = random::<f32>(7, 9, 3, 1);
    let (c, _) = e.multiply(&a, &b, &none).unwrap();
    assert_eq!((c.nrows(), c.ncols(), c.nnz()), (5, 9, 0));
    // One row, one entry.
    let a = Csr::<f64>::from_dense(1, 1, &[3.0]);
    let (c, _) = e.multiply(&a, &a, &none).unwrap();
    assert_eq!(c.to_dense(), vec![9.0]);
    // One row times a random B.
    let a = random::<f64>(1, 50, 20, 3);
    let b = random::<f64>(50, 70, 10, 4);
    check(&e, &a, &b, &none, "one row");
}

#[test]
fn one_dense_row_takes_the_heavy_path() {
    let Some(e) = engine(None) else { return };
    // Row 0 of A is dense: its products far exceed τ, so it goes through the outer product, the
    // multisplit and the dense accumulators; the other rows are light.
    // 1 << 22 columns need two multisplit levels (more chunks than one level can make).
    for ncols in [5_000usize, 60_000, 1 << 20, 1 << 22] {
        let k = 4000;
        let mut a = random::<f64>(64, k, 4, 11).to_dense();
        for x in a.iter_mut().take(k) {
            *x = 1.5;
        }
        let a = Csr::from_dense(64, k, &a);
        let b = random::<f64>(k, ncols, 12, 12);
        let p = e.params::<f64>(ncols as u64);
        check(
            &e,
            &a,
            &b,
            &SpgemmOptions::default(),
            &format!("dense row, {ncols} columns, levels {:?}", p.levels),
        );
        let (a, b): (Csr<f32>, Csr<f32>) = (a.cast(), b.cast());
        check(
            &e,
            &a,
            &b,
            &SpgemmOptions::default(),
            &format!("f32 dense row, {ncols} columns"),
        );
    }
}

#[test]
fn two_and_three_multisplit_levels() {
    // A test-only cap on the chunks per level forces several levels on a small product.
    for (cap, levels) in [(4u64, 2usize), (2, 3)] {
        let Some(e) = engine(None) else { return };
        let e = e.with_tuning(GpuTuning {
            poison: true,
            max_chunks_per_level: Some(cap),
            dense_from: Some(u64::MAX),
            ..Default::default()
        });
        let ncols = 1 << 16;
        let k = 3000;
        let mut a = random::<f32>(16, k, 4, 21).to_dense();
        for x in a.iter_mut().take(k) {
            *x = 0.75;
        }
        let a = Csr::from_dense(16, k, &a);
        let b = random::<f32>(k, ncols, 16, 22);
        let p = e.params::<f32>(ncols as u64);
        assert_eq!(p.levels.len(), levels, "{:?}", p.levels);
        check(
            &e,
            &a,
            &b,
            &SpgemmOptions::default(),
            &format!("levels {:?}", p.levels),
        );
        let (a, b): (Csr<f64>, Csr<f64>) = (a.cast(), b.cast());
        check(
            &e,
            &a,
            &b,
            &SpgemmOptions::default(),
            &format!("f64 levels {:?}", e.params::<f64>(ncols as u64).levels),
        );
    }
}

#[test]
fn masked_products_match_the_cpu_engine() {
    let Some(e) = engine(None) else { return };
    let a = rmat::<f64>(12, 16, 3);
    let opts = SpgemmOptions {
        mask: Some(Pattern::of(&a)),
        ..Default::default()
    };
    let nnz = check(&e, &a, &a, &opts, "A² masked by A");
    assert!(nnz > 0);
    let a = random::<f32>(500, 500, 40, 9);
    let opts = SpgemmOptions {
        mask: Some(Pattern::of(&a)),
        ..Default::default()
    };
    check(&e, &a, &a, &opts, "random masked");
}

#[test]
fn row_batches_and_memory_limits_give_the_same_product() {
    let Some(full) = engine(None) else { return };
    let a = rmat::<f32>(13, 16, 5);
    let (whole, _) = full.multiply(&a, &a, &SpgemmOptions::default()).unwrap();
    // Rows asked for explicitly.
    let opts = SpgemmOptions {
        rows: Some(1000..5000),
        ..Default::default()
    };
    check(&full, &a, &a, &opts, "rows 1000..5000");
    // A memory limit far below the product's size forces many batches.
    let Some(small) = engine(Some(4 << 20)) else {
        return;
    };
    let mut seen = Vec::new();
    let mut parts = Vec::new();
    small
        .multiply_batches(&a, &a, &SpgemmOptions::default(), |rows, c| {
            assert_eq!(c.nrows(), rows.len());
            seen.push(rows);
            parts.push(c);
            Ok(())
        })
        .unwrap();
    assert!(seen.len() > 4, "only {} batches", seen.len());
    assert_eq!(seen.first().unwrap().start, 0);
    assert_eq!(seen.last().unwrap().end, a.nrows());
    for w in seen.windows(2) {
        assert_eq!(w[0].end, w[1].start);
    }
    // A cap on a batch's entries (what MCL uses to bound host memory) batches too.
    let Some(capped) = engine(None) else { return };
    let capped = capped.with_tuning(GpuTuning {
        poison: true,
        max_batch_entries: Some(200_000),
        ..Default::default()
    });
    let mut n_batches = 0;
    let mut total = 0;
    capped
        .multiply_batches(&a, &a, &SpgemmOptions::default(), |_, c| {
            n_batches += 1;
            total += c.nnz();
            Ok(())
        })
        .unwrap();
    assert!(n_batches > 4, "only {n_batches} batches");
    assert_eq!(total, whole.nnz());
    let (batched, _) = small.multiply(&a, &a, &SpgemmOptions::default()).unwrap();
    assert_eq!(batched.row_ptr(), whole.row_ptr());
    assert_eq!(batched.col_idx(), whole.col_idx());
    let mag = CpuEngine::default()
        .multiply(&abs(&a), &abs(&a), &SpgemmOptions::default())
        .unwrap();
    assert_same(&batched, &whole, &mag, "batched against whole");
}

/// Matrices larger than the transfers' pinned staging buffers (several pieces each, the last one
/// partial) cross the bus unchanged both ways, and a product made in row batches that each
/// take the staged path lands in C's arrays as the whole product does.
#[test]
fn large_matrices_and_batches_cross_the_bus_unchanged() {
    let Some(full) = engine(None) else { return };
    let g = full.gpu();
    // About 21 M entries: 84 MB of columns, 168 MB of values.
    let m = random::<f64>(300_001, 1 << 24, 70, 11);
    let back = gmcl::gpu::matrix::DeviceCsr::upload(g, &m)
        .and_then(|d| d.download(g))
        .unwrap();
    assert_eq!(back.row_ptr(), m.row_ptr());
    assert_eq!(back.col_idx(), m.col_idx());
    assert!(back
        .values()
        .iter()
        .zip(m.values())
        .all(|(x, y)| x.to_bits() == y.to_bits()));
    // About 5e7 entries in C, in batches of at most 1.5e7 entries (each staged).
    let a = rmat::<f64>(15, 16, 9);
    let (whole, _) = full.multiply(&a, &a, &SpgemmOptions::default()).unwrap();
    assert!(
        whole.nnz() > 30_000_000,
        "C has only {} entries",
        whole.nnz()
    );
    let capped = full.with_tuning(GpuTuning {
        poison: true,
        max_batch_entries: Some(15_000_000),
        ..Default::default()
    });
    let mut n_batches = 0;
    capped
        .multiply_batches(&a, &a, &SpgemmOptions::default(), |_, _| {
            n_batches += 1;
            Ok(())
        })
        .unwrap();
    assert!(n_batches > 2, "only {n_batches} batches");
    let (batched, _) = capped.multiply(&a, &a, &SpgemmOptions::default()).unwrap();
    assert_eq!(batched.row_ptr(), whole.row_ptr());
    assert_eq!(batched.col_idx(), whole.col_idx());
    let mag = CpuEngine::default()
        .multiply(&abs(&a), &abs(&a), &SpgemmOptions::default())
        .unwrap();
    assert_same(&batched, &whole, &mag, "batched against whole");
}

/// A symmetric R-MAT at scale 18, edge factor 8, squared: about 2.9e9 intermediate products,
/// past 2^31, with Ĉ larger than 2^32 bytes. Run on the GPU machine with --include-ignored.
#[test]
#[ignore = "huge: run on a GPU machine with --include-ignored"]
fn huge_symmetric_rmat_square() {
    let Some(e) = engine(None) else { return };
    let a = rmat::<f32>(18, 8, 1);
    let products = gmcl::spgemm::intermediate_products(&a, &a).unwrap();
    assert!(products > 1 << 31, "{products} products");
    let cpu = CpuEngine::default()
        .multiply(&a, &a, &SpgemmOptions::default())
        .unwrap();
    let (gpu, stats) = e.multiply(&a, &a, &SpgemmOptions::default()).unwrap();
    assert_eq!(stats.intermediate_products, products);
    let mag = CpuEngine::default()
        .multiply(&abs(&a), &abs(&a), &SpgemmOptions::default())
        .unwrap();
    assert_same(&gpu, &cpu, &mag, "sym s18 ef8");
}
