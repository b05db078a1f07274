//! The `gmcl` command line: the arguments shared by every subcommand, and one module per
//! subcommand with its arguments beside its `run`. Binary only: the library does not carry it.

#[macro_use]
mod ui;
pub mod bench;
pub mod cluster;
pub mod convert;
pub mod dist;
pub mod env;
pub mod generate;
pub mod info;
pub mod mcl_args;
pub mod oom;
mod paths;
pub mod process;
pub mod spgemm;
pub mod tricount;
mod wall;
pub mod world;

use clap::{Args, Parser, Subcommand, ValueEnum};
use gmcl::io::Format;
use gmcl::spgemm::EngineKind;
pub use ui::Ui;

#[derive(Parser)]
#[command(
    name = "gmcl",
    version,
    about = "Markov clustering and triangle counting on large power-law graphs, on a GPU SpGEMM engine (gMAGNUS) or a multithreaded CPU engine."
)]
pub struct Cli {
    /// Worker threads (default: all cores; at most 4 per core, more are capped with a notice).
    #[arg(long, global = true, value_name = "N")]
    #[arg(value_parser = whole_number::<usize>)]
    pub threads: Option<usize>,
    /// Print no progress and no notices on stderr (errors still print).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Across MPI ranks: how the ranks move rows between them. nccl: GPU to GPU through NCCL
    /// (a GPU a rank; the GPU engine); mpi: through host memory; auto: nccl where every rank
    /// has a GPU of its own and the NCCL library loads, else mpi (tricount: mpi, its ranks'
    /// GPUs on one host reading each other's rows directly by CUDA IPC, with no start to pay).
    #[arg(
        long,
        global = true,
        default_value = "auto",
        value_name = "auto|mpi|nccl"
    )]
    pub exchange: gmcl::dist::Exchange,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Generate an R-MAT graph (PaRMAT-compatible options), written as .el, .wel, .mtx or .npz.
    Generate(generate::GenerateArgs),
    /// Print a graph's vertices, edges, self loops, duplicates, symmetry and degrees.
    Info(info::InfoArgs),
    /// Multiply sparse matrices: C = A·B, or A² when B is left out. Writes .mtx or .wel.
    Spgemm(spgemm::SpgemmArgs),
    /// Markov clustering (MCL, as mcl 22-282): one cluster per line, largest first.
    #[command(
        after_help = "mcl's spellings are taken too: -te N, -scheme N, -pct N, -resource N, \
                            -overlap MODE, --abc, -tf SPEC, -abc-tf SPEC, -abc-neg-log10 (and -I, \
                            -c, -P, -S, -R, -L, -o as in mcl; pruning options apply in order). \
                            Without -o the clusters go to stdout."
    )]
    Cluster(cluster::ClusterArgs),
    /// Distances between two clusterings: split/join, variation of information, adjusted Rand.
    Dist(dist::DistArgs),
    /// Benchmarks, every result checked before any time counts.
    Bench(bench::BenchArgs),
    /// Count the triangles of a graph (made simple and undirected first).
    Tricount(tricount::TricountArgs),
    /// Write a graph or matrix file in another format (.el, .wel, .mtx, .npz).
    Convert(convert::ConvertArgs),
}

impl Command {
    /// The engine and the input files' bytes (`None`: some input's size is unknown) of a
    /// command that runs across ranks: whether it may run them on their GPUs is
    /// [`gmcl::engine::gpu_may_pay`]'s answer for them.
    pub fn engine_and_input_bytes(&self) -> Option<(EngineKind, Option<u64>)> {
        let (engine, inputs) = match self {
            Command::Cluster(a) => (a.engine(), vec![a.input()]),
            Command::Tricount(a) => (a.engine(), vec![a.input()]),
            Command::Spgemm(a) => (a.engine(), a.inputs()),
            _ => return None,
        };
        Some((
            engine,
            inputs.into_iter().map(gmcl::engine::file_bytes).sum(),
        ))
    }

