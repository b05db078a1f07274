//! `gmcl generate`: an R-MAT graph written as .el, .wel or .mtx.

use super::ui::report_json;
use super::wall::{timed, Stopwatch, Wall};
use super::Ui;
use clap::Args;
use gmcl::generate::{self, RmatParams, Symmetry};
use gmcl::io::Format;
use gmcl::{Error, Result};
use std::path::PathBuf;

// One of each pair is required: a missing one is named with its alternative.
#[derive(Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("size").required(true).args(["scale", "vertices"])))]
#[command(group(clap::ArgGroup::new("count").required(true).args(["edges", "edge_factor"])))]
pub struct GenerateArgs {
    /// log2 of the number of vertices.
    #[arg(long, short = 's')]
    scale: Option<u32>,
    /// Number of vertices (need not be a power of two).
    #[arg(long, short = 'n')]
    vertices: Option<u64>,
    /// Number of edges.
    #[arg(long, short = 'm')]
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
    /// Undirected: each edge written once, as `min max` in .el/.wel; a .mtx file is
    /// `symmetric`, each edge in the lower triangle (`max min`).
    #[arg(long)]
    undirected: bool,
    /// Write edges sorted by source, then target.
    #[arg(long)]
    sorted: bool,
    /// A weight per edge, uniform in [0.5, 1.5) (written as .wel, or real .mtx; .el, which
    /// holds no weights, is refused).
    #[arg(long)]
    weights: bool,
    /// Random seed: the same seed gives byte-identical output whatever the thread count.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file; its extension picks the format (.el, .wel, .mtx, .npz).
    #[arg(long, short = 'o')]
    output: PathBuf,
    /// Print one JSON object to stdout: the graph's size and where the time went.
    #[arg(long)]
    json: bool,
}

/// What `generate --json` reports.
#[derive(serde::Serialize)]
struct GenerateReport {
    vertices: u64,
    edges: u64,
    output: String,
    format: String,
}

pub fn run(a: GenerateArgs, ui: Ui) -> Result<()> {
    // The output's format is checked before minutes of generating.
    generate::check_output(&a.output, a.weights)?;
    super::paths::refuse_clobbering(&[], &[("-o", &a.output)])?;
    let n = match (a.vertices, a.scale) {
        (Some(n), _) => n,
        (None, Some(s)) if s < 64 => 1u64 << s,
        (None, Some(s)) => {
            return Err(Error::Invalid(format!(
                "--scale {s} is too large (at most 31)"
            )))
        }
        (None, None) => return Err(Error::Invalid("give --scale or --vertices".into())),
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
    let mut sw = Stopwatch::start();
    let el = generate::generate(&p)?;
    let compute = sw.lap();
    let bar = ui.bar(el.len() as u64, "writing");
    let symmetry = if a.undirected {
        Symmetry::Symmetric
    } else {
        Symmetry::General
    };
    let staged =
        generate::stage_edges_as(&a.output, &el, symmetry, &|done| bar.set_position(done))?;
    bar.finish_and_clear();
    let write = sw.lap();
    let wall = sw.finish(Wall {
        compute,
        write,
        ..Default::default()
    });
    if a.json {
        let report = GenerateReport {
            vertices: p.n_vertices(),
            edges: el.len() as u64,
            output: a.output.display().to_string(),
            format: Format::from_path(&a.output).map_or_else(String::new, |f| f.to_string()),
        };
        let parameters = serde_json::json!({
            "scale": a.scale,
            "vertices": a.vertices,
            "edges": edges,
            "a": a.a,
            "b": a.b,
            "c": a.c,
            "no_duplicates": a.no_duplicates,
            "no_self_loops": a.no_self_loops,
            "undirected": a.undirected,
            "sorted": a.sorted,
            "weights": a.weights,
            "seed": a.seed,
        });
        outln!("{}", report_json(&timed(&report, wall), parameters)?)?;
    }
    super::ui::print_then_commit(vec![staged])?;
    ui.notice(&format!(
        "wrote {} over {} to {} in {:.2} s",
        super::ui::count(el.len() as u64, "edge", "edges"),
        // Ids the generator draws from; `info` counts the vertices the edges touch.
        super::ui::count(p.n_vertices(), "vertex id", "vertex ids"),
        a.output.display(),
        wall.total
    ));
    Ok(())
}
