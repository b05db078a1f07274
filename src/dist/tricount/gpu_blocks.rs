//! The count across ranks with every rank's block on its GPU, counted by the one-process
//! kernels ([`BlockCount`]): every vertex's degree and rank, the rows' lengths and then the
//! rows of U are summed across the ranks from each block's disjoint part (GPU to GPU through
//! NCCL where the ranks' GPUs are joined, else through host memory by MPI, where the rows are
//! gathered instead), so that every rank holds all of U, and each rank counts the triangles of
//! its pivots (dealt out by rank id modulo the ranks). Taken where every rank counts on its GPU
//! and U fits the exchange's bound and every rank's device memory; otherwise the caller counts
//! in rounds.

use super::{Exchange, Options};
use crate::dist::words::{elements_mut, Wire};
use crate::dist::{agree, pinned, Comm};
use crate::error::{Error, Result};
use crate::gpu::prims::uninit;
use crate::gpu::transfer::PINNED_WORDS;
use crate::gpu::Gpu;
use crate::tricount::gpu_block::{BlockCount, Mirrors};
use cudarc::driver::{CudaSlice, DeviceRepr};
use std::sync::Arc;
use std::time::Instant;

/// The block's rows: offsets (from 0) and the symmetric adjacency, rows of vertices `first..`
/// of a graph of `n` vertices.
pub(super) struct Block<'a> {
    pub ptr: &'a [u64],
    pub adj: &'a [u32],
    pub first: usize,
    pub n: usize,
}

/// What a rank's count found, and how long its steps took.
pub(super) struct RankCount {
    /// The triangles the rank counted.
    pub triangles: u64,
    /// The triangles through each vertex it found, when asked for.
    pub per_vertex: Option<Vec<u64>>,
    /// Rounds of the row exchange.
    pub rounds: u64,
    /// Each step's name and seconds, in order.
    pub steps: Vec<(&'static str, f64)>,
}

/// What [`count`] came to, alike on every rank.
pub(super) enum Fused {
    /// The rank's count.
    Counted(RankCount),
    /// All of U does not fit (on some rank): nothing was counted and the GPU holds nothing of it.
    TooLarge,
    /// The blocks, taken unchecked, are not a simple graph's: nothing was counted.
    NotSymmetric,
}

/// The rank's triangles (those whose middle vertex it owns), its per-vertex counts when asked
/// for, and the rounds of the exchange (1 across ranks, 0 alone). With `check_rows`, the blocks
/// need not be known symmetric: once U is summed, each rank looks for the mirrors of its rows'
/// entries in U, and of the entries of U's unsorted rows in its rows ([`BlockCount::mirrors`]).
/// Collective; every rank must count on its GPU.
pub(super) fn count(
    comm: &dyn Comm,
    gpu: Arc<Gpu>,
    block: &Block<'_>,
    opts: &Options,
    exchange: &mut Exchange,
    check_rows: bool,
) -> Result<Fused> {
    let (me, p) = (comm.rank(), comm.size());
    let mut steps = Vec::new();
    let mut clock = Instant::now();
    let mut lap = |name: &'static str| {
        steps.push((name, clock.elapsed().as_secs_f64()));
        clock = Instant::now();
    };
    let made = BlockCount::upload(
        Arc::clone(&gpu),
        block.ptr,
        block.adj,
        block.first,
        block.n,
        p,
        me,
        opts.gpu,
    );
    let mut b = agree(comm, made)?;
    lap("upload");
    let n = block.n;
    // Each sum's profile mark (a wait for the device, when profiling) is agreed on with the
    // step after it.
    sum(comm, &gpu, b.degrees_mut(), n)?;
    let ranked = b.mark("sum the degrees").and_then(|()| match me {
        0 => b.rank_by_degree(),
        _ => Ok(()),
    });
    agree(comm, ranked)?;
    sum(comm, &gpu, b.ranks_mut(), n)?;
    lap("rank");
    let own = agree(
        comm,
        b.mark("sum the ranks").and_then(|()| b.orient(check_rows)),
    )?;
    lap("orient");

