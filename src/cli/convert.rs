//! `gmcl convert`: a graph or matrix file written in another format, entry for entry.

use super::ui::report_json;
use super::wall::{timed, Stopwatch};
use super::{InputArgs, Ui};
use clap::Args;
use gmcl::csr::{BuildOptions, Csr, Duplicates};
use gmcl::io::{self, Format};
use gmcl::{Error, Result};
use std::path::PathBuf;

#[derive(Args)]
pub struct ConvertArgs {
    /// The file to read (any input format).
    input: PathBuf,
    /// The file to write; its extension picks the format: .el, .wel, .mtx or .npz (SciPy's
    /// save_npz layout, CSR, repeated entries summed).
    output: PathBuf,
    #[command(flatten)]
    pub(super) input_args: InputArgs,
    /// Print one JSON object to stdout: the matrix's size and where the time went.
    #[arg(long)]
    json: bool,
}

/// What `convert --json` reports.
#[derive(serde::Serialize)]
struct ConvertReport {
    rows: usize,
    cols: usize,
    entries: usize,
    input_format: String,
    output: String,
    output_format: String,
}

impl ConvertArgs {
    /// The input file.
    pub fn input(&self) -> &std::path::Path {
        &self.input
    }
}

pub fn run(a: ConvertArgs, ui: Ui) -> Result<()> {
    let mut sw = Stopwatch::start();
    super::paths::refuse_clobbering(&[&a.input], &[("OUTPUT", &a.output)])?;
    let to = match Format::from_path(&a.output) {
        Some(f @ (Format::El | Format::Wel | Format::Mtx | Format::Npz)) => f,
        _ => {
            return Err(Error::Invalid(format!(
                "{}: convert writes .el, .wel, .mtx and .npz files; name the output with one \
                 of these extensions",
                a.output.display()
            )))
        }
    };
    let mut loaded = io::load(&a.input, a.input_args.format)?;
    // Weights that are all 1 say nothing an unweighted list does not (an .npz always has
    // values): an .el output may then be written.
    if let Some(w) = &loaded.edges.weights {
        if w.iter().all(|&w| w == 1.0) {
            loaded.edges.weights = None;
        }
    }
    if let Some(how) = loaded.labels.renumbering() {
        ui.notice(&format!(
            "{} names its vertices ({}): {how} in {}",
            a.input.display(),
            loaded.format,
            a.output.display()
        ));
    }
    let el = &loaded.edges;
    let load = sw.lap();
    let mut compute = 0.0;
    // The entries the output holds: an archive sums repeated ones.
    let mut entries = el.len();
    let staged = if to == Format::Npz {
        let opts = BuildOptions {
            symmetrize: false,
            drop_self_loops: false,
            duplicates: Duplicates::Sum,
        };
        let m = Csr::<f64>::from_edges(el, &opts)?;
        entries = m.nnz();
        compute = sw.lap();
        gmcl::output::stage_npz(&a.output, &m)?
    } else {
        let bar = ui.bar(el.len() as u64, "writing");
        let symmetry = gmcl::generate::Symmetry::General;
        let out = gmcl::generate::stage_edges_as(&a.output, el, symmetry, &|done| {
            bar.set_position(done)
        })?;
        bar.finish_and_clear();
        out
    };
    let write = sw.lap();
    let wall = sw.finish_steps(load, compute, write);
    if a.json {
        let report = ConvertReport {
            rows: el.nrows,
            cols: el.ncols,
            entries,
            input_format: loaded.format.to_string(),
            output: a.output.display().to_string(),
            output_format: to.to_string(),
        };
        let parameters = serde_json::json!({
            "input": a.input.display().to_string(),
            "output": a.output.display().to_string(),
        });
        outln!("{}", report_json(&timed(&report, wall), parameters)?)?;
    }
    super::ui::print_then_commit(vec![staged])?;
    ui.notice(&format!(
        "wrote {} entries of a {} x {} matrix to {} in {:.2} s",
        entries,
        el.nrows,
        el.ncols,
        a.output.display(),
        wall.total
    ));
    Ok(())
}
