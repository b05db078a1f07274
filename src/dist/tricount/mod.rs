//! Triangle counting across ranks, on 1D blocks of rows ([`RowBlock`]).
//!
//! Every rank learns every vertex's degree (one gather of the blocks' degrees) and orients each
//! edge from its end of lower `(degree, id)` to its end of higher `(degree, id)`, as the
//! single-process count orders vertices by degree: `U(a)` is the part of `a`'s row above `a`.
//! A triangle `a < b < c` is counted once, by the owner of `a`, as `c ∈ U(a) ∩ U(b)` for the
//! edge `a → b`. Rows `U(b)` of other blocks are fetched in rounds: each rank asks, per round,
//! for rows whose degrees (an upper bound on their lengths) sum to at most `stage_entries`, so
//! what a rank receives in a round is bounded, and every rank answers every request in the same
//! round. The rounds end when no rank has rows left to ask for.
//!
//! Per-vertex counts are kept for every vertex on every rank and summed across ranks at the end
//! (a vertex's triangles are found on the ranks owning their lowest vertex).
//!
//! Where every rank counts on its GPU and all of U fits the exchange's bound and every GPU, the
//! ranks count with the one-process kernels instead ([`gpu_blocks`]): every rank holds all of
//! U (summed across the ranks from the blocks' rows) and counts the triangles whose middle
//! vertex is one of its pivots (dealt out by degree rank, so evenly whatever the blocks hold).

mod gpu_blocks;
use gpu_blocks::Fused;

use super::input::{parsed_row_block, row_block_checked_by, RowBlock};
use super::labels::LabelShare;
use super::{agree, asked_entries_bound, distinct_outside, Blocks, Comm, Step};
use crate::engine::Work;
use crate::error::{Error, Result};
use crate::io::{Format, SymmetryCheck};
use crate::spgemm::EngineKind;
use crate::tricount::gpu_pairs::{Other, PairCounter, Rows};
use crate::tricount::Method;
use rayon::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// The exchange a count takes where `asked`: `auto` becomes MPI, any other choice stands. The
/// count gathers all of U on every rank once; between the GPUs of one host the gathers go GPU to
/// GPU by CUDA IPC ([`Options::gpu_reads`]), which needs no start, unlike NCCL (its kernels
/// loaded, its connections made, its end), and elsewhere through host memory.
pub fn exchange_for(asked: super::Exchange) -> super::Exchange {
    match asked {
        super::Exchange::Auto => super::Exchange::Mpi,
        other => other,
    }
}

/// What a distributed count needs besides the communicator and the input.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Count the triangles through each vertex too.
    pub per_vertex: bool,
    /// At most this many parsed edges a rank sends in one round of the redistribution.
    pub stage_edges: usize,
    /// At most this many row entries a rank receives in one round of the row exchange (and
    /// never more than one exchange carries: [`super::asked_entries_bound`]; the default).
    pub stage_entries: usize,
    /// The engine of each rank's intersections: `Cpu`, `Gpu` (the rank's GPU; several ranks
    /// may share one) or `Auto` (the GPU when the rank's share of the edges makes it pay and a
    /// GPU is usable).
    pub engine: EngineKind,
    /// How the ranks count: `Fused` (the one-process GPU kernels on every rank's GPU; an error
    /// where a rank is not on its GPU or the rows do not fit), `Merge` (rows intersected in
    /// rounds) or `Auto` (fused where it can run, else merge). `Spgemm` is refused.
    pub method: Method,
    /// The one-process kernels' switches where every rank counts on its GPU: poisoned outputs,
    /// and each rank's GPU phases on stderr.
    pub gpu: crate::tricount::gpu::TriangleTuning,
    /// Where every rank counts on its GPU, the ranks share one host and NCCL does not join
    /// their GPUs: gather the blocks' rows straight from the other ranks' GPUs (CUDA IPC)
    /// rather than through host memory. Falls back to host memory where a rank cannot.
    pub gpu_reads: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            per_vertex: false,
            stage_edges: 1 << 24,
            // As many as one exchange carries: every round uploads its rows and counts apart.
            stage_entries: usize::MAX,
            engine: EngineKind::Cpu,
            method: Method::Auto,
            gpu: Default::default(),
            gpu_reads: true,
        }
    }
}

