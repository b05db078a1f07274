//! The distributed runs (`--features mpi`): `mpirun --oversubscribe -n P gmcl ...` for P = 1 to
//! 4 and 8, each output compared with the single-process run's, and failures reported once.

mod interrupt;
mod labels;
mod mcl;
mod npz;
mod tiny;

use crate::util::{generated, gmcl, gmcl_bin, repo, s};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The rank counts an output is compared on.
const RANKS: &[usize] = &[1, 2, 3, 4];

/// [`RANKS`] and 8 ranks: more ranks than a small graph has rows for some, and 4 ranks to a
/// core on CI's 2 cores (so kept to the cases that prove the most for their time).
const RANKS_TO_8: &[usize] = &[1, 2, 3, 4, 8];

/// `mpirun` with what every launch of the tests needs: permission to run as root (CI runs as
/// root; OpenMPI refuses it unless told both variables) and a session folder of its own under
/// `session` (launches at once share `/tmp/ompi.HOST.UID` otherwise, which one that ends may
/// remove while another is creating it: "mkdir ... File exists").
fn launcher(session: &Path) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_orte_tmpdir_base", session)
        .env("PRTE_MCA_prte_tmpdir_base", session);
    c
}

/// Runs `gmcl args` on `ranks` MPI ranks, with `env` set on every rank.
fn mpirun(ranks: usize, env: &[(&str, &str)], args: &[&str]) -> Output {
    let session = tempfile::tempdir().expect("a temporary folder for mpirun's session");
    let mut c = launcher(session.path());
    c.args(["--oversubscribe", "-n", &ranks.to_string()]);
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

/// What a run printed and wrote: its stdout, and the bytes of each of its output files.
type Outputs = (String, Vec<Vec<u8>>);

/// Runs `gmcl args` in one process (with `single_extra` after `args`), then on each rank count
/// in `ranks` with each of `stages` (`GMCL_DIST_STAGE`), and asserts that every run succeeds,
/// prints the single-process stdout and writes the single-process bytes to every output. An
/// argument `@name` stands for an output file: a path of its own in `dir` for each run, ending
/// in `name` (so that its extension, which picks the format, stays). Returns the single-process
/// outputs, for the caller to check that they say something.
fn assert_same_as_single(
    dir: &Path,
    args: &[&str],
    single_extra: &[&str],
    ranks: &[usize],
    stages: &[&str],
) -> Outputs {
    // The arguments of one run, tagged `tag`, and its output files.
    let run = |tag: &str| -> (Vec<String>, Vec<PathBuf>) {
        let mut outputs = Vec::new();
        let args = args
            .iter()
            .map(|a| match a.strip_prefix('@') {
                Some(name) => {
                    let p = dir.join(format!("{tag}-{name}"));
                    outputs.push(p.clone());
                    p.to_str().unwrap().to_string()
                }
                None => a.to_string(),
            })
            .collect();
        (args, outputs)
    };
    // Each output's bytes; the file is removed, so that the next run cannot pass on a stale one.
    let read = |outputs: &[PathBuf], what: &str| -> Vec<Vec<u8>> {
        outputs
            .iter()
            .map(|p| {
                let b = std::fs::read(p).unwrap_or_else(|e| panic!("{what}: {}: {e}", p.display()));
                std::fs::remove_file(p).unwrap();
                b
            })
            .collect()
    };
    let (single, outputs) = run("single");
    let mut all: Vec<&str> = single.iter().map(String::as_str).collect();
    all.extend_from_slice(single_extra);
    let o = gmcl(&all);
    assert!(o.status.success(), "{all:?}: {}", text(&o.stderr));
    let want = (text(&o.stdout), read(&outputs, "one process"));
    for &p in ranks {
        for &stage in stages {
            let (args, outputs) = run(&format!("ranks{p}-stage{stage}"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = mpirun(p, &[("GMCL_DIST_STAGE", stage)], &args);
            let what = format!("{args:?} on {p} ranks, stage {stage}");
            assert!(o.status.success(), "{what}: {}", text(&o.stderr));
            assert_eq!(text(&o.stdout), want.0, "{what}");
            for (k, got) in read(&outputs, &what).iter().enumerate() {
                assert!(
                    *got == want.1[k],
                    "{what}: output {k} is not the single process's"
                );
            }
        }
    }
    want
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
fn tricount_on_1_to_8_ranks_equals_the_single_process_run() {
    let dir = tempfile::tempdir().unwrap();
    let rmat = generated(
        dir.path().join("rmat.el"),
        &["-s", "11", "-e", "8", "--seed", "5"],
    );
    let graphs = [repo("graphs/karate.el"), rmat, untidy_graph(dir.path())];
    for g in &graphs {
        let args = [
            "tricount",
            g.to_str().unwrap(),
            "--per-vertex",
            "@pv.tsv",
            "-q",
        ];
        // Default stages, and stages of a few entries (many rounds of both exchanges).
        let stages = ["16777216", "3"];
        let (count, _) = assert_same_as_single(dir.path(), &args, &[], RANKS_TO_8, &stages);
        assert_ne!(count.trim(), "0", "{}", g.display());
    }
}

/// `--engine gpu` on every rank: each rank intersects its rows on the GPU its local rank names
/// (two ranks share one GPU), with the single-process count and per-vertex file; without a
/// usable GPU, one message (exit 3) naming the rank.
#[test]
fn tricount_with_the_gpu_engine_on_each_rank() {
    let dir = tempfile::tempdir().unwrap();
    let g = untidy_graph(dir.path());
    let (count, per_vertex) = single(&g, &dir.path().join("single.tsv"));
    let has_gpu = crate::util::gpu().is_some();
    // (ranks, GMCL_DIST_STAGE, --method, the method that runs: none where it cannot).
    let cases = [
        (1, "16777216", "auto", Some("fused")),
        (2, "16777216", "auto", Some("fused")),
        // Rounds of 5 entries cannot hold the rows a rank needs: intersected in rounds.
        (2, "5", "auto", Some("merge")),
        (3, "40", "auto", None),
        (2, "16777216", "merge", Some("merge")),
        (3, "16777216", "fused", Some("fused")),
        (2, "5", "fused", None),
    ];
    for (ranks, stage, method, runs) in cases {
        let pv = dir.path().join(format!("pv-{ranks}-{stage}-{method}.tsv"));
        let o = mpirun(
            ranks,
            &[("GMCL_DIST_STAGE", stage)],
            &[
                "tricount",
                g.to_str().unwrap(),
                "--engine",
                "gpu",
                "--method",
                method,
                "--per-vertex",
                pv.to_str().unwrap(),
                "--json",
            ],
        );
        let err = text(&o.stderr);
        let what = format!("{ranks} ranks, stage {stage}, --method {method}");
        if has_gpu && (stage, method) == ("5", "fused") {
            // Asked for and impossible: one error, no output.
            assert_eq!(o.status.code(), Some(2), "{what}: {err}");
            assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
            assert!(err.contains("does not fit one exchange"), "{err}");
            assert!(!pv.exists(), "{what}");
        } else if has_gpu {
            assert!(o.status.success(), "{what}: {err}");
            let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
            assert_eq!(v["triangles"].to_string(), count.trim(), "{what}");
            assert_eq!(v["rank_engine"], "gpu", "{what}");
            assert_eq!(v["rank_engines"].as_array().unwrap().len(), ranks, "{what}");
            if let Some(m) = runs {
                assert_eq!(v["method"], m, "{what}");
            }
            if v["method"] == "fused" {
                let steps = v["steps"].as_array().unwrap();
                let names: Vec<_> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
                let mut want = vec!["upload", "rank", "orient", "exchange", "lay out", "count"];
                if v["exchange"] == "nccl" {
                    // The wait for NCCL's start, joined on a thread while the graph loaded.
                    want.insert(1, "join");
                }
                assert_eq!(names, want, "{what}");
                assert!(steps
                    .iter()
                    .all(|s| s["slowest"].as_f64() >= s["fastest"].as_f64()));
            }
            assert_eq!(std::fs::read(&pv).unwrap(), per_vertex, "{what}");
        } else {
            assert_eq!(o.status.code(), Some(3), "{what}: {err}");
            assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
            assert!(err.contains("the GPU engine cannot run"), "{err}");
            if ranks > 1 {
                assert!(err.contains(&format!("rank 0 of {ranks}")), "{err}");
            }
            assert!(!pv.exists(), "{what}");
        }
    }
}

/// `--exchange`: how the ranks' rows travel. `mpi` always works and is named in `--json`, and
/// is what `auto` takes for a graph this small (on GPUs of one host, the fused count's gathers
/// then go GPU to GPU: `ipc`);
/// `nccl` needs the GPU engine (a usage error with `--engine cpu`) and a GPU of its own on every
/// rank: without them one error naming the cause, and no output; with them every exchange,
/// however small (`GMCL_NCCL_MIN_WORDS=0`), goes GPU to GPU, with the single-process count and
/// per-vertex file.
#[test]
fn rows_travel_through_mpi_or_between_the_gpus_with_nccl() {
    let dir = tempfile::tempdir().unwrap();
    let g = untidy_graph(dir.path());
    let (count, per_vertex) = single(&g, &dir.path().join("single.tsv"));
    let staged = [("GMCL_NCCL_MIN_WORDS", "0"), ("GMCL_DIST_STAGE", "5")];
    let run_with = |env: &[(&str, &str)], exchange: &str, engine: &str| {
        let pv = dir
            .path()
            .join(format!("pv-{exchange}-{engine}-{}.tsv", env.len()));
        let o = mpirun(
            2,
            env,
            &[
                "tricount",
                g.to_str().unwrap(),
                "--engine",
                engine,
                "--exchange",
                exchange,
                "--per-vertex",
                pv.to_str().unwrap(),
                "--json",
            ],
        );
        (o, pv)
    };
    let run = |exchange: &str, engine: &str| run_with(&staged, exchange, engine);
    let counted = |o: &Output, pv: &Path, exchange: &str| {
        assert!(o.status.success(), "{exchange}: {}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
        assert_eq!(v["triangles"].to_string(), count.trim(), "{exchange}");
        assert_eq!(v["exchange"], exchange);
        assert!(v["exchanged_bytes"].as_u64().unwrap() > 0);
        assert_eq!(std::fs::read(pv).unwrap(), per_vertex, "{exchange}");
    };
    let (o, pv) = run("mpi", "auto");
    counted(&o, &pv, "mpi");
    if crate::util::gpu().is_some() {
        // A small input's one exchange costs less through MPI than NCCL's start: `auto` takes
        // MPI even where every rank has a GPU of its own, and the fused count's gathers then go
        // GPU to GPU (the ranks share the host); `mpi` keeps them in host memory.
        for (exchange, through) in [("auto", "ipc"), ("mpi", "mpi")] {
            let (o, pv) = run_with(&[], exchange, "gpu");
            counted(&o, &pv, through);
            let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
            assert_eq!(v["method"], "fused", "{exchange}");
        }
    }
    let (o, pv) = run("nccl", "cpu");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
    assert!(err.contains("it needs --engine gpu"), "{err}");
    assert!(!pv.exists());
    let (o, pv) = run("nccl", "gpu");
    if o.status.success() {
        counted(&o, &pv, "nccl");
    } else {
        // No GPU, no NCCL library, or both ranks on one GPU.
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(
            err.contains("--exchange nccl: NCCL cannot join the ranks' GPUs: "),
            "{err}"
        );
        let no_gpu = crate::util::gpu().is_none();
        assert!(!no_gpu || err.contains("rank 0 of 2: "), "{err}");
        assert!(!pv.exists());
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
    // Karate's blocks point into one another: every rank asks for rows.
    assert!(v["exchanged_bytes"].as_u64().unwrap() >= 3 * 4, "{out}");
    assert!(v["exchange_seconds"].as_f64().unwrap() >= 0.0, "{out}");
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
    for ranks in [1, 2, 3, 8] {
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
    let cases: [(&[&str], &str, i32); 4] = [
        (
            &[
                "tricount",
                "graphs/karate.el",
                "--method",
                "fused",
                "--engine",
                "cpu",
            ],
            "--method fused across ranks runs on every rank's GPU",
            3,
        ),
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
            "only tricount, spgemm and cluster run across MPI ranks",
            2,
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

/// A weighted matrix on vertices `0..n` (the last one listed, so that its size is `n`), with
/// repeated entries and self loops.
fn weighted(dir: &Path, name: &str, n: u64, seed: u64) -> PathBuf {
    let f = dir.join(name);
    let mut s = format!("# weighted, seed {seed}\n{} {} 0.5\n", n - 1, n / 2);
    let mut x = seed;
    for i in 0..900u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (u, v) = ((x >> 33) % n, (x >> 13) % n);
        s.push_str(&format!("{u} {v} {}.{}\n", i % 13, (x >> 50) % 1000));
        if i % 9 == 0 {
            s.push_str(&format!("{u} {v} -0.37\n{u} {u} 1e-3\n"));
        }
    }
    std::fs::write(&f, s).unwrap();
    f
}

/// Every output format, `.npz` too: rank 0 writes SciPy's archive in three passes (every
/// column index, the row offsets, every value), each streaming one array from the ranks.
#[test]
fn spgemm_on_1_to_8_ranks_writes_the_single_process_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = weighted(dir.path(), "a.wel", 101, 1);
    let b = weighted(dir.path(), "b.wel", 101, 2);
    let untidy = untidy_graph(dir.path());
    let karate = repo("graphs/karate.el");
    // Inputs, flags, the output's extension, the rank counts.
    type Case<'a> = (&'a [&'a Path], &'a [&'a str], &'a str, &'a [usize]);
    let cases: [Case; 8] = [
        (&[&a], &[], "mtx", RANKS),
        (&[&a, &b], &[], "wel", RANKS_TO_8),
        (&[&untidy], &["--symmetrize"], "mtx", RANKS),
        (&[&a, &b], &["--precision", "f32"], "mtx", RANKS),
        (&[&karate], &[], "wel", RANKS),
        (&[&a, &b], &[], "npz", RANKS_TO_8),
        (
            &[&untidy],
            &["--symmetrize", "--precision", "f32"],
            "npz",
            RANKS,
        ),
        (&[&karate], &[], "npz", RANKS_TO_8),
    ];
    for (inputs, flags, ext, ranks) in cases {
        let out = format!("@c.{ext}");
        let mut args: Vec<&str> = vec!["spgemm"];
        args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
        args.extend_from_slice(flags);
        args.extend(["-o", &out, "-q"]);
        // Default stages, and pieces of a few entries (many of each rank's block).
        let stages = ["16777216", "7"];
        let (_, want) = assert_same_as_single(dir.path(), &args, CPU, ranks, &stages);
        assert!(want[0].len() > 400, "{args:?}");
    }
    // C on stdout: Matrix Market, as in one process.
    let args = ["spgemm", a.to_str().unwrap(), "-o", "-", "-q"];
    let (stdout, _) = assert_same_as_single(dir.path(), &args, CPU, &[1, 2, 3], &["7"]);
    assert!(stdout.starts_with("%%MatrixMarket matrix coordinate real general"));
}

/// The single-process product on the CPU engine, which the ranks' products equal.
const CPU: &[&str] = &["--engine", "cpu"];

/// The entries of a Matrix Market file written by gmcl: `(row, column, value)`.
fn mtx_entries(path: &Path) -> Vec<(u64, u64, f64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// `--engine gpu` on every rank: each rank's rows of C made by gMAGNUS on the GPU its local
/// rank names (ranks sharing one GPU), the structure the single-process CPU product's and the
/// values within rounding; without a usable GPU, one message (exit 3) and no file.
#[test]
fn spgemm_with_the_gpu_engine_on_each_rank() {
    let dir = tempfile::tempdir().unwrap();
    let a = weighted(dir.path(), "a.wel", 101, 1);
    let b = weighted(dir.path(), "b.wel", 101, 2);
    let untidy = untidy_graph(dir.path());
    let has_gpu = crate::util::gpu().is_some();
    let cases: [(&[&Path], &[&str]); 2] = [(&[&a, &b], &[]), (&[&untidy], &["--symmetrize"])];
    for (inputs, flags) in cases {
        let mut args: Vec<&str> = vec!["spgemm"];
        args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
        args.extend_from_slice(flags);
        let want_path = dir.path().join("single.mtx");
        let mut single = args.clone();
        single.extend(["-o", want_path.to_str().unwrap(), "-q", "--engine", "cpu"]);
        let o = gmcl(&single);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let want = mtx_entries(&want_path);
        for (ranks, stage) in [(1, "16777216"), (2, "16777216"), (3, "7")] {
            let out = dir.path().join(format!("c-{ranks}-{stage}.mtx"));
            let mut run = args.clone();
            run.extend(["-o", out.to_str().unwrap(), "--engine", "gpu", "--json"]);
            let o = mpirun(ranks, &[("GMCL_DIST_STAGE", stage)], &run);
            let err = text(&o.stderr);
            let what = format!("{args:?} on {ranks} ranks, stage {stage}");
            if has_gpu {
                assert!(o.status.success(), "{what}: {err}");
                let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
                assert_eq!(v["rank_engine"], "gpu", "{what}");
                let got = mtx_entries(&out);
                assert_eq!(got.len(), want.len(), "{what}");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!((g.0, g.1), (w.0, w.1), "{what}");
                    assert!(
                        (g.2 - w.2).abs() <= 1e-9 * w.2.abs().max(1.0),
                        "{what}: {g:?} {w:?}"
                    );
                }
                std::fs::remove_file(&out).unwrap();
            } else {
                assert_eq!(o.status.code(), Some(3), "{what}: {err}");
                assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
                assert!(err.contains("the GPU engine cannot run"), "{err}");
                assert!(!out.exists(), "{what}");
            }
        }
    }
}

#[test]
fn spgemm_json_names_the_ranks_and_failures_are_reported_once() {
    let karate = repo("graphs/karate.el");
    let o = mpirun(
        3,
        &[],
        &["spgemm", karate.to_str().unwrap(), "--json", "-q"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let single = crate::util::json(&["spgemm", karate.to_str().unwrap(), "--json", "-q"]);
    for k in ["rows", "cols", "nnz", "intermediate_products"] {
        assert_eq!(v[k], single[k], "{k}");
    }
    assert_eq!(v["ranks"], 3);
    assert_eq!(v["parameters"]["ranks"], 3);
    assert_eq!(v["rank_engine"], "cpu");
    // Each step's slowest and fastest rank; nothing crosses to a GPU on the CPU engine.
    let steps = v["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["balance", "prepare", "multiply", "transfers"]);
    assert!(steps
        .iter()
        .all(|s| s["slowest"].as_f64() >= s["fastest"].as_f64()));
    assert_eq!(steps[3]["slowest"], 0.0);

    let cases: [(Vec<&str>, &str, i32); 2] = [
        (
            vec![
                "spgemm",
                karate.to_str().unwrap(),
                "-o",
                "/nonexistent/c.mtx",
            ],
            "rank 0 of 2: /nonexistent/c.mtx: cannot create output",
            2,
        ),
        (
            vec!["spgemm", "-", "--format", "el"],
            "the standard input ('-') cannot be read across ranks",
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

#[test]
fn spgemm_with_a_bad_line_on_the_last_rank_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.wel");
    let mut s: String = (0..300)
        .map(|i| format!("{i} {} 1.5\n", (i * 7 + 1) % 300))
        .collect();
    s.push_str("3 4 1e39\n");
    std::fs::write(&f, s).unwrap();
    for (ranks, name) in [(3, "c.mtx"), (3, "c.npz"), (8, "c.npz")] {
        let out = dir.path().join(name);
        let o = mpirun(
            ranks,
            &[],
            &[
                "spgemm",
                f.to_str().unwrap(),
                "--precision",
                "f32",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(
            err.contains(&format!("rank {} of {ranks}: ", ranks - 1)),
            "{err}"
        );
        assert!(
            err.contains("bad.wel:301: weight 1e39 does not fit the value type f32"),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}

/// A product that overflows f32 on the last rank's rows is one error naming the entry, on every
/// output format, and nothing is written.
#[test]
fn spgemm_that_overflows_f32_on_one_rank_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.wel");
    let mut lines: String = (0..300)
        .map(|i| format!("{i} {} 1.5\n", (i * 7 + 1) % 300))
        .collect();
    lines.push_str("299 299 1e30\n");
    std::fs::write(&f, lines).unwrap();
    for (ranks, name) in [(1, "c.mtx"), (3, "c.wel"), (3, "c.npz")] {
        let out = dir.path().join(name);
        let args = ["spgemm", s(&f), "--precision", "f32", "-o", s(&out)];
        let o = mpirun(ranks, &[], &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(
            err.contains("row 299, column 299 (counted from 0) is inf: the product overflows f32"),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}

/// `-o C.npz` that rank 0 cannot write (a link to `/dev/full`, written in place): its writes
/// fail in the middle of the first array, past the output's buffer, while the other ranks are
/// still sending; every rank takes part in every pass all the same, and the error is printed
/// once.
#[test]
fn spgemm_npz_that_rank_0_cannot_write_is_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let g = generated(
        dir.path().join("g.el"),
        &["-s", "11", "-e", "8", "--seed", "5"],
    );
    let out = dir.path().join("c.npz");
    std::os::unix::fs::symlink("/dev/full", &out).unwrap();
    // C's column indices alone (4 bytes each) overflow the output's buffer.
    let v = crate::util::json(&["spgemm", g.to_str().unwrap(), "--json", "-q"]);
    assert!(v["nnz"].as_u64().unwrap() > 1 << 18, "{v}");
    for (ranks, stage) in [(3, "16777216"), (3, "20000"), (8, "20000")] {
        let o = mpirun(
            ranks,
            &[("GMCL_DIST_STAGE", stage)],
            &["spgemm", g.to_str().unwrap(), "-o", out.to_str().unwrap()],
        );
        let err = text(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{ranks} ranks, stage {stage}: {err}"
        );
        assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
        assert!(err.contains(&format!("rank 0 of {ranks}: ")), "{err}");
        assert!(err.contains("c.npz: cannot write output"), "{err}");
        assert!(o.stdout.is_empty());
    }
    // The link, nothing beside it.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

/// A Matrix Market file of `rows x cols` with random real entries (one triangle when
/// symmetric), repeated entries and comments among them.
fn matrix_market(
    dir: &Path,
    name: &str,
    symmetry: &str,
    rows: u64,
    cols: u64,
    seed: u64,
) -> PathBuf {
    let mut x = seed;
    let mut body = String::new();
    let entries = 400;
    for k in 0..entries {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (mut i, mut j) = ((x >> 33) % rows + 1, (x >> 13) % cols + 1);
        if symmetry == "symmetric" && i < j {
            std::mem::swap(&mut i, &mut j);
        }
        body.push_str(&format!("{i} {j} {}.{}\n", k % 11, (x >> 50) % 997));
        if k % 97 == 0 {
            body.push_str("% a comment\n");
        }
    }
    let f = dir.join(name);
    std::fs::write(
        &f,
        format!("%%MatrixMarket matrix coordinate real {symmetry}\n% c\n{rows} {cols} {entries}\n{body}"),
    )
    .unwrap();
    f
}

#[test]
fn matrix_market_across_ranks_equals_the_single_process_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = matrix_market(dir.path(), "a.mtx", "general", 53, 71, 1);
    let b = matrix_market(dir.path(), "b.mtx", "general", 71, 29, 2);
    let s = matrix_market(dir.path(), "s.mtx", "symmetric", 61, 61, 3);
    let cases: [(&[&Path], &str); 3] = [(&[&a, &b], "mtx"), (&[&s], "wel"), (&[&s, &s], "mtx")];
    for (inputs, ext) in cases {
        let out = format!("@c.{ext}");
        let mut args: Vec<&str> = vec!["spgemm"];
        args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
        args.extend(["-o", &out, "-q"]);
        assert_same_as_single(dir.path(), &args, CPU, RANKS, &["5"]);
    }
    // Triangles of a Matrix Market graph, per vertex named from 1 as in the single-process file;
    // gzip-compressed too (`g.mtx.gz` is Matrix Market by the name under `.gz`).
    let gz = dir.path().join("karate.mtx.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, &std::fs::read(repo("graphs/karate.mtx")).unwrap()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    for (g, ranks) in [
        (repo("graphs/karate.mtx"), RANKS_TO_8),
        (s, RANKS),
        (gz.clone(), &[1, 2][..]),
    ] {
        let args = [
            "tricount",
            g.to_str().unwrap(),
            "--per-vertex",
            "@pv.tsv",
            "-q",
        ];
        assert_same_as_single(dir.path(), &args, &[], ranks, &["5"]);
    }
    let (_, files) = assert_same_as_single(
        dir.path(),
        &["cluster", gz.to_str().unwrap(), "-o", "@k.clusters", "-q"],
        &[],
        &[1, 2],
        &["5"],
    );
    let text = String::from_utf8_lossy(&files[0]);
    assert!(text.split_ascii_whitespace().any(|v| v == "34"), "{text}");
    assert!(!text.split_ascii_whitespace().any(|v| v == "0"), "{text}");
}
