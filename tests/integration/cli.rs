//! The real `gmcl` binary: subcommands, JSON output, exit statuses, and clean failures.
//! Paths to repository files are relative to the current directory (the package root).

use crate::util::{cmd, fails, gmcl, json, ok, s};

#[test]
fn info_of_karate_in_two_formats() {
    let el = json(&["info", "graphs/karate.el", "--json"]);
    assert_eq!(el["vertices"], 34);
    assert_eq!(el["edges"], 78);
    assert_eq!(el["self_loops"], 0);
    assert_eq!(el["duplicate_edges"], 0);
    assert_eq!(el["symmetric"], false);
    assert_eq!(el["max_degree"], 17);
    assert!((el["avg_degree"].as_f64().unwrap() - 156.0 / 34.0).abs() < 1e-9);
    let mtx = json(&["info", "graphs/karate.mtx", "--json"]);
    assert_eq!(mtx["symmetric"], true);
    assert_eq!(mtx["edges"], 78);
    assert_eq!(mtx["max_degree"], 17);
    let text = ok(&["info", "graphs/karate.el"]);
    assert!(text.contains("vertices        34"), "{text}");
}

#[test]
fn info_of_les_miserables_labels() {
    let v = json(&["info", "graphs/lesmis.abc", "--json"]);
    assert_eq!(v["vertices"], 77);
    assert_eq!(v["edges"], 254);
    assert_eq!(v["max_degree"], 36);
}

#[test]
fn karate_cubed_counts_45_triangles() {
    let dir = tempfile::tempdir().unwrap();
    let a2 = dir.path().join("a2.mtx");
    let a3 = dir.path().join("a3.mtx");
    let r = json(&[
        "spgemm",
        "graphs/karate.el",
        "--symmetrize",
        "--engine",
        "cpu",
        "-o",
        s(&a2),
        "--json",
    ]);
    assert_eq!(r["engine"], "cpu");
    assert_eq!(
        (r["rows"].as_u64(), r["cols"].as_u64()),
        (Some(34), Some(34))
    );
    // Σ_i deg(i)² intermediate products for A².
    assert_eq!(r["intermediate_products"], 1212);
    ok(&[
        "spgemm",
        s(&a2),
        "graphs/karate.mtx",
        "--engine",
        "cpu",
        "-o",
        s(&a3),
        "-q",
    ]);
    let text = std::fs::read_to_string(&a3).unwrap();
    let mut trace = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('%')).skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[0] == f[1] {
            trace += f[2].parse::<f64>().unwrap();
        }
    }
    assert_eq!(trace / 6.0, 45.0);
}

#[test]
fn generate_is_reproducible_across_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.el");
    let two = dir.path().join("two.el");
    let args = [
        "generate",
        "--scale",
        "12",
        "--edge-factor",
        "8",
        "--seed",
        "7",
        "--undirected",
        "--no-duplicates",
    ];
    ok(&[&args[..], &["--threads", "1", "-o", s(&one)]].concat());
    ok(&[&["--threads", "2"], &args[..], &["-o", s(&two)]].concat());
    let (a, b) = (std::fs::read(&one).unwrap(), std::fs::read(&two).unwrap());
    assert!(!a.is_empty());
    assert_eq!(a, b);
    let v = json(&["info", s(&one), "--json"]);
    assert_eq!(v["edges"], 8 << 12);
    assert_eq!(v["duplicate_edges"], 0);
}

