//! Tests of the generator and its writer. Files are parsed back here with `str::split`, not
//! with the crate's loaders.

use super::*;
use std::collections::HashSet;

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

fn params(scale: u32, edges: u64) -> RmatParams {
    RmatParams::new(scale, edges)
}

/// A spread of option combinations, each big enough to span several blocks.
fn variants() -> Vec<RmatParams> {
    let mut v = Vec::new();
    v.push(params(14, 300_000));
    let mut p = params(12, 200_000);
    p.no_duplicates = true;
    p.undirected = true;
    p.no_self_loops = true;
    p.weights = true;
    v.push(p);
    let mut p = params(0, 150_000);
    p.vertices = Some(3000);
    p.sorted = true;
    p.weights = true;
    v.push(p);
    let mut p = params(0, 100_000);
    p.vertices = Some(5000);
    p.no_duplicates = true;
    p.sorted = true;
    p.seed = 99;
    v.push(p);
    v
}

#[test]
fn same_output_for_any_thread_count_and_run() {
    for p in variants() {
        let one = in_pool(1, || generate(&p)).unwrap();
        let two = in_pool(2, || generate(&p)).unwrap();
        let three = in_pool(3, || generate(&p)).unwrap();
        let again = generate(&p).unwrap();
        assert_eq!(one.len() as u64, p.edges, "{p:?}");
        assert!(one == two && one == three && one == again, "{p:?}");

        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.wel"), dir.path().join("b.wel"));
        in_pool(1, || write_edges(&a, &one, &|_| {})).unwrap();
        in_pool(2, || write_edges(&b, &one, &|_| {})).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    }
}

#[test]
fn different_seeds_differ() {
    let mut p = params(16, 10_000);
    p.weights = true;
    let a = generate(&p).unwrap();
    p.seed = 2;
    let b = generate(&p).unwrap();
    assert_ne!(a.edges, b.edges);
    assert_ne!(a.weights, b.weights);
    let same = a.edges.iter().zip(&b.edges).filter(|(x, y)| x == y).count();
    assert!(same < 200, "{same} equal positions");
}

fn check_distinct(p: &RmatParams) -> EdgeList {
    let el = generate(p).unwrap();
    assert_eq!(el.len() as u64, p.edges, "{p:?}");
    let set: HashSet<(u32, u32)> = el.edges.iter().copied().collect();
    assert_eq!(set.len(), el.len(), "duplicates in {p:?}");
    let n = p.n_vertices();
    for &(u, v) in &el.edges {
        assert!((u as u64) < n && (v as u64) < n);
        if p.no_self_loops {
            assert_ne!(u, v);
        }
        if p.undirected {
            assert!(u <= v);
        }
    }
    el
}

#[test]
fn exact_count_without_duplicates() {
    let mut p = params(10, 200_000);
    p.no_duplicates = true;
    check_distinct(&p);
    p.undirected = true;
    p.no_self_loops = true;
    check_distinct(&p);
    p.vertices = Some(777);
    p.edges = 50_000;
    check_distinct(&p);
    // Every possible edge of a tiny graph.
    let mut p = params(2, 16);
    p.no_duplicates = true;
    check_distinct(&p);
    p.undirected = true;
    p.no_self_loops = true;
    p.edges = 6;
    check_distinct(&p);
    p.sorted = true;
    let el = check_distinct(&p);
    assert_eq!(el.edges, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]);
}

#[test]
fn no_duplicates_keeps_the_first_distinct_edges_of_the_stream() {
    for (undirected, no_self_loops, vertices) in [
        (false, false, None),
        (true, true, None),
        (false, true, Some(700)),
    ] {
        let mut p = params(10, 40_000);
        p.undirected = undirected;
        p.no_self_loops = no_self_loops;
        p.vertices = vertices;
        p.weights = true;
        let mut plain = p.clone();
        plain.edges = 400_000;
        let stream = generate(&plain).unwrap();
        let ws = stream.weights.as_ref().unwrap();
        let mut seen = HashSet::new();
        let (mut e, mut w) = (Vec::new(), Vec::new());
        for (i, &x) in stream.edges.iter().enumerate() {
            if e.len() < p.edges as usize && seen.insert(x) {
                e.push(x);
                w.push(ws[i]);
            }
        }
        assert_eq!(e.len() as u64, p.edges);
        p.no_duplicates = true;
        let got = generate(&p).unwrap();
        assert!(got.edges == e);
        assert!(got.weights == Some(w));
        // Fewer edges: a prefix of the same list.
        p.edges = 10_000;
        let fewer = generate(&p).unwrap();
        assert!(fewer.edges[..] == got.edges[..10_000]);
    }
}

