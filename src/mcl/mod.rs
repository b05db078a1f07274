//! Markov clustering (MCL) as van Dongen's `mcl` 22-282 does it, with expansion on the SpGEMM
//! engine.
//!
//! - **Start.** The graph is made symmetric (the larger weight wins for a pair given twice), its
//!   self loops dropped, then every node gets a loop weighing the largest weight of its column
//!   times the loop gain (`-c`, default 1; 1 for a node without edges), and every column is
//!   made stochastic ([`graph_from_edges`], [`start_matrix`]).
//! - **Iterate.** Expansion `M²`, pruning of each new column ([`prune`]), inflation ([`inflate`]),
//!   until the largest chaos of an iteration falls under `1e-4` or `-L` iterations are done.
//!   After 40 iterations the inflation grows by 0.1% per iteration, as in mcl, to end rare
//!   oscillations.
//! - **Interpret** the limit ([`interpret`]).
//!
//! MCL works on columns; gmcl's matrices are row-major, so the driver keeps the transpose `Mᵀ`:
//! its rows are the columns of `M`, and `(M²)ᵀ = Mᵀ·Mᵀ`. Expansion runs in batches of rows
//! whose entries in `M²` are at most [`MclParams::batch_entries`] (bounded before the product by
//! `min(products, n)` per row), and each batch is pruned as soon as it is made, so the full `M²`
//! (on power-law graphs about 190 times the size of `M` in the first iteration) never exists
//! at once.
//!
//! On the GPU engine the matrix stays on the device for all iterations ([`gpu`]): the
//! batches are made, pruned, inflated and stacked there, and only the limit comes back.
//!
//! Every sum is an order-free sum ([`crate::quantized`]): the products of an entry of `M²`, a
//! column's mass, its sum of squares and the sum of its inflated entries. So a run's matrices,
//! chaos and clusters are the same bits on the CPU and the GPU engine, fused or batched, in any
//! batch size, thread or rank count, and from one run to the next (the GPU's atomic adds land in
//! a different order every time). Inflation 2 squares; another inflation calls `pow`, whose last
//! bit the GPU's and the host's libraries may round differently in rare cases.
//!
//! Values are `f32` in gmcl's command line, as in mcl (`float` cells).

mod cpu;
pub mod gpu;
pub mod inflate;
pub mod interpret;
pub mod measures;
pub mod native;
pub mod progress;
pub mod prune;
mod stored;
pub mod transform;

pub use interpret::{Interpretation, Overlap};
pub use measures::{ClusterInfo, Distance};
pub use progress::{IterationProgress, Observer, ProgressReading};
pub use prune::PruneParams;
pub use stored::graph_from_stored;
pub use transform::Transform;

use crate::csr::{BuildOptions, Csr, Duplicates};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use crate::spgemm::gpu::GpuTuning;
use crate::spgemm::{self, EngineKind};
use rayon::prelude::*;
use std::ops::Range;
use std::time::Instant;

/// What clustering allocates per vertex id of the file (the id compaction's map) and per edge
/// (the compacted copy, both directions in the symmetric matrix with its values, the start
/// matrix); the expansion is bounded by the memory left ([`cluster`]).
pub const FOOTPRINT: crate::io::limits::Footprint = crate::io::limits::Footprint {
    command: "cluster",
    per_vertex: 8,
    per_edge: 48,
};

/// The parameters of a run; [`Default`] gives mcl's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct MclParams {
    /// Inflation `-I`: greater than 0, at most 30 (mcl's range); default 2.
    pub inflation: f64,
    /// Loop gain `-c`: the loops added at the start are multiplied by this (default 1, >= 0).
    pub loop_gain: f64,
    /// Pruning (`-P -S -R -pct`, or a `-scheme`); default scheme 6.
    pub prune: PruneParams,
    /// At most this many iterations (`-L`, default 10000 as in mcl).
    pub max_iterations: usize,
    /// The process has converged when the largest chaos of an iteration is under this (1e-4).
    pub chaos_limit: f64,
    /// What interpretation does with overlap (default: cut).
    pub overlap: Overlap,
    /// The SpGEMM engine of the expansion (default `Auto`: the GPU engine when a GPU is usable,
    /// else the CPU engine).
    pub engine: EngineKind,
    /// How the GPU engine runs the expansion. MCL's own choices apply to the knobs left at their
    /// defaults: dense columns made and pruned in one window of all the columns, hash tables
    /// up to τ for the others.
    pub gpu: GpuTuning,
    /// Entries of `M²` per expansion batch: rows are grouped while the sum of their bounds
    /// `min(intermediate products, n)` stays under this (a row over it makes a batch alone).
    /// `None`: [`CPU_BATCH_ENTRIES`] on the CPU; on the GPU, what the device's memory allows.
    pub batch_entries: Option<u64>,
    /// Fuse expansion and pruning (default), in an iteration whose products are all positive
    /// (always, unless values underflow): on the CPU engine each thread makes one column of
    /// `M²` at a time in a dense accumulator and prunes it from there, so `M²` is never stored;
    /// on the GPU the dense columns (those with at least a quarter as many products as `M` has
    /// columns) are made and pruned in shared memory, a window of columns at a time where a
    /// whole column does not fit. The result is the batched path's (on the GPU, within
    /// rounding). `false` runs the batched path.
    pub fused: bool,
}

