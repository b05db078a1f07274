//! Device-resident MCL against the CPU engine: the pruning kernels column by column against
//! src/mcl/prune.rs and inflate.rs (outputs poisoned first), and whole clusterings on graphs with
//! structure and on R-MAT graphs. Skipped where no GPU is usable (GMCL_REQUIRE_GPU=1 fails
//! instead).
//!
//! Both engines sum alike (order-free sums, `gmcl::quantized`), so with inflation 2 (which
//! both compute as a square) every value, chaos and iteration count must be the same bits; with
//! another inflation the GPU's `pow` may round a last bit differently, so values are compared
//! within rounding and clusters exactly.

use gmcl::csr::Csr;
use gmcl::generate::rng::SplitMix64;
use gmcl::generate::{self, RmatParams};
use gmcl::gpu::matrix::DeviceCsr;
use gmcl::gpu::Gpu;
use gmcl::mcl::{self, inflate, prune, MclParams, PruneParams};
use gmcl::scalar::Scalar;
use gmcl::spgemm::gpu::{GpuEngine, GpuTuning};
use gmcl::spgemm::EngineKind;
use proptest::prelude::*;
use std::path::Path;

/// What the host does to each row of a batch: prune, then inflate (emptied when it underflows).
fn host_prune<T: Scalar>(
    c: &Csr<T>,
    row0: u32,
    p: &PruneParams,
    inflation: f64,
) -> (Vec<Vec<u32>>, Vec<Vec<T>>, f64) {
    let (mut cols, mut vals, mut chaos) = (Vec::new(), Vec::new(), 0.0f64);
    let mut scratch = prune::Scratch::default();
    for r in 0..c.nrows() {
        let (rc, rv) = c.row(r);
        let (mut oc, mut ov) = (Vec::new(), Vec::new());
        let res = prune::prune_column(
            rc,
            rv,
            row0 + r as u32,
            p,
            T::from_f64(p.cutoff()),
            &mut oc,
            &mut ov,
            &mut scratch,
        );
        chaos = chaos.max(res.chaos);
        if !inflate::inflate(&mut ov, inflation) {
            oc.clear();
            ov.clear();
        }
        cols.push(oc);
        vals.push(ov);
    }
    (cols, vals, chaos)
}

/// Prunes `c` on the device (outputs poisoned) and checks every row against the host.
fn check_prune<T: Scalar>(gpu: &Gpu, c: &Csr<T>, p: &PruneParams, inflation: f64, what: &str) {
    let row0 = 7u32;
    let dc = DeviceCsr::upload(gpu, c).unwrap();
    let (out, chaos) =
        gmcl::mcl::gpu::prune_batch(gpu, &dc, row0 as u64, p, inflation, true).unwrap();
    let out = out.download(gpu).unwrap();
    let (cols, vals, host_chaos) = host_prune(c, row0, p, inflation);
    assert_eq!(out.nrows(), c.nrows(), "{what}");
    // Order-free sums are exact while they stay below 2, as MCL's columns do.
    let exact = inflation == 2.0
        && (0..c.nrows()).all(|r| c.row(r).1.iter().map(|v| v.to_f64()).sum::<f64>() < 1.5);
    let tol = match (exact, T::NAME) {
        (true, _) => 0.0,
        (false, "f32") => 2e-6,
        (false, _) => 1e-12,
    };
    for r in 0..c.nrows() {
        let (gc, gv) = out.row(r);
        assert_eq!(gc, &cols[r][..], "{what}: columns of row {r} ({p:?})");
        for (k, (g, h)) in gv.iter().zip(&vals[r]).enumerate() {
            let (g, h) = (g.to_f64(), h.to_f64());
            assert!(
                (g - h).abs() <= tol * h.abs().max(1e-30),
                "{what}: row {r} entry {k}: gpu {g} host {h} ({p:?})"
            );
        }
    }
    let tol = if exact { 0.0 } else { 1e-9 };
    assert!(
        (chaos - host_chaos).abs() <= tol * host_chaos.max(1.0),
        "{what}: chaos gpu {chaos} host {host_chaos}"
    );
}

