//! `gmcl tricount`: the triangles of a graph, optionally per vertex; with --repeat, a
//! benchmark of the count.

use super::ui::{count, report_json};
use super::wall::{timed, Stopwatch, Wall};
use super::{InputArgs, Ui};
use clap::Args;
use gmcl::dist::{self, Comm, Exchange};
use gmcl::spgemm::EngineKind;
use gmcl::tricount::{self, LoadedGraph};
use gmcl::{engine, io, measure};
use gmcl::{Error, Result};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct TricountArgs {
    /// The graph file, `-` for stdin with --format (directions, self loops, duplicates and
    /// weights are ignored).
    input: PathBuf,
    #[command(flatten)]
    pub(super) input_args: InputArgs,
    /// Write each vertex's triangle count here: `label<TAB>count` per vertex, in vertex order
    /// (labels as in the input).
    #[arg(long, value_name = "FILE")]
    per_vertex: Option<PathBuf>,
    /// Engine: cpu, gpu (gMAGNUS) or auto (the GPU when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    engine: EngineKind,
    /// auto (the merge kernel on the CPU, the fused kernel on the GPU), spgemm (a masked
    /// product on the engine), merge (the dedicated CPU kernel) or fused (the GPU kernel: the
    /// masked product C<L> = L·U summed as it is formed). Across MPI ranks: auto (fused where
    /// every rank is on its GPU and the rows fit), merge (rows intersected in rounds) or fused.
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
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = crate::cli::repeat_parser())]
    repeat: usize,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

impl TricountArgs {
    /// The engine asked for (`--engine`).
    pub fn engine(&self) -> EngineKind {
        self.engine
    }
    /// The input file.
    pub fn input(&self) -> &std::path::Path {
        &self.input
    }
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
    /// Fused GPU kernel on a `.npz` archive's rows taken unchecked: of `seconds`, checking on
    /// the device that they are symmetric.
    #[serde(skip_serializing_if = "Option::is_none")]
    check_seconds: Option<f64>,
    /// Fused GPU kernel only: from the graph on the device to the count, and its rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    device_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_edges_per_second: Option<f64>,
    /// Runs across MPI ranks only: the number of ranks, the engine the ranks counted on
    /// ("mixed" when they differ) and each rank's.
    #[serde(skip_serializing_if = "Option::is_none")]
    ranks: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_engine: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_engines: Option<Vec<String>>,
    /// Across ranks: how the rows travelled between them ("mpi", "nccl", or "ipc": GPU to GPU
    /// by CUDA IPC, the other messages by MPI).
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange: Option<&'static str>,
    /// Across ranks: the longest a rank spent fetching other blocks' rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange_seconds: Option<f64>,
    /// Across ranks: the bytes the ranks received from one another.
    #[serde(skip_serializing_if = "Option::is_none")]
    exchanged_bytes: Option<u64>,
    /// Across ranks with the fused method: each step's slowest and fastest rank.
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<Vec<gmcl::dist::Step>>,
}

