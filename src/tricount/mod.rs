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
//!    CPU [`Method::Merge`], on the GPU [`Method::Fused`] (the Sandia product with its entries
//!    summed as they are formed, the graph oriented by degree on the device). All give the same
//!    counts.
//!
//! Counts are `u64`. The engine path multiplies `f64` matrices of ones: every entry of the
//! product is a count of at most the number of vertices (< 2³²), far below 2⁵³, so it is exact.

use crate::csr::{BuildOptions, Csr, Duplicates};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use crate::spgemm::prefetch;
use crate::spgemm::{self, EngineKind, Pattern, ProductStats, SpgemmOptions};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

pub mod gpu;

/// An undirected graph with no self loops and no repeated edges, stored as its symmetric
/// adjacency pattern (each row sorted, each edge in both rows).
#[derive(Clone, Debug, PartialEq)]
pub struct SimpleGraph {
    adj: Csr<f32>,
}

impl SimpleGraph {
    /// The simple undirected graph of an edge list: `(u, v)` and `(v, u)` become one edge, self
    /// loops and weights are dropped. A rectangular list (a non-square Matrix Market file) is read
    /// on the larger of its two dimensions.
    pub fn from_edges(mut el: EdgeList) -> Result<SimpleGraph> {
        let n = el.nrows.max(el.ncols);
        el.nrows = n;
        el.ncols = n;
        el.weights = None;
        let opts = BuildOptions {
            symmetrize: true,
            drop_self_loops: true,
            duplicates: Duplicates::Max,
        };
        Ok(SimpleGraph {
            adj: Csr::from_edges(&el, &opts)?,
        })
    }

    /// Number of vertices (isolated ones included).
    pub fn vertices(&self) -> usize {
        self.adj.nrows()
    }

    /// Number of undirected edges.
    pub fn edges(&self) -> u64 {
        self.adj.nnz() as u64 / 2
    }

    /// Number of neighbours of `v`.
    #[inline]
    pub fn degree(&self, v: usize) -> usize {
        self.adj.row_len(v)
    }

    /// The sorted neighbours of `v`.
    #[inline]
    pub fn neighbours(&self, v: usize) -> &[u32] {
        self.adj.row(v).0
    }