/// A batch of `rows` rows over `ncols` columns with the given row lengths and positive values
/// (a few values repeated, so that ties meet the selection bars).
fn batch<T: Scalar>(ncols: usize, lens: &[usize], seed: u64) -> Csr<T> {
    let mut rng = SplitMix64::new(seed);
    let mut next = || rng.next_u64();
    let (mut ptr, mut cols, mut vals) = (vec![0u64], Vec::new(), Vec::new());
    for &len in lens {
        let len = len.min(ncols);
        // Columns: a random sorted subset of `len`.
        let mut cs: Vec<u32> = (0..ncols as u32).collect();
        for i in 0..len {
            let j = i + (next() as usize) % (ncols - i);
            cs.swap(i, j);
        }
        let mut cs = cs[..len].to_vec();
        cs.sort_unstable();
        let mut vs: Vec<f64> = (0..len)
            .map(|_| match next() % 8 {
                0 => 0.25,
                1 => 1e-5,
                _ => {
                    (next() % 1_000_000 + 1) as f64 / 1e6 * if next() % 3 == 0 { 1e-3 } else { 1.0 }
                }
            })
            .collect();
        let sum: f64 = vs.iter().sum();
        if sum > 0.0 && next() % 2 == 0 {
            vs.iter_mut().for_each(|v| *v /= sum);
        }
        cols.extend(cs);
        vals.extend(vs.into_iter().map(T::from_f64));
        ptr.push(cols.len() as u64);
    }
    Csr::from_parts_unchecked(lens.len(), ncols, ptr, cols, vals)
}

fn schemes() -> Vec<PruneParams> {
    let p = |prune, select, recover, pct| PruneParams {
        prune,
        select,
        recover,
        pct,
    };
    vec![
        PruneParams::default(),
        p(5, 0, 3, 90),    // threshold, then recovery
        p(0, 2, 0, 90),    // selection only
        p(10, 3, 5, 90),   // selection, then recovery from the thresholded column
        p(20, 40, 60, 99), // recovery from under the threshold with long rows
        p(2, 0, 0, 90),    // nothing kept, no recovery: the emergency loop
        p(1000, 50, 0, 0),
        PruneParams::scheme(1).unwrap(),
    ]
}

