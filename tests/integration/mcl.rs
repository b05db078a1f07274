//! MCL against van Dongen's `mcl` 22-282: the partitions of the golden files in tests/golden
//! (made by mcl, commands in tests/golden/README.md), through the library and the binary.

use crate::util::gmcl;
use gmcl::mcl::{self, MclParams, PruneParams};
use gmcl::spgemm::EngineKind;
use std::collections::BTreeSet;
use std::path::Path;

type Partition = BTreeSet<BTreeSet<String>>;

fn partition_of_text(text: &str) -> Partition {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

fn golden(name: &str) -> Partition {
    let p = Path::new("tests/golden").join(name);
    partition_of_text(&std::fs::read_to_string(&p).expect("golden file"))
}

/// Clusters a graph file through the library; the clusters as labels.
fn cluster_file(path: &str, params: &MclParams) -> (Vec<Vec<String>>, mcl::MclResult) {
    let loaded = gmcl::io::load(Path::new(path), None).unwrap();
    let (g, ids) = mcl::graph_from_edges::<f32>(&loaded.edges).unwrap();
    let r = mcl::cluster(&g, params, &mut |_| {}).unwrap();
    let labels = r
        .clusters
        .iter()
        .map(|c| {
            c.iter()
                .map(|&v| loaded.labels.label(ids[v as usize]))
                .collect()
        })
        .collect();
    (labels, r)
}

fn as_partition(c: &[Vec<String>]) -> Partition {
    c.iter().map(|c| c.iter().cloned().collect()).collect()
}

fn with(inflation: f64, scheme: u32) -> MclParams {
    MclParams {
        inflation,
        prune: PruneParams::scheme(scheme).unwrap(),
        engine: EngineKind::Cpu,
        ..Default::default()
    }
}

#[test]
fn same_partitions_as_mcl() {
    let cases = [
        ("graphs/karate.el", 2.0, 6, "karate.mcl"),
        ("graphs/karate.el", 3.0, 6, "karate.I3.mcl"),
        ("graphs/lesmis.abc", 2.0, 6, "lesmis.mcl"),
        ("graphs/lesmis.abc", 1.4, 1, "lesmis.I14.s1.mcl"),
        ("tests/golden/two_cliques.el", 2.0, 6, "two_cliques.mcl"),
        ("tests/golden/planted.el", 2.0, 6, "planted.mcl"),
        ("tests/golden/planted.el", 4.0, 6, "planted.I4.mcl"),
        // Inflated powers far below 2^-52 (summed at the column's own scale).
        ("graphs/karate.el", 20.0, 6, "karate.I20.mcl"),
        ("graphs/lesmis.abc", 30.0, 6, "lesmis.I30.mcl"),
    ];
    for (graph, inflation, scheme, gold) in cases {
        let (clusters, r) = cluster_file(graph, &with(inflation, scheme));
        assert!(r.converged, "{graph}");
        assert_eq!(
            as_partition(&clusters),
            golden(gold),
            "{graph} -I {inflation}"
        );
        // Largest first.
        assert!(clusters.windows(2).all(|w| w[0].len() >= w[1].len()));
    }
}

#[test]
fn label_input_gives_mcls_file_byte_for_byte() {
    // For .abc input nodes are numbered by first appearance, as in mcl: same order everywhere.
    for (inflation, scheme, gold) in [
        (2.0, 6, "lesmis.mcl"),
        (1.4, 1, "lesmis.I14.s1.mcl"),
        (30.0, 6, "lesmis.I30.mcl"),
    ] {
        let (clusters, _) = cluster_file("graphs/lesmis.abc", &with(inflation, scheme));
        let text: String = clusters.iter().map(|c| c.join("\t") + "\n").collect();
        let want = std::fs::read_to_string(Path::new("tests/golden").join(gold)).unwrap();
        assert_eq!(text, want);
    }
}

#[test]
fn ties_decided_by_mcls_exact_products_give_mcls_file_byte_for_byte() {
    // mcl makes the products of a column with few of them exactly (in double); there the
    // S-th value of a column ties with the next one only when its products are rounded.
    for (graph, options, gold) in [
        (
            "select_tie.abc",
            &["-S", "5", "-R", "5"][..],
            "select_tie.S5R5.mcl",
        ),
        ("resource5.abc", &["-resource", "5"][..], "resource5.r5.mcl"),
    ] {
        let path = format!("tests/golden/{graph}");
        let mut args = vec!["cluster", &path, "--engine", "cpu", "-q"];
        args.extend_from_slice(options);
        let (stdout, _) = ok(&args);
        let want = std::fs::read_to_string(Path::new("tests/golden").join(gold)).unwrap();
        assert_eq!(stdout, want, "{graph} {options:?}");
    }
}

#[test]
fn tab_separated_labels_with_spaces_give_mcls_file_byte_for_byte() {
    // Labels with spaces, `#` and a leading `%`, TAB-separated: the binary's clusters file
    // equals mcl's (before, the first line was refused as five space-separated columns).
    let out = gmcl(&[
        "cluster",
        "tests/golden/karate_names.abc",
        "--engine",
        "cpu",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read(Path::new("tests/golden/karate_names.mcl")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&want)
    );
}

#[test]
fn karate_iterations_and_measures_match_mcl() {
    let cpu = MclParams {
        engine: EngineKind::Cpu,
        ..Default::default()
    };
    let (_, r) = cluster_file("graphs/karate.el", &cpu);
    // mcl's log shows 11 iterations for karate.
    assert_eq!(r.iterations, 11);
    let loaded = gmcl::io::load(Path::new("graphs/karate.el"), None).unwrap();
    let (g, _) = mcl::graph_from_edges::<f32>(&loaded.edges).unwrap();
    let info = mcl::measures::cluster_info(&g, &r.clusters);
    // clm info: eff=0.27808 mod=0.35996 mf=0.93006 ... ncl=2 max=19 sgl=0
    assert!((info.efficiency - 0.27808).abs() < 5e-6, "{info:?}");
    assert!((info.modularity - 0.35996).abs() < 5e-6, "{info:?}");
    assert!((info.mass_fraction - 0.93006).abs() < 5e-6, "{info:?}");
    assert_eq!((info.clusters, info.largest, info.singletons), (2, 19, 0));
}

// ---- the binary ----

fn ok(args: &[&str]) -> (String, String) {
    let out = gmcl(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "gmcl {args:?} failed: {err}");
    (String::from_utf8(out.stdout).unwrap(), err)
}

fn fails(args: &[&str], code: i32) -> String {
    let out = gmcl(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "gmcl {args:?}: {err}");
    assert!(!err.contains("panicked"), "gmcl {args:?} panicked: {err}");
    err
}

#[test]
fn cli_cluster_writes_clusters_json_and_progress() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.clusters");
    let json = dir.path().join("k.json");
    let (stdout, stderr) = ok(&[
        "cluster",
        "graphs/karate.el",
        "--engine",
        "cpu",
        "-o",
        out.to_str().unwrap(),
        "--json-file",
        json.to_str().unwrap(),
    ]);
    assert!(stdout.is_empty());
    // One progress line per iteration.
    assert_eq!(stderr.matches("gmcl: iteration ").count(), 11, "{stderr}");
    assert!(stderr.contains("chaos"), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(partition_of_text(&text), golden("karate.mcl"));
    assert!(text.starts_with("2\t8\t9\t"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in [
        "clusters",
        "iterations",
        "seconds",
        "nodes",
        "singletons",
        "largest",
        "efficiency",
        "modularity",
        "mass_fraction",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
    assert_eq!(v["clusters"], 2);
    assert_eq!(v["iterations"], 11);
    assert_eq!(v["nodes"], 34);
    assert_eq!(v["largest"], 19);
    // Each iteration's figures, in order, as its progress line gives them; no ranks in one
    // process.
    let figures = v["iteration_figures"].as_array().unwrap();
    assert_eq!(figures.len(), 11, "{v}");
    for (i, f) in figures.iter().enumerate() {
        assert_eq!(f["index"], i + 1, "{f}");
        let n = |k: &str| f[k].as_u64().unwrap();
        assert!(
            n("products") >= n("expanded") && n("expanded") >= n("kept"),
            "{f}"
        );
        assert!(n("kept") >= 34, "{f}");
        assert!(f["seconds"].as_f64().unwrap() >= f["expand_seconds"].as_f64().unwrap());
        assert!(
            f.get("ranks").is_none() && f.get("exchanged_bytes").is_none(),
            "{f}"
        );
    }
    // The first iteration squares karate with its loops: Σ over columns of its rows' lengths.
    assert_eq!(figures[0]["products"], 1558);
    // --quiet hides the progress; the clusters go to stdout.
    let (stdout, stderr) = ok(&["cluster", "-q", "graphs/lesmis.abc", "--engine", "cpu"]);
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(
        stdout,
        std::fs::read_to_string("tests/golden/lesmis.mcl").unwrap()
    );
}

#[test]
fn cli_options_change_the_clustering() {
    let (stdout, _) = ok(&["cluster", "-q", "graphs/karate.el", "-I", "3"]);
    assert_eq!(partition_of_text(&stdout), golden("karate.I3.mcl"));
    let (stdout, _) = ok(&[
        "cluster",
        "-q",
        "graphs/lesmis.abc",
        "-I",
        "1.4",
        "--scheme",
        "1",
    ]);
    assert_eq!(partition_of_text(&stdout), golden("lesmis.I14.s1.mcl"));
    // Explicit -P -S -R --pct equal to scheme 1 give the same; -L 1 stops early.
    let (stdout, _) = ok(&[
        "cluster",
        "-q",
        "graphs/lesmis.abc",
        "-I",
        "1.4",
        "-P",
        "3000",
        "-S",
        "400",
        "-R",
        "500",
        "--pct",
        "90",
    ]);
    assert_eq!(partition_of_text(&stdout), golden("lesmis.I14.s1.mcl"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.clusters");
    let (_, stderr) = ok(&[
        "cluster",
        "graphs/karate.el",
        "-L",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        stderr.contains("stopped after 1 iteration (-L)"),
        "{stderr}"
    );
    for mode in ["keep", "cut", "split"] {
        let (stdout, _) = ok(&["cluster", "-q", "graphs/karate.el", "--overlap", mode]);
        assert_eq!(partition_of_text(&stdout), golden("karate.mcl"));
    }
}

#[test]
fn cli_bad_options_and_input() {
    let e = fails(&["cluster", "graphs/karate.el", "--scheme", "8"], 2);
    assert!(e.contains("unknown scheme 8"), "{e}");
    let e = fails(&["cluster", "graphs/karate.el", "-I", "0"], 2);
    assert!(e.contains("inflation 0 is out of range"), "{e}");
    // 0 in mcl's 32-bit float, which then falls back to its default: refused alike.
    let e = fails(&["cluster", "graphs/karate.el", "-I", "1e-300"], 2);
    assert!(e.contains("where it is 0"), "{e}");
    let e = fails(&["cluster", "graphs/karate.el", "-I", "31"], 2);
    assert!(e.contains("out of range"), "{e}");
    let e = fails(&["cluster", "graphs/karate.el", "-I", "-2"], 2);
    assert!(e.contains("out of range"), "{e}");
    let e = fails(&["cluster", "graphs/karate.el", "--pct", "100"], 2);
    assert!(e.contains("--pct 100"), "{e}");
    let e = fails(&["cluster", "graphs/karate.el", "-c", "-1"], 2);
    assert!(e.contains("loop gain"), "{e}");
    fails(&["cluster", "graphs/karate.el", "--overlap", "merge"], 2);
    fails(&["cluster", "graphs/karate.el", "-I", "two"], 2);
    let e = fails(&["cluster", "no/such/file.el"], 2);
    assert!(e.contains("no/such/file.el"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.el");
    std::fs::write(&bad, "0 1\n1 x\n").unwrap();
    let e = fails(&["cluster", bad.to_str().unwrap()], 2);
    assert!(e.contains(":2:"), "{e}");
    let neg = dir.path().join("neg.wel");
    std::fs::write(&neg, "0 1 -2\n").unwrap();
    let e = fails(&["cluster", neg.to_str().unwrap()], 2);
    assert!(e.contains("not negative"), "{e}");
    if gmcl::gpu::unavailable_reason().is_some() {
        let e = fails(&["cluster", "graphs/karate.el", "--engine", "gpu"], 3);
        assert!(e.contains("GPU"), "{e}");
    } else {
        // With a GPU, the GPU engine gives mcl's clustering too.
        let out = crate::util::cmd()
            .args(["cluster", "graphs/karate.el", "--engine", "gpu", "-q"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(got.lines().count(), 2, "{got}");
    }
    // A failed run leaves no output file.
    let out = dir.path().join("o.clusters");
    fails(
        &[
            "cluster",
            "graphs/karate.el",
            "-I",
            "0",
            "-o",
            out.to_str().unwrap(),
        ],
        2,
    );
    assert!(!out.exists());
}

#[test]
fn cli_dist_compares_clusterings() {
    // clm dist of mcl's -I 2 and -I 3 karate clusterings: d=4 d1=4 d2=0, vi 0.354,
    // arand 0.77453.
    let (text, _) = ok(&[
        "dist",
        "tests/golden/karate.mcl",
        "tests/golden/karate.I3.mcl",
    ]);
    assert!(
        text.contains("split/join distance       4 (4 + 0)"),
        "{text}"
    );
    assert!(text.contains("adjusted Rand index       0.77453"), "{text}");
    let (json, _) = ok(&[
        "dist",
        "tests/golden/karate.mcl",
        "tests/golden/karate.I3.mcl",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["split_join"], 4);
    assert_eq!(v["nodes"], 34);
    assert!((v["vi_a"].as_f64().unwrap() - 0.354).abs() < 5e-4);
    let (same, _) = ok(&["dist", "tests/golden/lesmis.mcl", "tests/golden/lesmis.mcl"]);
    assert!(
        same.contains("split/join distance       0 (0 + 0)"),
        "{same}"
    );
    let e = fails(
        &["dist", "tests/golden/karate.mcl", "tests/golden/lesmis.mcl"],
        2,
    );
    assert!(e.contains("both must cluster the same nodes"), "{e}");
    fails(&["dist", "tests/golden/karate.mcl", "no/such.clusters"], 2);
    // `-` is the standard input, for one of the two (it can be read once), named in errors.
    let i3 = std::fs::read("tests/golden/karate.I3.mcl").unwrap();
    let piped = crate::util::with_stdin(&["dist", "tests/golden/karate.mcl", "-"], &i3, &[]);
    assert!(piped.status.success());
    assert_eq!(String::from_utf8_lossy(&piped.stdout), text);
    let twice = crate::util::with_stdin(&["dist", "-", "-"], &i3, &[]);
    assert_eq!(twice.status.code(), Some(2));
    let e = String::from_utf8_lossy(&twice.stderr);
    assert!(
        e.contains("only one input can be the standard input"),
        "{e}"
    );
    let bad = crate::util::with_stdin(&["dist", "-", "tests/golden/karate.mcl"], b"a\t\tb\n", &[]);
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(e.contains("<stdin>:1: an empty label"), "{e}");
    // So is `info --clusters -`, unless the graph is read from there too.
    let mcl = std::fs::read("tests/golden/karate.mcl").unwrap();
    let info = crate::util::with_stdin(&["info", "graphs/karate.el", "--clusters", "-"], &mcl, &[]);
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    assert!(String::from_utf8_lossy(&info.stdout).contains("clusters "));
    let both = crate::util::with_stdin(&["info", "-", "--clusters", "-"], &mcl, &[]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn a_hub_under_a_memory_limit_expands_in_batches_or_stops_cleanly() {
    // A star: every column of M² holds the hub's whole column, so M² is dense. Before, the
    // CPU expansion was bounded by entries only; a star of 10^6 leaves ran out of memory.
    let dir = tempfile::tempdir().unwrap();
    let star = dir.path().join("star.el");
    let text: String = (1..=300).map(|i| format!("0 {i}\n")).collect();
    std::fs::write(&star, text).unwrap();
    let run = |limit: Option<&str>, extra: &[&str], out: &str| {
        let out = dir.path().join(out);
        let mut c = crate::util::cmd();
        c.args(["cluster", "--engine", "cpu", star.to_str().unwrap()]);
        c.args(extra).arg("-o").arg(&out);
        if let Some(l) = limit {
            c.env("GMCL_MEMORY_LIMIT", l);
        }
        let r = c.output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr).into_owned();
        (r.status.code(), err, std::fs::read(&out).ok())
    };
    let (code, _, unlimited) = run(None, &[], "free.clusters");
    assert_eq!(code, Some(0));
    let unlimited = unlimited.unwrap();
    // The batched path under 1 MiB: M² in several batches, the same clusters.
    let (code, err, batched) = run(Some("1M"), &["--unfused"], "batched.clusters");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(" batches)"), "{err}");
    assert_eq!(batched.unwrap(), unlimited);
    // The fused path keeps no M², only the next matrix: 4 MiB holds it, 1 MiB does not.
    let (code, err, fused) = run(Some("4M"), &[], "fused.clusters");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(fused.unwrap(), unlimited);
    let (code, err, none) = run(Some("1M"), &[], "none.clusters");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("not enough memory for MCL's next matrix") && err.contains("is left"),
        "{err}"
    );
    assert!(none.is_none());
}

/// `gmcl cluster` with `args` on `input` (CPU engine), its stdout against mcl's golden file,
/// byte for byte (both number .abc labels in order of first appearance).
fn assert_cluster_equals_mcl(input: &str, args: &[&str], golden_file: &str) {
    let mut all = vec!["cluster", input, "--engine", "cpu", "-q"];
    all.extend_from_slice(args);
    let out = gmcl(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read(Path::new("tests/golden").join(golden_file)).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&want),
        "{args:?}"
    );
}

#[test]
fn abc_tf_clusters_as_mcl() {
    // Drops the edges of weight 1 (their nodes stay, as singletons) before the mirror merge.
    assert_cluster_equals_mcl(
        "graphs/lesmis.abc",
        &["--abc-tf", "gq(2),pow(2)"],
        "lesmis.abctf.mcl",
    );
    // mcl's own spelling.
    assert_cluster_equals_mcl(
        "graphs/lesmis.abc",
        &["-abc-tf", "gq(2),pow(2)"],
        "lesmis.abctf.mcl",
    );
}

#[test]
fn tf_clusters_as_mcl() {
    assert_cluster_equals_mcl(
        "graphs/lesmis.abc",
        &["-tf", "gt(1),log(2),ceil(3)"],
        "lesmis.tf.mcl",
    );
    assert_cluster_equals_mcl(
        "graphs/lesmis.abc",
        &["--tf", "gt(1), log(2), ceil(3)"],
        "lesmis.tf.mcl",
    );
}

#[test]
fn abc_neg_log10_clusters_as_mcl() {
    // E-values 1e-w: minus their log10 gives back lesmis' weights.
    for flag in ["--abc-neg-log10", "-abc-neg-log10"] {
        assert_cluster_equals_mcl(
            "tests/golden/lesmis_evalues.abc",
            &[flag],
            "lesmis_evalues.mcl",
        );
    }
}

#[test]
fn transforms_compute_in_mcls_floats_and_stand_ins() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    // 0.7 (a float) times 3 is 2.1 as a float, and passes gq(2.1): one cluster, as in mcl.
    let t07 = file("t07.abc", "a\tb\t0.7\nb\tc\t0.7\nc\ta\t0.7\nc\td\t0.7\n");
    for option in ["-abc-tf", "-tf"] {
        let (stdout, _) = ok(&["cluster", &t07, option, "mul(3),gq(2.1)", "-q"]);
        assert_eq!(stdout, "a\tb\tc\td\n", "{option}");
    }
    // E-values 1e-w read back as w (in double, then a float): lesmis' w >= 3, as mcl.
    let (stdout, _) = ok(&[
        "cluster",
        "tests/golden/lesmis_evalues.abc",
        "--abc-neg-log10",
        "-abc-tf",
        "gq(3)",
        "-q",
    ]);
    let want = std::fs::read_to_string("tests/golden/lesmis_evalues.gq3.mcl").unwrap();
    assert_eq!(stdout, want);
    // An e-value of 0 is mcl's stand-in for infinity, capped by ceil(200); a loop's weight
    // (here negative) is never used. mcl gives these clusters.
    let tl = file(
        "tl.abc",
        "a\ta\t-1\na\tb\t1\nb\tc\t1\nc\ta\t1\nd\te\t1e-300\ne\tf\t0\nd\tf\t1e-5\n",
    );
    let (stdout, _) = ok(&[
        "cluster",
        &tl,
        "--abc-neg-log10",
        "-abc-tf",
        "ceil(200)",
        "-q",
    ]);
    assert_eq!(stdout, "d\te\tf\na\nb\nc\n");
}

#[test]
fn transforms_mcl_cannot_match_are_refused() {
    let refused = |args: &[&str], want: &str| {
        let out = gmcl(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    };
    // lesmis' weights of 2 and more have a negative -log10: mcl keeps them, gmcl cannot.
    refused(
        &["cluster", "graphs/lesmis.abc", "--abc-neg-log10"],
        "edge (Myriel, MlleBaptistine)",
    );
    refused(
        &["cluster", "graphs/lesmis.abc", "-tf", "gq(1),#knn(3)"],
        "at '#knn(3)'",
    );
    refused(
        &["cluster", "graphs/lesmis.abc", "-abc-tf", "ceil()"],
        "needs a value",
    );
    refused(
        &["cluster", "graphs/karate.el", "--abc-tf", "abs()"],
        "use --tf",
    );
}
