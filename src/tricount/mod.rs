//! Triangle counting on the simple undirected view of a graph.
//!
//! 1. **Simple graph.** [`SimpleGraph::from_edges`] makes the input symmetric, drops self loops
//!    and merges duplicate edges.
//! 2. **Orientation.** Every edge is kept once, from its lower-ranked end to its higher-ranked
//!    end, which makes a DAG `U` (strictly upper triangular in rank order) whose triangles
//!    `a < b < c` are found exactly once each. The rank is the vertex id, or, when relabelling
//!    pays ([`worth_relabelling`], the rule of the GAP Benchmark Suite's `tc`), the position in
//!    order of degree (ties by id): vertices are renumbered so that high-degree vertices come
//!    last, and each vertex then keeps only its neighbours of higher degree, which bounds the
//!    work per edge by about √m on power-law graphs.
//! 3. **Count.** Either through the SpGEMM engine, as a masked product whose entries sum to the
//!    count ([`Form`]: LAGraph's "Sandia" `C⟨L⟩ = L·L`, here as its transpose `C⟨U⟩ = U·U`, or a
//!    dot-product form), or with a dedicated kernel that never stores a product matrix: on the
//!    CPU [`Method::Merge`], on the GPU [`Method::Fused`] (the masked product `C⟨L⟩ = L·U` with
//!    its entries summed as they are formed, the graph oriented by degree on the device). All
//!    give the same counts.
//!
//! Counts are `u64`. The engine path multiplies `f64` matrices of ones: every entry of the
//! product is a count of at most the number of vertices (< 2³²), far below 2⁵³, so it is exact.
//!
//! Where each part lives: `loaded.rs` a graph file loaded for counting, its symmetry checked
//! where the count runs; `orient.rs` the relabelling rule and the oriented graph, `cpu.rs` the
//! dedicated CPU kernel, `masked.rs` the masked products on the engine, [`gpu`] the host side of
//! the fused GPU kernel (kernels/triangles.cu).

use crate::csr::{Csr, CsrRef};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::spgemm::EngineKind;
use orient::Oriented;
use std::borrow::Cow;
use std::time::Instant;

mod cpu;
pub mod gpu;
pub mod gpu_block;
pub mod gpu_pairs;
mod loaded;
mod masked;
pub(crate) mod orient;

pub use loaded::LoadedGraph;
pub use orient::worth_relabelling;

/// What counting triangles allocates per vertex (the simple graph's and the oriented graph's row
/// offsets, degrees, the relabelling and its inverse, per-vertex counts) and per edge (both
/// directions of each edge in the simple graph, the oriented half).
pub const FOOTPRINT: crate::io::limits::Footprint = crate::io::limits::Footprint {
    command: "tricount",
    per_vertex: 64,
    per_edge: 24,
};

/// An undirected graph with no self loops and no repeated edges, stored as its symmetric
/// adjacency pattern (each row sorted, each edge in both rows). The pattern is the graph's own
/// (built from edges or loaded) or borrowed from a matrix that already is one
/// ([`SimpleGraph::from_symmetric`]), which is then counted in place.
#[derive(Clone, Debug, PartialEq)]
pub struct SimpleGraph<'a> {
    row_ptr: Cow<'a, [u64]>,
    col_idx: Cow<'a, [u32]>,
}

impl SimpleGraph<'static> {
    /// The simple undirected graph of an edge list: `(u, v)` and `(v, u)` become one edge, self
    /// loops and weights are dropped. A rectangular list (a non-square Matrix Market file) is read
    /// on the larger of its two dimensions.
    pub fn from_edges(mut el: EdgeList) -> Result<SimpleGraph<'static>> {
        let n = el.nrows.max(el.ncols);
        el.nrows = n;
        el.ncols = n;
        el.weights = None;
        Ok(Self::owned(Csr::<f32>::from_edges(
            &el,
            &crate::io::SIMPLE_GRAPH.build,
        )?))
    }

    /// Loads the simple graph of a graph file (`format` as [`crate::io::load`] takes it), with
    /// the file's vertex names: the same graph [`SimpleGraph::from_edges`] makes of the file's
    /// edges, read straight from a `.npz` archive's arrays when it stores rows or columns (as
    /// they are when they already are a simple graph's: [`crate::io::load_simple_pattern`]).
    pub fn load(
        path: &std::path::Path,
        format: Option<crate::io::Format>,
    ) -> Result<(SimpleGraph<'static>, crate::io::Labels)> {
        let check = crate::io::SymmetryCheck::Load;
        let l = crate::io::load_simple_pattern(path, format, &FOOTPRINT, check)?;
        let g = SimpleGraph {
            row_ptr: Cow::Owned(l.row_ptr),
            col_idx: Cow::Owned(l.col_idx),
        };
        Ok((g, l.labels))
    }

    /// The graph of a symmetric pattern built here (its values are dropped).
    fn owned(adj: Csr<f32>) -> SimpleGraph<'static> {
        let (_, _, row_ptr, col_idx, _) = adj.into_parts();
        SimpleGraph {
            row_ptr: Cow::Owned(row_ptr),
            col_idx: Cow::Owned(col_idx),
        }
    }
}