/// The result of a distributed count, the same on every rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Counted {
    /// Triangles in the graph.
    pub triangles: u64,
    /// Vertices (largest id + 1).
    pub vertices: u64,
    /// Undirected edges of the simple graph.
    pub edges: u64,
    /// The triangles through each vertex, when asked for.
    pub per_vertex: Option<Vec<u64>>,
    /// Reading the file and building the row blocks.
    pub load_seconds: f64,
    /// Orienting and counting, remote rows fetched included.
    pub seconds: f64,
    /// Rounds of the row exchange.
    pub rounds: u64,
    /// The longest a rank spent fetching other blocks' rows (0 on one rank).
    pub exchange_seconds: f64,
    /// The bytes the ranks received from one another in the row exchange.
    pub exchanged_bytes: u64,
    /// Whether the rows went GPU to GPU by CUDA IPC ([`Options::gpu_reads`]).
    pub gpu_reads: bool,
    /// How the ranks counted: [`Method::Fused`] where every rank ran the one-process kernels
    /// on its block on its GPU, else [`Method::Merge`] (rows intersected in rounds).
    pub method: Method,
    /// The steps of a count with the one-process kernels ([`Method::Fused`]; none otherwise):
    /// "upload" (the block to the GPU), "rank" (every vertex's degree summed across the ranks,
    /// the vertices ranked by degree on rank 0's GPU, the ranks summed), "orient" (the block's
    /// rows oriented), "exchange" (the rows' lengths and then all of the oriented graph summed
    /// across the ranks), "check" (only for blocks read from an archive unchecked: each entry
    /// of U looked for mirrored in the rows as read), "lay out" (the in-edges of the rank's
    /// pivots), "count".
    pub steps: Vec<Step>,
    /// The engine this rank counted on.
    pub engine: EngineKind,
    /// Why this rank runs on the CPU engine under `auto` when a GPU was wanted (no usable GPU).
    pub notice: Option<String>,
    /// This rank's share of the vertices' names (SNAP ids, `.abc` labels), for the writers.
    pub labels: Option<LabelShare>,
}

/// Counts the triangles of the simple undirected graph of `path`, every rank reading its part.
/// Collective: every rank returns the same result, or the same error.
pub fn count_file(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    opts: &Options,
) -> Result<Counted> {
    let start = Instant::now();
    // Where the ranks may count on their GPUs, those check an archive's blocks for symmetry
    // after their upload, instead of the hosts before it.
    let check = match opts.engine != EngineKind::Cpu && opts.method != Method::Merge {
        true => SymmetryCheck::Caller,
        false => SymmetryCheck::Load,
    };
    let (mut block, checked) = row_block_checked_by(comm, path, format, opts.stage_edges, check)?;
    let mut load_seconds = start.elapsed().as_secs_f64();
    let mut c = match count_rows(comm, &block, opts, checked)? {
        Some(c) => c,
        None => {
            // Not a simple graph's rows: read the file again as any other, which makes one.
            drop(block);
            let again = Instant::now();
            block = parsed_row_block(comm, path, format, opts.stage_edges)?;
            load_seconds += again.elapsed().as_secs_f64();
            count_block(comm, &block, opts)?
        }
    };
    c.load_seconds = load_seconds;
    c.labels = block.labels;
    Ok(c)
}

/// Counts the triangles of a graph given as every rank's block of rows. Collective.
pub fn count_block(comm: &dyn Comm, block: &RowBlock, opts: &Options) -> Result<Counted> {
    count_rows(comm, block, opts, true)?.ok_or_else(|| {
        Error::Invalid("blocks known symmetric were found not to be: please report this".into())
    })
}

