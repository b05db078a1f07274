//! Running a case: each engine in turn, a warm-up whose result is checked against the
//! reference, then the timed runs.

use super::check::{compare, RawCsr, Verdict};
use super::cusparse::{self, Failure};
use super::{
    build_case, BenchOptions, CaseResult, CaseSpec, Engine, EngineRun, Engines, Outcome, Report,
    Source,
};
use gmcl::csr::Csr;
use gmcl::error::Result;
use gmcl::measure::{gflops, median};
use gmcl::scalar::Scalar;
use gmcl::spgemm::cpu::CpuEngine;
use gmcl::spgemm::gpu::GpuEngine;
use gmcl::spgemm::{intermediate_products, SpgemmOptions};
use std::time::Instant;

fn ms(seconds: f64) -> f64 {
    seconds * 1e3
}

/// Runs one engine: a warm-up whose result is returned, then `repeat` timed runs. `run`
/// returns C (when asked for) with its on-device and wall seconds.
fn timed<T>(
    repeat: usize,
    mut run: impl FnMut(bool) -> std::result::Result<(Option<T>, f64, f64), Failure>,
) -> std::result::Result<Timed<T>, Failure> {
    let (first, _, _) = run(true)?;
    let first = first.ok_or_else(|| Failure::new("warm-up", "no result"))?;
    let mut device = Vec::with_capacity(repeat);
    let mut wall = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let (_, d, w) = run(false)?;
        device.push(ms(d));
        wall.push(ms(w));
    }
    Ok(Timed {
        c: first,
        device_ms: device,
        wall_ms: wall,
    })
}

/// What [`timed`] measured: the warm-up's result and the timed runs' milliseconds.
struct Timed<T> {
    c: T,
    device_ms: Vec<f64>,
    wall_ms: Vec<f64>,
}

pub(super) fn counted_run(
    engine: Engine,
    variant: Option<String>,
    outcome: Outcome,
    c_nnz: u64,
    times: Vec<f64>,
    wall: Option<Vec<f64>>,
    products: u64,
) -> EngineRun {
    let counts = outcome.counts();
    let median_ms = if counts { median(&times) } else { None };
    EngineRun {
        engine,
        variant,
        outcome,
        c_nnz: Some(c_nnz),
        gflops: median_ms.map(|m| gflops(products, m / 1e3)),
        median_ms,
        wall_median_ms: if counts {
            wall.and_then(|w| median(&w))
        } else {
            None
        },
        times_ms: times,
    }
}

/// Checks `got` against the reference, or makes it the reference when there is none yet.
pub(super) fn judge<T: Scalar>(
    reference: &mut Option<(Csr<T>, String)>,
    got: RawCsr<T>,
    rel: f64,
) -> Outcome {
    match reference {
        Some((r, whose)) => match compare(r, &got, rel) {
            Verdict::Equal => Outcome::Ok,
            Verdict::Wrong(why) => Outcome::Wrong {
                reason: format!("differs from the {whose} result: {why}"),
            },
        },
        None => match got.into_csr() {
            Ok(c) => {
                *reference = Some((c, "first cuSPARSE".into()));
                Outcome::Reference
            }
            Err(reason) => Outcome::Wrong { reason },
        },
    }
}

