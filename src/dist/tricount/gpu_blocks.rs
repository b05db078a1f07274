//! The count across ranks with every rank's block on its GPU, counted by the one-process
//! kernels ([`BlockCount`]): every vertex's degree and rank, the rows' lengths and then the
//! rows of U are made whole on every rank from each block's disjoint part (summed GPU to GPU
//! through NCCL where the ranks' GPUs are joined, else gathered GPU to GPU by CUDA IPC where
//! the ranks share a host, else through host memory by MPI),
//! so that every rank holds all of U, and each rank counts the triangles of
//! its pivots (dealt out by rank id modulo the ranks). Taken where every rank counts on its GPU
//! and U fits the exchange's bound and every rank's device memory; otherwise the caller counts
//! in rounds.

use super::{Exchange, Options};
use crate::dist::words::Wire;
use crate::dist::{agree, one_host, pinned, Comm};
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
    /// Whether the gathers went GPU to GPU by CUDA IPC.
    pub gpu_reads: bool,
    /// Why they did not, where they were to (every rank alike).
    pub no_gpu_reads: Option<String>,
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
    let mut gathers = Gathers::choose(comm, opts.gpu_reads);
    if comm.exchange() == crate::dist::Exchange::Nccl {
        // NCCL joins the GPUs on a thread of its own from the start: what of it the load and
        // the upload did not hide is waited for here, a step of its own.
        joined(comm);
        lap("join");
    }
    let n = block.n;
    let rows = block.ptr.len().saturating_sub(1);
    let (blocks, _) = comm.all_gather_u64(&[block.first as u64, rows as u64]);
    let by_vertex = vertex_parts(&blocks, n)?;
    let mut by_rank_zero = vec![0; p];
    by_rank_zero[0] = n;
    // Each share's profile mark (a wait for the device, when profiling) is agreed on with the
    // step after it.
    share(comm, &gpu, b.degrees_mut(), &by_vertex, &mut gathers)?;
    let ranked = b.mark("share the degrees").and_then(|()| match me {
        0 => b.rank_by_degree(),
        _ => Ok(()),
    });
    agree(comm, ranked)?;
    share(comm, &gpu, b.ranks_mut(), &by_rank_zero, &mut gathers)?;
    lap("rank");
    let own = agree(
        comm,
        b.mark("share the ranks")
            .and_then(|()| b.orient(check_rows)),
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
    let placed = match joined(comm) {
        true => {
            sum(comm, b.lengths_mut(), n + 1)?;
            agree(comm, b.mark("sum the lengths"))?;
            let placed = agree(comm, b.place())?;
            let rows = agree(comm, b.rows_mut())?;
            sum(comm, rows, entries as usize)?;
            placed
        }
        false => gather_rows(comm, &gpu, &mut b, &by_vertex, own, entries, &mut gathers)?,
    };
    debug_assert_eq!(placed, entries);
    exchange.seconds += t.elapsed().as_secs_f64();
    exchange.bytes += 4 * received + 8 * (n - rows) as u64;
    lap("exchange");
    agree(comm, b.mark("share the rows"))?;
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
        gpu_reads: gathers.gpu_reads,
        no_gpu_reads: gathers.why_not,
    }))
}

/// How many of the vertices each rank's block holds, in rank order, from every rank's `[first,
/// rows]`: the blocks must follow one another from vertex 0 to `n` (an empty block's first
/// vertex is not looked at), as the gathers by vertex place them.
fn vertex_parts(blocks: &[u64], n: usize) -> Result<Vec<usize>> {
    let mut at = 0usize;
    let mut parts = Vec::with_capacity(blocks.len() / 2);
    for (q, b) in blocks.chunks_exact(2).enumerate() {
        let (first, rows) = (b[0] as usize, b[1] as usize);
        if rows > 0 && first != at {
            return Err(Error::Invalid(format!(
                "rank {q}'s block starts at vertex {first}, not where the blocks before it end \
                 ({at})"
            )));
        }
        at += rows;
        parts.push(rows);
    }
    if at != n {
        return Err(Error::Invalid(format!(
            "the blocks hold {at} of the graph's {n} vertices"
        )));
    }
    Ok(parts)
}

