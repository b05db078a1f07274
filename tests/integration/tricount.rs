//! Triangle counting against independent counts: the graphs/ files (totals and per-vertex counts
//! from networkx), R-MAT and random graphs against a plain merge-based counter written here, and
//! every method, form and relabelling choice against each other.

use gmcl::generate::{self, RmatParams};
use gmcl::io;
use gmcl::spgemm::EngineKind;
use gmcl::tricount::{self, Form, Method, Options, Relabel, SimpleGraph, Triangles};
use gmcl::EdgeList;
use proptest::prelude::*;
use std::path::Path;

/// The reference: sorted, deduplicated neighbour sets, then for every `u < v < w` with all three
/// edges, one triangle (found by merging the neighbours of `u` and `v` above `v`). Returns the
/// total and the count of each vertex.
fn reference(el: &EdgeList) -> (u64, Vec<u64>) {
    let n = el.nrows.max(el.ncols);
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(u, v) in &el.edges {
        if u != v {
            adj[u as usize].push(v);
            adj[v as usize].push(u);
        }
    }
    for a in &mut adj {
        a.sort_unstable();
        a.dedup();
    }
    let mut per = vec![0u64; n];
    let mut total = 0;
    for u in 0..n {
        for &v in adj[u].iter().filter(|&&v| v as usize > u) {
            let (a, b) = (&adj[u], &adj[v as usize]);
            let (mut i, mut j) = (0, 0);
            while i < a.len() && j < b.len() {
                if a[i] < b[j] {
                    i += 1;
                } else if a[i] > b[j] {
                    j += 1;
                } else {
                    let w = a[i];
                    if w > v {
                        total += 1;
                        per[u] += 1;
                        per[v as usize] += 1;
                        per[w as usize] += 1;
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
    }
    (total, per)
}

/// Every way of counting, with per-vertex counts or without.
fn every_option() -> Vec<Options> {
    let mut out = Vec::new();
    for relabel in [Relabel::Auto, Relabel::Always, Relabel::Never] {
        for per_vertex in [false, true] {
            for method in [Method::Auto, Method::Merge] {
                out.push(Options {
                    engine: EngineKind::Cpu,
                    method,
                    relabel,
                    per_vertex,
                    ..Default::default()
                });
            }
            for form in [Form::Auto, Form::Sandia, Form::Dot, Form::DotUpper] {
                out.push(Options {
                    engine: EngineKind::Cpu,
                    method: Method::Spgemm,
                    relabel,
                    form,
                    per_vertex,
                    ..Default::default()
                });
            }
        }
    }
    out
}

/// Counts `el` every way and checks each against the reference.
fn check_all(el: &EdgeList) -> u64 {
    let (total, per) = reference(el);
    let g = SimpleGraph::from_edges(el.clone()).unwrap();
    for opts in every_option() {
        let t = tricount::count(&g, &opts).unwrap();
        assert_eq!(t.triangles, total, "{opts:?}");
        match &t.per_vertex {
            Some(pv) => {
                assert!(opts.per_vertex);
                assert_eq!(pv, &per, "{opts:?}");
                assert_eq!(pv.iter().sum::<u64>(), 3 * total);
            }
            None => assert!(!opts.per_vertex),
        }
    }
    total
}

fn load(path: &str) -> (SimpleGraph<'static>, gmcl::Labels) {
    let l = io::load(Path::new(path), None).unwrap();
    (SimpleGraph::from_edges(l.edges).unwrap(), l.labels)
}

fn per_vertex(g: &SimpleGraph, method: Method) -> Triangles {
    let opts = Options {
        engine: EngineKind::Cpu,
        method,
        per_vertex: true,
        ..Default::default()
    };
    tricount::count(g, &opts).unwrap()
}

/// networkx 3.6.1, `nx.triangles(G)` on `graphs/karate.el` read as an undirected graph.
const KARATE: [u64; 34] = [
    18, 12, 11, 10, 2, 3, 3, 6, 5, 0, 2, 0, 1, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1, 4,
    3, 3, 13, 15,
];

#[test]
fn karate_club_has_45_triangles() {
    for path in ["graphs/karate.el", "graphs/karate.mtx"] {
        let (g, _) = load(path);
        assert_eq!((g.vertices(), g.edges()), (34, 78));
        for opts in every_option() {
            let t = tricount::count(&g, &opts).unwrap();
            assert_eq!(t.triangles, 45, "{path} {opts:?}");
            if let Some(pv) = t.per_vertex {
                assert_eq!(pv, KARATE, "{path} {opts:?}");
            }
        }
    }
}

/// networkx 3.6.1, `nx.triangles(G)` on `graphs/lesmis.abc` read as an undirected graph with
/// the labels as node names (the same as on `nx.les_miserables_graph()`: 467 triangles).
const LESMIS: [(&str, u64); 77] = [
    ("Anzelma", 3),
    ("Babet", 36),
    ("Bahorel", 57),
    ("Bamatabois", 18),
    ("BaronessT", 1),
    ("Blacheville", 21),
    ("Bossuet", 60),
    ("Boulatruelle", 0),
    ("Brevet", 15),
    ("Brujon", 19),
    ("Champmathieu", 15),
    ("Champtercier", 0),
    ("Chenildieu", 15),
    ("Child1", 1),
    ("Child2", 1),
    ("Claquesous", 32),
    ("Cochepaille", 15),
    ("Combeferre", 51),
    ("Cosette", 21),
    ("Count", 0),
    ("CountessDeLo", 0),
    ("Courfeyrac", 59),
    ("Cravatte", 0),
    ("Dahlia", 21),
    ("Enjolras", 64),
    ("Eponine", 25),
    ("Fameuil", 21),
    ("Fantine", 33),
    ("Fauchelevent", 2),
    ("Favourite", 21),
    ("Feuilly", 51),
    ("Gavroche", 82),
    ("Geborand", 0),
    ("Gervais", 0),
    ("Gillenormand", 10),
    ("Grantaire", 42),
    ("Gribier", 0),
    ("Gueulemer", 36),
    ("Isabeau", 0),
    ("Javert", 44),
    ("Joly", 57),
    ("Jondrette", 0),
    ("Judge", 15),
    ("Labarre", 0),
    ("Listolier", 21),
    ("LtGillenormand", 6),
    ("Mabeuf", 38),
    ("Magnon", 0),
    ("Marguerite", 1),
    ("Marius", 57),
    ("MlleBaptistine", 3),
    ("MlleGillenormand", 9),
    ("MlleVaubois", 0),
    ("MmeBurgon", 0),
    ("MmeDeR", 0),
    ("MmeHucheloup", 21),
    ("MmeMagloire", 3),
    ("MmePontmercy", 0),
    ("MmeThenardier", 27),
    ("Montparnasse", 30),
    ("MotherInnocent", 1),
    ("MotherPlutarch", 0),
    ("Myriel", 3),
    ("Napoleon", 0),
    ("OldMan", 0),
    ("Perpetue", 1),
    ("Pontmercy", 1),
    ("Prouvaire", 36),
    ("Scaufflaire", 0),
    ("Simplice", 4),
    ("Thenardier", 49),
    ("Tholomyes", 22),
    ("Toussaint", 3),
    ("Valjean", 76),
    ("Woman1", 1),
    ("Woman2", 3),
    ("Zephine", 21),
];

#[test]
fn les_miserables_has_467_triangles_per_label() {
    let (g, labels) = load("graphs/lesmis.abc");
    assert_eq!((g.vertices(), g.edges()), (77, 254));
    for method in [Method::Merge, Method::Spgemm] {
        let t = per_vertex(&g, method);
        assert_eq!(t.triangles, 467);
        let pv = t.per_vertex.unwrap();
        let mut got: Vec<(String, u64)> = pv
            .iter()
            .enumerate()
            .map(|(i, &c)| (labels.label(i as u32), c))
            .collect();
        got.sort();
        let want: Vec<(String, u64)> = LESMIS.iter().map(|&(s, c)| (s.to_string(), c)).collect();
        assert_eq!(got, want, "{method:?}");
    }
}

#[test]
fn rmat_graphs_match_the_reference() {
    for (scale, ef, seed) in [(6, 8, 1), (8, 16, 2), (10, 8, 3), (11, 16, 4)] {
        let mut p = RmatParams::new(scale, ef << scale);
        p.seed = seed;
        let el = generate::generate(&p).unwrap();
        let total = check_all(&el);
        assert!(
            total > 0,
            "scale {scale}: an R-MAT graph this dense has triangles"
        );
    }
}

#[test]
fn skewed_rmat_is_relabelled_and_counts_the_same() {
    let mut p = RmatParams::new(13, 16 << 13);
    p.undirected = true;
    let el = generate::generate(&p).unwrap();
    let (total, per) = reference(&el);
    let g = SimpleGraph::from_edges(el).unwrap();
    assert!(tricount::worth_relabelling(&g));
    for method in [Method::Merge, Method::Spgemm] {
        for per_vertex in [false, true] {
            let opts = Options {
                engine: EngineKind::Cpu,
                method,
                per_vertex,
                ..Default::default()
            };
            let t = tricount::count(&g, &opts).unwrap();
            assert!(t.relabelled);
            assert_eq!(t.triangles, total, "{opts:?}");
            if per_vertex {
                assert_eq!(t.per_vertex.as_ref(), Some(&per), "{opts:?}");
            }
        }
    }
}

#[test]
fn the_fewest_products_form_is_chosen() {
    let mut p = RmatParams::new(12, 16 << 12);
    p.seed = 9;
    let g = SimpleGraph::from_edges(generate::generate(&p).unwrap()).unwrap();
    let run = |form| {
        tricount::count(
            &g,
            &Options {
                engine: EngineKind::Cpu,
                method: Method::Spgemm,
                form,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let auto = run(Form::Auto);
    let products: Vec<u64> = [Form::Sandia, Form::Dot, Form::DotUpper]
        .into_iter()
        .map(|f| {
            let t = run(f);
            assert_eq!(t.triangles, auto.triangles);
            assert_eq!(t.forms, vec![f]);
            t.intermediate_products
        })
        .collect();
    assert_eq!(
        auto.intermediate_products,
        *products.iter().min().unwrap(),
        "{products:?}"
    );
}

#[test]
fn dense_graphs_count_binomials() {
    // K_n has C(n, 3) triangles and each vertex C(n - 1, 2); listed in both directions, with
    // self loops, so the simple graph has to be made.
    for n in [3u32, 4, 10, 40] {
        let mut edges = Vec::new();
        for a in 0..n {
            for b in 0..n {
                edges.push((a, b));
            }
        }
        let el = EdgeList::square(n as usize, edges, None);
        let n = n as u64;
        assert_eq!(check_all(&el), n * (n - 1) * (n - 2) / 6);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_graphs_match_the_reference(
        n in 1usize..48,
        raw in proptest::collection::vec((0u32..48, 0u32..48), 0..300),
    ) {
        let edges: Vec<(u32, u32)> = raw
            .into_iter()
            .map(|(u, v)| (u % n as u32, v % n as u32))
            .collect();
        check_all(&EdgeList::square(n, edges, None));
    }
}