/// The CPU engine's default batch size in entries of `M²` (256 MB of `f32` entries).
pub const CPU_BATCH_ENTRIES: u64 = 1 << 25;

impl Default for MclParams {
    fn default() -> Self {
        MclParams {
            inflation: 2.0,
            loop_gain: 1.0,
            prune: PruneParams::default(),
            max_iterations: 10000,
            chaos_limit: 1e-4,
            overlap: Overlap::Cut,
            engine: EngineKind::Auto,
            gpu: GpuTuning::default(),
            batch_entries: None,
            fused: true,
        }
    }
}

impl MclParams {
    /// Checks the ranges mcl accepts (and a positive batch size).
    pub fn validate(&self) -> Result<()> {
        if !(self.inflation > 0.0 && self.inflation <= 30.0) {
            return Err(Error::Invalid(format!(
                "inflation {} is out of range: mcl accepts values greater than 0 and at most 30",
                self.inflation
            )));
        }
        // mcl reads -I as a 32-bit float: a positive value below its range is 0 there.
        if self.inflation as f32 == 0.0 {
            return Err(Error::Invalid(format!(
                "inflation {} is out of range: mcl reads it as a 32-bit float, where it is 0; \
                 mcl accepts values greater than 0 and at most 30",
                self.inflation
            )));
        }
        if !(self.loop_gain >= 0.0 && self.loop_gain.is_finite()) {
            return Err(Error::Invalid(format!(
                "loop gain {} must be a finite number, 0 or more",
                self.loop_gain
            )));
        }
        if self.batch_entries == Some(0) {
            return Err(Error::Invalid("the batch size must be at least 1".into()));
        }
        self.prune.validate()
    }
}

/// Figures of one iteration, as mcl's progress shows them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Iteration {
    /// 1-based iteration number.
    pub index: usize,
    /// The largest chaos of a column.
    pub chaos: f64,
    /// Entries of `M²` before pruning.
    pub expanded: u64,
    /// Entries kept after pruning.
    pub kept: u64,
    /// Intermediate products of the expansion.
    pub products: u64,
    /// Expansion batches.
    pub batches: usize,
    /// Columns of `M²` pruned as they were made, never stored unpruned (the fused path).
    pub fused: u64,
    /// Wall time spent in the SpGEMM engine (the rest is pruning, inflation and assembly).
    pub expand_seconds: f64,
    /// Wall time of the iteration.
    pub seconds: f64,
    /// Across ranks, the bytes the ranks received from one another (0 in one process).
    pub exchanged_bytes: u64,
    /// Across ranks, the longest a rank spent on other ranks' rows: every row's length, the
    /// blocks cut again, the rounds planned, the rows fetched and laid out with the block as
    /// the product's operand (0 in one process).
    pub exchange_seconds: f64,
    /// Across ranks, the parts of `exchange_seconds` (each the longest of a rank).
    pub exchange_parts: ExchangeParts,
    /// Across ranks, the rounds every rank took part in (rows fetched anew in each; 1 where
    /// every rank's remote rows fitted its memory at once; 0 in one process).
    pub rounds: usize,
    /// Across ranks, each rank's part of the iteration, in rank order (empty in one process).
    pub ranks: Vec<RankShare>,
}

impl Iteration {
    /// Across ranks, the shortest and the longest time a rank spent making and pruning its
    /// columns (the gap is what the cut at equal products left unbalanced); `None` in one
    /// process.
    pub fn rank_busy_span(&self) -> Option<(f64, f64)> {
        let busy = self.ranks.iter().map(|r| r.busy_seconds);
        let fastest = busy.clone().reduce(f64::min)?;
        Some((fastest, busy.fold(fastest, f64::max)))
    }
}

/// One rank's part of an iteration across ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RankShare {
    /// The columns of `M²` it made (its block's nodes).
    pub columns: u64,
    /// The intermediate products of its columns.
    pub products: u64,
    /// The entries of its columns before pruning.
    pub expanded: u64,
    /// The entries of its columns it kept.
    pub kept: u64,
    /// Its time making and pruning its columns.
    pub busy_seconds: f64,
    /// The bytes it received from other ranks.
    pub received_bytes: u64,
}

/// Where an iteration's time on other ranks' rows went, each part the longest of a rank (a
/// part includes waiting for the other ranks at its collectives).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExchangeParts {
    /// Every row's length gathered, and each column's products weighed by them.
    pub lengths: f64,
    /// The blocks cut again at equal products (rows moved between ranks).
    pub cut: f64,
    /// The rounds planned (the remote rows each needs found).
    pub plan: f64,
    /// The remote rows asked for, answered and received, the block laid in among them as the
    /// product's operand.
    pub fetch: f64,
    /// The round's rows of the block taken out (a round short of the whole block), and the
    /// operand laid out where nothing was exchanged.
    pub operand: f64,
}

