//! SciPy's sparse `.npz` files: matrices SciPy wrote (tests/golden/README.md) read as the same
//! matrix as their Matrix Market twin by every command, and what gmcl writes read back.

use crate::util::{gmcl, ok, repo, s};
use std::path::Path;

const SCIPY: [&str; 5] = [
    "karate_csr.npz",
    "karate_csr_compressed.npz",
    "karate_csc.npz",
    "karate_coo.npz",
    "karate_f32_int64.npz",
];

/// A² of `input` on the CPU engine in `precision`, written to `out` as its extension says;
/// returns the file's bytes.
fn square(input: &Path, out: &Path, precision: &str) -> Vec<u8> {
    ok(&[
        "spgemm",
        s(input),
        "--engine",
        "cpu",
        "--precision",
        precision,
        "-o",
        s(out),
        "-q",
    ]);
    std::fs::read(out).unwrap()
}

#[test]
fn scipys_files_are_the_same_matrix_as_their_matrix_market_twin() {
    let dir = tempfile::tempdir().unwrap();
    let twin = repo("tests/golden/karate_weighted.mtx");
    let square = |input: &Path, out: &Path| square(input, out, "f64");
    let want = square(&twin, &dir.path().join("want.mtx"));
    // The Matrix Market twin numbers its vertices from 1, .npz from 0.
    let clusters: String = ok(&["cluster", s(&twin), "--engine", "cpu", "-q"])
        .lines()
        .map(|l| {
            let ids: Vec<String> = l
                .split('\t')
                .map(|v| (v.parse::<u32>().unwrap() - 1).to_string())
                .collect();
            ids.join("\t") + "\n"
        })
        .collect();
    let triangles = ok(&["tricount", s(&twin), "--engine", "cpu", "-q"]);
    assert_eq!(triangles.trim(), "45");
    for name in SCIPY {
        let input = repo(&format!("tests/golden/{name}"));
        assert_eq!(square(&input, &dir.path().join("c.mtx")), want, "{name}");
        let c = ok(&["cluster", s(&input), "--engine", "cpu", "-q"]);
        assert_eq!(c, clusters, "{name}");
        let t = ok(&["tricount", s(&input), "--engine", "cpu", "-q"]);
        assert_eq!(t, triangles, "{name}");
    }
}

#[test]
fn what_gmcl_writes_reads_back_as_the_same_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let twin = repo("tests/golden/karate_weighted.mtx");
    let (c_npz, c_mtx) = (dir.path().join("c.npz"), dir.path().join("c.mtx"));
    for precision in ["f32", "f64"] {
        for out in [&c_npz, &c_mtx] {
            square(&twin, out, precision);
        }
        assert_eq!(&std::fs::read(&c_npz).unwrap()[..4], b"PK\x03\x04");
        // C read back from each file and squared again: the same bytes.
        let again = |input: &Path, out: &str| square(input, &dir.path().join(out), precision);
        assert_eq!(
            again(&c_npz, "a.mtx"),
            again(&c_mtx, "b.mtx"),
            "{precision}"
        );
    }
    let info = ok(&["info", s(&c_npz)]);
    assert!(info.contains("npz"), "{info}");
}

