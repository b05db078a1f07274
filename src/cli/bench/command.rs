//! `gmcl bench`: its arguments and the run of `gmcl bench spgemm` on the harness
//! ([`super`]).

use super::{self as bench};
use crate::cli::{Precision, Ui};
use clap::{Args, Subcommand, ValueEnum};
use gmcl::{Error, Result, Scalar};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// SpGEMM: gMAGNUS against every cuSPARSE algorithm (and the CPU engine), on the gMAGNUS
    /// paper's R-MAT products, symmetric squares, and A² of any files given.
    Spgemm(BenchSpgemmArgs),
    /// Host-device copies: the staged uploads and downloads every command's data takes,
    /// against a plain copy from and to page-locked memory, in the same run (needs a GPU).
    Transfer(BenchTransferArgs),
}

#[derive(Args)]
pub struct BenchTransferArgs {
    /// Size of each copy, in MiB: 8 to 65536 (smaller copies skip the staging buffers). Takes
    /// four times as much host memory and once as much device memory.
    #[arg(long, default_value_t = 2048, value_name = "N")]
    mib: usize,
    /// Timed copies of each kind after one warm-up; the median is reported.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = crate::cli::repeat_parser())]
    repeat: usize,
    /// Write the figures here as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum SuiteArg {
    /// A with 4, 8, 16, 32 nonzeros per row times B with 8, scales 15 to --max-scale.
    RmatPaper,
    /// A² of symmetric R-MAT, edge factors 8 and 16, scales 14 to --max-scale.
    Sym,
    /// Only the files given.
    None,
}

#[derive(Args)]
pub struct BenchSpgemmArgs {
    /// Matrix files to square (any input format), run after the suite's cases.
    files: Vec<PathBuf>,
    /// Generated cases to run.
    #[arg(long, value_enum, default_value = "rmat-paper")]
    suite: SuiteArg,
    /// Largest scale of the suite (default: from the GPU's memory; 15 without a GPU).
    #[arg(long, value_name = "N")]
    max_scale: Option<u32>,
    /// Smallest scale of the suite (default: its first, 15 for rmat-paper, 14 for sym).
    #[arg(long, value_name = "N")]
    min_scale: Option<u32>,
    /// Only these densities of the suite, comma-separated: A's nonzeros per row for rmat-paper
    /// (4, 8, 16, 32), edge factors for sym (8, 16). Default: all.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    densities: Vec<u32>,
    /// Timed runs per engine after one warm-up; the median is reported.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = crate::cli::repeat_parser())]
    repeat: usize,
    /// Engines to run, comma-separated: gpu (gMAGNUS), cusparse (every algorithm), cpu.
    #[arg(long, default_value = "gpu,cusparse", value_name = "LIST")]
    engines: String,
    /// Write every figure here as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw the speedups against scale here (SVG).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Value type of the products.
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Relative tolerance of the value check (default: 1e-4 for f32, 1e-10 for f64).
    #[arg(long, value_name = "REL")]
    tolerance: Option<f64>,
}

pub fn run(a: BenchArgs, ui: Ui) -> Result<()> {
    match a.what {
        BenchCommand::Spgemm(a) => match a.precision {
            Precision::F32 => run_spgemm::<f32>(a, ui),
            Precision::F64 => run_spgemm::<f64>(a, ui),
        },
        BenchCommand::Transfer(a) => run_transfer(a, ui),
    }
}

