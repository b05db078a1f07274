//! Rows of blocks kept on the ranks' GPUs, moved between them: a matrix made of rows other
//! ranks own and rows of this rank's block ([`assemble`]) is laid out on the device with every
//! row at its final place, each owner gathering the asked rows into one buffer with a kernel
//! and each rank receiving them straight into the matrix's arrays. The rows travel GPU to GPU
//! through NCCL where it joins the ranks' GPUs, else through host memory over MPI in pieces of
//! bounded size ([`Route`]); nothing else crosses the bus but the row ids asked for and the new
//! matrix's row offsets.

use super::words::Wire;
use super::{agree, pinned, Comm, MAX_MESSAGE};
use crate::error::{Error, Result};
use crate::gpu::matrix::DeviceCsr;
use crate::gpu::nccl::Link;
use crate::gpu::transfer::PINNED_WORDS;
use crate::gpu::Gpu;
use crate::scalar::Scalar;
use cudarc::driver::{CudaSlice, DeviceRepr};
use std::ops::Range;

/// How the rows of blocks kept on the ranks' GPUs travel between the ranks.
#[derive(Clone, Copy)]
pub(crate) enum Route<'a> {
    /// GPU to GPU, through NCCL.
    Nccl(&'a Link),
    /// Through host memory over the communicator, in pieces of at most `piece` entries (column
    /// indices, or values) a rank sends to all others together at a time, and receives: where
    /// NCCL cannot join the ranks' GPUs (ranks sharing a GPU, `--exchange mpi`, one rank).
    Host {
        /// Bounds the host memory an exchange takes beside the blocks, which stay on the GPUs.
        piece: usize,
    },
}

/// The entries of a piece of a [`Route::Host`] exchange unless a smaller stage is asked for.
pub(crate) const PIECE_ENTRIES: usize = 1 << 24;

/// The fewest entries of a piece whatever the stage: a piece costs collectives and waits, and
/// rounds of a few fetched entries exchange whole blocks where half of one is needed.
pub(crate) const MIN_PIECE_ENTRIES: usize = 1 << 12;

/// The entries of `span` that piece `r` of an exchange moves, `per` entries a piece.
fn piece(span: &Range<usize>, r: usize, per: usize) -> Range<usize> {
    let lo = span
        .start
        .saturating_add(r.saturating_mul(per))
        .min(span.end);
    lo..lo.saturating_add(per).min(span.end)
}

/// The pieces of `per` entries that move the longest of `spans`.
fn pieces(spans: impl Iterator<Item = usize>, per: usize) -> usize {
    spans.map(|n| n.div_ceil(per.max(1))).max().unwrap_or(0)
}

impl Route<'_> {
    /// Moves spans of device buffers between the ranks as [`Link::send_recv`] does: `send[q]`
    /// goes to rank `q`, which receives it into its span `recv[me]` of `into`; this rank's own
    /// spans are left alone.
    /// Collective; an error is every rank's (on the NCCL route, which cannot tell the others,
    /// every rank is ended).
    fn send_recv<E: DeviceRepr + Wire>(
        &self,
        comm: &dyn Comm,
        gpu: &Gpu,
        send: &[(&CudaSlice<E>, Range<usize>)],
        into: &mut CudaSlice<E>,
        recv: &[Range<usize>],
    ) -> Result<()> {
        let link = match *self {
            Route::Nccl(link) => link,
            Route::Host { piece } => return through_host(comm, gpu, piece, send, into, recv),
        };
        if let Err(e) = link.send_recv(send, into, recv) {
            // The other ranks may be inside the exchange: none can be told but by ending them all.
            let (me, p) = (comm.rank(), comm.size());
            comm.abort(2, &format!("rank {me} of {p}: {e}"));
        }
        Ok(())
    }
}