#[test]
fn duplicates_allowed_take_a_prefix_of_the_stream() {
    let mut p = params(12, 100_000);
    p.vertices = Some(3333);
    p.no_self_loops = true;
    let big = generate(&p).unwrap();
    p.edges = 70_001;
    let small = generate(&p).unwrap();
    assert!(small.edges[..] == big.edges[..70_001]);
}

#[test]
fn no_self_loops_when_asked() {
    let mut p = params(4, 50_000);
    let el = generate(&p).unwrap();
    assert!(el.edges.iter().any(|&(u, v)| u == v));
    p.no_self_loops = true;
    let el = generate(&p).unwrap();
    assert_eq!(el.len(), 50_000);
    assert!(el.edges.iter().all(|&(u, v)| u != v));
}

#[test]
fn undirected_edges_are_ordered() {
    let mut p = params(8, 50_000);
    p.undirected = true;
    let el = generate(&p).unwrap();
    assert_eq!(el.len(), 50_000);
    assert!(el.edges.iter().all(|&(u, v)| u <= v));
    assert!(el.edges.iter().any(|&(u, v)| u < v));
}

#[test]
fn ids_stay_below_any_vertex_count() {
    for n in [1u64, 2, 3, 5, 1000, 4097, (1 << 20) + 1] {
        let mut p = params(30, 20_000);
        p.vertices = Some(n);
        assert_eq!(p.n_vertices(), n);
        let el = generate(&p).unwrap();
        assert_eq!(
            (el.nrows, el.ncols, el.len()),
            (n as usize, n as usize, 20_000)
        );
        assert!(el
            .edges
            .iter()
            .all(|&(u, v)| (u as u64) < n && (v as u64) < n));
        if n >= 1000 {
            let top = el.edges.iter().filter(|&&(u, _)| u as u64 >= n / 2).count();
            assert!(top > 0, "n {n}: no ids in the upper half");
        }
    }
}

#[test]
fn sorted_output_is_the_stream_sorted() {
    let mut p = params(11, 120_000);
    p.weights = true;
    let plain = generate(&p).unwrap();
    p.sorted = true;
    let sorted = generate(&p).unwrap();
    assert!(sorted.edges.windows(2).all(|w| w[0] <= w[1]));
    let mut expect: Vec<((u32, u32), f64)> = plain
        .edges
        .iter()
        .copied()
        .zip(plain.weights.unwrap())
        .collect();
    expect.sort_by_key(|x| x.0); // stable: equal edges stay in stream order
    let (e, w): (Vec<_>, Vec<_>) = expect.into_iter().unzip();
    assert!(sorted.edges == e);
    assert!(sorted.weights == Some(w));
}

#[test]
fn weights_are_in_range_and_spread() {
    let mut p = params(12, 100_000);
    p.weights = true;
    p.no_duplicates = true;
    let el = generate(&p).unwrap();
    let w = el.weights.as_ref().unwrap();
    assert_eq!(w.len(), el.len());
    assert!(w
        .iter()
        .all(|&x| (0.5..1.5).contains(&x) && (x as f32) as f64 == x));
    let mean = w.iter().sum::<f64>() / w.len() as f64;
    assert!((mean - 1.0).abs() < 0.01, "{mean}");
    let low = w.iter().filter(|&&x| x < 0.75).count() as f64 / w.len() as f64;
    assert!((low - 0.25).abs() < 0.01, "{low}");
    p.weights = false;
    assert!(generate(&p).unwrap().weights.is_none());
    // Turning weights on does not change the edges.
    assert!(generate(&p).unwrap().edges == el.edges);
}

#[test]
fn quadrant_fractions_follow_a_b_c_d() {
    for (a, b, c) in [(0.57, 0.19, 0.19), (0.45, 0.22, 0.22), (0.1, 0.5, 0.3)] {
        let mut p = params(1, 400_000);
        (p.a, p.b, p.c) = (a, b, c);
        let el = generate(&p).unwrap();
        let mut cnt = [0usize; 4];
        for &(u, v) in &el.edges {
            cnt[(u * 2 + v) as usize] += 1;
        }
        let d = 1.0 - a - b - c;
        for (i, want) in [a, b, c, d].into_iter().enumerate() {
            let got = cnt[i] as f64 / el.len() as f64;
            assert!((got - want).abs() < 0.005, "quadrant {i}: {got} vs {want}");
        }
    }
    // Every level follows the same law: the source's top bit is 1 with probability c + d.
    let el = generate(&params(20, 200_000)).unwrap();
    let high = el.edges.iter().filter(|&&(u, _)| u >= 1 << 19).count() as f64 / 200_000.0;
    assert!((high - 0.24).abs() < 0.01, "{high}");
    let low = el.edges.iter().filter(|&&(u, _)| u & 1 == 1).count() as f64 / 200_000.0;
    assert!((low - 0.24).abs() < 0.01, "{low}");
}

