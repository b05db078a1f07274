//! GPU faults: a fault injected at each checked driver call in turn (allocations, copies,
//! launches, waits) makes the run fail with an error naming the stage, gives back all the device
//! memory it took, and leaves the GPU usable; `--engine auto` then finishes on the CPU engine
//! and says so. Two processes sharing the GPU both finish with the right answer.
//!
//! Without a usable GPU these tests say so and pass, unless `GMCL_REQUIRE_GPU=1` (set on the GPU
//! machine), where a missing GPU fails them.

#[path = "integration/util.rs"]
mod util;
use gmcl::generate::{self, RmatParams};
use gmcl::gpu::fault;
use gmcl::mcl::{self, MclParams};
use gmcl::spgemm::gpu::{GpuEngine, GpuTuning};
use gmcl::spgemm::{cpu::CpuEngine, EngineKind, SpgemmOptions};
use gmcl::tricount::{self, Method, Options, SimpleGraph};
use gmcl::{BuildOptions, Csr, Error};
use util::gpu;

fn rmat_edges(scale: u32, seed: u64) -> gmcl::EdgeList {
    let mut p = RmatParams::new(scale, 16 << scale);
    p.seed = seed;
    p.undirected = true;
    generate::generate(&p).unwrap()
}

/// Runs `work` with a fault at the 1st, 2nd, ... checked driver call until a run raises none;
/// each faulty run must fail with a GPU error that names a stage and give back its memory, and
/// the clean run must return `expected`. Returns the stages seen.
fn every_stage_fails_cleanly<R: PartialEq + std::fmt::Debug>(
    gpu: &gmcl::gpu::Gpu,
    expected: &R,
    mut work: impl FnMut() -> gmcl::Result<R>,
) -> Vec<String> {
    let baseline = gpu.pool_in_use().unwrap();
    let mut stages = Vec::new();
    for n in 1..10_000 {
        fault::inject_at(n);
        let r = work();
        let fired = fault::fired();
        fault::inject_at(0);
        if !fired {
            assert_eq!(&r.unwrap(), expected, "the run with no fault");
            return stages;
        }
        match r {
            Err(Error::Gpu { stage, message }) => {
                assert!(!stage.is_empty());
                assert!(message.contains(fault::INJECTED), "{stage}: {message}");
                stages.push(stage);
            }
            other => panic!("fault {n}: expected a GPU error, got {other:?}"),
        }
        assert_eq!(
            gpu.pool_in_use().unwrap(),
            baseline,
            "fault {n} at '{}' kept device memory",
            stages.last().unwrap()
        );
    }
    panic!("faults never stopped firing");
}

#[test]
fn each_stage_fails_cleanly_and_the_gpu_stays_usable() {
    let Some(gpu) = gpu() else { return };
    // SpGEMM: A² of a skewed R-MAT graph (light and heavy rows).
    let a: Csr<f64> = Csr::from_edges(
        &rmat_edges(11, 1),
        &BuildOptions {
            symmetrize: true,
            ..Default::default()
        },
    )
    .unwrap();
    let expected = CpuEngine::default()
        .multiply(&a, &a, &SpgemmOptions::default())
        .unwrap();
    // Heavy rows through the dense-row accumulator (the default routing), then through the
    // outer product and multisplit (dense rows off).
    for (dense_from, heavy_stage) in [(None, "dense_rows"), (Some(u64::MAX), "outer product")] {
        let engine = GpuEngine::open().unwrap().with_tuning(GpuTuning {
            dense_from,
            ..GpuTuning::default()
        });
        let stages = every_stage_fails_cleanly(&gpu, &expected.nnz(), || {
            let (c, _) = engine.multiply(&a, &a, &SpgemmOptions::default())?;
            Ok(c.nnz())
        });
        assert!(stages.len() > 20, "only {} checked calls", stages.len());
        assert!(
            stages.iter().any(|s| s.contains(heavy_stage)),
            "no '{heavy_stage}' stage among {stages:?}"
        );
    }

    // Triangle counting.
    let g = SimpleGraph::from_edges(rmat_edges(12, 2)).unwrap();
    let cpu = Options {
        engine: EngineKind::Cpu,
        per_vertex: true,
        ..Default::default()
    };
    let want = tricount::count(&g, &cpu).unwrap();
    let fused = Options {
        engine: EngineKind::Gpu,
        method: Method::Fused,
        per_vertex: true,
        ..Default::default()
    };
    let stages = every_stage_fails_cleanly(&gpu, &(want.triangles, want.per_vertex), || {
        let t = tricount::count(&g, &fused)?;
        Ok((t.triangles, t.per_vertex))
    });
    assert!(
        stages.iter().any(|s| s.contains("triangles_light")),
        "{stages:?}"
    );

    // MCL on the GPU engine (the first iterations' expansions).
    let (graph, _) = mcl::graph_from_edges::<f64>(&rmat_edges(9, 3)).unwrap();
    let params = |engine| MclParams {
        engine,
        max_iterations: 3,
        ..Default::default()
    };
    let want = mcl::cluster(&graph, &params(EngineKind::Cpu), &mut |_| {})
        .unwrap()
        .clusters;
    every_stage_fails_cleanly(&gpu, &want, || {
        Ok(mcl::cluster(&graph, &params(EngineKind::Gpu), &mut |_| {})?.clusters)
    });
}

fn gmcl(args: &[&str], fault_at: Option<u32>) -> std::process::Output {
    let mut c = util::cmd();
    c.args(args);
    if let Some(n) = fault_at {
        c.env("GMCL_GPU_FAULT", n.to_string());
    }
    c.output().unwrap()
}

