//! `gmcl spgemm`: C = A·B (or A²) on the chosen engine, written as Matrix Market or `.wel`; with
//! --repeat, a benchmark of the product.

use super::ui::report_json;
use super::wall::{timed, Stopwatch, Wall};
use super::{InputArgs, Precision, Ui};
use clap::Args;
use gmcl::dist::{self, Comm};
use gmcl::io::{self, Format, LoadedMatrix, MatrixOptions};
use gmcl::output::{AtomicOutput, MatrixFormat};
use gmcl::spgemm::repeat::multiply_repeatedly;
use gmcl::spgemm::{self, EngineKind, SpgemmOptions};
use gmcl::{engine, measure};
use gmcl::{BuildOptions, Duplicates, Error, Result, Scalar};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct SpgemmArgs {
    /// Matrix A (any input format; an edge list is the matrix it lists; `-`: the standard input,
    /// with --format).
    a: PathBuf,
    /// Matrix B (default: A, giving A²).
    b: Option<PathBuf>,
    #[command(flatten)]
    pub(super) input_args: InputArgs,
    /// Write C here, in the format the extension names: .mtx (Matrix Market, 1-based), .wel
    /// ("u v w" lines, 0-based) or .npz (SciPy); `-` is stdout, as Matrix Market.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Engine: cpu, gpu (gMAGNUS) or auto (the GPU when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    engine: EngineKind,
    /// Multiply A + Aᵀ (and B + Bᵀ) instead: every entry added to its mirror, a diagonal entry
    /// counting twice.
    #[arg(long)]
    symmetrize: bool,
    /// Value type of the product.
    #[arg(long, value_enum, default_value = "f64")]
    precision: Precision,
    /// Multiply this many times (a benchmark: the inputs are loaded once; above 1, one untimed
    /// warm-up product comes first, each product is freed before the next, the products are
    /// checked equal, and the times reported are the medians).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = crate::cli::repeat_parser())]
    repeat: usize,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

impl SpgemmArgs {
    /// The engine asked for (`--engine`).
    pub fn engine(&self) -> EngineKind {
        self.engine
    }
    /// The input files (A, and B when given).
    pub fn inputs(&self) -> Vec<&std::path::Path> {
        std::iter::once(self.a.as_path())
            .chain(self.b.as_deref())
            .collect()
    }
}
pub fn run(a: SpgemmArgs, ui: Ui, comm: Option<&dyn Comm>) -> Result<()> {
    match (a.precision, comm) {
        (Precision::F32, None) => run_typed::<f32>(a, ui),
        (Precision::F64, None) => run_typed::<f64>(a, ui),
        (Precision::F32, Some(comm)) => run_across_ranks::<f32>(a, ui, comm),
        (Precision::F64, Some(comm)) => run_across_ranks::<f64>(a, ui, comm),
    }
}

/// Loads a matrix for `spgemm`: entries as listed, duplicates summed.
fn load_matrix<T: Scalar>(
    path: &Path,
    format: Option<Format>,
    symmetrize: bool,
) -> Result<LoadedMatrix<T>> {
    let opts = MatrixOptions {
        build: BuildOptions {
            symmetrize,
            drop_self_loops: false,
            duplicates: Duplicates::Sum,
        },
        square: false,
        pattern: false,
    };
    io::load_matrix::<T>(path, format, &gmcl::spgemm::FOOTPRINT, &opts)
}

#[derive(serde::Serialize)]
struct SpgemmReport {
    engine: String,
    rows: usize,
    cols: usize,
    nnz: usize,
    intermediate_products: u64,
    seconds: f64,
    device_seconds: f64,
    gflops: f64,
    /// Products made (times are their medians).
    runs: usize,
    /// Runs across MPI ranks only: the number of ranks and the engine each rank multiplies on.
    #[serde(skip_serializing_if = "Option::is_none")]
    ranks: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_engine: Option<&'static str>,
    /// Across ranks: how the rows travelled between them ("mpi" or "nccl").
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange: Option<&'static str>,
    /// Across ranks: each step's slowest and fastest rank (balance, prepare, multiply, and
    /// of that the transfers to and from the GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<Vec<gmcl::dist::Step>>,
    /// The GPU engine's phases (with --engine gpu --json).
    #[serde(skip_serializing_if = "Option::is_none")]
    phases: Option<Vec<PhaseReport>>,
}

/// The GPU product's phases (of its last run) as upload (A and B to the device, with the
/// batch plan), download (C to the host) and the rest, on the device, in seconds.
fn gpu_split(phases: &[PhaseReport]) -> (Option<f64>, Option<f64>, Option<f64>) {
    let sum = |f: &dyn Fn(&str) -> bool| -> f64 {
        phases
            .iter()
            .filter(|p| f(&p.name))
            .map(|p| p.ms / 1e3)
            .sum()
    };
    let upload = sum(&|n| n.starts_with("upload"));
    let download = sum(&|n| n.starts_with("copy C to the host"));
    let device = sum(&|n| !n.starts_with("upload") && !n.starts_with("copy C to the host"));
    (Some(upload), Some(device), Some(download))
}

#[derive(serde::Serialize)]
struct PhaseReport {
    name: String,
    ms: f64,
    /// Bytes the phase's kernel moves at least (core kernels only).
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gb_per_s: Option<f64>,
    /// Achieved bandwidth over the device's measured copy bandwidth (the "speed of light").
    #[serde(skip_serializing_if = "Option::is_none")]
    share_of_copy_bandwidth: Option<f64>,
}

impl PhaseReport {
    fn new(p: gmcl::gpu::profile::Phase, copy_bandwidth: f64) -> Self {
        let rate = (p.bytes > 0 && p.seconds > 0.0).then(|| p.bytes as f64 / p.seconds);
        PhaseReport {
            name: p.name,
            ms: p.seconds * 1e3,
            bytes: (p.bytes > 0).then_some(p.bytes),
            gb_per_s: rate.map(|r| r / 1e9),
            share_of_copy_bandwidth: rate.map(|r| r / copy_bandwidth),
        }
    }
}

fn run_typed<T: Scalar>(a: SpgemmArgs, ui: Ui) -> Result<()> {
    let mut sw = Stopwatch::start();
    super::paths::refuse_json_beside_stdout(a.json, "-o", a.output.as_deref(), "C")?;
    if let Some(out) = &a.output {
        let inputs: Vec<&std::path::Path> = std::iter::once(a.a.as_path())
            .chain(a.b.as_deref())
            .collect();
        super::paths::refuse_clobbering(&inputs, &[("-o", out)])?;
        MatrixFormat::of(out)?;
    }
    if a.b.as_deref().is_some_and(io::is_stdin) && io::is_stdin(&a.a) {
        return Err(Error::Invalid(
            "A and B are both the standard input ('-'), which can be read once: give B as a \
             file, or leave it out for A²"
                .into(),
        ));
    }
    let input_bytes = a.inputs().into_iter().map(engine::file_bytes).sum();
    engine::open_gpu_early(a.engine, input_bytes);
    let fmt = a.input_args.format;
    let la = load_matrix::<T>(&a.a, fmt, a.symmetrize)?;
    let ma = &la.matrix;
    let mb = match &a.b {
        Some(pb) => {
            let lb = load_matrix::<T>(pb, fmt, a.symmetrize)?;
            if !la.labels.is_positional() || !lb.labels.is_positional() {
                return Err(Error::Invalid(io::TWO_NUMBERINGS.into()));
            }
            Some(lb.matrix)
        }
        None => None,
    };
    if let (Some(how), Some(out)) = (la.labels.renumbering(), &a.output) {
        ui.notice(&format!(
            "{} names its vertices ({}): {how} as C's rows and columns in {}",
            a.a.display(),
            la.format,
            out.display()
        ));
    }
    let b = mb.as_ref().unwrap_or(ma);
    let load = sw.lap();
    if a.repeat == 0 {
        return Err(Error::Invalid("--repeat must be at least 1".into()));
    }
    let notice = &mut |msg: &str| ui.notice(msg);
    // The products are counted (a pass over A) only where `auto` has a choice to make.
    let work = match a.engine {
        EngineKind::Auto => Some(engine::Work::Product(
            spgemm::intermediate_products_per_row(ma, b)?.iter().sum(),
        )),
        _ => None,
    };
    let resolved = engine::resolve(a.engine, work, notice);
    let ((c, stats, phases), engine) =
        engine::run_with_fallback(a.engine, resolved, notice, |engine| {
            if engine == EngineKind::Gpu && a.json {
                // With --json the GPU engine times each phase (waiting for the device between
                // phases) and reports it with its bandwidth against the device's copy bandwidth.
                let gpu = spgemm::gpu::GpuEngine::open()?.with_tuning(spgemm::gpu::GpuTuning {
                    profile: true,
                    ..super::env::gpu_tuning()
                });
                let (c, stats) = multiply_repeatedly(a.repeat, || {
                    gpu.multiply(ma, b, &SpgemmOptions::default())
                })?;
                let copy = gpu.gpu().copy_bandwidth()?;
                let phases = gpu
                    .last_phases()
                    .into_iter()
                    .map(|p| PhaseReport::new(p, copy))
                    .collect::<Vec<_>>();
                Ok((c, stats, Some(phases)))
            } else {
                let opts = SpgemmOptions {
                    gpu: super::env::gpu_tuning(),
                    ..Default::default()
                };
                let (c, stats) =
                    multiply_repeatedly(a.repeat, || spgemm::multiply(engine, ma, b, &opts))?;
                Ok((c, stats, None))
            }
        })?;
    let compute = sw.lap();
    let staged = match &a.output {
        Some(out) => Some(gmcl::output::stage_matrix(out, &c)?),
        None => None,
    };
    let write = sw.lap();
    let (upload, device, download) = match &phases {
        Some(p) => gpu_split(p),
        None => (None, None, None),
    };
    let wall = sw.finish(Wall {
        load,
        upload,
        device,
        download,
        compute,
        write,
        total: 0.0,
    });
    let report = SpgemmReport {
        engine: engine.to_string(),
        rows: c.nrows(),
        cols: c.ncols(),
        nnz: c.nnz(),
        intermediate_products: stats.intermediate_products,
        seconds: stats.seconds,
        device_seconds: stats.device_seconds,
        runs: a.repeat,
        ranks: None,
        rank_engine: None,
        exchange: None,
        steps: None,
        phases,
        gflops: measure::gflops(stats.intermediate_products, stats.device_seconds),
    };
    summarize(&a, &report, wall, ui, staged)
}

/// The summary on stderr (a notice, whatever stdout carries: C, the JSON report or nothing),
/// and with --json the report on stdout; then C's file (`staged`, written whole) is committed.
fn summarize(
    a: &SpgemmArgs,
    report: &SpgemmReport,
    wall: Wall,
    ui: Ui,
    staged: Option<AtomicOutput>,
) -> Result<()> {
    let on = match report.ranks {
        Some(p) => format!("on {p} ranks ({} engine each)", report.engine),
        None => format!("on the {} engine", report.engine),
    };
    ui.notice(&format!(
        "C: {} x {}, {}, {} intermediate products, {:.4} s {on} ({:.4} s computing: {:.3} GFLOP/s)",
        report.rows,
        report.cols,
        super::ui::count(report.nnz as u64, "nonzero", "nonzeros"),
        report.intermediate_products,
        report.seconds,
        report.device_seconds,
        report.gflops
    ));
    if a.json {
        let mut parameters = serde_json::json!({
            "a": a.a.display().to_string(),
            "b": a.b.as_ref().map(|b| b.display().to_string()),
            "engine": a.engine.to_string(),
            "symmetrize": a.symmetrize,
            "precision": match a.precision { Precision::F32 => "f32", Precision::F64 => "f64" },
            "repeat": a.repeat,
        });
        if let Some(p) = report.ranks {
            parameters["ranks"] = p.into();
        }
        outln!("{}", report_json(&timed(report, wall), parameters)?)?;
    }
    super::ui::print_then_commit(staged.into_iter().collect())
}

/// `gmcl spgemm` under an MPI launcher: every rank reads its part of A (and B), makes the rows
/// of C of its block of A on the CPU engine (`gmcl::dist::spgemm`), and rank 0 writes C as the
/// blocks arrive, in rank order (`.npz`: once per array, `gmcl::dist::npz`). Options the
/// distributed product does not have yet are refused on every rank alike.
fn run_across_ranks<T: Scalar>(a: SpgemmArgs, ui: Ui, comm: &dyn Comm) -> Result<()> {
    let mut sw = Stopwatch::start();
    if a.repeat != 1 {
        return Err(Error::Invalid(
            "--repeat does not run across MPI ranks yet".into(),
        ));
    }
    let inputs: Vec<&Path> = std::iter::once(a.a.as_path())
        .chain(a.b.as_deref())
        .collect();
    super::paths::refuse_stdin_across_ranks(&inputs)?;
    super::paths::refuse_json_beside_stdout(a.json, "-o", a.output.as_deref(), "C")?;
    let named = |p: &Path| {
        matches!(
            a.input_args.format.or_else(|| io::Format::of_input(p)),
            Some(io::Format::Snap | io::Format::Abc)
        )
    };
    if a.b.as_deref().is_some_and(|b| named(&a.a) || named(b)) {
        return Err(Error::Invalid(io::TWO_NUMBERINGS.into()));
    }
    let reports = comm.rank() == 0;
    if let (true, true, Some(out)) = (reports, named(&a.a), &a.output) {
        ui.notice(&format!(
            "{} names its vertices: they become 0, 1, ... as C's rows and columns in {}",
            a.a.display(),
            out.display()
        ));
    }
    // Checked and created by rank 0 before any work, so that a path that cannot be written
    // fails at once, on every rank.
    let out = dist::agree(
        comm,
        match (&a.output, reports) {
            (Some(out), true) => {
                let inputs: Vec<&Path> = std::iter::once(a.a.as_path())
                    .chain(a.b.as_deref())
                    .collect();
                super::paths::refuse_clobbering(&inputs, &[("-o", out)])
                    .and_then(|()| MatrixFormat::of(out))
                    .and_then(|_| gmcl::output::AtomicOutput::create(out).map(Some))
            }
            _ => Ok(None),
        },
    )?;
    let mut opts = super::env::dist_spgemm_options();
    let fmt = a.input_args.format;
    let load =
        |p: &Path| dist::matrix::load_block::<T>(comm, p, fmt, a.symmetrize, opts.stage_edges);
    let ma = load(&a.a)?;
    let mb = match &a.b {
        Some(pb) => Some(load(pb)?),
        None => None,
    };
    let load = sw.lap();
    // `--engine` per rank: `auto` weighs the rank's own products.
    let work = match a.engine {
        EngineKind::Auto => Some(engine::Work::Product(dist::spgemm::products(
            comm,
            &ma,
            mb.as_ref().unwrap_or(&ma),
        ))),
        _ => None,
    };
    opts.engine = engine::resolve(a.engine, work, &mut |msg: &str| ui.notice(msg));
    let (c, stats) = dist::spgemm::multiply(comm, &ma, mb.as_ref().unwrap_or(&ma), &opts)?;
    drop((ma, mb));
    let compute = sw.lap();
    // Every rank takes part in sending C when there is an output; rank 0 alone holds it. The
    // extension alone names `.npz`, so every rank knows it.
    let npz = a
        .output
        .as_deref()
        .is_some_and(|p| MatrixFormat::of(p).ok() == Some(MatrixFormat::Npz));
    if let Some(path) = &a.output {
        dist::agree(
            comm,
            gmcl::output::refuse_non_finite(path, &c.rows, c.first()),
        )?;
    }
    let written = if npz {
        dist::npz::write(comm, &c, stats.nnz, opts.stage_entries, out)
    } else if a.output.is_some() {
        // The format by the path as given: a standard stream's output is named `<stdout>`.
        let mut w = out.map(|out| -> Result<_> {
            let format = MatrixFormat::of(a.output.as_deref().unwrap_or(out.path()))?;
            gmcl::output::RowWriter::start(out, format, c.blocks.n, c.ncols, stats.nnz)
        });
        let sent =
            dist::spgemm::send_to_root(comm, &c, opts.stage_entries, |first, rows| match &mut w {
                Some(Ok(w)) => w.rows(first, rows),
                Some(Err(_)) | None => Ok(()),
            });
        match w {
            Some(w) => sent.and(w).and_then(|w| w.finish()).map(Some),
            None => sent.map(|()| None),
        }
    } else {
        Ok(None)
    };
    let staged = dist::agree(comm, written)?;
    let write = sw.lap();
    let wall = sw.finish_steps(load, compute, write);
    let rank_engine = match stats.gpu_ranks {
        0 => "cpu",
        g if g == comm.size() as u64 => "gpu",
        _ => "mixed",
    };
    let report = SpgemmReport {
        engine: rank_engine.to_string(),
        rows: c.blocks.n,
        cols: c.ncols,
        nnz: stats.nnz as usize,
        intermediate_products: stats.intermediate_products,
        seconds: stats.seconds,
        device_seconds: stats.seconds,
        gflops: measure::gflops(stats.intermediate_products, stats.seconds),
        runs: 1,
        phases: None,
        ranks: Some(comm.size()),
        rank_engine: Some(rank_engine),
        exchange: Some(comm.exchange().name()),
        steps: Some(stats.steps.clone()),
    };
    if !reports {
        return Ok(());
    }
    summarize(&a, &report, wall, ui, staged)
}
