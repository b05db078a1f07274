//! [`Comm`] over MPI (the `mpi` crate, rsmpi): one rank per process of `mpirun -n P`.
//!
//! Only the thread that initialised MPI calls it (MPI's "funneled" level): the rayon workers
//! of a rank never communicate.

use super::{Comm, MAX_MESSAGE};
use crate::error::{Error, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use rayon::iter::ParallelExtend;
use std::cell::RefCell;

/// The world communicator of an MPI run. MPI is finalised when it is dropped, so keep it until
/// the process has nothing more to say to the other ranks.
pub struct MpiComm {
    world: SimpleCommunicator,
    /// The send sides of the reductions, a piece at a time, kept from one to the next: a fresh
    /// copy of each piece costs its pages' first touch, more than the reduction itself (the
    /// sums through a GPU's pinned buffer reduce many pieces in a row). At most
    /// [`REDUCE_PIECE`] elements each.
    u64_pieces: RefCell<Vec<u64>>,
    f64_pieces: RefCell<Vec<f64>>,
    // Dropped after `world`: finalises MPI.
    _universe: Universe,
}

impl MpiComm {
    /// Initialises MPI (once per process). Fails when MPI was initialised already or cannot give
    /// the funneled threading level.
    pub fn init() -> Result<MpiComm> {
        let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| Error::Invalid("MPI was initialised twice".into()))?;
        if level < mpi::Threading::Funneled {
            return Err(Error::Invalid(
                "the MPI library cannot be called from a threaded program (it gave less than \
                 MPI_THREAD_FUNNELED)"
                    .into(),
            ));
        }
        Ok(MpiComm {
            world: universe.world(),
            u64_pieces: RefCell::default(),
            f64_pieces: RefCell::default(),
            _universe: universe,
        })
    }
}

/// The longest piece of a reduction, in elements: pieces of a few tens of MB reduce as fast
/// as longer ones, and their send side is kept between reductions.
const REDUCE_PIECE: usize = 1 << 22;
const _: () = assert!(REDUCE_PIECE <= MAX_MESSAGE);

/// MPI's 32-bit count of `n` elements. The algorithms stage their messages below
/// [`MAX_MESSAGE`]; a larger one is a bug in them, and the ranks cannot agree on it any more.
fn count(comm: &MpiComm, n: usize) -> Count {
    if n > MAX_MESSAGE || n > Count::MAX as usize {
        comm.abort(
            2,
            &format!("internal error: a message of {n} elements (staging should bound it)"),
        );
    }
    n as Count
}

fn displacements(comm: &MpiComm, counts: &[Count]) -> Vec<Count> {
    let mut at = 0usize;
    counts
        .iter()
        .map(|&c| {
            let d = count(comm, at);
            at += c as usize;
            d
        })
        .collect()
}

impl MpiComm {
    /// Reduces `values` across the ranks in place, a piece of at most [`REDUCE_PIECE`]
    /// elements at a time, each piece copied into `send` as MPI's send side (the `mpi` crate
    /// has no `MPI_IN_PLACE`).
    fn reduce<T: Equivalence + Copy>(
        &self,
        values: &mut [T],
        op: SystemOperation,
        send: &RefCell<Vec<T>>,
    ) {
        let mut send = send.borrow_mut();
        for piece in values.chunks_mut(REDUCE_PIECE) {
            send.clear();
            send.extend_from_slice(piece);
            self.world.all_reduce_into(&send[..], piece, op);
        }
    }

    fn gather<T: Equivalence + Copy + Default>(&self, mine: &[T]) -> (Vec<T>, Vec<usize>) {
        let n = count(self, mine.len());
        let mut counts = vec![0 as Count; self.size()];
        self.world.all_gather_into(&n, &mut counts[..]);
        let displs = displacements(self, &counts);
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let counts_out = counts.iter().map(|&c| c as usize).collect();
        // Every rank knows the total: when nothing travels, none calls MPI. (An empty byte
        // vector's address is 1, which OpenMPI reads as MPI_IN_PLACE and refuses for the
        // receive buffer.)
        if total == 0 {
            return (Vec::new(), counts_out);
        }
        let mut all = vec![T::default(); total];
        self.gather_into(mine, &mut all, &counts, &displs);
        (all, counts_out)
    }

