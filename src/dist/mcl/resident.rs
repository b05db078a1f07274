//! MCL across ranks with every rank's block on its GPU from the start matrix to the limit,
//! where every rank expands on its GPU: the rows a rank needs from others, and the rows a new
//! cut moves, travel GPU to GPU through NCCL, or through host memory in bounded pieces where
//! NCCL cannot join the GPUs ([`device_rows::Route`]), into the matrices the product reads,
//! and the product's pruned rows stay on the device as the next block.
//! The host keeps the row offsets and every node's row length, from which it plans; the
//! decisions (the cut, the rounds, the fused dense rows) and the arithmetic are the host
//! path's ([`super::iterate`]), so the matrices are bitwise the same.

use super::{add_round, all_ranks, balance, expanded, fetch, Block, Expansion};
use crate::dist::device_rows::{Route, MIN_PIECE_ENTRIES, PIECE_ENTRIES};
use crate::dist::{agree, device_rows, Comm};
use crate::error::Result;
use crate::gpu::matrix::DeviceCsr;
use crate::mcl::{self, Iteration};
use crate::scalar::Scalar;
use crate::spgemm::gpu::GpuEngine;
use rayon::prelude::*;
use std::time::Instant;

/// A rank's block of `Mᵀ` on its GPU.
pub(super) struct DeviceBlock<T: Scalar> {
    m: DeviceCsr<T>,
    /// The block's row offsets, as the host keeps them.
    ptr: Vec<u64>,
    /// Where every rank's block starts (ranks + 1 values, the last the node count).
    starts: Vec<usize>,
    /// The smallest value of every rank's block (0 where some value is not positive).
    least: f64,
    /// The work of each of the block's columns the next cut weighs, where known before the
    /// iteration (the first: estimated entries); else the iteration weighs their products.
    work: Option<Vec<u64>>,
}

/// Of the device memory free, the part (1 in this many) the rows a round fetches may take
/// (beside the block and its copy in the operand); the product's batches, and the rows gathered
/// for ranks that ask for part of the block, take the rest. More rounds fetch the hub rows
/// again in each.
const DEVICE_FETCH_SHARE: u64 = 2;

impl<T: Scalar> DeviceBlock<T> {
    /// Uploads the host block, the start matrix's, and weighs its columns for the first cut by
    /// their estimated entries ([`expanded::expanded_per_row`]; their products where the
    /// sketches would not fit one gather): what the GPU's first expansion takes its time over,
    /// unlike its products. Collective.
    pub(super) fn upload(comm: &dyn Comm, engine: &GpuEngine, block: Block<T>) -> Result<Self> {
        let smallest = block
            .m
            .values()
            .par_iter()
            .map(|&v| if v > T::ZERO { v.to_f64() } else { 0.0 })
            .reduce(|| f64::INFINITY, f64::min);
        let mut least = [-smallest];
        comm.max_f64(&mut least);
        let work = match comm.size() > 1 {
            true => expanded::expanded_per_row(comm, &block.m, crate::dist::MAX_MESSAGE),
            false => None,
        };
        let m = agree(comm, DeviceCsr::upload(engine.gpu(), &block.m))?;
        Ok(DeviceBlock {
            m,
            ptr: block.m.row_ptr().to_vec(),
            starts: block.starts,
            least: -least[0],
            work,
        })
    }

    /// Copies the block to the host. Collective.
    pub(super) fn download(self, comm: &dyn Comm, engine: &GpuEngine) -> Result<Block<T>> {
        let m = agree(comm, self.m.download(engine.gpu()))?;
        Ok(Block {
            m,
            starts: self.starts,
        })
    }
}

