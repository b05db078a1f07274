//! Limits: ids past what u32 indexes, graphs whose vertices cannot fit in memory, and outputs
//! that cannot be written (a full disk, a file size limit) all fail with an error naming the
//! file (and the line), a non-zero status, no panic and no partial output.

use crate::util::s;
use std::process::{Command, Output};

fn gmcl(args: &[&str], memory: Option<&str>) -> Output {
    let mut c = crate::util::cmd();
    c.args(args);
    if let Some(m) = memory {
        c.env("GMCL_MEMORY_LIMIT", m);
    }
    c.output().expect("the gmcl binary runs")
}

/// Runs a command expected to fail with status 2; returns stderr.
fn fails(args: &[&str], memory: Option<&str>) -> String {
    let out = gmcl(args, memory);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "gmcl {args:?}: {err}");
    assert!(!err.contains("panicked"), "gmcl {args:?} panicked: {err}");
    err
}

#[test]
fn ids_past_u32_are_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let el = dir.path().join("big.el");
    std::fs::write(&el, "0 1\n4294967295 0\n").unwrap();
    for cmd in ["info", "tricount", "cluster", "spgemm"] {
        let e = fails(&[cmd, s(&el)], None);
        assert!(
            e.contains("big.el:2: vertex id 4294967295 is above the largest supported id"),
            "{cmd}: {e}"
        );
    }
    let mtx = dir.path().join("big.mtx");
    std::fs::write(
        &mtx,
        "%%MatrixMarket matrix coordinate pattern general\n4294967296 1 1\n1 1\n",
    )
    .unwrap();
    let e = fails(&["info", s(&mtx)], None);
    assert!(
        e.contains("big.mtx:2: 4294967296 rows is above the largest supported"),
        "{e}"
    );
}

#[test]
fn vertices_that_cannot_fit_in_memory_are_refused_before_allocating() {
    use gmcl::io::limits::{human, Footprint};
    let dir = tempfile::tempdir().unwrap();
    // 10^8 + 1 vertices: each command's arrays for them are more than 512 MiB.
    let el = dir.path().join("wide.el");
    std::fs::write(&el, "0 1\n# a comment\n100000000 5\n").unwrap();
    let limit = "512M";
    let footprints: [(&str, Footprint); 4] = [
        ("info", gmcl::info::FOOTPRINT),
        ("tricount", gmcl::tricount::FOOTPRINT),
        ("cluster", gmcl::mcl::FOOTPRINT),
        ("spgemm", gmcl::spgemm::FOOTPRINT),
    ];
    for (cmd, f) in footprints {
        let e = fails(&[cmd, s(&el)], Some(limit));
        let need = format!("{cmd} needs {} for them", human(f.bytes(100_000_001, 2)));
        assert!(
            e.contains("wide.el:3: vertex id 100000000 asks for 100000001 vertices")
                && e.contains(&need)
                && e.contains("512.0 MiB available (the memory limit set for this run)")
                && e.contains("--format snap"),
            "{cmd}: {e}"
        );
    }
    // The same file as SNAP text has 4 vertices.
    let out = gmcl(&["info", s(&el), "--format", "snap", "--json"], Some(limit));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"vertices\":4"));
    // Under a larger limit the edge list itself loads.
    assert!(gmcl(&["info", s(&el)], Some("8G")).status.success());

    let mtx = dir.path().join("wide.mtx");
    std::fs::write(
        &mtx,
        "%%MatrixMarket matrix coordinate pattern general\n% c\n3 200000000 1\n1 1\n",
    )
    .unwrap();
    let e = fails(&["info", s(&mtx)], Some(limit));
    assert!(
        e.contains("wide.mtx:3: the size line asks for 3 x 200000000 vertices"),
        "{e}"
    );
}