#[test]
fn generated_mtx_multiplies() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.mtx");
    ok(&[
        "generate",
        "-s",
        "10",
        "-e",
        "4",
        "--weights",
        "-o",
        s(&g),
        "--quiet",
    ]);
    let r = json(&["spgemm", s(&g), "--json", "--engine", "auto", "--quiet"]);
    assert_eq!(r["rows"], 1024);
    assert!(r["nnz"].as_u64().unwrap() > 1024);
    assert!(r["intermediate_products"].as_u64().unwrap() >= r["nnz"].as_u64().unwrap());
    assert_eq!(r["runs"], 1);
    // --repeat: the same product each time (written once), the times are medians.
    let c = dir.path().join("c.mtx");
    let once = dir.path().join("once.mtx");
    ok(&["spgemm", s(&g), "--engine", "cpu", "-o", s(&once), "-q"]);
    let r = json(&[
        "spgemm",
        s(&g),
        "--json",
        "--engine",
        "cpu",
        "--repeat",
        "3",
        "-o",
        s(&c),
        "-q",
    ]);
    assert_eq!(r["runs"], 3);
    assert!(r["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(std::fs::read(&c).unwrap(), std::fs::read(&once).unwrap());
    let err = fails(&["spgemm", s(&g), "--repeat", "0"]);
    assert!(err.contains("--repeat"), "{err}");
}

#[test]
fn gpu_engine_runs_or_fails_clearly() {
    let out = gmcl(&["spgemm", "graphs/karate.el", "--engine", "gpu", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    if gmcl::gpu::unavailable_reason().is_some() {
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("GPU") && err.contains("--engine cpu"), "{err}");
    } else {
        assert!(out.status.success(), "{err}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("\"engine\":\"gpu\""));
    }
}

#[test]
fn auto_runs_small_work_on_the_cpu_without_a_word() {
    // The karate club is far under the GPU's crossover on any machine, with or without a GPU.
    let karate = "graphs/karate.el";
    let runs: [&[&str]; 3] = [
        &["tricount", karate],
        &["spgemm", karate, "--symmetrize"],
        &["cluster", karate],
    ];
    for args in runs {
        let out = cmd()
            .args(args)
            .args(["--engine", "auto"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(!err.contains("GPU"), "{args:?}: {err}");
        let said = format!("{err}{}", String::from_utf8_lossy(&out.stdout));
        assert!(said.contains("on the cpu engine"), "{args:?}: {said}");
    }
}

#[test]
fn auto_says_once_why_large_work_runs_on_the_cpu() {
    if gmcl::gpu::unavailable_reason().is_none() {
        return; // the work below runs on the GPU here
    }
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.el");
    ok(&[
        "generate",
        "-s",
        "12",
        "-e",
        "16",
        "--undirected",
        "--seed",
        "3",
        "-o",
        s(&g),
        "-q",
    ]);
    // Tens of millions of products on two threads: the GPU would have paid.
    let out = gmcl(&[
        "cluster",
        s(&g),
        "--threads",
        "2",
        "-L",
        "1",
        "-o",
        "/dev/null",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("no usable GPU").count(), 1, "{err}");
    assert!(err.contains("on the cpu engine"), "{err}");
}

#[test]
fn bad_inputs_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.el");
    std::fs::write(&bad, "0 1\n1 x2\n").unwrap();
    let err = fails(&["info", s(&bad)]);
    assert!(err.contains(&format!("{}:2", bad.display())), "{err}");
    let missing = dir.path().join("missing.el");
    let err = fails(&["info", s(&missing)]);
    assert!(err.contains("missing.el"), "{err}");
    let err = fails(&["info", s(dir.path())]);
    assert!(err.contains("directory"), "{err}");
}

#[test]
fn failed_runs_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n",
    )
    .unwrap();
    let out = dir.path().join("c.mtx");
    let err = fails(&["spgemm", s(&bad), "-o", s(&out)]);
    assert!(err.contains("bad.mtx"), "{err}");
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "a temporary file was left"
    );
}

#[test]
fn mismatched_inner_dimensions() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.mtx");
    let b = dir.path().join("b.mtx");
    std::fs::write(
        &a,
        "%%MatrixMarket matrix coordinate pattern general\n2 3 1\n1 3\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1\n",
    )
    .unwrap();
    let err = fails(&["spgemm", s(&a), s(&b)]);
    assert!(err.contains("cannot multiply"), "{err}");
    // The other way round the shapes agree: (2x2)·(2x3).
    let r = json(&["spgemm", s(&b), s(&a), "--json", "-q"]);
    assert_eq!((r["rows"].as_u64(), r["cols"].as_u64()), (Some(2), Some(3)));
}

