//! [`Comm`] whose large all-to-all exchanges go between the ranks' GPUs through NCCL, every
//! other collective through MPI ([`MpiComm`]).
//!
//! Each rank uploads what it sends through its pinned staging buffers, NCCL moves it GPU to GPU
//! (NVLink within a host), and each rank downloads what it received: two host↔device copies
//! at the bus's speed and one over NVLink, in place of MPI's copies through host memory. The
//! counts go by MPI first, so every rank knows what it receives. An exchange that needs more
//! device memory than a rank has goes by MPI instead (decided together), as do small ones.

use super::{Comm, Exchange, MpiComm, MAX_MESSAGE};
use crate::error::{Error, Result};
use crate::gpu::nccl::{self, Link, ID_BYTES};
use crate::gpu::Gpu;
use std::cell::{OnceCell, RefCell};
use std::sync::Arc;
use std::thread::JoinHandle;

/// By default, exchanges of fewer words than this (the most any rank sends or receives) go by
/// MPI: the copies to and from the GPU and NCCL's launch cost more than they save.
pub const MIN_WORDS: u64 = 1 << 16;

/// The ranks' communicator with NCCL between their GPUs.
pub struct NcclComm<'a> {
    // Dropped before MPI is finalised (the `MpiComm` outlives this borrow).
    link: Joining,
    mpi: &'a MpiComm,
    min_words: u64,
    asked: Exchange,
    notice: &'a dyn Fn(&str),
}

/// The link NCCL makes on a thread of its own while the command goes on (NCCL's start, its
/// kernels loaded and its connections made, takes longer than loading a large graph), taken
/// up by the ranks together where it is first used.
struct Joining {
    thread: RefCell<Option<JoinHandle<Result<Link>>>>,
    link: OnceCell<Option<Link>>,
}

impl Joining {
    /// Whether the link is no longer being made here: its thread done, or taken (up).
    fn settled(&self) -> bool {
        self.thread
            .borrow()
            .as_ref()
            .map_or(true, JoinHandle::is_finished)
    }

    /// What the thread made (its failures named, a panic included).
    fn joined(&self) -> Result<Link> {
        match self.thread.borrow_mut().take() {
            Some(thread) => outcome(Ok(thread), "join the ranks' GPUs"),
            None => Err(Error::gpu(JOIN_STAGE, "the link was already taken")),
        }
    }
}

/// What a thread started to `what` returned: its result, or why it did not start or ended in
/// a panic.
fn outcome<T>(started: std::io::Result<JoinHandle<Result<T>>>, what: &str) -> Result<T> {
    match started.map(JoinHandle::join) {
        Ok(Ok(made)) => made,
        Ok(Err(_)) => Err(Error::gpu(
            JOIN_STAGE,
            format!("the thread to {what} panicked"),
        )),
        Err(e) => Err(Error::gpu(JOIN_STAGE, format!("no thread to {what}: {e}"))),
    }
}

impl Drop for Joining {
    fn drop(&mut self) {
        // A link never used still ends with every rank's (NCCL's start is collective).
        let _ = self.thread.get_mut().take().map(JoinHandle::join);
    }
}

/// The stage named by a failure to join the ranks' GPUs.
const JOIN_STAGE: &str = "join the ranks' GPUs (NCCL)";

/// Where a rank stands: its GPU (the host and the GPU's PCI address), or why it cannot join.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Place {
    Gpu {
        host: String,
        address: String,
    },
    /// No GPU opens on this rank (its engine says so too).
    NoGpu(String),
    /// A GPU, but no NCCL.
    NoNccl(String),
}

/// Why the ranks cannot join their GPUs (the lowest failing rank's reason, or two ranks on
/// one GPU), or `None` when they can.
fn why_not(places: &[Place]) -> Option<String> {
    let p = places.len();
    for (r, place) in places.iter().enumerate() {
        if let Place::NoGpu(why) | Place::NoNccl(why) = place {
            return Some(format!("rank {r} of {p}: {why}"));
        }
    }
    for a in 0..p {
        for b in a + 1..p {
            if let (Place::Gpu { host, address }, true) = (&places[a], places[a] == places[b]) {
                return Some(format!(
                    "ranks {a} and {b} share one GPU ({address} on {host}); NCCL needs a GPU a \
                     rank"
                ));
            }
        }
    }
    None
}