#[test]
fn a_malformed_memory_limit_is_an_error_not_no_limit() {
    for bad in ["", "1e9", "1.5G", "-1", "1GB", "lots"] {
        let e = fails(&["info", "graphs/karate.el"], Some(bad));
        assert!(
            e.contains(&format!("GMCL_MEMORY_LIMIT={bad}:")),
            "{bad:?}: {e}"
        );
    }
    for good in ["64M", "1g", "1073741824"] {
        assert!(gmcl(&["info", "graphs/karate.el"], Some(good))
            .status
            .success());
    }
}

#[cfg(target_os = "linux")]
#[test]
fn an_address_space_limit_is_respected() {
    // 13 bytes naming vertex 10^9: before, this passed the guard and ran past 10 GB.
    let dir = tempfile::tempdir().unwrap();
    let el = dir.path().join("far.el");
    std::fs::write(&el, "0 1000000000\n").unwrap();
    for cmd in ["info", "tricount", "spgemm", "cluster"] {
        let script = format!(
            "ulimit -v 3000000 && exec '{}' {cmd} '{}'",
            crate::util::gmcl_bin().display(),
            s(&el)
        );
        let r = Command::new("sh").args(["-c", &script]).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("far.el:1: vertex id 1000000000 asks for 1000000001 vertices")
                && err.contains("(the address space left under ulimit -v)"),
            "{cmd}: {err}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_file_size_limit_fails_the_write_cleanly() {
    // `ulimit -f` makes writes past the limit fail (EFBIG) as a full disk does (ENOSPC), for
    // root too; gmcl ignores SIGXFSZ so that the write fails instead of killing it.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.el");
    std::fs::write(&out, "0 1\n").unwrap();
    let script = format!(
        "ulimit -f 64 && exec '{}' generate -s 16 -e 16 -o '{}'",
        crate::util::gmcl_bin().display(),
        s(&out)
    );
    let r = Command::new("sh").args(["-c", &script]).output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}: cannot write output", out.display())),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The previous file is intact and nothing else is left.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "0 1\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// Runs `gmcl` with `args`, its stdout on /dev/full (every write fails with ENOSPC).
#[cfg(target_os = "linux")]
fn with_full_stdout(args: &[&str]) -> std::process::Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    crate::util::cmd().args(args).stdout(full).output().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_device_and_a_full_stdout_are_errors() {
    // /dev/full fails every write with ENOSPC.
    let e = fails(
        &["tricount", "graphs/karate.el", "--per-vertex", "/dev/full"],
        None,
    );
    assert!(
        e.contains("/dev/full: cannot write output: No space left on device"),
        "{e}"
    );
    let e = fails(
        &["generate", "-s", "10", "-e", "8", "-o", "/dev/full"],
        None,
    );
    assert!(e.contains("/dev/full"), "{e}");
    // Results on a stdout that cannot be written.
    let r = with_full_stdout(&["info", "graphs/karate.el"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdout>: cannot write output"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // What a command prints goes out before its outputs replace any file: the run fails whole.
    let dir = tempfile::tempdir().unwrap();
    for (args, name) in [
        (
            &["cluster", "graphs/karate.el", "--json", "-o"][..],
            "k.clusters",
        ),
        (&["tricount", "graphs/karate.el", "--per-vertex"], "k.tri"),
        (
            &["tricount", "graphs/karate.el", "--json", "--per-vertex"],
            "k.tri",
        ),
        (&["spgemm", "graphs/karate.el", "--json", "-o"], "c.mtx"),
        (&["spgemm", "graphs/karate.el", "--json", "-o"], "c.npz"),
        (&["convert", "graphs/karate.el", "--json"], "k.wel"),
        (&["convert", "graphs/karate.el", "--json"], "k.npz"),
        (&["generate", "-s", "6", "-e", "4", "--json", "-o"], "g.el"),
        (&["generate", "-s", "6", "-e", "4", "--json", "-o"], "g.npz"),
    ] {
        let out = dir.path().join(name);
        std::fs::write(&out, "old\n").unwrap();
        let mut args = args.to_vec();
        args.push(out.to_str().unwrap());
        let r = with_full_stdout(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("<stdout>: cannot write output"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old\n", "{args:?}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "{args:?}"
        );
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn a_closed_stderr_does_not_stop_a_run() {
    // Notices go to stderr; with its reader gone they are lost, and the run still succeeds.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.clusters");
    let mut child = crate::util::cmd()
        .args([
            "cluster",
            "graphs/karate.el",
            "--engine",
            "cpu",
            "-o",
            s(&out),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(std::fs::read_to_string(&out).unwrap().lines().count() > 1);
}

#[test]
fn repeat_counts_past_the_bound_are_usage_errors() {
    // usize::MAX overflowed a range (tricount) or a capacity (spgemm, bench): a panic, exit 101.
    let huge = "18446744073709551615";
    for args in [
        &["tricount", "graphs/karate.el", "--repeat", huge][..],
        &["spgemm", "graphs/karate.el", "--repeat", huge],
        &["bench", "spgemm", "--engines", "cpu", "--repeat", huge],
        &["tricount", "graphs/karate.el", "--repeat", "1000001"],
    ] {
        let e = fails(args, None);
        assert!(
            e.contains("--repeat") && e.contains("1..=1000000"),
            "{args:?}: {e}"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn worker_threads_that_cannot_start_are_an_error() {
    // Under a 400 MB address-space limit the system refuses 1,000 thread stacks. Without
    // --threads the pool used to start lazily, and rayon panicked at its first use (exit 101).
    // (`ulimit -u` does the same for other users; root is exempt from it.) `--threads 1000` is
    // capped at 4 per core, so the pool's size comes from rayon's variable here.
    let script = format!(
        "ulimit -v 400000 && RAYON_NUM_THREADS=1000 exec '{}' info graphs/karate.el",
        crate::util::gmcl_bin().display()
    );
    let r = Command::new("sh").args(["-c", &script]).output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{script}: {err}");
    assert!(err.contains("cannot start the worker threads"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn allocations_that_fail_end_the_run_cleanly() {
    // With the guard out of the way (GMCL_MEMORY_LIMIT=64G), an address-space limit makes
    // allocations fail mid-run. Before, Rust's "memory allocation of N bytes failed" aborted
    // (exit 134) and left the hidden temporary output beside the target.
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.el");
    let made = crate::util::gmcl(&["generate", "-s", "16", "-e", "16", "-o", s(&g)]);
    assert!(made.status.success());
    let runs: [&[&str]; 5] = [
        &["info", "g.el"],
        &["tricount", "g.el", "--per-vertex", "pv.txt"],
        &["spgemm", "g.el", "-o", "p.mtx"],
        &[
            "cluster", "--engine", "cpu", "g.el", "-o", "c.out", "--json", "c.json",
        ],
        &["generate", "-s", "18", "-e", "16", "-o", "gen.el"],
    ];
    let mut out_of_memory = 0;
    for args in runs {
        let mut failed = false;
        // The lowest fails tricount in a release build too, whose needs are smaller.
        for kib in [50_000, 150_000, 200_000, 300_000, 500_000] {
            let script = format!(
                "ulimit -v {kib} && exec '{}' -q {}",
                crate::util::gmcl_bin().display(),
                args.join(" ")
            );
            let r = Command::new("sh")
                .args(["-c", &script])
                .current_dir(dir.path())
                .env("GMCL_MEMORY_LIMIT", "64G")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&r.stderr);
            let code = r.status.code();
            assert!(matches!(code, Some(0 | 2)), "{script}: {code:?} {err}");
            assert!(!err.contains("panicked"), "{script}: {err}");
            if code == Some(2) {
                failed = true;
                assert!(err.contains("gmcl: error: "), "{script}: {err}");
            }
            if err.contains("gmcl: error: not enough memory: an allocation of ") {
                out_of_memory += 1;
                assert!(err.contains("available"), "{err}");
            }
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect();
            assert!(left.is_empty(), "{script} left {left:?}");
        }
        assert!(
            failed,
            "{args:?} never ran out of memory: the limits are too high"
        );
    }
    // At least one run failed in an allocation (not in a checked reservation).
    assert!(out_of_memory > 0);
}
