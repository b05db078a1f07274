//! The fused GPU triangle kernel against the CPU merge kernel (itself checked against an
//! independent counter in tests/tricount.rs): totals and per-vertex counts on empty, tiny,
//! complete, one-dense-row, R-MAT and random graphs, through the light kernel and the heavy
//! kernel with its hash tables in shared or in device memory, on sorted and unsorted rows.
//! Device buffers are poisoned before the kernels write them.
//!
//! Without a usable GPU these tests say so and pass, unless `GMCL_REQUIRE_GPU=1` (set on the GPU
//! machine), where a missing GPU fails them.

use crate::util::gpu;
use gmcl::generate::{self, RmatParams};
use gmcl::spgemm::EngineKind;
use gmcl::tricount::gpu::{self as triangles, TriangleTuning};
use gmcl::tricount::{self, Method, Options, SimpleGraph};
use gmcl::EdgeList;
use proptest::prelude::*;

/// The CPU merge kernel's total and per-vertex counts.
fn cpu_counts(g: &SimpleGraph) -> (u64, Vec<u64>) {
    let opts = Options {
        engine: EngineKind::Cpu,
        method: Method::Merge,
        per_vertex: true,
        ..Default::default()
    };
    let t = tricount::count(g, &opts).unwrap();
    (t.triangles, t.per_vertex.unwrap())
}

/// Checks the fused kernel on `el` (with and without per-vertex counts, with the given cap on
/// the heavy rows' hash tables in shared memory) against the CPU; returns the total.
fn check(el: &EdgeList, heavy_shared_slots: Option<u32>) -> u64 {
    let Some(gpu) = gpu() else { return 0 };
    let g = SimpleGraph::from_edges(el.clone()).unwrap();
    let (total, per) = cpu_counts(&g);
    let tuning = TriangleTuning {
        poison: true,
        heavy_shared_slots,
        ..TriangleTuning::default()
    };
    for per_vertex in [false, true] {
        let d = triangles::count(&gpu, g.row_ptr(), g.col_idx(), per_vertex, &tuning).unwrap();
        assert_eq!(d.triangles, total, "per_vertex {per_vertex}");
        match d.per_vertex {
            Some(pv) => {
                assert!(per_vertex);
                assert_eq!(pv, per);
            }
            None => assert!(!per_vertex),
        }
    }
    total
}

fn complete(n: u32) -> EdgeList {
    let edges = (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .collect();
    EdgeList::square(n as usize, edges, None)
}

fn rmat(scale: u32, ef: u64, seed: u64, undirected: bool) -> EdgeList {
    let mut p = RmatParams::new(scale, ef << scale);
    p.seed = seed;
    p.undirected = undirected;
    generate::generate(&p).unwrap()
}

#[test]
fn empty_and_tiny_graphs() {
    assert_eq!(check(&EdgeList::square(0, vec![], None), None), 0);
    assert_eq!(check(&EdgeList::square(7, vec![], None), None), 0);
    assert_eq!(
        check(&EdgeList::square(3, vec![(0, 1), (1, 2)], None), None),
        0
    );
    assert_eq!(
        check(
            &EdgeList::square(3, vec![(0, 1), (1, 2), (2, 0)], None),
            None
        ),
        gpu().map_or(0, |_| 1)
    );
    // A 4-cycle with one chord: two triangles; a path of 1000 vertices: none.
    let c4 = vec![(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)];
    assert_eq!(
        check(&EdgeList::square(4, c4, None), None),
        gpu().map_or(0, |_| 2)
    );
    let path = (0..999).map(|i| (i, i + 1)).collect();
    assert_eq!(check(&EdgeList::square(1000, path, None), None), 0);
}

#[test]
fn complete_graphs_through_every_kernel_path() {
    let Some(_) = gpu() else { return };
    // K_40: light rows only. K_600: rows of 513 to 599 entries go to the heavy kernel, in
    // shared memory, or with a cap of 64 searched in device memory; K_1000 with a cap of 700:
    // both heavy paths in one launch. Rows of U past 256 entries are sorted a block a row, and
    // K_1100's rows past 1024 entries are not sorted at all.
    for (n, cap) in [
        (40u64, None),
        (600, None),
        (600, Some(64)),
        (1000, Some(700)),
        (1100, None),
    ] {
        let t = check(&complete(n as u32), cap);
        assert_eq!(t, n * (n - 1) * (n - 2) / 6, "K_{n}");
    }
}

#[test]
fn one_dense_row() {
    // A hub joined to every vertex of a sparse random graph: its row of the input holds all of
    // them (oriented by degree, it keeps none).
    let n = 20_000u32;
    let mut s = 12345u64;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) as u32 % (n - 1) + 1
    };
    let mut edges: Vec<(u32, u32)> = (1..n).map(|v| (0, v)).collect();
    edges.extend((0..60_000).map(|_| (next(), next())));
    let el = EdgeList::square(n as usize, edges, None);
    let t = check(&el, None);
    assert!(gpu().is_none() || t > 0);
}

#[test]
fn rmat_graphs_match_the_cpu() {
    for (scale, ef, seed, undirected) in [
        (8, 16, 1, true),
        (10, 8, 2, false),
        (12, 16, 3, true),
        (14, 16, 4, true),
        (16, 16, 5, true),
    ] {
        let t = check(&rmat(scale, ef, seed, undirected), None);
        assert!(gpu().is_none() || t > 0, "scale {scale}");
    }
}

#[test]
fn the_cli_path_picks_the_fused_kernel_on_the_gpu() {
    let Some(_) = gpu() else { return };
    let g = SimpleGraph::from_edges(rmat(12, 16, 9, true)).unwrap();
    let (total, per) = cpu_counts(&g);
    // `auto` takes the GPU where the graph is large enough for it to pay on these threads.
    let auto_on_gpu =
        gmcl::engine::Work::TriangleEdges(g.edges()).gpu_pays(rayon::current_num_threads());
    for engine in [EngineKind::Auto, EngineKind::Gpu] {
        let opts = Options {
            engine,
            per_vertex: true,
            ..Default::default()
        };
        let t = tricount::count(&g, &opts).unwrap();
        let fused = engine == EngineKind::Gpu || auto_on_gpu;
        assert_eq!(t.method == Method::Fused, fused);
        assert_eq!(t.triangles, total);
        assert_eq!(t.per_vertex.unwrap(), per);
        assert!(!fused || (t.device_seconds > 0.0 && t.device_seconds <= t.seconds));
    }
}

#[test]
fn fused_on_the_cpu_engine_is_refused() {
    let g = SimpleGraph::from_edges(complete(5)).unwrap();
    let opts = Options {
        engine: EngineKind::Cpu,
        method: Method::Fused,
        ..Default::default()
    };
    let e = tricount::count(&g, &opts).unwrap_err();
    assert!(e.to_string().contains("GPU engine"), "{e}");
}

#[test]
#[ignore = "large: symmetric R-MAT scale 20 (about 16 million edges)"]
fn huge_rmat_matches_the_cpu() {
    let t = check(&rmat(20, 16, 11, true), None);
    assert!(gpu().is_none() || t > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn random_graphs_match_the_cpu(
        n in 1usize..200,
        raw in proptest::collection::vec((0u32..200, 0u32..200), 0..2000),
    ) {
        let edges: Vec<(u32, u32)> = raw
            .into_iter()
            .map(|(u, v)| (u % n as u32, v % n as u32))
            .collect();
        check(&EdgeList::square(n, edges, None), None);
    }
}
