//! `gmcl cluster`: Markov clustering of a graph file, one cluster per line, with an optional
//! JSON report.

use super::ui::to_json;
use super::{InputArgs, Precision, Ui};
use clap::Args;
use gmcl::engine;
use gmcl::io;
use gmcl::mcl::{self, MclParams, Overlap, PruneParams};
use gmcl::spgemm::EngineKind;
use gmcl::{Error, Result, Scalar};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct ClusterArgs {
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

pub fn run(a: ClusterArgs, ui: Ui) -> Result<()> {
    match a.precision {
        Precision::F32 => run_typed::<f32>(a, ui),
        Precision::F64 => run_typed::<f64>(a, ui),
    }
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

fn run_typed<T: Scalar>(a: ClusterArgs, ui: Ui) -> Result<()> {
    let start = Instant::now();
    let outputs: Vec<(&str, &std::path::Path)> = [("-o", &a.output), ("--json", &a.json)]
        .into_iter()
        .filter_map(|(o, p)| p.as_deref().map(|p| (o, p)))
        .collect();
    super::paths::refuse_clobbering(&[&a.input], &outputs)?;
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
    engine::open_gpu_early(a.engine);
    let params = MclParams {
        inflation: a.inflation,
        loop_gain: a.loop_gain,
        prune,
        max_iterations: a.max_iterations,
        overlap: a.overlap,
        engine: a.engine,
        gpu: super::env::gpu_tuning(),
        batch_entries: a.batch_entries,
        fused: !a.unfused,
        ..Default::default()
    };
    params.validate()?;
    let loaded = io::load_as::<T>(&a.input, a.input_args.format)?;
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
    let notice = &mut |msg: &str| ui.notice(msg);
    let resolved = engine::resolve(a.engine, notice);
    let (result, engine) = engine::run_with_fallback(a.engine, resolved, notice, |engine| {
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