/// [`super::iterate`] on blocks kept on the ranks' GPUs (rows travelling by `route`).
/// Collective.
pub(super) fn iterate<T: Scalar>(
    comm: &dyn Comm,
    route: Route<'_>,
    engine: &GpuEngine,
    block: DeviceBlock<T>,
    expansion: &Expansion<'_>,
    opts: &super::Options,
) -> Result<(DeviceBlock<T>, Iteration)> {
    let t0 = Instant::now();
    let gpu = engine.gpu();
    let poison = engine.poisons();
    let me = comm.rank();
    let DeviceBlock {
        mut m,
        mut ptr,
        mut starts,
        least,
        work,
    } = block;
    let own: Vec<u32> = ptr.windows(2).map(|w| (w[1] - w[0]) as u32).collect();
    let (lengths, _) = comm.all_gather_u32(&own);
    let mut received = 4 * (lengths.len() - own.len()) as u64;
    let mut parts = mcl::ExchangeParts::default();
    let work = match work {
        Some(work) => work,
        None => agree(comm, engine.products_per_row(&m, &lengths))?,
    };
    parts.lengths = t0.elapsed().as_secs_f64();
    if let Some(new) = balance::new_starts(comm, &starts, &work, opts.rebalance) {
        let (had, gets) = (starts[me]..starts[me + 1], new[me]..new[me + 1]);
        let ask: Vec<u32> = gets
            .clone()
            .filter(|v| !had.contains(v))
            .map(|v| v as u32)
            .collect();
        let keep: Vec<u32> = (had.start.max(gets.start)..had.end.min(gets.end))
            .map(|v| v as u32)
            .collect();
        let (moved, moved_ptr, got) = device_rows::assemble(
            comm, route, gpu, &starts, &m, &lengths, &ask, &keep, gets, poison,
        )?;
        (m, ptr, starts) = (moved, moved_ptr, new);
        received += got;
    }
    drop(work);
    parts.cut = t0.elapsed().as_secs_f64() - parts.lengths;
    let t = Instant::now();
    let (n, first, nrows) = (*starts.last().unwrap_or(&0), starts[me], m.nrows());
    let mine = first..first + nrows;
    let entry = 4 + std::mem::size_of::<T>() as u64;
    let budget = match opts.stage_entries {
        Some(asked) => Ok(asked as u64),
        None => gpu
            .memory()
            .map(|(free, _)| free / DEVICE_FETCH_SHARE / entry),
    };
    // Most often every remote row the block needs fits one round.
    let planned = budget.and_then(|budget| {
        let whole = named(gpu, &m, &ptr, 0..nrows, &mine)?;
        let fetched: u64 = whole
            .0
            .iter()
            .map(|&k| u64::from(lengths[k as usize]))
            .sum();
        match fetched <= budget.max(1) {
            true => Ok((
                (nrows > 0).then_some(0..nrows).into_iter().collect(),
                Some(whole),
            )),
            // Rounds are planned on the host's copy of the block (when memory is short).
            false => {
                let host = m.download(gpu)?;
                let plan = fetch::plan(&host, mine.clone(), &lengths, budget.max(1), false);
                Ok((plan.rounds, None))
            }
        }
    });
    let (rounds, mut whole_block): (Vec<std::ops::Range<usize>>, _) = agree(comm, planned)?;
    let mut most = [rounds.len() as u64];
    comm.max_u64(&mut most);
    parts.plan = t.elapsed().as_secs_f64();
    let mut exchange_seconds = t0.elapsed().as_secs_f64();
    let positive = {
        let l = T::from_f64(least.min(1.0));
        l * l > T::ZERO
    };
    let mut it = Iteration {
        rounds: most[0] as usize,
        ..Default::default()
    };
    let mut made_rows: Vec<DeviceCsr<T>> = Vec::new();
    let mut smallest = f64::INFINITY;
    let mut block = m;
    for round in 0..most[0] as usize {
        let rows = rounds.get(round).cloned().unwrap_or(nrows..nrows);
        let t = Instant::now();
        let held = &block;
        let needed = match whole_block.take() {
            Some(needed) => Ok(needed),
            None => named(gpu, held, &ptr, rows.clone(), &mine),
        };
        let (ask, own) = agree(comm, needed)?;
        // The round's operand: the block and the fetched rows, each at its node.
        let (b, _, got) = device_rows::assemble(
            comm,
            route,
            gpu,
            &starts,
            held,
            &lengths,
            &ask,
            &own,
            0..n,
            poison,
        )?;
        received += got;
        parts.fetch += t.elapsed().as_secs_f64();
        let made = if rows.is_empty() {
            exchange_seconds += t.elapsed().as_secs_f64();
            Ok(None)
        } else {
            let laid = Instant::now();
            // Where every rank makes its block in one round, the round's rows are the block
            // itself (no rank asks for its rows again).
            // (an empty matrix stands in for it until the iteration ends).
            let a = match rows == (0..nrows) && most[0] == 1 {
                true => DeviceCsr::with_offsets(gpu, n, &[0], false)
                    .map(|empty| std::mem::replace(&mut block, empty)),
                false => block.row_slice(gpu, rows.clone(), ptr[rows.start]..ptr[rows.end]),
            };
            parts.operand += laid.elapsed().as_secs_f64();
            exchange_seconds += t.elapsed().as_secs_f64();
            a.and_then(|a| {
                let e = expansion;
                mcl::gpu::expand_prune_resident(
                    engine,
                    a,
                    b,
                    positive,
                    first + rows.start,
                    e.params,
                    e.inflation,
                    e.progress,
                )
            })
            .map(Some)
        };
        if let Some((part, figures, kept_least)) = agree(comm, made)? {
            add_round(&mut it, &figures);
            smallest = smallest.min(kept_least);
            made_rows.push(part);
        }
    }
    drop(block);
    let next = match made_rows.is_empty() {
        true => DeviceCsr::with_offsets(gpu, n, &vec![0; nrows + 1], poison),
        false => DeviceCsr::stack(gpu, made_rows, n),
    };
    let next = agree(comm, next.and_then(|m| Ok((m.row_offsets(gpu)?, m))))?;
    let (next_ptr, next) = next;
    let mut least = [-smallest];
    comm.max_f64(&mut least);
    let kept = next.nnz();
    let counts = (received, nrows as u64, kept);
    let it = all_ranks(comm, it, &parts, exchange_seconds, counts, t0);
    let block = DeviceBlock {
        m: next,
        ptr: next_ptr,
        starts,
        least: -least[0],
        work: None,
    };
    Ok((block, it))
}

