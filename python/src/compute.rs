//! The computations: products, Markov clustering, triangle counts and clustering distances, each
//! choosing its engine as the CLI does (`auto` by the size of the work and whether a GPU is
//! usable, with the same notices and the same fallback to the CPU when the GPU fails).

use crate::arrays::{csr_out, edges_of, CsrArg, Parts};
use crate::errors::to_py;
use crate::run::{interruptible, Notices};
use crate::settings;
use gmcl::engine::{self, Work};
use gmcl::io::{self, Format, Labels};
use gmcl::mcl::{self, MclParams, Overlap, PruneParams};
use gmcl::spgemm::{self as products, EngineKind, Pattern, SpgemmOptions};
use gmcl::tricount::{self, SimpleGraph};
use gmcl::{EdgeList, Error, Result, Scalar};
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// An engine name ("auto", "cpu", "gpu") as the CLI's `--engine` reads it.
fn engine_kind(s: &str) -> PyResult<EngineKind> {
    s.parse().map_err(to_py)
}

/// An input format name, as the CLI's `--format` reads it.
pub fn format(s: Option<&str>) -> PyResult<Option<Format>> {
    s.map(str::parse).transpose().map_err(to_py)
}

/// `C = A·B` (`B` defaults to `A`), masked by `mask`'s pattern when given, on `engine`.
/// Returns C's arrays, the engine that ran and the library's time for the product
/// (`ProductStats::seconds`, for measuring what crossing from Python costs).
#[pyfunction]
#[pyo3(signature = (a, b, engine, mask))]
pub fn spgemm<'py>(
    py: Python<'py>,
    a: CsrArg<'py>,
    b: Option<CsrArg<'py>>,
    engine: &str,
    mask: Option<CsrArg<'py>>,
) -> PyResult<Bound<'py, PyAny>> {
    let kind = engine_kind(engine)?;
    let mask = match &mask {
        Some(m) => Some(m.f64()?),
        None => None,
    };
    if a.is_f32() {
        let b = b.as_ref().map(|b| b.f32()).transpose()?;
        product(py, a.f32()?, b, kind, mask)
    } else {
        let b = b.as_ref().map(|b| b.f64()).transpose()?;
        product(py, a.f64()?, b, kind, mask)
    }
}

fn product<'py, T: Scalar + numpy::Element>(
    py: Python<'py>,
    a: Parts<'_, T>,
    b: Option<Parts<'_, T>>,
    kind: EngineKind,
    mask: Option<Parts<'_, f64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let notices = Notices::default();
    let (c, ran, seconds) = interruptible(py, || {
        // The products read the caller's arrays in place.
        let ma = a.check()?;
        let mb = b.map(|b| b.check()).transpose()?.unwrap_or(ma);
        let opts = SpgemmOptions {
            mask: mask.map(|m| m.check()).transpose()?.map(Pattern::of),
            gpu: settings().gpu.clone(),
            ..Default::default()
        };
        let work = match kind {
            EngineKind::Auto => Some(Work::Product(
                products::intermediate_products_per_row(ma, mb)?
                    .iter()
                    .sum(),
            )),
            _ => None,
        };
        let notice = &mut |m: &str| notices.push(m);
        let resolved = engine::resolve(kind, work, notice);
        let ((c, stats), ran) = engine::run_with_fallback(kind, resolved, notice, |e| {
            products::multiply(e, ma, mb, &opts)
        })?;
        Ok((c, ran, stats.seconds))
    })?;
    notices.emit(py)?;
    (csr_out(py, c), ran.name(), seconds)
        .into_pyobject(py)
        .map(|t| t.into_any())
}

/// MCL's parameters as the Python functions take them (the CLI's `cluster` options).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ClusterOptions {
    inflation: f64,
    loop_gain: f64,
    scheme: u32,
    prune: Option<u32>,
    select: Option<u32>,
    recover: Option<u32>,
    pct: Option<u32>,
    max_iterations: usize,
    overlap: String,
    engine: String,
    precision: String,
}

impl ClusterOptions {
    /// The library's parameters, checked.
    fn params(&self) -> PyResult<MclParams> {
        let mut prune = PruneParams::scheme(self.scheme).map_err(to_py)?;
        if let Some(p) = self.prune {
            prune.prune = p;
        }
        if let Some(s) = self.select {
            prune.select = s;
        }
        if let Some(r) = self.recover {
            prune.recover = r;
        }
        if let Some(p) = self.pct {
            prune.pct = p;
        }
        let params = MclParams {
            inflation: self.inflation,
            loop_gain: self.loop_gain,
            prune,
            max_iterations: self.max_iterations,
            overlap: self.overlap.parse::<Overlap>().map_err(to_py)?,
            engine: engine_kind(&self.engine)?,
            gpu: settings().gpu.clone(),
            ..Default::default()
        };
        params.validate().map_err(to_py)?;
        Ok(params)
    }

