//! The `gmcl` command line: parses arguments, dispatches to the library, prints results.

use clap::{Args, Parser, Subcommand, ValueEnum};
use gmcl::bench;
use gmcl::generate::{self, RmatParams};
use gmcl::info::GraphInfo;
use gmcl::io::{self, Format, Loaded};
use gmcl::mcl::{self, MclParams, Overlap, PruneParams};
use gmcl::spgemm::{self, EngineKind, SpgemmOptions};
use gmcl::tricount::{self, SimpleGraph};
use gmcl::{BuildOptions, Csr, Duplicates, Error, Result, Scalar};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "gmcl",
    version,
    about = "Markov clustering and triangle counting on large power-law graphs, on a GPU SpGEMM engine (gMAGNUS) or a multithreaded CPU engine."
)]
struct Cli {
    /// Worker threads (default: all cores).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    /// Print no progress and no notices on stderr (errors still print).
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate an R-MAT graph (PaRMAT-compatible options), written as .el, .wel or .mtx.
    Generate(GenerateArgs),
    /// Print a graph's vertices, edges, self loops, duplicates, symmetry and degrees.
    Info(InfoArgs),
    /// Multiply sparse matrices: C = A·B, or A² when B is left out. Writes Matrix Market.
    Spgemm(SpgemmArgs),
    /// Markov clustering (MCL, as mcl 22-282): one cluster per line, largest first.
    Cluster(ClusterArgs),
    /// Distances between two clusterings: split/join, variation of information, adjusted Rand.
    Dist(DistArgs),
    /// Benchmarks, every result checked before any time counts.
    Bench(BenchArgs),
    /// Count the triangles of a graph (made simple and undirected first).
    Tricount(TricountArgs),
}

#[derive(Args)]
struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// SpGEMM: gMAGNUS against every cuSPARSE algorithm (and the CPU engine), on the gMAGNUS
    /// paper's R-MAT products, symmetric squares, and A² of any files given.
    Spgemm(BenchSpgemmArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum SuiteArg {
    /// A with 4, 8, 16, 32 nonzeros per row times B with 8, scales 15 to --max-scale.
    RmatPaper,
    /// A² of symmetric R-MAT, edge factors 8 and 16, scales 14 to --max-scale.
    Sym,
    /// Only the files given.
    None,
}

#[derive(Args)]
struct BenchSpgemmArgs {
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
    #[arg(long, default_value_t = 5, value_name = "N")]
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

#[derive(Args)]
struct InputArgs {
    /// Input format (default: from the extension: .el .wel .mtx .abc, .txt/.snap for SNAP).
    #[arg(long, value_name = "el|wel|snap|mtx|abc")]
    format: Option<Format>,
}

#[derive(Args)]
struct GenerateArgs {
    /// log2 of the number of vertices.
    #[arg(
        long,
        short = 's',
        required_unless_present = "vertices",
        conflicts_with = "vertices"
    )]
    scale: Option<u32>,
    /// Number of vertices (need not be a power of two).
    #[arg(long, short = 'n')]
    vertices: Option<u64>,
    /// Number of edges.
    #[arg(
        long,
        short = 'm',
        required_unless_present = "edge_factor",
        conflicts_with = "edge_factor"
    )]
    edges: Option<u64>,
    /// Edges per vertex: edges = edge-factor × vertices.
    #[arg(long, short = 'e')]
    edge_factor: Option<u64>,
    /// R-MAT probability of the top-left quadrant (Graph500 and the gMAGNUS paper: 0.57;
    /// PaRMAT's own default is 0.45).
    #[arg(short = 'a', default_value_t = 0.57)]
    a: f64,
    /// Top-right quadrant (Graph500: 0.19; PaRMAT's default 0.22).
    #[arg(short = 'b', default_value_t = 0.19)]
    b: f64,
    /// Bottom-left quadrant (Graph500: 0.19; PaRMAT's default 0.22). d = 1 - a - b - c.
    #[arg(short = 'c', default_value_t = 0.19)]
    c: f64,
    /// Exactly `edges` distinct edges (the first distinct ones of the random stream).
    #[arg(long)]
    no_duplicates: bool,
    /// No edge from a vertex to itself.
    #[arg(long)]
    no_self_loops: bool,
    /// Undirected: each edge written once, as `min max`.
    #[arg(long)]
    undirected: bool,
    /// Write edges sorted by source, then target.
    #[arg(long)]
    sorted: bool,
    /// A weight per edge, uniform in [0.5, 1.5) (written as .wel, or real .mtx).
    #[arg(long)]
    weights: bool,
    /// Random seed: the same seed gives byte-identical output whatever the thread count.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file; its extension picks the format (.el, .wel, .mtx).
    #[arg(long, short = 'o')]
    output: PathBuf,
}