    /// The symmetric adjacency matrix (every value 1).
    pub fn adjacency(&self) -> &Csr<f32> {
        &self.adj
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

    /// Which role (lowest, middle, highest vertex of a triangle) a row and a column of the
    /// product stand for.
    fn roles(self) -> (Role, Role) {
        match self {
            Form::Sandia | Form::Auto => (Role::Low, Role::High),
            Form::Dot => (Role::High, Role::Mid),
            Form::DotUpper => (Role::Low, Role::Mid),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Low,
    Mid,
    High,
}

/// What [`count`] does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The engine of the masked product (and whether `Method::Auto` takes the merge kernel, on
    /// the CPU engine, or the fused one, on the GPU engine). `Auto` means the GPU engine when a
    /// GPU is usable and the CPU engine otherwise ([`spgemm::resolve`]).
    pub engine: EngineKind,
    /// Masked product or dedicated kernel.
    pub method: Method,
    /// Renumber by degree first.
    pub relabel: Relabel,
    /// The masked product (engine path only).
    pub form: Form,
    /// Also count the triangles of each vertex.
    pub per_vertex: bool,
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
    /// Of which the engine's products (as [`ProductStats::seconds`] measures them).
    pub product_seconds: f64,
    /// Fused kernel: of `seconds`, the copy of the graph to the device.
    pub upload_seconds: f64,
    /// Fused kernel: of `seconds`, the time from the graph on the device to the count
    /// (orientation included).
    pub device_seconds: f64,
}

/// GAP's rule for relabelling by degree (`WorthRelabelling` in its `tc.cc`): only when the
/// graph has at least 10 edges per vertex on average, and the mean of 1000 sampled degrees (of
/// vertices with an edge, drawn with a fixed seed) is more than 1.3 times their median: the
/// sign of a skewed, power-law degree distribution.
pub fn worth_relabelling(g: &SimpleGraph) -> bool {
    let n = g.vertices();
    if n == 0 || g.edges() / (n as u64) < 10 {
        return false;
    }
    let samples = n.min(1000);
    let mut rng = SplitMix(27491095);
    let mut degrees = Vec::with_capacity(samples);
    // Vertices with an edge are at least √(20 n) of n here; the bound on draws only guards
    // against looping long on a huge, nearly empty vertex set.
    for _ in 0..(1000 * samples as u64) {
        if degrees.len() == samples {
            break;
        }
        let v = (rng.next() % n as u64) as usize;
        let d = g.degree(v);
        if d > 0 {
            degrees.push(d as u64);
        }
    }
    if degrees.is_empty() {
        return false;
    }
    degrees.sort_unstable();
    let mean = degrees.iter().sum::<u64>() as f64 / degrees.len() as f64;
    let median = degrees[degrees.len() / 2] as f64;
    mean / 1.3 > median
}

/// A small deterministic generator for the degree sample.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Counts the triangles of `g`.
///
/// The CPU kernel fails only with [`Error::Interrupted`] (checked between phases). The engine
/// path fails as [`spgemm::multiply`] does, for example
/// with [`Error::EngineUnavailable`] when the GPU engine is asked for and cannot run here.
pub fn count(g: &SimpleGraph, opts: &Options) -> Result<Triangles> {
    let start = Instant::now();
    let engine = spgemm::resolve(opts.engine).0;
    let method = match (opts.method, engine) {
        (Method::Auto, EngineKind::Gpu) => Method::Fused,
        (Method::Auto, _) => Method::Merge,
        (m, _) => m,
    };
    if method == Method::Fused {
        return count_fused(g, opts, engine, start);
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
    let per_vertex = match method {
        Method::Spgemm => {
            let (total, pv) = o.count_spgemm(opts, &mut out)?;
            out.triangles = total;
            pv
        }
        _ if opts.per_vertex => {
            let pv = o.per_vertex_pairs().unwrap_or_else(|| o.per_vertex_merge());
            out.triangles = pv.iter().sum::<u64>() / 3;
            Some(pv)
        }
        _ => {
            out.triangles = o.count_pairs();
            None
        }
    };
    crate::interrupt::check()?;
    out.per_vertex = per_vertex.map(|pv| o.to_original(pv));
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The fused GPU kernel ([`Method::Fused`]), on the GPU engine only.
fn count_fused(
    g: &SimpleGraph,
    opts: &Options,
    engine: EngineKind,
    start: Instant,
) -> Result<Triangles> {
    if engine != EngineKind::Gpu {
        return Err(Error::Invalid(
            "the fused method runs on the GPU engine: use --engine gpu, or --method merge on \
             the CPU"
                .into(),
        ));
    }
    let gpu = crate::gpu::device().map_err(|e| match e {
        Error::EngineUnavailable(why) => {
            Error::EngineUnavailable(format!("the GPU engine cannot count triangles here: {why}"))
        }
        other => other,
    })?;
    let a = g.adjacency();
    let tuning = gpu::TriangleTuning::from_env();
    let d = gpu::count(&gpu, a.row_ptr(), a.col_idx(), opts.per_vertex, &tuning)?;
    Ok(Triangles {
        triangles: d.triangles,
        per_vertex: d.per_vertex,
        method: Method::Fused,
        relabelled: false,
        orient_seconds: d.orient_seconds,
        upload_seconds: d.upload_seconds,
        device_seconds: d.device_seconds,
        seconds: start.elapsed().as_secs_f64(),
        ..Default::default()
    })
}

/// The oriented graph: row `r` holds the neighbours of rank higher than `r`, sorted. Rows are
/// ranks; `order[r]` is the original vertex of rank `r` when relabelled.
struct Oriented {
    ptr: Vec<u64>,
    adj: Vec<u32>,
    /// The number of lower-ranked neighbours of each row (its in-degree in the DAG).
    indeg: Vec<u64>,
    order: Option<Vec<u32>>,
}

impl Oriented {
    fn new(g: &SimpleGraph, relabel: bool) -> Oriented {
        let n = g.vertices();
        if !relabel {
            let keep = |u: usize| {
                let nb = g.neighbours(u);
                &nb[nb.partition_point(|&v| v as usize <= u)..]
            };
            let lens: Vec<u64> = (0..n)
                .into_par_iter()
                .with_min_len(1024)
                .map(|u| keep(u).len() as u64)
                .collect();
            let ptr = prefix(&lens);
            let adj = fill_rows(&ptr, |u, out| out.copy_from_slice(keep(u)));
            let indeg = lens
                .par_iter()
                .enumerate()
                .map(|(u, &l)| g.degree(u) as u64 - l)
                .collect();
            return Oriented {
                ptr,
                adj,
                indeg,
                order: None,
            };
        }
        // Ranks in order of (degree, id): high-degree vertices last.
        let mut keys: Vec<u64> = (0..n)
            .into_par_iter()
            .map(|v| ((g.degree(v) as u64) << 32) | v as u64)
            .collect();
        keys.par_sort_unstable();
        let order: Vec<u32> = keys.into_par_iter().map(|k| k as u32).collect();
        let mut rank = vec![0u32; n];
        for (r, &v) in order.iter().enumerate() {
            rank[v as usize] = r as u32;
        }
        let lens: Vec<u64> = (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|r| {
                let u = order[r] as usize;
                g.neighbours(u)
                    .iter()
                    .filter(|&&v| rank[v as usize] as usize > r)
                    .count() as u64
            })
            .collect();
        let ptr = prefix(&lens);
        let adj = fill_rows(&ptr, |r, out| {
            let u = order[r] as usize;
            let mut at = 0;
            for &v in g.neighbours(u) {
                let rv = rank[v as usize];
                if rv as usize > r {
                    out[at] = rv;
                    at += 1;
                }
            }
            out.sort_unstable();
        });
        let indeg = lens
            .par_iter()
            .enumerate()
            .map(|(r, &l)| g.degree(order[r] as usize) as u64 - l)
            .collect();
        Oriented {
            ptr,
            adj,
            indeg,
            order: Some(order),
        }
    }

    fn n(&self) -> usize {
        self.ptr.len() - 1
    }

    #[inline]
    fn row(&self, u: usize) -> &[u32] {
        &self.adj[self.ptr[u] as usize..self.ptr[u + 1] as usize]
    }

    /// Per-vertex counts indexed by rank, moved to original vertex ids.
    fn to_original(&self, by_rank: Vec<u64>) -> Vec<u64> {
        match &self.order {
            None => by_rank,
            Some(order) => {
                let mut out = vec![0u64; by_rank.len()];
                for (r, &v) in order.iter().enumerate() {
                    out[v as usize] = by_rank[r];
                }
                out
            }
        }
    }

    /// Consecutive row ranges of about equal work (`Σ_{v ∈ row u} |row v|` plus the row).
    fn tasks(&self) -> Vec<Range<usize>> {
        balanced(self.n(), |u| {
            let row = self.row(u);
            row.len() as u64
                + row
                    .iter()
                    .map(|&v| self.ptr[v as usize + 1] - self.ptr[v as usize])
                    .sum::<u64>()
        })
    }

    /// The in-edges of each vertex `b`, grouped by `b` (offsets, then spans): for an edge
    /// `a → b` at position `e` of `adj`, the span `e + 1 .. end of row a` (the entries of row `a`
    /// after `b`), packed as `start << 32 | end`. `None` when positions pass 32 bits.
    fn in_spans(&self) -> Option<(Vec<u64>, Vec<u64>)> {
        let n = self.n();
        if self.adj.len() > u32::MAX as usize {
            return None;
        }
        let tptr = prefix(&self.indeg);
        let cursor: Vec<AtomicU64> = tptr[..n].iter().map(|&p| AtomicU64::new(p)).collect();
        let spans: Vec<AtomicU64> = (0..self.adj.len()).map(|_| AtomicU64::new(0)).collect();
        (0..n).into_par_iter().with_min_len(256).for_each(|a| {
            let (start, end) = (self.ptr[a], self.ptr[a + 1]);
            for e in start..end {
                let b = self.adj[e as usize] as usize;
                let at = cursor[b].fetch_add(1, Relaxed);
                spans[at as usize].store(((e + 1) << 32) | end, Relaxed);
            }
        });
        let mut spans: Vec<u64> = spans.into_iter().map(AtomicU64::into_inner).collect();
        // In order of position, so that the rows of `a` are visited in memory order.
        let lens: Vec<usize> = (0..n).map(|b| (tptr[b + 1] - tptr[b]) as usize).collect();
        crate::mem::split_by_lengths(&mut spans, &lens)
            .into_par_iter()
            .with_min_len(256)
            .for_each(|seg| seg.sort_unstable());
        Some((tptr, spans))
    }

    /// The total count, wedge by wedge at the lowest vertex: for each vertex `b`, its row is
    /// marked in a bitmap; then for each in-edge `a → b`, the entries `c` of row `a` after `b`
    /// (up to the largest entry of row `b`) are looked up. Each pair `b < c` of a row is visited
    /// at most once: `Σ out(a)²/2` lookups at most, fewer than the `Σ in(b)·out(b)` of walking
    /// the rows of a row's entries ([`Oriented::count_marked`]) on graphs ordered by degree.
    fn count_pairs(&self) -> u64 {
        let Some((tptr, spans)) = self.in_spans() else {
            return self.count_marked();
        };
        let n = self.n();
        let span = |k: usize| {
            let x = spans[k];
            ((x >> 32) as usize, (x & u32::MAX as u64) as usize)
        };
        let in_of = |b: usize| tptr[b] as usize..tptr[b + 1] as usize;
        let tasks = balanced(n, |b| {
            let out = self.row(b).len() as u64;
            if out == 0 {
                return 0;
            }
            out + in_of(b)
                .map(|k| {
                    let (s, e) = span(k);
                    (e - s) as u64
                })
                .sum::<u64>()
        });
        let words = n.div_ceil(64);
        tasks
            .into_par_iter()
            .map(|range| {
                let mut bits = vec![0u64; words];
                let mut total = 0u64;
                for b in range {
                    let nb = self.row(b);
                    let Some(&hi) = nb.last() else {
                        continue;
                    };
                    for &c in nb {
                        bits[c as usize >> 6] |= 1u64 << (c & 63);
                    }
                    for k in in_of(b) {
                        // Each span starts at a random place of `adj`: fetch a few ahead.
                        if k + AHEAD < spans.len() {
                            prefetch(self.adj.as_ptr().wrapping_add(span(k + AHEAD).0));
                        }
                        let (s, e) = span(k);
                        for &c in &self.adj[s..e] {
                            if c > hi {
                                break;
                            }
                            total += (bits[c as usize >> 6] >> (c & 63)) & 1;
                        }
                    }
                    for &c in nb {
                        bits[c as usize >> 6] = 0;
                    }
                }
                total
            })
            .sum()
    }

    /// Triangles through each vertex (indexed by rank), walking the wedges as
    /// [`Oriented::count_pairs`] does. A triangle `a < b < c` is found from the in-edge `a → b`
    /// and the entry `c` of row `b`: `b`'s count is kept locally, `c`'s per entry of row `b`
    /// (found by a binary search in the row) and added once per entry, and `a`'s per in-edge,
    /// stored at the in-edge's position in `adj` and summed row by row at the end. `None` when
    /// positions pass 32 bits.
    fn per_vertex_pairs(&self) -> Option<Vec<u64>> {
        let (tptr, spans) = self.in_spans()?;
        let n = self.n();
        let span = |k: usize| {
            let x = spans[k];
            ((x >> 32) as usize, (x & u32::MAX as u64) as usize)
        };
        let in_of = |b: usize| tptr[b] as usize..tptr[b + 1] as usize;
        let tasks = balanced(n, |b| {
            let out = self.row(b).len() as u64;
            if out == 0 {
                return 0;
            }
            out + in_of(b)
                .map(|k| {
                    let (s, e) = span(k);
                    (e - s) as u64
                })
                .sum::<u64>()
        });
        let counts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        // Triangles whose lowest two vertices are the edge at each position of `adj`.
        let low: Vec<AtomicU32> = (0..self.adj.len()).map(|_| AtomicU32::new(0)).collect();
        let words = n.div_ceil(64);
        tasks.into_par_iter().for_each(|range| {
            let mut bits = vec![0u64; words];
            let mut high: Vec<u64> = Vec::new();
            for b in range {
                let nb = self.row(b);
                let Some(&hi) = nb.last() else {
                    continue;
                };
                for &c in nb {
                    bits[c as usize >> 6] |= 1u64 << (c & 63);
                }
                high.clear();
                high.resize(nb.len(), 0);
                let mut mid = 0u64;
                for k in in_of(b) {
                    if k + AHEAD < spans.len() {
                        prefetch(self.adj.as_ptr().wrapping_add(span(k + AHEAD).0));
                    }
                    let (s, e) = span(k);
                    let mut found = 0u32;
                    for &c in &self.adj[s..e] {
                        if c > hi {
                            break;
                        }
                        if (bits[c as usize >> 6] >> (c & 63)) & 1 == 1 {
                            found += 1;
                            high[nb.partition_point(|&x| x < c)] += 1;
                        }
                    }
                    if found > 0 {
                        // Position s - 1 holds b in row a: the edge a → b.
                        low[s - 1].store(found, Relaxed);
                        mid += found as u64;
                    }
                }
                for &c in nb {
                    bits[c as usize >> 6] = 0;
                }
                if mid > 0 {
                    counts[b].fetch_add(mid, Relaxed);
                    for (&c, &h) in nb.iter().zip(&high) {
                        if h > 0 {
                            counts[c as usize].fetch_add(h, Relaxed);
                        }
                    }
                }
            }
        });
        Some(
            counts
                .into_par_iter()
                .enumerate()
                .map(|(a, t)| {
                    let row = self.ptr[a] as usize..self.ptr[a + 1] as usize;
                    t.into_inner() + low[row].iter().map(|x| x.load(Relaxed) as u64).sum::<u64>()
                })
                .collect(),
        )
    }

    /// The total count: for each vertex `u`, its row is marked in a bitmap, and for each `v` of
    /// its row, the entries of row `v` up to the largest of row `u` are looked up.
    fn count_marked(&self) -> u64 {
        let words = self.n().div_ceil(64);
        self.tasks()
            .into_par_iter()
            .map(|range| {
                let mut bits = vec![0u64; words];
                let mut total = 0u64;
                for u in range {
                    let nu = self.row(u);
                    let Some((&hi, firsts)) = nu.split_last() else {
                        continue;
                    };
                    for &w in nu {
                        bits[w as usize >> 6] |= 1u64 << (w & 63);
                    }
                    for &v in firsts {
                        for &w in self.row(v as usize) {
                            if w > hi {
                                break;
                            }
                            total += (bits[w as usize >> 6] >> (w & 63)) & 1;
                        }
                    }
                    for &w in nu {
                        bits[w as usize >> 6] = 0;
                    }
                }
                total
            })
            .sum()
    }

    /// Triangles through each vertex (indexed by rank), by merging sorted rows: for each edge
    /// `(u, v)` of the oriented graph, the rows of `u` (after `v`) and `v` are merged; each common
    /// `w` is a triangle `u < v < w`. `u`'s count is kept locally; those of `v` and `w` are
    /// summed per row of `u` and added once per edge.
    fn per_vertex_merge(&self) -> Vec<u64> {
        let counts: Vec<AtomicU64> = (0..self.n()).map(|_| AtomicU64::new(0)).collect();
        self.tasks().into_par_iter().for_each(|range| {
            let mut acc: Vec<u64> = Vec::new();
            for u in range {
                let nu = self.row(u);
                acc.clear();
                acc.resize(nu.len(), 0);
                let mut low = 0u64;
                for (i, &v) in nu.iter().enumerate() {
                    let (a, b) = (&nu[i + 1..], self.row(v as usize));
                    let (mut x, mut y, mut found) = (0, 0, 0u64);
                    while x < a.len() && y < b.len() {
                        if a[x] < b[y] {
                            x += 1;
                        } else if a[x] > b[y] {
                            y += 1;
                        } else {
                            acc[i + 1 + x] += 1;
                            found += 1;
                            x += 1;
                            y += 1;
                        }
                    }
                    acc[i] += found;
                    low += found;
                }
                if low > 0 {
                    counts[u].fetch_add(low, Relaxed);
                    for (&v, &c) in nu.iter().zip(&acc) {
                        if c > 0 {
                            counts[v as usize].fetch_add(c, Relaxed);
                        }
                    }
                }
            }
        });
        counts.into_iter().map(AtomicU64::into_inner).collect()
    }

    /// The oriented graph as an `f64` matrix of ones.
    fn upper(&self) -> Result<Csr<f64>> {
        let n = self.n();
        if n > u32::MAX as usize + 1 {
            return Err(Error::Invalid(format!(
                "{n} vertices do not fit 32-bit indices"
            )));
        }
        Ok(Csr::from_parts_unchecked(
            n,
            n,
            self.ptr.clone(),
            self.adj.clone(),
            vec![1.0; self.adj.len()],
        ))
    }

    /// Intermediate products of each form: `Σ in·out`, `Σ out²`, `Σ in²`.
    fn form_costs(&self) -> [(Form, u64); 3] {
        let (mut sandia, mut dot, mut dot_upper) = (0u64, 0u64, 0u64);
        for (u, &i) in self.indeg.iter().enumerate() {
            let o = self.ptr[u + 1] - self.ptr[u];
            sandia += i * o;
            dot += o * o;
            dot_upper += i * i;
        }
        [
            (Form::Sandia, sandia),
            (Form::Dot, dot),
            (Form::DotUpper, dot_upper),
        ]
    }

    /// The engine path: one masked product for the count, a second one (another form) when the
    /// per-vertex counts need the role the first one does not give.
    fn count_spgemm(&self, opts: &Options, out: &mut Triangles) -> Result<(u64, Option<Vec<u64>>)> {
        let engine = opts.engine;
        let mut costs = self.form_costs();
        costs.sort_by_key(|&(_, c)| c);
        let first = match opts.form {
            Form::Auto => costs[0].0,
            f => f,
        };
        let second = costs
            .iter()
            .map(|&(f, _)| f)
            .find(|&f| f != first)
            .unwrap_or(Form::Sandia);
        let u = self.upper()?;
        let needs_l = |f: Form| matches!(f, Form::Dot | Form::DotUpper);
        let l = if needs_l(first) || (opts.per_vertex && needs_l(second)) {
            Some(u.transpose())
        } else {
            None
        };
        let (c, stats) = masked_product(engine, first, &u, l.as_ref())?;
        out.forms.push(first);
        out.intermediate_products += stats.intermediate_products;
        out.product_seconds += stats.seconds;
        let total = sum_entries(&c);
        if !opts.per_vertex {
            return Ok((total, None));
        }
        let n = self.n();
        let mut counts = vec![0u64; n];
        let (r1, c1) = first.roles();
        add_row_sums(&c, &mut counts);
        add_col_sums(&c, &mut counts);
        drop(c);
        let (c2, stats2) = masked_product(engine, second, &u, l.as_ref())?;
        out.forms.push(second);
        out.intermediate_products += stats2.intermediate_products;
        out.product_seconds += stats2.seconds;
        // The second product gives the missing role through its rows or its columns.
        let (r2, col2) = second.roles();
        if r2 != r1 && r2 != c1 {
            add_row_sums(&c2, &mut counts);
        } else if col2 != r1 && col2 != c1 {
            add_col_sums(&c2, &mut counts);
        }
        Ok((total, Some(counts)))
    }
}

/// One masked product of the engine. `l` is `Uᵀ` (needed by the dot forms).
fn masked_product(
    engine: EngineKind,
    form: Form,
    u: &Csr<f64>,
    l: Option<&Csr<f64>>,
) -> Result<(Csr<f64>, ProductStats)> {
    let need_l =
        || l.ok_or_else(|| Error::Invalid("internal: the dot forms need the transpose".into()));
    let (a, b, mask) = match form {
        Form::Sandia | Form::Auto => (u, u, u),
        Form::Dot => {
            let l = need_l()?;
            (l, u, l)
        }
        Form::DotUpper => (u, need_l()?, u),
    };
    let opts = SpgemmOptions {
        mask: Some(Pattern::of(mask)),
        rows: None,
    };
    spgemm::multiply(engine, a, b, &opts)
}

/// The sum of a product's entries, each an exact small integer.
fn sum_entries<T: Scalar>(c: &Csr<T>) -> u64 {
    c.values().par_iter().map(|v| v.to_f64() as u64).sum()
}

fn add_row_sums<T: Scalar>(c: &Csr<T>, counts: &mut [u64]) {
    counts.par_iter_mut().enumerate().for_each(|(i, t)| {
        *t += c.row(i).1.iter().map(|v| v.to_f64() as u64).sum::<u64>();
    });
}

fn add_col_sums<T: Scalar>(c: &Csr<T>, counts: &mut [u64]) {
    for (&j, v) in c.col_idx().iter().zip(c.values()) {
        counts[j as usize] += v.to_f64() as u64;
    }
}

/// Spans ahead of the current one whose first entries are prefetched.
const AHEAD: usize = 8;

/// Cuts `0..n` into consecutive ranges of about equal total `cost`, many per thread so that
/// rayon can balance them.
fn balanced(n: usize, cost: impl Fn(usize) -> u64 + Sync) -> Vec<Range<usize>> {
    let cost: Vec<u64> = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map(&cost)
        .collect();
    let total: u64 = cost.iter().sum();
    let pieces = (64 * rayon::current_num_threads().max(1)) as u64;
    let target = (total / pieces).max(1 << 12);
    let mut tasks = Vec::new();
    let (mut begin, mut acc) = (0usize, 0u64);
    for (u, &c) in cost.iter().enumerate() {
        acc += c;
        if acc >= target {
            tasks.push(begin..u + 1);
            begin = u + 1;
            acc = 0;
        }
    }
    if begin < n {
        tasks.push(begin..n);
    }
    tasks
}

/// Offsets from lengths: `[0, l0, l0 + l1, ...]`.
fn prefix(lens: &[u64]) -> Vec<u64> {
    let mut ptr = Vec::with_capacity(lens.len() + 1);
    let mut acc = 0u64;
    ptr.push(0);
    for &l in lens {
        acc += l;
        ptr.push(acc);
    }
    ptr
}

/// Allocates the rows `ptr` describes and fills each with `fill(row, slice)`, in parallel over
/// blocks of rows.
fn fill_rows(ptr: &[u64], fill: impl Fn(usize, &mut [u32]) + Sync) -> Vec<u32> {
    let n = ptr.len() - 1;
    let total = ptr[n] as usize;
    let mut adj = vec![0u32; total];
    let block = (n / (16 * rayon::current_num_threads().max(1))).max(1024);
    let starts: Vec<usize> = (0..n).step_by(block).collect();
    let lens: Vec<usize> = starts
        .iter()
        .map(|&s| (ptr[(s + block).min(n)] - ptr[s]) as usize)
        .collect();
    let parts = crate::mem::split_by_lengths(&mut adj, &lens);
    parts.into_par_iter().zip(starts).for_each(|(part, s)| {
        let base = ptr[s];
        for r in s..(s + block).min(n) {
            let (a, b) = ((ptr[r] - base) as usize, (ptr[r + 1] - base) as usize);
            fill(r, &mut part[a..b]);
        }
    });
    adj
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(u32, u32)]) -> SimpleGraph {
        SimpleGraph::from_edges(EdgeList::square(n, edges.to_vec(), None)).unwrap()
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
    fn relabelling_rule() {
        // A ring: too few edges per vertex.
        let ring: Vec<(u32, u32)> = (0..100).map(|i| (i, (i + 1) % 100)).collect();
        assert!(!worth_relabelling(&graph(100, &ring)));
        // A clique of 30 (29 neighbours each, uniform): dense but not skewed.
        let mut e = Vec::new();
        for a in 0..30u32 {
            for b in a + 1..30 {
                e.push((a, b));
            }
        }
        assert!(!worth_relabelling(&graph(30, &e)));
        // Skewed: 2000 vertices of degree about 20 around hubs of degree 2000.
        let mut e = Vec::new();
        for h in 0..10u32 {
            for v in 10..2000u32 {
                e.push((h, v));
            }
        }
        for v in 10..2000u32 {
            e.push((v, 10 + (v + 1 - 10) % 1990));
        }
        assert!(worth_relabelling(&graph(2000, &e)));
    }

    #[test]
    fn the_three_cpu_kernels_agree() {
        // A small skewed graph: hubs 0..8 joined to many, plus a ring; in both orientations.
        let mut e = Vec::new();
        let mut x = 12345u64;
        for _ in 0..3000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((x >> 33) % 8) as u32;
            let v = ((x >> 40) % 400) as u32;
            e.push((u, v));
        }
        e.extend((0..400u32).map(|i| (i, (i + 1) % 400)));
        let g = graph(400, &e);
        for relabel in [false, true] {
            let o = Oriented::new(&g, relabel);
            let pairs = o.count_pairs();
            assert_eq!(o.count_marked(), pairs);
            let pv = o.per_vertex_merge();
            assert_eq!(pv.iter().sum::<u64>(), 3 * pairs);
            assert_eq!(o.per_vertex_pairs(), Some(pv));
            assert!(pairs > 0);
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
