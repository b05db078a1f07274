//! MCL across ranks, on 1D blocks of columns of `M` (rows of the transposed matrix `Mᵀ` that
//! [`crate::mcl`] keeps): a rank owns whole columns, so pruning, selection, recovery, inflation
//! and normalisation run per column on their owner, by the single-process code.
//!
//! Each iteration, the owner of column `j` of `M²` makes it from the columns `M[:, k]` for the
//! `k` of `M[:, j]`: its own, and remote ones fetched in rounds whose fetched entries stay
//! under a budget ([`fetch`]; the rank's own rows cost nothing, so where no rank needs another's
//! rows there is one round and no exchange). [`crate::mcl::expand_prune`] (or its GPU half,
//! [`crate::mcl::gpu::expand_prune`], on a rank with a GPU) then runs on the round's rows,
//! unchanged, times a matrix indexed by global node that holds the block and the
//! fetched rows (the others empty): every value is an order-free sum of the same products
//! ([`crate::quantized`]) as in one process, so every matrix, and the clusters, are bitwise the
//! single-process ones for any number of ranks and any mix of engines. The chaos is a max-reduction, the figures sums, so
//! every rank takes the same decisions.
//!
//! Interpretation: each rank makes the DAG's arcs of its own columns of the limit (a column is
//! read alone), every rank gathers the arcs (node ids only; in a converged limit about one per
//! node), and reads the clusters off them with [`crate::mcl::interpret`]'s single-process code.

pub mod balance;
// Only the blocks kept on GPUs (which need MPI) weigh by it; its tests run without MPI too.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod expanded;
pub mod fetch;
pub mod graph;
pub mod measures;
#[cfg(feature = "mpi")]
mod resident;

pub use graph::{load_graph, GraphBlock};
pub use measures::cluster_info;

use super::{agree, Comm, MAX_MESSAGE};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::mcl::{self, Iteration, IterationProgress, MclParams, MclResult, Observer};
use crate::scalar::Scalar;
use crate::spgemm::EngineKind;
use rayon::prelude::*;
use std::time::Instant;

/// What a distributed run needs besides the communicator, the graph and MCL's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// At most this many parsed edges a rank sends in one round of the input's redistribution.
    pub stage_edges: usize,
    /// At most this many entries of other ranks' rows of `Mᵀ` a rank fetches in one round of
    /// an iteration (a column whose `k` alone need more is made in a round of its own); its own
    /// rows cost nothing. `None`: what the rank's share of the memory left holds.
    pub stage_entries: Option<usize>,
    /// The ranks sharing this host's memory (at least 1): each sizes its rounds by this share
    /// of the memory left.
    pub ranks_on_host: usize,
    /// When an iteration cuts the blocks again at equal work before it expands.
    pub rebalance: balance::Slack,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stage_edges: 1 << 24,
            stage_entries: None,
            ranks_on_host: 1,
            rebalance: REBALANCE_SLACK,
        }
    }
}

/// Clusters the graph every rank holds a block of ([`load_graph`]), each rank expanding its
/// columns on its engine ([`RankEngine`]: `params.engine` applies per rank). Collective: every
/// rank returns the same result (the clusters included), or the same error; the engines give
/// bitwise the same matrices, so the clusters do not depend on which ranks had a GPU.
pub fn cluster<T: Scalar>(
    comm: &dyn Comm,
    graph: &GraphBlock<T>,
    params: &MclParams,
    opts: &Options,
    observer: &mut dyn Observer,
) -> Result<(MclResult, RankEngine)> {
    params.validate()?;
    let start = Instant::now();
    let (gpu, engine) = open_engine(comm, graph, params)?;
    let params = &MclParams {
        engine: engine.kind,
        ..params.clone()
    };
    if let Some(g) = &gpu {
        agree(comm, g.gpu().reset_pool_peak())?;
    }
    let block = Block {
        m: start_block(graph, params.loop_gain),
        starts: graph.starts.clone(),
    };
    let mut timed = mcl::Timed {
        start,
        setup_seconds: 0.0,
        last_end: 0.0,
        observer,
    };
    let interrupted = || agree(comm, crate::interrupt::check());
    let (mut exchange_seconds, mut exchanged_bytes) = (0.0, 0);
    #[cfg(feature = "mpi")]
    let blocks_on_gpus = resident::on_every_gpu(comm, gpu.as_ref());
    #[cfg(not(feature = "mpi"))]
    let blocks_on_gpus = false;
    let (block, iterations, converged) = match (blocks_on_gpus, &gpu) {
        // Every rank on its GPU: the blocks stay on the GPUs.
        #[cfg(feature = "mpi")]
        (true, Some(g)) => {
            let on_gpu = resident::DeviceBlock::upload(comm, g, block)?;
            let route = resident::route(comm, opts);
            let (on_gpu, iterations, converged) = mcl::run_iterations(
                on_gpu,
                params,
                &mut timed,
                &interrupted,
                |block, inflation, progress| {
                    let expansion = Expansion {
                        gpu: Some(g),
                        params,
                        inflation,
                        progress,
                    };
                    let (block, it) = resident::iterate(comm, route, g, block, &expansion, opts)?;
                    exchange_seconds += it.exchange_seconds;
                    exchanged_bytes += it.exchanged_bytes;
                    Ok((block, it))
                },
            )?;
            (on_gpu.download(comm, g)?, iterations, converged)
        }
        _ => mcl::run_iterations(
            block,
            params,
            &mut timed,
            &interrupted,
            |block, inflation, progress| {
                let expansion = Expansion {
                    gpu: gpu.as_ref(),
                    params,
                    inflation,
                    progress,
                };
                let (block, it) = iterate(comm, block, &expansion, opts)?;
                exchange_seconds += it.exchange_seconds;
                exchanged_bytes += it.exchanged_bytes;
                Ok((block, it))
            },
        )?,
    };
    let (setup_seconds, last_end) = (timed.setup_seconds, timed.last_end);
    let mut peak = [match &gpu {
        Some(g) => agree(comm, g.gpu().pool_peak())?,
        None => agree(comm, Ok(0))?,
    }];
    comm.max_u64(&mut peak);
    let arcs = gather_dag(comm, &block.m, block.starts[comm.rank()])?;
    drop(block);
    let interp = mcl::interpret::interpret_dag(&arcs, params.overlap);
    let result = MclResult {
        clusters: interp.clusters,
        iterations,
        converged,
        attractors: interp.attractors,
        overlap: interp.overlap,
        missing: interp.missing,
        seconds: start.elapsed().as_secs_f64(),
        device_peak_bytes: peak[0],
        setup_seconds,
        finish_seconds: start.elapsed().as_secs_f64() - last_end.max(setup_seconds),
        exchange_seconds,
        exchanged_bytes,
    };
    let engine = RankEngine {
        blocks_on_gpus,
        ..engine
    };
    Ok((result, engine))
}

