//! The count across ranks with every rank's block on its GPU, counted by the one-process
//! kernels ([`BlockCount`]): every rank ranks the vertices by (degree, id) from the gathered
//! degrees and orients its block on its GPU; each row goes to the ranks that count triangles
//! with it (the owners of the pivots it holds: pivots are dealt out by rank id modulo the
//! ranks), in one exchange (GPU to GPU through NCCL where the ranks' GPUs are joined, else
//! through host memory by MPI); each rank counts the triangles of its pivots. Taken where every
//! rank counts on its GPU and the rows fit one exchange and every rank's device memory;
//! otherwise the caller counts in rounds.

use super::{Exchange, Options};
use crate::dist::{agree, asked_entries_bound, Comm, MAX_MESSAGE};
use crate::error::Result;
use crate::gpu::prims::{check, uninit};
use crate::gpu::transfer::{download, upload_into};
use crate::gpu::Gpu;
use crate::tricount::gpu_block::{BlockCount, MAX_PARTS};
use cudarc::driver::CudaSlice;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// The block's rows: offsets (from 0) and the symmetric adjacency, rows of vertices `first..`.
pub(super) struct Block<'a> {
    pub ptr: &'a [u64],
    pub adj: &'a [u32],
    pub first: usize,
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

/// The rank's triangles (those whose middle vertex it owns), its per-vertex counts when asked
/// for, and the rounds of the exchange (1 where any rank fetched rows, else 0); `None` where the
/// fetch does not fit (on any rank): nothing was counted and the GPU holds nothing of it.
/// Collective; every rank must count on its GPU.
pub(super) fn count(
    comm: &dyn Comm,
    gpu: Arc<Gpu>,
    block: &Block<'_>,
    degree: &[u32],
    opts: &Options,
    exchange: &mut Exchange,
) -> Result<Option<RankCount>> {
    let (me, p) = (comm.rank(), comm.size());
    if p > MAX_PARTS {
        return Ok(None);
    }
    let clock = Instant::now();
    let (rank, _) = crate::tricount::orient::degree_ranks(degree.len(), |v| u64::from(degree[v]));
    let ranked = ("rank", clock.elapsed().as_secs_f64());
    let made = BlockCount::orient(
        Arc::clone(&gpu),
        block.ptr,
        block.adj,
        block.first,
        &rank,
        p,
        me,
        false,
    );
    let b = agree(comm, made)?;
    let t = Instant::now();
    // Each row to the ranks that need it: their rank ids and lengths by MPI, in the order sent.
    let dest = b.destinations();
    let send_rows: Vec<u32> = dest.concat();
    let counts: Vec<usize> = dest.iter().map(Vec::len).collect();
    let ids: Vec<u32> = send_rows
        .par_iter()
        .map(|&i| rank[block.first + i as usize])
        .collect();
    let lengths: Vec<u32> = send_rows
        .par_iter()
        .map(|&i| b.lengths()[i as usize])
        .collect();
    let listed = counts.iter().all(|&c| c <= MAX_MESSAGE);
    let mut unlisted = [u64::from(!listed)];
    comm.max_u64(&mut unlisted);
    if unlisted[0] != 0 {
        return Ok(None);
    }
    #[cfg_attr(not(feature = "mpi"), allow(unused_variables))]
    let (got_ids, got_counts) = comm.all_to_all_u32(&ids, &counts);
    let (got_lens, _) = comm.all_to_all_u32(&lengths, &counts);
    let received: u64 = got_lens.iter().map(|&l| u64::from(l)).sum();
    let sent: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
    let lists_step = ("exchange lists", t.elapsed().as_secs_f64());
    let rows_clock = Instant::now();

    #[cfg(feature = "mpi")]
    let link = comm.gpu_link();
    #[cfg(not(feature = "mpi"))]
    let link: Option<&()> = None;
    let bound = match link {
        Some(_) => opts.stage_entries,
        None => opts.stage_entries.min(asked_entries_bound(comm, 1)),
    } as u64;
    let room = gpu.memory().map(|(free, _)| free).unwrap_or(0);
    let want = b.count_bytes(received, got_ids.len() as u64, opts.per_vertex) + 4 * sent;
    let fits = received.max(sent) <= bound && want <= room;
    let mut short = [u64::from(!fits)];
    comm.max_u64(&mut short);
    if short[0] != 0 {
        return Ok(None);
    }

    // The rows: each rank gathers what it sends (in rank order) into one buffer, and receives
    // into one, a span from each rank in rank order.
    let made = (|| {
        let (send, at) = b.gather(&send_rows)?;
        let s = &gpu.main;
        let recv = uninit::<u32>(s, received as usize, false, "the received rows")?;
        Ok((send, at, recv))
    })();
    let (send, at, mut recv) = agree(comm, made)?;
    let send_spans = spans(&counts, |k| at[k] as usize);
    #[cfg(feature = "mpi")]
    if let Some(link) = link {
        let at = crate::tricount::orient::prefix(&got_lens);
        let recv_spans = spans(&got_counts, |k| at[k] as usize);
        let send: Vec<_> = send_spans.iter().map(|r| (&send, r.clone())).collect();
        if let Err(e) = link.send_recv(&send, &mut recv, &recv_spans) {
            // The other ranks may be inside the exchange: none can be told but by ending them all.
            comm.abort(2, &format!("rank {me} of {p}: {e}"));
        }
    }
    if link.is_none() {
        through_host(comm, &gpu, &send, &send_spans, &mut recv)?;
    }
    drop(send);
    exchange.seconds += t.elapsed().as_secs_f64();
    exchange.bytes += 8 * got_ids.len() as u64 + 4 * received;
    let exchanged = [
        lists_step,
        ("exchange rows", rows_clock.elapsed().as_secs_f64()),
    ];
    let oriented_steps = b.oriented_steps();
    let counted = b.count(&recv, &got_ids, &got_lens, opts.per_vertex);
    let (triangles, per_vertex, block_steps) = agree(comm, counted)?;
    // In the order taken: the ranking, the block's upload and orientation, the exchange, the
    // block's layout and count.
    let (oriented, counted) = block_steps.split_at(oriented_steps.min(block_steps.len()));
    let steps = [&[ranked][..], oriented, &exchanged, counted].concat();
    let mut rounds = [u64::from(!got_ids.is_empty())];
    comm.max_u64(&mut rounds);
    Ok(Some(RankCount {
        triangles,
        per_vertex,
        rounds: rounds[0],
        steps,
    }))
}