/// Benchmarks one case on the opened engines.
pub fn run_case<T: Scalar>(
    spec: &CaseSpec,
    engines: &Engines,
    opts: &BenchOptions,
) -> Result<CaseResult> {
    let say = opts.progress;
    let built = Instant::now();
    let (a, b_own) = build_case::<T>(spec)?;
    let b = b_own.as_ref().unwrap_or(&a);
    let products = intermediate_products(&a, b)?;
    say(&format!(
        "{}: A {} x {} with {} nonzeros, B {} nonzeros, {} intermediate products (built in {:.1} s)",
        spec.name,
        a.nrows(),
        a.ncols(),
        a.nnz(),
        b.nnz(),
        products,
        built.elapsed().as_secs_f64()
    ));
    let mut result = CaseResult {
        name: spec.name.clone(),
        suite: spec.suite.into(),
        scale: spec.scale(),
        a_per_row: None,
        b_per_row: None,
        edge_factor: None,
        file: None,
        rows: a.nrows(),
        cols: b.ncols(),
        a_nnz: a.nnz() as u64,
        b_nnz: b.nnz() as u64,
        products,
        c_nnz: None,
        runs: Vec::new(),
        best_cusparse: None,
        best_cusparse_ms: None,
        speedup: None,
    };
    match &spec.source {
        Source::RmatPair {
            a_per_row,
            b_per_row,
            ..
        } => {
            result.a_per_row = Some(*a_per_row);
            result.b_per_row = Some(*b_per_row);
        }
        Source::Sym { edge_factor, .. } => result.edge_factor = Some(*edge_factor),
        Source::File(p) => result.file = Some(p.display().to_string()),
    }
    let repeat = opts.repeat.max(1);
    let rel = opts.tolerance;
    let mut reference: Option<(Csr<T>, String)> = None;
    if let Some(gpu) = &engines.gpu {
        let keep = engines.cpu || engines.cusparse.is_some();
        let run = gpu_run(gpu, &a, b, keep, repeat, products, &mut reference);
        say(&progress_line(&spec.name, &run));
        result.runs.push(run);
    }
    if engines.cpu {
        let run = cpu_run(&a, b, repeat, rel, products, &mut reference);
        say(&progress_line(&spec.name, &run));
        result.runs.push(run);
    }
    if let Some(cs) = &engines.cusparse {
        let case = Operands {
            name: &spec.name,
            a: &a,
            b,
            b_is_a: b_own.is_none(),
            products,
        };
        cusparse_runs(
            cs,
            &case,
            repeat,
            rel,
            say,
            &mut reference,
            &mut result.runs,
        );
    }
    // C's entries: the reference's, or gMAGNUS's count where it ran alone and kept no C.
    result.c_nnz = reference.as_ref().map(|(c, _)| c.nnz() as u64).or_else(|| {
        result
            .runs
            .iter()
            .find(|r| r.engine == Engine::Gpu)
            .and_then(|r| r.c_nnz)
    });
    result.summarise();
    Ok(result)
}

/// A case's operands as the engines' runs take them.
struct Operands<'a, T: Scalar> {
    name: &'a str,
    a: &'a Csr<T>,
    b: &'a Csr<T>,
    /// B is A (a square): cuSPARSE uploads it once.
    b_is_a: bool,
    products: u64,
}

/// gMAGNUS's run of a case: the warm-up's C becomes the reference when `keep` (another engine
/// is checked against it).
fn gpu_run<T: Scalar>(
    gpu: &GpuEngine,
    a: &Csr<T>,
    b: &Csr<T>,
    keep: bool,
    repeat: usize,
    products: u64,
    reference: &mut Option<(Csr<T>, String)>,
) -> EngineRun {
    let spgemm_opts = SpgemmOptions::default();
    // The warm-up keeps C when another engine is checked against it; otherwise, and in the
    // timed runs, each batch of C is dropped as it reaches the host, so that a product near
    // the host's memory (sym s20 ef8: 8e9 entries) needs it at most once.
    let r = timed(repeat, |warm| {
        let made = match warm && keep {
            true => gpu
                .multiply(a, b, &spgemm_opts)
                .map(|(c, st)| (Some(c), st)),
            false => gpu
                .multiply_batches(a, b, &spgemm_opts, |_, _| Ok(()))
                .map(|st| (None, st)),
        };
        made.map(|(c, st)| (warm.then_some((c, st.nnz)), st.device_seconds, st.seconds))
            .map_err(|e| Failure::new("gMAGNUS", e.to_string()))
    });
    match r {
        Ok(Timed {
            c: (c, nnz),
            device_ms: times,
            wall_ms: wall,
        }) => {
            *reference = c.map(|c| (c, "gpu".into()));
            counted_run(
                Engine::Gpu,
                None,
                Outcome::Reference,
                nnz,
                times,
                Some(wall),
                products,
            )
        }
        Err(f) => EngineRun::failed(Engine::Gpu, None, &f.stage, f.status),
    }
}

/// The CPU engine's run of a case, checked against the reference (or made it).
fn cpu_run<T: Scalar>(
    a: &Csr<T>,
    b: &Csr<T>,
    repeat: usize,
    rel: f64,
    products: u64,
    reference: &mut Option<(Csr<T>, String)>,
) -> EngineRun {
    let spgemm_opts = SpgemmOptions::default();
    let cpu = CpuEngine::default();
    let r = timed(repeat, |_| {
        let start = Instant::now();
        cpu.multiply(a, b, &spgemm_opts)
            .map(|c| {
                let s = start.elapsed().as_secs_f64();
                (Some(c), s, s)
            })
            .map_err(|e| Failure::new("CPU engine", e.to_string()))
    });
    match r {
        Ok(Timed {
            c,
            device_ms: times,
            ..
        }) => {
            let nnz = c.nnz() as u64;
            let outcome = match &*reference {
                None => {
                    *reference = Some((c, "cpu".into()));
                    Outcome::Reference
                }
                Some(_) => judge(reference, RawCsr::of(&c), rel),
            };
            counted_run(Engine::Cpu, None, outcome, nnz, times, None, products)
        }
        Err(f) => EngineRun::failed(Engine::Cpu, None, &f.stage, f.status),
    }
}