/// The engine a rank expanded its columns on.
#[derive(Clone, Debug, PartialEq)]
pub struct RankEngine {
    /// `Cpu` or `Gpu`.
    pub kind: EngineKind,
    /// Why this rank runs on the CPU engine under `auto` although a GPU was wanted.
    pub notice: Option<String>,
    /// Whether every rank kept its block on its GPU, the rows moving between the GPUs through
    /// NCCL or through host memory (the same on every rank).
    pub blocks_on_gpus: bool,
}

/// Opens this rank's engine: `Cpu`; `Gpu` (every rank opens its GPU; a rank that cannot
/// fails every rank); `Auto` (the GPU where this rank's share of the first expansion makes it
/// pay and a GPU opens, else the CPU, saying why). Collective.
fn open_engine<T: Scalar>(
    comm: &dyn Comm,
    graph: &GraphBlock<T>,
    params: &MclParams,
) -> Result<(Option<crate::spgemm::gpu::GpuEngine>, RankEngine)> {
    let mut notice = None;
    let wanted = match params.engine {
        EngineKind::Auto => {
            let work = crate::engine::Work::MclExpansion(mcl::expansion_work(&graph.rows));
            crate::engine::resolve(EngineKind::Auto, Some(work), &mut |m| {
                notice = Some(m.to_string())
            })
        }
        other => other,
    };
    let opened = match wanted {
        EngineKind::Gpu => Some(mcl::gpu::engine(params)),
        _ => None,
    };
    let gpu = match (params.engine, opened) {
        (EngineKind::Gpu, Some(made)) => Some(agree(comm, made)?),
        (_, Some(Ok(g))) => Some(g),
        (_, Some(Err(e))) => {
            notice = Some(format!("no usable GPU ({e}): running on the CPU engine"));
            None
        }
        (_, None) => None,
    };
    let kind = match gpu {
        Some(_) => EngineKind::Gpu,
        None => EngineKind::Cpu,
    };
    let engine = RankEngine {
        kind,
        notice,
        blocks_on_gpus: false,
    };
    Ok((gpu, engine))
}

/// What every round of an iteration's expansion shares: the rank's GPU engine (`None`: the CPU engine),
/// MCL's parameters, the inflation and the progress counters.
struct Expansion<'a> {
    gpu: Option<&'a crate::spgemm::gpu::GpuEngine>,
    params: &'a MclParams,
    inflation: f64,
    progress: &'a IterationProgress,
}

impl Expansion<'_> {
    /// Row `i` of `a·b`, pruned and inflated as node `first + i`, on the rank's engine.
    fn expand_prune<T: Scalar>(
        &self,
        a: &Csr<T>,
        b: &Csr<T>,
        first: usize,
    ) -> Result<(Csr<T>, Iteration)> {
        let (params, inflation, progress) = (self.params, self.inflation, self.progress);
        match self.gpu {
            Some(g) => mcl::gpu::expand_prune(g, a, b, first, params, inflation, progress),
            None => mcl::expand_prune(a, b, first, params, inflation, progress),
        }
    }
}