impl<'a> SimpleGraph<'a> {
    /// The simple graph whose adjacency `adj` already is, read in place: square, no diagonal
    /// entry, `(i, j)` stored exactly when `(j, i)` is (values ignored). One pass over the
    /// entries checks it, with no sort, no copy and no second matrix, for callers that hold
    /// such a matrix (a SciPy graph's adjacency); any other matrix gives `None`, and its
    /// entries go through [`SimpleGraph::from_edges`].
    pub fn from_symmetric<T>(adj: CsrRef<'a, T>) -> Option<SimpleGraph<'a>> {
        (adj.nrows() == adj.ncols()
            && crate::csr::is_symmetric_without_loops(adj.row_ptr(), adj.col_idx()))
        .then(|| SimpleGraph {
            row_ptr: Cow::Borrowed(adj.row_ptr()),
            col_idx: Cow::Borrowed(adj.col_idx()),
        })
    }

    /// Number of vertices (isolated ones included).
    pub fn vertices(&self) -> usize {
        self.row_ptr.len() - 1
    }

    /// Number of undirected edges.
    pub fn edges(&self) -> u64 {
        self.col_idx.len() as u64 / 2
    }

    /// Number of neighbours of `v`.
    #[inline]
    pub fn degree(&self, v: usize) -> usize {
        (self.row_ptr[v + 1] - self.row_ptr[v]) as usize
    }

    /// The sorted neighbours of `v`.
    #[inline]
    pub fn neighbours(&self, v: usize) -> &[u32] {
        &self.col_idx[self.row_ptr[v] as usize..self.row_ptr[v + 1] as usize]
    }

    /// The symmetric adjacency's row offsets (`vertices() + 1` of them).
    pub fn row_ptr(&self) -> &[u64] {
        &self.row_ptr
    }

    /// The symmetric adjacency's columns: every vertex's sorted neighbours, row after row.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
}

/// How the triangles are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    /// The merge kernel on the CPU engine, the fused kernel on the GPU engine.
    #[default]
    Auto,
    /// A masked product computed by the SpGEMM engine ([`spgemm::multiply`]).
    Spgemm,
    /// The dedicated CPU kernel, which forms no product: for each vertex `b`, its higher-ranked
    /// neighbours are marked in a bitmap, and for each lower-ranked neighbour `a`, the
    /// neighbours of `a` ranked above `b` are looked up. (Named after GAP's merge-based kernel,
    /// which it replaces; a merge of sorted rows remains the fallback for per-vertex counts on
    /// graphs of more than 2³² oriented edges.)
    Merge,
    /// The GPU kernel (kernels/triangles.cu): the graph is oriented by degree on the device,
    /// then the masked product `C⟨U⟩ = U·U` is summed as it is formed, with each vertex's row of
    /// `U` held in shared memory as its mask. Needs the GPU engine.
    Fused,
}

impl Method {
    /// "auto", "spgemm", "merge" or "fused".
    pub fn name(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Spgemm => "spgemm",
            Method::Merge => "merge",
            Method::Fused => "fused",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Method::Auto),
            "spgemm" => Ok(Method::Spgemm),
            "merge" => Ok(Method::Merge),
            "fused" => Ok(Method::Fused),
            _ => Err(Error::Invalid(format!(
                "unknown method '{s}': expected auto, spgemm, merge or fused"
            ))),
        }
    }
}