/// Makes `buf` whole on every rank from the ranks' parts: `parts[q]` elements from where the
/// parts before it end, valid on rank q, zero elsewhere. Summed GPU to GPU through NCCL where
/// the ranks' GPUs are joined, else gathered ([`gather`]). Collective.
fn share<T>(
    comm: &dyn Comm,
    gpu: &Arc<Gpu>,
    buf: &mut CudaSlice<T>,
    parts: &[usize],
    gathers: &mut Gathers,
) -> Result<()>
where
    T: DeviceRepr + Wire + NcclWord,
{
    match joined(comm) {
        true => sum(comm, buf, parts.iter().sum()),
        false => gather(comm, gpu, buf, parts, gathers),
    }
}

/// How a count's gathers travel where NCCL does not join the ranks' GPUs: GPU to GPU by CUDA
/// IPC where every rank is on one host and the caller allows it (until a gather finds that some
/// rank cannot), else through host memory.
struct Gathers {
    gpu_reads: bool,
    why_not: Option<String>,
}

impl Gathers {
    /// Whether the ranks may read each other's GPUs: `allowed`, more than one rank, and one
    /// host named by every rank. Collective.
    fn choose(comm: &dyn Comm, allowed: bool) -> Gathers {
        let gpu_reads = allowed && comm.size() > 1 && one_host(comm);
        Gathers {
            gpu_reads,
            why_not: None,
        }
    }
}

/// Makes `buf` whole on every rank from the ranks' parts, as [`gather_through_host`] does:
/// straight from the other ranks' GPUs where they can be read ([`gather_between_gpus`]; the
/// first gather that cannot turns `gathers` to host memory for good). Collective.
fn gather<T: DeviceRepr + Wire>(
    comm: &dyn Comm,
    gpu: &Arc<Gpu>,
    buf: &mut CudaSlice<T>,
    parts: &[usize],
    gathers: &mut Gathers,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if gathers.gpu_reads {
        match gather_between_gpus(comm, gpu, buf, parts)? {
            None => return Ok(()),
            Some(why) => {
                gathers.gpu_reads = false;
                gathers.why_not = Some(why);
            }
        }
    }
    let _ = &gathers;
    gather_through_host(comm, gpu, buf, parts)
}

