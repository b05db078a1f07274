//! The command line at the edges where users live (issue 20): mcl's spellings, exit statuses,
//! where summaries and reports go, and outputs that are committed whole or not at all.

use crate::util::{cmd, gmcl, repo, s};
use std::path::Path;
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `gmcl` in `dir` (so that a misparsed option would leave its file there).
fn in_dir(dir: &Path, args: &[&str]) -> Output {
    cmd().args(args).current_dir(dir).output().unwrap()
}

#[test]
fn mcl_single_dash_options_are_read_as_mcl_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let g = repo("tests/golden/karate_names.abc");
    let mcl = in_dir(
        dir.path(),
        &[
            "cluster",
            s(&g),
            "--abc",
            "-te",
            "1",
            "-scheme",
            "4",
            "-pct",
            "80",
            "-overlap",
            "split",
            "-I",
            "1.4",
            "-o",
            "-",
        ],
    );
    assert!(mcl.status.success(), "{}", text(&mcl.stderr));
    let own = in_dir(
        dir.path(),
        &[
            "cluster",
            s(&g),
            "--threads",
            "1",
            "--scheme",
            "4",
            "--pct",
            "80",
            "--overlap",
            "split",
            "-I",
            "1.4",
        ],
    );
    assert!(own.status.success(), "{}", text(&own.stderr));
    assert_eq!(mcl.stdout, own.stdout);
    assert!(!mcl.stdout.is_empty());
    // A word that is neither gmcl's nor mcl's is refused, never read as `-o verlapp`.
    for (args, hint) in [
        (vec!["-overlapp", "split"], "unknown option -overlapp"),
        (vec!["-odir", "x"], "-o FILE"),
        (vec!["-engine", "cpu"], "--engine"),
        (vec!["-write-graph", "x"], "no mcl option"),
        // mcl reads 99.5 as 99 and 1e4 as 1 without a word; gmcl says what to write.
        (
            vec!["-pct", "99.5"],
            "'99.5' for '--pct <PCT>': not a whole number: write 99 or 100",
        ),
        (
            vec!["-P", "1e4"],
            "not written as a whole number: write 10000",
        ),
        (vec!["-S", "-5"], "negative: give a whole number, 0 or more"),
        (
            vec!["-te", "2.5"],
            "'--threads <N>': not a whole number: write 2 or 3",
        ),
    ] {
        let mut all = vec!["cluster", s(&g)];
        all.extend(args);
        let out = in_dir(dir.path(), &all);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        assert!(
            text(&out.stderr).contains(hint),
            "{all:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file written"
    );
}

#[test]
fn counts_of_one_are_singular_and_fused_without_a_gpu_is_an_unavailable_engine() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("t.el");
    std::fs::write(&g, "0 1\n1 2\n0 2\n").unwrap();
    let out = gmcl(&["cluster", s(&g)]);
    let err = text(&out.stderr);
    assert!(err.contains("1 cluster of 3 nodes"), "{err}");
    assert!(!err.contains("1 clusters"), "{err}");
    if gmcl::gpu::device().is_err() {
        let out = gmcl(&["tricount", s(&g), "--method", "fused"]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--method merge"));
    }
}