#[derive(Args)]
struct InfoArgs {
    /// The graph file.
    input: PathBuf,
    #[command(flatten)]
    input_args: InputArgs,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Precision {
    F32,
    F64,
}

#[derive(Args)]
struct SpgemmArgs {
    /// Matrix A (any input format; an edge list is the matrix it lists).
    a: PathBuf,
    /// Matrix B (default: A, giving A²).
    b: Option<PathBuf>,
    #[command(flatten)]
    input_args: InputArgs,
    /// Write C here as Matrix Market (1-based).
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Engine: cpu, gpu (gMAGNUS) or auto (the GPU when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    engine: EngineKind,
    /// Make the inputs symmetric first (A + Aᵀ pattern, duplicate values summed).
    #[arg(long)]
    symmetrize: bool,
    /// Value type of the product.
    #[arg(long, value_enum, default_value = "f64")]
    precision: Precision,
    /// Multiply this many times (a benchmark: the inputs are loaded once; above 1, one untimed
    /// warm-up product comes first, each product is freed before the next, the products are
    /// checked equal, and the times reported are the medians).
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: usize,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}
#[derive(Args)]
struct ClusterArgs {
    /// The graph file (made symmetric; self loops dropped; vertices without edges left out).
    input: PathBuf,
    #[command(flatten)]
    input_args: InputArgs,
    /// Inflation (mcl's -I): greater than 0, at most 30; larger gives finer clusters.
    #[arg(
        short = 'I',
        long,
        default_value_t = 2.0,
        allow_negative_numbers = true
    )]
    inflation: f64,
    /// Loop gain (mcl's -c): the loop added to each node weighs its largest edge times this.
    #[arg(
        short = 'c',
        long,
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    loop_gain: f64,
    /// mcl's pruning scheme 1..7 (P/S/R/pct presets); -P -S -R --pct override single values.
    #[arg(long, default_value_t = 6)]
    scheme: u32,
    /// Drop entries under 1/P after expansion (0: no threshold).
    #[arg(short = 'P', long = "prune", value_name = "P")]
    prune: Option<u32>,
    /// Keep at most S entries per column (0: no selection).
    #[arg(short = 'S', long = "select", value_name = "S")]
    select: Option<u32>,
    /// Recover up to R entries per column when too much mass was pruned (0: no recovery).
    #[arg(short = 'R', long = "recover", value_name = "R")]
    recover: Option<u32>,
    /// Recover when the kept mass is under this percentage (0..99).
    #[arg(long)]
    pct: Option<u32>,
    /// At most this many iterations (mcl's -L).
    #[arg(short = 'L', long = "max-iterations", default_value_t = 10000)]
    max_iterations: usize,
    /// Nodes found in several clusters: keep them there, cut them (to the first, largest
    /// cluster) or split them off into clusters of their own.
    #[arg(long, default_value = "cut", value_name = "keep|cut|split")]
    overlap: Overlap,
    /// Engine of the expansion: cpu, gpu (gMAGNUS) or auto.
    #[arg(long, default_value = "auto")]
    engine: EngineKind,
    /// Value type of the matrices (mcl uses f32).
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Entries of M² per expansion batch (at most): bounds the memory of one batch (the GPU
    /// engine, and the CPU engine with --unfused) [default: 33554432 on the CPU; on the GPU,
    /// what the device's memory allows].
    #[arg(long, value_name = "N")]
    batch_entries: Option<u64>,
    /// Expand in batches through the SpGEMM engine, then prune, instead of pruning each column
    /// of M² as it is made (the default: every column on the CPU, the dense ones on the GPU;
    /// same result, for comparison).
    #[arg(long)]
    unfused: bool,
    /// Write the clusters here instead of stdout.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Write a JSON report here (clusters, iterations, seconds and clm info's measures).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct DistArgs {
    /// A clustering: one cluster per line, labels separated by tabs or spaces.
    a: PathBuf,
    /// Another clustering of the same nodes.
    b: PathBuf,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TricountArgs {
    /// The graph file (directions, self loops, duplicates and weights are ignored).
    input: PathBuf,
    #[command(flatten)]
    input_args: InputArgs,
    /// Write each vertex's triangle count here: `label<TAB>count` per vertex, in vertex order
    /// (labels as in the input).
    #[arg(long, value_name = "FILE")]
    per_vertex: Option<PathBuf>,
    /// Engine: cpu, gpu (gMAGNUS) or auto (the GPU when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    engine: EngineKind,
    /// auto (the merge kernel on the CPU, the fused kernel on the GPU), spgemm (a masked
    /// product on the engine), merge (the dedicated CPU kernel) or fused (the GPU kernel: the
    /// masked product C<U> = U·U summed as it is formed).
    #[arg(long, default_value = "auto", value_name = "auto|spgemm|merge|fused")]
    method: tricount::Method,
    /// Renumber vertices by degree first: auto (GAP's rule: when degrees are skewed), always,
    /// never.
    #[arg(long, default_value = "auto", value_name = "auto|always|never")]
    relabel: tricount::Relabel,
    /// The masked product of the spgemm method: auto (fewest intermediate products), sandia
    /// (C<U> = U·U), dot (C<L> = L·Lᵀ) or dot-upper (C<U> = U·Uᵀ).
    #[arg(long, default_value = "auto", value_name = "auto|sandia|dot|dot-upper")]
    form: tricount::Form,
    /// Count this many times (a benchmark: the graph is loaded once; above 1, one untimed
    /// warm-up count comes first; the counts are checked equal, and the times reported are the
    /// medians).
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: usize,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

/// Writes to stdout like `print!`, but a failed write (a closed pipe, a full disk) is an error
/// naming `<stdout>` instead of a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        std::io::stdout()
            .write_fmt(format_args!($($arg)*))
            .map_err(|e| Error::io("<stdout>", "cannot write output", e))
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {
        out!("{}\n", format_args!($($arg)*))
    };
}

/// Where notices and progress go: stderr, unless --quiet.
#[derive(Clone, Copy)]
struct Ui {
    quiet: bool,
}

impl Ui {
    fn notice(&self, msg: &str) {
        if !self.quiet {
            // A closed stderr must not stop the run: the notice is lost, nothing else.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "gmcl: {msg}");
        }
    }

    /// A progress bar on stderr when it is a terminal; hidden otherwise.
    fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if self.quiet || !std::io::stderr().is_terminal() {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        let style =
            ProgressStyle::with_template("{msg} [{bar:40}] {human_pos}/{human_len} ({eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style.progress_chars("=> "));
        bar.set_message(what.to_string());
        bar
    }
}

fn main() {
    let cli = Cli::parse();
    let ui = Ui { quiet: cli.quiet };
    // Ctrl-C and SIGTERM set a flag that the long loops check: the run unwinds, temporary output
    // files are removed, and the process exits with status 130 below.
    if let Err(e) = gmcl::interrupt::install() {
        exit_with(&e);
    }
    configure_from_env();
    if let Some(n) = cli.threads {
        if n == 0 {
            exit_with(&Error::Invalid("--threads must be at least 1".into()));
        }
        if let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
        {
            exit_with(&Error::Invalid(format!("cannot start {n} threads: {e}")));
        }
    }
    let result = match cli.command {
        Command::Generate(a) => run_generate(a, ui),
        Command::Info(a) => run_info(a),
        Command::Spgemm(a) => match a.precision {
            Precision::F32 => run_spgemm::<f32>(a, ui),
            Precision::F64 => run_spgemm::<f64>(a, ui),
        },
        Command::Bench(BenchArgs {
            what: BenchCommand::Spgemm(a),
        }) => match a.precision {
            Precision::F32 => run_bench_spgemm::<f32>(a, ui),
            Precision::F64 => run_bench_spgemm::<f64>(a, ui),
        },
        Command::Tricount(a) => run_tricount(a, ui),
        Command::Cluster(a) => match a.precision {
            Precision::F32 => run_cluster::<f32>(a, ui),
            Precision::F64 => run_cluster::<f64>(a, ui),
        },
        Command::Dist(a) => run_dist(a),
    };
    if let Err(e) = result {
        exit_with(&e);
    }
}

/// Prints the error and exits with its status. Called only once every value of the run has
/// been dropped (temporary output files removed).
fn exit_with(e: &Error) -> ! {
    use std::io::Write;
    // Should stderr be closed, the exit status still tells.
    let _ = match e {
        Error::Interrupted => writeln!(std::io::stderr(), "gmcl: interrupted"),
        _ => writeln!(std::io::stderr(), "gmcl: error: {e}"),
    };
    std::process::exit(e.exit_code());
}

fn run_generate(a: GenerateArgs, ui: Ui) -> Result<()> {
    let n = match (a.vertices, a.scale) {
        (Some(n), _) => n,
        (None, Some(s)) if s < 64 => 1u64 << s,
        (None, s) => {
            return Err(Error::Invalid(format!(
                "--scale {s:?} is too large (at most 32)"
            )))
        }
    };
    let edges = match (a.edges, a.edge_factor) {
        (Some(m), _) => m,
        (None, Some(ef)) => ef
            .checked_mul(n)
            .ok_or_else(|| Error::Invalid(format!("{ef} × {n} edges overflow a 64-bit count")))?,
        (None, None) => return Err(Error::Invalid("give --edges or --edge-factor".into())),
    };
    let mut p = RmatParams::new(a.scale.unwrap_or(0), edges);
    p.vertices = a.vertices;
    (p.a, p.b, p.c) = (a.a, a.b, a.c);
    p.no_duplicates = a.no_duplicates;
    p.no_self_loops = a.no_self_loops;
    p.undirected = a.undirected;
    p.sorted = a.sorted;
    p.weights = a.weights;
    p.seed = a.seed;
    let start = Instant::now();
    let el = generate::generate(&p)?;
    let bar = ui.bar(el.len() as u64, "writing");
    generate::write_edges(&a.output, &el, &|done| bar.set_position(done))?;
    bar.finish_and_clear();
    ui.notice(&format!(
        "wrote {} edges over {} vertices to {} in {:.2} s",
        el.len(),
        p.n_vertices(),
        a.output.display(),
        start.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn run_info(a: InfoArgs) -> Result<()> {
    let loaded = io::load(&a.input, a.input_args.format)?;
    let info = GraphInfo::of(&loaded.edges, loaded.symmetric_storage)?;
    if a.json {
        outln!("{}", to_json(&info)?)?;
    } else {
        outln!("file            {}", a.input.display())?;
        outln!("format          {}", loaded.format)?;
        outln!("vertices        {}", info.vertices)?;
        outln!("edges           {}", info.edges)?;
        outln!("self loops      {}", info.self_loops)?;
        outln!("duplicate edges {}", info.duplicate_edges)?;
        outln!(
            "symmetric       {}",
            if info.symmetric { "yes" } else { "no" }
        )?;
        outln!("max degree      {}", info.max_degree)?;
        outln!("avg degree      {:.3}", info.avg_degree)?;
    }
    Ok(())
}

/// Loads a matrix for `spgemm`: entries as listed, duplicates summed.
fn load_matrix<T: Scalar>(
    path: &Path,
    format: Option<Format>,
    symmetrize: bool,
) -> Result<(Loaded, Csr<T>)> {
    let loaded = io::load(path, format)?;
    let opts = BuildOptions {
        symmetrize,
        drop_self_loops: false,
        duplicates: Duplicates::Sum,
    };
    let m = Csr::from_edges(&loaded.edges, &opts).map_err(|e| match e {
        Error::Invalid(msg) => Error::Input {
            path: path.to_path_buf(),
            message: msg,
        },
        other => other,
    })?;
    Ok((loaded, m))
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
    /// The GPU engine's phases (with --engine gpu --json).
    #[serde(skip_serializing_if = "Option::is_none")]
    phases: Option<Vec<PhaseReport>>,
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

fn run_spgemm<T: Scalar>(a: SpgemmArgs, ui: Ui) -> Result<()> {
    open_gpu_early(a.engine);
    let fmt = a.input_args.format;
    let (la, ma) = load_matrix::<T>(&a.a, fmt, a.symmetrize)?;
    let mb = match &a.b {
        Some(pb) => {
            let (lb, mb) = load_matrix::<T>(pb, fmt, a.symmetrize)?;
            if la.labels != gmcl::Labels::Identity || lb.labels != gmcl::Labels::Identity {
                return Err(Error::Invalid(
                    "A·B of two files needs numeric ids (el, wel, mtx): label and SNAP ids are \
                     renumbered per file, so their rows and columns would not match"
                        .into(),
                ));
            }
            Some(mb)
        }
        None => None,
    };
    let b = mb.as_ref().unwrap_or(&ma);
    if a.repeat == 0 {
        return Err(Error::Invalid("--repeat must be at least 1".into()));
    }
    let resolved = resolve_engine(a.engine, ui)?;
    let ((c, stats, phases), engine) = with_fallback(a.engine, resolved, ui, |engine| {
        if engine == EngineKind::Gpu && a.json {
            // With --json the GPU engine times each phase (waiting for the device between
            // phases) and reports it with its bandwidth against the device's copy bandwidth.
            let gpu = spgemm::gpu::GpuEngine::open()?.with_tuning(spgemm::gpu::GpuTuning {
                profile: true,
                ..gpu_tuning_from_env()
            });
            let (c, stats) =
                multiply_repeatedly(a.repeat, || gpu.multiply(&ma, b, &SpgemmOptions::default()))?;
            let copy = gpu.gpu().copy_bandwidth()?;
            let phases = gpu
                .last_phases()
                .into_iter()
                .map(|p| PhaseReport::new(p, copy))
                .collect::<Vec<_>>();
            Ok((c, stats, Some(phases)))
        } else {
            let (c, stats) = multiply_repeatedly(a.repeat, || {
                let opts = SpgemmOptions {
                    gpu: gpu_tuning_from_env(),
                    ..Default::default()
                };
                spgemm::multiply(engine, &ma, b, &opts)
            })?;
            Ok((c, stats, None))
        }
    })?;
    if let Some(out) = &a.output {
        gmcl::output::write_mtx(out, &c)?;
    }
    let report = SpgemmReport {
        engine: engine.to_string(),
        rows: c.nrows(),
        cols: c.ncols(),
        nnz: c.nnz(),
        intermediate_products: stats.intermediate_products,
        seconds: stats.seconds,
        device_seconds: stats.device_seconds,
        runs: a.repeat,
        phases,
        gflops: if stats.device_seconds > 0.0 {
            2.0 * stats.intermediate_products as f64 / stats.device_seconds / 1e9
        } else {
            0.0
        },
    };
    if a.json {
        outln!("{}", to_json(&report)?)?;
    } else {
        outln!(
            "C: {} x {}, {} nonzeros, {} intermediate products, {:.4} s on the {} engine ({:.4} s computing: {:.3} GFLOP/s)",
            report.rows, report.cols, report.nnz, report.intermediate_products, report.seconds, report.engine, report.device_seconds, report.gflops
        )?;
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct TricountReport {
    triangles: u64,
    vertices: u64,
    edges: u64,
    seconds: f64,
    edges_per_second: f64,
    method: &'static str,
    /// Counts made (times are their medians).
    runs: usize,
    /// Loading the file and making the graph simple.
    load_seconds: f64,
    /// Of `seconds`, orienting (and renumbering) the graph.
    orient_seconds: f64,
    /// Fused GPU kernel only: from the graph on the device to the count, and its rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    device_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_edges_per_second: Option<f64>,
}

fn run_tricount(a: TricountArgs, ui: Ui) -> Result<()> {
    let start = Instant::now();
    open_gpu_early(a.engine);
    let loaded = io::load(&a.input, a.input_args.format)?;
    let labels = loaded.labels;
    let g = SimpleGraph::from_edges(loaded.edges).map_err(|e| match e {
        Error::Invalid(msg) => Error::Input {
            path: a.input.clone(),
            message: msg,
        },
        other => other,
    })?;
    let load_seconds = start.elapsed().as_secs_f64();
    let resolved = resolve_engine(a.engine, ui)?;
    let opts = tricount::Options {
        engine: resolved,
        method: a.method,
        relabel: a.relabel,
        form: a.form,
        per_vertex: a.per_vertex.is_some(),
        gpu: gmcl::tricount::gpu::TriangleTuning {
            poison: std::env::var("GMCL_GPU_POISON").is_ok_and(|v| v == "1"),
            profile: std::env::var("GMCL_GPU_PROFILE").is_ok_and(|v| v == "1"),
            ..Default::default()
        },
    };
    // Created before counting, so that a path that cannot be written fails at once.
    let per_vertex_out = match &a.per_vertex {
        Some(path) => Some(gmcl::output::AtomicOutput::create(path)?),
        None => None,
    };
    if a.repeat == 0 {
        return Err(Error::Invalid("--repeat must be at least 1".into()));
    }
    let (t, engine) = with_fallback(a.engine, resolved, ui, |engine| {
        count_repeatedly(&g, &tricount::Options { engine, ..opts }, a.repeat)
    })?;
    if let (Some(mut out), Some(counts)) = (per_vertex_out, &t.per_vertex) {
        let ids: Vec<u32> = (0..counts.len() as u32).collect();
        gmcl::output::write_formatted(
            &mut out,
            &ids,
            |&v, buf| {
                labels.write_label(v, buf);
                buf.push(b'\t');
                buf.extend_from_slice(itoa::Buffer::new().format(counts[v as usize]).as_bytes());
                buf.push(b'\n');
            },
            |_| {},
        )?;
        out.commit()?;
    }
    let report = TricountReport {
        triangles: t.triangles,
        vertices: g.vertices() as u64,
        edges: g.edges(),
        seconds: t.seconds,
        edges_per_second: rate(g.edges(), t.seconds),
        method: t.method.name(),
        runs: a.repeat,
        load_seconds,
        orient_seconds: t.orient_seconds,
        device_seconds: (t.method == tricount::Method::Fused).then_some(t.device_seconds),
        device_edges_per_second: (t.method == tricount::Method::Fused)
            .then(|| rate(g.edges(), t.device_seconds)),
    };
    let how = match t.method {
        tricount::Method::Spgemm => {
            let forms: Vec<&str> = t.forms.iter().map(|f| f.name()).collect();
            format!(
                "masked product ({}) on the {engine} engine, {} intermediate products in {:.4} s",
                forms.join(" + "),
                t.intermediate_products,
                t.product_seconds
            )
        }
        tricount::Method::Fused => format!(
            "fused GPU kernel: upload {:.4} s, on the device {:.4} s ({:.3e} edges/s)",
            t.upload_seconds,
            t.device_seconds,
            rate(g.edges(), t.device_seconds)
        ),
        m => format!("{} kernel", m.name()),
    };
    ui.notice(&format!(
        "{} vertices, {} edges; loaded in {:.3} s; counted in {:.4} s (orientation {:.4} s; {}{}, {:.3e} edges/s)",
        report.vertices,
        report.edges,
        load_seconds,
        report.seconds,
        t.orient_seconds,
        how,
        if t.relabelled {
            ", relabelled by degree"
        } else {
            ""
        },
        report.edges_per_second
    ));
    if a.json {
        outln!("{}", to_json(&report)?)?;
    } else {
        outln!("{}", report.triangles)?;
    }
    Ok(())
}

fn run_bench_spgemm<T: Scalar>(a: BenchSpgemmArgs, ui: Ui) -> Result<()> {
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

#[derive(serde::Serialize)]
struct ClusterReport {
    clusters: usize,
    iterations: usize,
    seconds: f64,
    nodes: usize,
    singletons: usize,
    largest: usize,
    efficiency: f64,
    modularity: f64,
    mass_fraction: f64,
    converged: bool,
    engine: String,
    /// Most device memory in use at once (GPU engine only).
    #[serde(skip_serializing_if = "Option::is_none")]
    device_peak_bytes: Option<u64>,
    /// Of `seconds`, before the first iteration and after the last.
    setup_seconds: f64,
    finish_seconds: f64,
    /// Reading the input and building the graph (before `seconds`).
    load_seconds: f64,
}

fn run_cluster<T: Scalar>(a: ClusterArgs, ui: Ui) -> Result<()> {
    let start = Instant::now();
    let mut prune = PruneParams::scheme(a.scheme)?;
    if let Some(p) = a.prune {
        prune.prune = p;
    }
    if let Some(s) = a.select {
        prune.select = s;
    }
    if let Some(r) = a.recover {
        prune.recover = r;
    }
    if let Some(p) = a.pct {
        prune.pct = p;
    }
    open_gpu_early(a.engine);
    let params = MclParams {
        inflation: a.inflation,
        loop_gain: a.loop_gain,
        prune,
        max_iterations: a.max_iterations,
        overlap: a.overlap,
        engine: a.engine,
        gpu: gpu_tuning_from_env(),
        batch_entries: a.batch_entries,
        fused: !a.unfused,
        ..Default::default()
    };
    params.validate()?;
    let loaded = io::load(&a.input, a.input_args.format)?;
    let (graph, ids) = mcl::graph_from_edges::<T>(&loaded.edges).map_err(|e| match e {
        Error::Invalid(msg) => Error::Input {
            path: a.input.clone(),
            message: msg,
        },
        other => other,
    })?;
    if graph.nrows() == 0 {
        ui.notice("the graph has no edges: no clusters");
    }
    let load_seconds = start.elapsed().as_secs_f64();
    let engine = resolve_engine(a.engine, ui)?;
    let (result, engine) = with_fallback(a.engine, engine, ui, |engine| {
        let params = MclParams {
            engine,
            ..params.clone()
        };
        mcl::cluster(&graph, &params, &mut |it| {
            ui.notice(&format!(
                "iteration {:>3}  chaos {:>10.4}  kept {:>11}  expanded {:>13}  products {:>15}  {:>7.2} s ({:.2} s expanding)",
                it.index, it.chaos, it.kept, it.expanded, it.products, it.seconds, it.expand_seconds
            ))
        })
    })?;
    if !result.converged && result.iterations > 0 {
        ui.notice(&format!(
            "stopped after {} iterations (-L) before the chaos fell under 1e-4",
            result.iterations
        ));
    }
    if result.overlap > 0 {
        ui.notice(&format!(
            "{} node memberships in overlap ({})",
            result.overlap, params.overlap
        ));
    }
    if result.missing > 0 {
        ui.notice(&format!(
            "{} nodes reached no attractor: put together in one cluster",
            result.missing
        ));
    }
    let labels = &loaded.labels;
    let fmt = |c: &Vec<u32>, buf: &mut Vec<u8>| {
        for (k, &v) in c.iter().enumerate() {
            if k > 0 {
                buf.push(b'\t');
            }
            labels.write_label(ids[v as usize], buf);
        }
        buf.push(b'\n');
    };
    match &a.output {
        Some(path) => {
            let mut out = gmcl::output::AtomicOutput::create(path)?;
            gmcl::output::write_formatted(&mut out, &result.clusters, fmt, |_| {})?;
            out.commit()?;
        }
        None => {
            use std::io::Write;
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
            let mut buf = Vec::new();
            for c in &result.clusters {
                buf.clear();
                fmt(c, &mut buf);
                w.write_all(&buf)
                    .map_err(|e| Error::io("<stdout>", "cannot write output", e))?;
            }
            w.flush()
                .map_err(|e| Error::io("<stdout>", "cannot write output", e))?;
        }
    }
    let info = mcl::measures::cluster_info(&graph, &result.clusters);
    ui.notice(&format!(
        "{} clusters of {} nodes ({} singletons, largest {}) in {} iterations, {:.2} s; \
         efficiency {:.5}, modularity {:.5}, mass fraction {:.5}",
        info.clusters,
        info.nodes,
        info.singletons,
        info.largest,
        result.iterations,
        result.seconds,
        info.efficiency,
        info.modularity,
        info.mass_fraction
    ));
    if let Some(path) = &a.json {
        let report = ClusterReport {
            clusters: info.clusters,
            iterations: result.iterations,
            seconds: result.seconds,
            nodes: info.nodes,
            singletons: info.singletons,
            largest: info.largest,
            efficiency: info.efficiency,
            modularity: info.modularity,
            mass_fraction: info.mass_fraction,
            converged: result.converged,
            engine: engine.to_string(),
            device_peak_bytes: (engine == EngineKind::Gpu).then_some(result.device_peak_bytes),
            setup_seconds: result.setup_seconds,
            finish_seconds: result.finish_seconds,
            load_seconds,
        };
        let mut out = gmcl::output::AtomicOutput::create(path)?;
        out.write_all(to_json(&report)?.as_bytes())?;
        out.write_all(b"\n")?;
        out.commit()?;
    }
    Ok(())
}

fn run_dist(a: DistArgs) -> Result<()> {
    let ca = mcl::measures::read_clusters(&a.a)?;
    let cb = mcl::measures::read_clusters(&a.b)?;
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    let d = mcl::measures::distance_by_label(&ca, &cb, (&na, &nb))?;
    if a.json {
        outln!("{}", to_json(&d)?)?;
    } else {
        let pct = if d.nodes > 0 {
            100.0 * d.split_join as f64 / d.nodes as f64
        } else {
            0.0
        };
        outln!(
            "nodes                     {} ({} and {} clusters)",
            d.nodes,
            d.clusters_a,
            d.clusters_b
        )?;
        outln!(
            "split/join distance       {} ({} + {}), {:.3}% of the nodes",
            d.split_join,
            d.split_join_a,
            d.split_join_b,
            pct
        )?;
        outln!(
            "variation of information  {:.5} ({:.5} + {:.5})",
            d.variation_of_information,
            d.vi_a,
            d.vi_b
        )?;
        outln!("adjusted Rand index       {:.5}", d.adjusted_rand)?;
    }
    Ok(())
}

/// Multiplies `repeat` times (after a warm-up product when more than once), freeing each product
/// before the next as a fresh process would start without it; returns the last product with
/// the median of each time. Products that differ (which would be a bug) are an error.
fn multiply_repeatedly<T: Scalar>(
    repeat: usize,
    mut product: impl FnMut() -> Result<(Csr<T>, spgemm::ProductStats)>,
) -> Result<(Csr<T>, spgemm::ProductStats)> {
    let warm_up = usize::from(repeat > 1);
    let mut times = Vec::with_capacity(repeat);
    let mut first: Option<ProductFingerprint> = None;
    let mut last = None;
    for run in 0..repeat + warm_up {
        drop(last.take());
        let (c, stats) = product()?;
        let print = ProductFingerprint::of(&c);
        match &first {
            None => first = Some(print),
            Some(f) if !f.matches(&print) => {
                return Err(Error::Invalid(
                    "repeated products differ: please report this as a bug".into(),
                ))
            }
            Some(_) => {}
        }
        if run >= warm_up {
            times.push((stats.seconds, stats.device_seconds));
        }
        last = Some((c, stats));
    }
    let (c, mut stats) = last.expect("at least one product is made");
    stats.seconds = upper_median(times.iter().map(|t| t.0));
    stats.device_seconds = upper_median(times.iter().map(|t| t.1));
    Ok((c, stats))
}

/// What repeated products are compared by without keeping two of them: the structure exactly
/// (a hash of offsets and columns), the values by their sum (the GPU engine's float atomics may
/// add in another order, so the values may differ within rounding).
struct ProductFingerprint {
    nnz: usize,
    structure: u64,
    value_sum: f64,
    value_abs_sum: f64,
}

impl ProductFingerprint {
    fn of<T: Scalar>(c: &Csr<T>) -> Self {
        use rayon::prelude::*;
        let mix = |h: u64, x: u64| (h ^ x).wrapping_mul(0x100_0000_01b3).rotate_left(29);
        let rows = c
            .row_ptr()
            .par_chunks(1 << 16)
            .map(|ch| ch.iter().fold(0u64, |h, &x| mix(h, x)));
        let cols = c
            .col_idx()
            .par_chunks(1 << 16)
            .map(|ch| ch.iter().fold(0u64, |h, &x| mix(h, x as u64)));
        let structure = rows
            .chain(cols)
            .collect::<Vec<u64>>()
            .into_iter()
            .fold(0xcbf2_9ce4_8422_2325, mix);
        let (value_sum, value_abs_sum) = c
            .values()
            .par_iter()
            .map(|v| (v.to_f64(), v.to_f64().abs()))
            .reduce(|| (0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
        Self {
            nnz: c.nnz(),
            structure,
            value_sum,
            value_abs_sum,
        }
    }

    fn matches(&self, other: &Self) -> bool {
        let scale = self
            .value_abs_sum
            .max(other.value_abs_sum)
            .max(f64::MIN_POSITIVE);
        self.nnz == other.nnz
            && self.structure == other.structure
            && (self.value_sum - other.value_sum).abs() <= 1e-4 * scale
    }
}

/// The middle value (the upper of the two middle ones for an even count) of a nonempty list.
fn upper_median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Counts `repeat` times (after a warm-up count when more than once); the result has the
/// median of each time. Differing counts (which would be a bug) are an error.
fn count_repeatedly(
    g: &SimpleGraph,
    opts: &tricount::Options,
    repeat: usize,
) -> Result<tricount::Triangles> {
    let warm_up = usize::from(repeat > 1);
    let runs = (0..repeat + warm_up)
        .map(|_| tricount::count(g, opts))
        .collect::<Result<Vec<_>>>()?;
    if runs
        .iter()
        .any(|r| r.triangles != runs[0].triangles || r.per_vertex != runs[0].per_vertex)
    {
        return Err(Error::Invalid(
            "repeated counts differ: please report this as a bug".into(),
        ));
    }
    let runs = &runs[warm_up..];
    let median = |f: fn(&tricount::Triangles) -> f64| upper_median(runs.iter().map(f));
    let mut t = runs[0].clone();
    t.seconds = median(|r| r.seconds);
    t.orient_seconds = median(|r| r.orient_seconds);
    t.product_seconds = median(|r| r.product_seconds);
    t.upload_seconds = median(|r| r.upload_seconds);
    t.device_seconds = median(|r| r.device_seconds);
    Ok(t)
}

/// Runs `work` on `engine` and returns its result with the engine that made it. When `auto`
/// picked the GPU and the GPU fails during the run, says so once and runs `work` again on the
/// CPU engine; an explicit `--engine gpu` fails with the GPU's error.
fn with_fallback<R>(
    asked: EngineKind,
    engine: EngineKind,
    ui: Ui,
    mut work: impl FnMut(EngineKind) -> Result<R>,
) -> Result<(R, EngineKind)> {
    match work(engine) {
        Err(Error::Gpu { stage, message })
            if asked == EngineKind::Auto && engine == EngineKind::Gpu =>
        {
            ui.notice(&format!(
                "the GPU failed ({stage}: {message}): running on the CPU engine instead"
            ));
            Ok((work(EngineKind::Cpu)?, EngineKind::Cpu))
        }
        r => r.map(|v| (v, engine)),
    }
}

/// Edges per second, 0 for a zero time.
fn rate(edges: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        edges as f64 / seconds
    } else {
        0.0
    }
}

/// Starts opening the GPU on a thread of its own when `kind` may use it, so that the driver's
/// and the context's start-up (a quarter of a second) overlaps loading the input; whoever needs
/// the GPU first waits for it there ([`gmcl::gpu::device`] opens it once).
fn open_gpu_early(kind: EngineKind) {
    if kind != EngineKind::Cpu {
        std::thread::spawn(|| gmcl::gpu::device().is_ok());
    }
}

/// Picks the engine to run: `auto` becomes the GPU engine when a GPU is usable, else the CPU
/// engine with one notice saying why.
fn resolve_engine(kind: EngineKind, ui: Ui) -> Result<EngineKind> {
    let (engine, why) = spgemm::resolve(kind);
    if let Some(why) = why {
        ui.notice(&format!("no usable GPU ({why}): running on the CPU engine"));
    }
    Ok(engine)
}

/// Passes the settings the environment gives to the library, which reads no environment
/// variable itself: where compiled kernels are kept (`GMCL_KERNEL_CACHE`, a folder, or `0`/`off`
/// for none; else `$XDG_CACHE_HOME/gmcl`, else `$HOME/.cache/gmcl`), extra kernel macros for
/// tuning experiments (`GMCL_KERNEL_DEFINES="NAME=VALUE ..."`), the memory figure the loaders
/// check graphs against (`GMCL_MEMORY_LIMIT`, bytes) and the GPU fault switch of the tests
/// (`GMCL_GPU_FAULT=N`: the N-th checked driver call fails).
fn configure_from_env() {
    use std::path::PathBuf;
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let kernel_cache = match var("GMCL_KERNEL_CACHE") {
        Some(v) if v == "0" || v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => var("XDG_CACHE_HOME")
            .map(|d| PathBuf::from(d).join("gmcl"))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache").join("gmcl"))),
    };
    let kernel_defines = std::env::var("GMCL_KERNEL_DEFINES")
        .map(|d| d.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    // Nothing has opened the GPU yet, so this cannot fail.
    let _ = gmcl::gpu::configure(gmcl::gpu::DeviceOptions {
        kernel_cache,
        kernel_defines,
    });
    if let Ok(v) = std::env::var("GMCL_MEMORY_LIMIT") {
        gmcl::io::limits::set_memory_limit(v.trim().parse().ok());
    }
    if let Some(n) = std::env::var("GMCL_GPU_FAULT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        gmcl::gpu::fault::inject_at(n);
    }
}

/// The GPU engine's tuning: the defaults, with `GMCL_GPU_MEMORY_LIMIT` (bytes),
/// `GMCL_GPU_POISON=1`, `GMCL_GPU_PROFILE=1`, `GMCL_GPU_DENSE_FROM`, `GMCL_GPU_DENSE_FRACTION`
/// and `GMCL_GPU_HASH_LIMIT` (for tuning experiments).
fn gpu_tuning_from_env() -> spgemm::gpu::GpuTuning {
    let number = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse().ok());
    let on = |k: &str| std::env::var(k).is_ok_and(|v| v == "1");
    spgemm::gpu::GpuTuning {
        memory_limit: number("GMCL_GPU_MEMORY_LIMIT"),
        poison: on("GMCL_GPU_POISON"),
        profile: on("GMCL_GPU_PROFILE"),
        dense_from: number("GMCL_GPU_DENSE_FROM"),
        dense_fraction: number("GMCL_GPU_DENSE_FRACTION"),
        hash_limit: number("GMCL_GPU_HASH_LIMIT"),
        ..Default::default()
    }
}

fn to_json<S: serde::Serialize>(v: &S) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Invalid(format!("cannot format JSON: {e}")))
}