#[test]
fn matches_the_papers_rmat_density() {
    // gMAGNUS's scale-15 A with 4 entries per row: 131,072 draws, duplicates summed, gave
    // 125,562 nonzeros (shared/anchors, the same generator family).
    let el = generate(&params(15, 4 << 15)).unwrap();
    let distinct: HashSet<(u32, u32)> = el.edges.iter().copied().collect();
    let got = distinct.len() as f64;
    assert!((got / 125_562.0 - 1.0).abs() < 0.05, "{got}");
}

#[test]
fn invalid_parameters_are_errors() {
    let msg = |p: &RmatParams| match generate(p) {
        Err(Error::Invalid(m)) => m,
        other => panic!("{p:?} gave {other:?}"),
    };
    let base = params(10, 100);
    for (a, b, c) in [
        (1.2, 0.0, 0.0),
        (-0.1, 0.5, 0.5),
        (f64::NAN, 0.1, 0.1),
        (0.5, 0.3, 0.3),
    ] {
        let mut p = base.clone();
        (p.a, p.b, p.c) = (a, b, c);
        let m = msg(&p);
        assert!(m.contains("R-MAT probabilit"), "{m}");
    }
    let mut p = base.clone();
    p.vertices = Some(0);
    assert!(msg(&p).contains("at least 1"));
    p.vertices = Some(1 << 32);
    assert!(
        msg(&p).contains("at most 4294967295 vertices"),
        "{}",
        msg(&p)
    );
    p.vertices = Some(MAX_VERTICES);
    assert!(p.validate().is_ok());
    let mut p = base.clone();
    p.scale_log2 = 32;
    assert!(msg(&p).contains("scale is at most 31"), "{}", msg(&p));
    let mut p = params(0, 1);
    p.no_self_loops = true;
    assert!(msg(&p).contains("self loop"));
    // a + b + c = 1 exactly is fine (d = 0).
    let mut p = base.clone();
    (p.a, p.b, p.c) = (0.6, 0.2, 0.2);
    let el = generate(&p).unwrap();
    assert!(el.edges.iter().all(|&(u, v)| u & v == 0));
}

#[test]
fn too_many_distinct_edges_is_an_error() {
    let mut p = params(2, 17);
    p.no_duplicates = true;
    let Err(Error::Invalid(m)) = generate(&p) else {
        panic!("17 distinct edges on 4 vertices")
    };
    assert!(m.contains("16"), "{m}");
    p.undirected = true;
    p.edges = 11;
    assert!(generate(&p).is_err());
    p.edges = 10;
    assert_eq!(generate(&p).unwrap().len(), 10);
    p.no_self_loops = true;
    p.edges = 7;
    assert!(generate(&p).is_err());
    p.vertices = Some(3);
    p.edges = 3;
    assert_eq!(generate(&p).unwrap().len(), 3);
    p.edges = 4;
    assert!(generate(&p).is_err());
}

#[test]
fn unreachable_edges_are_an_error_not_a_hang() {
    // d = 1: every draw is (7, 7), a self loop.
    let mut p = params(3, 10);
    (p.a, p.b, p.c) = (0.0, 0.0, 0.0);
    p.no_self_loops = true;
    assert!(matches!(generate(&p), Err(Error::Invalid(_))));
    // a = 1: only (0, 0) is ever drawn, so there is one distinct edge.
    let mut p = params(3, 2);
    (p.a, p.b, p.c) = (1.0, 0.0, 0.0);
    p.no_duplicates = true;
    let Err(Error::Invalid(m)) = generate(&p) else {
        panic!("two distinct edges from a = 1")
    };
    assert!(m.contains("only 1"), "{m}");
}

#[test]
fn empty_and_single_vertex_graphs() {
    let el = generate(&params(10, 0)).unwrap();
    assert!(el.is_empty() && el.nrows == 1024);
    let el = generate(&params(0, 5)).unwrap();
    assert_eq!(el.edges, vec![(0, 0); 5]);
    let mut p = params(0, 1);
    p.no_duplicates = true;
    assert_eq!(generate(&p).unwrap().edges, vec![(0, 0)]);
}

/// Parses the lines after any header: whitespace-separated fields.
fn fields(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('%'))
        .map(|l| l.split(' ').collect())
        .collect()
}

