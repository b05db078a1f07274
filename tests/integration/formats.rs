//! Formats at the edges: what gmcl writes reads back as the format's owner reads it (Matrix
//! Market as SciPy does, clusterings as `clm` does), in the file's own numbering.

use crate::util::{fails, ok, s, with_stdin};
use std::path::Path;

/// A Matrix Market coordinate file read as SciPy reads it: the header's field and symmetry,
/// the shape, and the dense matrix (entries summed; `symmetric` mirrored off the diagonal).
fn read_mtx_dense(text: &str) -> (String, usize, usize, Vec<f64>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_owned();
    let mut lines = lines.filter(|l| !l.starts_with('%'));
    let size: Vec<usize> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let (m, n) = (size[0], size[1]);
    let symmetric = header.ends_with(" symmetric");
    let mut d = vec![0.0; m * n];
    let mut count = 0;
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (i, j): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        assert!(i >= 1 && j >= 1 && i <= m && j <= n, "{l}");
        if symmetric {
            assert!(i >= j, "a symmetric file holds the lower triangle: {l}");
        }
        let w: f64 = f.get(2).map_or(1.0, |w| w.parse().unwrap());
        d[(i - 1) * n + j - 1] += w;
        if symmetric && i != j {
            d[(j - 1) * n + i - 1] += w;
        }
        count += 1;
    }
    assert_eq!(count, size[2], "entry count of the size line");
    (header, m, n, d)
}

#[test]
fn symmetrize_is_a_plus_a_transpose_diagonal_doubled() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("s.wel");
    let edges = [
        (0usize, 0usize, 5.0f64),
        (0, 1, 1.0),
        (1, 2, 2.5),
        (2, 2, 1.5),
        (3, 1, -1.0),
        (2, 3, 4.0),
    ];
    let text: String = edges
        .iter()
        .map(|(u, v, w)| format!("{u} {v} {w}\n"))
        .collect();
    std::fs::write(&g, text).unwrap();
    // The reference: S = A + Aᵀ densely, then S².
    let n = 4;
    let mut sym = vec![0.0; n * n];
    for &(u, v, w) in &edges {
        sym[u * n + v] += w;
        sym[v * n + u] += w;
    }
    let mut want = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            for j in 0..n {
                want[i * n + j] += sym[i * n + k] * sym[k * n + j];
            }
        }
    }
    // The self loop of weight 5 counts twice: (10² + 1²), as SciPy's (A + A.T) @ (A + A.T).
    assert_eq!(want[0], 101.0);
    let c = dir.path().join("c.mtx");
    ok(&[
        "spgemm",
        s(&g),
        "--symmetrize",
        "--engine",
        "cpu",
        "-o",
        s(&c),
        "-q",
    ]);
    let (_, m, k, got) = read_mtx_dense(&std::fs::read_to_string(&c).unwrap());
    assert_eq!((m, k), (n, n));
    for (x, y) in got.iter().zip(&want) {
        assert!((x - y).abs() < 1e-12, "{got:?} != {want:?}");
    }
}

