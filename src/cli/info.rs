//! `gmcl info`: a graph's vertices, edges, self loops, duplicates, symmetry and degrees.

use super::ui::report_json;
use super::InputArgs;
use clap::Args;
use gmcl::info::GraphInfo;
use gmcl::io;
use gmcl::Result;
use std::path::PathBuf;

#[derive(Args)]
pub struct InfoArgs {
    /// The graph file.
    input: PathBuf,
    #[command(flatten)]
    input_args: InputArgs,
    /// Print one JSON object to stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(a: InfoArgs) -> Result<()> {
    let loaded = io::load(&a.input, a.input_args.format)?;
    let info = GraphInfo::of(&loaded.edges, loaded.symmetric_storage)?;
    if a.json {
        let parameters = serde_json::json!({
            "input": a.input.display().to_string(),
            "format": loaded.format.to_string(),
        });
        outln!("{}", report_json(&info, parameters)?)?;
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
