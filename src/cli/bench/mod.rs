//! `gmcl bench spgemm`: gMAGNUS against cuSPARSE (and the CPU engine) on the gMAGNUS paper's
//! R-MAT products, symmetric squares, and any matrices given, every result checked before any
//! time counts.
//!
//! For each case the engines run in turn (GPU engine, CPU engine, then each cuSPARSE
//! algorithm): one warm-up whose result is kept and checked, then `repeat` timed runs whose
//! median is reported. The GPU engine's result is the reference (the CPU engine's when the GPU
//! engine did not run); every other result must have the same structure and values within a
//! relative tolerance ([`check`]), or it is reported WRONG and its times are not counted.
//! cuSPARSE failures are recorded with their status, never dropped.

mod cases;
pub mod check;
mod command;
pub mod cusparse;
pub mod plot;
pub mod report;
mod runs;

pub use cases::{build_case, default_max_scale, suite_cases, CaseSpec, Source, Suite};
pub use command::{run, BenchArgs};
pub use runs::run_all;

use check::default_tolerance;
use gmcl::error::{Error, Result};
use gmcl::scalar::Scalar;
use gmcl::spgemm::gpu::GpuEngine;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// An engine the benchmark can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// gMAGNUS on the GPU.
    Gpu,
    /// cusparseSpGEMM, every algorithm.
    Cusparse,
    /// gmcl's CPU engine.
    Cpu,
}

impl Engine {
    /// "gpu", "cusparse", "cpu".
    pub fn name(self) -> &'static str {
        match self {
            Engine::Gpu => "gpu",
            Engine::Cusparse => "cusparse",
            Engine::Cpu => "cpu",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gpu" => Ok(Engine::Gpu),
            "cusparse" => Ok(Engine::Cusparse),
            "cpu" => Ok(Engine::Cpu),
            other => Err(Error::Invalid(format!(
                "unknown engine '{other}': use gpu, cusparse or cpu"
            ))),
        }
    }
}

/// Parses "gpu,cusparse": engines in the order given, each once.
pub fn parse_engines(list: &str) -> Result<Vec<Engine>> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.trim().is_empty()) {
        let e: Engine = part.parse()?;
        if !out.contains(&e) {
            out.push(e);
        }
    }
    if out.is_empty() {
        return Err(Error::Invalid("--engines lists no engine".into()));
    }
    Ok(out)
}

/// The geometric mean; `None` when empty.
pub fn geomean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

/// What became of one engine (or one cuSPARSE algorithm) on one case.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Outcome {
    /// Its result is the one the others were checked against.
    Reference,
    /// Its result equals the reference.
    Ok,
    /// It did not complete: the step and the status.
    Failed {
        /// The step that failed.
        stage: String,
        /// The status or error.
        status: String,
    },
    /// It completed with a result that differs from the reference.
    Wrong {
        /// How it differs.
        reason: String,
    },
}

impl Outcome {
    /// Its times count: the result is the reference or equals it.
    pub fn counts(&self) -> bool {
        matches!(self, Outcome::Reference | Outcome::Ok)
    }
}

/// One engine's (or cuSPARSE algorithm's) figures on one case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineRun {
    /// "gpu", "cusparse" or "cpu".
    pub engine: Engine,
    /// The cuSPARSE algorithm ("ALG1", "ALG2", "ALG3/0.1"); `None` for gmcl's engines.
    pub variant: Option<String>,
    /// What became of it.
    pub outcome: Outcome,
    /// Entries of C it produced.
    pub c_nnz: Option<u64>,
    /// Milliseconds of each timed run (on the GPU: setup through numeric with C allocated;
    /// for cuSPARSE: work estimation through copy, every allocation included).
    pub times_ms: Vec<f64>,
    /// Median of `times_ms`, when the result counts.
    pub median_ms: Option<f64>,
    /// GFLOP/s at the median, when the result counts.
    pub gflops: Option<f64>,
    /// The GPU engine only: median wall time including the copies to and from the device.
    pub wall_median_ms: Option<f64>,
}