/// The spans of consecutive runs of `counts[q]` items, `at(k)` where item `k` starts (and
/// `at(total)` where the last ends).
fn spans(counts: &[usize], at: impl Fn(usize) -> usize) -> Vec<Range<usize>> {
    let mut k = 0;
    counts
        .iter()
        .map(|&c| {
            let r = at(k)..at(k + c);
            k += c;
            r
        })
        .collect()
}

/// The rows moved through host memory: each rank's buffer `send` (span `send_spans[q]` for
/// rank `q`) copied to the host, exchanged by the communicator, and what arrived copied into
/// `recv` (the spans from each rank one after another, in rank order). Collective.
fn through_host(
    comm: &dyn Comm,
    gpu: &Gpu,
    send: &CudaSlice<u32>,
    send_spans: &[Range<usize>],
    recv: &mut CudaSlice<u32>,
) -> Result<()> {
    let s = &gpu.main;
    let total = send_spans.last().map_or(0, |r| r.end);
    let host = agree(comm, download(gpu, s, send, total, "the rows to send"))?;
    let counts: Vec<usize> = send_spans.iter().map(|r| r.len()).collect();
    let (got, _) = comm.all_to_all_u32(&host, &counts);
    drop(host);
    let copied = upload_into(gpu, s, &got, recv, "the fetched rows")
        .and_then(|()| check("copy the fetched rows to the GPU", s.synchronize()));
    agree(comm, copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_the_counts() {
        let at = [0usize, 3, 5, 9, 10];
        assert_eq!(spans(&[2, 0, 2], |k| at[k]), vec![0..5, 5..5, 5..10]);
        assert_eq!(spans(&[], |k| at[k]), Vec::<Range<usize>>::new());
    }
}
