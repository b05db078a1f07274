//! `mpirun -n P gmcl cluster`: the cluster file byte-identical to the single-process run's for
//! P = 1 to 4 and 8 (on the GPU engine of each rank too), failures reported once with no output
//! left, and what does not run across ranks yet refused.

use super::{assert_same_as_single, mpirun, text, untidy_graph, RANKS, RANKS_TO_8};
use crate::util::{generated, repo, s};
use std::path::{Path, PathBuf};

/// An R-MAT graph from `gmcl generate`.
fn rmat(dir: &Path) -> PathBuf {
    generated(dir.join("rmat.el"), &["-s", "10", "-e", "8", "--seed", "3"])
}

#[test]
fn clusters_on_1_to_8_ranks_are_the_single_process_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let rmat = rmat(dir.path());
    let untidy = untidy_graph(dir.path());
    let karate = repo("graphs/karate.el");
    // Matrix Market: every rank reads the header, its nodes named from 1.
    let karate_mtx = repo("graphs/karate.mtx");
    let cases: [(&Path, &[&str], &[usize]); 6] = [
        (&karate, &[], RANKS_TO_8),
        (&karate, &["--output-format", "mcl", "-I", "1.4"], RANKS),
        (&karate_mtx, &[], RANKS_TO_8),
        (&rmat, &[], RANKS_TO_8),
        (
            &rmat,
            &["--scheme", "1", "-I", "3", "--overlap", "keep", "--unfused"],
            RANKS,
        ),
        (
            &untidy,
            &["-c", "2", "--overlap", "split", "--precision", "f64"],
            RANKS_TO_8,
        ),
    ];
    for (g, args, ranks) in cases {
        let mut all = vec!["cluster", s(g), "-o", "@out.txt", "-q"];
        all.extend_from_slice(args);
        // Stages sized by the memory (the default), and stages of a few entries (many rounds
        // of every exchange).
        let stages = ["", "40"];
        let (_, want) = assert_same_as_single(dir.path(), &all, &[], ranks, &stages);
        assert!(want[0].iter().filter(|&&b| b == b'\n').count() > 1);
    }
}