impl EngineRun {
    fn failed(engine: Engine, variant: Option<String>, stage: &str, status: String) -> Self {
        EngineRun {
            engine,
            variant,
            outcome: Outcome::Failed {
                stage: stage.into(),
                status,
            },
            c_nnz: None,
            times_ms: Vec::new(),
            median_ms: None,
            gflops: None,
            wall_median_ms: None,
        }
    }

    /// "gpu", "cpu", "cuSPARSE ALG2".
    pub fn label(&self) -> String {
        match &self.variant {
            Some(v) => format!("cuSPARSE {v}"),
            None => self.engine.name().to_string(),
        }
    }

    /// The median in milliseconds when the result counts.
    pub fn counted_ms(&self) -> Option<f64> {
        if self.outcome.counts() {
            self.median_ms
        } else {
            None
        }
    }
}

/// The figures of one case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseResult {
    /// "s15 A4·B8".
    pub name: String,
    /// "rmat-paper", "sym" or "file".
    pub suite: String,
    /// log2 of the size of a generated case.
    pub scale: Option<u32>,
    /// Nonzeros per row of A asked of R-MAT (rmat-paper).
    pub a_per_row: Option<u32>,
    /// Nonzeros per row of B asked of R-MAT (rmat-paper).
    pub b_per_row: Option<u32>,
    /// Edge factor (sym).
    pub edge_factor: Option<u32>,
    /// The input file.
    pub file: Option<String>,
    /// Rows of A.
    pub rows: usize,
    /// Columns of B.
    pub cols: usize,
    /// Entries of A.
    pub a_nnz: u64,
    /// Entries of B.
    pub b_nnz: u64,
    /// Intermediate products `A[i,k]·B[k,j]`.
    pub products: u64,
    /// Entries of C (the reference's, or gMAGNUS's count where it ran alone and kept no C).
    pub c_nnz: Option<u64>,
    /// Each engine, and each cuSPARSE algorithm.
    pub runs: Vec<EngineRun>,
    /// The fastest cuSPARSE algorithm whose result counts.
    pub best_cusparse: Option<String>,
    /// Its median milliseconds.
    pub best_cusparse_ms: Option<f64>,
    /// GPU engine median over the best cuSPARSE median: how many times faster gMAGNUS is.
    pub speedup: Option<f64>,
}

impl CaseResult {
    /// The run of gmcl's `engine` (gpu or cpu).
    pub fn run(&self, engine: Engine) -> Option<&EngineRun> {
        self.runs
            .iter()
            .find(|r| r.engine == engine && r.variant.is_none())
    }

    /// The cuSPARSE runs.
    pub fn cusparse_runs(&self) -> impl Iterator<Item = &EngineRun> {
        self.runs.iter().filter(|r| r.engine == Engine::Cusparse)
    }

    /// Fills `best_cusparse`, `best_cusparse_ms` and `speedup` from the runs.
    pub fn summarise(&mut self) {
        let best = self
            .cusparse_runs()
            .filter_map(|r| r.counted_ms().map(|ms| (ms, r.variant.clone())))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        self.best_cusparse_ms = best.as_ref().map(|b| b.0);
        self.best_cusparse = best.and_then(|b| b.1);
        let gpu = self.run(Engine::Gpu).and_then(|r| r.counted_ms());
        self.speedup = match (gpu, self.best_cusparse_ms) {
            (Some(g), Some(c)) if g > 0.0 => Some(c / g),
            _ => None,
        };
    }
}

/// Everything one `gmcl bench spgemm` run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// gmcl's version.
    pub gmcl_version: String,
    /// The GPU, when one was used.
    pub device: Option<String>,
    /// cuSPARSE's version, when it ran.
    pub cusparse_version: Option<String>,
    /// "f32" or "f64".
    pub precision: String,
    /// Timed runs per engine after the warm-up.
    pub repeat: usize,
    /// The engines asked for.
    pub engines: Vec<Engine>,
    /// Relative tolerance of the value check.
    pub tolerance: f64,
    /// Each case.
    pub cases: Vec<CaseResult>,
    /// Geometric mean of the speedups over the best cuSPARSE algorithm (cases where both
    /// counted).
    pub geomean_speedup: Option<f64>,
    /// The same over the cases of scale 18 and above.
    pub geomean_speedup_scale18_up: Option<f64>,
}

