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

pub mod check;
mod command;
pub mod cusparse;
pub mod plot;
pub mod report;

pub use command::{run, BenchArgs};

use check::{compare, default_tolerance, RawCsr, Verdict};
use cusparse::Failure;
use gmcl::csr::{BuildOptions, Csr, Duplicates};
use gmcl::error::{Error, Result};
use gmcl::generate::{generate, RmatParams};
use gmcl::measure::{gflops, median};
use gmcl::scalar::Scalar;
use gmcl::spgemm::cpu::CpuEngine;
use gmcl::spgemm::gpu::GpuEngine;
use gmcl::spgemm::{intermediate_products, SpgemmOptions};
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

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

/// A set of generated cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    /// The paper's R-MAT pairs: A with 4, 8, 16, 32 nonzeros per row times B with 8.
    RmatPaper,
    /// A² of a symmetric R-MAT matrix, edge factors 8 and 16.
    Sym,
    /// No generated case (files only).
    None,
}

impl Suite {
    /// "rmat-paper", "sym", "none".
    pub fn name(self) -> &'static str {
        match self {
            Suite::RmatPaper => "rmat-paper",
            Suite::Sym => "sym",
            Suite::None => "none",
        }
    }
}

/// Nonzeros per row of A in the `rmat-paper` suite.
pub const PAPER_A_PER_ROW: [u32; 4] = [4, 8, 16, 32];
/// Nonzeros per row of B in the `rmat-paper` suite.
pub const PAPER_B_PER_ROW: u32 = 8;
/// First scale of the `rmat-paper` suite.
pub const PAPER_MIN_SCALE: u32 = 15;
/// Edge factors of the `sym` suite.
pub const SYM_EDGE_FACTORS: [u32; 2] = [8, 16];
/// First scale of the `sym` suite.
pub const SYM_MIN_SCALE: u32 = 14;
/// Seed of B in every R-MAT pair (A's seed is its nonzeros per row, so pairs differ).
const B_SEED: u64 = 1000;
/// Seed of the symmetric matrices.
const SYM_SEED: u64 = 7;

/// Where a case's operands come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// R-MAT A (`a_per_row × 2^scale` edges) times R-MAT B (`b_per_row × 2^scale`), both
    /// `2^scale` square, values in [0.5, 1.5), duplicates summed.
    RmatPair {
        /// log2 of the size.
        scale: u32,
        /// Edges per row of A.
        a_per_row: u32,
        /// Edges per row of B.
        b_per_row: u32,
    },
    /// A² for one R-MAT matrix with `edge_factor × 2^scale` edges made symmetric (A + Aᵀ).
    Sym {
        /// log2 of the size.
        scale: u32,
        /// Edges per vertex before symmetrising.
        edge_factor: u32,
    },
    /// A² of a matrix file (entries as listed, duplicates summed).
    File(PathBuf),
}

/// One product to benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseSpec {
    /// "s15 A4·B8", "sym s16 ef8", or the file name.
    pub name: String,
    /// The suite ("rmat-paper", "sym", "file").
    pub suite: &'static str,
    /// Where the operands come from.
    pub source: Source,
}

impl CaseSpec {
    /// The scale of a generated case.
    pub fn scale(&self) -> Option<u32> {
        match self.source {
            Source::RmatPair { scale, .. } | Source::Sym { scale, .. } => Some(scale),
            Source::File(_) => None,
        }
    }

    /// The density of a generated case: A's nonzeros per row (rmat-paper) or the edge factor
    /// (sym).
    pub fn density(&self) -> Option<u32> {
        match self.source {
            Source::RmatPair { a_per_row, .. } => Some(a_per_row),
            Source::Sym { edge_factor, .. } => Some(edge_factor),
            Source::File(_) => None,
        }
    }

    /// The R-MAT pair case.
    pub fn rmat_pair(scale: u32, a_per_row: u32, b_per_row: u32) -> Self {
        CaseSpec {
            name: format!("s{scale} A{a_per_row}·B{b_per_row}"),
            suite: Suite::RmatPaper.name(),
            source: Source::RmatPair {
                scale,
                a_per_row,
                b_per_row,
            },
        }
    }