/// [`Route::send_recv`] through host memory: in each piece (of at most `entries` a rank sends,
/// and what the GPU's pinned buffers hold) every rank copies its next [`piece`] of every span
/// it sends into one pinned buffer, the ranks exchange them (one all-to-all, into the other
/// pinned buffer), and each copies what arrived into its spans of `into`. Collective.
fn through_host<E: DeviceRepr + Wire>(
    comm: &dyn Comm,
    gpu: &Gpu,
    entries: usize,
    send: &[(&CudaSlice<E>, Range<usize>)],
    into: &mut CudaSlice<E>,
    recv: &[Range<usize>],
) -> Result<()> {
    let (me, p) = (comm.rank(), comm.size());
    let per = entries.min(PINNED_WORDS / E::WORDS) / p.saturating_sub(1).max(1);
    let per = per.max(1);
    let others = || (0..p).filter(move |&q| q != me);
    let lengths = others().flat_map(|q| [send[q].1.len(), recv[q].len()]);
    let mut rounds = [pieces(lengths, per) as u64];
    comm.max_u64(&mut rounds);
    if rounds[0] == 0 {
        return Ok(());
    }
    let stage = "move rows between the ranks through host memory";
    let check = crate::gpu::prims::check;
    // A piece sends at most `per` entries of each span to each rank, and receives as much.
    let sends: usize = others().map(|q| send[q].1.len().min(per)).sum();
    let receives: usize = others().map(|q| recv[q].len().min(per)).sum();
    let mut lent = pinned::lend(comm, gpu, sends.max(receives) * E::WORDS, stage)?;
    let [out, got] = agree(comm, lent.words(stage))?;
    let s = &gpu.main;
    for r in 0..rounds[0] as usize {
        let mut sent = vec![0usize; p];
        let mut at = 0usize;
        let copied = others().try_for_each(|q| {
            let span = piece(&send[q].1, r, per);
            sent[q] = span.len() * E::WORDS;
            let dst = pinned::elements::<E>(&mut out[at..at + sent[q]], stage)?;
            at += sent[q];
            check(stage, s.memcpy_dtoh(&send[q].0.slice(span), dst))
        });
        agree(comm, copied.and_then(|()| check(stage, s.synchronize())))?;
        let spans: Vec<Range<usize>> = (0..p).map(|q| piece(&recv[q], r, per)).collect();
        let mut came: Vec<usize> = spans.iter().map(|span| span.len() * E::WORDS).collect();
        came[me] = 0;
        comm.all_to_all_into(&out[..at], &sent, got, &came);
        let mut at = 0usize;
        let placed = others().try_for_each(|q| {
            let src = pinned::elements::<E>(&mut got[at..at + came[q]], stage)?;
            at += came[q];
            check(
                stage,
                s.memcpy_htod(&*src, &mut into.slice_mut(spans[q].clone())),
            )
        });
        // The pinned buffers are refilled by the next piece only once the copies are done.
        let placed = placed.and_then(|()| check(stage, s.synchronize()));
        agree(comm, placed.and_then(|()| crate::interrupt::check()))?;
    }
    Ok(())
}

/// Where the rows of a matrix over a range of nodes lie and come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The matrix's row offsets (one row per node of the range; rows nobody asked for empty).
    pub row_ptr: Vec<u64>,
    /// The entries each rank's rows take in the matrix's arrays (this rank's: its own rows).
    pub from: Vec<Range<usize>>,
}

/// The layout of a matrix over the nodes `dest` that holds the rows `ask` (increasing, owned by
/// other ranks: `starts` are the blocks' first nodes) and this rank's (`me`) rows `own`
/// (increasing), every node's row holding `lengths[node]` entries. A rank's rows are
/// consecutive nodes among those held, so what it sends lands in one span.
pub(crate) fn layout(
    dest: Range<usize>,
    starts: &[usize],
    me: usize,
    ask: &[u32],
    own: &[u32],
    lengths: &[u32],
) -> Layout {
    let mut len = vec![0u64; dest.len()];
    for &v in ask.iter().chain(own) {
        len[v as usize - dest.start] = u64::from(lengths[v as usize]);
    }
    let mut row_ptr = Vec::with_capacity(dest.len() + 1);
    row_ptr.push(0u64);
    let mut run = 0u64;
    row_ptr.extend(len.iter().map(|&l| {
        run += l;
        run
    }));
    // The entries of the held nodes nodes[0], ..., nodes[last].
    let span = |nodes: &[u32]| -> Range<usize> {
        match (nodes.first(), nodes.last()) {
            (Some(&lo), Some(&hi)) => {
                row_ptr[lo as usize - dest.start] as usize
                    ..row_ptr[hi as usize + 1 - dest.start] as usize
            }
            _ => 0..0,
        }
    };
    let from = (0..starts.len() - 1)
        .map(|q| match q == me {
            true => span(own),
            false => span(&ask[owned_by(ask, starts, q)]),
        })
        .collect();
    Layout { row_ptr, from }
}

/// A rank asks another for its whole block once it needs at least this share (1 in this many)
/// of the block's entries: the owner then sends straight from the block's arrays, with no copy
/// gathered for this rank, for the price of the rows not needed (in MCL's dense iterations,
/// few; and the owner's memory holds no second copy of its block per asker).
const WHOLE_BLOCK_SHARE: u64 = 2;

