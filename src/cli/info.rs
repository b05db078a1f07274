//! `gmcl info`: a graph's vertices, edges, self loops, duplicates, symmetry and degrees.

use super::ui::report_json;
use super::wall::{timed, Stopwatch, Wall};
use super::InputArgs;
use clap::Args;
use gmcl::info::GraphInfo;
use gmcl::io::{self, GraphInput, Labels};
use gmcl::mcl::{self, measures::ClusterInfo};
use gmcl::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct InfoArgs {
    /// The graph file (`-`: the standard input, with --format).
    input: PathBuf,
    #[command(flatten)]
    pub(super) input_args: InputArgs,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
    /// Also report clm info's measures of this clustering of the graph (label lines as gmcl
    /// cluster and mcl write them, or mcl's native format), over the nodes MCL clusters; `-`:
    /// the standard input.
    #[arg(long, value_name = "FILE")]
    clusters: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct InfoReport {
    #[serde(flatten)]
    graph: GraphInfo,
    clustering: ClusterInfo,
}

impl InfoArgs {
    /// The input file.
    pub fn input(&self) -> &std::path::Path {
        &self.input
    }
}

pub fn run(a: InfoArgs) -> Result<()> {
    if let Some(c) = &a.clusters {
        super::paths::refuse_stdin_twice(&[&a.input, c])?;
    }
    let mut sw = Stopwatch::start();
    let loaded = io::load_graph(&a.input, a.input_args.format, &gmcl::info::FOOTPRINT)?;
    let load = sw.lap();
    let info = match &loaded {
        GraphInput::Stored(m) => GraphInfo::of_stored(m)?,
        GraphInput::Edges(l) => GraphInfo::of(&l.edges, l.symmetric_storage)?,
    };
    let clustering = match &a.clusters {
        Some(path) => Some(clustering_info(&a.input, &loaded, path)?),
        None => None,
    };
    let compute = sw.lap();
    let wall = sw.finish(Wall {
        load,
        compute,
        ..Default::default()
    });
    if a.json {
        let mut parameters = serde_json::json!({
            "input": a.input.display().to_string(),
            "format": loaded.format().to_string(),
        });
        match clustering {
            Some(clustering) => {
                parameters["clusters"] =
                    a.clusters.as_ref().map(|p| p.display().to_string()).into();
                let report = InfoReport {
                    graph: info,
                    clustering,
                };
                outln!("{}", report_json(&timed(&report, wall), parameters)?)?
            }
            None => outln!("{}", report_json(&timed(&info, wall), parameters)?)?,
        }
    } else {
        outln!("file            {}", a.input.display())?;
        outln!("format          {}", loaded.format())?;
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
        if let (Some(c), Some(path)) = (clustering, &a.clusters) {
            outln!("clustering      {}", path.display())?;
            outln!(
                "clusters        {} of {} nodes ({} singletons, sizes {} to {})",
                c.clusters,
                c.nodes,
                c.singletons,
                c.smallest,
                c.largest
            )?;
            outln!("efficiency      {:.5}", c.efficiency)?;
            outln!("modularity      {:.5}", c.modularity)?;
            outln!("mass fraction   {:.5}", c.mass_fraction)?;
            outln!("area fraction   {:.5}", c.area_fraction)?;
        }
    }
    Ok(())
}

/// clm info's measures of the clustering in `path` on the graph MCL makes of `loaded` (its nodes
/// are the vertices with edges; a vertex without edges in the clustering is left out). Every
/// node must be in the clustering, and every node of the clustering in the graph.
fn clustering_info(input: &Path, loaded: &GraphInput, path: &Path) -> Result<ClusterInfo> {
    let identity = Labels::Identity;
    let (built, n, labels) = match loaded {
        GraphInput::Stored(m) => (
            mcl::graph_from_stored::<f32>(m.clone()),
            m.shape().0,
            &identity,
        ),
        GraphInput::Edges(l) => (
            mcl::graph_from_edges::<f32>(&l.edges),
            l.edges.nrows,
            &l.labels,
        ),
    };
    let (graph, ids) = built.map_err(|e| match e {
        Error::Invalid(message) => Error::Input {
            path: input.to_path_buf(),
            message,
        },
        other => other,
    })?;
    let mut compact = vec![u32::MAX; n];
    for (k, &v) in ids.iter().enumerate() {
        compact[v as usize] = k as u32;
    }
    // Read once: the file may be a pipe (or `-`, the standard input).
    let text = mcl::measures::read_text(path)?;
    let path = io::shown(path);
    // Each cluster's members as vertex ids of the input.
    let vertices: Vec<Vec<u32>> = match mcl::native::is_native(&text) {
        true => {
            let (rows, clusters) = mcl::native::read_native(&text, path)?;
            if rows != n {
                return Err(Error::Input {
                    path: path.to_path_buf(),
                    message: format!(
                        "a clustering of {rows} nodes, but {} has {n} vertices",
                        input.display()
                    ),
                });
            }
            clusters
        }
        false => {
            let by_label: HashMap<String, u32> =
                (0..n as u32).map(|v| (labels.label(v), v)).collect();
            let clusters = mcl::measures::parse_clusters(&text, path)?;
            let mut out = Vec::with_capacity(clusters.len());
            for c in clusters {
                let mut members = Vec::with_capacity(c.len());
                for label in c {
                    members.push(*by_label.get(&label).ok_or_else(|| Error::Input {
                        path: path.to_path_buf(),
                        message: format!(
                            "'{label}' is not a vertex of {} (labels are separated by TABs)",
                            input.display()
                        ),
                    })?);
                }
                out.push(members);
            }
            out
        }
    };
    let mut covered = vec![false; ids.len()];
    let clusters: Vec<Vec<u32>> = vertices
        .into_iter()
        .map(|c| {
            c.into_iter()
                .map(|v| compact[v as usize])
                .filter(|&k| k != u32::MAX)
                .inspect(|&k| covered[k as usize] = true)
                .collect::<Vec<u32>>()
        })
        .filter(|c| !c.is_empty())
        .collect();
    if let Some(k) = covered.iter().position(|&c| !c) {
        return Err(Error::Input {
            path: path.to_path_buf(),
            message: format!(
                "vertex {} of {} is in no cluster: a clustering must cover every vertex with \
                 an edge",
                labels.label(ids[k]),
                input.display()
            ),
        });
    }
    Ok(mcl::measures::cluster_info(&graph, &clusters))
}