/// The block's rows of the start matrix (transposed), made by the single-process row code.
fn start_block<T: Scalar>(graph: &GraphBlock<T>, loop_gain: f64) -> Csr<T> {
    let g = &graph.rows;
    let mut row_ptr = Vec::with_capacity(g.nrows() + 1);
    let mut cols = Vec::with_capacity(g.nnz() + g.nrows());
    let mut vals = Vec::with_capacity(g.nnz() + g.nrows());
    row_ptr.push(0u64);
    for i in 0..g.nrows() {
        let (c, v) = g.row(i);
        mcl::start_row(c, v, graph.first() + i, loop_gain, &mut cols, &mut vals);
        row_ptr.push(cols.len() as u64);
    }
    Csr::from_parts_unchecked(g.nrows(), g.ncols(), row_ptr, cols, vals)
}

/// A rank's block of `Mᵀ` (its rows, nodes `starts[rank]..starts[rank + 1]`) and where every
/// rank's block starts (ranks + 1 values, the last the node count).
struct Block<T> {
    m: Csr<T>,
    starts: Vec<usize>,
}

/// Where an iteration moves rows to even out its blocks' work first: past 5% above the mean,
/// unless the excess is too small to pay for the move (in products: a millisecond or so on a
/// GPU).
const REBALANCE_SLACK: balance::Slack = balance::Slack {
    ratio: 1.05,
    least: 1 << 28,
};

/// One iteration on every rank's block of `Mᵀ`: the blocks cut again at equal products where
/// they stray from equal ([`balance::rebalance`]), then the block's columns of `M²` made in
/// rounds of fetched rows, pruned and inflated. Returns the block of the next matrix and the
/// iteration's figures over all ranks. Collective.
fn iterate<T: Scalar>(
    comm: &dyn Comm,
    block: Block<T>,
    expansion: &Expansion<'_>,
    opts: &Options,
) -> Result<(Block<T>, Iteration)> {
    let t0 = Instant::now();
    let Block { mut m, mut starts } = block;
    // Every row's length plans the rounds (only other ranks' rows cost a round anything, so
    // one rank needs none) and weighs each column's products.
    let (lengths, mut received) = if comm.size() > 1 {
        let own: Vec<u32> = (0..m.nrows()).map(|i| m.row_len(i) as u32).collect();
        let (lengths, _) = comm.all_gather_u32(&own);
        let bytes = 4 * (lengths.len() - own.len()) as u64;
        (lengths, bytes)
    } else {
        (Vec::new(), 0)
    };
    let mut parts = mcl::ExchangeParts::default();
    if comm.size() > 1 {
        let products: Vec<u64> = (0..m.nrows())
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                m.row(i)
                    .0
                    .iter()
                    .map(|&k| u64::from(lengths[k as usize]))
                    .sum()
            })
            .collect();
        parts.lengths = t0.elapsed().as_secs_f64();
        let moved = balance::rebalance(comm, &m, &starts, &products, &lengths, opts.rebalance);
        if let Some(moved) = moved {
            (m, starts, received) = (moved.rows, moved.starts, received + moved.received);
        }
        parts.cut = t0.elapsed().as_secs_f64() - parts.lengths;
    }
    let m = &m;
    let first = starts[comm.rank()];
    let mine = first..first + m.nrows();
    let entry = 4 + std::mem::size_of::<T>() as u64;
    let t = Instant::now();
    let room = crate::io::limits::memory_left((m.nnz() as u64).saturating_mul(entry));
    let budget = fetch_budget(opts.stage_entries, room, opts.ranks_on_host, entry);
    let mut plan = fetch::plan(m, mine, &lengths, budget, true);
    // The most rounds of a rank, whether any rank needs another's rows at all, and whether any
    // fetches rows once for all its rounds.
    let mut most = [
        plan.rounds.len() as u64,
        plan.largest,
        plan.shared.len() as u64,
    ];
    comm.max_u64(&mut most);
    let exchange = most[1] > 0;
    parts.plan = t.elapsed().as_secs_f64();
    // Every rank takes part in the shared rows' exchange when one rank has some.
    let shared = match most[2] > 0 {
        true => {
            let t = Instant::now();
            let got = fetch::fetch_in_pieces(comm, &starts, m, &plan.shared, &lengths);
            received += got.received;
            parts.fetch += t.elapsed().as_secs_f64();
            got
        }
        false => fetch::Fetched::none(),
    };
    let mut exchange_seconds = t0.elapsed().as_secs_f64();
    let mut it = Iteration {
        rounds: most[0] as usize,
        ..Default::default()
    };
    let mut made_rows: Vec<Csr<T>> = Vec::new();
    for round in 0..most[0] as usize {
        let rows = plan
            .rounds
            .get(round)
            .cloned()
            .unwrap_or(m.nrows()..m.nrows());
        let t = Instant::now();
        // The round's operand, its fetched rows laid out with the block as they arrive.
        let b = if exchange {
            // A one-round plan found the round's remote rows already.
            let ask = plan
                .needed
                .take()
                .unwrap_or_else(|| fetch::needed(m, rows.clone(), first));
            match most[2] > 0 {
                // The round's own rows fetched, the shared ones laid in among them.
                true => {
                    let ask = fetch::without(&ask, &shared.nodes);
                    let got = fetch::fetch_in_pieces(comm, &starts, m, &ask, &lengths);
                    received += got.received;
                    fetch::operand(m, first, fetch::merged(&shared, got))
                }
                false => {
                    let (b, got) = fetch::fetch_operand(comm, &starts, m, &ask, &lengths);
                    received += got;
                    b
                }
            }
        } else {
            fetch::operand(m, first, fetch::Fetched::none())
        };
        parts.fetch += t.elapsed().as_secs_f64();
        let made = if rows.is_empty() {
            exchange_seconds += t.elapsed().as_secs_f64();
            Ok(None)
        } else {
            let laid = Instant::now();
            let a = fetch::round_rows(m, rows.clone());
            parts.operand += laid.elapsed().as_secs_f64();
            exchange_seconds += t.elapsed().as_secs_f64();
            expansion.expand_prune(&a, &b, first + rows.start).map(Some)
        };
        if let Some((part, figures)) = agree(comm, made)? {
            add_round(&mut it, &figures);
            made_rows.push(part);
        }
    }
    let next = match made_rows.is_empty() {
        true => Csr::empty(m.nrows(), m.ncols()),
        false => Csr::stack(made_rows, m.ncols()),
    };
    let counts = (received, m.nrows() as u64, next.nnz() as u64);
    let it = all_ranks(comm, it, &parts, exchange_seconds, counts, t0);
    Ok((Block { m: next, starts }, it))
}