#[test]
fn unwritable_output_path() {
    let err = fails(&[
        "spgemm",
        "graphs/karate.el",
        "-q",
        "-o",
        "/nonexistent-dir/c.mtx",
    ]);
    assert!(err.contains("/nonexistent-dir/c.mtx"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let as_dir = dir.path().join("out.el");
    std::fs::create_dir(&as_dir).unwrap();
    let err = fails(&["generate", "-s", "4", "-e", "2", "-o", s(&as_dir)]);
    assert!(err.contains("directory"), "{err}");
}

#[test]
fn global_flags_before_or_after_the_subcommand() {
    let a = ok(&["--quiet", "--threads", "1", "info", "graphs/karate.el"]);
    let b = ok(&["info", "graphs/karate.el", "--threads", "1", "--quiet"]);
    assert_eq!(a, b);
    let out = gmcl(&["spgemm", "graphs/karate.el", "--quiet"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The karate club's product is too small for the GPU to pay: the summary, nothing else.
    let out = gmcl(&["spgemm", "graphs/karate.el"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("gmcl: C: 34 x 34") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn bench_spgemm_on_the_cpu_prints_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("bench.json");
    let p = dir.path().join("bench.svg");
    let out = ok(&[
        "bench",
        "spgemm",
        "--engines",
        "cpu",
        "--suite",
        "none",
        "graphs/karate.mtx",
        "--repeat",
        "1",
        "--json",
        s(&j),
        "--plot",
        s(&p),
        "-q",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("case"), "{out}");
    assert!(
        lines[0].contains("cpu ms") && lines[0].contains("GFLOP/s"),
        "{out}"
    );
    assert!(!lines[0].contains("cuSPARSE"), "{out}");
    assert!(lines[2].starts_with("karate.mtx"), "{out}");
    assert!(
        out.contains("f32 values, median of 1 after one warm-up"),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    let case = &v["cases"][0];
    assert_eq!(case["name"], "karate.mtx");
    assert_eq!(case["rows"], 34);
    assert_eq!(case["a_nnz"], 156);
    // A² of an undirected graph: one product per (k, i, j) with i, j neighbours of k.
    assert_eq!(case["products"], 1_212);
    let run = &case["runs"][0];
    assert_eq!(run["engine"], "cpu");
    assert_eq!(run["outcome"]["kind"], "reference");
    assert_eq!(run["times_ms"].as_array().unwrap().len(), 1);
    assert!(run["gflops"].as_f64().unwrap() > 0.0);
    let svg = std::fs::read_to_string(&p).unwrap();
    assert!(svg.contains("no speedup to plot"));
    // One scale and one density of a suite (scale 10 is below the suite's first: nothing).
    let out = ok(&[
        "bench",
        "spgemm",
        "--engines",
        "cpu",
        "--suite",
        "sym",
        "--min-scale",
        "14",
        "--max-scale",
        "14",
        "--densities",
        "8",
        "--repeat",
        "1",
        "-q",
    ]);
    let cases: Vec<&str> = out.lines().filter(|l| l.starts_with("sym ")).collect();
    assert_eq!(cases.len(), 1, "{out}");
    assert!(cases[0].starts_with("sym s14 ef8"), "{out}");
    let err = fails(&[
        "bench",
        "spgemm",
        "--engines",
        "cpu",
        "--suite",
        "sym",
        "--max-scale",
        "10",
    ]);
    assert!(err.contains("nothing to run"), "{err}");
}

#[test]
fn bench_spgemm_refuses_bad_options() {
    let err = fails(&["bench", "spgemm", "--engines", "cpu,tpu", "--suite", "none"]);
    assert!(err.contains("unknown engine 'tpu'"), "{err}");
    let err = fails(&["bench", "spgemm", "--engines", "cpu", "--suite", "none"]);
    assert!(err.contains("nothing to run"), "{err}");
    let err = fails(&["bench", "spgemm", "--engines", "cpu", "--repeat", "0"]);
    assert!(err.contains("--repeat"), "{err}");
    let err = fails(&[
        "bench",
        "spgemm",
        "--engines",
        "cpu",
        "--suite",
        "none",
        "no-such.mtx",
    ]);
    assert!(err.contains("no-such.mtx"), "{err}");
}

#[test]
fn bench_spgemm_on_the_gpu_runs_or_fails_clearly() {
    let out = gmcl(&[
        "bench",
        "spgemm",
        "--suite",
        "none",
        "graphs/karate.mtx",
        "--repeat",
        "1",
        "-q",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!err.contains("panicked"), "{err}");
    if out.status.code() == Some(3) {
        assert!(
            err.contains("cannot run") && err.contains("--engines cpu"),
            "{err}"
        );
        assert!(
            gmcl::gpu::unavailable_reason().is_some()
                || err.contains("no cuSPARSE library (libcusparse.so) on this machine"),
            "{err}"
        );
    } else {
        // A GPU with cuSPARSE: both ran on karate, and no result differs from gMAGNUS's
        // (a cuSPARSE algorithm may refuse a product: that is a recorded failure, not a bug).
        assert!(out.status.success(), "{err}");
        let row = text.lines().find(|l| l.starts_with("karate.mtx")).unwrap();
        assert!(row.contains("ALG") && row.ends_with('x'), "{text}");
        assert!(!text.contains("WRONG"), "{text}");
        assert!(!text.contains("karate.mtx: gpu failed"), "{text}");
    }
}

#[test]
fn bench_transfer_measures_checked_copies_or_says_it_needs_a_gpu() {
    let err = fails(&["bench", "transfer", "--mib", "4"]);
    assert!(
        err.contains("--mib 4 must lie between 8 and 65536"),
        "{err}"
    );
    let err = fails(&["bench", "transfer", "--repeat", "0"]);
    assert!(err.contains("--repeat"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("rates.json");
    let args = ["bench", "transfer", "--mib", "80", "--repeat", "1", "-q"];
    let out = gmcl(&[&args[..], &["--json", j.to_str().unwrap()]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    match crate::util::gpu() {
        None => {
            assert_eq!(out.status.code(), Some(3), "{err}");
            assert!(err.contains("gmcl bench transfer needs a GPU"), "{err}");
            assert!(!j.exists(), "no figures, no file");
        }
        Some(_) => {
            assert!(out.status.success(), "{err}");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("copies of 80 MiB"), "{text}");
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
            assert_eq!(r["bytes"], 80 << 20);
            for key in [
                "pinned_up",
                "staged_up",
                "staged_down_mapped",
                "staged_down_fresh",
            ] {
                assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {r}");
            }
        }
    }
}

#[test]
fn tricount_prints_the_count() {
    assert_eq!(ok(&["tricount", "graphs/karate.el", "-q"]), "45\n");
    assert_eq!(ok(&["tricount", "graphs/karate.mtx", "-q"]), "45\n");
    assert_eq!(ok(&["tricount", "graphs/lesmis.abc", "-q"]), "467\n");
    for method in ["merge", "spgemm"] {
        let out = ok(&[
            "tricount",
            "graphs/karate.el",
            "--engine",
            "cpu",
            "--method",
            method,
            "--threads",
            "1",
        ]);
        assert_eq!(out, "45\n");
    }
    let r = json(&["tricount", "graphs/karate.mtx", "--json", "--engine", "cpu"]);
    assert_eq!(r["triangles"], 45);
    assert_eq!(r["vertices"], 34);
    assert_eq!(r["edges"], 78);
    assert!(r["seconds"].as_f64().unwrap() >= 0.0);
    assert!(r["edges_per_second"].as_f64().unwrap() >= 0.0);
    assert_eq!(r["method"], "merge");
    assert_eq!(r["runs"], 1);
    assert!(r["load_seconds"].as_f64().unwrap() >= 0.0);
    assert!(r["orient_seconds"].as_f64().unwrap() <= r["seconds"].as_f64().unwrap());
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 12, "{keys:?}");
    assert!(r["wall_s"]["total"].as_f64().unwrap() > 0.0);
    assert_eq!(r["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(r["parameters"]["method"], "auto");
    // --repeat: the same count, times are medians.
    let r = json(&[
        "tricount",
        "graphs/karate.mtx",
        "--json",
        "--engine",
        "cpu",
        "--repeat",
        "3",
    ]);
    assert_eq!(
        (r["triangles"].as_u64(), r["runs"].as_u64()),
        (Some(45), Some(3))
    );
}

#[test]
fn tricount_per_vertex_file_uses_input_labels() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("counts.tsv");
    let r = json(&[
        "tricount",
        "graphs/lesmis.abc",
        "--per-vertex",
        s(&out),
        "--json",
        "-q",
    ]);
    assert_eq!(r["triangles"], 467);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 77);
    // Labels in order of first appearance; counts from networkx (see tests/tricount.rs).
    assert_eq!(lines[0], "Napoleon\t0");
    assert_eq!(lines[1], "Myriel\t3");
    assert!(lines.contains(&"Valjean\t76"), "{text}");
    assert!(lines.contains(&"Gavroche\t82"), "{text}");
    let sum: u64 = lines
        .iter()
        .map(|l| l.split('\t').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, 3 * 467);
    // The karate club in Matrix Market: the file's own 1-based numbers as labels.
    let out2 = dir.path().join("karate.tsv");
    ok(&[
        "tricount",
        "graphs/karate.mtx",
        "--per-vertex",
        s(&out2),
        "--method",
        "spgemm",
        "--engine",
        "cpu",
        "-q",
    ]);
    let text = std::fs::read_to_string(&out2).unwrap();
    assert!(text.starts_with("1\t18\n2\t12\n3\t11\n"), "{text}");
    assert!(text.ends_with("33\t13\n34\t15\n"), "{text}");
}

#[test]
fn tricount_bad_input_and_engines() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.el");
    std::fs::write(&bad, "0 1\n1 2\n2 zero\n").unwrap();
    let err = fails(&["tricount", s(&bad)]);
    assert!(err.contains(&format!("{}:3", bad.display())), "{err}");
    let err = fails(&["tricount", s(&dir.path().join("missing.el"))]);
    assert!(err.contains("missing.el"), "{err}");
    let err = fails(&["tricount", "graphs/karate.el", "--method", "fast"]);
    assert!(err.contains("fast"), "{err}");
    // A per-vertex file that cannot be written: an error, and nothing left behind.
    let err = fails(&[
        "tricount",
        "graphs/karate.el",
        "--per-vertex",
        "/nonexistent-dir/t.tsv",
    ]);
    assert!(err.contains("/nonexistent-dir/t.tsv"), "{err}");
    // The GPU engine runs the masked product; without one, exit status 3 and a clear message.
    let out = gmcl(&["tricount", "graphs/karate.el", "--engine", "gpu"]);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "45\n");
    } else {
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.to_lowercase().contains("gpu"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn outputs_that_would_destroy_an_input_or_each_other_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.el");
    std::fs::copy("graphs/karate.el", &g).unwrap();
    let before = std::fs::read(&g).unwrap();
    let link = dir.path().join("link.el");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&g, &link).unwrap();
    #[cfg(not(unix))]
    std::fs::copy(&g, &link).unwrap();
    let out = dir.path().join("out.txt");
    for args in [
        vec!["cluster", s(&g), "-o", s(&g)],
        vec!["cluster", s(&g), "--json-file", s(&g)],
        vec!["spgemm", s(&g), "-o", s(&g)],
        vec!["spgemm", "graphs/karate.el", s(&g), "-o", s(&g)],
        vec!["tricount", s(&g), "--per-vertex", s(&g)],
        vec![
            "bench",
            "spgemm",
            "--engines",
            "cpu",
            "--suite",
            "none",
            s(&g),
            "--json",
            s(&g),
        ],
        vec![
            "bench",
            "spgemm",
            "--engines",
            "cpu",
            "--suite",
            "none",
            s(&g),
            "--plot",
            s(&g),
        ],
    ] {
        let err = fails(&args);
        assert!(err.contains("is the input file"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read(&g).unwrap(),
            before,
            "{args:?} changed the input"
        );
    }
    #[cfg(unix)]
    {
        let err = fails(&["cluster", s(&g), "-o", s(&link)]);
        assert!(err.contains("is the input file"), "{err}");
        let bench = ["bench", "spgemm", "--engines", "cpu", "--suite", "none"];
        let err = fails(&[&bench[..], &[s(&g), "--plot", s(&link)]].concat());
        assert!(err.contains("is the input file"), "{err}");
    }
    let err = fails(&["cluster", s(&g), "-o", s(&out), "--json-file", s(&out)]);
    assert!(err.contains("are the same file"), "{err}");
    let bench = [
        "bench",
        "spgemm",
        "--engines",
        "cpu",
        "--suite",
        "none",
        s(&g),
    ];
    let err = fails(&[&bench[..], &["--json", s(&out), "--plot", s(&out)]].concat());
    assert!(err.contains("are the same file"), "{err}");
    assert!(!out.exists(), "nothing was written");
    assert_eq!(std::fs::read(&g).unwrap(), before);
}

/// A write-protected output is refused as `>`, `cp` and mcl refuse it, though the rename into
/// place could replace it. Root may write any file, so as root the runs are made as `nobody`.
#[cfg(target_os = "linux")]
#[test]
fn a_write_protected_output_is_not_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // A copy of the binary and the input that `nobody` can read and run.
    let bin = dir.path().join("gmcl");
    std::fs::copy(crate::util::gmcl_bin(), &bin).unwrap();
    let g = dir.path().join("g.el");
    std::fs::copy("graphs/karate.el", &g).unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    for (args, name) in [
        (&["cluster", s(&g), "-o"][..], "k.clusters"),
        (&["convert", s(&g)], "k.wel"),
        (&["spgemm", s(&g), "-o"], "c.npz"),
        (&["tricount", s(&g), "--per-vertex"], "k.tri"),
        (&["generate", "-s", "5", "-e", "4", "-o"], "r.el"),
    ] {
        let out = dir.path().join(name);
        std::fs::write(&out, "old\n").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o444)).unwrap();
        if root {
            // `nobody` owns it, as a user owns the file they protected.
            std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
        }
        let mut c = match root {
            true => {
                let mut c = std::process::Command::new("setpriv");
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                    .arg(&bin);
                c
            }
            false => std::process::Command::new(&bin),
        };
        let r = c.args(args).arg(&out).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("the file is write-protected"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old\n", "{args:?}");
        let temps: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(temps.is_empty(), "{args:?}: {temps:?}");
    }
}

#[test]
fn a_negative_weight_is_named_by_the_file_s_own_ids_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    // A SNAP signed network's signs are no weights: skipped, as SNAP's loader skips them.
    let signed = dir.path().join("s.txt");
    std::fs::write(&signed, "10\t20\t1\n20\t30\t1\n60\t40\t-2\n").unwrap();
    ok(&["cluster", s(&signed)]);
    for (name, text, edge) in [
        (
            "a.abc",
            "x\ty\t1\ny\tz\t1\nq\tr\t-2\n",
            "edge (q, r) weighs -2",
        ),
        (
            "m.mtx",
            "%%MatrixMarket matrix coordinate real general\n6 6 2\n1 2 1\n6 4 -2\n",
            "edge (6, 4) weighs -2",
        ),
        ("w.wel", "0 1 1\n5 3 -2\n", "edge (5, 3) weighs -2"),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        let err = fails(&["cluster", s(&f)]);
        assert!(err.contains(name) && err.contains(edge), "{name}: {err}");
    }
}

#[test]
fn outputs_that_number_named_vertices_say_how() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("s.txt");
    std::fs::write(&snap, "30\t10\n10\t20\n").unwrap();
    let out = dir.path().join("c.wel");
    let run = gmcl(&["spgemm", s(&snap), "-o", s(&out)]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert!(
        err.contains("its vertex ids become 0, 1, ... in increasing order"),
        "{err}"
    );
    // 30 -> 10 -> 20 is the only path of two steps: 2 -> 1 in C's numbering.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "2 1 1\n");
    let el = dir.path().join("c.el");
    let run = gmcl(&["convert", s(&snap), s(&el)]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("its vertex ids become 0, 1, ... in increasing order"),
        "{err}"
    );
    // A positional numbering (Matrix Market's, from 1) is no renumbering: nothing to say.
    let mtx = dir.path().join("m.mtx");
    std::fs::write(
        &mtx,
        "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n3 1\n",
    )
    .unwrap();
    let run = gmcl(&["convert", s(&mtx), s(&el)]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!err.contains("names its vertices"), "{err}");
    assert_eq!(std::fs::read_to_string(&el).unwrap(), "2 0\n");
}

#[test]
fn a_product_that_overflows_its_precision_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.mtx");
    std::fs::write(
        &g,
        "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 2 1e30\n2 1 1e30\n2 2 1\n",
    )
    .unwrap();
    for name in ["c.mtx", "c.wel", "c.npz"] {
        let out = dir.path().join(name);
        let err = fails(&["spgemm", s(&g), "--precision", "f32", "-o", s(&out)]);
        assert!(
            err.contains("row 0, column 0 (counted from 0) is inf: the product overflows f32"),
            "{err}"
        );
        assert!(!out.exists(), "{name} was written");
    }
    // In f64 the same product is finite and written.
    let out = dir.path().join("c.mtx");
    ok(&["spgemm", s(&g), "-o", s(&out)]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("1 1 1.0000000000000001e60\n"), "{text}");
}

#[test]
fn dash_and_dev_stdout_are_the_inherited_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let karate = crate::util::repo("graphs/karate.el");
    let run = |args: &[&str]| {
        crate::util::cmd()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    // `-o -` writes the clusters to stdout, as no `-o` does, and creates no file named `-`.
    let plain = run(&["cluster", s(&karate), "-q"]);
    let dash = run(&["cluster", s(&karate), "-q", "-o", "-"]);
    assert!(
        dash.status.success(),
        "{}",
        String::from_utf8_lossy(&dash.stderr)
    );
    assert_eq!(dash.stdout, plain.stdout);
    assert!(!dir.path().join("-").exists());
    // C on stdout is Matrix Market alone: the summary goes to stderr.
    let c = run(&["spgemm", s(&karate), "-o", "-"]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(
        text.starts_with("%%MatrixMarket matrix coordinate"),
        "{text}"
    );
    assert!(!text.contains("C: "));
    assert!(String::from_utf8_lossy(&c.stderr).contains("C: 34 x 34"));
    let both = run(&["spgemm", s(&karate), "-o", "-", "--json"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(!dir.path().join("-").exists());
    // tricount's counts and report would mix on stdout the same way.
    for out in ["-", "/dev/stdout"] {
        let both = run(&["tricount", s(&karate), "--per-vertex", out, "--json"]);
        assert_eq!(both.status.code(), Some(2), "{out}");
        assert!(both.stdout.is_empty(), "{out}");
        assert!(
            String::from_utf8_lossy(&both.stderr).contains("--json and --per-vertex - both"),
            "{out}"
        );
    }
}

#[cfg(unix)]
#[test]
fn dev_stdout_appends_to_what_the_shell_opened() {
    // `>> log` behind `-o /dev/stdout` appends: the log's earlier lines stay.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    std::fs::write(&log, "earlier line\n").unwrap();
    let karate = crate::util::repo("graphs/karate.el");
    let script = format!(
        "exec '{}' cluster '{}' -q -o /dev/stdout >> '{}'",
        crate::util::gmcl_bin().display(),
        s(&karate),
        s(&log)
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("earlier line\n"), "{text}");
    assert_eq!(
        text.lines().count(),
        1 + 2,
        "the earlier line and two clusters: {text}"
    );
}

#[test]
fn threads_beyond_four_per_core_are_capped_with_a_notice() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let karate = crate::util::repo("graphs/karate.el");
    let start = std::time::Instant::now();
    let out = gmcl(&[
        "--threads",
        "100000",
        "cluster",
        s(&karate),
        "--engine",
        "cpu",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "gmcl: --threads 100000 is more than 4 times the {cores} cores here: using {}",
            4 * cores
        )),
        "{err}"
    );
    // Before: 100,000 threads ran for minutes.
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    let within = (4 * cores).to_string();
    let out = gmcl(&["--threads", &within, "info", s(&karate)]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("--threads"));
}

#[test]
fn an_output_that_cannot_be_written_fails_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/out");
    let out = |ext: &str| format!("{}.{ext}", missing.display());
    let runs: Vec<Vec<String>> = vec![
        vec![
            "spgemm".into(),
            "graphs/karate.el".into(),
            "-o".into(),
            out("mtx"),
        ],
        vec![
            "cluster".into(),
            "graphs/karate.el".into(),
            "-o".into(),
            out("txt"),
        ],
        vec![
            "tricount".into(),
            "graphs/karate.el".into(),
            "--per-vertex".into(),
            out("tsv"),
        ],
        vec!["convert".into(), "graphs/karate.el".into(), out("npz")],
        vec![
            "generate".into(),
            "-s".into(),
            "20".into(),
            "-e".into(),
            "16".into(),
            "-o".into(),
            out("el"),
        ],
    ];
    for args in runs {
        let start = std::time::Instant::now();
        let r = cmd().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("no/such/dir"), "{args:?}: {err}");
        // Refused at once: generating scale 20 would take seconds.
        assert!(start.elapsed().as_secs_f64() < 2.0, "{args:?}");
    }
}