/// Counts the triangles as `a` asks; across ranks where `comm` is given, moving rows as the
/// command line asked (`exchange`, before `auto` was resolved).
pub fn run(a: TricountArgs, ui: Ui, comm: Option<&dyn Comm>, exchange: Exchange) -> Result<()> {
    let start = Instant::now();
    let mut sw = Stopwatch::since(start);
    super::paths::refuse_json_beside_stdout(
        a.json,
        "--per-vertex",
        a.per_vertex.as_deref(),
        "the counts",
    )?;
    if let Some(comm) = comm {
        return run_across_ranks(a, ui, comm, exchange, sw);
    }
    if let Some(out) = &a.per_vertex {
        super::paths::refuse_clobbering(&[&a.input], &[("--per-vertex", out)])?;
    }
    // The fused kernel runs on the GPU only: without one it is the engine that is unavailable
    // (exit status 3), said before any work.
    if a.method == tricount::Method::Fused && a.engine != EngineKind::Cpu {
        if let (EngineKind::Cpu, Some(why)) = gmcl::spgemm::resolve(a.engine) {
            return Err(Error::EngineUnavailable(format!(
                "--method fused runs on the GPU, and none is usable here ({why}): use --method \
                 merge (or auto) on the CPU"
            )));
        }
    }
    let bytes = engine::file_bytes(&a.input);
    engine::open_gpu_early(a.engine, bytes);
    // Where the fused count may run, it checks a `.npz` archive's rows on the GPU.
    let may_fuse = matches!(a.method, tricount::Method::Auto | tricount::Method::Fused);
    let check = match may_fuse && engine::gpu_may_pay(a.engine, bytes) {
        true => io::SymmetryCheck::Caller,
        false => io::SymmetryCheck::Load,
    };
    let mut g = LoadedGraph::load(&a.input, a.input_args.format, check)?;
    let load_seconds = start.elapsed().as_secs_f64();
    let load = sw.lap();
    let notice = &mut |msg: &str| ui.notice(msg);
    let work = engine::Work::TriangleEdges(g.edges());
    let resolved = engine::resolve(a.engine, Some(work), notice);
    let opts = tricount::Options {
        engine: resolved,
        method: a.method,
        relabel: a.relabel,
        form: a.form,
        per_vertex: a.per_vertex.is_some(),
        gpu: super::env::triangle_tuning(),
    };
    // Created before counting, so that a path that cannot be written fails at once.
    let per_vertex_out = match &a.per_vertex {
        Some(path) => Some(gmcl::output::AtomicOutput::create(path)?),
        None => None,
    };
    let (t, engine) = engine::run_with_fallback(a.engine, resolved, notice, |engine| {
        count_repeatedly(&mut g, &tricount::Options { engine, ..opts }, a.repeat)
    })?;
    let compute = sw.lap();
    let staged = match (per_vertex_out, &t.per_vertex) {
        (Some(out), Some(counts)) => Some(write_per_vertex(out, g.labels(), counts)?),
        _ => None,
    };
    let fused = t.method == tricount::Method::Fused;
    let write = sw.lap();
    let wall = sw.finish(Wall {
        load,
        compute,
        write,
        upload: fused.then_some(t.upload_seconds),
        device: fused.then_some(t.device_seconds),
        ..Default::default()
    });
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
        check_seconds: (t.check_seconds > 0.0).then_some(t.check_seconds),
        device_seconds: (t.method == tricount::Method::Fused).then_some(t.device_seconds),
        device_edges_per_second: (t.method == tricount::Method::Fused)
            .then(|| rate(g.edges(), t.device_seconds)),
        ranks: None,
        rank_engine: None,
        rank_engines: None,
        exchange: None,
        exchange_seconds: None,
        exchanged_bytes: None,
        steps: None,
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
            "fused GPU kernel: upload {:.4} s,{} on the device {:.4} s ({:.3e} edges/s)",
            t.upload_seconds,
            match t.check_seconds > 0.0 {
                true => format!(" symmetry checked {:.4} s,", t.check_seconds),
                false => String::new(),
            },
            t.device_seconds,
            rate(g.edges(), t.device_seconds)
        ),
        m => format!("{} kernel", m.name()),
    };
    ui.notice(&format!(
        "{}, {}; loaded in {:.3} s; counted in {:.4} s on the {} engine (orientation {:.4} s; {}{}, {:.3e} edges/s)",
        count(report.vertices, "vertex", "vertices"),
        count(report.edges, "edge", "edges"),
        load_seconds,
        report.seconds,
        engine,
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
        let parameters = serde_json::json!({
            "input": a.input.display().to_string(),
            "engine": a.engine.to_string(),
            "method": a.method.name(),
            "relabel": format!("{:?}", a.relabel).to_lowercase(),
            "form": a.form.name(),
            "repeat": a.repeat,
        });
        outln!("{}", report_json(&timed(&report, wall), parameters)?)?;
    } else {
        outln!("{}", report.triangles)?;
    }
    super::ui::print_then_commit(staged.into_iter().collect())
}

/// Writes `label<TAB>count` for every vertex; the file comes back whole and synced, for the
/// caller to commit once the count is printed.
fn write_per_vertex(
    mut out: gmcl::output::AtomicOutput,
    labels: &io::Labels,
    counts: &[u64],
) -> Result<gmcl::output::AtomicOutput> {
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
    out.synced()
}

