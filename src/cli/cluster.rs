//! `gmcl cluster`: Markov clustering of a graph file, one cluster per line, with an optional
//! JSON report.

use super::ui::{count, to_json};
use super::wall::{Stopwatch, Wall};
use super::{InputArgs, Precision, Ui};
use clap::Args;
use gmcl::dist::{self, Comm};
use gmcl::engine;
use gmcl::io;
use gmcl::mcl::measures::ClusterInfo;
use gmcl::mcl::{self, Iteration, IterationProgress, MclParams, Observer, Overlap, PruneParams};
use gmcl::output::{standard_stream, AtomicOutput, StandardStream};
use gmcl::spgemm::EngineKind;
use gmcl::{Error, Result, Scalar};
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct ClusterArgs {
    /// The graph file, `-` for stdin with --format (made symmetric; self loops dropped; vertices
    /// without edges left out).
    input: PathBuf,
    #[command(flatten)]
    pub(super) input_args: InputArgs,
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
    /// mcl's pruning scheme 1..7 (P/S/R/pct presets); -P -S -R --pct after it override single
    /// values (in order, as in mcl: a later --scheme resets them).
    #[arg(long, default_value_t = 6, allow_negative_numbers = true, value_parser = crate::cli::whole_number::<u32>)]
    scheme: u32,
    /// Drop entries under 1/P after expansion (0: no threshold).
    #[arg(
        short = 'P',
        long = "prune",
        value_name = "P",
        allow_negative_numbers = true,
        value_parser = crate::cli::whole_number::<u32>
    )]
    prune: Option<u32>,
    /// Keep at most S entries per column (0: no selection).
    #[arg(
        short = 'S',
        long = "select",
        value_name = "S",
        allow_negative_numbers = true,
        value_parser = crate::cli::whole_number::<u32>
    )]
    select: Option<u32>,
    /// Recover up to R entries per column when too much mass was pruned (0: no recovery).
    #[arg(
        short = 'R',
        long = "recover",
        value_name = "R",
        allow_negative_numbers = true,
        value_parser = crate::cli::whole_number::<u32>
    )]
    recover: Option<u32>,
    /// Recover when the kept mass is under this percentage (0..99).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::cli::whole_number::<u32>)]
    pct: Option<u32>,
    /// At most this many iterations (mcl's -L).
    #[arg(
        short = 'L',
        long = "max-iterations",
        default_value_t = 10000,
        allow_negative_numbers = true,
        value_parser = crate::cli::whole_number::<usize>
    )]
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
    /// Expand in batches of stored columns of M², then prune, instead of pruning each column
    /// of M² as it is made (the default: every column on the CPU, the dense ones on the GPU;
    /// same result, for comparison).
    #[arg(long)]
    unfused: bool,
    /// mcl's -abc-tf: transform each weight of the .abc input as read, before duplicates and
    /// the mirror are merged (mcl's value transforms, e.g. `gq(0.3),mul(2)`; README lists them).
    #[arg(long, value_name = "SPEC")]
    abc_tf: Option<String>,
    /// mcl's --abc-neg-log10: replace each weight of the .abc input by minus its log10 (before
    /// --abc-tf, as mcl does).
    #[arg(long)]
    abc_neg_log10: bool,
    /// mcl's -tf: transform the weights of the symmetric graph, before the loops are added.
    #[arg(long, value_name = "SPEC")]
    tf: Option<String>,
    /// Write the clusters here instead of stdout.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// How the clusters are written: `labels` (one cluster per line, the nodes' labels separated
    /// by TABs, as mcl --abc writes them) or `mcl` (mcl's native matrix format, which clm dist
    /// and clm info read: nodes by index from 0, every vertex of the input listed).
    #[arg(long, value_enum, default_value = "labels", value_name = "labels|mcl")]
    output_format: ClusterFormat,
    /// Print a JSON report on stdout (clusters, iterations, seconds, clm info's measures, the
    /// parameters and gmcl's version); the clusters then go to -o FILE.
    #[arg(long)]
    json: bool,
    /// Write the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    json_file: Option<PathBuf>,
    /// A second file name: refused with a hint (`--json FILE` was the report's file).
    #[arg(hide = true)]
    extra: Option<PathBuf>,
}