/// The result of [`cluster`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MclResult {
    /// The clusters (node ids of the graph), largest first.
    pub clusters: Vec<Vec<u32>>,
    /// Iterations run.
    pub iterations: usize,
    /// Whether the chaos fell under the limit (else `max_iterations` ended the run).
    pub converged: bool,
    /// Attractors in the limit.
    pub attractors: usize,
    /// Node memberships beyond the first, before the overlap mode applied.
    pub overlap: usize,
    /// Nodes that reached no attractor (gathered in one cluster).
    pub missing: usize,
    /// Wall time from the start matrix to the clusters.
    pub seconds: f64,
    /// On the GPU engine, the most device memory (bytes of gmcl's memory pool) in use at once;
    /// 0 on the CPU.
    pub device_peak_bytes: u64,
    /// Of `seconds`, the time before the first iteration (the start matrix; on the GPU also
    /// the engine's setup and the upload) and after the last (the limit's interpretation; on
    /// the GPU also its download).
    pub setup_seconds: f64,
    /// See `setup_seconds`.
    pub finish_seconds: f64,
    /// Across ranks, the iterations' [`Iteration::exchange_seconds`] and
    /// [`Iteration::exchanged_bytes`] summed (0 in one process).
    pub exchange_seconds: f64,
    /// See `exchange_seconds`.
    pub exchanged_bytes: u64,
}

/// The graph MCL clusters, built from an edge list: only the vertices some edge touches (mcl
/// knows no others in label input), renumbered in order; symmetric, the larger weight kept for
/// a pair given twice (either way round), self loops dropped. Returns the graph and, for each
/// of its nodes, the vertex id it had in `el`. Negative weights are refused.
pub fn graph_from_edges<T: Scalar>(el: &EdgeList) -> Result<(Csr<T>, Vec<u32>)> {
    if el.nrows != el.ncols {
        return Err(Error::Invalid(format!(
            "cannot cluster a {} x {} matrix: it is not square",
            el.nrows, el.ncols
        )));
    }
    refuse_weights(el, &|i| i.to_string())?;
    let mut compact = el.clone();
    let ids = compact.compact_ids();
    let g = Csr::from_edges(
        &compact,
        &BuildOptions {
            symmetrize: true,
            drop_self_loops: true,
            duplicates: Duplicates::Max,
        },
    )?;
    Ok((g, ids))
}

/// [`graph_from_edges`] with mcl's weight transforms: `stream` (mcl's `-abc-tf` and
/// `--abc-neg-log10`) on each weight as read, before duplicates and the mirror merge (an
/// unweighted edge weighs 1); `matrix` (mcl's `-tf`) on the symmetric graph without loops,
/// before the loops are added. An edge whose weight becomes 0 is removed (its nodes stay).
/// A loop's weight is neither transformed nor checked: MCL replaces every loop, as mcl does.
/// `name` gives a vertex id's name in messages.
pub fn graph_from_edges_transformed<T: Scalar>(
    el: &EdgeList,
    stream: Option<&Transform>,
    matrix: Option<&Transform>,
    name: &dyn Fn(u32) -> String,
) -> Result<(Csr<T>, Vec<u32>)> {
    let transformed = match stream {
        Some(tf) => {
            let mut owned = el.clone();
            let mut w = owned
                .weights
                .take()
                .unwrap_or_else(|| vec![1.0; owned.edges.len()]);
            for (x, &(u, v)) in w.iter_mut().zip(&owned.edges) {
                if u != v {
                    *x = weight_after(tf, *x, &name(u), &name(v))?;
                }
            }
            owned.weights = Some(w);
            Some(owned)
        }
        None => None,
    };
    let el = transformed.as_ref().unwrap_or(el);
    refuse_weights(el, name)?;
    let (mut g, ids) = graph_from_edges::<T>(el)?;
    if let Some(tf) = matrix {
        transform_graph(&mut g, &ids, tf, name)?;
    }
    Ok((g, ids))
}

/// Fails on the first edge of `el` whose weight MCL cannot take, naming its ends by `name`
/// (a loop's weight is never used: MCL replaces every loop).
fn refuse_weights(el: &EdgeList, name: &dyn Fn(u32) -> String) -> Result<()> {
    let Some(w) = &el.weights else {
        return Ok(());
    };
    let bad = |(&x, &(u, v)): (&f64, &(u32, u32))| u != v && !(x >= 0.0 && x.is_finite());
    match w.iter().zip(&el.edges).position(bad) {
        Some(i) => Err(weight_refused(
            (&name(el.edges[i].0), &name(el.edges[i].1)),
            w[i],
        )),
        None => Ok(()),
    }
}

/// The error for an edge `(u, v)` (named as the input names them) whose weight MCL cannot take.
fn weight_refused((u, v): (&str, &str), w: f64) -> Error {
    Error::Invalid(format!(
        "edge ({u}, {v}) weighs {w}: MCL needs weights that are finite and not negative"
    ))
}