#[test]
fn damaged_or_foreign_npz_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(repo("tests/golden/karate_csr.npz")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 3] = [
        ("text.npz", b"0 1\n1 2\n".to_vec(), "not a ZIP"),
        ("cut.npz", good[..good.len() / 2].to_vec(), "ZIP"),
        (
            "flipped.npz",
            {
                let mut b = good.clone();
                b[200] ^= 0x40;
                b
            },
            "CRC",
        ),
    ];
    for (name, bytes, says) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = gmcl(&["tricount", s(&p)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn convert_moves_a_graph_between_formats() {
    let dir = tempfile::tempdir().unwrap();
    let twin = repo("tests/golden/karate_weighted.mtx");
    let square = |input: &Path, out: &str| square(input, &dir.path().join(out), "f64");
    let want = square(&twin, "want.mtx");
    // Matrix Market -> npz -> weighted edge list -> Matrix Market: the same matrix each time.
    let (npz, wel, mtx) = (
        dir.path().join("k.npz"),
        dir.path().join("k.wel"),
        dir.path().join("k.mtx"),
    );
    ok(&["convert", s(&twin), s(&npz), "-q"]);
    assert_eq!(square(&npz, "a.mtx"), want);
    ok(&["convert", s(&npz), s(&wel), "-q"]);
    assert_eq!(square(&wel, "b.mtx"), want);
    ok(&["convert", s(&wel), s(&mtx), "-q"]);
    assert_eq!(square(&mtx, "c.mtx"), want);
    // An edge list keeps its counts through npz.
    let el = dir.path().join("k.el");
    ok(&["convert", s(&repo("graphs/karate.el")), s(&npz), "-q"]);
    ok(&["convert", s(&npz), s(&el), "-q"]);
    let info = |p: &Path| ok(&["info", s(p), "--json"]);
    let (a, b) = (info(&repo("graphs/karate.el")), info(&el));
    let edges = |j: &str| serde_json::from_str::<serde_json::Value>(j).unwrap()["edges"].clone();
    assert_eq!(edges(&a), edges(&b));
    // The report counts the entries the archive holds: repeated ones summed.
    let twice = dir.path().join("twice.wel");
    std::fs::write(&twice, "0 1 1\n0 1 2\n1 2 1\n").unwrap();
    let v = crate::util::json(&["convert", s(&twice), s(&npz), "--json"]);
    assert_eq!(v["entries"], 2, "{v}");
    let v = crate::util::json(&["convert", s(&twice), s(&wel), "--json"]);
    assert_eq!(v["entries"], 3, "{v}");
    // Names become ids, and the user is told.
    let out = gmcl(&["convert", s(&repo("graphs/lesmis.abc")), s(&wel)]);
    assert!(out.status.success());
    // Weights other than 1 do not fit an .el: refused, as generate refuses them.
    let out = gmcl(&["convert", s(&repo("graphs/lesmis.abc")), s(&el)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("names its vertices"), "{err}");
    // What convert cannot write, and writing over the input, are refused before any work.
    for (from, to) in [
        (twin.clone(), dir.path().join("x.abc")),
        (npz.clone(), npz.clone()),
    ] {
        let out = gmcl(&["convert", s(&from), s(&to)]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{:?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn generate_writes_the_matrix_its_mtx_twin_holds() {
    let dir = tempfile::tempdir().unwrap();
    for undirected in [false, true] {
        let write = |name: &str| {
            let p = dir.path().join(name);
            let mut args = vec![
                "generate",
                "-s",
                "9",
                "-e",
                "8",
                "--seed",
                "4",
                "-o",
                s(&p),
                "-q",
            ];
            if undirected {
                args.push("--undirected");
            }
            ok(&args);
            p
        };
        let (npz, mtx) = (write("g.npz"), write("g.mtx"));
        // The same matrix: its square, and its triangles.
        let square = |input: &Path, out: &str| square(input, &dir.path().join(out), "f64");
        assert_eq!(square(&npz, "a.mtx"), square(&mtx, "b.mtx"), "{undirected}");
        let t = |p: &Path| ok(&["tricount", s(p), "--engine", "cpu", "-q"]);
        assert_eq!(t(&npz), t(&mtx));
    }
}

/// A graph with repeated edges, self loops and edges given in one or both directions, as a
/// weighted edge list and as a `.npz` archive of the same entries (repeats kept): every command
/// that builds its matrix straight from the archive's rows gives what it gives for the text.
#[test]
fn an_archive_with_repeats_and_loops_is_the_same_graph_as_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = gmcl::generate::rng::SplitMix64::new(22);
    let n = 40u32;
    let mut edges = Vec::new();
    let mut weights = Vec::new();
    for _ in 0..300 {
        let (u, v) = (
            (rng.next_u64() % n as u64) as u32,
            (rng.next_u64() % n as u64) as u32,
        );
        edges.push((u, v));
        weights.push((rng.next_u64() % 7) as f64 * 0.5 + 0.25);
    }
    // The largest id appears, so the text's shape (largest id + 1) is the archive's.
    edges.push((n - 1, 0));
    weights.push(1.5);
    let text: String = edges
        .iter()
        .zip(&weights)
        .map(|(&(u, v), w)| format!("{u} {v} {w}\n"))
        .collect();
    let (wel, npz) = (dir.path().join("g.wel"), dir.path().join("g.npz"));
    std::fs::write(&wel, text).unwrap();
    let el = gmcl::EdgeList::square(n as usize, edges, Some(weights));
    let keep = gmcl::BuildOptions {
        duplicates: gmcl::Duplicates::Keep,
        ..Default::default()
    };
    let m = gmcl::Csr::<f64>::from_edges(&el, &keep).unwrap();
    assert!(m.nnz() > 300 - 40, "repeats are kept in the archive");
    std::fs::write(&npz, gmcl::io::npz::write(Vec::new(), &m).unwrap()).unwrap();
    let run = |args: &[&str], out: &str| {
        let out = dir.path().join(out);
        let mut all = args.to_vec();
        all.extend(["-o", s(&out), "-q"]);
        ok(&all);
        std::fs::read(&out).unwrap()
    };
    for input in [&wel, &npz] {
        assert!(ok(&["info", s(input)]).contains("duplicate"));
    }
    for sym in [None, Some("--symmetrize")] {
        let product = |input: &Path| {
            let mut args = vec!["spgemm", s(input), "--engine", "cpu", "--precision", "f64"];
            args.extend(sym);
            run(&args, "c.mtx")
        };
        assert_eq!(product(&npz), product(&wel), "{sym:?}");
    }
    let triangles = |input: &Path| {
        let counts = dir.path().join("per-vertex.tsv");
        let total = ok(&[
            "tricount",
            s(input),
            "--engine",
            "cpu",
            "--per-vertex",
            s(&counts),
            "-q",
        ]);
        (total, std::fs::read(&counts).unwrap())
    };
    let want = triangles(&wel);
    assert_ne!(want.0.trim(), "0");
    assert_eq!(triangles(&npz), want);
}

/// `cluster` and `info` build their graphs straight from a CSR archive's arrays: the cluster
/// files are byte-identical, and the figures the same, as from the edge list of the same entries
/// (repeats, self loops, edges in one or both directions, ids no edge touches).
#[test]
fn cluster_and_info_read_an_archive_as_its_edge_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = gmcl::generate::rng::SplitMix64::new(23);
    // Ids 48..59 are touched by no edge but the last, which makes the vertex count 60.
    let n = 60u32;
    let mut edges = vec![(n - 1, 3)];
    let mut weights = vec![2.5];
    for _ in 0..400 {
        let (u, v) = (rng.next_u64() % 48, rng.next_u64() % 48);
        edges.push((u as u32, v as u32));
        weights.push((rng.next_u64() % 9) as f64 * 0.375 + 0.125);
    }
    let keep = gmcl::BuildOptions {
        duplicates: gmcl::Duplicates::Keep,
        ..Default::default()
    };
    for weighted in [true, false] {
        let (text, npz) = if weighted {
            (dir.path().join("g.wel"), dir.path().join("gw.npz"))
        } else {
            (dir.path().join("g.el"), dir.path().join("g.npz"))
        };
        let lines: String = edges
            .iter()
            .zip(&weights)
            .map(|(&(u, v), w)| match weighted {
                true => format!("{u} {v} {w}\n"),
                false => format!("{u} {v}\n"),
            })
            .collect();
        std::fs::write(&text, lines).unwrap();
        let el =
            gmcl::EdgeList::square(n as usize, edges.clone(), weighted.then(|| weights.clone()));
        let m = gmcl::Csr::<f64>::from_edges(&el, &keep).unwrap();
        assert_eq!(m.nnz(), edges.len(), "every entry kept");
        std::fs::write(&npz, gmcl::io::npz::write(Vec::new(), &m).unwrap()).unwrap();
        for extra in [
            &[][..],
            &["--output-format", "mcl"],
            &["--tf", "mul(3)", "--precision", "f64"],
        ] {
            let clusters = |input: &Path| {
                let out = dir.path().join("c.out");
                let mut args = vec!["cluster", s(input), "--engine", "cpu", "-q", "-o", s(&out)];
                args.extend(extra);
                ok(&args);
                std::fs::read(&out).unwrap()
            };
            let want = clusters(&text);
            assert!(want.len() > 20, "{}", String::from_utf8_lossy(&want));
            assert_eq!(clusters(&npz), want, "weighted {weighted}, {extra:?}");
        }
        let figures = |input: &Path| {
            let mut j: serde_json::Value =
                serde_json::from_str(&ok(&["info", s(input), "--json"])).unwrap();
            let o = j.as_object_mut().unwrap();
            o.remove("wall_s");
            o.remove("parameters");
            j
        };
        let want = figures(&text);
        assert_eq!(want["vertices"], 60, "{want}");
        assert_ne!(want["duplicate_edges"], 0, "{want}");
        assert_ne!(want["self_loops"], 0, "{want}");
        assert_eq!(figures(&npz), want, "weighted {weighted}");
    }
}

/// Archives of a directed graph (one-way entries) and of an undirected one, large enough for
/// `auto` to leave their symmetry to the count: every engine counts what the CPU engine counts
/// after the load's own check, and on a GPU only the simple graph's rows are checked there.
#[test]
fn tricount_checks_an_archive_where_it_counts() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = crate::util::gpu().is_some();
    for undirected in [false, true] {
        let mut opts = vec!["-s", "12", "-e", "16", "--seed", "3"];
        if undirected {
            opts.push("--undirected");
        }
        let npz = crate::util::generated(dir.path().join("g.npz"), &opts);
        assert!(std::fs::metadata(&npz).unwrap().len() > 1 << 18);
        let count = |engine: &str| {
            let per_vertex = dir.path().join(format!("{engine}.tsv"));
            let args = ["tricount", s(&npz), "--engine", engine, "--json", "-q"];
            let json = ok(&[&args[..], &["--per-vertex", s(&per_vertex)]].concat());
            let report: serde_json::Value = serde_json::from_str(&json).unwrap();
            (report, std::fs::read(&per_vertex).unwrap())
        };
        let (want, want_file) = count("cpu");
        assert!(want["triangles"].as_u64().unwrap() > 0);
        let mut engines = vec!["auto"];
        if gpu {
            engines.push("gpu");
        }
        for engine in engines {
            let (got, file) = count(engine);
            for field in ["triangles", "vertices", "edges"] {
                assert_eq!(got[field], want[field], "{engine} {undirected} {field}");
            }
            assert_eq!(file, want_file, "{engine} {undirected}");
            let on_gpu = got["method"] == "fused";
            assert_eq!(got.get("check_seconds").is_some(), on_gpu && undirected);
        }
    }
}