#[test]
fn generated_undirected_mtx_is_symmetric_and_weights_are_never_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (el, mtx, wmtx) = (
        dir.path().join("g.el"),
        dir.path().join("g.mtx"),
        dir.path().join("w.mtx"),
    );
    let gen = |out: &Path, extra: &[&str]| {
        let mut args = vec!["generate", "-n", "50", "-m", "200", "--seed", "3"];
        args.extend_from_slice(extra);
        args.extend(["--undirected", "-q", "-o", s(out)]);
        ok(&args);
    };
    gen(&el, &[]);
    gen(&mtx, &[]);
    gen(&wmtx, &["--weights"]);
    // The graph the edge list lists, both ways (a self loop once): what SciPy must read.
    let n = 50;
    let mut want = vec![0.0; n * n];
    for l in std::fs::read_to_string(&el).unwrap().lines() {
        let (u, v) = l.split_once(' ').unwrap();
        let (u, v): (usize, usize) = (u.parse().unwrap(), v.parse().unwrap());
        assert!(u <= v, "{l}");
        want[u * n + v] += 1.0;
        if u != v {
            want[v * n + u] += 1.0;
        }
    }
    let (header, rows, cols, got) = read_mtx_dense(&std::fs::read_to_string(&mtx).unwrap());
    assert_eq!(header, "%%MatrixMarket matrix coordinate pattern symmetric");
    assert_eq!((rows, cols), (n, n));
    assert_eq!(got, want);
    // Weighted: real symmetric, same structure; gmcl reads it back as 200 undirected edges.
    let (header, _, _, w) = read_mtx_dense(&std::fs::read_to_string(&wmtx).unwrap());
    assert_eq!(header, "%%MatrixMarket matrix coordinate real symmetric");
    assert!(w.iter().zip(&got).all(|(a, b)| (*a != 0.0) == (*b != 0.0)));
    let info = ok(&["info", s(&wmtx), "--json"]);
    let info: serde_json::Value = serde_json::from_str(info.trim()).unwrap();
    assert_eq!(
        (info["edges"].as_u64(), info["symmetric"].as_bool()),
        (Some(200), Some(true))
    );

    // Weights to .el would be lost: refused before any work, naming the way out.
    let lossy = dir.path().join("x.el");
    let err = fails(&[
        "generate",
        "-s",
        "4",
        "-e",
        "2",
        "--weights",
        "-o",
        s(&lossy),
    ]);
    assert!(err.contains("x.el") && err.contains(".wel"), "{err}");
    assert!(!lossy.exists());
    let wel = dir.path().join("x.wel");
    ok(&[
        "generate",
        "-s",
        "4",
        "-e",
        "2",
        "--weights",
        "-q",
        "-o",
        s(&wel),
    ]);
    let text = std::fs::read_to_string(&wel).unwrap();
    assert!(text.lines().all(|l| l.split(' ').count() == 3), "{text}");
}

#[test]
fn outputs_number_vertices_as_the_input_file_does() {
    let dir = tempfile::tempdir().unwrap();
    // The karate club from .el (ids from 0) and .mtx (indices from 1): the same clusters, each
    // in its file's own numbers.
    let from_el = ok(&["cluster", "graphs/karate.el", "--engine", "cpu", "-q"]);
    let from_mtx = ok(&["cluster", "graphs/karate.mtx", "--engine", "cpu", "-q"]);
    let shifted: String = from_el
        .lines()
        .map(|l| {
            let ids: Vec<String> = l
                .split('\t')
                .map(|v| (v.parse::<u32>().unwrap() + 1).to_string())
                .collect();
            ids.join("\t") + "\n"
        })
        .collect();
    assert_eq!(from_mtx, shifted);
    assert!(
        from_mtx.split(['\t', '\n']).any(|v| v == "34"),
        "{from_mtx}"
    );
    assert!(
        !from_mtx.split(['\t', '\n']).any(|v| v == "0"),
        "{from_mtx}"
    );
    // Per-vertex counts: node 34 of the .mtx (33 of the .el) is in 15 triangles.
    let (el_counts, mtx_counts) = (dir.path().join("el.tsv"), dir.path().join("mtx.tsv"));
    for (g, out) in [
        ("graphs/karate.el", &el_counts),
        ("graphs/karate.mtx", &mtx_counts),
    ] {
        ok(&["tricount", g, "--per-vertex", s(out), "-q"]);
    }
    let el_text = std::fs::read_to_string(&el_counts).unwrap();
    let mtx_text = std::fs::read_to_string(&mtx_counts).unwrap();
    assert!(
        el_text.starts_with("0\t18\n") && el_text.ends_with("\n33\t15\n"),
        "{el_text}"
    );
    assert!(
        mtx_text.starts_with("1\t18\n") && mtx_text.ends_with("\n34\t15\n"),
        "{mtx_text}"
    );
    // SNAP keeps its original ids.
    let snap = dir.path().join("g.txt");
    std::fs::write(&snap, "# a triangle\n10 20\n20 30\n30 10\n").unwrap();
    let snap_counts = dir.path().join("snap.tsv");
    ok(&["tricount", s(&snap), "--per-vertex", s(&snap_counts), "-q"]);
    assert_eq!(
        std::fs::read_to_string(&snap_counts).unwrap(),
        "10\t1\n20\t1\n30\t1\n"
    );
}