    fn is_f32(&self) -> PyResult<bool> {
        match self.precision.as_str() {
            "f32" => Ok(true),
            "f64" => Ok(false),
            p => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown precision '{p}': expected f32 or f64"
            ))),
        }
    }
}

/// What a clustering run gives back before it becomes Python objects.
struct Clustered {
    /// The clusters in the input's vertex ids, as the CLI writes them (largest first).
    clusters: Vec<Vec<u32>>,
    /// Vertices of the input (those without edges are in no cluster).
    vertices: usize,
    info: mcl::measures::ClusterInfo,
    iterations: usize,
    converged: bool,
    seconds: f64,
    engine: EngineKind,
}

/// Clusters the graph of `el` as `gmcl cluster` does; `path` names the input in errors.
fn cluster_edges<T: Scalar>(
    el: &EdgeList,
    params: &MclParams,
    path: Option<&Path>,
    notices: &Notices,
) -> Result<Clustered> {
    if T::NAME == "f32" {
        if let Some(w) = &el.weights {
            if let Some(i) = w
                .iter()
                .position(|&x| x.is_finite() && x.abs() > f32::MAX as f64)
            {
                let (u, v) = el.edges[i];
                return Err(Error::Invalid(format!(
                    "edge ({u}, {v}) weighs {}: more than precision f32 holds; use f64",
                    w[i]
                )));
            }
        }
    }
    let (graph, ids) = mcl::graph_from_edges::<T>(el).map_err(|e| match (e, path) {
        (Error::Invalid(message), Some(p)) => Error::Input {
            path: p.to_path_buf(),
            message,
        },
        (e, _) => e,
    })?;
    let notice = &mut |m: &str| notices.push(m);
    let work = (params.engine == EngineKind::Auto)
        .then(|| Work::MclExpansion(mcl::expansion_work(&graph)));
    let resolved = engine::resolve(params.engine, work, notice);
    let (result, ran) = engine::run_with_fallback(params.engine, resolved, notice, |e| {
        let params = MclParams {
            engine: e,
            ..params.clone()
        };
        mcl::cluster(&graph, &params, &mut |_| {})
    })?;
    let info = mcl::measures::cluster_info(&graph, &result.clusters);
    let clusters = result
        .clusters
        .iter()
        .map(|c| c.iter().map(|&v| ids[v as usize]).collect())
        .collect();
    Ok(Clustered {
        clusters,
        vertices: el.nrows,
        info,
        iterations: result.iterations,
        converged: result.converged,
        seconds: result.seconds,
        engine: ran,
    })
}

/// The Python dict of a clustering: `clusters` (one `uint32` array of vertex ids each, in the
/// CLI's order), `vertices`, the clm info measures, `iterations`, `converged`, `seconds`,
/// `engine`.
fn clustered_dict<'py>(py: Python<'py>, c: Clustered) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let clusters: Vec<_> = c.clusters.into_iter().map(|v| v.into_pyarray(py)).collect();
    d.set_item("clusters", clusters)?;
    d.set_item("vertices", c.vertices)?;
    d.set_item("iterations", c.iterations)?;
    d.set_item("converged", c.converged)?;
    d.set_item("seconds", c.seconds)?;
    d.set_item("engine", c.engine.name())?;
    let i = c.info;
    d.set_item("nodes", i.nodes)?;
    d.set_item("singletons", i.singletons)?;
    d.set_item("largest", i.largest)?;
    d.set_item("smallest", i.smallest)?;
    d.set_item("area_fraction", i.area_fraction)?;
    d.set_item("efficiency", i.efficiency)?;
    d.set_item("modularity", i.modularity)?;
    d.set_item("mass_fraction", i.mass_fraction)?;
    Ok(d)
}

