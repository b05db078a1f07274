//! Running across processes (ranks): the communicator the distributed algorithms talk through,
//! the distributed input, and the distributed algorithms.
//!
//! Algorithms never call a message-passing library themselves: they take a [`Comm`], whose
//! collectives are the only ones they need (reductions, gathers, an all-to-all exchange, a
//! broadcast, a barrier, and agreement on failure). [`SelfComm`] is the one-rank communicator
//! (every collective is a copy); with the `mpi` feature, `MpiComm` runs them over MPI, and
//! `nccl::NcclComm` sends the large all-to-alls between the ranks' GPUs.
//!
//! Failures: a rank that fails must not leave the others waiting in a collective. Every step
//! that can fail on one rank alone (reading its part of the file) ends in [`agree`], a
//! collective that turns one rank's error into the same error on every rank; rank 0 alone
//! reports it. [`Comm::abort`] is the last resort where ranks can no longer agree.

#[cfg(feature = "mpi")]
pub(crate) mod device_rows;
pub mod input;
pub mod labels;
pub mod matrix;
pub mod mcl;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "mpi")]
pub mod nccl;
pub mod npz;
mod owners;
mod pinned;
pub mod spgemm;
mod stored;
#[cfg(test)]
pub(crate) mod threads;
pub mod tricount;
mod words;

#[cfg(feature = "mpi")]
pub use self::mpi::MpiComm;

use crate::error::{Error, Result};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The collectives the distributed algorithms use. Every method is collective: all ranks call it,
/// in the same order, or the run hangs. Counts and displacements are in elements.
pub trait Comm {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Waits until every rank has reached it.
    fn barrier(&self);
    /// Element-wise sum over the ranks, of any length; every rank gets the result in `values`.
    fn sum_u64(&self, values: &mut [u64]);
    /// Element-wise maximum over the ranks; every rank gets the result in `values`.
    fn max_u64(&self, values: &mut [u64]);
    /// Element-wise sum over the ranks (the order of the sum is the library's).
    fn sum_f64(&self, values: &mut [f64]);
    /// Element-wise maximum over the ranks.
    fn max_f64(&self, values: &mut [f64]);
    /// Every rank's `mine`, concatenated in rank order, and how many elements each gave.
    fn all_gather_bytes(&self, mine: &[u8]) -> (Vec<u8>, Vec<usize>);
    /// [`Comm::all_gather_bytes`] of `u32`s.
    fn all_gather_u32(&self, mine: &[u32]) -> (Vec<u32>, Vec<usize>);
    /// [`Comm::all_gather_bytes`] of `u64`s.
    fn all_gather_u64(&self, mine: &[u64]) -> (Vec<u64>, Vec<usize>);
    /// Personalised exchange: `send` holds, in rank order, `counts[r]` elements for each rank `r`;
    /// returns what every rank sent to this one, in rank order, and the count from each.
    fn all_to_all_u32(&self, send: &[u32], counts: &[usize]) -> (Vec<u32>, Vec<usize>);
    /// [`Comm::all_to_all_u32`] with what this rank receives appended to `out` (written there
    /// directly where the transport can: no copy of a large exchange); returns the count from
    /// each rank.
    fn all_to_all_append(&self, send: &[u32], counts: &[usize], out: &mut Vec<u32>) -> Vec<usize> {
        let (got, from) = self.all_to_all_u32(send, counts);
        match out.is_empty() && out.capacity() < got.len() {
            true => *out = got,
            false => out.extend_from_slice(&got),
        }
        from
    }
    /// [`Comm::all_to_all_u32`] where every rank knows what it receives: `recv_counts[q]`
    /// elements from each rank `q` land in `recv`, one after another in rank order (no counts
    /// are exchanged, and nothing is allocated where the transport writes in place).
    fn all_to_all_into(
        &self,
        send: &[u32],
        send_counts: &[usize],
        recv: &mut [u32],
        recv_counts: &[usize],
    ) {
        let (got, from) = self.all_to_all_u32(send, send_counts);
        debug_assert_eq!(from, recv_counts);
        recv[..got.len()].copy_from_slice(&got);
    }
    /// [`Comm::all_gather_u32`] where every rank knows what it receives: `counts[q]` elements
    /// from each rank `q` land in `recv`, one after another in rank order (nothing allocated
    /// where the transport writes in place).
    fn all_gather_into(&self, mine: &[u32], recv: &mut [u32], counts: &[usize]) {
        let (got, from) = self.all_gather_u32(mine);
        debug_assert_eq!(from, counts);
        recv[..got.len()].copy_from_slice(&got);
    }
    /// Rank `root`'s `data` on every rank (other ranks' `data` is replaced).
    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>);
    /// Ends every rank at once with exit status `code`, after printing `message` once on stderr.
    /// For failures after which the ranks can no longer meet in a collective.
    fn abort(&self, code: i32, message: &str) -> !;
    /// How the all-to-all exchanges travel (`Mpi` for a communicator with nothing to exchange).
    fn exchange(&self) -> Exchange;
    /// The ranks' GPUs joined by NCCL, where blocks kept on the GPUs can travel between them
    /// ([`device_rows`]); `None` for communicators through host memory. Collective: every rank
    /// asks at the same point (NCCL's link may still be starting, and the first ask waits for
    /// it on every rank).
    #[cfg(feature = "mpi")]
    fn gpu_link(&self) -> Option<&crate::gpu::nccl::Link> {
        None
    }
    /// The name of this rank's host (ranks of one name share a host, where their GPUs may read
    /// each other's memory), or `None` where the communicator cannot tell.
    #[cfg(feature = "mpi")]
    fn host_name(&self) -> Option<String> {
        None
    }
}