/// mcl's `-tf` on the weights of `g`, a graph as [`graph_from_edges`] or [`graph_from_stored`]
/// make it (`ids` gives each node's vertex id, `name` a vertex id's name in messages). A weight
/// the transform removes becomes a stored 0, which MCL reads as no edge (its nodes stay).
pub fn transform_graph<T: Scalar>(
    g: &mut Csr<T>,
    ids: &[u32],
    tf: &Transform,
    name: &dyn Fn(u32) -> String,
) -> Result<()> {
    for i in 0..g.nrows() {
        let range = g.row_ptr()[i] as usize..g.row_ptr()[i + 1] as usize;
        for k in range {
            let x = g.values()[k].to_f64();
            // A stored 0 is no edge in mcl: it never reaches -tf.
            if x != 0.0 {
                let j = g.col_idx()[k];
                let y = weight_after(tf, x, &name(ids[i]), &name(ids[j as usize]))?;
                g.values_mut()[k] = T::from_f64(y);
            }
        }
    }
    Ok(())
}

/// One weight through a transform: 0 for a removed edge, an error naming the edge otherwise.
fn weight_after(tf: &Transform, w: f64, u: &str, v: &str) -> Result<f64> {
    match tf.apply(w) {
        Ok(transform::Outcome::Weight(x)) => Ok(x),
        Ok(transform::Outcome::Removed) => Ok(0.0),
        Err(e) => Err(Error::Invalid(format!("edge ({u}, {v}): {e}"))),
    }
}

/// The intermediate products of the first expansion of `graph` (what `auto` weighs the run
/// by): the start matrix adds a loop to every node and is symmetric, so the products through
/// node `k` are `(degree(k) + 1)²`.
pub fn expansion_work<T: Scalar>(graph: &Csr<T>) -> u64 {
    graph
        .row_ptr()
        .windows(2)
        .map(|w| {
            let d = w[1] - w[0] + 1;
            d.saturating_mul(d)
        })
        .fold(0u64, u64::saturating_add)
}

/// The start of the process, transposed: `graph` (symmetric, no loops) with a loop on every node
/// weighing the largest weight of its row (1 when the row is empty or all zero) times
/// `loop_gain`, each row then divided by its sum.
pub fn start_matrix<T: Scalar>(graph: &Csr<T>, loop_gain: f64) -> Csr<T> {
    let n = graph.nrows();
    let mut row_ptr = Vec::with_capacity(n + 1);
    let mut cols = Vec::with_capacity(graph.nnz() + n);
    let mut vals = Vec::with_capacity(graph.nnz() + n);
    row_ptr.push(0u64);
    for i in 0..n {
        let (c, v) = graph.row(i);
        start_row(c, v, i, loop_gain, &mut cols, &mut vals);
        row_ptr.push(cols.len() as u64);
    }
    Csr::from_parts_unchecked(n, n, row_ptr, cols, vals)
}

/// Row `node` of the start matrix (see [`start_matrix`]) from the graph's row `(c, v)`,
/// appended to `cols` and `vals`. The distributed run makes its block of rows with it.
pub(crate) fn start_row<T: Scalar>(
    c: &[u32],
    v: &[T],
    node: usize,
    loop_gain: f64,
    cols: &mut Vec<u32>,
    vals: &mut Vec<T>,
) {
    let start = vals.len();
    let max = v.iter().fold(0.0f64, |m, x| m.max(x.to_f64()));
    let lp = T::from_f64(if max > 0.0 { max } else { 1.0 } * loop_gain);
    let at = c.partition_point(|&j| (j as usize) < node);
    cols.extend_from_slice(&c[..at]);
    vals.extend_from_slice(&v[..at]);
    cols.push(node as u32);
    vals.push(lp);
    cols.extend_from_slice(&c[at..]);
    vals.extend_from_slice(&v[at..]);
    inflate::normalise(&mut vals[start..]);
}

/// Bytes one entry of an MCL matrix takes: its column (`u32`) and its value.
fn entry_bytes<T>() -> u64 {
    4 + std::mem::size_of::<T>() as u64
}

/// The memory left for the next matrix while `m` is alive ([`io::limits::memory_left`]);
/// `None` where it cannot be told.
fn room_for_next<T: Scalar>(m: &Csr<T>) -> Option<u64> {
    let in_use = (m.nnz() as u64).saturating_mul(entry_bytes::<T>()) + 8 * m.nrows() as u64;
    crate::io::limits::memory_left(in_use)
}

/// Entries of `M²` per CPU batch: the size asked for, else [`CPU_BATCH_ENTRIES`] but no more
/// than a third of the memory left (`room`, bytes) holds, since the batch, its pruned copy and
/// the next matrix are alive together.
fn cpu_batch_budget(asked: Option<u64>, room: Option<u64>, entry: u64) -> u64 {
    asked.unwrap_or_else(|| {
        let by_memory = room.map_or(u64::MAX, |r| (r / (3 * entry)).max(1));
        CPU_BATCH_ENTRIES.min(by_memory)
    })
}

/// The error when the pruned matrix of an iteration outgrows the memory left.
/// `need`: the bytes the matrix kept so far takes where it is held (twice its entries' size on
/// the fused path, which copies it once more to assemble it).
fn next_matrix_too_large(kept: u64, need: u64, room: u64) -> Error {
    Error::Invalid(format!(
        "not enough memory for MCL's next matrix: it keeps more than {kept} entries, which need \
         {} where {} is left; prune harder (a lower -P, -S or -R, or a lower --scheme) or run \
         with more memory",
        crate::io::limits::human(need),
        crate::io::limits::human(room)
    ))
}