/// One rank's place as it travels to the others: a kind byte, then the text.
fn encode(place: &Place) -> Vec<u8> {
    let (kind, text) = match place {
        Place::Gpu { host, address } => (0u8, format!("{host}\n{address}")),
        Place::NoGpu(why) => (1, why.clone()),
        Place::NoNccl(why) => (2, why.clone()),
    };
    [&[kind][..], text.as_bytes()].concat()
}

fn decode(bytes: &[u8]) -> Place {
    let text = String::from_utf8_lossy(bytes.get(1..).unwrap_or_default()).into_owned();
    match bytes.first() {
        Some(0) => {
            let (host, address) = text.split_once('\n').unwrap_or((&text, ""));
            Place::Gpu {
                host: host.into(),
                address: address.into(),
            }
        }
        Some(2) => Place::NoNccl(text),
        _ => Place::NoGpu(text),
    }
}

/// This rank's GPU (where NCCL can use it) and its place.
fn local_place(mpi: &MpiComm) -> (Option<Arc<Gpu>>, Place) {
    let gpu = match crate::gpu::device() {
        Ok(g) => g,
        Err(e) => return (None, Place::NoGpu(e.to_string())),
    };
    if let Some(why) = nccl::missing() {
        return (None, Place::NoNccl(why));
    }
    match gpu.pci_address() {
        Ok(address) => {
            let host = mpi.host();
            (Some(gpu), Place::Gpu { host, address })
        }
        Err(e) => (None, Place::NoNccl(e.to_string())),
    }
}

/// The communicator `asked` for over `mpi`: NCCL between the ranks' GPUs (`Some`), or MPI alone
/// (`None`: one rank, `Exchange::Mpi`, or `Auto` where NCCL cannot be had, `notice` told why
/// when every rank has a GPU). `Exchange::Nccl` where it cannot be had is an error naming the
/// rank and the cause. Exchanges of fewer than `min_words` words ([`MIN_WORDS`]) go by MPI, and
/// under `Auto` so do those made before every rank has joined. Opens each rank's GPU and
/// returns while NCCL joins them on a thread: where that fails, the link's first use
/// (collective, as every use is) falls back to MPI with a notice, or with `Exchange::Nccl`
/// ends every rank (exit status 3). Collective.
pub fn open<'a>(
    mpi: &'a MpiComm,
    asked: Exchange,
    min_words: u64,
    notice: &'a dyn Fn(&str),
) -> Result<Option<NcclComm<'a>>> {
    if asked == Exchange::Mpi || mpi.size() == 1 {
        return Ok(None);
    }
    // Rank 0 makes the communicator's id while its GPU opens (NCCL's network start takes about
    // as long), however the places turn out.
    let id = (mpi.rank() == 0 && nccl::missing().is_none()).then(|| {
        std::thread::Builder::new()
            .name("nccl-id".into())
            .spawn(nccl::unique_id)
    });
    let (gpu, mine) = local_place(mpi);
    let id = id.map(|started| outcome(started, "make NCCL's id"));
    let (all, counts) = mpi.all_gather_bytes(&encode(&mine));
    let mut at = 0;
    let places: Vec<Place> = counts
        .iter()
        .map(|&c| {
            at += c;
            decode(&all[at - c..at])
        })
        .collect();
    let every_gpu = !places.iter().any(|p| matches!(p, Place::NoGpu(_)));
    let refuse = |why: String, notice: &dyn Fn(&str)| -> Result<Option<NcclComm<'a>>> {
        match asked {
            Exchange::Nccl => Err(Error::EngineUnavailable(format!(
                "--exchange nccl: NCCL cannot join the ranks' GPUs: {why}"
            ))),
            _ => {
                if every_gpu {
                    notice(&format!("the ranks exchange rows through MPI: {why}"));
                }
                Ok(None)
            }
        }
    };
    if let Some(why) = why_not(&places) {
        return refuse(why, notice);
    }
    let Some(gpu) = gpu else {
        return refuse(format!("rank {} lost its GPU", mpi.rank()), notice);
    };
    // Rank 0 makes the communicator's id; every rank gets it (or rank 0's failure).
    let mut id = match id {
        Some(Ok(id)) => [&[0u8][..], &id].concat(),
        Some(Err(e)) => [&[1u8][..], e.to_string().as_bytes()].concat(),
        None => Vec::new(),
    };
    mpi.broadcast_bytes(0, &mut id);
    let id: [u8; ID_BYTES] = match (id.first(), id.get(1..).map(<[u8; ID_BYTES]>::try_from)) {
        (Some(0), Some(Ok(id))) => id,
        _ => {
            let why = String::from_utf8_lossy(id.get(1..).unwrap_or_default()).into_owned();
            return refuse(format!("rank 0: {why}"), notice);
        }
    };
    let (rank, size) = (mpi.rank(), mpi.size());
    let thread = std::thread::Builder::new()
        .name("nccl-join".into())
        .spawn(move || Link::join(gpu, rank, size, &id))
        .map_err(|e| Error::gpu(JOIN_STAGE, format!("no thread to join on: {e}")));
    match super::agree(mpi, thread) {
        Ok(thread) => Ok(Some(NcclComm {
            link: Joining {
                thread: RefCell::new(Some(thread)),
                link: OnceCell::new(),
            },
            mpi,
            min_words,
            asked,
            notice,
        })),
        Err(e) => refuse(e.to_string(), notice),
    }
}