/// How the ranks of a run move rows between them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exchange {
    /// NCCL where every rank has a GPU of its own and NCCL loads, MPI otherwise (never
    /// chosen by a communicator: what the command line asks for).
    #[default]
    Auto,
    /// MPI, through host memory.
    Mpi,
    /// NCCL, between the ranks' GPUs; an error where it cannot be had.
    Nccl,
}

impl Exchange {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Exchange::Auto => "auto",
            Exchange::Mpi => "mpi",
            Exchange::Nccl => "nccl",
        }
    }
}

impl std::str::FromStr for Exchange {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Exchange::Auto),
            "mpi" => Ok(Exchange::Mpi),
            "nccl" => Ok(Exchange::Nccl),
            _ => Err(Error::Invalid(format!(
                "unknown exchange '{s}': expected auto, mpi or nccl"
            ))),
        }
    }
}

/// A step of a run across ranks, timed on every rank.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Step {
    /// What the step does (each command's report lists its steps).
    pub name: &'static str,
    /// The slowest rank's seconds.
    pub slowest: f64,
    /// The fastest rank's seconds.
    pub fastest: f64,
}

/// The slowest and fastest rank's seconds of each of `steps` (this rank's, in order), which
/// every rank took alike (or none of). Collective.
pub fn timed_steps(comm: &dyn Comm, steps: &[(&'static str, f64)]) -> Vec<Step> {
    let mut slowest: Vec<f64> = steps.iter().map(|s| s.1).collect();
    let mut fastest: Vec<f64> = steps.iter().map(|s| -s.1).collect();
    if !steps.is_empty() {
        comm.max_f64(&mut slowest);
        comm.max_f64(&mut fastest);
    }
    steps
        .iter()
        .zip(slowest.into_iter().zip(fastest))
        .map(|(&(name, _), (slowest, fastest))| Step {
            name,
            slowest,
            fastest: -fastest,
        })
        .collect()
}

/// The largest number of elements one rank sends to another in one collective: MPI counts are
/// 32-bit, and the distributed algorithms stage their exchanges below this.
pub const MAX_MESSAGE: usize = 1 << 28;

/// The most entries of `words` 32-bit words each a rank may ask for in one exchange of rows,
/// so that an owner answering every other rank at once still sends one message of at most
/// [`MAX_MESSAGE`] words.
pub fn asked_entries_bound(comm: &dyn Comm, words: usize) -> usize {
    MAX_MESSAGE / words / comm.size().saturating_sub(1).max(1)
}

/// The communicator of a single process: every collective returns what this rank gave.
#[derive(Clone, Copy, Debug, Default)]
pub struct SelfComm;

impl Comm for SelfComm {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn barrier(&self) {}
    fn sum_u64(&self, _: &mut [u64]) {}
    fn max_u64(&self, _: &mut [u64]) {}
    fn sum_f64(&self, _: &mut [f64]) {}
    fn max_f64(&self, _: &mut [f64]) {}
    fn all_gather_bytes(&self, mine: &[u8]) -> (Vec<u8>, Vec<usize>) {
        (mine.to_vec(), vec![mine.len()])
    }
    fn all_gather_u32(&self, mine: &[u32]) -> (Vec<u32>, Vec<usize>) {
        (mine.to_vec(), vec![mine.len()])
    }
    fn all_gather_u64(&self, mine: &[u64]) -> (Vec<u64>, Vec<usize>) {
        (mine.to_vec(), vec![mine.len()])
    }
    fn all_to_all_u32(&self, send: &[u32], counts: &[usize]) -> (Vec<u32>, Vec<usize>) {
        let n = counts.first().copied().unwrap_or(0).min(send.len());
        (send[..n].to_vec(), vec![n])
    }
    fn broadcast_bytes(&self, _: usize, _: &mut Vec<u8>) {}
    fn abort(&self, code: i32, message: &str) -> ! {
        eprintln!("gmcl: error: {message}");
        std::process::exit(code)
    }
    fn exchange(&self) -> Exchange {
        Exchange::Mpi
    }
}

/// Runs `round` over `0..items` in consecutive ranges of at most `stage` items (at least one),
/// as many rounds on every rank as the rank with the most needs (a rank out of items gets empty
/// ranges), each round followed by the ranks' agreement on an interrupt: the skeleton of an
/// exchange whose messages are bounded. `round` must run the same collectives on every rank.
/// Collective.
pub(crate) fn in_rounds(
    comm: &dyn Comm,
    items: usize,
    stage: usize,
    mut round: impl FnMut(Range<usize>),
) -> Result<()> {
    let stage = stage.max(1);
    let mut rounds = [items.div_ceil(stage) as u64];
    comm.max_u64(&mut rounds);
    for r in 0..rounds[0] as usize {
        let lo = r.saturating_mul(stage).min(items);
        round(lo..(lo + stage).min(items));
        agree(comm, crate::interrupt::check())?;
    }
    Ok(())
}

/// Whether every rank names the same host (one page cache, one set of GPUs). Collective. False
/// across ranks where the communicator cannot tell (threads standing for ranks, a build without
/// `mpi`).
pub(crate) fn one_host(comm: &dyn Comm) -> bool {
    #[cfg(feature = "mpi")]
    {
        let mine = comm.host_name().unwrap_or_default();
        let (all, lengths) = comm.all_gather_bytes(mine.as_bytes());
        !mine.is_empty() && lengths.iter().all(|&l| l == mine.len()) && {
            all.chunks(mine.len()).all(|h| h == mine.as_bytes())
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = comm;
        false
    }
}

/// The same outcome on every rank: `Ok` when every rank's `local` is `Ok`, else the error of the
/// lowest failing rank, on every rank, with its rank named when there are several. Collective.
pub fn agree<T>(comm: &dyn Comm, local: Result<T>) -> Result<T> {
    let failed = u64::from(local.is_err());
    let mut flags = [failed];
    comm.sum_u64(&mut flags);
    if flags[0] == 0 {
        return local;
    }
    // The failing ranks' codes and messages travel; the lowest failing rank's is reported.
    let mine = match &local {
        Err(e) => encode_error(e),
        Ok(_) => Vec::new(),
    };
    let (all, counts) = comm.all_gather_bytes(&mine);
    let mut at = 0;
    for (rank, &len) in counts.iter().enumerate() {
        if len > 0 {
            let (code, message) = decode_error(&all[at..at + len]);
            if code == crate::error::INTERRUPTED_EXIT_STATUS {
                return Err(Error::Interrupted);
            }
            let message = if comm.size() > 1 {
                format!("rank {rank} of {}: {message}", comm.size())
            } else {
                message
            };
            return Err(Error::Remote { code, message });
        }
        at += len;
    }
    Err(Error::Remote {
        code: 2,
        message: "a rank failed without saying why".into(),
    })
}

fn encode_error(e: &Error) -> Vec<u8> {
    let mut out = e.exit_code().to_le_bytes().to_vec();
    out.extend_from_slice(e.to_string().as_bytes());
    out
}

fn decode_error(bytes: &[u8]) -> (i32, String) {
    let code = bytes
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map_or(2, i32::from_le_bytes);
    let message = String::from_utf8_lossy(bytes.get(4..).unwrap_or_default()).into_owned();
    (code, message)
}

/// Every rank's engine (`Cpu` or `Gpu`), in rank order, and one name for them all: the
/// engine's when every rank ran the same one, else "mixed". Collective.
pub fn rank_engines(comm: &dyn Comm, mine: crate::spgemm::EngineKind) -> (Vec<String>, String) {
    use crate::spgemm::EngineKind;
    let (codes, _) = comm.all_gather_bytes(&[u8::from(mine == EngineKind::Gpu)]);
    let engines: Vec<String> = codes
        .iter()
        .map(|&c| match c {
            1 => EngineKind::Gpu,
            _ => EngineKind::Cpu,
        })
        .map(|e| e.to_string())
        .collect();
    let all = match engines.iter().all(|e| *e == engines[0]) {
        true => engines[0].clone(),
        false => "mixed".to_string(),
    };
    (engines, all)
}

/// Where each chunk's items of each bucket start, given each chunk's count per bucket
/// (`counts[chunk][bucket]`) and where each bucket starts (`begin`): after the chunks before it
/// within the bucket.
pub(crate) fn chunk_starts(counts: &[Vec<usize>], begin: &[usize]) -> Vec<Vec<usize>> {
    let mut next = begin.to_vec();
    counts
        .iter()
        .map(|c| {
            let start = next.clone();
            for (n, &x) in next.iter_mut().zip(c) {
                *n += x;
            }
            start
        })
        .collect()
}

/// Where each of consecutive runs of `counts` elements starts: the exclusive prefix sum.
pub(crate) fn offsets(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |s, &c| {
            let start = *s;
            *s += c;
            Some(start)
        })
        .collect()
}

/// Rows `0..n` cut into `parts` consecutive blocks: evenly ([`Blocks::even`]: sizes that
/// differ by at most one, the first `n % parts` blocks one larger) or at given rows
/// ([`Blocks::at`]: blocks of about equal work). Block `p` is `start(p)..start(p + 1)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// The number of rows.
    pub n: usize,
    /// The number of blocks (ranks).
    pub parts: usize,
    /// The blocks' first rows, then `n` (`parts + 1` values), where they are not cut evenly.
    cut: Option<std::sync::Arc<[usize]>>,
}

impl Blocks {
    /// `n` rows in `parts` blocks of sizes that differ by at most one.
    pub fn even(n: usize, parts: usize) -> Blocks {
        Blocks {
            n,
            parts,
            cut: None,
        }
    }

    /// The blocks starting at `cut[p]` (`cut`: `parts + 1` nondecreasing rows from 0, the last
    /// the row count).
    pub fn at(cut: Vec<usize>) -> Blocks {
        debug_assert!(cut.len() >= 2 && cut[0] == 0 && cut.windows(2).all(|w| w[0] <= w[1]));
        Blocks {
            n: cut.last().copied().unwrap_or(0),
            parts: cut.len().saturating_sub(1),
            cut: Some(cut.into()),
        }
    }

    /// The first row of block `p` (`n` for `p == parts`).
    pub fn start(&self, p: usize) -> usize {
        if let Some(cut) = &self.cut {
            return cut[p];
        }
        let (q, r) = (self.n / self.parts, self.n % self.parts);
        p * q + p.min(r)
    }

    /// The rows of block `p`.
    pub fn range(&self, p: usize) -> std::ops::Range<usize> {
        self.start(p)..self.start(p + 1)
    }

    /// The block holding row `v` (`v < n`).
    pub fn owner(&self, v: usize) -> usize {
        if let Some(cut) = &self.cut {
            // The last block starting at or before v (empty blocks start where the next does).
            return cut[1..cut.len() - 1].partition_point(|&s| s <= v);
        }
        let (q, r) = (self.n / self.parts, self.n % self.parts);
        let big = r * (q + 1);
        if v < big {
            v / (q + 1)
        } else {
            r + (v - big) / q.max(1)
        }
    }
}

/// The distinct ids outside `mine` among `cols` (ids below `n`), increasing: marked in a bitmap
/// of the ids by every thread, then read out in order.
pub(crate) fn distinct_outside(cols: &[u32], n: usize, mine: Range<usize>) -> Vec<u32> {
    let marks: Vec<AtomicU64> = (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
    cols.par_iter()
        .with_min_len(1 << 16)
        .filter(|&&k| !mine.contains(&(k as usize)))
        .for_each(|&k| {
            let (word, bit) = (&marks[k as usize / 64], 1u64 << (k % 64));
            // Popular ids are named often: a read keeps their word shared between cores.
            if word.load(Relaxed) & bit == 0 {
                word.fetch_or(bit, Relaxed);
            }
        });
    marks
        .par_iter()
        .enumerate()
        .flat_map_iter(|(i, word)| {
            let mut w = word.load(Relaxed);
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    (i * 64) as u32 + b
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// The bitmap's ids are the sorted distinct ids outside the block, across words of the
    /// bitmap and for any block.
    #[test]
    fn distinct_outside_is_the_sorted_distinct_ids_outside_the_block() {
        let n = 300u32;
        let cols: Vec<u32> = (0..200u32).map(|i| (i * 37 + (i % 7) * 101) % n).collect();
        for (span, mine) in [
            (0..200, 100..140),
            (30..90, 0..40),
            (0..0, 0..40),
            (10..200, 260..300),
        ] {
            let mut want: Vec<u32> = cols[span.clone()]
                .iter()
                .copied()
                .filter(|&k| !mine.contains(&(k as usize)))
                .collect();
            want.sort_unstable();
            want.dedup();
            assert!(span.is_empty() || !want.is_empty());
            assert_eq!(distinct_outside(&cols[span], n as usize, mine), want);
        }
    }

    use super::*;

    #[test]
    fn blocks_cover_rows_and_owners_match() {
        for n in 0..40 {
            for parts in 1..7 {
                let b = Blocks::even(n, parts);
                assert_eq!(b.start(0), 0);
                assert_eq!(b.start(parts), n);
                for p in 0..parts {
                    let r = b.range(p);
                    assert!(r.len() == n / parts || r.len() == n / parts + 1);
                    for v in r {
                        assert_eq!(b.owner(v), p, "n {n} parts {parts} v {v}");
                    }
                }
            }
        }
    }

    #[test]
    fn blocks_cut_at_given_rows_own_their_rows() {
        let mut rng = crate::generate::rng::SplitMix64::new(5);
        for _ in 0..200 {
            let parts = 1 + (rng.next_u64() % 6) as usize;
            let n = (rng.next_u64() % 30) as usize;
            // Nondecreasing cut points, empty blocks included.
            let mut cut: Vec<usize> = (0..parts - 1)
                .map(|_| (rng.next_u64() % (n as u64 + 1)) as usize)
                .collect();
            cut.sort_unstable();
            let cut: Vec<usize> = [vec![0], cut, vec![n]].concat();
            let b = Blocks::at(cut.clone());
            assert_eq!((b.n, b.parts), (n, parts));
            for p in 0..parts {
                assert_eq!(b.range(p), cut[p]..cut[p + 1]);
                for v in b.range(p) {
                    assert_eq!(b.owner(v), p, "{cut:?} v {v}");
                }
            }
        }
    }

    #[test]
    fn one_rank_agrees_with_itself() {
        let c = SelfComm;
        assert_eq!(agree(&c, Ok(5)).unwrap(), 5);
        let e = agree::<()>(&c, Err(Error::Invalid("bad".into()))).unwrap_err();
        assert_eq!(e.to_string(), "bad");
        assert_eq!(e.exit_code(), 2);
        let e = agree::<()>(&c, Err(Error::EngineUnavailable("none".into()))).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let (all, counts) = c.all_to_all_u32(&[1, 2, 3], &[3]);
        assert_eq!((all, counts), (vec![1, 2, 3], vec![3]));
    }
}