impl ClusterArgs {
    /// The engine asked for (`--engine`).
    pub fn engine(&self) -> EngineKind {
        self.engine
    }
    /// The input file.
    pub fn input(&self) -> &std::path::Path {
        &self.input
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterFormat {
    Labels,
    Mcl,
}

/// Runs `gmcl cluster`; under an MPI launcher (`comm`), across its ranks
/// ([`run_across_ranks`]).
pub fn run(a: ClusterArgs, ui: Ui, comm: Option<&dyn Comm>) -> Result<()> {
    match (a.precision, comm) {
        (Precision::F32, None) => run_typed::<f32>(a, ui),
        (Precision::F64, None) => run_typed::<f64>(a, ui),
        (Precision::F32, Some(c)) => run_across_ranks::<f32>(a, ui, c),
        (Precision::F64, Some(c)) => run_across_ranks::<f64>(a, ui, c),
    }
}

#[derive(serde::Serialize)]
struct ClusterReport {
    /// gmcl's version.
    version: &'static str,
    /// The options of the run, as given or defaulted.
    parameters: serde_json::Value,
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
    /// Runs across MPI ranks only: the number of ranks and the engine each rank runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    ranks: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_engine: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_engines: Option<Vec<String>>,
    /// Across ranks: how the rows travelled between them ("mpi" or "nccl").
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange: Option<&'static str>,
    /// Across ranks: where the ranks' blocks were kept between iterations ("gpu": on each
    /// rank's GPU, the rows moving GPU to GPU; "host").
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks: Option<&'static str>,
    /// Most device memory in use at once (GPU engine only).
    #[serde(skip_serializing_if = "Option::is_none")]
    device_peak_bytes: Option<u64>,
    /// Runs across MPI ranks only: of `seconds`, the time spent on other ranks' rows (per
    /// iteration the longest of a rank), and the bytes the ranks received from one another.
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exchanged_bytes: Option<u64>,
    /// Of `seconds`, before the first iteration and after the last.
    setup_seconds: f64,
    finish_seconds: f64,
    /// Reading the input and building the graph (before `seconds`).
    load_seconds: f64,
    /// Where the wall time went.
    wall_s: Wall,
    /// Each iteration's figures.
    iteration_figures: Vec<IterationRecord>,
}

/// An iteration's figures in the report: those of its progress line, and across ranks the
/// exchange and each rank's part.
#[derive(serde::Serialize)]
struct IterationRecord {
    index: usize,
    chaos: f64,
    seconds: f64,
    expand_seconds: f64,
    products: u64,
    expanded: u64,
    kept: u64,
    batches: usize,
    /// Columns made and pruned in one pass (never stored unpruned).
    fused: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exchanged_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rounds: Option<usize>,
    /// Across ranks, each rank's part, in rank order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ranks: Vec<mcl::RankShare>,
}

impl IterationRecord {
    fn new(it: &Iteration) -> Self {
        let across = !it.ranks.is_empty();
        IterationRecord {
            index: it.index,
            chaos: it.chaos,
            seconds: it.seconds,
            expand_seconds: it.expand_seconds,
            products: it.products,
            expanded: it.expanded,
            kept: it.kept,
            batches: it.batches,
            fused: it.fused,
            exchange_seconds: across.then_some(it.exchange_seconds),
            exchanged_bytes: across.then_some(it.exchanged_bytes),
            rounds: across.then_some(it.rounds),
            ranks: it.ranks.clone(),
        }
    }
}

/// How a run went, for its report.
struct Ran<'a> {
    result: &'a mcl::MclResult,
    info: &'a ClusterInfo,
    /// The engine that ran (`Gpu` across ranks when any rank ran on its GPU).
    engine: EngineKind,
    /// Across MPI ranks only: the number of ranks, each rank's engine, one name for them and
    /// how rows travelled
    /// all ([`dist::rank_engines`]).
    ranks: Option<(usize, Vec<String>, String, &'static str)>,
    /// Across MPI ranks only: where the blocks were kept ("gpu" or "host").
    blocks: Option<&'static str>,
    load_seconds: f64,
    wall: Wall,
    /// Each iteration's figures, as the run reported them.
    iterations: Vec<IterationRecord>,
}

impl ClusterReport {
    /// The report of a run with the arguments `a` and the parameters `params` they gave.
    fn new(a: &ClusterArgs, params: &MclParams, run: Ran<'_>) -> Self {
        let mut parameters = parameters_json(a);
        parameters["prune"] = params.prune.prune.into();
        parameters["select"] = params.prune.select.into();
        parameters["recover"] = params.prune.recover.into();
        parameters["pct"] = params.prune.pct.into();
        if let Some((p, _, _, _)) = &run.ranks {
            parameters["ranks"] = (*p).into();
        }
        let (result, info) = (run.result, run.info);
        ClusterReport {
            version: env!("CARGO_PKG_VERSION"),
            parameters,
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
            engine: run.engine.to_string(),
            ranks: run.ranks.as_ref().map(|r| r.0),
            rank_engine: run.ranks.as_ref().map(|r| r.2.clone()),
            exchange_seconds: run.ranks.is_some().then_some(result.exchange_seconds),
            exchanged_bytes: run.ranks.is_some().then_some(result.exchanged_bytes),
            exchange: run.ranks.as_ref().map(|r| r.3),
            blocks: run.blocks,
            rank_engines: run.ranks.map(|r| r.1),
            device_peak_bytes: (run.engine == EngineKind::Gpu).then_some(result.device_peak_bytes),
            setup_seconds: result.setup_seconds,
            finish_seconds: result.finish_seconds,
            load_seconds: run.load_seconds,
            wall_s: run.wall,
            iteration_figures: run.iterations,
        }
    }
}

/// Writes `report` to `report_out` (when given), prints it when `json`, then commits every
/// output: a report that cannot be printed (a full disk behind stdout) fails the run before
/// any output replaces a file.
fn emit_report(
    report: &ClusterReport,
    report_out: Option<AtomicOutput>,
    mut commits: Vec<AtomicOutput>,
    json: bool,
) -> Result<()> {
    let text = to_json(report)?;
    if let Some(mut out) = report_out {
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        commits.push(out);
    }
    if json {
        outln!("{text}")?;
    }
    super::ui::print_then_commit(commits)
}

/// What a progress bar or line shows of a run: the work done, its total, and the iteration's
/// columns.
fn reading(counters: &IterationProgress) -> (u64, u64, String) {
    let r = counters.read();
    let msg = match r.iteration {
        0 => "starting".to_string(),
        i => format!("iteration {i}: {}/{} columns", r.columns, r.columns_total),
    };
    (r.work, r.work_total, msg)
}

/// One line per iteration on stderr, above the bar of the running iteration (when there is one).
struct IterationLines<'a> {
    ui: Ui,
    bar: &'a ProgressBar,
    counters: &'a IterationProgress,
    /// Every iteration's figures so far, for the report.
    records: &'a mut Vec<IterationRecord>,
}

impl Observer for IterationLines<'_> {
    fn iteration(&mut self, it: &Iteration) {
        self.records.push(IterationRecord::new(it));
        self.bar.suspend(|| {
            self.ui.notice(&format!(
                "iteration {:>3}  chaos {:>10.4}  kept {:>11}  expanded {:>13}  products {:>15}  {:>7.2} s ({:.2} s expanding{}{}{})",
                it.index,
                it.chaos,
                it.kept,
                it.expanded,
                it.products,
                it.seconds,
                it.expand_seconds,
                if it.batches > 1 {
                    format!(", {} batches", it.batches)
                } else {
                    String::new()
                },
                if it.exchanged_bytes > 0 {
                    let p = &it.exchange_parts;
                    let rounds = match it.rounds > 1 {
                        true => format!(" in {} rounds", it.rounds),
                        false => String::new(),
                    };
                    let (fastest, slowest) = it.rank_busy_span().unwrap_or_default();
                    format!(
                        ", ranks busy {fastest:.2}-{slowest:.2} s, {:.2} s exchanging{rounds}: \
                         lengths {:.2}, cut {:.2}, plan {:.2}, fetch {:.2}, operand {:.2}",
                        it.exchange_seconds, p.lengths, p.cut, p.plan, p.fetch, p.operand
                    )
                } else {
                    String::new()
                },
                if it.exchanged_bytes > 0 {
                    format!(", {} exchanged", gmcl::io::limits::human(it.exchanged_bytes))
                } else {
                    String::new()
                }
            ))
        })
    }