    /// The symmetric-square case.
    pub fn sym(scale: u32, edge_factor: u32) -> Self {
        CaseSpec {
            name: format!("sym s{scale} ef{edge_factor}"),
            suite: Suite::Sym.name(),
            source: Source::Sym { scale, edge_factor },
        }
    }

    /// A² of a file.
    pub fn file(path: PathBuf) -> Self {
        CaseSpec {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
            suite: "file",
            source: Source::File(path),
        }
    }
}

/// The cases of a suite up to `max_scale`, grouped by density then scale.
pub fn suite_cases(suite: Suite, max_scale: u32) -> Vec<CaseSpec> {
    match suite {
        Suite::RmatPaper => PAPER_A_PER_ROW
            .iter()
            .flat_map(|&a| {
                (PAPER_MIN_SCALE..=max_scale)
                    .map(move |s| CaseSpec::rmat_pair(s, a, PAPER_B_PER_ROW))
            })
            .collect(),
        Suite::Sym => SYM_EDGE_FACTORS
            .iter()
            .flat_map(|&ef| (SYM_MIN_SCALE..=max_scale).map(move |s| CaseSpec::sym(s, ef)))
            .collect(),
        Suite::None => Vec::new(),
    }
}

/// The largest scale worth running when none is given, from the device memory: the R-MAT
/// products roughly triple per scale, and a product, its reference copy and cuSPARSE's buffers
/// must fit. Without a GPU (the CPU engine only), 15.
pub fn default_max_scale(device_memory: Option<u64>) -> u32 {
    const GIB: u64 = 1 << 30;
    match device_memory {
        None => 15,
        Some(m) if m >= 120 * GIB => 19,
        Some(m) if m >= 60 * GIB => 18,
        Some(m) if m >= 30 * GIB => 17,
        Some(m) if m >= 12 * GIB => 16,
        Some(_) => 15,
    }
}

fn rmat<T: Scalar>(scale: u32, per_row: u32, seed: u64, symmetrize: bool) -> Result<Csr<T>> {
    if scale > 31 {
        return Err(Error::Invalid(format!(
            "scale {scale} is too large (at most 31)"
        )));
    }
    let mut p = RmatParams::new(scale, (per_row as u64) << scale);
    p.weights = true;
    p.seed = seed;
    let el = generate(&p)?;
    Csr::from_edges(
        &el,
        &BuildOptions {
            symmetrize,
            drop_self_loops: false,
            duplicates: Duplicates::Sum,
        },
    )
}

/// Builds the operands of a case: A, and B when it is not A itself.
pub fn build_case<T: Scalar>(spec: &CaseSpec) -> Result<(Csr<T>, Option<Csr<T>>)> {
    match &spec.source {
        Source::RmatPair {
            scale,
            a_per_row,
            b_per_row,
        } => {
            let a = rmat(*scale, *a_per_row, *a_per_row as u64, false)?;
            let b = rmat(*scale, *b_per_row, B_SEED + *b_per_row as u64, false)?;
            Ok((a, Some(b)))
        }
        Source::Sym { scale, edge_factor } => {
            Ok((rmat(*scale, *edge_factor, SYM_SEED, true)?, None))
        }
        Source::File(path) => {
            let loaded = gmcl::io::load(path, None)?;
            let a: Csr<T> = Csr::from_edges(
                &loaded.edges,
                &BuildOptions {
                    symmetrize: false,
                    drop_self_loops: false,
                    duplicates: Duplicates::Sum,
                },
            )
            .map_err(|e| match e {
                Error::Invalid(message) => Error::Input {
                    path: path.clone(),
                    message,
                },
                other => other,
            })?;
            if a.nrows() != a.ncols() {
                return Err(Error::Input {
                    path: path.clone(),
                    message: format!(
                        "the benchmark squares each file, but this matrix is {} x {}",
                        a.nrows(),
                        a.ncols()
                    ),
                });
            }
            Ok((a, None))
        }
    }
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

fn counted_run(
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
fn judge<T: Scalar>(reference: &mut Option<(Csr<T>, String)>, got: RawCsr<T>, rel: f64) -> Outcome {
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

/// The tolerance for `T` unless one is given.
pub fn tolerance_for<T: Scalar>(given: Option<f64>) -> f64 {
    given.unwrap_or_else(default_tolerance::<T>)
}

#[cfg(test)]
mod tests {
    use super::*;

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