/// A round's figures added to the iteration's.
fn add_round(it: &mut Iteration, figures: &Iteration) {
    it.chaos = it.chaos.max(figures.chaos);
    it.expanded += figures.expanded;
    it.products += figures.products;
    it.batches += figures.batches;
    it.fused += figures.fused;
    it.expand_seconds += figures.expand_seconds;
    // This rank's own time making its columns, until `all_ranks` sets the iteration's.
    it.seconds += figures.seconds;
}

/// The iteration's figures over all ranks, from this rank's (`it`, the exchange's `parts` and
/// seconds, the bytes `received`, the `columns` it made and the entries `kept`; timed from
/// `t0`): the chaos and the seconds the largest, the counts summed, and every rank's share.
/// Collective.
fn all_ranks(
    comm: &dyn Comm,
    mut it: Iteration,
    parts: &mcl::ExchangeParts,
    exchange_seconds: f64,
    (received, columns, kept): (u64, u64, u64),
    t0: Instant,
) -> Iteration {
    let mine = mcl::RankShare {
        columns,
        products: it.products,
        expanded: it.expanded,
        kept,
        busy_seconds: it.seconds,
        received_bytes: received,
    };
    let mut most = [
        it.chaos,
        exchange_seconds,
        parts.lengths,
        parts.cut,
        parts.plan,
        parts.fetch,
        parts.operand,
    ];
    comm.max_f64(&mut most);
    [it.chaos, it.exchange_seconds] = [most[0], most[1]];
    let [lengths, cut, plan, fetch, operand] = [most[2], most[3], most[4], most[5], most[6]];
    it.exchange_parts = mcl::ExchangeParts {
        lengths,
        cut,
        plan,
        fetch,
        operand,
    };
    let mut sums = [it.batches as u64, it.fused];
    comm.sum_u64(&mut sums);
    it.batches = sums[0] as usize;
    it.fused = sums[1];
    it.ranks = every_share(comm, &mine);
    let total = |f: fn(&mcl::RankShare) -> u64| it.ranks.iter().map(f).sum::<u64>();
    [it.expanded, it.kept, it.products] = [
        total(|r| r.expanded),
        total(|r| r.kept),
        total(|r| r.products),
    ];
    it.exchanged_bytes = total(|r| r.received_bytes);
    it.seconds = t0.elapsed().as_secs_f64();
    it
}

/// Every rank's share, in rank order. Collective.
fn every_share(comm: &dyn Comm, mine: &mcl::RankShare) -> Vec<mcl::RankShare> {
    let words = [
        mine.columns,
        mine.products,
        mine.expanded,
        mine.kept,
        mine.busy_seconds.to_bits(),
        mine.received_bytes,
    ];
    let (all, _) = comm.all_gather_u64(&words);
    all.chunks_exact(words.len())
        .map(|w| mcl::RankShare {
            columns: w[0],
            products: w[1],
            expanded: w[2],
            kept: w[3],
            busy_seconds: f64::from_bits(w[4]),
            received_bytes: w[5],
        })
        .collect()
}

/// Of a rank's share of the memory left, the part (1 in this many) the rows fetched in a round
/// may take: the rest holds the next block and the expansion's host buffers. A smaller share
/// splits a dense iteration into rounds that each fetch the hub rows again.
const FETCH_SHARE: u64 = 2;

/// Remote entries per round where the memory left cannot be told.
const UNKNOWN_MEMORY_ENTRIES: u64 = 1 << 26;

/// The remote entries a round may fetch: `asked`, else what a [`FETCH_SHARE`] of this rank's
/// share (`ranks_on_host`) of the memory left (`room`, bytes) holds, at least 1. Not capped at
/// what one exchange carries ([`fetch::fetch_in_pieces`] runs as many as a round needs): every
/// round beyond the first fetches the hub rows again, builds `B` again and, on a GPU, uploads
/// it again. `entry`: the bytes of an entry of `B`.
fn fetch_budget(asked: Option<usize>, room: Option<u64>, ranks_on_host: usize, entry: u64) -> u64 {
    let derived = || {
        // A fetched entry is held twice at most: received while the rank sends about as many
        // to the others (freed before the rows are decoded), then received and copied into `B`.
        let per_entry = 2 * entry;
        room.map_or(UNKNOWN_MEMORY_ENTRIES, |r| {
            r / ranks_on_host.max(1) as u64 / FETCH_SHARE / per_entry
        })
    };
    asked.map_or_else(derived, |n| n as u64).max(1)
}