/// `ask` (increasing, other ranks' nodes) with every owner's nodes replaced by its whole block
/// where `dest` holds the block and the asked rows take [`WHOLE_BLOCK_SHARE`] of its entries.
fn widened(
    ask: &[u32],
    starts: &[usize],
    me: usize,
    dest: &Range<usize>,
    lengths: &[u32],
) -> Vec<u32> {
    let entries = |nodes: &mut dyn Iterator<Item = usize>| -> u64 {
        nodes.map(|v| u64::from(lengths[v])).sum()
    };
    let mut out = Vec::with_capacity(ask.len());
    for q in 0..starts.len() - 1 {
        let part = &ask[owned_by(ask, starts, q)];
        let block = starts[q]..starts[q + 1];
        let held = dest.start <= block.start && block.end <= dest.end;
        let wanted = entries(&mut part.iter().map(|&v| v as usize));
        let whole = q != me
            && held
            && wanted > 0
            && part.len() < block.len()
            && wanted * WHOLE_BLOCK_SHARE >= entries(&mut block.clone());
        match whole {
            true => out.extend(block.map(|v| v as u32)),
            false => out.extend_from_slice(part),
        }
    }
    out
}

/// The positions in `nodes` (increasing) of the nodes rank `q`'s block holds.
fn owned_by(nodes: &[u32], starts: &[usize], q: usize) -> Range<usize> {
    let lo = nodes.partition_point(|&v| (v as usize) < starts[q]);
    let hi = nodes.partition_point(|&v| (v as usize) < starts[q + 1]);
    lo..hi
}

/// The prefix of the lengths of the rows of `nodes`: where each starts when they are laid one
/// after another (one more value than `nodes`, from 0).
fn offsets(nodes: &[u32], lengths: &[u32]) -> Vec<u64> {
    let mut at = Vec::with_capacity(nodes.len() + 1);
    at.push(0u64);
    let mut run = 0u64;
    at.extend(nodes.iter().map(|&v| {
        run += u64::from(lengths[v as usize]);
        run
    }));
    at
}

