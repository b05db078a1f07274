//! `gmcl dist`: distances between two clusterings (split/join, variation of information,
//! adjusted Rand).

use super::ui::{count, report_json};
use super::wall::{timed, Stopwatch, Wall};
use clap::Args;
use gmcl::mcl;
use gmcl::Result;
use std::path::PathBuf;

#[derive(Args)]
pub struct DistArgs {
    /// A clustering: one cluster per line, labels separated by TABs (as `gmcl cluster` writes);
    /// `-`: the standard input.
    a: PathBuf,
    /// Another clustering of the same nodes (`-`: the standard input, when A is a file).
    b: PathBuf,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(a: DistArgs) -> Result<()> {
    super::paths::refuse_stdin_twice(&[&a.a, &a.b])?;
    let mut sw = Stopwatch::start();
    let ca = mcl::measures::read_clusters(&a.a)?;
    let cb = mcl::measures::read_clusters(&a.b)?;
    let name = |p: &std::path::Path| gmcl::io::shown(p).display().to_string();
    let (na, nb) = (name(&a.a), name(&a.b));
    let load = sw.lap();
    let d = mcl::measures::distance_by_label(&ca, &cb, (&na, &nb))?;
    let compute = sw.lap();
    let wall = sw.finish(Wall {
        load,
        compute,
        ..Default::default()
    });
    if a.json {
        let parameters = serde_json::json!({"a": na, "b": nb});
        outln!("{}", report_json(&timed(&d, wall), parameters)?)?;
    } else {
        let pct = if d.nodes > 0 {
            100.0 * d.split_join as f64 / d.nodes as f64
        } else {
            0.0
        };
        outln!(
            "nodes                     {} ({} and {})",
            d.nodes,
            count(d.clusters_a as u64, "cluster", "clusters"),
            count(d.clusters_b as u64, "cluster", "clusters")
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