/// [`count_block`] of blocks known to be a simple graph's where `checked`, else of blocks whose
/// rows strictly increase with no diagonal entry, checked first (on the ranks' GPUs with the
/// fused count, else on the hosts): `None` where they are not symmetric. Collective.
fn count_rows(
    comm: &dyn Comm,
    block: &RowBlock,
    opts: &Options,
    checked: bool,
) -> Result<Option<Counted>> {
    let start = Instant::now();
    let blocks = &block.blocks;
    let n = blocks.n;
    let first = block.first();
    let (engine, mut notice) = pick_engine(comm, block, opts.engine);

    if opts.method == Method::Spgemm {
        return Err(Error::Invalid(
            "--method spgemm does not run across MPI ranks: use auto, merge or fused".into(),
        ));
    }
    let mut exchange = Exchange::default();
    // Every rank on its GPU: the one-process kernels on each rank's block, where it fits.
    let mut elsewhere = [u64::from(engine != EngineKind::Gpu)];
    comm.max_u64(&mut elsewhere);
    if opts.method == Method::Fused && elsewhere[0] != 0 {
        return Err(Error::EngineUnavailable(
            "--method fused across ranks runs on every rank's GPU, and a rank counts on the \
             CPU: use --engine gpu on a GPU machine, or --method merge"
                .into(),
        ));
    }
    // Blocks taken unchecked are checked on the hosts where the fused count does not check them.
    let host_check = |comm: &dyn Comm| -> Result<bool> {
        Ok(checked || crate::dist::stored::is_simple(comm, block, opts.stage_edges)?)
    };
    let fused =
        match (elsewhere[0], opts.method) {
            (0, Method::Auto | Method::Fused) => {
                let gpu = agree(comm, rank_gpu())?;
                let b = gpu_blocks::Block {
                    ptr: &block.ptr,
                    adj: &block.adj,
                    first,
                    n,
                };
                match gpu_blocks::count(comm, gpu, &b, opts, &mut exchange, !checked)? {
                    Fused::Counted(c) => Some(c),
                    Fused::NotSymmetric => return Ok(None),
                    Fused::TooLarge if !host_check(comm)? => return Ok(None),
                    Fused::TooLarge if opts.method == Method::Fused => return Err(Error::Invalid(
                        "--method fused: the oriented graph does not fit one exchange and every \
                         rank's GPU memory; use --method merge (rows fetched in rounds)"
                            .into(),
                    )),
                    Fused::TooLarge => None,
                }
            }
            _ if !host_check(comm)? => return Ok(None),
            _ => None,
        };
    let method = match fused {
        Some(_) => Method::Fused,
        None => Method::Merge,
    };
    let gpu_reads = fused.as_ref().is_some_and(|c| c.gpu_reads);
    if let Some(why) = fused.as_ref().and_then(|c| c.no_gpu_reads.as_ref()) {
        notice.get_or_insert_with(|| {
            format!(
                "the ranks' GPUs cannot read each other's memory ({why}); the rows went \
                 through host memory"
            )
        });
    }
    let (total, by_vertex, rounds, steps) = match fused {
        Some(c) => (c.triangles, c.per_vertex, c.rounds, c.steps),
        None => {
            let degree = gathered_degrees(comm, block);
            let up = Upper::of(block, &degree);
            let budget = opts.stage_entries.clamp(1, asked_entries_bound(comm, 1)) as u64;
            let plan = Rounds {
                comm,
                blocks,
                degree: &degree,
                budget,
                up: &up,
                first,
            };
            let (total, by_vertex, rounds) = match engine {
                EngineKind::Gpu => count_on_gpu(&plan, n, opts.per_vertex, &mut exchange)?,
                _ => {
                    let edges = Edges::of(&up, first);
                    count_on_cpu(&plan, &edges, n, opts.per_vertex, &mut exchange)?
                }
            };
            (total, by_vertex, rounds, Vec::new())
        }
    };
    let steps = super::timed_steps(comm, &steps);

    let mut sums = [total, block.adj.len() as u64, exchange.bytes];
    comm.sum_u64(&mut sums);
    let mut longest = [exchange.seconds];
    comm.max_f64(&mut longest);
    let per_vertex = match by_vertex {
        Some(mut c) => {
            comm.sum_u64(&mut c);
            Some(c)
        }
        None => None,
    };
    Ok(Some(Counted {
        triangles: sums[0],
        vertices: n as u64,
        edges: sums[1] / 2,
        per_vertex,
        load_seconds: 0.0,
        seconds: start.elapsed().as_secs_f64(),
        rounds,
        exchange_seconds: longest[0],
        exchanged_bytes: sums[2],
        gpu_reads,
        method,
        steps,
        engine,
        notice,
        labels: None,
    }))
}

/// Every vertex's degree, the blocks' gathered.
fn gathered_degrees(comm: &dyn Comm, block: &RowBlock) -> Vec<u32> {
    let degrees: Vec<u32> = (0..block.rows())
        .into_par_iter()
        .map(|i| block.row(i).len() as u32)
        .collect();
    comm.all_gather_u32(&degrees).0
}

/// What a count's row exchange took: the time this rank spent in it, the bytes it received.
#[derive(Default)]
struct Exchange {
    seconds: f64,
    bytes: u64,
}

/// The row exchange of a count: other blocks' rows `U(b)`, fetched in rounds of at most
/// `budget` entries (by degree, an upper bound on a row's length), each rank answering from its
/// rows `up` (row `i` is vertex `first + i`).
struct Rounds<'a> {
    comm: &'a dyn Comm,
    blocks: &'a Blocks,
    degree: &'a [u32],
    budget: u64,
    up: &'a Upper,
    first: usize,
}