/// The limit's DAG on every rank: each rank makes its nodes' arcs from its block `m` of the
/// limit (whose row 0 is node `first`; [`mcl::interpret::dag_arcs`] reads a column alone), and
/// the arcs travel as node ids without values; no rank gathers the limit itself. Collective.
fn gather_dag<T: Scalar>(comm: &dyn Comm, m: &Csr<T>, first: usize) -> Result<Vec<Vec<u32>>> {
    let arcs: Vec<Vec<u32>> = (0..m.nrows())
        .into_par_iter()
        .with_min_len(256)
        .map(|i| {
            let (cols, vals) = m.row(i);
            mcl::interpret::dag_arcs(cols, vals, first + i)
        })
        .collect();
    let lens: Vec<u32> = arcs.iter().map(|a| a.len() as u32).collect();
    let flat = arcs.concat();
    drop(arcs);
    let too_large = (flat.len() > MAX_MESSAGE).then(|| {
        Error::Invalid(format!(
            "the limit's block has {} arcs to interpret, more than one message carries \
             ({MAX_MESSAGE}); the process has not converged far enough to interpret across \
             ranks (raise -L)",
            flat.len()
        ))
    });
    agree(comm, too_large.map_or(Ok(()), Err))?;
    let (lens, _) = comm.all_gather_u32(&lens);
    let (flat, _) = comm.all_gather_u32(&flat);
    let mut at = 0usize;
    Ok(lens
        .into_iter()
        .map(|l| {
            let a = flat[at..at + l as usize].to_vec();
            at += l as usize;
            a
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::{on_ranks, ThreadComm};
    use crate::mcl::{Overlap, PruneParams};
    use std::path::Path;

    /// An R-MAT graph as an edge list file, with ids no edge touches left in.
    fn rmat_file(dir: &Path, scale: u32, edge_factor: u64, seed: u64) -> std::path::PathBuf {
        let mut p = crate::generate::RmatParams::new(scale, edge_factor << scale);
        p.seed = seed;
        p.undirected = true;
        let el = crate::generate::generate(&p).unwrap();
        let mut s = String::new();
        for &(u, v) in &el.edges {
            // Ids times 3 leave gaps that the compaction removes.
            s.push_str(&format!("{} {}\n", 3 * u, 3 * v));
        }
        let f = dir.join(format!("rmat{scale}-{seed}.el"));
        std::fs::write(&f, s).unwrap();
        f
    }

    /// Repeats both ways with different weights, zero weights, self loops, an id touched only
    /// by a self loop, and equal weights given as -0 and 0.
    fn untidy_file(dir: &Path) -> std::path::PathBuf {
        let mut s = String::from("# untidy\n");
        let mut x = 99u64;
        for i in 0..600u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (u, v) = ((x >> 33) % 83, (x >> 13) % 83);
            s.push_str(&format!("{u} {v} {}.25\n", i % 5));
            if i % 7 == 0 {
                s.push_str(&format!("{v} {u} 3\n{u} {u} 2\n"));
            }
        }
        s.push_str("90 90 1\n91 92 -0\n92 91 0\n");
        let f = dir.join("untidy.wel");
        std::fs::write(&f, s).unwrap();
        f
    }

    fn single(path: &Path, params: &MclParams) -> (Csr<f32>, Vec<u32>, MclResult) {
        let loaded = crate::io::load(path, None).unwrap();
        let (g, ids) = crate::mcl::graph_from_edges::<f32>(&loaded.edges).unwrap();
        let r = crate::mcl::cluster(&g, params, &mut |_| {}).unwrap();
        (g, ids, r)
    }

    /// The graphs and parameters the iteration tests run: R-MAT of scale `scale` with the
    /// defaults, a denser R-MAT with tight pruning (inflation `tight_inflation`), and an untidy
    /// file unfused in small batches.
    fn cases(dir: &Path, scale: u32, tight_inflation: f64) -> [(std::path::PathBuf, MclParams); 3] {
        let tight = MclParams {
            prune: PruneParams {
                prune: 1000,
                select: 20,
                recover: 30,
                pct: 90,
            },
            inflation: tight_inflation,
            ..cpu()
        };
        let unfused = MclParams {
            fused: false,
            batch_entries: Some(300),
            ..cpu()
        };
        [
            (rmat_file(dir, scale, 8, 3), cpu()),
            (rmat_file(dir, 8, 16, 4), tight),
            (untidy_file(dir), unfused),
        ]
    }

    fn cpu() -> MclParams {
        MclParams {
            engine: EngineKind::Cpu,
            ..Default::default()
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The rank's block holds, bitwise, the rows of `want` its `starts` give it.
    fn assert_block(c: &ThreadComm, block: &Block<f32>, want: &Csr<f32>, what: &str) {
        let first = block.starts[c.rank()];
        assert_eq!(
            block.m.nrows(),
            block.starts[c.rank() + 1] - first,
            "{what}"
        );
        for i in 0..block.m.nrows() {
            let (wc, wv) = want.row(first + i);
            let (gc, gv) = block.m.row(i);
            assert_eq!((gc, bits(gv)), (wc, bits(wv)), "{what}");
        }
    }

    /// Every rank's block of every iteration's matrix is bitwise the single-process matrix's
    /// rows, with the same figures, for 1 to 4 ranks and rounds of a few rows.
    #[test]
    fn every_iteration_equals_the_single_process_one() {
        let dir = tempfile::tempdir().unwrap();
        let cases = cases(dir.path(), 9, 1.4);
        for (path, params) in &cases {
            let (g, _, _) = single(path, params);
            let mut whole = vec![crate::mcl::start_matrix(&g, params.loop_gain)];
            let mut figures = Vec::new();
            for _ in 0..8 {
                let last = whole.last().unwrap();
                let (next, it) = crate::mcl::iterate(last, params, params.inflation).unwrap();
                whole.push(next);
                figures.push(it);
            }
            for p in 1..=4 {
                for stage in [7, 1 << 24] {
                    let opts = Options {
                        stage_edges: 50,
                        stage_entries: Some(stage),
                        ranks_on_host: 1,
                        // Small graphs' blocks move too.
                        rebalance: balance::Slack {
                            least: 0,
                            ..REBALANCE_SLACK
                        },
                    };
                    let moved = on_ranks(p, |c| {
                        let gb = load_graph::<f32>(c, path, None, opts.stage_edges).unwrap();
                        let mut block = Block {
                            m: start_block(&gb, params.loop_gain),
                            starts: gb.starts.clone(),
                        };
                        let mut moved = false;
                        let progress = crate::mcl::progress::unwatched();
                        for (t, want) in whole.iter().enumerate() {
                            moved |= block.starts != gb.starts;
                            assert_block(c, &block, want, &format!("{p} ranks, {t}"));
                            let Some(f) = figures.get(t) else { break };
                            let expansion = Expansion {
                                gpu: None,
                                params,
                                inflation: params.inflation,
                                progress,
                            };
                            let (next, it) = iterate(c, block, &expansion, &opts).unwrap();
                            assert_eq!(
                                (it.chaos.to_bits(), it.expanded, it.kept, it.products),
                                (f.chaos.to_bits(), f.expanded, f.kept, f.products)
                            );
                            // Rows are exchanged exactly when there are other ranks.
                            assert_eq!(it.exchanged_bytes > 0, p > 1);
                            block = next;
                        }
                        moved
                    });
                    // R-MAT's blocks of equal node counts are uneven: rows moved.
                    if p > 1 && path.ends_with("rmat9-3.el") {
                        assert!(moved.iter().all(|&m| m), "{p} ranks");
                    }
                }
            }
        }
    }

    /// The clusters of 1 to 4 ranks are the single-process ones, in every overlap mode.
    #[test]
    fn clusters_equal_the_single_process_ones() {
        let dir = tempfile::tempdir().unwrap();
        let graphs = [rmat_file(dir.path(), 9, 8, 7), untidy_file(dir.path())];
        let opts = Options {
            stage_edges: 100,
            stage_entries: Some(3000),
            ranks_on_host: 1,
            rebalance: balance::Slack {
                least: 0,
                ..REBALANCE_SLACK
            },
        };
        for path in &graphs {
            for (overlap, ranks) in [
                (Overlap::Cut, 1..=4),
                (Overlap::Keep, 3..=3),
                (Overlap::Split, 2..=2),
            ] {
                let params = MclParams {
                    overlap,
                    inflation: 1.6,
                    ..cpu()
                };
                let (_, ids, want) = single(path, &params);
                assert!(want.clusters.len() > 1);
                for p in ranks {
                    let got = on_ranks(p, |c| {
                        // Blocks cut again at equal work each iteration: the same clusters.
                        let gb = load_graph::<f32>(c, path, None, opts.stage_edges).unwrap();
                        let r = cluster(c, &gb, &params, &opts, &mut |_: &Iteration| {}).unwrap();
                        (gb.ids, r)
                    });
                    for (g_ids, (r, engine)) in got {
                        assert_eq!(g_ids, ids);
                        assert_eq!(engine.kind, EngineKind::Cpu);
                        assert_eq!(r.clusters, want.clusters, "{p} ranks");
                        assert_eq!(
                            (
                                r.iterations,
                                r.converged,
                                r.attractors,
                                r.overlap,
                                r.missing
                            ),
                            (
                                want.iterations,
                                want.converged,
                                want.attractors,
                                want.overlap,
                                want.missing
                            )
                        );
                    }
                }
            }
        }
    }

    /// A limit far from converged (many entries per column) gives the single-process clusters:
    /// the DAG's arcs each rank makes of its columns are those of the whole limit.
    #[test]
    fn an_unconverged_limit_is_interpreted_as_in_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = rmat_file(dir.path(), 8, 8, 11);
        for max_iterations in [1, 2, 3] {
            let params = MclParams {
                max_iterations,
                ..cpu()
            };
            let (_, _, want) = single(&path, &params);
            assert!(!want.converged);
            for p in 1..=4 {
                let got = on_ranks(p, |c| {
                    let gb = load_graph::<f32>(c, &path, None, 64).unwrap();
                    let opts = Options::default();
                    cluster(c, &gb, &params, &opts, &mut |_: &Iteration| {})
                        .unwrap()
                        .0
                });
                for r in got {
                    assert_eq!(r.clusters, want.clusters, "{p} ranks, -L {max_iterations}");
                    assert_eq!(
                        (r.attractors, r.overlap, r.missing),
                        (want.attractors, want.overlap, want.missing)
                    );
                }
            }
        }
    }

    #[test]
    fn rounds_are_sized_by_the_memory_share_unless_asked() {
        // Asked for: as asked, at least 1.
        assert_eq!(fetch_budget(Some(7), Some(1), 4, 8), 7);
        assert_eq!(fetch_budget(Some(0), None, 1, 8), 1);
        let most = u64::MAX;
        assert_eq!(fetch_budget(Some(usize::MAX), None, 1, 8), most);
        // Else half the rank's share of the memory left, 16 bytes an entry of f32.
        assert_eq!(fetch_budget(None, Some(2 * 16 * 1000 * 2), 2, 8), 1000);
        assert_eq!(fetch_budget(None, Some(2 * 16 * 1000 * 2), 1, 8), 2000);
        assert_eq!(fetch_budget(None, Some(0), 2, 8), 1);
        assert_eq!(fetch_budget(None, Some(u64::MAX), 1, 8), most / 2 / 16);
        assert_eq!(fetch_budget(None, None, 2, 8), UNKNOWN_MEMORY_ENTRIES);
    }

    /// A communicator that counts the all-to-all exchanges it passes on.
    struct Counting<'a> {
        inner: &'a ThreadComm,
        exchanges: std::cell::Cell<usize>,
    }

    impl Comm for Counting<'_> {
        fn rank(&self) -> usize {
            self.inner.rank()
        }
        fn size(&self) -> usize {
            self.inner.size()
        }
        fn barrier(&self) {
            self.inner.barrier()
        }
        fn sum_u64(&self, v: &mut [u64]) {
            self.inner.sum_u64(v)
        }
        fn max_u64(&self, v: &mut [u64]) {
            self.inner.max_u64(v)
        }
        fn sum_f64(&self, v: &mut [f64]) {
            self.inner.sum_f64(v)
        }
        fn max_f64(&self, v: &mut [f64]) {
            self.inner.max_f64(v)
        }
        fn all_gather_bytes(&self, mine: &[u8]) -> (Vec<u8>, Vec<usize>) {
            self.inner.all_gather_bytes(mine)
        }
        fn all_gather_u32(&self, mine: &[u32]) -> (Vec<u32>, Vec<usize>) {
            self.inner.all_gather_u32(mine)
        }
        fn all_gather_u64(&self, mine: &[u64]) -> (Vec<u64>, Vec<usize>) {
            self.inner.all_gather_u64(mine)
        }
        fn all_to_all_u32(&self, send: &[u32], counts: &[usize]) -> (Vec<u32>, Vec<usize>) {
            self.exchanges.set(self.exchanges.get() + 1);
            self.inner.all_to_all_u32(send, counts)
        }
        fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) {
            self.inner.broadcast_bytes(root, data)
        }
        fn abort(&self, code: i32, message: &str) -> ! {
            self.inner.abort(code, message)
        }
        fn exchange(&self) -> crate::dist::Exchange {
            self.inner.exchange()
        }
    }

    /// Where every rank's columns need only its own (components within blocks), the ranks
    /// exchange no rows, only their lengths; one edge across the blocks makes them fetch.
    #[test]
    fn rows_travel_only_where_a_rank_needs_another_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = String::new();
        for base in [0, 10] {
            for i in 0..10 {
                for j in i + 1..10 {
                    s.push_str(&format!("{} {}\n", base + i, base + j));
                }
            }
        }
        let apart = dir.path().join("apart.el");
        std::fs::write(&apart, &s).unwrap();
        s.push_str("9 10\n");
        let joined = dir.path().join("joined.el");
        std::fs::write(&joined, &s).unwrap();
        let opts = Options::default();
        for (path, apart) in [(&apart, true), (&joined, false)] {
            let seen = on_ranks(2, |c| {
                let gb = load_graph::<f32>(c, path, None, opts.stage_edges).unwrap();
                assert_eq!(gb.starts, vec![0, 10, 20]);
                let block = Block {
                    m: start_block(&gb, 1.0),
                    starts: gb.starts.clone(),
                };
                let counting = Counting {
                    inner: c,
                    exchanges: std::cell::Cell::new(0),
                };
                let expansion = Expansion {
                    gpu: None,
                    params: &cpu(),
                    inflation: 2.0,
                    progress: crate::mcl::progress::unwatched(),
                };
                let (_, it) = iterate(&counting, block, &expansion, &opts).unwrap();
                (counting.exchanges.get(), it.exchanged_bytes)
            });
            // Each rank receives the other's 10 lengths, and with an edge across, rows.
            let lengths = 2 * 4 * 10;
            for (exchanges, bytes) in seen {
                assert_eq!((exchanges == 0, bytes == lengths), (apart, apart));
            }
        }
    }

    #[test]
    fn a_bad_weight_fails_every_rank_and_the_gpu_runs_or_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.wel");
        let mut s = "0 1 1\n".repeat(40);
        s.push_str("1 2 -3\n");
        std::fs::write(&f, s).unwrap();
        for r in on_ranks(3, |c| load_graph::<f32>(c, &f, None, 8).map(|_| ())) {
            let e = r.unwrap_err().to_string();
            assert!(e.starts_with("rank 2 of 3: "), "{e}");
            assert!(
                e.contains("g.wel") && e.contains("edge (1, 2) weighs -3"),
                "{e}"
            );
        }
        let big = dir.path().join("big.wel");
        std::fs::write(&big, "0 1 1e39\n").unwrap();
        let e = load_graph::<f32>(&crate::dist::SelfComm, &big, None, 8).unwrap_err();
        assert!(
            e.to_string().contains("does not fit the value type f32"),
            "{e}"
        );
        assert!(load_graph::<f64>(&crate::dist::SelfComm, &big, None, 8).is_ok());
        let ok = dir.path().join("ok.el");
        std::fs::write(&ok, "0 1\n").unwrap();
        let gb = load_graph::<f32>(&crate::dist::SelfComm, &ok, None, 8).unwrap();
        let gpu = MclParams {
            engine: EngineKind::Gpu,
            ..Default::default()
        };
        let asked = cluster(
            &crate::dist::SelfComm,
            &gb,
            &gpu,
            &Options::default(),
            &mut |_: &Iteration| {},
        );
        match gpu_engine(&gpu) {
            Some(_) => assert_eq!(asked.unwrap().1.kind, EngineKind::Gpu),
            None => assert_eq!(asked.unwrap_err().exit_code(), 3),
        }
    }

    /// The GPU engine MCL opens, or `None` where no GPU is usable (a failure under
    /// `GMCL_REQUIRE_GPU=1`, as the GPU machine runs the tests).
    fn gpu_engine(params: &MclParams) -> Option<crate::spgemm::gpu::GpuEngine> {
        crate::gpu::for_tests()?;
        // The GPU is usable: its engine must open.
        Some(crate::mcl::gpu::engine(params).unwrap_or_else(|why| {
            panic!("a GPU is usable but MCL's engine does not open on it: {why}")
        }))
    }

    /// Ranks on the GPU engine make every iteration's block bitwise the single-process CPU
    /// engine's (inflation 2: a power other than 2 may round differently on the device), with
    /// the same figures; and their clusters are the CPU's.
    #[test]
    fn gpu_ranks_equal_the_cpu_engine() {
        let dir = tempfile::tempdir().unwrap();
        let cases = cases(dir.path(), 10, 2.0);
        if gpu_engine(&cpu()).is_none() {
            return;
        }
        for (path, params) in &cases {
            assert_eq!(params.inflation, 2.0);
            let (g, _, want) = single(path, params);
            let mut whole = vec![crate::mcl::start_matrix(&g, params.loop_gain)];
            let mut figures = Vec::new();
            for _ in 0..6 {
                let (next, it) = crate::mcl::iterate(whole.last().unwrap(), params, 2.0).unwrap();
                whole.push(next);
                figures.push(it);
            }
            for p in 1..=3 {
                let opts = Options {
                    stage_edges: 50,
                    stage_entries: Some(500),
                    ranks_on_host: p,
                    rebalance: balance::Slack {
                        least: 0,
                        ..REBALANCE_SLACK
                    },
                };
                on_ranks(p, |c| {
                    let gb = load_graph::<f32>(c, path, None, opts.stage_edges).unwrap();
                    let engine = gpu_engine(params).unwrap();
                    let mut block = Block {
                        m: start_block(&gb, params.loop_gain),
                        starts: gb.starts.clone(),
                    };
                    for (t, want) in whole.iter().enumerate() {
                        assert_block(c, &block, want, &format!("{p} ranks, {t}"));
                        let Some(f) = figures.get(t) else { break };
                        let expansion = Expansion {
                            gpu: Some(&engine),
                            params,
                            inflation: 2.0,
                            progress: crate::mcl::progress::unwatched(),
                        };
                        let (next, it) = iterate(c, block, &expansion, &opts).unwrap();
                        assert_eq!(
                            (it.chaos.to_bits(), it.kept, it.products),
                            (f.chaos.to_bits(), f.kept, f.products),
                            "{p} ranks, {t}"
                        );
                        block = next;
                    }
                    let gpu = MclParams {
                        engine: EngineKind::Gpu,
                        ..params.clone()
                    };
                    let (r, engine) =
                        cluster(c, &gb, &gpu, &opts, &mut |_: &Iteration| {}).unwrap();
                    assert_eq!(engine.kind, EngineKind::Gpu);
                    assert_eq!(r.clusters, want.clusters, "{p} ranks");
                    assert_eq!(r.iterations, want.iterations, "{p} ranks");
                    assert!(r.device_peak_bytes > 0);
                });
            }
        }
    }
}