    /// Says, once per input file, where a SNAP text input has columns past the source and
    /// target that its loader skips ([`gmcl::io::snap_extra_columns`]). Nothing under --quiet
    /// (nor on the ranks that do not report), where the files are not even looked at.
    pub fn notice_skipped_columns(&self, ui: Ui) {
        if ui.quiet {
            return;
        }
        for (path, format) in self.graph_inputs() {
            if let Some(extra) = gmcl::io::snap_extra_columns(path, format) {
                ui.notice(&format!(
                    "{} (for weights in the third column, use --format wel)",
                    extra.describe(path)
                ));
            }
        }
    }

    /// The graph and matrix files the command reads, each with the format asked for.
    fn graph_inputs(&self) -> Vec<(&std::path::Path, Option<Format>)> {
        match self {
            Command::Cluster(a) => vec![(a.input(), a.input_args.format)],
            Command::Tricount(a) => vec![(a.input(), a.input_args.format)],
            Command::Info(a) => vec![(a.input(), a.input_args.format)],
            Command::Convert(a) => vec![(a.input(), a.input_args.format)],
            Command::Spgemm(a) => {
                let format = a.input_args.format;
                a.inputs().into_iter().map(|p| (p, format)).collect()
            }
            _ => Vec::new(),
        }
    }
}

// The `Args` structs here and in the subcommand modules carry no doc comments: clap may take a
// struct's doc comment for help text, and `--help` is to read as it did.

#[derive(Args)]
pub struct InputArgs {
    /// Input format (default: from the extension: .el .wel .mtx .abc .npz, .txt/.snap for
    /// SNAP). A compressed .npz (save_npz's default) is inflated in memory first: slower than
    /// compressed=False, which is read in place.
    #[arg(long, value_name = "el|wel|snap|mtx|abc|npz")]
    pub format: Option<Format>,
}

/// The most runs `--repeat` may ask for (`spgemm`, `tricount`, `bench spgemm`): far more than a
/// benchmark needs, and small enough that the run counts and the lists of times cannot overflow.
pub const MAX_REPEAT: u64 = 1_000_000;

/// The parser of `--repeat`: a whole number from 1 to [`MAX_REPEAT`] (else clap's usage error,
/// exit 2).
pub fn repeat_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=MAX_REPEAT)
}

/// The parser of whole-number options (counts, percentages, threads): where clap's own says
/// "invalid digit found in string" (`-pct 99.5`, `-P 1e4`, `-S -1`), this one says what to write
/// instead (mcl reads `99.5` as 99 and `1e4` as 1 without a word).
pub fn whole_number<T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    if let Ok(v) = text.parse::<u64>() {
        return T::try_from(v).map_err(|_| "too large".to_string());
    }
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v < 0.0 => Err("negative: give a whole number, 0 or more".into()),
        Ok(v) if v.is_finite() && v.fract() == 0.0 && v < 1e19 => {
            Err(format!("not written as a whole number: write {}", v as u64))
        }
        Ok(v) if v.is_finite() && v < 1e19 => Err(format!(
            "not a whole number: write {} or {}",
            v.floor() as u64,
            v.ceil() as u64
        )),
        Ok(v) if v.is_finite() => Err("too large".into()),
        _ => Err("not a whole number".into()),
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Precision {
    F32,
    F64,
}

#[cfg(test)]
mod tests {
    use super::whole_number;

    #[test]
    fn whole_numbers_and_what_to_write_instead() {
        assert_eq!(whole_number::<u32>("1100"), Ok(1100));
        assert_eq!(whole_number::<usize>("0"), Ok(0));
        let e = |t: &str| whole_number::<u32>(t).unwrap_err();
        assert_eq!(e("99.5"), "not a whole number: write 99 or 100");
        assert_eq!(e("1e4"), "not written as a whole number: write 10000");
        assert_eq!(e("100.0"), "not written as a whole number: write 100");
        assert_eq!(e("-1"), "negative: give a whole number, 0 or more");
        assert_eq!(e("4294967296"), "too large");
        assert_eq!(e("1e30"), "too large");
        assert_eq!(e("x"), "not a whole number");
        assert_eq!(e("nan"), "not a whole number");
        assert_eq!(e(""), "not a whole number");
    }
}