impl Rounds<'_> {
    /// Fetches the rows of `needed` (sorted ids of other blocks) in rounds and hands each
    /// round's rows (with their ids) to `count`. Collective: every rank takes part in as many rounds as
    /// the rank needing most, and an error of `count` (or an interrupt) on any rank is every
    /// rank's. Returns the rounds.
    fn run(
        &self,
        needed: &[u32],
        exchange: &mut Exchange,
        mut count: impl FnMut(Rows<'_>) -> Result<()>,
    ) -> Result<u64> {
        let degree = self.degree;
        let batches = cut_batches(needed, |b| u64::from(degree[b as usize]), self.budget);
        let mut rounds = [batches.len() as u64];
        self.comm.max_u64(&mut rounds);
        for round in 0..rounds[0] as usize {
            let asked = batches.get(round).map_or(&[][..], |r| &needed[r.clone()]);
            let t = Instant::now();
            let (ptr, idx, received) = fetch_rows(self.comm, self.blocks, asked, |b| {
                own_row(self.up, self.first, b)
            });
            exchange.seconds += t.elapsed().as_secs_f64();
            exchange.bytes += received;
            let rows = Rows {
                ptr: &ptr,
                idx: &idx,
                ids: asked,
            };
            let counted = count(rows);
            agree(self.comm, counted.and_then(|()| crate::interrupt::check()))?;
        }
        Ok(rounds[0])
    }
}

/// The row `U(b)` of `up` (row `i` is vertex `first + i`), empty for a vertex of another block.
fn own_row(up: &Upper, first: usize, b: u32) -> &[u32] {
    (b as usize)
        .checked_sub(first)
        .filter(|&i| i < up.rows())
        .map_or(&[][..], |i| up.row(i))
}

/// A block's edges `a → b` split for counting: for row `i`, where in `U(a)` (sorted by id) the
/// run of `b` in the block starts and how long it is; the other edges as pairs `(b, a)` sorted
/// by `b`; and the distinct remote `b`, increasing.
struct Edges {
    local: Vec<(u32, u32)>,
    remote: Vec<(u32, u32)>,
    needed: Vec<u32>,
}

impl Edges {
    fn of(up: &Upper, first: usize) -> Edges {
        let end = first + up.rows();
        let local: Vec<(u32, u32)> = (0..up.rows())
            .into_par_iter()
            .map(|i| {
                let row = up.row(i);
                let lo = row.partition_point(|&b| (b as usize) < first);
                (
                    lo as u32,
                    row[lo..].partition_point(|&b| (b as usize) < end) as u32,
                )
            })
            .collect();
        let mut remote: Vec<(u32, u32)> = fill_by_rows(
            &row_chunks(&up.ptr),
            |i| up.row(i).len() - local[i].1 as usize,
            |i, out| {
                let (row, lo, len) = (up.row(i), local[i].0 as usize, local[i].1 as usize);
                let a = (first + i) as u32;
                let outside = row[..lo].iter().chain(&row[lo + len..]);
                for (o, &b) in out.iter_mut().zip(outside) {
                    *o = (b, a);
                }
            },
        );
        remote.par_sort_unstable();
        let mut needed: Vec<u32> = remote.iter().map(|&(b, _)| b).collect();
        needed.dedup();
        Edges {
            local,
            remote,
            needed,
        }
    }

    /// Row `i`'s `b` in the block.
    fn local_of<'u>(&self, up: &'u Upper, i: usize) -> &'u [u32] {
        let (lo, len) = (self.local[i].0 as usize, self.local[i].1 as usize);
        &up.row(i)[lo..lo + len]
    }

    /// The remote edges into the rows `asked` (the round after the one that ended at
    /// `*next`, both sorted by `b`) as pairs `(a, b)` sorted by `a`; moves `*next` past them.
    fn round_pairs(&self, next: &mut usize, asked: &[u32]) -> Vec<(u32, u32)> {
        let rest = &self.remote[*next..];
        let end = rest.partition_point(|&(b, _)| asked.last().is_some_and(|&l| b <= l));
        let mut pairs: Vec<(u32, u32)> = rest[..end].par_iter().map(|&(b, a)| (a, b)).collect();
        *next += end;
        pairs.par_sort_unstable();
        pairs
    }
}