#[test]
fn pruning_kernels_match_the_host() {
    let Some(gpu) = crate::util::gpu() else {
        return;
    };
    let lens = [
        0, 1, 2, 3, 5, 8, 40, 255, 256, 257, 600, 1100, 1101, 1500, 4000, 20000, 0, 7,
    ];
    // Mostly rows of one entry with a few long ones: short on average, so pruned a warp a row
    // (as MCL's late iterations are), the long rows' selection and recovery included.
    let mut short = vec![1; 1000];
    short.extend([1500, 20000, 257, 0, 7, 1101, 2, 3]);
    for (k, p) in schemes().iter().enumerate() {
        for inflation in [2.0, 1.4, 30.0] {
            let c = batch::<f32>(30000, &lens, k as u64 + 1);
            check_prune(&gpu, &c, p, inflation, "f32");
            let c = batch::<f64>(30000, &lens, k as u64 + 100);
            check_prune(&gpu, &c, p, inflation, "f64");
            let c = batch::<f32>(30000, &short, k as u64 + 200);
            check_prune(&gpu, &c, p, inflation, "f32, short rows");
        }
    }
    // A batch with no rows, and one whose values all underflow when inflated.
    check_prune(
        &gpu,
        &batch::<f32>(10, &[], 1),
        &PruneParams::default(),
        2.0,
        "empty",
    );
    let tiny = Csr::from_parts_unchecked(1, 4, vec![0, 2], vec![0, 3], vec![1e-30f32, 1e-30]);
    check_prune(
        &gpu,
        &tiny,
        &PruneParams {
            prune: 0,
            ..Default::default()
        },
        30.0,
        "underflow",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_batches_prune_as_on_the_host(
        lens in prop::collection::vec(0usize..3000, 0..40),
        seed in 1u64..1000,
        prune in 0u32..200,
        select in 0u32..500,
        recover in 0u32..700,
        pct in 0u32..100,
    ) {
        let Some(gpu) = crate::util::gpu() else { return Ok(()) };
        let p = PruneParams { prune, select, recover, pct };
        check_prune(&gpu, &batch::<f32>(5000, &lens, seed), &p, 2.0, "random f32");
    }
}

fn rmat_graph(scale: u32, edge_factor: u64, seed: u64) -> Csr<f32> {
    let mut p = RmatParams::new(scale, edge_factor << scale);
    p.undirected = true;
    p.seed = seed;
    let el = generate::generate(&p).unwrap();
    mcl::graph_from_edges::<f32>(&el).unwrap().0
}

fn load_graph(path: &str) -> Csr<f32> {
    let loaded = gmcl::io::load(Path::new(path), None).unwrap();
    mcl::graph_from_edges::<f32>(&loaded.edges).unwrap().0
}

/// The GPU engine with every output poisoned before the kernels write it.
fn poisoned() -> GpuTuning {
    GpuTuning {
        poison: true,
        ..Default::default()
    }
}

/// Clusters `g` on both engines; the partitions must be identical and the chaos of every
/// iteration equal (bitwise with inflation 2, else within rounding).
fn same_clustering(g: &Csr<f32>, params: &MclParams, what: &str) {
    let run = |engine| {
        let mut chaos = Vec::new();
        let p = MclParams {
            engine,
            gpu: poisoned(),
            ..params.clone()
        };
        let r = mcl::cluster(g, &p, &mut |it| chaos.push((it.chaos, it.kept))).unwrap();
        (r, chaos)
    };
    let (cpu, cpu_it) = run(EngineKind::Cpu);
    let (gpu, gpu_it) = run(EngineKind::Gpu);
    assert_eq!(gpu.clusters, cpu.clusters, "{what}: clusters");
    assert_eq!(gpu.converged, cpu.converged, "{what}");
    if params.inflation == 2.0 {
        assert_eq!(gpu.iterations, cpu.iterations, "{what}");
        assert_eq!(
            gpu_it, cpu_it,
            "{what}: chaos and entries kept, iteration by iteration"
        );
        return;
    }
    // The chaos may cross the limit an iteration apart when it is that close to it.
    assert!(gpu.iterations.abs_diff(cpu.iterations) <= 1, "{what}");
    // The chaos is a difference of two sums near each other, so it is compared on the scale of
    // its terms (at most 1 per entry kept), not relatively.
    for (i, ((gc, gk), (cc, ck))) in gpu_it.iter().zip(&cpu_it).enumerate().take(8) {
        assert!(
            (gc - cc).abs() <= 1e-4 * cc.max(1.0),
            "{what}: iteration {}: chaos gpu {gc} cpu {cc}",
            i + 1
        );
        assert!(
            gk.abs_diff(*ck) <= ck / 1000 + 2,
            "{what}: iteration {}: kept gpu {gk} cpu {ck}",
            i + 1
        );
    }
}

#[test]
fn device_mcl_matches_the_cpu_on_structured_graphs() {
    if crate::util::gpu().is_none() {
        return;
    }
    for (path, inflation) in [
        ("graphs/karate.el", 2.0),
        ("graphs/karate.el", 3.0),
        ("graphs/lesmis.abc", 1.4),
        ("tests/golden/two_cliques.el", 2.0),
        ("tests/golden/planted.el", 2.0),
        ("tests/golden/planted.el", 4.0),
        // Inflated powers far below 2^-52: the sums at the column's own scale.
        ("graphs/karate.el", 20.0),
        ("graphs/lesmis.abc", 30.0),
    ] {
        let p = MclParams {
            inflation,
            ..Default::default()
        };
        same_clustering(&load_graph(path), &p, &format!("{path} -I {inflation}"));
    }
    // No edges at all: nothing to cluster, on either engine.
    same_clustering(&Csr::empty(0, 0), &MclParams::default(), "empty graph");
    let one = mcl::graph_from_edges::<f32>(&gmcl::edges::EdgeList::square(2, vec![(0, 1)], None))
        .unwrap()
        .0;
    same_clustering(&one, &MclParams::default(), "one edge");
}

#[test]
fn device_mcl_matches_the_cpu_on_rmat_graphs() {
    if crate::util::gpu().is_none() {
        return;
    }
    for (scale, ef, seed) in [(8, 8, 1), (10, 16, 2), (12, 8, 3)] {
        let g = rmat_graph(scale, ef, seed);
        same_clustering(&g, &MclParams::default(), &format!("rmat s{scale} ef{ef}"));
    }
    // Small batches (many per iteration) change nothing.
    let g = rmat_graph(10, 16, 2);
    let p = MclParams {
        batch_entries: Some(5000),
        ..Default::default()
    };
    same_clustering(&g, &p, "rmat s10 ef16, small batches");
}

#[test]
#[ignore = "minutes: run on the GPU machine with GMCL_HUGE=1"]
fn device_mcl_matches_the_cpu_at_scale_15() {
    if crate::util::gpu().is_none() || std::env::var("GMCL_HUGE").map_or(true, |v| v != "1") {
        return;
    }
    let g = rmat_graph(15, 16, 3);
    same_clustering(&g, &MclParams::default(), "rmat s15 ef16");
}

/// One iteration from `m` on the GPU (fused, `fused` set) against the CPU engine's: the same
/// entries of `M²` made, and the same chaos and next matrix: bitwise with inflation 2, else
/// within rounding (a few entries may fall either side of a bar they are within rounding of).
/// Returns the columns the GPU fused.
fn same_iteration<T: Scalar>(m: &Csr<T>, params: &MclParams, what: &str) -> u64 {
    let run = |engine| {
        let p = MclParams {
            engine,
            gpu: GpuTuning {
                poison: true,
                ..params.gpu.clone()
            },
            ..params.clone()
        };
        mcl::iterate(m, &p, params.inflation).unwrap()
    };
    let (cpu, cpu_it) = run(EngineKind::Cpu);
    let (gpu, gpu_it) = run(EngineKind::Gpu);
    assert_eq!(gpu_it.expanded, cpu_it.expanded, "{what}: entries of M²");
    assert_eq!(gpu_it.products, cpu_it.products, "{what}: products");
    if params.inflation == 2.0 {
        assert_eq!(
            gpu_it.chaos.to_bits(),
            cpu_it.chaos.to_bits(),
            "{what}: chaos"
        );
        assert_eq!(gpu.row_ptr(), cpu.row_ptr(), "{what}: row lengths");
        assert_eq!(gpu.col_idx(), cpu.col_idx(), "{what}: columns");
        let bits =
            |m: &Csr<T>| -> Vec<u64> { m.values().iter().map(|v| v.to_f64().to_bits()).collect() };
        assert_eq!(bits(&gpu), bits(&cpu), "{what}: values");
        return gpu_it.fused;
    }
    assert!(
        (gpu_it.chaos - cpu_it.chaos).abs() <= 1e-4 * cpu_it.chaos.max(1.0),
        "{what}: chaos gpu {} cpu {}",
        gpu_it.chaos,
        cpu_it.chaos
    );
    assert_eq!(
        (gpu.nrows(), gpu.ncols()),
        (cpu.nrows(), cpu.ncols()),
        "{what}"
    );
    let tol = if T::NAME == "f32" { 1e-4 } else { 1e-9 };
    let mut differing = 0;
    for r in 0..cpu.nrows() {
        let (gc, gv) = gpu.row(r);
        let (cc, cv) = cpu.row(r);
        assert!(
            gc.windows(2).all(|w| w[0] < w[1]),
            "{what}: row {r} unsorted"
        );
        if gc != cc {
            differing += 1;
            continue;
        }
        for (k, (g, c)) in gv.iter().zip(cv).enumerate() {
            let (g, c) = (g.to_f64(), c.to_f64());
            assert!(
                (g - c).abs() <= tol * c.abs().max(1e-3),
                "{what}: row {r} column {}: gpu {g} cpu {c}",
                cc[k]
            );
        }
    }
    assert!(
        differing <= cpu.nrows() / 1000 + 2,
        "{what}: {differing} of {} columns differ in structure",
        cpu.nrows()
    );
    gpu_it.fused
}

/// The start matrix of `g` after `iterations` CPU iterations.
fn iterated<T: Scalar>(g: &Csr<T>, iterations: usize) -> Csr<T> {
    let mut m = mcl::start_matrix(g, 1.0);
    for _ in 0..iterations {
        let cpu = MclParams {
            engine: EngineKind::Cpu,
            ..Default::default()
        };
        m = mcl::iterate(&m, &cpu, 2.0).unwrap().0;
    }
    m
}

#[test]
fn fused_dense_columns_match_the_cpu() {
    if crate::util::gpu().is_none() {
        return;
    }
    // R-MAT's second expansion has columns with more products than columns: every pruning
    // scheme, both precisions.
    let g = rmat_graph(11, 16, 5);
    let g64 = g.cast::<f64>();
    let (m32, m64) = (iterated(&g, 1), iterated(&g64, 1));
    for (i, prune) in schemes().into_iter().enumerate() {
        for inflation in [2.0, 1.4] {
            let p = MclParams {
                prune,
                inflation,
                ..Default::default()
            };
            let what = format!("rmat s11, scheme {i}, -I {inflation}");
            let fused = same_iteration(&m32, &p, &format!("{what}, f32"));
            assert!(fused > 0, "{what}: no column was fused");
            same_iteration(&m64, &p, &format!("{what}, f64"));
        }
    }
    // The batched path on the same input gives the same too.
    let p = MclParams {
        fused: false,
        ..Default::default()
    };
    assert_eq!(same_iteration(&m32, &p, "rmat s11, batched"), 0);
    // Small batches: the deferred rows of each batch go to their own places.
    let p = MclParams {
        batch_entries: Some(20_000),
        ..Default::default()
    };
    assert!(same_iteration(&m32, &p, "rmat s11, small batches") > 0);

    // A complete graph on 128 nodes: every column of M² is 128 equal values (sums of powers
    // of two, exact in any order), all kept as ties of the S-th largest, far more than the
    // pool's first guess of max(S, R) per column: the kernel runs again with a pool of the
    // size it found.
    let n = 128u32;
    let m = complete_graph_start(n);
    let p = MclParams {
        prune: KEEP_FEW,
        ..Default::default()
    };
    assert_eq!(
        same_iteration(&m, &p, "complete graph K128, ties"),
        n as u64
    );
    // In batches of 32 columns: the first batch's ties overfill the pool and its fused rows run
    // again; the later batches start from the pool the first one took.
    let batched = MclParams {
        batch_entries: Some(32 * n as u64),
        ..p.clone()
    };
    assert_eq!(
        same_iteration(&m, &batched, "complete graph K128 in batches, ties"),
        n as u64
    );
    let (next, it) = mcl::iterate(
        &m,
        &MclParams {
            engine: EngineKind::Gpu,
            gpu: poisoned(),
            ..p
        },
        2.0,
    )
    .unwrap();
    assert_eq!(it.kept, (n * n) as u64);
    assert!(next.values().iter().all(|&v| v == 1.0 / n as f32));
}

#[test]
fn columns_with_few_products_make_them_exactly_on_every_path() {
    if crate::util::gpu().is_none() {
        return;
    }
    // As mcl does, a column of M² with fewer products than a tenth of the columns makes them
    // exactly. At scale 18 a tenth of the nodes lies above the hash tables' τ, so columns of
    // M² with products between the two are the outer product's heavy rows that make them
    // exactly (in f64 there); from a tenth to an eighth they are heavy rows that round them.
    // With the dense rows from τ on, the same columns are made by the fused dense kernels.
    let g = rmat_graph(18, 16, 7);
    let m = mcl::start_matrix(&g, 1.0);
    let per_row = gmcl::spgemm::intermediate_products_per_row(&m, &m).unwrap();
    let n = m.ncols();
    let quanta = GpuTuning {
        quantized_sums: true,
        ..Default::default()
    };
    let tau = GpuEngine::open()
        .unwrap()
        .with_tuning(quanta)
        .params::<f32>(n as u64)
        .tau;
    let past_tables = |exact: bool| {
        per_row
            .iter()
            .filter(|&&p| {
                p > tau && p < n as u64 / 8 && gmcl::quantized::exact_products(p, n) == exact
            })
            .count()
    };
    let (exact, rounded) = (past_tables(true), past_tables(false));
    assert!(exact > 10 && rounded > 10, "{exact} {rounded} (τ {tau})");
    for (what, gpu) in [
        ("rmat s18, heavy rows", GpuTuning::default()),
        (
            "rmat s18, dense rows",
            GpuTuning {
                dense_from: Some(0),
                ..Default::default()
            },
        ),
    ] {
        let p = MclParams {
            gpu,
            ..Default::default()
        };
        same_iteration(&m, &p, what);
    }
}

#[test]
fn wide_dense_columns_match_the_cpu() {
    if crate::util::gpu().is_none() {
        return;
    }
    // Columns wider than the fused window are made a window at a time (kernels/mcl_dense.cu's
    // mcl_wide_prune): windows of 256 and 1024 of the graph's 2048 columns, and of 32 with
    // batches small enough that each holds a few rows.
    let g = rmat_graph(11, 16, 5);
    let g64 = g.cast::<f64>();
    let (m32, m64) = (iterated(&g, 1), iterated(&g64, 1));
    let tuned = |window: u32| GpuTuning {
        dense_window: Some(window),
        ..poisoned()
    };
    for window in [256, 1024] {
        for (i, prune) in schemes().into_iter().enumerate() {
            let p = MclParams {
                prune,
                gpu: tuned(window),
                ..Default::default()
            };
            let what = format!("rmat s11, windows of {window}, scheme {i}");
            let fused = same_iteration(&m32, &p, &format!("{what}, f32"));
            assert!(fused > 0, "{what}: no column was made in windows");
            same_iteration(&m64, &p, &format!("{what}, f64"));
        }
    }
    let p = MclParams {
        batch_entries: Some(20_000),
        gpu: tuned(32),
        ..Default::default()
    };
    assert!(same_iteration(&m32, &p, "rmat s11, windows of 32, small batches") > 0);

    // Ties that overfill the pool (every column of K128's M² is 128 equal values, all kept):
    // the wide kernel runs again with the pool it found it needs.
    let n = 128u32;
    let m = complete_graph_start(n);
    let p = MclParams {
        prune: KEEP_FEW,
        gpu: tuned(64),
        ..Default::default()
    };
    assert_eq!(
        same_iteration(&m, &p, "complete graph K128, windows of 64, ties"),
        n as u64
    );
}

#[test]
fn wide_columns_with_more_entries_than_shared_cursors_match_the_cpu() {
    if crate::util::gpu().is_none() {
        return;
    }
    // A hub joined to every node of a path: its column of M holds every node, more A entries
    // than the wide kernel keeps cursors for in shared memory (kernels/dense.cu's
    // DENSE_CURSORS, 4096), so the walks of the others keep their places in device memory
    // from one window to the next; every column is dense, and its B rows span all windows.
    let n = 6000u32;
    let edges = (1..n)
        .map(|v| (0, v))
        .chain((1..n - 1).map(|v| (v, v + 1)))
        .collect::<Vec<_>>();
    let el = gmcl::edges::EdgeList::square(n as usize, edges, None);
    let m = mcl::start_matrix(&mcl::graph_from_edges::<f32>(&el).unwrap().0, 1.0);
    assert_eq!(m.row(0).0.len(), n as usize);
    let m64 = m.cast::<f64>();
    for window in [1024, 4096] {
        let p = MclParams {
            gpu: GpuTuning {
                dense_window: Some(window),
                ..poisoned()
            },
            ..Default::default()
        };
        let what = format!("hub and path of {n} nodes, windows of {window}");
        assert_eq!(same_iteration(&m, &p, &format!("{what}, f32")), n as u64);
        same_iteration(&m64, &p, &format!("{what}, f64"));
    }
}

/// Pruning that keeps 10 entries a column (20 recovered), far fewer than the ties of a
/// complete graph's columns.
const KEEP_FEW: PruneParams = PruneParams {
    prune: 10000,
    select: 10,
    recover: 20,
    pct: 90,
};

/// MCL's start matrix of the complete graph on `n` nodes: every column of its square holds `n`
/// equal values (sums of powers of two, exact in any order).
fn complete_graph_start(n: u32) -> Csr<f32> {
    let edges = (0..n)
        .flat_map(|u| (u + 1..n).map(move |v| (u, v)))
        .collect::<Vec<_>>();
    let el = gmcl::edges::EdgeList::square(n as usize, edges, None);
    let k = mcl::graph_from_edges::<f32>(&el).unwrap().0;
    mcl::start_matrix(&k, 1.0)
}