/// Makes `buf` whole on every rank from the ranks' parts, each rank copying the others' parts
/// from their GPUs (CUDA IPC): every rank exports a copy of its part, the ranks swap the
/// handles, and each maps the others' and copies from them. Returns why not (every rank alike,
/// `buf`'s own part untouched) where some rank could not export or map: the caller gathers
/// through host memory then. Collective; the ranks must share one host.
#[cfg(feature = "mpi")]
fn gather_between_gpus<T: DeviceRepr>(
    comm: &dyn Comm,
    gpu: &Arc<Gpu>,
    buf: &mut CudaSlice<T>,
    parts: &[usize],
) -> Result<Option<String>> {
    use crate::gpu::ipc::{Exported, Mapped, HANDLE_BYTES};
    let stage = "gather across the ranks GPU to GPU (CUDA IPC)";
    let me = comm.rank();
    let starts = part_starts(parts);
    let span = |q: usize| starts[q]..starts[q] + parts[q];
    // What this rank says: 0 (nothing to read), 1 and a handle, or 2 and why it failed.
    let done = crate::gpu::prims::check(stage, gpu.ctx.synchronize());
    let exported = done.and_then(|()| match parts[me] {
        0 => Ok(None),
        _ => Exported::copy_of(gpu, &buf.slice(span(me))).map(Some),
    });
    let said = match &exported {
        Ok(None) => vec![0],
        Ok(Some(e)) => [&[1u8][..], &e.handle()].concat(),
        Err(e) => [&[2u8][..], e.to_string().as_bytes()].concat(),
    };
    let (all, lengths) = comm.all_gather_bytes(&said);
    let mut handles = Vec::with_capacity(parts.len());
    let mut at = 0;
    for (q, &l) in lengths.iter().enumerate() {
        let told = &all[at..at + l];
        at += l;
        match told.split_first() {
            Some((1, h)) => match <[u8; HANDLE_BYTES]>::try_from(h) {
                Ok(h) => handles.push(Some(h)),
                Err(_) => return Ok(Some(format!("rank {q} sent a handle of {} bytes", h.len()))),
            },
            Some((0, _)) => handles.push(None),
            Some((_, why)) => {
                let why = String::from_utf8_lossy(why);
                return Ok(Some(format!("rank {q} of {}: {why}", parts.len())));
            }
            None => return Ok(Some(format!("rank {q} said nothing"))),
        }
    }
    // Every other rank's part mapped and copied to its place, then waited for.
    let size = std::mem::size_of::<T>();
    let mut mapped = Vec::new();
    let copied = (0..parts.len())
        .filter(|&q| q != me)
        .try_for_each(|q| {
            let Some(handle) = &handles[q] else {
                return Ok(());
            };
            let m = Mapped::open(gpu, handle, parts[q] * size)?;
            let copied = m.copy_into(0, &mut buf.slice_mut(span(q)));
            mapped.push(m);
            copied
        })
        .and_then(|()| crate::gpu::prims::check(stage, gpu.main.synchronize()));
    // No rank frees its export before every rank has read it.
    let failed = copied.as_ref().err().map(|e| format!("rank {me}: {e}"));
    let mut any = [u64::from(failed.is_some())];
    comm.max_u64(&mut any);
    drop(mapped);
    drop(exported);
    if any[0] == 0 {
        return Ok(None);
    }
    let (why, lengths) = comm.all_gather_bytes(failed.unwrap_or_default().as_bytes());
    let mut at = 0;
    let said: Vec<String> = (lengths.iter())
        .filter_map(|&l| {
            at += l;
            (l > 0).then(|| String::from_utf8_lossy(&why[at - l..at]).into_owned())
        })
        .collect();
    Ok(Some(said.join("; ")))
}

/// Where each part starts: the parts follow one another from 0.
fn part_starts(parts: &[usize]) -> Vec<usize> {
    (parts.iter())
        .scan(0, |at, &c| {
            *at += c;
            Some(*at - c)
        })
        .collect()
}

/// Sums the first `len` elements of `buf` across the ranks, in place, GPU to GPU through NCCL,
/// where each element is nonzero on at most one rank. Only where the ranks are [`joined`].
/// Collective.
fn sum<T>(comm: &dyn Comm, buf: &mut CudaSlice<T>, len: usize) -> Result<()>
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
    let _ = buf;
    Err(Error::Invalid(
        "a sum on the GPUs across ranks needs them joined by NCCL".into(),
    ))
}

/// Whether the ranks' GPUs are joined by NCCL, or there is one rank: what the blocks share is
/// then summed on the GPUs ([`sum`]), else gathered through host memory
/// ([`gather`]).
fn joined(comm: &dyn Comm) -> bool {
    #[cfg(feature = "mpi")]
    if comm.gpu_link().is_some() {
        return true;
    }
    comm.size() == 1
}

/// All of U on every rank from the blocks' own rows ([`BlockCount::own_rows`], `own` entries
/// here, `entries` in all) and their lengths by vertex (the blocks holding `vertex_parts` of
/// the vertices), gathered ([`gather`]): a sum would move and add all of U on every rank, a
/// gather moves each rank's own. The rows follow one another in block order, as the
/// vertices; [`BlockCount::place_gathered`] lays them out by rank. Returns U's entries.
/// Collective.
fn gather_rows(
    comm: &dyn Comm,
    gpu: &Arc<Gpu>,
    b: &mut BlockCount,
    vertex_parts: &[usize],
    own: u64,
    entries: u64,
    gathers: &mut Gathers,
) -> Result<u64> {
    let stage = "gather the rows of U";
    let check = crate::gpu::prims::check;
    let mut lengths = agree(comm, b.lengths_by_vertex())?;
    gather(comm, gpu, &mut lengths, vertex_parts, gathers)?;
    agree(comm, b.mark("gather the lengths"))?;
    let (counts, _) = comm.all_gather_u64(&[own]);
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let at: usize = counts[..comm.rank()].iter().sum();
    let s = &gpu.main;
    let mut all = agree(
        comm,
        uninit::<u32>(s, entries.max(1) as usize, false, stage),
    )?;
    // This rank's rows at their place among all, the others' gathered around them.
    let own = own as usize;
    let copied = b.own_rows().and_then(|mine| match own {
        0 => Ok(()),
        _ => check(stage, s.memcpy_dtod(mine, &mut all.slice_mut(at..at + own))),
    });
    agree(comm, copied)?;
    gather(comm, gpu, &mut all, &counts, gathers)?;
    agree(comm, b.place_gathered(lengths, all))
}

