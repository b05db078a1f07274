//! Inputs that used to give a quietly wrong answer, or to run without bound, through the real
//! binary: each is now read as its format's owner reads it or refused naming file and line
//! (docs/hardening.md).

use crate::util::{gmcl, ok};
use std::path::{Path, PathBuf};
use std::process::Output;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs gmcl, expects exit 2 and returns stderr.
fn refused(args: &[&str]) -> String {
    let out = gmcl(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "gmcl {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn a_weight_beyond_f32_is_refused_under_f32_and_read_under_f64() {
    let dir = tempfile::tempdir().unwrap();
    let g = write(dir.path(), "g.wel", "0 1 1\n1 2 1e39\n2 0 1\n2 3 1\n");
    let g = g.to_str().unwrap();
    let err = refused(&["cluster", g, "--engine", "cpu"]);
    assert!(
        err.contains("g.wel:2: weight 1e39 does not fit the value type f32"),
        "{err}"
    );
    assert!(err.contains("--precision f64"), "{err}");
    ok(&["cluster", g, "--engine", "cpu", "--precision", "f64"]);
    let err = refused(&["spgemm", g, "--engine", "cpu", "--precision", "f32"]);
    assert!(err.contains("g.wel:2:"), "{err}");
    ok(&["spgemm", g, "--engine", "cpu"]);
}

#[test]
fn a_proc_file_of_size_zero_is_read() {
    let p = "/proc/sys/net/ipv4/ip_local_port_range";
    let Ok(text) = std::fs::read_to_string(p) else {
        eprintln!("{p} cannot be read here; skipped");
        return;
    };
    assert_eq!(std::fs::metadata(p).unwrap().len(), 0, "not a size-0 file");
    let out = ok(&["info", p, "--format", "snap", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // One line, two port numbers: one edge.
    assert_eq!(text.split_whitespace().count(), 2, "{text}");
    assert_eq!(v["edges"], 1, "{out}");
}

#[test]
fn a_matrix_market_file_read_as_snap_is_refused() {
    let karate = crate::util::repo("graphs/karate.mtx");
    let err = refused(&["info", karate.to_str().unwrap(), "--format", "snap"]);
    assert!(
        err.contains("karate.mtx:1: this is a Matrix Market file"),
        "{err}"
    );
    assert!(err.contains("--format mtx"), "{err}");
}

#[test]
fn a_cut_off_last_line_is_refused_and_a_complete_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, text, line) in [
        ("cut.el", "0 1\n1 2\n2 3 ", 3),
        ("cut.txt", "0 1\n1 2\n2 3 ", 3),
        ("cut.abc", "a\tb\t1\nb\tc\t", 2),
    ] {
        let p = write(d, name, text);
        let err = refused(&["info", p.to_str().unwrap()]);
        assert!(
            err.contains(&format!("{name}:{line}: the last line has no newline")),
            "{err}"
        );
        assert!(err.contains("cut off"), "{err}");
    }
    let p = write(d, "whole.el", "0 1\n1 2\n2 3");
    ok(&["info", p.to_str().unwrap()]);
}

#[test]
fn a_symmetric_matrix_listing_both_triangles_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n";
    let both = write(dir.path(), "both.mtx", &format!("{h}2 1 5\n1 2 5\n3 3 1\n"));
    let err = refused(&["spgemm", both.to_str().unwrap(), "--engine", "cpu"]);
    assert!(
        err.contains("both.mtx:4: entry (1, 2) is above the diagonal"),
        "{err}"
    );
    // One triangle, either one, is read with its mirror: the same product.
    let lower = write(
        dir.path(),
        "lower.mtx",
        &format!("{h}2 1 5\n3 1 2\n3 3 1\n"),
    );
    let upper = write(
        dir.path(),
        "upper.mtx",
        &format!("{h}1 2 5\n1 3 2\n3 3 1\n"),
    );
    let product = |p: &Path| {
        let out = dir.path().join("c.mtx");
        ok(&[
            "spgemm",
            p.to_str().unwrap(),
            "--engine",
            "cpu",
            "-o",
            out.to_str().unwrap(),
        ]);
        std::fs::read_to_string(out).unwrap()
    };
    assert_eq!(product(&lower), product(&upper));
}