/// Every cuSPARSE algorithm's run of a case, each checked against the reference, told to `say`
/// and added to `runs`.
fn cusparse_runs<T: Scalar>(
    cs: &cusparse::Cusparse,
    case: &Operands<T>,
    repeat: usize,
    rel: f64,
    say: &dyn Fn(&str),
    reference: &mut Option<(Csr<T>, String)>,
    runs: &mut Vec<EngineRun>,
) {
    let uploaded = cs.upload("A", case.a).and_then(|da| {
        Ok((
            da,
            if !case.b_is_a {
                Some(cs.upload("B", case.b)?)
            } else {
                None
            },
        ))
    });
    match uploaded {
        Err(f) => {
            for alg in cusparse::ALGORITHMS {
                let run = EngineRun::failed(
                    Engine::Cusparse,
                    Some(alg.name()),
                    &f.stage,
                    f.status.clone(),
                );
                say(&progress_line(case.name, &run));
                runs.push(run);
            }
        }
        Ok((da, db)) => {
            let db_ref = db.as_ref().unwrap_or(&da);
            for alg in cusparse::ALGORITHMS {
                let variant = Some(alg.name());
                let warm = cs.multiply::<T>(&da, db_ref, alg, true);
                let run = match warm {
                    Err(f) => EngineRun::failed(Engine::Cusparse, variant, &f.stage, f.status),
                    Ok(p) => {
                        let nnz = p.nnz;
                        let outcome = match p.c {
                            Some(c) => judge(reference, c, rel),
                            None => Outcome::Wrong {
                                reason: "no result copied back".into(),
                            },
                        };
                        let mut times = Vec::new();
                        let mut failure = None;
                        if outcome.counts() {
                            for _ in 0..repeat {
                                match cs.multiply::<T>(&da, db_ref, alg, false) {
                                    Ok(p) => times.push(ms(p.seconds)),
                                    Err(f) => {
                                        failure = Some(f);
                                        break;
                                    }
                                }
                            }
                        }
                        match failure {
                            Some(f) => EngineRun::failed(
                                Engine::Cusparse,
                                variant,
                                &format!("{} (timed run {})", f.stage, times.len() + 1),
                                f.status,
                            ),
                            None => counted_run(
                                Engine::Cusparse,
                                variant,
                                outcome,
                                nnz,
                                times,
                                None,
                                case.products,
                            ),
                        }
                    }
                };
                say(&progress_line(case.name, &run));
                runs.push(run);
            }
            if let Some(db) = db {
                db.free();
            }
            da.free();
        }
    }
}

fn progress_line(case: &str, r: &EngineRun) -> String {
    let what = match (&r.outcome, r.median_ms) {
        (Outcome::Failed { stage, status }, _) => format!("FAILED: {status} in {stage}"),
        (Outcome::Wrong { reason }, _) => format!("WRONG: {reason}"),
        (_, Some(m)) => format!(
            "{m:.3} ms, {:.1} GFLOP/s, C.nnz {}",
            r.gflops.unwrap_or(0.0),
            r.c_nnz.unwrap_or(0)
        ),
        (_, None) => "no time".into(),
    };
    format!("{case}: {}: {what}", r.label())
}

/// Runs every case, in order, returning the report (its device and versions filled in).
/// `after_case` sees the report as it stands after each case (to save figures as they come).
pub fn run_all<T: Scalar>(
    cases: &[CaseSpec],
    engines: &Engines,
    engine_list: Vec<Engine>,
    opts: &BenchOptions,
    after_case: &mut dyn FnMut(&Report) -> Result<()>,
) -> Result<Report> {
    let mut report = Report::new(T::NAME, opts.repeat.max(1), engine_list, opts.tolerance);
    report.device = engines.device.clone();
    report.cusparse_version = engines.cusparse_version();
    for spec in cases {
        gmcl::interrupt::check()?;
        let r = run_case::<T>(spec, engines, opts)?;
        // A case cut short by an interrupt is not reported (its runs may have failed for it).
        gmcl::interrupt::check()?;
        report.cases.push(r);
        report.summarise();
        after_case(&report)?;
    }
    Ok(report)
}