fn run_transfer(a: BenchTransferArgs, ui: Ui) -> Result<()> {
    if a.repeat == 0 {
        return Err(Error::Invalid("--repeat must be at least 1".into()));
    }
    if !(8..=1 << 16).contains(&a.mib) {
        return Err(Error::Invalid(format!(
            "--mib {} must lie between 8 and {}",
            a.mib,
            1 << 16
        )));
    }
    let gpu = gmcl::gpu::device().map_err(|e| match e {
        Error::EngineUnavailable(why) => {
            Error::EngineUnavailable(format!("gmcl bench transfer needs a GPU: {why}"))
        }
        other => other,
    })?;
    let out = match &a.json {
        Some(path) => Some(gmcl::output::AtomicOutput::create(path)?),
        None => None,
    };
    ui.notice(&format!("device: {}", gpu.describe()));
    let r = gmcl::gpu::rates::measure(&gpu, a.mib << 20, a.repeat)?;
    let (up, mapped, fresh) = r.shares();
    outln!(
        "copies of {} MiB, median of {} (GB/s; share of the pinned copy in that direction)",
        r.bytes >> 20,
        r.repeat
    )?;
    outln!(
        "  pinned host buffer (one DMA)     up {:6.1}          down {:6.1}",
        r.pinned_up,
        r.pinned_down
    )?;
    outln!(
        "  staged, mapped host pages        up {:6.1} ({:3.0}%)  down {:6.1} ({:3.0}%)",
        r.staged_up,
        100.0 * up,
        r.staged_down_mapped,
        100.0 * mapped
    )?;
    outln!(
        "  staged, into a new host vector                     down {:6.1} ({:3.0}%)",
        r.staged_down_fresh,
        100.0 * fresh
    )?;
    if let Some(mut out) = out {
        let text = serde_json::to_string_pretty(&r)
            .map_err(|e| Error::Invalid(format!("cannot format JSON: {e}")))?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        out.commit()?;
    }
    Ok(())
}

fn run_spgemm<T: Scalar>(a: BenchSpgemmArgs, ui: Ui) -> Result<()> {
    if a.repeat == 0 {
        return Err(Error::Invalid("--repeat must be at least 1".into()));
    }
    if let Some(t) = a.tolerance {
        if !(t > 0.0 && t < 1.0) {
            return Err(Error::Invalid(format!(
                "--tolerance {t} must lie between 0 and 1"
            )));
        }
    }
    let engine_list = bench::parse_engines(&a.engines)?;
    for f in &a.files {
        std::fs::metadata(f).map_err(|e| Error::io(f, "cannot open", e))?;
    }
    let inputs: Vec<&Path> = a.files.iter().map(PathBuf::as_path).collect();
    let outputs: Vec<(&str, &Path)> = [("--json", &a.json), ("--plot", &a.plot)]
        .into_iter()
        .filter_map(|(option, p)| p.as_deref().map(|p| (option, p)))
        .collect();
    crate::cli::paths::refuse_clobbering(&inputs, &outputs)?;
    let engines = bench::Engines::open(&engine_list)?;
    let suite = match a.suite {
        SuiteArg::RmatPaper => bench::Suite::RmatPaper,
        SuiteArg::Sym => bench::Suite::Sym,
        SuiteArg::None => bench::Suite::None,
    };
    let max_scale = a
        .max_scale
        .unwrap_or_else(|| bench::default_max_scale(engines.device_memory));
    if max_scale > 30 {
        return Err(Error::Invalid(format!(
            "--max-scale {max_scale} is too large (at most 30)"
        )));
    }
    let mut cases = bench::suite_cases(suite, max_scale);
    cases.retain(|c| {
        a.min_scale
            .map_or(true, |m| c.scale().is_some_and(|s| s >= m))
            && (a.densities.is_empty() || c.density().is_some_and(|d| a.densities.contains(&d)))
    });
    cases.extend(a.files.iter().cloned().map(bench::CaseSpec::file));
    if cases.is_empty() {
        return Err(Error::Invalid(format!(
            "nothing to run: the {} suite has no case up to scale {max_scale} with the scales and densities asked for, and no file was given",
            suite.name()
        )));
    }
    if let Some(d) = &engines.device {
        ui.notice(&format!("device: {d}"));
    }
    ui.notice(&format!(
        "{} cases ({} suite up to scale {max_scale}, {} file(s)), engines {}, {} values, median of {}",
        cases.len(),
        suite.name(),
        a.files.len(),
        engine_list
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(","),
        T::NAME,
        a.repeat
    ));
    let progress = |msg: &str| ui.notice(msg);
    let opts = bench::BenchOptions {
        repeat: a.repeat,
        tolerance: bench::tolerance_for::<T>(a.tolerance),
        progress: &progress,
    };
    // The files are rewritten after every case: a run cut short keeps what it measured.
    let mut save = |report: &bench::Report| -> Result<()> {
        if let Some(p) = &a.json {
            bench::report::write_json(p, report)?;
        }
        if let Some(p) = &a.plot {
            bench::plot::write_svg(p, report)?;
        }
        Ok(())
    };
    let report = bench::run_all::<T>(&cases, &engines, engine_list, &opts, &mut save)?;
    out!("{}", bench::report::table(&report))?;
    Ok(())
}