/// Makes `buf` whole on every rank from the ranks' parts through host memory: `parts[q]`
/// elements from where the parts before it end, valid on rank q. A round copies the next piece
/// of this rank's part into the GPU's pinned buffer, gathers every rank's piece (MPI writing
/// into the same buffer) and copies the others' to their places. Collective.
fn gather_through_host<T: DeviceRepr + Wire>(
    comm: &dyn Comm,
    gpu: &Gpu,
    buf: &mut CudaSlice<T>,
    parts: &[usize],
) -> Result<()> {
    let stage = "gather across the ranks through host memory";
    let check = crate::gpu::prims::check;
    let (me, p) = (comm.rank(), comm.size());
    let starts = part_starts(parts);
    // A round's piece of each rank's part, this rank's own piece before them, alike on every
    // rank (the buffers lent may differ in size between ranks).
    let largest = parts.iter().copied().max().unwrap_or(0);
    let per = largest.min(PINNED_WORDS / (p + 1) / T::WORDS).max(1);
    let mut lent = pinned::lend(comm, gpu, per * (p + 1) * T::WORDS, stage)?;
    let [words, _] = agree(comm, lent.words(stage))?;
    let (send, recv) = words.split_at_mut(per * T::WORDS);
    let rounds = parts.iter().map(|&c| c.div_ceil(per)).max().unwrap_or(0);
    let s = &gpu.main;
    for r in 0..rounds {
        let piece = |q: usize| {
            starts[q] + (r * per).min(parts[q])..starts[q] + ((r + 1) * per).min(parts[q])
        };
        let counts: Vec<usize> = (0..p).map(|q| piece(q).len() * T::WORDS).collect();
        let mine = piece(me);
        let sent = &mut send[..counts[me]];
        let copied = match mine.is_empty() {
            true => Ok(()),
            false => pinned::elements::<T>(sent, stage)
                .and_then(|dst| check(stage, s.memcpy_dtoh(&buf.slice(mine), dst)))
                .and_then(|()| check(stage, s.synchronize())),
        };
        agree(comm, copied)?;
        comm.all_gather_into(sent, recv, &counts);
        let mut at = 0;
        let mut placed = Ok(());
        for (q, &count) in counts.iter().enumerate() {
            let span = piece(q);
            if q != me && !span.is_empty() && placed.is_ok() {
                placed = pinned::elements::<T>(&mut recv[at..at + count], stage)
                    .and_then(|src| check(stage, s.memcpy_htod(&*src, &mut buf.slice_mut(span))));
            }
            at += count;
        }
        let placed = placed.and_then(|()| check(stage, s.synchronize()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_following_one_another_are_the_vertices_parts() {
        assert_eq!(
            vertex_parts(&[0, 3, 3, 0, 3, 6, 99, 0], 9).unwrap(),
            [3, 0, 6, 0]
        );
        assert_eq!(vertex_parts(&[0, 5], 5).unwrap(), [5]);
        assert_eq!(vertex_parts(&[], 0).unwrap(), Vec::<usize>::new());
        let gap = vertex_parts(&[0, 3, 4, 5], 9).unwrap_err().to_string();
        assert!(gap.contains("rank 1's block starts at vertex 4"), "{gap}");
        let short = vertex_parts(&[0, 3, 3, 5], 9).unwrap_err().to_string();
        assert!(short.contains("8 of the graph's 9"), "{short}");
    }
}