    fn within(&self) -> Option<&IterationProgress> {
        Some(self.counters)
    }
}

/// The checks of the arguments among themselves, before any work.
fn check_arguments(a: &ClusterArgs) -> Result<()> {
    if let Some(x) = &a.extra {
        return Err(Error::Invalid(if a.json {
            format!(
                "--json takes no file: it prints the report on stdout; to write it to {x}, \
                 use --json-file {x}",
                x = x.display()
            )
        } else {
            format!("unexpected argument {}", x.display())
        }));
    }
    let clusters_on_stdout = a
        .output
        .as_deref()
        .map_or(true, |p| standard_stream(p) == Some(StandardStream::Stdout));
    let report_file_on_stdout = a
        .json_file
        .as_deref()
        .filter(|p| standard_stream(p) == Some(StandardStream::Stdout));
    let report = match (a.json, report_file_on_stdout) {
        (true, _) => "--json prints the report".to_string(),
        (false, Some(p)) => format!("--json-file {} writes the report", p.display()),
        (false, None) => return Ok(()),
    };
    if clusters_on_stdout {
        let clusters = match &a.output {
            Some(p) => format!("where -o {} sends the clusters", p.display()),
            None => "where the clusters go without -o".to_string(),
        };
        return Err(Error::Invalid(format!(
            "{report} on stdout, {clusters}: write the clusters with -o FILE, or the report to \
             a file with --json-file FILE"
        )));
    }
    Ok(())
}