impl NcclComm<'_> {
    /// The ranks' link once every rank has joined, or `None` where some rank could not and
    /// MPI carries the exchanges (`--exchange auto`: told once). The first call waits for the
    /// joining thread and agrees with the other ranks: collective.
    fn link(&self) -> Option<&Link> {
        self.link
            .link
            .get_or_init(|| match super::agree(self.mpi, self.link.joined()) {
                Ok(link) => Some(link),
                Err(e) if self.asked == Exchange::Nccl => self.mpi.end_all(
                    3,
                    &format!("--exchange nccl: NCCL cannot join the ranks' GPUs: {e}"),
                ),
                Err(e) => {
                    (self.notice)(&format!("the ranks exchange rows through MPI: {e}"));
                    None
                }
            })
            .as_ref()
    }

    /// Whether every rank's link is settled ([`Joining::settled`]): until then an exchange
    /// under `auto` goes by MPI rather than wait for NCCL's start (an exchange while the input
    /// loads would wait far longer than MPI takes to carry it). Collective.
    fn joined_everywhere(&self) -> bool {
        if self.link.link.get().is_some() {
            return true;
        }
        let mut joining = [u64::from(!self.link.settled())];
        self.mpi.max_u64(&mut joining);
        joining[0] == 0
    }

    /// Leaves the link to the end of the process, which follows: the driver takes NCCL's
    /// resources down with the process, where ending the communicator first would wait for
    /// NCCL's teardown (a large part of a short run's wall). Waits for the joining thread.
    pub fn end_with_process(mut self) {
        let taken = self.link.link.take().flatten();
        // A link never taken up is still joining: its thread's link, if it made one.
        if let Some(link) = taken.or_else(|| self.link.joined().ok()) {
            link.end_with_process();
        }
    }

    /// The exchange through NCCL, what this rank receives appended to `out`; `false` (and
    /// nothing done) when it goes by MPI instead (small, or a rank's GPU short of memory).
    /// Collective.
    fn through_gpus(
        &self,
        send: &[u32],
        counts: &[usize],
        recv_counts: &[usize],
        out: &mut Vec<u32>,
    ) -> Result<bool> {
        let received: usize = recv_counts.iter().sum();
        // Every rank learns the largest exchange first: a small one takes no device memory.
        let mut words = [send.len().max(received) as u64];
        self.mpi.max_u64(&mut words);
        // Under `auto`, what comes before NCCL has joined the GPUs goes by MPI.
        let joining = self.asked != Exchange::Nccl && !self.joined_everywhere();
        if words[0] < self.min_words || joining {
            return Ok(false);
        }
        let Some(link) = self.link() else {
            return Ok(false);
        };
        // Then whether any rank lacks room (or failed) for it.
        let bufs = link.buffers(send.len(), received);
        let mut short = [u64::from(!matches!(bufs, Ok(Some(_))))];
        self.mpi.max_u64(&mut short);
        let mut bufs = match bufs? {
            Some(b) if short[0] == 0 => b,
            _ => return Ok(false),
        };
        link.exchange(&mut bufs, send, counts, recv_counts, out)?;
        Ok(true)
    }
}