/// Clusters the graph of a matrix's entries (made symmetric, the larger weight kept, self loops
/// dropped, as `gmcl cluster` makes a file's edges).
#[pyfunction]
pub fn cluster_matrix<'py>(
    py: Python<'py>,
    a: CsrArg<'py>,
    options: ClusterOptions,
) -> PyResult<Bound<'py, PyDict>> {
    let params = options.params()?;
    let f32 = options.is_f32()?;
    let a = a.f64()?;
    let notices = Notices::default();
    let c = interruptible(py, || {
        let el = edges_of(a.check()?, true)?;
        if f32 {
            cluster_edges::<f32>(&el, &params, None, &notices)
        } else {
            cluster_edges::<f64>(&el, &params, None, &notices)
        }
    })?;
    notices.emit(py)?;
    clustered_dict(py, c)
}

/// Clusters a graph file exactly as `gmcl cluster FILE` does; the dict also holds `labels`, the
/// file's names of its vertices (`None` when they are the ids 0, 1, ...).
#[pyfunction]
#[pyo3(signature = (path, format, options))]
pub fn cluster_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
    options: ClusterOptions,
) -> PyResult<Bound<'py, PyDict>> {
    let params = options.params()?;
    let f32 = options.is_f32()?;
    let fmt = self::format(format)?;
    let notices = Notices::default();
    notices.skipped_columns(&path, fmt);
    let (c, labels) = interruptible(py, || {
        let (c, labels) = if f32 {
            let loaded = io::load_as::<f32>(&path, fmt, &mcl::FOOTPRINT)?;
            let c = cluster_edges::<f32>(&loaded.edges, &params, Some(&path), &notices)?;
            (c, loaded.labels)
        } else {
            let loaded = io::load_as::<f64>(&path, fmt, &mcl::FOOTPRINT)?;
            let c = cluster_edges::<f64>(&loaded.edges, &params, Some(&path), &notices)?;
            (c, loaded.labels)
        };
        let labels = names(&labels, c.vertices);
        Ok((c, labels))
    })?;
    notices.emit(py)?;
    let d = clustered_dict(py, c)?;
    d.set_item("labels", labels)?;
    Ok(d)
}

/// The file's name of each vertex, or `None` when vertex `i` was `i` (`.el`, `.wel`).
pub fn names(labels: &Labels, n: usize) -> Option<Vec<String>> {
    (*labels != Labels::Identity).then(|| (0..n as u32).map(|i| labels.label(i)).collect())
}

/// Counts the triangles of a simple graph as `gmcl tricount` does; returns the count, the
/// per-vertex counts when asked for, the engine that ran and the library's time for the count
/// (`Triangles::seconds`).
fn count_triangles(
    g: &SimpleGraph,
    kind: EngineKind,
    per_vertex: bool,
    notices: &Notices,
) -> Result<Counted> {
    let notice = &mut |m: &str| notices.push(m);
    let resolved = engine::resolve(kind, Some(Work::TriangleEdges(g.edges())), notice);
    let opts = tricount::Options {
        engine: resolved,
        per_vertex,
        gpu: settings().triangles,
        ..Default::default()
    };
    let (t, ran) = engine::run_with_fallback(kind, resolved, notice, |engine| {
        tricount::count(g, &tricount::Options { engine, ..opts })
    })?;
    Ok((t.triangles, t.per_vertex, ran, t.seconds))
}

/// The count, the per-vertex counts, the engine and the library's seconds.
type Counted = (u64, Option<Vec<u64>>, EngineKind, f64);

/// [`Counted`] as Python receives it.
type TriangleResult<'py> = (
    u64,
    Option<Bound<'py, numpy::PyArray1<u64>>>,
    &'static str,
    f64,
);

fn triangles_out(py: Python<'_>, r: Counted) -> TriangleResult<'_> {
    (r.0, r.1.map(|v| v.into_pyarray(py)), r.2.name(), r.3)
}

/// The triangles of the undirected simple graph of a matrix's pattern (directions, loops,
/// repeats and values ignored).
#[pyfunction]
pub fn tricount_matrix<'py>(
    py: Python<'py>,
    a: CsrArg<'py>,
    per_vertex: bool,
    engine: &str,
) -> PyResult<TriangleResult<'py>> {
    let kind = engine_kind(engine)?;
    let notices = Notices::default();
    let r = if a.is_f32() {
        triangles_of_matrix(py, a.f32()?, kind, per_vertex, &notices)?
    } else {
        triangles_of_matrix(py, a.f64()?, kind, per_vertex, &notices)?
    };
    notices.emit(py)?;
    Ok(triangles_out(py, r))
}