/// A matrix over the nodes `dest` holding the rows `ask` (increasing, none of this rank's)
/// fetched from their owners' GPUs and the rows `own` (increasing, this rank's) gathered from
/// its `block`, the other rows empty (see [`layout`]); with the matrix's row offsets (the
/// host's copy) and the bytes received. Every rank's block is on its GPU (`gpu`; the rows
/// travel by `route`); `starts` are the blocks' first nodes, `lengths` every node's row length.
/// Collective.
#[allow(clippy::too_many_arguments)]
pub(crate) fn assemble<T: Scalar>(
    comm: &dyn Comm,
    route: Route<'_>,
    gpu: &Gpu,
    starts: &[usize],
    block: &DeviceCsr<T>,
    lengths: &[u32],
    ask: &[u32],
    own: &[u32],
    dest: Range<usize>,
    poison: bool,
) -> Result<(DeviceCsr<T>, Vec<u64>, u64)> {
    let (me, p) = (comm.rank(), comm.size());
    let first = starts[me] as u32;
    let ask = widened(ask, starts, me, &dest, lengths);
    // The ids asked of each owner travel by MPI (one message an owner).
    let counts: Vec<usize> = (0..p).map(|q| owned_by(&ask, starts, q).len()).collect();
    let too_many = counts.iter().any(|&c| c > MAX_MESSAGE).then(|| {
        Error::Invalid(format!(
            "a rank asks another for more than {MAX_MESSAGE} rows at once; run on more ranks"
        ))
    });
    agree(comm, too_many.map_or(Ok(()), Err))?;
    let (asked, asked_counts) = comm.all_to_all_u32(&ask, &counts);
    // What this rank sends: the block itself to a rank that asked for all of it, the asked rows
    // gathered one after another (in the askers' order) to the others.
    let local = |nodes: &[u32]| -> Vec<u32> { nodes.iter().map(|&v| v - first).collect() };
    let nrows = block.nrows();
    let mut gathered: Vec<u32> = Vec::new();
    let mut spans = Vec::with_capacity(p);
    let mut from = 0usize;
    for &c in &asked_counts {
        let whole = c == nrows && nrows > 0;
        spans.push(match whole {
            true => None,
            false => {
                let lo = gathered.len();
                gathered.extend_from_slice(&asked[from..from + c]);
                Some(lo..gathered.len())
            }
        });
        from += c;
    }
    drop(asked);
    let at = offsets(&gathered, lengths);
    let plan = layout(dest, starts, me, &ask, own, lengths);
    // Every buffer made (or every rank told of one rank's failure) before any rank enters NCCL.
    let made = (|| {
        let (cols, vals) = block.gather_rows(gpu, &local(&gathered), &at, poison)?;
        let mut m = DeviceCsr::with_offsets(gpu, starts[p], &plan.row_ptr, poison)?;
        let mine = plan.from[me].clone();
        block.gather_rows_into(
            gpu,
            &local(own),
            &offsets(own, lengths),
            &mut m.col_idx.slice_mut(mine.clone()),
            &mut m.values.slice_mut(mine),
        )?;
        Ok((cols, vals, m))
    })();
    let (cols, vals, mut m) = agree(comm, made)?;
    let span = |s: &Option<Range<usize>>| match s {
        Some(r) => at[r.start] as usize..at[r.end] as usize,
        None => 0..block.nnz() as usize,
    };
    let send_cols: Vec<_> = spans
        .iter()
        .map(|s| (if s.is_some() { &cols } else { &block.col_idx }, span(s)))
        .collect();
    let send_vals: Vec<_> = spans
        .iter()
        .map(|s| (if s.is_some() { &vals } else { &block.values }, span(s)))
        .collect();
    route.send_recv(comm, gpu, &send_cols, &mut m.col_idx, &plan.from)?;
    route.send_recv(comm, gpu, &send_vals, &mut m.values, &plan.from)?;
    let entry = (4 + std::mem::size_of::<T>()) as u64;
    let received: usize = (0..p)
        .filter(|&q| q != me)
        .map(|q| plan.from[q].len())
        .sum();
    Ok((m, plan.row_ptr, received as u64 * entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_from_each_rank_land_in_one_span_each() {
        // Three ranks of nodes 0..3, 3..6, 6..9; rank 1 holds its node 4 and asks 1, 2, 7.
        let starts = [0, 3, 6, 9];
        let lengths = [5, 1, 2, 4, 3, 7, 1, 6, 2];
        let l = layout(0..9, &starts, 1, &[1, 2, 7], &[4], &lengths);
        assert_eq!(l.row_ptr, vec![0, 0, 1, 3, 3, 6, 6, 6, 12, 12]);
        assert_eq!(l.from, vec![0..3, 3..6, 6..12]);
        // A block moving: rank 2's new rows 2..7, 6 kept from its old block, the rest asked.
        let l = layout(2..7, &starts, 2, &[2, 3, 4, 5], &[6], &lengths);
        assert_eq!(l.row_ptr, vec![0, 2, 6, 9, 16, 17]);
        assert_eq!(l.from, vec![0..2, 2..16, 16..17]);
        // Nothing asked of rank 0, nothing of its own.
        let l = layout(0..9, &starts, 1, &[8], &[], &lengths);
        assert_eq!(l.from, vec![0..0, 0..0, 0..2]);
        // Rank 1's own rows 3 and 5 (not 4): one span, the empty row between them included.
        let l = layout(0..9, &starts, 1, &[0], &[3, 5], &lengths);
        assert_eq!(l.row_ptr, vec![0, 5, 5, 5, 9, 9, 16, 16, 16, 16]);
        assert_eq!(l.from, vec![0..5, 5..16, 0..0]);
        assert_eq!(offsets(&[3, 5], &lengths), vec![0, 4, 11]);
    }

    #[test]
    fn pieces_cover_every_span_once_in_order() {
        let spans = [0..0, 3..10, 10..11, 5..29];
        let per = 4;
        let rounds = pieces(spans.iter().map(|s| s.len()), per);
        assert_eq!(rounds, 6);
        for span in &spans {
            let parts: Vec<_> = (0..rounds).map(|r| piece(span, r, per)).collect();
            let joined: Vec<usize> = parts.iter().flat_map(|p| p.clone()).collect();
            assert_eq!(joined, span.clone().collect::<Vec<_>>(), "{span:?}");
            assert!(parts.iter().all(|p| p.len() <= per), "{parts:?}");
        }
        // Past a span's end a piece is empty, at the span's end.
        assert_eq!(piece(&(3..10), 5, per), 10..10);
        assert_eq!(pieces(std::iter::empty(), per), 0);
        assert_eq!(pieces([0, 0].into_iter(), per), 0);
    }

    #[test]
    fn a_rank_needing_half_a_block_asks_for_all_of_it() {
        let starts = [0, 3, 6, 9];
        let lengths = [5, 1, 2, 4, 3, 7, 1, 6, 2];
        // Of rank 0's 8 entries 5 are needed (all of it asked), of rank 2's 9 only 2 (as asked).
        assert_eq!(
            widened(&[0, 8], &starts, 1, &(0..9), &lengths),
            vec![0, 1, 2, 8]
        );
        // Half exactly is enough (7 of rank 1's 14); a block the matrix does not hold whole is
        // never widened; less than half is asked as it is.
        assert_eq!(widened(&[5], &starts, 0, &(0..9), &lengths), vec![3, 4, 5]);
        assert_eq!(widened(&[5], &starts, 0, &(4..9), &lengths), vec![5]);
        assert_eq!(widened(&[1, 2], &starts, 2, &(0..9), &lengths), vec![1, 2]);
        // Nothing asked of a rank stays nothing.
        assert_eq!(
            widened(&[], &starts, 0, &(0..9), &lengths),
            Vec::<u32>::new()
        );
    }
}