/// Whether vertices are renumbered by degree before counting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Relabel {
    /// When [`worth_relabelling`] says so.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never: the orientation follows the vertex ids.
    Never,
}

impl std::str::FromStr for Relabel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Relabel::Auto),
            "always" | "yes" => Ok(Relabel::Always),
            "never" | "no" => Ok(Relabel::Never),
            _ => Err(Error::Invalid(format!(
                "unknown relabel choice '{s}': expected auto, always or never"
            ))),
        }
    }
}

/// The masked product the engine computes, with `U` the oriented graph (strictly upper
/// triangular in rank order) and `L = Uᵀ`. Each finds every triangle `a < b < c` once, so the
/// sum of its entries is the count; they differ in which wedges the engine walks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Form {
    /// The form with the fewest intermediate products (known before multiplying).
    #[default]
    Auto,
    /// LAGraph's "Sandia" `C⟨L⟩ = L·L`, computed as its transpose `C⟨U⟩ = U·U`: `C(a, c)` counts
    /// the middle vertices `b`. Intermediate products: `Σ_b in(b)·out(b)`.
    Sandia,
    /// `C⟨L⟩ = L·Lᵀ`, multiplied as `L·U`: `C(c, b)` counts the lowest vertices `a`.
    /// Intermediate products: `Σ_a out(a)²`.
    Dot,
    /// `C⟨U⟩ = U·Uᵀ`, multiplied as `U·L`: `C(a, b)` counts the highest vertices `c`.
    /// Intermediate products: `Σ_c in(c)²`.
    DotUpper,
}

impl Form {
    /// "auto", "sandia", "dot" or "dot-upper".
    pub fn name(self) -> &'static str {
        match self {
            Form::Auto => "auto",
            Form::Sandia => "sandia",
            Form::Dot => "dot",
            Form::DotUpper => "dot-upper",
        }
    }
}

impl std::str::FromStr for Form {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Form::Auto),
            "sandia" => Ok(Form::Sandia),
            "dot" => Ok(Form::Dot),
            "dot-upper" => Ok(Form::DotUpper),
            _ => Err(Error::Invalid(format!(
                "unknown form '{s}': expected auto, sandia, dot or dot-upper"
            ))),
        }
    }
}

/// What [`count`] does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The engine of the masked product (and whether `Method::Auto` takes the merge kernel, on
    /// the CPU engine, or the fused one, on the GPU engine). `Auto` means the GPU engine when the
    /// graph is large enough for it to pay and a GPU is usable, the CPU engine otherwise
    /// ([`crate::engine::resolve`]).
    pub engine: EngineKind,
    /// Masked product or dedicated kernel.
    pub method: Method,
    /// Renumber by degree first.
    pub relabel: Relabel,
    /// The masked product (engine path only).
    pub form: Form,
    /// Also count the triangles of each vertex.
    pub per_vertex: bool,
    /// How the GPU runs the count: the fused kernel's switches; the masked product's GPU engine
    /// takes their `poison` and `profile`.
    pub gpu: gpu::TriangleTuning,
}

/// The result of [`count`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Triangles {
    /// Number of triangles.
    pub triangles: u64,
    /// Triangles through each vertex (indexed like the graph's vertices; they sum to
    /// `3 × triangles`), when asked for.
    pub per_vertex: Option<Vec<u64>>,
    /// The method that ran (never `Auto`).
    pub method: Method,
    /// Whether vertices were renumbered by degree.
    pub relabelled: bool,
    /// The masked products computed (engine path; two with per-vertex counts).
    pub forms: Vec<Form>,
    /// Intermediate products of the engine's products (0 for the merge kernel).
    pub intermediate_products: u64,
    /// Seconds from the simple graph to the count: orientation, relabelling, counting.
    pub seconds: f64,
    /// Of which the orientation and relabelling.
    pub orient_seconds: f64,
    /// Of which the engine's products (as [`spgemm::ProductStats::seconds`] measures them).
    pub product_seconds: f64,
    /// Fused kernel: of `seconds`, the copy of the graph to the device.
    pub upload_seconds: f64,
    /// Fused kernel on rows loaded unchecked ([`LoadedGraph`]): of `seconds`, the check on the
    /// device that they are symmetric.
    pub check_seconds: f64,
    /// Fused kernel: of `seconds`, the time from the graph on the device to the count
    /// (orientation included).
    pub device_seconds: f64,
}