impl Report {
    /// An empty report.
    pub fn new(precision: &str, repeat: usize, engines: Vec<Engine>, tolerance: f64) -> Self {
        Report {
            gmcl_version: env!("CARGO_PKG_VERSION").into(),
            device: None,
            cusparse_version: None,
            precision: precision.into(),
            repeat,
            engines,
            tolerance,
            cases: Vec::new(),
            geomean_speedup: None,
            geomean_speedup_scale18_up: None,
        }
    }

    /// Recomputes the geometric means from the cases.
    pub fn summarise(&mut self) {
        let all: Vec<f64> = self.cases.iter().filter_map(|c| c.speedup).collect();
        let big: Vec<f64> = self
            .cases
            .iter()
            .filter(|c| c.scale.is_some_and(|s| s >= 18))
            .filter_map(|c| c.speedup)
            .collect();
        self.geomean_speedup = geomean(&all);
        self.geomean_speedup_scale18_up = geomean(&big);
    }
}

/// The engines, opened once for the whole benchmark.
pub struct Engines {
    gpu: Option<GpuEngine>,
    cusparse: Option<cusparse::Cusparse>,
    cpu: bool,
    /// The GPU, described, when one was opened.
    pub device: Option<String>,
    /// Total device memory in bytes, when a GPU was opened.
    pub device_memory: Option<u64>,
}

impl Engines {
    /// Opens what `engines` needs. An engine that cannot run here fails with
    /// [`Error::EngineUnavailable`] saying why (exit status 3).
    pub fn open(engines: &[Engine]) -> Result<Self> {
        let mut this = Engines {
            gpu: None,
            cusparse: None,
            cpu: engines.contains(&Engine::Cpu),
            device: None,
            device_memory: None,
        };
        let unavailable = |what: &str, e: Error| match e {
            Error::EngineUnavailable(why) => Error::EngineUnavailable(format!(
                "the {what} engine cannot run: {why}; use --engines cpu"
            )),
            other => other,
        };
        if engines.contains(&Engine::Gpu) {
            let engine = GpuEngine::open_unadvised().map_err(|e| unavailable("gpu", e))?;
            this.gpu = Some(engine.with_tuning(crate::cli::env::gpu_tuning()));
        }
        if engines.contains(&Engine::Cusparse) {
            this.cusparse =
                Some(cusparse::Cusparse::open().map_err(|e| unavailable("cusparse", e))?);
        }
        if this.gpu.is_some() || this.cusparse.is_some() {
            let gpu = gmcl::gpu::device()?;
            this.device = Some(gpu.describe());
            this.device_memory = gpu.memory().ok().map(|m| m.1);
        }
        Ok(this)
    }

    /// cuSPARSE's version, when it was opened.
    pub fn cusparse_version(&self) -> Option<String> {
        self.cusparse.as_ref().map(|c| c.version().to_string())
    }
}

/// Settings of a benchmark run.
pub struct BenchOptions<'a> {
    /// Timed runs after the warm-up (at least 1).
    pub repeat: usize,
    /// Relative tolerance of the value check (default: [`default_tolerance`]).
    pub tolerance: f64,
    /// Told about each step as it finishes (for progress on stderr).
    pub progress: &'a dyn Fn(&str),
}

/// The tolerance for `T` unless one is given.
pub fn tolerance_for<T: Scalar>(given: Option<f64>) -> f64 {
    given.unwrap_or_else(default_tolerance::<T>)
}

#[cfg(test)]
mod tests {
    use super::check::RawCsr;
    use super::runs::{counted_run, judge, run_case};
    use super::*;
    use gmcl::csr::Csr;
    use std::path::PathBuf;

    #[test]
    fn geometric_means() {
        // Medians and GFLOP/s are gmcl::measure's, tested there.
        assert_eq!(geomean(&[]), None);
        assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
    }

    #[test]
    fn engine_lists() {
        assert_eq!(
            parse_engines("gpu, cusparse,gpu").unwrap(),
            vec![Engine::Gpu, Engine::Cusparse]
        );
        assert_eq!(parse_engines("CPU").unwrap(), vec![Engine::Cpu]);
        assert!(parse_engines("").is_err());
        let e = parse_engines("gpu,tpu").unwrap_err().to_string();
        assert!(e.contains("unknown engine 'tpu'"), "{e}");
    }