#[test]
fn spgemm_writes_the_format_its_output_names() {
    let dir = tempfile::tempdir().unwrap();
    let (mtx, wel) = (dir.path().join("c.mtx"), dir.path().join("c.WEL"));
    for out in [&mtx, &wel] {
        ok(&[
            "spgemm",
            "graphs/karate.el",
            "--engine",
            "cpu",
            "-o",
            s(out),
            "-q",
        ]);
    }
    let mtx_text = std::fs::read_to_string(&mtx).unwrap();
    assert!(mtx_text.starts_with("%%MatrixMarket matrix coordinate real general\n"));
    // The same entries, 1-based in Matrix Market and 0-based in .wel.
    let from_mtx: Vec<String> = mtx_text
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (i, j): (u32, u32) = (f[0].parse().unwrap(), f[1].parse().unwrap());
            format!("{} {} {}", i - 1, j - 1, f[2])
        })
        .collect();
    let wel_text = std::fs::read_to_string(&wel).unwrap();
    assert!(!from_mtx.is_empty());
    assert_eq!(wel_text.lines().collect::<Vec<_>>(), from_mtx);
    // .el holds no values, other names no format: refused before any work, no file left.
    for bad in ["c.el", "c.txt", "c"] {
        let out = dir.path().join(bad);
        let err = fails(&["spgemm", "graphs/karate.el", "-o", s(&out)]);
        assert!(
            err.contains(bad) && err.contains(".mtx") && err.contains(".wel"),
            "{err}"
        );
        assert!(!out.exists());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn karate_factions_are_ground_truth_that_dist_reads() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("k.clusters");
    ok(&[
        "cluster",
        "graphs/karate.el",
        "--engine",
        "cpu",
        "-q",
        "-o",
        s(&k),
    ]);
    let text = ok(&["dist", s(&k), "graphs/karate.factions", "--json"]);
    let d: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    // clm dist of mcl's karate clustering and the factions: d=4 d1=2 d2=2, 34 nodes.
    assert_eq!(d["nodes"], 34);
    assert_eq!(
        (d["clusters_a"].as_u64(), d["clusters_b"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(
        (d["split_join_a"].as_u64(), d["split_join_b"].as_u64()),
        (Some(2), Some(2))
    );
    // The factions: 17 members each, every member once.
    let factions = std::fs::read_to_string("graphs/karate.factions").unwrap();
    let mut all: Vec<u32> = Vec::new();
    for line in factions.lines() {
        let members: Vec<u32> = line.split('\t').map(|v| v.parse().unwrap()).collect();
        assert_eq!(members.len(), 17);
        all.extend(members);
    }
    all.sort_unstable();
    assert_eq!(all, (0..34).collect::<Vec<u32>>());
}

#[test]
fn dist_reads_labels_as_cluster_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    // Labels with a space and a non-breaking space: kept whole by cluster, so by dist too.
    let g = dir.path().join("g.abc");
    std::fs::write(
        &g,
        "Evelyn Jefferson\tLaura\u{a0}Mandeville\nLaura\u{a0}Mandeville\tTheresa\n\
         Evelyn Jefferson\tTheresa\nx\ty\n",
    )
    .unwrap();
    let c = dir.path().join("c.clusters");
    ok(&["cluster", s(&g), "--engine", "cpu", "-q", "-o", s(&c)]);
    let written = std::fs::read_to_string(&c).unwrap();
    assert!(written.contains("Laura\u{a0}Mandeville"), "{written}");
    let text = ok(&["dist", s(&c), s(&c), "--json"]);
    let d: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(
        (d["nodes"].as_u64(), d["split_join"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(d["clusters_a"], 2);
    // Split on spaces, the labels differ from the clustering's: named, with the reason.
    let spaced = dir.path().join("spaced.clusters");
    std::fs::write(&spaced, written.replace('\t', " ")).unwrap();
    let err = fails(&["dist", s(&c), s(&spaced)]);
    assert!(err.contains("separated by TABs"), "{err}");
    // An empty label is an error naming the line.
    let bad = dir.path().join("bad.clusters");
    std::fs::write(&bad, "a\tb\n\nc\t\n").unwrap();
    let err = fails(&["dist", s(&bad), s(&bad)]);
    assert!(err.contains("bad.clusters:3:"), "{err}");
}

#[test]
fn dash_is_the_standard_input_with_a_format() {
    let karate = std::fs::read("graphs/karate.el").unwrap();
    let lesmis = std::fs::read("graphs/lesmis.abc").unwrap();
    let karate_mtx = std::fs::read("graphs/karate.mtx").unwrap();
    let same = |args_file: &[&str], args_stdin: &[&str], input: &[u8]| {
        let want = ok(args_file);
        let got = with_stdin(args_stdin, input, &[]);
        assert!(
            got.status.success(),
            "{args_stdin:?}: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        // JSON reports name their input: '-' here, the file there; their wall times differ.
        let without_input = |s: String| {
            let mut s = s
                .replace("\"input\":\"-\"", "")
                .replace(&format!("\"input\":\"{}\"", args_file[1]), "");
            if let Some(at) = s.find(",\"wall_s\":{") {
                let end = at + s[at..].find('}').unwrap() + 1;
                s.replace_range(at..end, "");
            }
            s
        };
        assert_eq!(
            without_input(String::from_utf8(got.stdout).unwrap()),
            without_input(want),
            "{args_stdin:?}"
        );
    };
    same(
        &["info", "graphs/karate.el", "--json"],
        &["info", "-", "--format", "el", "--json"],
        &karate,
    );
    same(
        &["cluster", "graphs/lesmis.abc", "--engine", "cpu", "-q"],
        &["cluster", "-", "--format", "abc", "--engine", "cpu", "-q"],
        &lesmis,
    );
    same(
        &["tricount", "graphs/karate.mtx", "-q"],
        &["tricount", "-", "--format", "mtx", "-q"],
        &karate_mtx,
    );
    same(
        &[
            "spgemm",
            "graphs/karate.el",
            "--engine",
            "cpu",
            "-o",
            "-",
            "-q",
        ],
        &[
            "spgemm", "-", "--format", "el", "--engine", "cpu", "-o", "-", "-q",
        ],
        &karate,
    );
    // Without --format: refused, naming the option.
    let out = with_stdin(&["info", "-"], &karate, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>") && err.contains("--format"), "{err}");
    // A bad line is named as the standard input's.
    let out = with_stdin(&["info", "-", "--format", "el"], b"0 1\n1 x\n", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>:2:"), "{err}");
    // More input than the memory limit: refused, not held.
    let out = with_stdin(
        &["info", "-", "--format", "el"],
        &karate,
        &[("GMCL_MEMORY_LIMIT", "100")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("more than the 100 bytes"), "{err}");
    // spgemm cannot read the standard input twice.
    let err = fails(&["spgemm", "-", "-", "--format", "el"]);
    assert!(err.contains("both the standard input"), "{err}");
}

#[test]
fn mcl_native_clusterings_are_written_and_read_as_mcl_and_clm_do() {
    let dir = tempfile::tempdir().unwrap();
    // The karate club as mcl label input: mcl numbers labels in order of first appearance.
    let abc = dir.path().join("karate.abc");
    let edges = std::fs::read_to_string("graphs/karate.el").unwrap();
    std::fs::write(&abc, edges.replace(' ', "\t")).unwrap();
    let native = dir.path().join("k.native");
    ok(&[
        "cluster",
        s(&abc),
        "--engine",
        "cpu",
        "-q",
        "--output-format",
        "mcl",
        "-o",
        s(&native),
    ]);
    // What mcl 22-282 writes for the same graph (mcxload -abc --stream-mirror, then mcl; its
    // first line, a comment with mcl's command line, left out).
    let want = "(mclheader\nmcltype matrix\ndimensions 34x2\n)\n(mclmatrix\nbegin\n\
                0  2 8 16 17 18 19 20 21 23 24 25 26 27 28 29 30 31 32 33 $\n\
                1  0 1 3 4 5 6 7 9 10 11 12 13 14 15 22 $\n)\n";
    assert_eq!(std::fs::read_to_string(&native).unwrap(), want);

    // From an edge list the indices are the file's ids: dist finds no distance to the label
    // output, and info reports the same measures for both.
    let (labels, el_native) = (dir.path().join("k.clusters"), dir.path().join("k.mcl"));
    ok(&[
        "cluster",
        "graphs/karate.el",
        "--engine",
        "cpu",
        "-q",
        "-o",
        s(&labels),
    ]);
    let native_stdout = ok(&[
        "cluster",
        "graphs/karate.el",
        "--engine",
        "cpu",
        "-q",
        "--output-format",
        "mcl",
    ]);
    std::fs::write(&el_native, &native_stdout).unwrap();
    let d = ok(&["dist", s(&labels), s(&el_native), "--json"]);
    let d: serde_json::Value = serde_json::from_str(d.trim()).unwrap();
    assert_eq!(
        (d["nodes"].as_u64(), d["split_join"].as_u64()),
        (Some(34), Some(0))
    );
    let info = |c: &Path| -> serde_json::Value {
        let text = ok(&["info", "graphs/karate.el", "--clusters", s(c), "--json"]);
        serde_json::from_str(text.trim()).unwrap()
    };
    assert_eq!(info(&labels)["clustering"], info(&el_native)["clustering"]);
    // clm info of the factions on the karate club: eff=0.27652 mod=0.35823 mf=0.90924
    // af=0.48485.
    let f = info(Path::new("graphs/karate.factions"));
    let c = &f["clustering"];
    for (key, want) in [
        ("efficiency", 0.27652),
        ("modularity", 0.35823),
        ("mass_fraction", 0.90924),
        ("area_fraction", 0.48485),
    ] {
        let got = c[key].as_f64().unwrap();
        assert!((got - want).abs() < 5e-6, "{key}: {got} != {want}");
    }
    assert_eq!(
        (c["clusters"].as_u64(), f["vertices"].as_u64()),
        (Some(2), Some(34))
    );
    let text = ok(&[
        "info",
        "graphs/karate.el",
        "--clusters",
        "graphs/karate.factions",
    ]);
    assert!(text.contains("efficiency      0.27652"), "{text}");
    // From a pipe, which can be read once.
    let mut child = crate::util::cmd()
        .args(["info", "graphs/karate.el", "--clusters", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let factions = std::fs::read(crate::util::repo("graphs/karate.factions")).unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &factions).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("efficiency      0.27652"));
    // A clustering that misses a node, or names one the graph lacks, is refused.
    let partial = dir.path().join("partial.clusters");
    std::fs::write(&partial, "0\t1\n").unwrap();
    let err = fails(&["info", "graphs/karate.el", "--clusters", s(&partial)]);
    assert!(err.contains("in no cluster"), "{err}");
    let alien = dir.path().join("alien.clusters");
    std::fs::write(
        &alien,
        format!(
            "{}\tnobody\n",
            (0..34)
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\t")
        ),
    )
    .unwrap();
    let err = fails(&["info", "graphs/karate.el", "--clusters", s(&alien)]);
    assert!(err.contains("'nobody' is not a vertex"), "{err}");
}