/// The nodes (increasing) that the rows `rows` of the block `m` (offsets `ptr`) name, outside
/// `mine` (the other ranks' rows a round fetches) and inside (the block's rows it reads).
fn named<T: Scalar>(
    gpu: &crate::gpu::Gpu,
    m: &DeviceCsr<T>,
    ptr: &[u64],
    rows: std::ops::Range<usize>,
    mine: &std::ops::Range<usize>,
) -> Result<(Vec<u32>, Vec<u32>)> {
    let named = m.columns_named(gpu, ptr[rows.start]..ptr[rows.end])?;
    let nodes = |inside: bool| -> Vec<u32> {
        (0..named.len() as u32)
            .into_par_iter()
            .filter(|&v| named[v as usize] != 0 && mine.contains(&(v as usize)) == inside)
            .collect()
    };
    Ok((nodes(false), nodes(true)))
}

/// Whether every rank has its GPU engine (`gpu`), so that the blocks stay on the GPUs.
/// Collective.
pub(super) fn on_every_gpu(comm: &dyn Comm, gpu: Option<&GpuEngine>) -> bool {
    let mut missing = [u64::from(gpu.is_none())];
    comm.max_u64(&mut missing);
    missing[0] == 0
}

/// How rows travel where every rank keeps its block on its GPU ([`on_every_gpu`]): through
/// NCCL where the communicator joins every rank's GPU, else through host memory in pieces of
/// the asked stage (`opts`; at least [`MIN_PIECE_ENTRIES`]) or [`PIECE_ENTRIES`] entries.
/// Asked once the blocks are uploaded: it waits for NCCL's start. Collective.
pub(super) fn route<'c>(comm: &'c dyn Comm, opts: &super::Options) -> Route<'c> {
    let link = comm.gpu_link();
    let mut missing = [u64::from(link.is_none())];
    comm.max_u64(&mut missing);
    let piece = opts
        .stage_entries
        .map_or(PIECE_ENTRIES, |s| s.clamp(MIN_PIECE_ENTRIES, PIECE_ENTRIES));
    match (missing, link) {
        ([0], Some(link)) => Route::Nccl(link),
        _ => Route::Host { piece },
    }
}