impl Comm for NcclComm<'_> {
    fn rank(&self) -> usize {
        self.mpi.rank()
    }
    fn size(&self) -> usize {
        self.mpi.size()
    }
    fn barrier(&self) {
        self.mpi.barrier()
    }
    fn sum_u64(&self, values: &mut [u64]) {
        self.mpi.sum_u64(values)
    }
    fn max_u64(&self, values: &mut [u64]) {
        self.mpi.max_u64(values)
    }
    fn sum_f64(&self, values: &mut [f64]) {
        self.mpi.sum_f64(values)
    }
    fn max_f64(&self, values: &mut [f64]) {
        self.mpi.max_f64(values)
    }
    fn all_gather_bytes(&self, mine: &[u8]) -> (Vec<u8>, Vec<usize>) {
        self.mpi.all_gather_bytes(mine)
    }
    fn all_gather_u32(&self, mine: &[u32]) -> (Vec<u32>, Vec<usize>) {
        self.mpi.all_gather_u32(mine)
    }
    fn all_gather_u64(&self, mine: &[u64]) -> (Vec<u64>, Vec<usize>) {
        self.mpi.all_gather_u64(mine)
    }
    fn all_to_all_u32(&self, send: &[u32], counts: &[usize]) -> (Vec<u32>, Vec<usize>) {
        let mut recv = Vec::new();
        let from = self.all_to_all_append(send, counts, &mut recv);
        (recv, from)
    }
    fn all_to_all_append(&self, send: &[u32], counts: &[usize], out: &mut Vec<u32>) -> Vec<usize> {
        // The counts by MPI (each under MAX_MESSAGE, as MPI's path requires too).
        if let Some(&c) = counts.iter().find(|&&c| c > MAX_MESSAGE) {
            self.abort(
                2,
                &format!("internal error: a message of {c} elements (staging should bound it)"),
            );
        }
        let words: Vec<u32> = counts.iter().map(|&c| c as u32).collect();
        let (got, _) = self.mpi.all_to_all_u32(&words, &vec![1; self.size()]);
        let recv_counts: Vec<usize> = got.iter().map(|&c| c as usize).collect();
        match self.through_gpus(send, counts, &recv_counts, out) {
            Ok(true) => recv_counts,
            Ok(false) => self.mpi.all_to_all_append(send, counts, out),
            // The ranks may be inside NCCL's exchange: none can be told but by ending them all.
            Err(e) => self.abort(2, &e.to_string()),
        }
    }
    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) {
        self.mpi.broadcast_bytes(root, data)
    }
    fn abort(&self, code: i32, message: &str) -> ! {
        self.mpi.abort(code, message)
    }
    fn exchange(&self) -> Exchange {
        match self.link.link.get() {
            // Some rank could not join: MPI carried the exchanges.
            Some(None) => Exchange::Mpi,
            _ => Exchange::Nccl,
        }
    }
    fn gpu_link(&self) -> Option<&Link> {
        self.link()
    }
    fn host_name(&self) -> Option<String> {
        Some(self.mpi.host())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str, address: &str) -> Place {
        Place::Gpu {
            host: host.into(),
            address: address.into(),
        }
    }

    #[test]
    fn ranks_join_only_with_a_gpu_each() {
        assert_eq!(
            why_not(&[at("a", "0000:18:00"), at("a", "0000:2a:00")]),
            None
        );
        // The same address on two hosts is two GPUs.
        assert_eq!(
            why_not(&[at("a", "0000:18:00"), at("b", "0000:18:00")]),
            None
        );
        let shared = why_not(&[at("a", "1"), at("a", "2"), at("a", "1")]).unwrap();
        assert!(
            shared.contains("ranks 0 and 2 share one GPU (1 on a)"),
            "{shared}"
        );
        let none = why_not(&[at("a", "1"), Place::NoGpu("no CUDA driver".into())]).unwrap();
        assert_eq!(none, "rank 1 of 2: no CUDA driver");
        let lib = why_not(&[Place::NoNccl("no NCCL".into()), at("a", "1")]).unwrap();
        assert_eq!(lib, "rank 0 of 2: no NCCL");
    }

    #[test]
    fn places_travel_as_they_are() {
        for p in [
            at("host-1", "0000:18:00"),
            Place::NoGpu("no CUDA driver".into()),
            Place::NoNccl("no NCCL library".into()),
        ] {
            assert_eq!(decode(&encode(&p)), p);
        }
    }
}