/// Rows `0..products.len()` cut into consecutive batches whose bounds `min(products, n)` sum
/// to at most `budget` (a row over it makes a batch alone).
fn batches(products: &[u64], n: u64, budget: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut acc) = (0usize, 0u64);
    for (i, &p) in products.iter().enumerate() {
        let p = p.min(n);
        if acc > 0 && acc + p > budget {
            out.push(start..i);
            start = i;
            acc = 0;
        }
        acc += p;
    }
    if start < products.len() {
        out.push(start..products.len());
    }
    out
}

/// One pruned and inflated group of rows.
struct Part<T> {
    lens: Vec<u32>,
    cols: Vec<u32>,
    vals: Vec<T>,
    chaos: f64,
}

impl<T: Scalar> Part<T> {
    fn with_rows(rows: usize) -> Self {
        Part {
            lens: Vec::with_capacity(rows),
            cols: Vec::new(),
            vals: Vec::new(),
            chaos: 0.0,
        }
    }

    /// Prunes and inflates the expanded column `(cols, vals)` of node `node` and appends it.
    #[allow(clippy::too_many_arguments)]
    fn push_column(
        &mut self,
        cols: &[u32],
        vals: &[T],
        node: u32,
        params: &PruneParams,
        cutoff: T,
        inflation: f64,
        scratch: &mut prune::Scratch<T>,
    ) {
        let start = self.vals.len();
        let r = prune::prune_column(
            cols,
            vals,
            node,
            params,
            cutoff,
            &mut self.cols,
            &mut self.vals,
            scratch,
        );
        self.chaos = self.chaos.max(r.chaos);
        if !inflate::inflate(&mut self.vals[start..], inflation) {
            self.cols.truncate(start);
            self.vals.truncate(start);
        }
        self.lens.push((self.vals.len() - start) as u32);
    }
}

/// Prunes and inflates rows `rows` of the batch `c` (whose row 0 is row `first` of `M²ᵀ`).
fn prune_rows<T: Scalar>(
    c: &Csr<T>,
    rows: Range<usize>,
    first: usize,
    params: &PruneParams,
    inflation: f64,
) -> Part<T> {
    let cutoff = T::from_f64(params.cutoff());
    let mut part = Part::with_rows(rows.len());
    let mut scratch = prune::Scratch::default();
    for li in rows {
        let (cols, vals) = c.row(li);
        part.push_column(
            cols,
            vals,
            (first + li) as u32,
            params,
            cutoff,
            inflation,
            &mut scratch,
        );
    }
    part
}

/// One MCL iteration on the transposed matrix `m`: expansion in row batches, each pruned and
/// inflated as it is made. Returns the next matrix and the iteration's figures (`index` 0).
/// On the GPU engine the iteration runs on the device ([`gpu`]).
pub fn iterate<T: Scalar>(
    m: &Csr<T>,
    params: &MclParams,
    inflation: f64,
) -> Result<(Csr<T>, Iteration)> {
    iterate_watched(m, params, inflation, progress::unwatched())
}

