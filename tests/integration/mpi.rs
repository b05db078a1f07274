//! The distributed runs (`--features mpi`): `mpirun --oversubscribe -n P gmcl ...` for P = 1 to
//! 4, each output compared with the single-process run's, and failures reported once.

mod mcl;

use crate::util::{gmcl, gmcl_bin, repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `gmcl args` on `ranks` MPI ranks, with `env` set on every rank.
fn mpirun(ranks: usize, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-n", &ranks.to_string()])
        // CI runs as root; OpenMPI refuses that unless told both of these.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (k, v) in env {
        c.args(["-x", &format!("{k}={v}")]);
    }
    c.arg(gmcl_bin()).args(args);
    c.output()
        .expect("mpirun runs (the mpi feature needs OpenMPI's mpirun on the PATH)")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A graph with what the simple graph drops (self loops, repeats both ways, weights), comments
/// and CRLF line ends, on vertex ids whose count no rank count divides.
fn untidy_graph(dir: &Path) -> PathBuf {
    let f = dir.join("untidy.wel");
    let mut s = String::from("# weighted, untidy\r\n");
    let mut x = 12345u64;
    for i in 0..700u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (u, v) = ((x >> 33) % 97, (x >> 13) % 97);
        s.push_str(&format!("{u}\t{v}\t{}.5\r\n", i % 7));
        if i % 5 == 0 {
            s.push_str(&format!("{v} {u} 1\n{u} {u} 2\n"));
        }
    }
    std::fs::write(&f, s).unwrap();
    f
}

/// The triangle count and per-vertex file of the single-process run.
fn single(input: &Path, pv: &Path) -> (String, Vec<u8>) {
    let o = gmcl(&[
        "tricount",
        input.to_str().unwrap(),
        "--per-vertex",
        pv.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    (text(&o.stdout), std::fs::read(pv).unwrap())
}

#[test]
fn tricount_on_1_to_4_ranks_equals_the_single_process_run() {
    let dir = tempfile::tempdir().unwrap();
    let rmat = dir.path().join("rmat.el");
    let o = gmcl(&[
        "generate",
        "--scale",
        "11",
        "--edge-factor",
        "8",
        "--seed",
        "5",
        "-o",
        rmat.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let graphs = [repo("graphs/karate.el"), rmat, untidy_graph(dir.path())];
    for g in &graphs {
        let (count, per_vertex) = single(g, &dir.path().join("single.tsv"));
        assert_ne!(count.trim(), "0", "{}", g.display());
        for ranks in 1..=4 {
            // Default stages, and stages of a few entries (many rounds of both exchanges).
            for stage in ["16777216", "3"] {
                let pv = dir.path().join(format!("pv-{ranks}-{stage}.tsv"));
                let o = mpirun(
                    ranks,
                    &[("GMCL_DIST_STAGE", stage)],
                    &[
                        "tricount",
                        g.to_str().unwrap(),
                        "--per-vertex",
                        pv.to_str().unwrap(),
                        "-q",
                    ],
                );
                let what = format!("{} on {ranks} ranks, stage {stage}", g.display());
                assert!(o.status.success(), "{what}: {}", text(&o.stderr));
                assert_eq!(text(&o.stdout), count, "{what}");
                assert_eq!(std::fs::read(&pv).unwrap(), per_vertex, "{what}");
            }
        }
    }
}

#[test]
fn json_names_the_ranks_and_their_engine() {
    let o = mpirun(
        3,
        &[],
        &[
            "tricount",
            repo("graphs/karate.el").to_str().unwrap(),
            "--json",
            "-q",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Printed once, by rank 0.
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["triangles"], 45);
    assert_eq!(v["vertices"], 34);
    assert_eq!(v["edges"], 78);
    assert_eq!(v["ranks"], 3);
    assert_eq!(v["rank_engine"], "cpu");
}

#[test]
fn a_bad_line_on_one_rank_stops_every_rank_with_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.el");
    let mut s = String::new();
    for i in 0..400 {
        s.push_str(&format!("{} {}\n", i, (i * 7 + 1) % 400));
    }
    // Near the end: in the last rank's part.
    s.push_str("3 x\n1 2\n");
    std::fs::write(&f, s).unwrap();
    let pv = dir.path().join("pv.tsv");
    for ranks in [1, 2, 3] {
        let o = mpirun(
            ranks,
            &[],
            &[
                "tricount",
                f.to_str().unwrap(),
                "--per-vertex",
                pv.to_str().unwrap(),
            ],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(err.contains("bad.el:401: not an integer: 'x'"), "{err}");
        if ranks > 1 {
            assert!(
                err.contains(&format!("rank {} of {ranks}", ranks - 1)),
                "{err}"
            );
        }
        assert!(o.stdout.is_empty());
        // No output, partial or whole, under the name or beside it.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}

#[test]
fn what_does_not_run_across_ranks_yet_is_refused_once() {
    let cases: [(&[&str], &str, i32); 5] = [
        (
            &[
                "tricount",
                "graphs/karate.el",
                "--per-vertex",
                "/nonexistent/pv.tsv",
            ],
            "rank 0 of 2: /nonexistent/pv.tsv: cannot create output",
            2,
        ),
        (
            &["info", "graphs/karate.el"],
            "only tricount and cluster run across MPI ranks",
            2,
        ),
        (
            &["tricount", "graphs/lesmis.abc"],
            "abc format cannot be read across ranks",
            2,
        ),
        (
            &["tricount", "graphs/karate.el", "--engine", "gpu"],
            "GPU engine does not run",
            3,
        ),
        (
            &["tricount", "graphs/karate.el", "--method", "spgemm"],
            "--method spgemm",
            2,
        ),
    ];
    for (args, message, code) in cases {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if a.starts_with("graphs/") {
                    repo(a).to_string_lossy().into_owned()
                } else {
                    a.to_string()
                }
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = mpirun(2, &[], &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
}