    #[test]
    fn suite_case_lists() {
        let names: Vec<String> = suite_cases(Suite::RmatPaper, 16)
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            names,
            [
                "s15 A4·B8",
                "s16 A4·B8",
                "s15 A8·B8",
                "s16 A8·B8",
                "s15 A16·B8",
                "s16 A16·B8",
                "s15 A32·B8",
                "s16 A32·B8"
            ]
        );
        let sym = suite_cases(Suite::Sym, 15);
        let names: Vec<&str> = sym.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["sym s14 ef8", "sym s15 ef8", "sym s14 ef16", "sym s15 ef16"]
        );
        assert_eq!(sym[1].scale(), Some(15));
        assert!(suite_cases(Suite::RmatPaper, 14).is_empty());
        assert!(suite_cases(Suite::None, 20).is_empty());
        assert_eq!(
            CaseSpec::file(PathBuf::from("graphs/karate.mtx")).name,
            "karate.mtx"
        );
    }

    #[test]
    fn default_scales_follow_memory() {
        const GIB: u64 = 1 << 30;
        assert_eq!(default_max_scale(None), 15);
        assert_eq!(default_max_scale(Some(141 * GIB)), 19);
        assert_eq!(default_max_scale(Some(80 * GIB)), 18);
        assert_eq!(default_max_scale(Some(8 * GIB)), 15);
    }

    #[test]
    fn small_generated_case_builds() {
        let spec = CaseSpec::rmat_pair(8, 4, 8);
        let (a, b) = build_case::<f32>(&spec).unwrap();
        let b = b.unwrap();
        assert_eq!((a.nrows(), a.ncols(), b.nrows()), (256, 256, 256));
        assert!(a.nnz() > 700 && a.nnz() <= 1024, "{}", a.nnz());
        assert!(b.nnz() > 1400 && b.nnz() <= 2048, "{}", b.nnz());
        assert!(a.values().iter().all(|&v| v >= 0.5));
        let (s, none) = build_case::<f64>(&CaseSpec::sym(8, 8)).unwrap();
        assert!(none.is_none());
        assert_eq!(s, s.transpose());
    }

    #[test]
    fn cpu_only_case_is_its_own_reference() {
        let engines = Engines::open(&[Engine::Cpu]).unwrap();
        let quiet = |_: &str| {};
        let opts = BenchOptions {
            repeat: 2,
            tolerance: 1e-4,
            progress: &quiet,
        };
        let r = run_case::<f32>(&CaseSpec::sym(9, 8), &engines, &opts).unwrap();
        assert_eq!(r.runs.len(), 1);
        let cpu = r.run(Engine::Cpu).unwrap();
        assert_eq!(cpu.outcome, Outcome::Reference);
        assert_eq!(cpu.times_ms.len(), 2);
        assert!(cpu.median_ms.is_some() && cpu.gflops.is_some());
        assert_eq!(r.c_nnz, cpu.c_nnz);
        assert!(r.speedup.is_none());
    }

    #[test]
    fn a_wrong_result_is_flagged_and_not_timed() {
        let r = Csr::from_dense(2, 2, &[1.0f32, 2.0, 0.0, 3.0]);
        let mut reference = Some((r.clone(), "gpu".to_string()));
        let mut empty = RawCsr::of(&Csr::<f32>::empty(2, 2));
        empty.nrows = 2;
        let o = judge(&mut reference, empty, 1e-4);
        let Outcome::Wrong { reason } = &o else {
            panic!("{o:?}")
        };
        assert_eq!(
            reason,
            "differs from the gpu result: empty C: 0 of 3 nonzeros"
        );
        let run = counted_run(Engine::Cusparse, Some("ALG1".into()), o, 0, vec![], None, 8);
        assert_eq!(run.median_ms, None);
        assert_eq!(run.counted_ms(), None);
        assert_eq!(judge(&mut reference, RawCsr::of(&r), 1e-4), Outcome::Ok);
        // Without a reference, a valid result becomes it.
        let mut none = None;
        assert_eq!(judge(&mut none, RawCsr::of(&r), 1e-4), Outcome::Reference);
        assert!(none.is_some());
    }
}