    // All of U on every rank: within the exchange's bound and the GPU's memory?
    let mut totals = [own, block.adj.len() as u64];
    comm.sum_u64(&mut totals);
    let [entries, adjacency] = totals;
    if 2 * entries != adjacency {
        if check_rows {
            return Ok(Fused::NotSymmetric);
        }
        return Err(Error::Invalid(format!(
            "the adjacency is not symmetric: {entries} oriented edges from {adjacency} entries"
        )));
    }
    let received = entries - own;
    let room = gpu.memory().map(|(free, _)| free).unwrap_or(0);
    let fits =
        received <= opts.stage_entries as u64 && b.count_bytes(entries, opts.per_vertex) <= room;
    let mut short = [u64::from(!fits)];
    comm.max_u64(&mut short);
    if short[0] != 0 {
        return Ok(Fused::TooLarge);
    }
    let t = Instant::now();
    sum(comm, &gpu, b.lengths_mut(), n + 1)?;
    agree(comm, b.mark("sum the lengths"))?;
    let placed = match joined(comm) {
        true => {
            let placed = agree(comm, b.place())?;
            let rows = agree(comm, b.rows_mut())?;
            sum(comm, &gpu, rows, entries as usize)?;
            placed
        }
        false => gather_rows(comm, &gpu, &mut b, own, entries)?,
    };
    debug_assert_eq!(placed, entries);
    exchange.seconds += t.elapsed().as_secs_f64();
    exchange.bytes += 4 * received + 8 * (n - block.ptr.len().saturating_sub(1)) as u64;
    lap("exchange");
    agree(comm, b.mark("sum the rows"))?;
    if check_rows {
        let mut mirrors = agree(comm, b.mirrors())?.words();
        comm.sum_u64(&mut mirrors);
        if !Mirrors::from_words(mirrors).symmetric() {
            return Ok(Fused::NotSymmetric);
        }
        lap("check");
    }

    let (triangles, per_vertex, counted) = agree(comm, b.count(opts.per_vertex))?;
    steps.extend(counted);
    Ok(Fused::Counted(RankCount {
        triangles,
        per_vertex,
        rounds: u64::from(p > 1),
        steps,
    }))
}

/// Sums the first `len` elements of `buf` across the ranks, in place, where each element is
/// nonzero on at most one rank: GPU to GPU through NCCL where the ranks' GPUs are joined, else
/// through host memory ([`sum_through_host`]). Collective.
fn sum<T>(comm: &dyn Comm, gpu: &Gpu, buf: &mut CudaSlice<T>, len: usize) -> Result<()>
where
    T: DeviceRepr + Wire + NcclWord,
{
    if comm.size() == 1 || len == 0 {
        return Ok(());
    }
    #[cfg(feature = "mpi")]
    if let Some(link) = comm.gpu_link() {
        if let Err(e) = link.sum_in_place(buf, len) {
            // The other ranks may be inside the sum: none can be told but by ending them all.
            comm.abort(2, &format!("rank {} of {}: {e}", comm.rank(), comm.size()));
        }
        return Ok(());
    }
    sum_through_host(comm, gpu, buf, len)
}

/// Whether the ranks' GPUs are joined by NCCL, or there is one rank: the rows of U are then
/// placed by each block and summed; else gathered through host memory ([`gather_rows`]).
fn joined(comm: &dyn Comm) -> bool {
    #[cfg(feature = "mpi")]
    if comm.gpu_link().is_some() {
        return true;
    }
    comm.size() == 1
}

/// All of U on every rank from the blocks' own rows ([`BlockCount::own_rows`], `own` entries
/// here, `entries` in all), gathered through host memory instead of summed: a sum moves and
/// adds every entry of U on every rank, a gather only each rank's own. A round copies the
/// next piece of this rank's rows into the GPU's pinned buffer, gathers every rank's piece
/// (MPI writing into the same buffer), and copies each into its place among the blocks' rows,
/// which follow one another in block order, as the vertices; the rows are then laid out by rank
/// ([`BlockCount::place_gathered`]). Returns U's entries. Collective.
fn gather_rows(
    comm: &dyn Comm,
    gpu: &Gpu,
    b: &mut BlockCount,
    own: u64,
    entries: u64,
) -> Result<u64> {
    let stage = "gather the rows of U through host memory";
    let check = crate::gpu::prims::check;
    let (me, p) = (comm.rank(), comm.size());
    let (parts, _) = comm.all_gather_u64(&[own]);
    let starts: Vec<u64> = (parts.iter())
        .scan(0, |at, &c| {
            *at += c;
            Some(*at - c)
        })
        .collect();
    let s = &gpu.main;
    let mut all = agree(
        comm,
        uninit::<u32>(s, entries.max(1) as usize, false, stage),
    )?;
    let mut lent = pinned::lend(comm, gpu, PINNED_WORDS, stage)?;
    let [words, _] = agree(comm, lent.words(stage))?;
    // A round's piece of each rank's rows, and this rank's own piece before them.
    let per = (words.len() / (p + 1)) as u64;
    let (send, recv) = words.split_at_mut(per as usize);
    let rounds = parts.iter().map(|&c| c.div_ceil(per)).max().unwrap_or(0);
    let mine = agree(comm, b.own_rows())?;
    for r in 0..rounds {
        let piece = |q: usize| (r * per).min(parts[q])..((r + 1) * per).min(parts[q]);
        let counts: Vec<usize> = (0..p).map(|q| piece(q).count()).collect();
        let span = piece(me);
        let (from, to) = (span.start as usize, span.end as usize);
        let sent = &mut send[..counts[me]];
        let copied = match counts[me] {
            0 => Ok(()),
            _ => check(stage, s.memcpy_dtoh(&mine.slice(from..to), sent))
                .and_then(|()| check(stage, s.synchronize())),
        };
        agree(comm, copied)?;
        comm.all_gather_into(sent, recv, &counts);
        let mut at = 0;
        let mut placed = Ok(());
        for q in 0..p {
            let span = piece(q);
            let dst = (starts[q] + span.start) as usize..(starts[q] + span.end) as usize;
            if !dst.is_empty() && placed.is_ok() {
                let src = &recv[at..at + counts[q]];
                placed = check(stage, s.memcpy_htod(src, &mut all.slice_mut(dst)));
            }
            at += counts[q];
        }
        let placed = placed.and_then(|()| check(stage, s.synchronize()));
        agree(comm, placed.and_then(|()| crate::interrupt::check()))?;
    }
    drop(lent);
    agree(comm, b.place_gathered(all))
}