#[test]
fn written_files_parse_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = params(9, 1000);
    p.vertices = Some(300);
    p.weights = true;
    let el = generate(&p).unwrap();
    let w = el.weights.as_ref().unwrap();
    let last = std::cell::Cell::new(0u64);

    // Weights are not dropped silently: .el holds none.
    let path = dir.path().join("g.el");
    let Err(Error::Invalid(m)) = write_edges(&path, &el, &|_| {}) else {
        panic!("weights written to .el")
    };
    assert!(m.contains(".wel"), "{m}");
    assert!(!path.exists());
    let mut unweighted = el.clone();
    unweighted.weights = None;
    write_edges(&path, &unweighted, &|k| last.set(k)).unwrap();
    assert_eq!(last.get(), 1000);
    let t = std::fs::read_to_string(&path).unwrap();
    let rows = fields(&t);
    assert_eq!(rows.len(), 1000);
    for (r, &(u, v)) in rows.iter().zip(&el.edges) {
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].parse::<u32>().unwrap(), r[1].parse().unwrap()),
            (u, v)
        );
    }

    let path = dir.path().join("g.WEL");
    write_edges(&path, &el, &|_| {}).unwrap();
    let t = std::fs::read_to_string(&path).unwrap();
    for (i, r) in fields(&t).iter().enumerate() {
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].parse::<u32>().unwrap(), el.edges[i].0);
        assert_eq!(r[1].parse::<u32>().unwrap(), el.edges[i].1);
        assert_eq!(r[2].parse::<f32>().unwrap() as f64, w[i]);
    }

    let path = dir.path().join("g.mtx");
    write_edges(&path, &el, &|_| {}).unwrap();
    let t = std::fs::read_to_string(&path).unwrap();
    assert!(t.starts_with("%%MatrixMarket matrix coordinate real general\n"));
    let rows = fields(&t);
    assert_eq!(rows[0], ["300", "300", "1000"]);
    for (i, r) in rows[1..].iter().enumerate() {
        assert_eq!(r[0].parse::<u32>().unwrap(), el.edges[i].0 + 1);
        assert_eq!(r[1].parse::<u32>().unwrap(), el.edges[i].1 + 1);
        assert_eq!(r[2].parse::<f64>().unwrap() as f32 as f64, w[i]);
    }
    assert_eq!(rows.len(), 1001);

    let mut plain = el.clone();
    plain.weights = None;
    write_edges(&path, &plain, &|_| {}).unwrap();
    let t = std::fs::read_to_string(&path).unwrap();
    assert!(t.starts_with("%%MatrixMarket matrix coordinate pattern general\n"));
    let rows = fields(&t);
    assert_eq!(rows[0], ["300", "300", "1000"]);
    assert!(rows[1..].iter().all(|r| r.len() == 2));
    let path = dir.path().join("u.wel");
    write_edges(&path, &plain, &|_| {}).unwrap();
    let t = std::fs::read_to_string(&path).unwrap();
    assert!(fields(&t).iter().all(|r| r.len() == 3 && r[2] == "1"));

    for bad in ["g.txt", "g", "g.el.gz"] {
        let path = dir.path().join(bad);
        let Err(Error::Invalid(m)) = write_edges(&path, &el, &|_| {}) else {
            panic!("{bad} accepted")
        };
        assert!(m.contains(".el") && m.contains(".mtx"), "{m}");
        assert!(!path.exists());
    }
}

#[test]
fn undirected_mtx_is_symmetric_lower_triangle() {
    let dir = tempfile::tempdir().unwrap();
    let el = EdgeList::square(
        4,
        vec![(0, 3), (1, 2), (2, 2), (0, 1)],
        Some(vec![0.5, 1.0, 1.25, 2.0]),
    );
    let path = dir.path().join("u.mtx");
    write_edges_as(&path, &el, Symmetry::Symmetric, &|_| {}).unwrap();
    let t = std::fs::read_to_string(&path).unwrap();
    assert!(
        t.starts_with("%%MatrixMarket matrix coordinate real symmetric\n"),
        "{t}"
    );
    assert!(
        t.ends_with("4 4 4\n4 1 0.5\n3 2 1.0\n3 3 1.25\n2 1 2.0\n"),
        "{t}"
    );
    let back = crate::io::parse_bytes(t.as_bytes(), crate::io::Format::Mtx, &path).unwrap();
    assert!(back.symmetric_storage);
    assert_eq!(
        back.edges.len(),
        7,
        "each off-diagonal edge both ways, the loop once"
    );
    // Edge lists have no symmetry header: lines as given.
    let mut plain = el.clone();
    plain.weights = None;
    let path = dir.path().join("u.el");
    write_edges_as(&path, &plain, Symmetry::Symmetric, &|_| {}).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "0 3\n1 2\n2 2\n0 1\n"
    );
}