#[test]
fn a_fraction_in_an_integer_matrix_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n";
    let p = write(dir.path(), "i.mtx", &format!("{h}1 1 2\n1 2 1.5\n"));
    let err = refused(&["info", p.to_str().unwrap()]);
    assert!(
        err.contains("i.mtx:4: value '1.5' is not an integer"),
        "{err}"
    );
    let p = write(dir.path(), "j.mtx", &format!("{h}1 1 2\n1 2 -3\n"));
    ok(&["info", p.to_str().unwrap()]);
}

/// Runs gmcl with `envs` and waits at most `limit`; returns the output.
fn run_within(args: &[&str], envs: &[(&str, &str)], limit: std::time::Duration) -> Output {
    let mut child = crate::util::cmd()
        .args(args)
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gmcl {args:?} ran past {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_endless_input_is_refused_by_its_name_then_by_the_memory_limit() {
    let limit = std::time::Duration::from_secs(20);
    // The format is settled before a byte is read.
    let out = run_within(&["info", "/dev/zero"], &[], limit);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/dev/zero: cannot tell the format"), "{err}");
    // Read as an edge list, it is read no further than the memory limit.
    let out = run_within(
        &["info", "/dev/zero", "--format", "el"],
        &[("GMCL_MEMORY_LIMIT", "50000000")],
        limit,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/dev/zero: the input is not a regular file (a pipe or a device) and has sent more than 50000000 bytes"),
        "{err}"
    );
}

#[test]
fn labels_chosen_to_collide_are_read_fast() {
    // 300,000 labels of 16 bytes differing only in bytes 12 to 15: with the unkeyed hash they
    // shared a bucket and took about two minutes to read; a keyed hash takes a fraction of a
    // second (the bound is generous for a loaded machine).
    let dir = tempfile::tempdir().unwrap();
    let label = |i: u32| {
        let tail: String = [1, 26, 676, 17576]
            .iter()
            .map(|d| (b'a' + (i / d % 26) as u8) as char)
            .collect();
        format!("node-label-x{tail}")
    };
    let mut text = String::new();
    for k in 0..150_000 {
        text.push_str(&format!("{}\t{}\n", label(2 * k), label(2 * k + 1)));
    }
    let p = write(dir.path(), "flood.abc", &text);
    let start = std::time::Instant::now();
    let out = run_within(
        &["info", p.to_str().unwrap(), "--json"],
        &[],
        std::time::Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["vertices"], 300_000);
}

#[test]
fn snap_columns_past_the_target_are_skipped_and_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let signed = "# Directed graph\n# FromNodeId\tToNodeId\tSign\n30\t1\t-1\n1\t2\t1\n2\t30\t1\n";
    let g = write(dir.path(), "signed.txt", signed);
    let g = g.to_str().unwrap();
    let said = "signed.txt: line 3 has 3 columns; SNAP text is read as source and target";
    let out = gmcl(&["info", g, "--json"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches(said).count(), 1, "{err}");
    assert!(err.contains("--format wel"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["edges"], 3, "{v}");
    // Each file read says it, under every command; --quiet says nothing.
    let out = gmcl(&["spgemm", g, g, "--engine", "cpu", "-o", "-"]);
    assert_eq!(stderr(&out).matches(said).count(), 2, "{}", stderr(&out));
    let out = gmcl(&["cluster", g, "--engine", "cpu", "-q"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        stderr(&out)
    );
    // Compressed SNAP text is looked at decompressed.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, signed.as_bytes()).unwrap();
    let gz = dir.path().join("signed.txt.gz");
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let out = gmcl(&["tricount", gz.to_str().unwrap(), "--engine", "cpu"]);
    assert!(
        stderr(&out).contains("signed.txt.gz: line 3 has 3 columns"),
        "{}",
        stderr(&out)
    );
    // Two columns, or the columns read as weights: nothing to say.
    let plain = write(dir.path(), "plain.txt", "# c\n30 1\n1 2\n");
    let out = gmcl(&["info", plain.to_str().unwrap()]);
    assert!(!stderr(&out).contains("columns"), "{}", stderr(&out));
    let out = gmcl(&["info", g, "--format", "wel"]);
    assert!(
        out.status.success() && !stderr(&out).contains("columns"),
        "{}",
        stderr(&out)
    );
}