    /// Every rank's `mine` (`counts[q]` elements from rank `q`, at `displs[q]`) into `recv`,
    /// which holds them all (at least one element).
    fn gather_into<T: Equivalence + Copy + Default>(
        &self,
        mine: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
    ) {
        // An empty contribution from a real address (an empty vector's address is 1, which
        // OpenMPI reads as MPI_IN_PLACE).
        let none = [T::default()];
        let mine = if mine.is_empty() { &none[..0] } else { mine };
        let mut part = PartitionMut::new(recv, counts, displs);
        self.world.all_gather_varcount_into(mine, &mut part);
    }
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn barrier(&self) {
        self.world.barrier();
    }
    fn sum_u64(&self, values: &mut [u64]) {
        self.reduce(values, SystemOperation::sum(), &self.u64_pieces);
    }
    fn max_u64(&self, values: &mut [u64]) {
        self.reduce(values, SystemOperation::max(), &self.u64_pieces);
    }
    fn sum_f64(&self, values: &mut [f64]) {
        self.reduce(values, SystemOperation::sum(), &self.f64_pieces);
    }
    fn max_f64(&self, values: &mut [f64]) {
        self.reduce(values, SystemOperation::max(), &self.f64_pieces);
    }
    fn all_gather_bytes(&self, mine: &[u8]) -> (Vec<u8>, Vec<usize>) {
        self.gather(mine)
    }
    fn all_gather_u32(&self, mine: &[u32]) -> (Vec<u32>, Vec<usize>) {
        self.gather(mine)
    }
    fn all_gather_u64(&self, mine: &[u64]) -> (Vec<u64>, Vec<usize>) {
        self.gather(mine)
    }
    fn all_to_all_u32(&self, send: &[u32], counts: &[usize]) -> (Vec<u32>, Vec<usize>) {
        let mut recv = Vec::new();
        let from = self.all_to_all_append(send, counts, &mut recv);
        (recv, from)
    }
    fn all_to_all_append(&self, send: &[u32], counts: &[usize], out: &mut Vec<u32>) -> Vec<usize> {
        let send_counts: Vec<Count> = counts.iter().map(|&c| count(self, c)).collect();
        let mut recv_counts = vec![0 as Count; self.size()];
        self.world
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let send_displs = displacements(self, &send_counts);
        let recv_displs = displacements(self, &recv_counts);
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let base = out.len();
        // Received in place, after what `out` holds (its fresh pages zeroed by every thread).
        out.reserve(total);
        out.par_extend(rayon::iter::repeat_n(0, total));
        {
            let part = Partition::new(send, &send_counts[..], &send_displs[..]);
            let recv = &mut out[base..];
            let mut rpart = PartitionMut::new(recv, &recv_counts[..], &recv_displs[..]);
            self.world.all_to_all_varcount_into(&part, &mut rpart);
        }
        recv_counts.iter().map(|&c| c as usize).collect()
    }
    fn all_to_all_into(
        &self,
        send: &[u32],
        send_counts: &[usize],
        recv: &mut [u32],
        recv_counts: &[usize],
    ) {
        let send_counts: Vec<Count> = send_counts.iter().map(|&c| count(self, c)).collect();
        let recv_counts: Vec<Count> = recv_counts.iter().map(|&c| count(self, c)).collect();
        let send_displs = displacements(self, &send_counts);
        let recv_displs = displacements(self, &recv_counts);
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let part = Partition::new(send, &send_counts[..], &send_displs[..]);
        let mut rpart = PartitionMut::new(&mut recv[..total], &recv_counts[..], &recv_displs[..]);
        self.world.all_to_all_varcount_into(&part, &mut rpart);
    }
    fn all_gather_into(&self, mine: &[u32], recv: &mut [u32], counts: &[usize]) {
        let counts: Vec<Count> = counts.iter().map(|&c| count(self, c)).collect();
        let displs = displacements(self, &counts);
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        // As in `gather`: when nothing travels, none calls MPI.
        if total == 0 {
            return;
        }
        self.gather_into(mine, &mut recv[..total], &counts, &displs);
    }
    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) {
        let root = self.world.process_at_rank(root as mpi::Rank);
        let mut len = data.len() as u64;
        root.broadcast_into(&mut len);
        data.resize(len as usize, 0);
        for piece in data.chunks_mut(MAX_MESSAGE) {
            root.broadcast_into(piece);
        }
    }
    fn abort(&self, code: i32, message: &str) -> ! {
        eprintln!(
            "gmcl: error: rank {} of {}: {message}",
            self.rank(),
            self.size()
        );
        self.world.abort(code)
    }
    fn exchange(&self) -> super::Exchange {
        super::Exchange::Mpi
    }
    fn host_name(&self) -> Option<String> {
        Some(self.host())
    }
}

impl MpiComm {
    /// Ends every rank with exit status `code` after rank 0 alone has said why (`message`,
    /// which every rank knows): the others wait for rank 0's abort. Collective.
    pub fn end_all(&self, code: i32, message: &str) -> ! {
        if self.rank() == 0 {
            eprintln!("gmcl: error: {message}");
            self.world.abort(code)
        }
        self.world.barrier();
        self.world.abort(code)
    }

    /// The name of this rank's host, as MPI reports it (ranks with the same name share a host).
    pub fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_default()
    }
}