/// The engine and the method [`count`] takes for a graph of `edges` edges.
fn plan(edges: u64, opts: &Options) -> (EngineKind, Method) {
    let work = crate::engine::Work::TriangleEdges(edges);
    let engine = crate::engine::resolve(opts.engine, Some(work), &mut |_| {});
    let method = match (opts.method, engine) {
        (Method::Auto, EngineKind::Gpu) => Method::Fused,
        (Method::Auto, _) => Method::Merge,
        (m, _) => m,
    };
    (engine, method)
}

/// Counts the triangles of `g`.
///
/// The CPU kernel fails only with [`Error::Interrupted`] (checked between phases). The engine
/// path fails as [`spgemm::multiply`] does, for example
/// with [`Error::EngineUnavailable`] when the GPU engine is asked for and cannot run here.
pub fn count(g: &SimpleGraph, opts: &Options) -> Result<Triangles> {
    let start = Instant::now();
    let (engine, method) = plan(g.edges(), opts);
    if method == Method::Fused {
        return gpu::count_fused(g, opts, engine, start);
    }
    let relabelled = match opts.relabel {
        Relabel::Auto => worth_relabelling(g),
        Relabel::Always => true,
        Relabel::Never => false,
    };
    crate::interrupt::check()?;
    let o = Oriented::new(g, relabelled);
    crate::interrupt::check()?;
    let mut out = Triangles {
        method,
        relabelled,
        orient_seconds: start.elapsed().as_secs_f64(),
        ..Default::default()
    };
    let (total, per_vertex) = match method {
        Method::Spgemm => o.count_spgemm(opts, &mut out)?,
        _ => o.count_merge(opts.per_vertex),
    };
    out.triangles = total;
    crate::interrupt::check()?;
    out.per_vertex = per_vertex.map(|pv| o.to_original(pv));
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn graph(n: usize, edges: &[(u32, u32)]) -> SimpleGraph<'static> {
        SimpleGraph::from_edges(EdgeList::square(n, edges.to_vec(), None)).unwrap()
    }

    #[test]
    fn a_symmetric_pattern_is_read_in_place_and_any_other_refused() {
        let g = graph(4, &[(0, 1), (1, 2), (2, 0), (2, 3)]);
        let weighted = Csr::<f64>::from_parts(
            4,
            4,
            g.row_ptr().to_vec(),
            g.col_idx().to_vec(),
            vec![3.0; g.col_idx().len()],
        )
        .unwrap();
        let same = SimpleGraph::from_symmetric(weighted.view()).unwrap();
        assert_eq!(same, g);
        assert!(std::ptr::eq(same.col_idx(), weighted.col_idx()));
        // One direction only, a loop, a non-square shape: each is refused.
        let one_way = Csr::<f32>::from_dense(2, 2, &[0.0, 1.0, 0.0, 0.0]);
        assert_eq!(SimpleGraph::from_symmetric(one_way.view()), None);
        let looped = Csr::<f32>::from_dense(2, 2, &[1.0, 1.0, 1.0, 0.0]);
        assert!(SimpleGraph::from_symmetric(looped.view()).is_none());
        // (0, 1), (0, 2), (2, 1): every row's count matches a symmetric one's, yet (1, 0) is
        // missing and (1, 2) stands in its place.
        let skewed = Csr::<f32>::from_dense(3, 3, &[0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]);
        assert!(SimpleGraph::from_symmetric(skewed.view()).is_none());
        assert!(SimpleGraph::from_symmetric(Csr::<f32>::empty(2, 3).view()).is_none());
        let empty = Csr::<f32>::empty(0, 0);
        assert_eq!(
            SimpleGraph::from_symmetric(empty.view()).map(|g| g.vertices()),
            Some(0)
        );
    }

    /// Every combination of method, relabelling and form, with and without per-vertex counts.
    fn all_counts(g: &SimpleGraph) -> Vec<Triangles> {
        let mut out = Vec::new();
        for relabel in [Relabel::Never, Relabel::Always, Relabel::Auto] {
            for per_vertex in [false, true] {
                out.push(
                    count(
                        g,
                        &Options {
                            engine: EngineKind::Cpu,
                            method: Method::Merge,
                            relabel,
                            per_vertex,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                );
                for form in [Form::Auto, Form::Sandia, Form::Dot, Form::DotUpper] {
                    out.push(
                        count(
                            g,
                            &Options {
                                engine: EngineKind::Cpu,
                                method: Method::Spgemm,
                                relabel,
                                form,
                                per_vertex,
                                ..Default::default()
                            },
                        )
                        .unwrap(),
                    );
                }
            }
        }
        out
    }

    #[test]
    fn simple_graph_drops_loops_duplicates_and_direction() {
        let g = graph(4, &[(0, 1), (1, 0), (0, 1), (2, 2), (3, 2)]);
        assert_eq!(g.vertices(), 4);
        assert_eq!(g.edges(), 2);
        assert_eq!(g.neighbours(2), &[3]);
        assert_eq!(g.degree(0), 1);
    }

    #[test]
    fn k4_and_a_pendant() {
        // K4 on 0..4 (4 triangles) plus 4-5 and the triangle 5-6-7 with a duplicate and a loop.
        let mut e = Vec::new();
        for a in 0..4u32 {
            for b in a + 1..4 {
                e.push((b, a));
            }
        }
        e.extend([(4, 5), (5, 6), (6, 7), (7, 5), (7, 5), (6, 6)]);
        let g = graph(8, &e);
        for t in all_counts(&g) {
            assert_eq!(t.triangles, 5, "{t:?}");
            if let Some(pv) = &t.per_vertex {
                assert_eq!(pv, &[3, 3, 3, 3, 0, 1, 1, 1], "{t:?}");
            }
        }
    }

    #[test]
    fn empty_and_edgeless_graphs() {
        for g in [graph(0, &[]), graph(5, &[]), graph(3, &[(0, 1)])] {
            for t in all_counts(&g) {
                assert_eq!(t.triangles, 0);
                if let Some(pv) = t.per_vertex {
                    assert_eq!(pv.len(), g.vertices());
                    assert!(pv.iter().all(|&c| c == 0));
                }
            }
        }
    }

    #[test]
    fn forms_report_what_ran() {
        let g = graph(3, &[(0, 1), (1, 2), (2, 0)]);
        let t = count(
            &g,
            &Options {
                method: Method::Spgemm,
                engine: EngineKind::Cpu,
                form: Form::Dot,
                per_vertex: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(t.triangles, 1);
        assert_eq!(t.forms.len(), 2);
        assert_eq!(t.forms[0], Form::Dot);
        assert_ne!(t.forms[1], Form::Dot);
        assert_eq!(t.per_vertex, Some(vec![1, 1, 1]));
        assert_eq!(t.method, Method::Spgemm);
    }

    #[test]
    fn gpu_engine_path_reports_unavailable() {
        let g = graph(3, &[(0, 1), (1, 2), (2, 0)]);
        let opts = Options {
            engine: EngineKind::Gpu,
            ..Default::default()
        };
        // `auto` on the GPU engine takes the fused kernel, or fails cleanly without a GPU.
        match count(&g, &opts) {
            Ok(t) => assert_eq!((t.triangles, t.method), (1, Method::Fused)),
            Err(e) => assert!(matches!(e, Error::EngineUnavailable(_)), "{e}"),
        }
    }

    #[test]
    fn names_parse() {
        assert_eq!("merge".parse::<Method>().unwrap(), Method::Merge);
        assert_eq!(" SpGEMM ".parse::<Method>().unwrap(), Method::Spgemm);
        assert!("fast".parse::<Method>().is_err());
        assert_eq!("never".parse::<Relabel>().unwrap(), Relabel::Never);
        assert_eq!("yes".parse::<Relabel>().unwrap(), Relabel::Always);
        assert!("maybe".parse::<Relabel>().is_err());
        for f in [Form::Auto, Form::Sandia, Form::Dot, Form::DotUpper] {
            assert_eq!(f.name().parse::<Form>().unwrap(), f);
        }
        assert!("ll".parse::<Form>().is_err());
        assert_eq!(Method::Spgemm.name(), "spgemm");
    }
}