#[test]
fn summaries_go_to_stderr() {
    let out = gmcl(&["spgemm", "graphs/karate.el"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("C: 34 x 34"));
}

#[test]
fn cluster_json_prints_the_report_and_json_file_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("k.clusters");
    let r = dir.path().join("k.json");
    let karate = repo("graphs/karate.el");
    let out = gmcl(&[
        "cluster",
        s(&karate),
        "-q",
        "-o",
        s(&c),
        "--json",
        "-I",
        "3",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["parameters"]["inflation"], 3.0);
    assert_eq!(v["parameters"]["select"], 1100);
    assert!(v["clusters"].as_u64().unwrap() > 1);
    assert!(c.exists());
    let out = gmcl(&["cluster", s(&karate), "-q", "--json-file", s(&r)]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&r).unwrap()).unwrap();
    assert_eq!(v["parameters"]["inflation"], 2.0);
    // The report and the clusters cannot share stdout; the old `--json FILE` gets a hint.
    let out = gmcl(&["cluster", s(&karate), "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("-o FILE"),
        "{}",
        text(&out.stderr)
    );
    // However stdout is named.
    for args in [
        &["--json-file", "-"][..],
        &["-o", "-", "--json-file", "/dev/stdout"],
        &["-o", "/dev/stdout", "--json"],
    ] {
        let out = gmcl(&[&["cluster", s(&karate)][..], args].concat());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("on stdout, where"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = gmcl(&["cluster", s(&karate), "-o", "/dev/stdout", "--json"]);
    assert!(text(&out.stderr).contains("where -o /dev/stdout sends the clusters"));
    let out = gmcl(&["cluster", s(&karate), "-o", s(&c), "--json", "old.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--json-file old.json"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn outputs_are_checked_first_and_committed_together() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("k.clusters");
    std::fs::write(&c, "old\n").unwrap();
    let bad = dir.path().join("missing").join("r.json");
    let karate = repo("graphs/karate.el");
    let out = gmcl(&["cluster", s(&karate), "-o", s(&c), "--json-file", s(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("r.json"), "{err}");
    assert!(!err.contains("iteration"), "checked before any work: {err}");
    assert_eq!(std::fs::read_to_string(&c).unwrap(), "old\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[cfg(unix)]
#[test]
fn replaced_outputs_keep_their_mode_and_long_names_work() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("k.clusters");
    std::fs::write(&c, "old\n").unwrap();
    std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o600)).unwrap();
    let karate = repo("graphs/karate.el");
    assert!(gmcl(&["cluster", s(&karate), "-q", "-o", s(&c)])
        .status
        .success());
    assert_ne!(std::fs::read_to_string(&c).unwrap(), "old\n");
    assert_eq!(
        std::fs::metadata(&c).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let long = dir.path().join("c".repeat(248));
    let out = gmcl(&["cluster", s(&karate), "-q", "-o", s(&long)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(long.exists());
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_is_an_error_and_a_closed_pipe_a_normal_end() {
    let bin = crate::util::gmcl_bin();
    let karate = repo("graphs/karate.el");
    let sh = |script: String| {
        std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap()
    };
    let closed = sh(format!(
        "'{}' cluster '{}' -q >&-",
        bin.display(),
        s(&karate)
    ));
    assert_eq!(closed.status.code(), Some(2), "{}", text(&closed.stderr));
    assert!(text(&closed.stderr).contains("stdout is closed"));
    // A graph whose clusters fill more than a pipe's buffer, read by `head -1`.
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("pairs.el");
    let pairs: String = (0..40_000)
        .map(|i| format!("{} {}\n", 2 * i, 2 * i + 1))
        .collect();
    std::fs::write(&g, pairs).unwrap();
    let piped = sh(format!(
        "set -o pipefail; '{}' cluster '{}' -q | head -1 >/dev/null",
        bin.display(),
        s(&g)
    ));
    assert!(
        matches!(piped.status.code(), Some(0) | Some(141)),
        "{:?} {}",
        piped.status,
        text(&piped.stderr)
    );
    assert!(
        !text(&piped.stderr).contains("Broken pipe"),
        "{}",
        text(&piped.stderr)
    );
}

#[test]
fn the_readmes_first_set_up_command_runs_the_headline_job() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    assert!(readme.contains("cargo install --path ."));
    let setup = &readme[readme.find("## Set up").unwrap()..];
    let block = &setup[setup.find("```\n").unwrap() + 4..];
    let first = block.lines().next().unwrap();
    let args = first
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("not a gmcl command: {first}"));
    assert!(args.starts_with("cluster graphs/"), "{first}");
    let args: Vec<&str> = args.split_whitespace().collect();
    let out = cmd().args(&args).current_dir(repo(".")).output().unwrap();
    assert!(out.status.success(), "{first}: {}", text(&out.stderr));
    assert!(text(&out.stdout).lines().count() >= 2, "clusters on stdout");
}