/// A generated R-MAT graph of `scale` (edge factor 16, undirected) in `dir`.
fn generated(dir: &std::path::Path, scale: u32) -> String {
    let g = dir.join(format!("s{scale}.el"));
    let g = g.to_str().unwrap().to_string();
    let out = gmcl(
        &[
            "generate",
            "-s",
            &scale.to_string(),
            "-e",
            "16",
            "--undirected",
            "--seed",
            "5",
            "-o",
            &g,
            "-q",
        ],
        None,
    );
    assert!(out.status.success());
    g
}

/// Runs `args` under `auto` with a fault at each of the first checked calls in turn: every run
/// succeeds with `want`'s output (when given), and one whose fault fell on the work says once
/// that it finished on the CPU engine. Returns how many fell back.
///
/// The first checked calls may fall on the thread that opens the GPU early and pins the
/// upload's staging buffers, a step the upload takes again where it failed: such a run goes on
/// on the GPU.
fn falls_back_under_auto(args: &[&str], want: Option<&[u8]>, faults: u32) -> u32 {
    let mut fell_back = 0;
    for fault_at in 1..=faults {
        let out = gmcl(args, Some(fault_at));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}, fault {fault_at}: {err}");
        if let Some(want) = want {
            assert_eq!(out.stdout, want, "{args:?}, fault {fault_at}: {err}");
        }
        match err.matches("the GPU failed").count() {
            0 => assert!(
                !err.contains("CPU engine instead"),
                "fault {fault_at}: {err}"
            ),
            1 => {
                assert!(
                    err.contains("running on the CPU engine instead"),
                    "{args:?}, fault {fault_at}: {err}"
                );
                fell_back += 1;
            }
            _ => panic!("{args:?}, fault {fault_at}: the failure said more than once: {err}"),
        }
    }
    fell_back
}

#[test]
fn the_cli_falls_back_to_the_cpu_under_auto_and_fails_under_gpu() {
    let Some(_) = gpu() else { return };
    // `auto` takes the GPU only for work it pays on: on one thread, graphs of these scales.
    let dir = tempfile::tempdir().unwrap();
    let (tri, product, mcl) = (
        generated(dir.path(), 17),
        generated(dir.path(), 16),
        generated(dir.path(), 12),
    );
    let want = gmcl(&["tricount", &tri, "--engine", "cpu"], None);
    assert!(want.status.success());
    // Under `gpu` a fault that falls on the count fails the run (exit status 4).
    let mut failed = 0;
    for fault_at in 1..=8 {
        let out = gmcl(&["tricount", &tri, "--engine", "gpu"], Some(fault_at));
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => assert_eq!(out.stdout, want.stdout, "fault {fault_at}: {err}"),
            Some(4) => {
                assert!(err.contains(fault::INJECTED), "fault {fault_at}: {err}");
                assert!(out.stdout.is_empty(), "fault {fault_at}");
                failed += 1;
            }
            other => panic!("fault {fault_at}: exit status {other:?}: {err}"),
        }
    }
    assert!(failed >= 4, "{failed} of 8 faults fell on the count");
    let tricount = ["tricount", tri.as_str(), "--threads", "1"];
    let fell_back = falls_back_under_auto(&tricount, Some(&want.stdout), 8);
    assert!(fell_back >= 4, "{fell_back} of 8 faults fell on the count");
    let spgemm = [
        "spgemm",
        &product,
        "--threads",
        "1",
        "--engine",
        "auto",
        "--json",
    ];
    assert!(falls_back_under_auto(&spgemm, None, 5) >= 2);
    let out = gmcl(&spgemm, Some(5));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"engine\":\"cpu\""));
    let cluster = ["cluster", &mcl, "--threads", "1", "-o", "/dev/null"];
    assert!(falls_back_under_auto(&cluster, None, 5) >= 2);
}

#[test]
fn two_processes_share_the_gpu() {
    let Some(_) = gpu() else { return };
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.el");
    let g = g.to_str().unwrap();
    let st = gmcl(
        &[
            "generate",
            "--scale",
            "14",
            "--edge-factor",
            "16",
            "--undirected",
            "--seed",
            "5",
            "-o",
            g,
            "-q",
        ],
        None,
    );
    assert!(st.status.success());
    let cpu = gmcl(&["tricount", g, "--engine", "cpu"], None);
    let outputs: Vec<String> = (0..2)
        .map(|k| {
            dir.path()
                .join(format!("c{k}.mtx"))
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let cpu_c = dir.path().join("cpu.mtx");
    assert!(gmcl(
        &[
            "spgemm",
            g,
            "--symmetrize",
            "--engine",
            "cpu",
            "-o",
            cpu_c.to_str().unwrap(),
            "-q"
        ],
        None
    )
    .status
    .success());
    // Two products and two counts at once, on the one GPU.
    let children: Vec<_> = outputs
        .iter()
        .flat_map(|o| {
            [
                util::cmd()
                    .args([
                        "spgemm",
                        g,
                        "--symmetrize",
                        "--engine",
                        "gpu",
                        "-o",
                        o,
                        "-q",
                    ])
                    .spawn()
                    .unwrap(),
                util::cmd()
                    .args(["tricount", g, "--engine", "gpu", "--repeat", "20", "-q"])
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap(),
            ]
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        if !out.stdout.is_empty() {
            assert_eq!(out.stdout, cpu.stdout);
        }
    }
    let want = gmcl::io::load(&cpu_c, None).unwrap();
    for o in &outputs {
        let got = gmcl::io::load(std::path::Path::new(o), None).unwrap();
        assert_eq!(got.edges.edges, want.edges.edges, "{o}");
    }
}