/// The GPU half: the rank's rows on its GPU, the edges into its own rows counted at once, then
/// each round's fetched rows uploaded and the edges into them counted (`gpu_pairs`: no pair is
/// listed; the remote ids come from a bitmap of the block's `U`). Returns the rank's triangles,
/// its per-vertex counts when asked for, and the rounds.
fn count_on_gpu(
    r: &Rounds<'_>,
    n: usize,
    per_vertex: bool,
    exchange: &mut Exchange,
) -> Result<(u64, Option<Vec<u64>>, u64)> {
    let made = own_rows_on_gpu(r.up, r.first, n, per_vertex)
        .and_then(|mut g| g.count(Other::Own).map(|()| g));
    let mut g = agree(r.comm, made)?;
    agree(r.comm, crate::interrupt::check())?;
    let needed = distinct_outside(&r.up.idx, n, r.first..r.first + r.up.rows());
    let rounds = r.run(&needed, exchange, |rows| g.count(Other::Fetched(rows)))?;
    let (total, by_vertex) = agree(r.comm, g.finish())?;
    Ok((total, by_vertex, rounds))
}

/// The CPU half: the edges into the rank's own rows grouped by `a` and counted with a bitmap
/// of `U(a)` (`count_groups`), then the edges into each round's fetched rows, regrouped by `a`.
/// Returns as [`count_on_gpu`] does.
fn count_on_cpu(
    r: &Rounds<'_>,
    edges: &Edges,
    n: usize,
    per_vertex: bool,
    exchange: &mut Exchange,
) -> Result<(u64, Option<Vec<u64>>, u64)> {
    let (up, first) = (r.up, r.first);
    let counts: Option<Vec<AtomicU64>> =
        per_vertex.then(|| (0..n).map(|_| AtomicU64::new(0)).collect());
    let own_row = |b: u32| own_row(up, first, b);
    let group = |i: usize| {
        let bs = edges.local_of(up, i);
        (!bs.is_empty()).then(|| ((first + i) as u32, bs.iter().copied()))
    };
    let mut total = count_groups(up.rows(), group, n, &own_row, &own_row, counts.as_deref());
    agree(r.comm, crate::interrupt::check())?;
    let mut next = 0;
    let rounds = r.run(&edges.needed, exchange, |rows| {
        let pairs = edges.round_pairs(&mut next, rows.ids);
        let fetched = |b: u32| -> &[u32] {
            rows.ids.binary_search(&b).map_or(&[][..], |k| {
                &rows.idx[rows.ptr[k] as usize..rows.ptr[k + 1] as usize]
            })
        };
        let starts: Vec<usize> = (0..pairs.len() + 1)
            .into_par_iter()
            .filter(|&i| i == 0 || i == pairs.len() || pairs[i].0 != pairs[i - 1].0)
            .collect();
        let group = |g: usize| {
            let run = &pairs[starts[g]..starts[g + 1]];
            Some((run[0].0, run.iter().map(|p| p.1)))
        };
        let groups = starts.len().saturating_sub(1).min(pairs.len());
        total += count_groups(groups, group, n, &own_row, &fetched, counts.as_deref());
        Ok(())
    })?;
    let by_vertex = counts.map(|c| c.into_iter().map(AtomicU64::into_inner).collect());
    Ok((total, by_vertex, rounds))
}

/// The rows `U(a)` of a block's vertices (row `i` is vertex `first + i`): the part of `a`'s row
/// above `a` in `(degree, id)` order, sorted by id, all rows in one array.
struct Upper {
    ptr: Vec<u64>,
    idx: Vec<u32>,
}

impl Upper {
    /// The block's rows `U(a)`, given every vertex's degree. Chunks of rows of about equal
    /// entries each keep their rows' `U(a)` in a buffer of their own, then the chunks are
    /// copied into place.
    fn of(block: &RowBlock, degree: &[u32]) -> Upper {
        let key = |v: u32| (u64::from(degree[v as usize]) << 32) | u64::from(v);
        let first = block.first();
        let chunks = row_chunks(&block.ptr);
        let made: Vec<(Vec<u32>, Vec<u64>)> = chunks
            .par_iter()
            .map(|rows| {
                let entries = (block.ptr[rows.end] - block.ptr[rows.start]) as usize;
                let (mut idx, mut ends) =
                    (Vec::with_capacity(entries), Vec::with_capacity(rows.len()));
                for i in rows.clone() {
                    let ka = key((first + i) as u32);
                    idx.extend(block.row(i).iter().copied().filter(|&w| key(w) > ka));
                    ends.push(idx.len() as u64);
                }
                (idx, ends)
            })
            .collect();
        let sizes: Vec<usize> = made.iter().map(|m| m.0.len()).collect();
        let mut idx = vec![0u32; sizes.iter().sum()];
        let mut ptr = vec![0u64; block.rows() + 1];
        let row_counts: Vec<usize> = chunks.iter().map(|r| r.len()).collect();
        let bases = super::offsets(&sizes);
        crate::mem::split_by_lengths(&mut idx, &sizes)
            .into_par_iter()
            .zip(crate::mem::split_by_lengths(&mut ptr[1..], &row_counts))
            .zip(made.into_par_iter().zip(bases))
            .for_each(|((idx, ptr), ((mine, ends), base))| {
                idx.copy_from_slice(&mine);
                for (p, e) in ptr.iter_mut().zip(ends) {
                    *p = base as u64 + e;
                }
            });
        Upper { ptr, idx }
    }

