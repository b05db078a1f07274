//! Helpers shared by the integration tests: the `gmcl` binary, files of the repository, the GPU.
//!
//! Test binaries built on one machine may run on another (the GPU machine has no Rust): there
//! `GMCL_BIN` names the `gmcl` binary and `GMCL_ROOT` the repository, in place of the paths of
//! the machine that built them.

#![allow(dead_code)] // each test binary that includes this file uses a part of it

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

/// The `gmcl` binary under test.
pub fn gmcl_bin() -> PathBuf {
    std::env::var_os("GMCL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gmcl")))
}

/// A command running the `gmcl` binary.
pub fn cmd() -> Command {
    Command::new(gmcl_bin())
}

/// Runs `gmcl` with `args` and returns what it did.
pub fn gmcl(args: &[&str]) -> Output {
    cmd().args(args).output().expect("the gmcl binary runs")
}

/// Runs `gmcl` with `args`, which must succeed; returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = gmcl(args);
    assert!(
        out.status.success(),
        "gmcl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs `gmcl` with `args`, which must print one JSON value; returns it.
pub fn json(args: &[&str]) -> serde_json::Value {
    let text = ok(args);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Runs `gmcl` with `args`, which must fail with status 2 (bad input or usage) without a panic;
/// returns its stderr.
pub fn fails(args: &[&str]) -> String {
    let out = gmcl(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "gmcl {args:?}: {err}");
    assert!(!err.contains("panicked"), "gmcl {args:?} panicked: {err}");
    err
}

/// Writes `gmcl generate`'s R-MAT graph with `options` (`--scale`, `--seed`, `--undirected`, ...)
/// to `out`, which it returns; the run must succeed.
pub fn generated(out: std::path::PathBuf, options: &[&str]) -> std::path::PathBuf {
    let mut args = vec!["generate"];
    args.extend_from_slice(options);
    args.extend_from_slice(&["-o", s(&out), "-q"]);
    ok(&args);
    out
}

/// A path as the `&str` an argument list takes.
pub fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The path of `rel`, a file of the repository (such as `graphs/karate.el`).
pub fn repo(rel: &str) -> PathBuf {
    std::env::var_os("GMCL_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join(rel)
}

/// The GPU, or `None` (after saying why) where none is usable; with `GMCL_REQUIRE_GPU=1` (set on
/// the GPU machine) a missing GPU fails the test instead.
pub fn gpu() -> Option<Arc<gmcl::gpu::Gpu>> {
    match gmcl::gpu::device() {
        Ok(g) => Some(g),
        Err(why) => {
            assert!(
                std::env::var("GMCL_REQUIRE_GPU").map_or(true, |v| v != "1"),
                "GMCL_REQUIRE_GPU=1 but no GPU is usable: {why}"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// Runs `gmcl args` with `input` on its standard input.
pub fn with_stdin(args: &[&str], input: &[u8], env: &[(&str, &str)]) -> std::process::Output {
    use std::io::Write;
    let mut child = crate::util::cmd()
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A command refusing at once may close its end first: that is no failure of the test.
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}
