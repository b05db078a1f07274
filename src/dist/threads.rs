//! A [`Comm`] of threads, for tests: P threads of one process act as P ranks, so the
//! distributed algorithms are tested on several ranks without an MPI library. Every collective
//! is one all-gather of bytes through shared slots between two barriers.

use super::Comm;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Barrier, Mutex};

struct Shared {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
}

/// One rank of a group of threads made by [`ThreadComm::group`].
pub(crate) struct ThreadComm {
    rank: usize,
    shared: Arc<Shared>,
    /// The most words this rank sent in one all-to-all since it was last taken.
    largest_send: AtomicUsize,
}

/// `f` on each of `p` ranks (threads standing for them), the results in rank order.
pub(crate) fn on_ranks<R: Send>(p: usize, f: impl Fn(&ThreadComm) -> R + Sync) -> Vec<R> {
    let group = ThreadComm::group(p);
    std::thread::scope(|s| {
        let handles: Vec<_> = group.iter().map(|c| s.spawn(|| f(c))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

impl ThreadComm {
    /// `size` ranks, one per thread that will use them.
    pub(crate) fn group(size: usize) -> Vec<ThreadComm> {
        let shared = Arc::new(Shared {
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
        });
        (0..size)
            .map(|rank| ThreadComm {
                rank,
                shared: Arc::clone(&shared),
                largest_send: AtomicUsize::new(0),
            })
            .collect()
    }

    /// The most words this rank sent in one all-to-all since the last call (the bound a
    /// staged exchange keeps under MPI's message limit).
    pub(crate) fn take_largest_send(&self) -> usize {
        self.largest_send.swap(0, Relaxed)
    }

    /// Every rank's bytes, in rank order.
    fn exchange(&self, mine: Vec<u8>) -> Vec<Vec<u8>> {
        self.shared.slots.lock().unwrap()[self.rank] = mine;
        self.shared.barrier.wait();
        let all = self.shared.slots.lock().unwrap().clone();
        // Nobody writes the slots again before everyone has read them.
        self.shared.barrier.wait();
        all
    }

    fn gather_words<T: Copy>(
        &self,
        mine: &[T],
        to: impl Fn(T) -> u64,
        from: impl Fn(u64) -> T,
    ) -> Vec<Vec<T>> {
        let bytes = mine.iter().flat_map(|&x| to(x).to_le_bytes()).collect();
        self.exchange(bytes)
            .iter()
            .map(|b| {
                b.chunks_exact(8)
                    .map(|w| from(u64::from_le_bytes(w.try_into().unwrap())))
                    .collect()
            })
            .collect()
    }

    fn reduce<T: Copy>(
        &self,
        values: &mut [T],
        to: impl Fn(T) -> u64,
        from: impl Fn(u64) -> T,
        op: impl Fn(T, T) -> T,
    ) {
        let all = self.gather_words(values, to, from);
        for (i, v) in values.iter_mut().enumerate() {
            *v = all.iter().map(|r| r[i]).reduce(&op).unwrap();
        }
    }
}

fn flatten<T>(parts: Vec<Vec<T>>) -> (Vec<T>, Vec<usize>) {
    let counts = parts.iter().map(Vec::len).collect();
    (parts.into_iter().flatten().collect(), counts)
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.slots.lock().unwrap().len()
    }
    fn barrier(&self) {
        self.shared.barrier.wait();
    }
    fn sum_u64(&self, values: &mut [u64]) {
        self.reduce(values, |x| x, |x| x, |a, b| a + b);
    }
    fn max_u64(&self, values: &mut [u64]) {
        self.reduce(values, |x| x, |x| x, u64::max);
    }
    fn sum_f64(&self, values: &mut [f64]) {
        self.reduce(values, f64::to_bits, f64::from_bits, |a, b| a + b);
    }
    fn max_f64(&self, values: &mut [f64]) {
        self.reduce(values, f64::to_bits, f64::from_bits, f64::max);
    }
    fn all_gather_bytes(&self, mine: &[u8]) -> (Vec<u8>, Vec<usize>) {
        flatten(self.exchange(mine.to_vec()))
    }
    fn all_gather_u32(&self, mine: &[u32]) -> (Vec<u32>, Vec<usize>) {
        flatten(self.gather_words(mine, u64::from, |x| x as u32))
    }
    fn all_gather_u64(&self, mine: &[u64]) -> (Vec<u64>, Vec<usize>) {
        flatten(self.gather_words(mine, |x| x, |x| x))
    }
    fn all_to_all_u32(&self, send: &[u32], counts: &[usize]) -> (Vec<u32>, Vec<usize>) {
        self.largest_send.fetch_max(send.len(), Relaxed);
        // Each rank gathers everything and keeps its own piece of each sender's buffer.
        let (counts_all, _) =
            self.all_gather_u64(&counts.iter().map(|&c| c as u64).collect::<Vec<_>>());
        let data = self.gather_words(send, u64::from, |x| x as u32);
        let p = self.size();
        let mut out = Vec::new();
        let mut got = Vec::new();
        for (r, buf) in data.iter().enumerate() {
            let c = &counts_all[r * p..(r + 1) * p];
            let at: u64 = c[..self.rank].iter().sum();
            let n = c[self.rank];
            out.extend_from_slice(&buf[at as usize..(at + n) as usize]);
            got.push(n as usize);
        }
        (out, got)
    }
    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) {
        let all = self.exchange(data.clone());
        *data = all[root].clone();
    }
    fn abort(&self, code: i32, message: &str) -> ! {
        panic!("rank {} aborted with status {code}: {message}", self.rank)
    }
    fn exchange(&self) -> super::Exchange {
        super::Exchange::Mpi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_of_three_threads() {
        let group = ThreadComm::group(3);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        let r = c.rank() as u64;
                        let mut v = [r, 10 - r];
                        c.sum_u64(&mut v);
                        let mut m = [r as f64 * 0.5];
                        c.max_f64(&mut m);
                        let (g, counts) = c.all_gather_u32(&vec![r as u32; c.rank()]);
                        // Rank r sends r*10 + d to each rank d.
                        let send: Vec<u32> = (0..3).map(|d| (r * 10 + d) as u32).collect();
                        let (a, ac) = c.all_to_all_u32(&send, &[1, 1, 1]);
                        let mut b = if c.rank() == 2 { vec![7u8, 8] } else { vec![] };
                        c.broadcast_bytes(2, &mut b);
                        (v, m, g, counts, a, ac, b)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (rank, (v, m, g, counts, a, ac, b)) in results.into_iter().enumerate() {
            assert_eq!(v, [3, 27]);
            assert_eq!(m, [1.0]);
            assert_eq!((g, counts), (vec![1, 2, 2], vec![0, 1, 2]));
            let d = rank as u32;
            assert_eq!((a, ac), (vec![d, 10 + d, 20 + d], vec![1, 1, 1]));
            assert_eq!(b, vec![7, 8]);
        }
    }
}