#[test]
fn json_names_the_ranks_and_their_engine() {
    let dir = tempfile::tempdir().unwrap();
    let karate = repo("graphs/karate.el");
    let out = dir.path().join("k.txt");
    let o = mpirun(3, &[], &["cluster", s(&karate), "-o", s(&out), "--json"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Rank 0 alone tells each iteration, with the bytes the ranks exchanged.
    assert_eq!(err.matches("iteration   1 ").count(), 1, "{err}");
    assert!(err.contains(" exchanged)"), "{err}");
    assert!(err.contains("on 3 ranks (cpu engine)"), "{err}");
    // With the shortest and longest time a rank spent making its columns.
    let busy = |line: &str| -> Option<(f64, f64)> {
        let (_, after) = line.split_once(", ranks busy ")?;
        let (span, _) = after.split_once(" s, ")?;
        let (fastest, slowest) = span.split_once('-')?;
        Some((fastest.parse().ok()?, slowest.parse().ok()?))
    };
    let spans: Vec<_> = err
        .lines()
        .filter(|l| l.contains("iteration "))
        .map(busy)
        .collect();
    assert!(!spans.is_empty(), "{err}");
    assert!(
        spans
            .iter()
            .all(|b| b.is_some_and(|(f, s)| 0.0 <= f && f <= s)),
        "{err}"
    );
    // The report gives each iteration's figures with every rank's part: the parts sum to the
    // iteration's, the columns to the nodes, and the busy times span the line's.
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let figures = report["iteration_figures"].as_array().unwrap();
    assert_eq!(figures.len(), spans.len(), "{report}");
    for (f, span) in figures.iter().zip(&spans) {
        let ranks = f["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 3, "{f}");
        let sum = |k: &str| ranks.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
        assert_eq!(sum("columns"), 34, "{f}");
        for (part, whole) in [
            ("products", "products"),
            ("expanded", "expanded"),
            ("kept", "kept"),
            ("received_bytes", "exchanged_bytes"),
        ] {
            assert_eq!(sum(part), f[whole].as_u64().unwrap(), "{part}: {f}");
        }
        let busy: Vec<f64> = ranks
            .iter()
            .map(|r| r["busy_seconds"].as_f64().unwrap())
            .collect();
        let (fastest, slowest) = span.unwrap();
        let most = busy.iter().copied().fold(0.0, f64::max);
        let least = busy.iter().copied().fold(f64::INFINITY, f64::min);
        // The line rounds to hundredths.
        assert!(
            (most - slowest).abs() <= 0.006 && (least - fastest).abs() <= 0.006,
            "{f}"
        );
    }
    // Karate's rows fit one round each iteration; stages of a few entries take several.
    assert!(!err.contains(" rounds: "), "{err}");
    let staged = mpirun(
        3,
        &[("GMCL_DIST_STAGE", "40")],
        &["cluster", s(&karate), "-o", s(&out)],
    );
    let staged_err = text(&staged.stderr);
    assert!(staged.status.success(), "{staged_err}");
    let rounds = |line: &str| -> Option<usize> {
        let (_, after) = line.split_once(" s exchanging in ")?;
        after.split_once(" rounds: ")?.0.parse().ok()
    };
    let most = staged_err.lines().filter_map(rounds).max();
    assert!(most.is_some_and(|r| r > 1), "{staged_err}");
    let printed = text(&o.stdout);
    assert_eq!(printed.lines().count(), 1, "{printed}");
    let v: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let one = crate::util::json(&["cluster", s(&karate), "-o", s(&out), "--json", "-q"]);
    assert_eq!(v["ranks"], 3);
    assert_eq!(v["rank_engine"], "cpu");
    assert_eq!(v["engine"], "cpu");
    assert_eq!(v["blocks"], "host");
    assert!(one.get("blocks").is_none());
    for k in [
        "clusters",
        "iterations",
        "nodes",
        "singletons",
        "largest",
        "converged",
        "efficiency",
        "modularity",
        "mass_fraction",
    ] {
        assert_eq!(v[k], one[k], "{k}");
    }
}

#[test]
fn a_failure_on_one_rank_stops_every_rank_with_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.wel");
    let mut text_in = String::new();
    for i in 0..400 {
        text_in.push_str(&format!("{} {} 1\n", i, (i * 7 + 1) % 400));
    }
    // Near the end: in the last rank's part.
    text_in.push_str("3 9 -2\n1 2 1\n");
    std::fs::write(&f, text_in).unwrap();
    let out = dir.path().join("c.txt");
    for ranks in [1, 2, 3] {
        let o = mpirun(ranks, &[], &["cluster", s(&f), "-o", s(&out)]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(err.contains("bad.wel: edge (3, 9) weighs -2"), "{err}");
        if ranks > 1 {
            assert!(
                err.contains(&format!("rank {} of {ranks}", ranks - 1)),
                "{err}"
            );
        }
        assert!(o.stdout.is_empty());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}

#[test]
fn what_does_not_run_across_ranks_yet_is_refused_once() {
    let karate = repo("graphs/karate.el");
    let k = s(&karate);
    let cases: [(Vec<&str>, &str, i32); 4] = [
        (
            vec!["cluster", k, "-o", "/nonexistent/c.txt"],
            "rank 0 of 2: /nonexistent/c.txt: cannot create output",
            2,
        ),
        (vec!["cluster", k, "--tf", "add(1)"], "--tf, --abc-tf", 2),
        (
            vec!["cluster", "-", "--format", "el"],
            "cannot be read across ranks",
            2,
        ),
        (
            vec!["tricount", "-", "--format", "el"],
            "cannot be read across ranks",
            2,
        ),
    ];
    for (args, message, code) in cases {
        let o = mpirun(2, &[], &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

/// `--engine gpu` on every rank (ranks share the one GPU, so NCCL cannot join them): the
/// blocks stay on the GPU, the rows travelling through host memory (in pieces of a few entries
/// with a stage of 40), and the cluster file is the single-process CPU run's, byte for byte
/// (MCL's sums are order-free on every engine); without a usable GPU, one message (exit 3) and
/// no output.
#[test]
fn clusters_with_the_gpu_engine_on_each_rank_are_the_cpu_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let rmat = rmat(dir.path());
    let karate = repo("graphs/karate.el");
    let has_gpu = crate::util::gpu().is_some();
    for g in [&rmat, &karate] {
        let want = dir.path().join("cpu.txt");
        let o = crate::util::gmcl(&["cluster", s(g), "-o", s(&want), "-q", "--engine", "cpu"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let want = std::fs::read(&want).unwrap();
        for (ranks, stage) in [(1, ""), (2, ""), (3, "40")] {
            let out = dir.path().join(format!("gpu-{ranks}.txt"));
            let args = ["cluster", s(g), "-o", s(&out), "--engine", "gpu", "--json"];
            let o = mpirun(ranks, &[("GMCL_DIST_STAGE", stage)], &args);
            let err = text(&o.stderr);
            let what = format!("{}: {ranks} ranks", g.display());
            if has_gpu {
                assert!(o.status.success(), "{what}: {err}");
                assert!(std::fs::read(&out).unwrap() == want, "{what}");
                let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
                assert_eq!(v["rank_engine"], "gpu", "{what}");
                assert_eq!(v["blocks"], "gpu", "{what}");
                assert_eq!(v["rank_engines"].as_array().unwrap().len(), ranks, "{what}");
                assert!(v["device_peak_bytes"].as_u64().unwrap() > 0, "{what}");
            } else {
                assert_eq!(o.status.code(), Some(3), "{what}: {err}");
                assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
                assert!(err.contains("the GPU engine cannot run"), "{err}");
                assert!(!out.exists(), "{what}");
            }
        }
    }
}

/// With a GPU a rank and NCCL joining them, every rank keeps its block on its GPU and the rows
/// move GPU to GPU: the clusters are the CPU engine's bytes, with the rows fetched in one round
/// or in many (stages of a few entries), on graphs whose blocks are cut again as the work
/// moves. Where NCCL cannot join the ranks' GPUs, `--exchange nccl` is refused clearly.
#[test]
fn clusters_with_the_blocks_on_the_gpus_are_the_cpu_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let rmat = rmat(dir.path());
    let untidy = untidy_graph(dir.path());
    let karate = repo("graphs/karate.el");
    let cases: [(&Path, &[&str]); 3] = [
        (&rmat, &[]),
        (&karate, &["-I", "1.4"]),
        (&untidy, &["-c", "2", "--precision", "f64"]),
    ];
    for (g, extra) in cases {
        let want = dir.path().join("cpu.txt");
        let mut args = vec!["cluster", s(g), "-o", s(&want), "-q", "--engine", "cpu"];
        args.extend_from_slice(extra);
        let o = crate::util::gmcl(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let want = std::fs::read(&want).unwrap();
        for stage in ["", "40"] {
            let out = dir.path().join(format!("gpus-{stage}.txt"));
            let mut args = vec!["cluster", s(g), "-o", s(&out), "--engine", "gpu"];
            args.extend_from_slice(&["--exchange", "nccl", "--json"]);
            args.extend_from_slice(extra);
            let o = mpirun(2, &[("GMCL_DIST_STAGE", stage)], &args);
            let err = text(&o.stderr);
            let what = format!("{} (stage {stage:?})", g.display());
            if o.status.success() {
                assert!(std::fs::read(&out).unwrap() == want, "{what}");
                let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
                assert_eq!(v["exchange"], "nccl", "{what}");
                assert_eq!(v["blocks"], "gpu", "{what}");
                assert!(err.contains("(blocks kept on the GPUs)"), "{err}");
            } else {
                // No GPU, no NCCL library, or both ranks on one GPU.
                assert_eq!(o.status.code(), Some(3), "{what}: {err}");
                assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
                let refused = "--exchange nccl: NCCL cannot join the ranks' GPUs: ";
                assert!(err.contains(refused), "{err}");
                assert!(!out.exists(), "{what}");
            }
        }
    }
}
