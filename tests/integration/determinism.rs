//! Determinism: the same input and options give byte-identical outputs across runs and thread
//! counts (`--threads 1`, `2`, `3`, the default), on R-MAT graphs made by `gmcl generate`.

use crate::util::s;
use std::path::{Path, PathBuf};

fn gmcl(args: &[&str]) -> Vec<u8> {
    let out = crate::util::cmd()
        .args(args)
        .output()
        .expect("the gmcl binary runs");
    assert!(
        out.status.success(),
        "gmcl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Thread options of the runs compared: the default twice, then 1, 2 and 3 threads.
const THREADS: [Option<&str>; 5] = [None, None, Some("1"), Some("2"), Some("3")];

/// Runs `args` (with `{out}` standing for a fresh output path) under every thread option and
/// returns the outputs (the file, or stdout when `file` is false).
fn outputs(dir: &Path, name: &str, args: &[&str], file: bool) -> Vec<Vec<u8>> {
    outputs_with(&THREADS, dir, name, args, file)
}

/// [`outputs`] under the given thread options.
fn outputs_with(
    threads: &[Option<&str>],
    dir: &Path,
    name: &str,
    args: &[&str],
    file: bool,
) -> Vec<Vec<u8>> {
    threads
        .iter()
        .enumerate()
        .map(|(k, threads)| {
            // `name.k`, or `stem.k.ext` for a name with an extension (the output's format).
            let out_name = match name.split_once('.') {
                Some((stem, ext)) => format!("{stem}.{k}.{ext}"),
                None => format!("{name}.{k}"),
            };
            let out: PathBuf = dir.join(out_name);
            let mut a: Vec<&str> = args
                .iter()
                .map(|&x| if x == "{out}" { s(&out) } else { x })
                .collect();
            if let Some(t) = threads {
                a.extend(["--threads", t]);
            }
            a.push("-q");
            let stdout = gmcl(&a);
            if file {
                std::fs::read(&out).unwrap()
            } else {
                stdout
            }
        })
        .collect()
}

fn all_equal(what: &str, outs: &[Vec<u8>]) {
    assert!(!outs[0].is_empty(), "{what}: empty output");
    for (k, o) in outs.iter().enumerate() {
        assert!(
            o == &outs[0],
            "{what}: run {k} differs from run 0 (runs: {THREADS:?} threads)"
        );
    }
}

fn rmat(dir: &Path, name: &str, scale: &str, ef: &str) -> PathBuf {
    let g = dir.join(name);
    gmcl(&[
        "generate",
        "-s",
        scale,
        "-e",
        ef,
        "--seed",
        "3",
        "-q",
        "-o",
        s(&g),
    ]);
    g
}

#[test]
fn clusters_are_byte_identical_across_runs_threads_and_batches() {
    let dir = tempfile::tempdir().unwrap();
    let g = rmat(dir.path(), "g.el", "11", "8");
    let args = ["cluster", s(&g), "--engine", "cpu", "-o", "{out}"];
    let outs = outputs(dir.path(), "c", &args, true);
    all_equal("cluster", &outs);
    assert!(
        outs[0].iter().filter(|&&b| b == b'\n').count() > 10,
        "a non-trivial clustering"
    );
    // Expansion in many small batches gives the same clusters.
    let mut small = args.to_vec();
    small.extend(["--batch-entries", "4096"]);
    let few = [Some("1"), Some("3")];
    let batched = outputs_with(&few, dir.path(), "b", &small, true);
    all_equal("cluster in batches", &batched);
    assert!(batched[0] == outs[0], "batches change the clusters");
    // f64 too.
    let mut f64_args = args.to_vec();
    f64_args.extend(["--precision", "f64"]);
    all_equal(
        "cluster f64",
        &outputs_with(&few, dir.path(), "d", &f64_args, true),
    );
}

#[test]
fn triangle_counts_and_per_vertex_files_are_identical() {
    let dir = tempfile::tempdir().unwrap();
    let g = rmat(dir.path(), "g.el", "14", "16");
    for method in ["merge", "spgemm"] {
        let args = [
            "tricount",
            s(&g),
            "--engine",
            "cpu",
            "--method",
            method,
            "--per-vertex",
            "{out}",
        ];
        let per_vertex = outputs(dir.path(), method, &args, true);
        all_equal(&format!("tricount {method} per vertex"), &per_vertex);
        let counts = outputs(dir.path(), method, &args[..6], false);
        all_equal(&format!("tricount {method}"), &counts);
        // Each triangle is counted at its three vertices.
        let total: u64 = String::from_utf8_lossy(&counts[0]).trim().parse().unwrap();
        let sum: u64 = String::from_utf8_lossy(&per_vertex[0])
            .lines()
            .map(|l| l.split('\t').nth(1).unwrap().parse::<u64>().unwrap())
            .sum();
        assert!(total > 0);
        assert_eq!(sum, 3 * total);
    }
    // Both methods agree byte for byte.
    assert_eq!(
        std::fs::read(dir.path().join("merge.0")).unwrap(),
        std::fs::read(dir.path().join("spgemm.0")).unwrap()
    );
}

#[test]
fn products_are_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let g = rmat(dir.path(), "g.el", "11", "8");
    let args = ["spgemm", s(&g), "--engine", "cpu", "-o", "{out}"];
    all_equal("spgemm", &outputs(dir.path(), "p.mtx", &args, true));
}