fn run_typed<T: Scalar>(a: ClusterArgs, ui: Ui) -> Result<()> {
    let start = Instant::now();
    let mut sw = Stopwatch::since(start);
    check_arguments(&a)?;
    let abc_tf = a.abc_tf.as_deref().map(mcl::Transform::parse).transpose()?;
    let stream_tf = match (a.abc_neg_log10, abc_tf) {
        (false, t) => t,
        (true, None) => Some(mcl::Transform::neg_log10()),
        (true, Some(t)) => {
            let mut both = mcl::Transform::neg_log10();
            both.steps.extend(t.steps);
            both.spec = format!("--abc-neg-log10 then {}", t.spec);
            Some(both)
        }
    };
    let matrix_tf = a.tf.as_deref().map(mcl::Transform::parse).transpose()?;
    let (clusters_out, report_out) = open_outputs(&a)?;
    let params = MclParams {
        gpu: super::env::gpu_tuning(),
        ..mcl_params(&a)?
    };
    engine::open_gpu_early(a.engine, engine::file_bytes(&a.input));
    let loaded = io::load_graph_as::<T>(&a.input, a.input_args.format, &gmcl::mcl::FOOTPRINT)?;
    if stream_tf.is_some() && loaded.format() != io::Format::Abc {
        return Err(Error::Input {
            path: a.input.clone(),
            message: "--abc-tf and --abc-neg-log10 transform .abc input (mcl's --abc stream): \
                      use --tf for other formats"
                .into(),
        });
    }
    let (graph, ids, vertices, labels) =
        build_graph::<T>(loaded, stream_tf.as_ref(), matrix_tf.as_ref()).map_err(|e| match e {
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
    let load = sw.lap();
    let notice = &mut |msg: &str| ui.notice(msg);
    let work = (a.engine == EngineKind::Auto)
        .then(|| engine::Work::MclExpansion(mcl::expansion_work(&graph)));
    let resolved = engine::resolve(a.engine, work, notice);
    let counters = IterationProgress::default();
    let mut records = Vec::new();
    let (result, engine) = ui.watch(
        || reading(&counters),
        |bar| {
            engine::run_with_fallback(a.engine, resolved, notice, |engine| {
                let params = MclParams {
                    engine,
                    ..params.clone()
                };
                // A run that fell back to the CPU starts its figures again.
                records.clear();
                let mut lines = IterationLines {
                    ui,
                    bar,
                    counters: &counters,
                    records: &mut records,
                };
                mcl::cluster_observed(&graph, &params, &mut lines)
            })
        },
    )?;
    let mut compute = sw.lap();
    report_outcome(ui, &result, params.overlap);
    let commits = write_clusters(
        a.output_format,
        clusters_out,
        vertices,
        &result.clusters,
        &ids,
        &labels,
    )?;
    let write = sw.lap();
    let info = mcl::measures::cluster_info(&graph, &result.clusters);
    compute += sw.lap();
    ui.notice(&format!(
        "{} of {} ({}, largest {}) in {}, {:.2} s on the {} engine; \
         efficiency {:.5}, modularity {:.5}, mass fraction {:.5}",
        count(info.clusters as u64, "cluster", "clusters"),
        count(info.nodes as u64, "node", "nodes"),
        count(info.singletons as u64, "singleton", "singletons"),
        info.largest,
        count(result.iterations as u64, "iteration", "iterations"),
        result.seconds,
        engine,
        info.efficiency,
        info.modularity,
        info.mass_fraction
    ));
    if a.json || report_out.is_some() {
        let wall = sw.finish_steps(load, compute, write);
        let run = Ran {
            result: &result,
            info: &info,
            engine,
            ranks: None,
            blocks: None,
            load_seconds,
            wall,
            iterations: records,
        };
        return emit_report(
            &ClusterReport::new(&a, &params, run),
            report_out,
            commits,
            a.json,
        );
    }
    AtomicOutput::commit_all(commits)
}

/// The graph MCL clusters of a loaded input, with mcl's weight transforms: a `.npz` archive's
/// stored rows built straight into it, any other input through its edge list (the same graph for
/// the same entries). Returns the graph, each node's vertex id, the input's vertex count and the
/// vertices' names.
fn build_graph<T: Scalar>(
    loaded: io::GraphInput,
    stream: Option<&mcl::Transform>,
    matrix: Option<&mcl::Transform>,
) -> Result<(gmcl::Csr<T>, Vec<u32>, usize, io::Labels)> {
    match loaded {
        io::GraphInput::Stored(m) => {
            let vertices = m.shape().0;
            let labels = io::Labels::Identity;
            let (mut graph, ids) = mcl::graph_from_stored::<T>(m)?;
            if let Some(tf) = matrix {
                mcl::transform_graph(&mut graph, &ids, tf, &|i| labels.label(i))?;
            }
            Ok((graph, ids, vertices, labels))
        }
        io::GraphInput::Edges(l) => {
            let (graph, ids) =
                mcl::graph_from_edges_transformed::<T>(&l.edges, stream, matrix, &|i| {
                    l.labels.label(i)
                })?;
            Ok((graph, ids, l.edges.nrows, l.labels))
        }
    }
}

/// `gmcl cluster` under an MPI launcher: every rank reads its part of the file and clusters
/// its block of columns on its engine (`gmcl::dist::mcl`: `--engine` applies per rank); rank 0 alone writes the
/// clusters and the report, through the writers of the single-process run. Options that do not
/// run across ranks yet are refused on every rank alike.
fn run_across_ranks<T: Scalar>(a: ClusterArgs, ui: Ui, comm: &dyn Comm) -> Result<()> {
    let start = Instant::now();
    let mut sw = Stopwatch::since(start);
    check_arguments(&a)?;
    if a.tf.is_some() || a.abc_tf.is_some() || a.abc_neg_log10 {
        return Err(Error::Invalid(
            "--tf, --abc-tf and --abc-neg-log10 do not run across MPI ranks yet: run without \
             mpirun"
                .into(),
        ));
    }
    super::paths::refuse_stdin_across_ranks(&[&a.input])?;
    let params = mcl_params(&a)?;
    let reports = comm.rank() == 0;
    // Rank 0 opens the outputs before any work; its failure stops every rank.
    let (clusters_out, report_out) = dist::agree(
        comm,
        if reports {
            open_outputs(&a)
        } else {
            Ok((None, None))
        },
    )?;
    let opts = super::env::dist_mcl_options();
    let graph = dist::mcl::load_graph::<T>(comm, &a.input, a.input_args.format, opts.stage_edges)?;
    if graph.nodes() == 0 {
        ui.notice("the graph has no edges: no clusters");
    }
    let load_seconds = start.elapsed().as_secs_f64();
    let load = sw.lap();
    let counters = IterationProgress::default();
    let mut records = Vec::new();
    // Rank 0's counters: its block of the columns.
    let (result, engine) = ui.watch(
        || reading(&counters),
        |bar| {
            let mut lines = IterationLines {
                ui,
                bar,
                counters: &counters,
                records: &mut records,
            };
            dist::mcl::cluster(comm, &graph, &params, &opts, &mut lines)
        },
    )?;
    if let Some(why) = &engine.notice {
        ui.notice(why);
    }
    let (engines, engines_named) = dist::rank_engines(comm, engine.kind);
    let blocks = match engine.blocks_on_gpus {
        true => "gpu",
        false => "host",
    };
    report_outcome(ui, &result, params.overlap);
    let info = dist::mcl::cluster_info(comm, &graph, &result.clusters)?;
    let compute = sw.lap();
    // SNAP ids and `.abc` labels: every rank's share to rank 0, which writes them. Matrix
    // Market numbers vertices from 1, as the single-process file names them.
    let labels = match &graph.labels {
        Some(share) => share.gather(comm, opts.stage_edges)?,
        None => None,
    };
    let format = a
        .input_args
        .format
        .or_else(|| io::Format::of_input(&a.input));
    let labels = labels.unwrap_or(match format {
        Some(io::Format::Mtx) => io::Labels::OneBased,
        _ => io::Labels::Identity,
    });
    ui.notice(&format!(
        "{} of {} ({}, largest {}) in {}, {:.2} s on {} ranks ({} engine), rows through {}{}; \
         efficiency {:.5}, modularity {:.5}, mass fraction {:.5}",
        count(info.clusters as u64, "cluster", "clusters"),
        count(info.nodes as u64, "node", "nodes"),
        count(info.singletons as u64, "singleton", "singletons"),
        info.largest,
        count(result.iterations as u64, "iteration", "iterations"),
        result.seconds,
        comm.size(),
        engines_named,
        comm.exchange().name(),
        match engine.blocks_on_gpus {
            true => " (blocks kept on the GPUs)",
            false => "",
        },
        info.efficiency,
        info.modularity,
        info.mass_fraction
    ));
    let written = if reports {
        write_clusters(
            a.output_format,
            clusters_out,
            graph.vertices,
            &result.clusters,
            &graph.ids,
            &labels,
        )
        .and_then(|commits| {
            if !(a.json || report_out.is_some()) {
                return AtomicOutput::commit_all(commits);
            }
            let write = sw.lap();
            let wall = sw.finish_steps(load, compute, write);
            let run = Ran {
                result: &result,
                info: &info,
                engine: match engines.iter().any(|e| e == "gpu") {
                    true => EngineKind::Gpu,
                    false => EngineKind::Cpu,
                },
                ranks: Some((comm.size(), engines, engines_named, comm.exchange().name())),
                blocks: Some(blocks),
                load_seconds,
                wall,
                iterations: records,
            };
            emit_report(
                &ClusterReport::new(&a, &params, run),
                report_out,
                commits,
                a.json,
            )
        })
    } else {
        Ok(())
    };
    dist::agree(comm, written)
}

/// The notices about how the run ended: stopped by -L, nodes in overlap, nodes that reached no
/// attractor.
fn report_outcome(ui: Ui, result: &mcl::MclResult, overlap: Overlap) {
    if !result.converged && result.iterations > 0 {
        ui.notice(&format!(
            "stopped after {} (-L) before the chaos fell under 1e-4",
            count(result.iterations as u64, "iteration", "iterations")
        ));
    }
    if result.overlap > 0 {
        ui.notice(&format!(
            "{} in overlap ({})",
            count(result.overlap as u64, "node membership", "node memberships"),
            overlap
        ));
    }
    if result.missing > 0 {
        ui.notice(&format!(
            "{} no attractor: put together in one cluster",
            count(result.missing as u64, "node reached", "nodes reached")
        ));
    }
}

/// Every output, opened (a temporary file beside it) before any work, so that a path that
/// cannot be written fails at once; all are committed together at the end.
fn open_outputs(a: &ClusterArgs) -> Result<(Option<AtomicOutput>, Option<AtomicOutput>)> {
    let outputs: Vec<(&str, &std::path::Path)> = [("-o", &a.output), ("--json-file", &a.json_file)]
        .into_iter()
        .filter_map(|(o, p)| p.as_deref().map(|p| (o, p)))
        .collect();
    super::paths::refuse_clobbering(&[&a.input], &outputs)?;
    let clusters_out = match &a.output {
        Some(p) => Some(AtomicOutput::create(p)?),
        None => None,
    };
    let report_out = match &a.json_file {
        Some(p) => Some(AtomicOutput::create(p)?),
        None => None,
    };
    Ok((clusters_out, report_out))
}

/// The options of the run for the JSON report, as given or defaulted.
fn parameters_json(a: &ClusterArgs) -> serde_json::Value {
    serde_json::json!({
        "input": a.input.display().to_string(),
        "inflation": a.inflation,
        "loop_gain": a.loop_gain,
        "scheme": a.scheme,
        "max_iterations": a.max_iterations,
        "abc_tf": a.abc_tf,
        "abc_neg_log10": a.abc_neg_log10,
        "tf": a.tf,
        "overlap": a.overlap.to_string(),
        "engine": a.engine.to_string(),
        "precision": match a.precision { Precision::F32 => "f32", Precision::F64 => "f64" },
    })
}

/// MCL's parameters from the arguments (the GPU tuning left at its defaults), checked.
fn mcl_params(a: &ClusterArgs) -> Result<MclParams> {
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
    let params = MclParams {
        inflation: a.inflation,
        loop_gain: a.loop_gain,
        prune,
        max_iterations: a.max_iterations,
        overlap: a.overlap,
        engine: a.engine,
        batch_entries: a.batch_entries,
        fused: !a.unfused,
        ..Default::default()
    };
    params.validate()?;
    Ok(params)
}

/// Writes `clusters` (nodes numbered as in `ids`, which gives each node's vertex id; the input
/// had `vertices` ids) in `format` to `out`, or to stdout without one. Returns the outputs to
/// commit.
fn write_clusters(
    format: ClusterFormat,
    clusters_out: Option<AtomicOutput>,
    vertices: usize,
    clusters: &[Vec<u32>],
    ids: &[u32],
    labels: &io::Labels,
) -> Result<Vec<AtomicOutput>> {
    let fmt = |c: &Vec<u32>, buf: &mut Vec<u8>| {
        for (k, &v) in c.iter().enumerate() {
            if k > 0 {
                buf.push(b'\t');
            }
            labels.write_label(ids[v as usize], buf);
        }
        buf.push(b'\n');
    };
    let mut commits = Vec::new();
    let native = (format == ClusterFormat::Mcl).then(|| {
        let clusters = native_clusters(vertices, clusters, ids);
        let mut text = Vec::new();
        mcl::native::write_native(vertices, &clusters, &mut text);
        text
    });
    match (clusters_out, native) {
        (Some(mut out), Some(text)) => {
            out.write_all(&text)?;
            commits.push(out);
        }
        (Some(mut out), None) => {
            gmcl::output::write_formatted(&mut out, clusters, fmt, |_| {})?;
            commits.push(out);
        }
        (None, native) => {
            use std::io::Write;
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
            let failed = |e| Error::io("<stdout>", "cannot write output", e);
            match native {
                Some(text) => w.write_all(&text).map_err(failed)?,
                None => {
                    let mut buf = Vec::new();
                    for c in clusters {
                        buf.clear();
                        fmt(c, &mut buf);
                        w.write_all(&buf).map_err(failed)?;
                    }
                }
            }
            w.flush().map_err(failed)?;
        }
    }
    Ok(commits)
}

/// The clusters in the input's vertex ids for mcl's native format: every vertex of the input
/// (`nodes`) is listed, those MCL never saw (no edges) as clusters of their own, as mcl has them
/// when it clusters the whole matrix; clusters are ordered as mcl orders them (larger first,
/// then by their nodes).
fn native_clusters(nodes: usize, clusters: &[Vec<u32>], ids: &[u32]) -> Vec<Vec<u32>> {
    let mut seen = vec![false; nodes];
    let mut all: Vec<Vec<u32>> = clusters
        .iter()
        .map(|c| {
            let mut members: Vec<u32> = c.iter().map(|&v| ids[v as usize]).collect();
            members.sort_unstable();
            for &v in &members {
                seen[v as usize] = true;
            }
            members
        })
        .collect();
    all.extend(
        (0..nodes as u32)
            .filter(|&v| !seen[v as usize])
            .map(|v| vec![v]),
    );
    all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    all
}