/// [`iterate`], advancing `progress` as columns are done.
fn iterate_watched<T: Scalar>(
    m: &Csr<T>,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(Csr<T>, Iteration)> {
    let engine = spgemm::resolve(params.engine).0;
    if engine == EngineKind::Gpu {
        return gpu::iterate_host(m, params, inflation, progress);
    }
    expand_prune(m, m, 0, params, inflation, progress)
}

/// One iteration's columns on the CPU engine: row `i` of `a·b`, pruned and inflated as node
/// `first + i`, for every row of `a`. In one process `a` and `b` are both `Mᵀ`; across ranks
/// `a` is a rank's rows of `Mᵀ` and `b` holds, at their nodes, the rows of `Mᵀ` they name (the
/// others empty), so every column is made by the same code, in the same order of `k`.
pub(crate) fn expand_prune<T: Scalar>(
    a: &Csr<T>,
    b: &Csr<T>,
    first: usize,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(Csr<T>, Iteration)> {
    if params.fused && cpu::applies(a, b) {
        return cpu::iterate(a, b, first, params, inflation, progress);
    }
    let start = Instant::now();
    let n = a.nrows();
    let mut it = Iteration::default();
    let mut row_ptr: Vec<u64> = Vec::with_capacity(n + 1);
    row_ptr.push(0);
    let mut cols: Vec<u32> = Vec::new();
    let mut vals: Vec<T> = Vec::new();
    let threads = rayon::current_num_threads().max(1);
    // Prunes and inflates one batch of M²'s rows (row 0 of `c` is row `first`) and appends it;
    // returns the entries kept so far.
    let mut absorb = |first: usize, c: Csr<T>| {
        it.expanded += c.nnz() as u64;
        it.batches += 1;
        // Groups of rows of about equal size for the threads, kept in order.
        let rows = c.nrows();
        let group = (rows / (threads * 16)).clamp(16, 4096);
        let groups: Vec<Range<usize>> = (0..rows)
            .step_by(group)
            .map(|s| s..(s + group).min(rows))
            .collect();
        let parts: Vec<Part<T>> = groups
            .into_par_iter()
            .map(|g| prune_rows(&c, g, first, &params.prune, inflation))
            .collect();
        drop(c);
        for p in parts {
            it.chaos = it.chaos.max(p.chaos);
            let mut at = *row_ptr.last().unwrap_or(&0);
            for l in p.lens {
                at += l as u64;
                row_ptr.push(at);
            }
            cols.extend_from_slice(&p.cols);
            vals.extend_from_slice(&p.vals);
        }
        vals.len() as u64
    };
    let (mut products, mut expand_seconds) = (0u64, 0f64);
    let per_row = spgemm::intermediate_products_per_row(a, b)?;
    progress.set_totals(n as u64, per_row.iter().sum());
    let entry = entry_bytes::<T>();
    let room = room_for_next(a);
    let budget = cpu_batch_budget(params.batch_entries, room, entry);
    for batch in batches(&per_row, b.ncols() as u64, budget) {
        crate::interrupt::check()?;
        let t = Instant::now();
        let c = spgemm::cpu::rows::marked_product(a.view(), b.view(), batch.clone(), &per_row);
        let batch_products: u64 = per_row[batch.clone()].iter().sum();
        products += batch_products;
        expand_seconds += t.elapsed().as_secs_f64();
        let kept = absorb(first + batch.start, c);
        progress.advance(batch.len() as u64, batch_products);
        // The next matrix grows batch by batch: it stops where it would not fit.
        if let Some(room) = room.filter(|&r| kept.saturating_mul(entry) > r) {
            return Err(next_matrix_too_large(
                kept,
                kept.saturating_mul(entry),
                room,
            ));
        }
    }
    it.products += products;
    it.expand_seconds += expand_seconds;
    it.kept = vals.len() as u64;
    it.seconds = start.elapsed().as_secs_f64();
    let next = Csr::from_parts_unchecked(n, b.ncols(), row_ptr, cols, vals);
    Ok((next, it))
}

/// Iterates `step` from `m` until the chaos falls under the limit or `max_iterations` are
/// done, growing the inflation after 40 iterations as mcl does. Returns the last matrix, the
/// iterations run and whether the chaos fell under the limit. `interrupted` is asked before
/// each iteration (across ranks, every rank must get the same answer).
pub(crate) fn run_iterations<M>(
    mut m: M,
    params: &MclParams,
    observer: &mut dyn Observer,
    interrupted: &dyn Fn() -> Result<()>,
    mut step: impl FnMut(M, f64, &IterationProgress) -> Result<(M, Iteration)>,
) -> Result<(M, usize, bool)> {
    let mut inflation = params.inflation;
    let mut iterations = 0;
    while iterations < params.max_iterations {
        interrupted()?;
        let progress = observer.within().unwrap_or(progress::unwatched());
        progress.begin(iterations + 1);
        let (next, mut it) = step(m, inflation, progress)?;
        m = next;
        iterations += 1;
        it.index = iterations;
        observer.iteration(&it);
        if iterations >= 40 {
            inflation *= 1.001;
        }
        if it.chaos < params.chaos_limit {
            return Ok((m, iterations, true));
        }
    }
    Ok((m, iterations, false))
}

/// Clusters `graph` (symmetric, without self loops: see [`graph_from_edges`]). `progress` sees
/// every iteration as it ends.
pub fn cluster<T: Scalar>(
    graph: &Csr<T>,
    params: &MclParams,
    progress: &mut dyn FnMut(&Iteration),
) -> Result<MclResult> {
    cluster_observed(graph, params, &mut |it: &Iteration| progress(it))
}

/// [`cluster`], with an observer that may also follow each iteration while it runs
/// ([`Observer::within`]: counters of the columns done, for a progress bar).
pub fn cluster_observed<T: Scalar>(
    graph: &Csr<T>,
    params: &MclParams,
    observer: &mut dyn Observer,
) -> Result<MclResult> {
    params.validate()?;
    if graph.nrows() != graph.ncols() {
        return Err(Error::Invalid(format!(
            "cannot cluster a {} x {} matrix: it is not square",
            graph.nrows(),
            graph.ncols()
        )));
    }
    let start = Instant::now();
    // `Auto` is decided once, here: the whole run then stays on one engine.
    // The work is weighed only where `auto` has a choice to make.
    let work = (params.engine == EngineKind::Auto)
        .then(|| crate::engine::Work::MclExpansion(expansion_work(graph)));
    let params = &MclParams {
        engine: crate::engine::resolve(params.engine, work, &mut |_| {}),
        ..params.clone()
    };
    let m = start_matrix(graph, params.loop_gain);
    let mut device_peak_bytes = 0;
    let mut timed = Timed {
        start,
        setup_seconds: 0.0,
        last_end: 0.0,
        observer,
    };
    let (m, iterations, converged) = if params.engine == EngineKind::Gpu {
        // The matrix stays on the device from the start matrix to the limit.
        let engine = gpu::engine(params)?;
        let device = engine.gpu();
        device.reset_pool_peak()?;
        let dm = gpu::DeviceMatrix::upload(&engine, &m)?;
        drop(m);
        let (dm, iterations, converged) = run_iterations(
            dm,
            params,
            &mut timed,
            &crate::interrupt::check,
            |dm, inflation, progress| gpu::iterate(&engine, dm, params, inflation, progress),
        )?;
        let m = dm.m.download(device)?;
        device_peak_bytes = device.pool_peak()?;
        (m, iterations, converged)
    } else {
        run_iterations(
            m,
            params,
            &mut timed,
            &crate::interrupt::check,
            |m, inflation, progress| iterate_watched(&m, params, inflation, progress),
        )?
    };
    let Timed {
        setup_seconds,
        last_end,
        ..
    } = timed;
    let interp = interpret::interpret(&m, params.overlap);
    Ok(MclResult {
        clusters: interp.clusters,
        iterations,
        converged,
        attractors: interp.attractors,
        overlap: interp.overlap,
        missing: interp.missing,
        seconds: start.elapsed().as_secs_f64(),
        device_peak_bytes,
        setup_seconds,
        finish_seconds: start.elapsed().as_secs_f64() - last_end.max(setup_seconds),
        exchange_seconds: 0.0,
        exchanged_bytes: 0,
    })
}

/// The caller's observer, and when the first iteration began and the last ended.
pub(crate) struct Timed<'a> {
    pub(crate) start: Instant,
    pub(crate) setup_seconds: f64,
    pub(crate) last_end: f64,
    pub(crate) observer: &'a mut dyn Observer,
}

impl Observer for Timed<'_> {
    fn iteration(&mut self, it: &Iteration) {
        self.last_end = self.start.elapsed().as_secs_f64();
        if it.index == 1 {
            self.setup_seconds = self.last_end - it.seconds;
        }
        self.observer.iteration(it)
    }

    fn within(&self) -> Option<&IterationProgress> {
        self.observer.within()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mcl's defaults on the CPU engine (the default engine, `Auto`, takes a GPU when there is
    /// one, and these tests are about the CPU paths).
    pub(in crate::mcl) fn cpu_params() -> MclParams {
        MclParams {
            engine: EngineKind::Cpu,
            ..Default::default()
        }
    }

    #[test]
    fn stream_transforms_come_before_duplicates_merge_and_matrix_ones_after() {
        // (0, 1) twice: 0.5 and 3; the larger wins when the mirror is merged.
        let el = EdgeList::square(3, vec![(0, 1), (1, 0), (1, 2)], Some(vec![0.5, 3.0, 2.0]));
        let lq1 = Transform::parse("lq(1)").unwrap();
        let name = |i: u32| i.to_string();
        let (g, _) = graph_from_edges_transformed::<f64>(&el, Some(&lq1), None, &name).unwrap();
        assert_eq!(g.row(0).1, &[0.5]);
        let (g, _) = graph_from_edges_transformed::<f64>(&el, None, Some(&lq1), &name).unwrap();
        // Removed edges weigh 0: their nodes stay, as mcl keeps the labels.
        assert_eq!(g.row(0).1, &[0.0]);
        assert_eq!(g.row(1).1, &[0.0, 0.0]);
        // -tf never sees an edge that weighs 0 (mcl stores none): add(1) leaves it 0.
        let zero = EdgeList::square(2, vec![(0, 1)], Some(vec![0.0]));
        let add = Transform::parse("add(1)").unwrap();
        let (g, _) = graph_from_edges_transformed::<f64>(&zero, None, Some(&add), &name).unwrap();
        assert_eq!(g.row(0).1, &[0.0]);
        // An unweighted edge weighs 1 for the stream transform; errors name the edge.
        let plain = EdgeList::square(2, vec![(0, 1)], None);
        let (g, _) = graph_from_edges_transformed::<f64>(&plain, Some(&add), None, &name).unwrap();
        assert_eq!(g.row(0).1, &[2.0]);
        let neg = Transform::parse("add(-5)").unwrap();
        let e = graph_from_edges_transformed::<f64>(&plain, Some(&neg), None, &name).unwrap_err();
        assert!(e.to_string().contains("edge (0, 1)"), "{e}");
    }

    fn two_cliques(k: u32) -> EdgeList {
        let mut e = Vec::new();
        for base in [0, k] {
            for i in 0..k {
                for j in i + 1..k {
                    e.push((base + i, base + j));
                }
            }
        }
        e.push((k - 1, k));
        EdgeList::square(2 * k as usize, e, None)
    }

    #[test]
    fn start_matrix_adds_max_loops_and_normalises() {
        let el = EdgeList::square(3, vec![(0, 1), (1, 2), (1, 1)], Some(vec![2.0, 4.0, 9.0]));
        let (g, ids) = graph_from_edges::<f64>(&el).unwrap();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(
            g.to_dense(),
            vec![0.0, 2.0, 0.0, 2.0, 0.0, 4.0, 0.0, 4.0, 0.0]
        );
        let m = start_matrix(&g, 1.0);
        // Row 1: loop 4 (the max), neighbours 2 and 4: sum 10.
        assert_eq!(m.row(1).0, &[0, 1, 2]);
        assert_eq!(m.row(1).1, &[0.2, 0.4, 0.4]);
        assert_eq!(m.row(0).1, &[0.5, 0.5]);
        let m2 = start_matrix(&g, 2.0);
        assert_eq!(m2.row(0).1, &[4.0 / 6.0, 2.0 / 6.0]);
    }

    #[test]
    fn isolated_vertices_are_left_out() {
        let el = EdgeList::square(6, vec![(1, 4), (4, 5)], None);
        let (g, ids) = graph_from_edges::<f32>(&el).unwrap();
        assert_eq!(ids, vec![1, 4, 5]);
        assert_eq!(g.nrows(), 3);
        let bad = EdgeList::square(2, vec![(0, 1)], Some(vec![-1.0]));
        assert!(graph_from_edges::<f32>(&bad).is_err());
    }

    #[test]
    fn two_cliques_give_two_clusters() {
        let (g, _) = graph_from_edges::<f32>(&two_cliques(6)).unwrap();
        let mut seen = 0;
        let r = cluster(&g, &cpu_params(), &mut |it| {
            seen += 1;
            assert_eq!(it.index, seen);
        })
        .unwrap();
        assert!(r.converged);
        assert_eq!(r.iterations, seen);
        assert_eq!(
            r.clusters,
            vec![vec![0, 1, 2, 3, 4, 5], vec![6, 7, 8, 9, 10, 11]]
        );
    }

    #[test]
    fn an_observer_sees_every_column_of_each_iteration_done() {
        struct Counting {
            counters: IterationProgress,
            seen: Vec<(usize, ProgressReading)>,
        }
        impl Observer for Counting {
            fn iteration(&mut self, it: &Iteration) {
                self.seen.push((it.index, self.counters.read()));
            }
            fn within(&self) -> Option<&IterationProgress> {
                Some(&self.counters)
            }
        }
        let (g, _) = graph_from_edges::<f64>(&two_cliques(7)).unwrap();
        let n = g.nrows() as u64;
        for fused in [true, false] {
            let params = MclParams {
                fused,
                batch_entries: Some(20),
                ..cpu_params()
            };
            let mut o = Counting {
                counters: IterationProgress::default(),
                seen: Vec::new(),
            };
            let r = cluster_observed(&g, &params, &mut o).unwrap();
            assert_eq!(o.seen.len(), r.iterations);
            for (index, reading) in o.seen {
                assert_eq!(reading.iteration, index);
                assert_eq!((reading.columns, reading.columns_total), (n, n));
                assert!(reading.work > 0 && reading.work == reading.work_total);
            }
        }
        // Twelve nodes of degree 6, the two ends of the bridge of degree 7.
        assert_eq!(expansion_work(&g), 12 * 7 * 7 + 2 * 8 * 8);
    }

    #[test]
    fn batches_do_not_change_the_result() {
        let (g, _) = graph_from_edges::<f64>(&two_cliques(7)).unwrap();
        let whole = cluster(&g, &cpu_params(), &mut |_| {}).unwrap();
        let p = MclParams {
            batch_entries: Some(10),
            ..cpu_params()
        };
        let small = cluster(&g, &p, &mut |_| {}).unwrap();
        assert_eq!(
            whole,
            MclResult {
                seconds: whole.seconds,
                setup_seconds: whole.setup_seconds,
                finish_seconds: whole.finish_seconds,
                ..small
            }
        );
        assert_eq!(batches(&[5, 5, 20, 1, 1], 100, 10), vec![0..2, 2..3, 3..5]);
        // Rows count at most n entries.
        assert_eq!(batches(&[5, 50, 20, 1, 1], 5, 10), vec![0..2, 2..5]);
        assert_eq!(batches(&[], 5, 10), Vec::<Range<usize>>::new());
    }

    #[test]
    fn cpu_batches_are_bounded_by_the_memory_left() {
        // Asked for: as asked. Else the default, or a third of the room in entries.
        assert_eq!(cpu_batch_budget(Some(7), Some(1), 8), 7);
        assert_eq!(cpu_batch_budget(None, None, 8), CPU_BATCH_ENTRIES);
        assert_eq!(cpu_batch_budget(None, Some(u64::MAX), 8), CPU_BATCH_ENTRIES);
        assert_eq!(cpu_batch_budget(None, Some(2400), 8), 100);
        assert_eq!(cpu_batch_budget(None, Some(0), 8), 1);
    }

    #[test]
    fn parameters_are_checked() {
        let (g, _) = graph_from_edges::<f32>(&two_cliques(3)).unwrap();
        for p in [
            MclParams {
                inflation: 0.0,
                ..cpu_params()
            },
            MclParams {
                inflation: 30.5,
                ..cpu_params()
            },
            MclParams {
                loop_gain: -1.0,
                ..cpu_params()
            },
            MclParams {
                batch_entries: Some(0),
                ..cpu_params()
            },
        ] {
            assert!(cluster(&g, &p, &mut |_| {}).is_err());
        }
        let p = MclParams {
            max_iterations: 0,
            ..cpu_params()
        };
        let r = cluster(&g, &p, &mut |_| {}).unwrap();
        assert_eq!((r.iterations, r.converged), (0, false));
    }
}