    fn rows(&self) -> usize {
        self.ptr.len() - 1
    }

    fn row(&self, i: usize) -> &[u32] {
        &self.idx[self.ptr[i] as usize..self.ptr[i + 1] as usize]
    }
}

/// Rows `0..ptr.len() - 1` cut into consecutive runs of about equal entries, several per
/// worker, for the passes over rows that write one array in row order.
fn row_chunks(ptr: &[u64]) -> Vec<std::ops::Range<usize>> {
    let rows = ptr.len() - 1;
    let pieces = (rayon::current_num_threads() * 16) as u64;
    let entries = ptr[rows];
    let mut bounds: Vec<usize> = (0..pieces)
        .map(|k| ptr.partition_point(|&p| p < entries * k / pieces).min(rows))
        .collect();
    bounds.push(rows);
    bounds.dedup();
    bounds.windows(2).map(|w| w[0]..w[1]).collect()
}

/// One array of `len(i)` items for each row `i` of the `chunks`, in row order, each row's made
/// by `fill(i, its items)`, the chunks in parallel.
fn fill_by_rows<T: Copy + Default + Send>(
    chunks: &[std::ops::Range<usize>],
    len: impl Fn(usize) -> usize + Sync,
    fill: impl Fn(usize, &mut [T]) + Sync,
) -> Vec<T> {
    let sizes: Vec<usize> = chunks
        .par_iter()
        .map(|rows| rows.clone().map(&len).sum())
        .collect();
    let mut out = vec![T::default(); sizes.iter().sum()];
    crate::mem::split_by_lengths(&mut out, &sizes)
        .into_par_iter()
        .zip(chunks)
        .for_each(|(mut rest, rows)| {
            for i in rows.clone() {
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(len(i));
                fill(i, mine);
                rest = tail;
            }
        });
    out
}

/// The engine this rank counts on: `auto` weighs the rank's share of the edges (one collective:
/// every rank takes part, whatever it picks) and takes the GPU where it pays and is usable.
fn pick_engine(
    comm: &dyn Comm,
    block: &RowBlock,
    asked: EngineKind,
) -> (EngineKind, Option<String>) {
    if asked != EngineKind::Auto {
        return (asked, None);
    }
    let mut edges = [block.adj.len() as u64 / 2];
    comm.sum_u64(&mut edges);
    let share = edges[0] / comm.size().max(1) as u64;
    let mut notice = None;
    let engine = crate::engine::resolve(asked, Some(Work::TriangleEdges(share)), &mut |m| {
        notice = Some(m.to_string())
    });
    (engine, notice)
}

/// The rank's GPU, or why the GPU engine cannot run here.
fn rank_gpu() -> Result<std::sync::Arc<crate::gpu::Gpu>> {
    crate::gpu::device().map_err(|e| match e {
        Error::EngineUnavailable(why) => Error::EngineUnavailable(format!(
            "the GPU engine cannot run: {why}; use --engine cpu (or auto, which falls back to \
             the CPU)"
        )),
        other => other,
    })
}

/// The rank's rows `U(a)` (row `i` is vertex `first + i`) on its GPU, ready to count.
fn own_rows_on_gpu(up: &Upper, first: usize, n: usize, per_vertex: bool) -> Result<PairCounter> {
    let gpu = rank_gpu()?;
    let ids: Vec<u32> = (first..first + up.rows()).map(|v| v as u32).collect();
    PairCounter::new(
        gpu,
        Rows {
            ptr: &up.ptr,
            idx: &up.idx,
            ids: &ids,
        },
        n,
        per_vertex,
    )
}