/// [`sum`] through host memory, a piece of the GPU's pinned buffer at a time: copied into it,
/// summed there by MPI as 64-bit words ([`sum_words`]), and copied back. Collective.
fn sum_through_host<T: DeviceRepr + Wire>(
    comm: &dyn Comm,
    gpu: &Gpu,
    buf: &mut CudaSlice<T>,
    len: usize,
) -> Result<()> {
    let stage = "sum across the ranks through host memory";
    let check = crate::gpu::prims::check;
    // A piece's words, and one more to pad an odd count of one-word elements.
    let per = (PINNED_WORDS - 1) / T::WORDS;
    let mut lent = pinned::lend(comm, gpu, (len * T::WORDS + 1).min(PINNED_WORDS), stage)?;
    let [words, _] = agree(comm, lent.words(stage))?;
    let s = &gpu.main;
    for lo in (0..len).step_by(per) {
        let span = lo..(lo + per).min(len);
        let used = span.len() * T::WORDS;
        let padded = used.next_multiple_of(2);
        let copied = pinned::elements::<T>(&mut words[..used], stage)
            .and_then(|dst| check(stage, s.memcpy_dtoh(&buf.slice(span.clone()), dst)))
            .and_then(|()| check(stage, s.synchronize()));
        agree(comm, copied)?;
        words[used..padded].fill(0);
        sum_words(comm, &mut words[..padded]);
        let placed = pinned::elements::<T>(&mut words[..used], stage)
            .and_then(|src| check(stage, s.memcpy_htod(&*src, &mut buf.slice_mut(span))))
            .and_then(|()| check(stage, s.synchronize()));
        agree(comm, placed.and_then(|()| crate::interrupt::check()))?;
    }
    Ok(())
}

/// What NCCL can sum (every type where the build has no NCCL).
#[cfg(feature = "mpi")]
use crate::gpu::nccl::Word as NcclWord;
#[cfg(not(feature = "mpi"))]
trait NcclWord {}
#[cfg(not(feature = "mpi"))]
impl<T> NcclWord for T {}

/// Sums `words` (an even count) across the ranks as 64-bit words, in place: a 64-bit element's
/// two words are one such word, and two 32-bit elements that are each nonzero on at most one
/// rank share one with no carry from one half into the other.
fn sum_words(comm: &dyn Comm, words: &mut [u32]) {
    match elements_mut::<u64>(words) {
        Some(wide) => comm.sum_u64(wide),
        // Pinned and vector buffers are aligned for 64-bit words; this copy is never taken.
        None => {
            let mut wide: Vec<u64> = words
                .chunks_exact(2)
                .map(|w| u64::from(w[0]) | u64::from(w[1]) << 32)
                .collect();
            comm.sum_u64(&mut wide);
            for (w, x) in words.chunks_exact_mut(2).zip(wide) {
                (w[0], w[1]) = (x as u32, (x >> 32) as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::on_ranks;

    #[test]
    fn disjoint_parts_sum_across_ranks_without_carries_between_halves() {
        // Each element nonzero on at most one of three ranks, the largest value included, the
        // last word's upper half the padding; summed where the words are aligned for 64-bit
        // words (the pinned buffer's case) and where they are not (behind one word).
        let parts = [
            [u32::MAX, 0, 0, 7, 0, 0],
            [0, u32::MAX, 0, 0, 1, 0],
            [0, 0, 5, 0, 0, 0],
        ];
        for from in [0, 1] {
            let sums = on_ranks(3, |c| {
                let mut v = vec![0u32; from];
                v.extend_from_slice(&parts[c.rank()]);
                sum_words(c, &mut v[from..]);
                v[from..].to_vec()
            });
            for v in sums {
                assert_eq!(v, [u32::MAX, u32::MAX, 5, 7, 1, 0], "{from}");
            }
        }
    }
}