/// [`tricount_matrix`] on the arrays, whatever their values' type.
fn triangles_of_matrix<T: Scalar>(
    py: Python<'_>,
    a: Parts<'_, T>,
    kind: EngineKind,
    per_vertex: bool,
    notices: &Notices,
) -> PyResult<Counted> {
    interruptible(py, || {
        let a = a.check()?;
        // A symmetric adjacency without loops (an undirected graph's, from SciPy or NetworkX)
        // is the simple graph already, counted in the caller's arrays; any other matrix is
        // made simple from its entries.
        match SimpleGraph::from_symmetric(a) {
            Some(g) => count_triangles(&g, kind, per_vertex, notices),
            None => {
                let g = SimpleGraph::from_edges(edges_of(a, false)?)?;
                count_triangles(&g, kind, per_vertex, notices)
            }
        }
    })
}

/// The triangles of a graph file, as `gmcl tricount FILE` counts them; also the file's vertex
/// names (`None` when they are the ids).
#[pyfunction]
#[pyo3(signature = (path, format, per_vertex, engine))]
pub fn tricount_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
    per_vertex: bool,
    engine: &str,
) -> PyResult<(TriangleResult<'py>, Option<Vec<String>>)> {
    let kind = engine_kind(engine)?;
    let fmt = self::format(format)?;
    let notices = Notices::default();
    notices.skipped_columns(&path, fmt);
    let (r, labels) = interruptible(py, || {
        let loaded = io::load_for(&path, fmt, &tricount::FOOTPRINT)?;
        let n = loaded.edges.nrows.max(loaded.edges.ncols);
        let labels = names(&loaded.labels, n);
        let g = SimpleGraph::from_edges(loaded.edges).map_err(|e| match e {
            Error::Invalid(message) => Error::Input {
                path: path.clone(),
                message,
            },
            other => other,
        })?;
        Ok((count_triangles(&g, kind, per_vertex, &notices)?, labels))
    })?;
    notices.emit(py)?;
    Ok((triangles_out(py, r), labels))
}

/// The partition of `0..n` that a label per vertex describes (clusters numbered in order of
/// first appearance).
fn partition(labels: &[i64]) -> Vec<Vec<u32>> {
    let mut index: HashMap<i64, usize> = HashMap::new();
    let mut clusters: Vec<Vec<u32>> = Vec::new();
    for (v, &l) in labels.iter().enumerate() {
        let next = clusters.len();
        let k = *index.entry(l).or_insert(next);
        if k == next {
            clusters.push(Vec::new());
        }
        clusters[k].push(v as u32);
    }
    clusters
}

fn distance_dict<'py>(
    py: Python<'py>,
    d: &mcl::measures::Distance,
) -> PyResult<Bound<'py, PyDict>> {
    let o = PyDict::new(py);
    o.set_item("nodes", d.nodes)?;
    o.set_item("clusters_a", d.clusters_a)?;
    o.set_item("clusters_b", d.clusters_b)?;
    o.set_item("split_join", d.split_join)?;
    o.set_item("split_join_a", d.split_join_a)?;
    o.set_item("split_join_b", d.split_join_b)?;
    o.set_item("variation_of_information", d.variation_of_information)?;
    o.set_item("vi_a", d.vi_a)?;
    o.set_item("vi_b", d.vi_b)?;
    o.set_item("adjusted_rand", d.adjusted_rand)?;
    Ok(o)
}

/// `clm dist`'s distances between two labellings of the same vertices (one label per vertex).
#[pyfunction]
pub fn dist_labels<'py>(
    py: Python<'py>,
    a: PyReadonlyArray1<'py, i64>,
    b: PyReadonlyArray1<'py, i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let (a, b) = (a.as_slice()?, b.as_slice()?);
    if a.len() != b.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "the clusterings label {} and {} vertices: both must label the same vertices",
            a.len(),
            b.len()
        )));
    }
    if a.len() > u32::MAX as usize {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "more vertices than 32-bit ids hold",
        ));
    }
    let d = py
        .detach(|| mcl::measures::distance(&partition(a), &partition(b), a.len()))
        .map_err(to_py)?;
    distance_dict(py, &d)
}

/// `gmcl dist A B`: the distances between two clustering files (one cluster per line).
#[pyfunction]
pub fn dist_files(py: Python<'_>, a: PathBuf, b: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let d = py
        .detach(|| {
            let ca = mcl::measures::read_clusters(&a)?;
            let cb = mcl::measures::read_clusters(&b)?;
            let (na, nb) = (a.display().to_string(), b.display().to_string());
            mcl::measures::distance_by_label(&ca, &cb, (&na, &nb))
        })
        .map_err(to_py)?;
    distance_dict(py, &d)
}
