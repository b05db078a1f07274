//! Files and generated graphs: `load` and `save` in every format the CLI reads and writes, and
//! R-MAT graphs as matrices.

use crate::arrays::{csr_out, edges_of, CsrArg, CsrOut, Parts};
use crate::compute::{format, names};
use crate::errors::to_py;
use crate::run::{interruptible, Notices};
use gmcl::generate::{self, RmatParams};
use gmcl::io::{self, Format};
use gmcl::{BuildOptions, Csr, Duplicates, EdgeList, Error, Scalar};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};

/// Entries as listed, repeated ones summed: the matrix `gmcl convert` and `gmcl spgemm` read.
const AS_LISTED: BuildOptions = BuildOptions {
    symmetrize: false,
    drop_self_loops: false,
    duplicates: Duplicates::Sum,
};

/// What `load` returns: the matrix, the vertices' names, the format read.
type Loaded<'py> = (CsrOut<'py, f64>, Option<Vec<String>>, &'static str);

/// Reads a graph or matrix file (any format the CLI reads); returns its matrix (`float64`),
/// the file's vertex names (`None` when vertex `i` is `i`) and the format it was read as. With
/// `f32`, a weight that `float32` cannot hold is an error naming its line, as for the CLI's
/// `--precision f32`.
#[pyfunction]
#[pyo3(signature = (path, format=None, f32=false))]
pub fn load<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
    f32: bool,
) -> PyResult<Loaded<'py>> {
    let fmt = self::format(format)?;
    let notices = Notices::default();
    notices.skipped_columns(&path, fmt);
    let (m, labels, read_as) = interruptible(py, || {
        let footprint = &gmcl::spgemm::FOOTPRINT;
        // The weights stay f64 either way: only the check differs.
        let loaded = if f32 {
            io::load_as::<f32>(&path, fmt, footprint)?
        } else {
            io::load_as::<f64>(&path, fmt, footprint)?
        };
        let m = Csr::<f64>::from_edges(&loaded.edges, &AS_LISTED).map_err(|e| match e {
            Error::Invalid(message) => Error::Input {
                path: path.clone(),
                message,
            },
            other => other,
        })?;
        let labels = names(&loaded.labels, loaded.edges.nrows.max(loaded.edges.ncols));
        Ok((m, labels, loaded.format.name()))
    })?;
    notices.emit(py)?;
    Ok((csr_out(py, m), labels, read_as))
}

/// Writes a matrix in the format its path's extension names: `.mtx`, `.wel`, `.npz`, or `.el`
/// (when every value is 1: an edge list holds no values). The values are written in their own
/// type (an `.npz` archive of `float32` values keeps them `float32`, as SciPy's `save_npz`).
/// The file appears whole or not at all.
#[pyfunction]
pub fn save<'py>(py: Python<'py>, path: PathBuf, a: CsrArg<'py>) -> PyResult<()> {
    if a.is_f32() {
        let a = a.f32()?;
        interruptible(py, || write(&path, a))
    } else {
        let a = a.f64()?;
        interruptible(py, || write(&path, a))
    }
}

fn write<T: Scalar>(path: &Path, a: Parts<'_, T>) -> gmcl::Result<()> {
    if Format::from_path(path) == Some(Format::El) {
        let mut el = edges_of(a.check()?, true)?;
        if el
            .weights
            .as_ref()
            .is_some_and(|w| w.iter().all(|&w| w == 1.0))
        {
            el.weights = None;
        }
        generate::check_output(path, el.weights.is_some())?;
        generate::write_edges(path, &el, &|_| {})
    } else {
        gmcl::output::write_matrix(path, &a.check()?.to_csr())
    }
}

/// R-MAT parameters as the Python `generate` takes them (the CLI's `generate` options).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct GenerateOptions {
    scale: Option<u32>,
    vertices: Option<u64>,
    edges: Option<u64>,
    edge_factor: Option<u64>,
    a: f64,
    b: f64,
    c: f64,
    seed: u64,
    undirected: bool,
    no_duplicates: bool,
    no_self_loops: bool,
    weights: bool,
}

impl GenerateOptions {
    /// The library's parameters, with the CLI's rules for `scale`/`vertices` and
    /// `edges`/`edge_factor`.
    fn params(&self) -> gmcl::Result<RmatParams> {
        let n = match (self.vertices, self.scale) {
            (Some(_), Some(_)) => {
                return Err(Error::Invalid("give scale or vertices, not both".into()))
            }
            (Some(n), None) => n,
            (None, Some(s)) if s <= 32 => 1u64 << s,
            (None, Some(s)) => {
                return Err(Error::Invalid(format!(
                    "scale {s} is too large (at most 32)"
                )))
            }
            (None, None) => return Err(Error::Invalid("give scale or vertices".into())),
        };
        let edges = match (self.edges, self.edge_factor) {
            (Some(_), Some(_)) => {
                return Err(Error::Invalid("give edges or edge_factor, not both".into()))
            }
            (Some(m), None) => m,
            (None, Some(ef)) => ef.checked_mul(n).ok_or_else(|| {
                Error::Invalid(format!("{ef} × {n} edges overflow a 64-bit count"))
            })?,
            (None, None) => return Err(Error::Invalid("give edges or edge_factor".into())),
        };
        let mut p = RmatParams::new(self.scale.unwrap_or(0), edges);
        p.vertices = self.vertices;
        (p.a, p.b, p.c) = (self.a, self.b, self.c);
        p.seed = self.seed;
        p.undirected = self.undirected;
        p.no_duplicates = self.no_duplicates;
        p.no_self_loops = self.no_self_loops;
        p.weights = self.weights;
        p.validate()?;
        Ok(p)
    }
}

/// An R-MAT graph (the stream `gmcl generate` writes for the same options) as its adjacency
/// matrix: repeated edges summed (weights, or 1 each); an undirected graph's matrix is symmetric
/// (each edge in both directions, a self loop once).
#[pyfunction]
pub fn generate_rmat(py: Python<'_>, options: GenerateOptions) -> PyResult<CsrOut<'_, f64>> {
    let p = options.params().map_err(to_py)?;
    let m = interruptible(py, || {
        let el = generate::generate(&p)?;
        let el = if p.undirected { both_ways(el) } else { el };
        Csr::<f64>::from_edges(&el, &AS_LISTED)
    })?;
    Ok(csr_out(py, m))
}

/// Every edge `(u, v)` with `u != v` also as `(v, u)`, with its weight.
fn both_ways(el: EdgeList) -> EdgeList {
    let mut edges = Vec::with_capacity(el.edges.len() * 2);
    let mut weights = el
        .weights
        .as_ref()
        .map(|_| Vec::with_capacity(el.edges.len() * 2));
    for (i, &(u, v)) in el.edges.iter().enumerate() {
        edges.push((u, v));
        if let Some(w) = &mut weights {
            w.push(el.weight(i));
        }
        if u != v {
            edges.push((v, u));
            if let Some(w) = &mut weights {
                w.push(el.weight(i));
            }
        }
    }
    EdgeList {
        nrows: el.nrows,
        ncols: el.ncols,
        edges,
        weights,
    }
}