/// `gmcl tricount` under an MPI launcher: every rank reads its part of the file and counts on
/// its engine (`gmcl::dist::tricount`: `--engine` applies per rank, each rank on the GPU its
/// local rank names); rank 0 prints and writes `--per-vertex`. Options the distributed count
/// does not have yet are refused on every rank alike.
fn run_across_ranks(
    a: TricountArgs,
    ui: Ui,
    comm: &dyn Comm,
    asked: Exchange,
    mut sw: Stopwatch,
) -> Result<()> {
    if a.method == tricount::Method::Spgemm {
        return Err(Error::Invalid(
            "--method spgemm does not run across MPI ranks yet: use auto, merge or fused".into(),
        ));
    }
    if a.repeat != 1 {
        return Err(Error::Invalid(
            "--repeat does not run across MPI ranks yet".into(),
        ));
    }
    super::paths::refuse_stdin_across_ranks(&[&a.input])?;
    let reports = comm.rank() == 0;
    // Created before counting, so that a path that cannot be written fails at once.
    let per_vertex_out = dist::agree(
        comm,
        match (&a.per_vertex, reports) {
            (Some(path), true) => {
                super::paths::refuse_clobbering(&[&a.input], &[("--per-vertex", path)])
                    .and_then(|()| gmcl::output::AtomicOutput::create(path).map(Some))
            }
            _ => Ok(None),
        },
    )?;
    let opts = gmcl::dist::tricount::Options {
        engine: a.engine,
        method: a.method,
        // `--exchange mpi` keeps every gather in host memory.
        gpu_reads: asked == Exchange::Auto,
        ..super::env::dist_tricount_options(a.per_vertex.is_some())
    };
    let t = dist::tricount::count_file(comm, &a.input, a.input_args.format, &opts)?;
    if let Some(why) = &t.notice {
        ui.notice(why);
    }
    // SNAP ids and `.abc` labels: every rank's share to rank 0, which writes them.
    let names = match (&t.labels, a.per_vertex.is_some()) {
        (Some(share), true) => share.gather(comm, opts.stage_edges)?,
        _ => None,
    };
    let elapsed = sw.lap();
    let load = t.load_seconds.min(elapsed);
    let compute = elapsed - load;
    let written = match (per_vertex_out, &t.per_vertex) {
        (Some(out), Some(counts)) => {
            // Matrix Market numbers vertices from 1, as the single-process file names them.
            let labels = match (
                names,
                a.input_args
                    .format
                    .or_else(|| io::Format::of_input(&a.input)),
            ) {
                (Some(names), _) => names,
                (None, Some(io::Format::Mtx)) => io::Labels::OneBased,
                _ => io::Labels::Identity,
            };
            write_per_vertex(out, &labels, counts).map(Some)
        }
        _ => Ok(None),
    };
    let staged = dist::agree(comm, written)?;
    let (engines, engine) = dist::rank_engines(comm, t.engine);
    let write = sw.lap();
    let wall = sw.finish_steps(load, compute, write);
    let through = match t.gpu_reads {
        true => "ipc",
        false => comm.exchange().name(),
    };
    ui.notice(&format!(
        "{} vertices, {} edges on {} ranks ({} engine); loaded in {:.3} s; counted in {:.4} s ({} method, {} rounds of row exchange{}, {:.3e} edges/s)",
        t.vertices,
        t.edges,
        comm.size(),
        engine,
        t.load_seconds,
        t.seconds,
        t.method.name(),
        t.rounds,
        if t.exchanged_bytes > 0 {
            format!(
                ", {:.3} s exchanging, {} exchanged through {}",
                t.exchange_seconds,
                io::limits::human(t.exchanged_bytes),
                through
            )
        } else {
            String::new()
        },
        rate(t.edges, t.seconds)
    ));
    if !reports {
        return Ok(());
    }
    let report = TricountReport {
        triangles: t.triangles,
        vertices: t.vertices,
        edges: t.edges,
        seconds: t.seconds,
        edges_per_second: rate(t.edges, t.seconds),
        method: t.method.name(),
        runs: 1,
        load_seconds: t.load_seconds,
        orient_seconds: 0.0,
        check_seconds: None,
        device_seconds: None,
        device_edges_per_second: None,
        ranks: Some(comm.size()),
        rank_engine: Some(engine),
        rank_engines: Some(engines),
        exchange: Some(through),
        exchange_seconds: Some(t.exchange_seconds),
        exchanged_bytes: Some(t.exchanged_bytes),
        steps: (!t.steps.is_empty()).then(|| t.steps.clone()),
    };
    if a.json {
        let parameters = serde_json::json!({
            "input": a.input.display().to_string(),
            "engine": a.engine.to_string(),
            "ranks": comm.size(),
        });
        outln!("{}", report_json(&timed(&report, wall), parameters)?)?;
    } else {
        outln!("{}", report.triangles)?;
    }
    super::ui::print_then_commit(staged.into_iter().collect())
}

/// Counts `repeat` times (after a warm-up count when more than once); the result has the
/// median of each time. Differing counts (which would be a bug) are an error.
fn count_repeatedly(
    g: &mut LoadedGraph,
    opts: &tricount::Options,
    repeat: usize,
) -> Result<tricount::Triangles> {
    if repeat == 0 {
        return Err(Error::Invalid("--repeat must be at least 1".into()));
    }
    let warm_up = usize::from(repeat > 1);
    let runs = (0..repeat.saturating_add(warm_up))
        .map(|_| g.count(opts))
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
    // `runs` holds `repeat` counts, so each median exists.
    let median = |f: fn(&tricount::Triangles) -> f64| {
        measure::median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let mut t = runs[0].clone();
    t.seconds = median(|r| r.seconds);
    t.orient_seconds = median(|r| r.orient_seconds);
    t.product_seconds = median(|r| r.product_seconds);
    t.upload_seconds = median(|r| r.upload_seconds);
    t.device_seconds = median(|r| r.device_seconds);
    Ok(t)
}

/// Edges per second, 0 for a zero time.
fn rate(edges: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        edges as f64 / seconds
    } else {
        0.0
    }
}