/// The triangles through the edges `a → b` of `groups` groups, group `g` being `group(g)`: its
/// `a` and its `b`s (`None`: no edge). For each `a`, `U(a)` is marked in a bitmap of all
/// vertices (one per worker), and each `c` of each `U(b)` is looked up in it. Counted per
/// vertex too when `counts` is given.
fn count_groups<'x, 'y, B: Iterator<Item = u32>>(
    groups: usize,
    group: impl Fn(usize) -> Option<(u32, B)> + Sync,
    n: usize,
    row_a: &(dyn Fn(u32) -> &'x [u32] + Sync),
    row_b: &(dyn Fn(u32) -> &'y [u32] + Sync),
    counts: Option<&[AtomicU64]>,
) -> u64 {
    let words = n.div_ceil(64);
    (0..groups)
        .into_par_iter()
        .with_min_len(64)
        .map_init(
            || vec![0u64; words],
            |bits, g| {
                let Some((a, bs)) = group(g) else {
                    return 0;
                };
                let ua = row_a(a);
                for &c in ua {
                    bits[c as usize >> 6] |= 1u64 << (c & 63);
                }
                let mut total = 0u64;
                for b in bs {
                    let mut found = 0u64;
                    for &c in row_b(b) {
                        let hit = (bits[c as usize >> 6] >> (c & 63)) & 1;
                        found += hit;
                        if let (Some(cs), 1) = (counts, hit) {
                            cs[c as usize].fetch_add(1, Relaxed);
                        }
                    }
                    if let (Some(cs), true) = (counts, found > 0) {
                        cs[a as usize].fetch_add(found, Relaxed);
                        cs[b as usize].fetch_add(found, Relaxed);
                    }
                    total += found;
                }
                for &c in ua {
                    bits[c as usize >> 6] = 0;
                }
                total
            },
        )
        .sum()
}

/// Consecutive runs of `ids` whose `cost`s sum to at most `budget` (a run holds at least one id).
fn cut_batches(ids: &[u32], cost: impl Fn(u32) -> u64, budget: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut sum = 0u64;
    for (k, &id) in ids.iter().enumerate() {
        let c = cost(id);
        if k > start && sum + c > budget {
            out.push(start..k);
            start = k;
            sum = 0;
        }
        sum += c;
    }
    if start < ids.len() {
        out.push(start..ids.len());
    }
    out
}

/// One round of the row exchange: this rank asks for the rows `asked` (sorted ids of other
/// blocks) and answers the others' requests with `row`. Returns the rows asked for (offsets,
/// entries), in the order asked, and the bytes this rank received.
fn fetch_rows<'a>(
    comm: &dyn Comm,
    blocks: &Blocks,
    asked: &[u32],
    row: impl Fn(u32) -> &'a [u32],
) -> (Vec<u64>, Vec<u32>, u64) {
    let parts = blocks.parts;
    // Sorted ids are grouped by owner already: blocks are consecutive.
    let mut ask_counts = vec![0usize; parts];
    for &b in asked {
        ask_counts[blocks.owner(b as usize)] += 1;
    }
    let (requests, req_counts) = comm.all_to_all_u32(asked, &ask_counts);
    // Answer: first each asked row's length, then the rows' entries.
    let lengths: Vec<u32> = requests.iter().map(|&b| row(b).len() as u32).collect();
    let (got_lengths, _) = comm.all_to_all_u32(&lengths, &req_counts);
    let mut entry_counts = vec![0usize; parts];
    let mut entries = Vec::new();
    let mut at = 0;
    for (r, &c) in req_counts.iter().enumerate() {
        for &b in &requests[at..at + c] {
            entries.extend_from_slice(row(b));
            entry_counts[r] += row(b).len();
        }
        at += c;
    }
    let (got_entries, _) = comm.all_to_all_u32(&entries, &entry_counts);
    let mut offsets = Vec::with_capacity(asked.len() + 1);
    offsets.push(0u64);
    for &l in &got_lengths {
        offsets.push(offsets[offsets.len() - 1] + u64::from(l));
    }
    let received = 4 * (requests.len() + got_lengths.len() + got_entries.len()) as u64;
    (offsets, got_entries, received)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::SelfComm;
    use crate::tricount::{self, SimpleGraph};

    #[test]
    fn auto_takes_mpi_and_choices_stand() {
        use crate::dist::Exchange::{Auto, Mpi, Nccl};
        assert_eq!(exchange_for(Auto), Mpi);
        assert_eq!(exchange_for(Mpi), Mpi);
        assert_eq!(exchange_for(Nccl), Nccl);
    }

    /// The GPU kernels' outputs poisoned before they write them.
    fn poisoned() -> crate::tricount::gpu::TriangleTuning {
        crate::tricount::gpu::TriangleTuning {
            poison: true,
            ..Default::default()
        }
    }

    /// The CPU engine, and the GPU engine where a GPU is usable (required with
    /// `GMCL_REQUIRE_GPU=1`, as on the GPU machine).
    fn engines() -> Vec<EngineKind> {
        match crate::gpu::for_tests() {
            Some(_) => vec![EngineKind::Cpu, EngineKind::Gpu],
            None => vec![EngineKind::Cpu],
        }
    }

    #[test]
    fn batches_respect_the_budget() {
        let ids = [1u32, 2, 3, 4, 5];
        let b = cut_batches(&ids, u64::from, 5);
        assert_eq!(b, vec![0..2, 2..3, 3..4, 4..5]);
        assert!(cut_batches(&[], |_| 1, 5).is_empty());
    }

    #[test]
    fn one_rank_counts_as_the_single_process_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.el");
        let mut rng = crate::generate::rng::SplitMix64::new(7);
        let mut text = String::new();
        let mut edges = Vec::new();
        for _ in 0..600 {
            let (u, v) = ((rng.next_u64() % 60) as u32, (rng.next_u64() % 60) as u32);
            text.push_str(&format!("{u} {v}\n"));
            edges.push((u, v));
        }
        std::fs::write(&f, text).unwrap();
        let n = edges.iter().map(|e| e.0.max(e.1)).max().unwrap() as usize + 1;
        let g = SimpleGraph::from_edges(crate::EdgeList::square(n, edges, None)).unwrap();
        let want = tricount::count(
            &g,
            &tricount::Options {
                per_vertex: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(want.triangles > 0);
        for (stage, engine) in [1, 7, 1 << 20]
            .into_iter()
            .flat_map(|s| engines().into_iter().map(move |e| (s, e)))
        {
            let opts = Options {
                per_vertex: true,
                stage_edges: stage,
                stage_entries: stage,
                engine,
                method: Method::Auto,
                gpu: poisoned(),
                gpu_reads: true,
            };
            let got = count_file(&SelfComm, &f, None, &opts).unwrap();
            assert_eq!(got.triangles, want.triangles);
            assert_eq!(got.per_vertex, want.per_vertex);
            assert_eq!(got.edges, g.edges());
            assert_eq!(got.vertices, n as u64);
            assert_eq!(
                (got.rounds, got.exchanged_bytes),
                (0, 0),
                "one rank fetches nothing"
            );
        }
        // Several ranks (threads standing for them), with tiny and default stages.
        for ranks in 2..=4 {
            for (stage, engine) in [3, 1 << 20]
                .into_iter()
                .flat_map(|s| engines().into_iter().map(move |e| (s, e)))
            {
                let opts = Options {
                    per_vertex: true,
                    stage_edges: stage,
                    stage_entries: stage,
                    engine,
                    method: Method::Auto,
                    gpu: poisoned(),
                    gpu_reads: true,
                };
                let group = crate::dist::threads::ThreadComm::group(ranks);
                let got: Vec<Counted> = std::thread::scope(|s| {
                    let hs: Vec<_> = group
                        .iter()
                        .map(|c| s.spawn(|| count_file(c, &f, None, &opts).unwrap()))
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                for g in got {
                    assert_eq!(g.triangles, want.triangles, "{ranks} ranks, stage {stage}");
                    assert_eq!(g.per_vertex, want.per_vertex);
                    assert!(stage > 3 || g.rounds > 1);
                    // Every rank asks for rows (each block has edges into the others).
                    assert!(g.exchanged_bytes >= 4 * ranks as u64 * g.rounds.min(1));
                }
            }
        }
    }

    #[test]
    fn a_bad_line_on_one_rank_is_every_rank_s_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.el");
        let mut text: String = (0..200)
            .map(|i| format!("{i} {}\n", (i + 1) % 200))
            .collect();
        text.push_str("1 -2\n");
        std::fs::write(&f, text).unwrap();
        let group = crate::dist::threads::ThreadComm::group(3);
        let errs: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(|| {
                        count_file(c, &f, None, &Options::default())
                            .unwrap_err()
                            .to_string()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for e in errs {
            assert!(e.starts_with("rank 2 of 3: "), "{e}");
            assert!(e.contains("g.el:201: negative vertex id"), "{e}");
        }
    }
}
