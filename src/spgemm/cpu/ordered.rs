//! The single-pass schedule of the CPU engine: no symbolic pass.
//!
//! The classic symbolic pass walks every product once more only to learn where each row of `C`
//! starts. Here the threads instead claim small tasks (runs of rows) in order, compute each into a
//! per-thread buffer that stays in cache, and place finished tasks in task order: a task's place
//! in `C` is known as soon as every earlier task is finished, so placing is a prefix sum over
//! tasks, done under a lock, while the copying itself runs in parallel. A task that finishes
//! before an earlier one waits in a stash; the stash is bounded, and when it is full the threads
//! wait for the earliest task instead of claiming new ones.
//!
//! `C` is reserved at an upper bound of its size (products per row, capped by the column count
//! and the mask): address space only, since memory is committed as it is written. The
//! reservation is trimmed to the real size at the end. When it cannot be made the caller runs the
//! two passes instead.

use super::{Job, Workspace};
use crate::mem::SharedSlice;
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// A finished task: its entries and the end of each of its rows.
struct Buf<T> {
    cols: Vec<MaybeUninit<u32>>,
    vals: Vec<MaybeUninit<T>>,
    ends: Vec<u64>,
    len: usize,
}

impl<T> Default for Buf<T> {
    fn default() -> Self {
        Buf {
            cols: Vec::new(),
            vals: Vec::new(),
            ends: Vec::new(),
            len: 0,
        }
    }
}

/// What is placed so far.
struct Frontier<T> {
    /// The first task not yet placed, and where it goes.
    next: usize,
    base: usize,
    /// Finished tasks waiting for an earlier one, and their entry count.
    stash: BTreeMap<usize, Buf<T>>,
    stashed: usize,
    /// Buffers to reuse.
    free: Vec<Buf<T>>,
}

/// Raises the flag and wakes the waiting threads when dropped during a panic. The flag is set
/// under the lock the waiters check it under, so none can miss the wake-up.
struct WakeOnPanic<'a, X>(&'a AtomicBool, &'a Condvar, &'a Mutex<X>);

impl<X> Drop for WakeOnPanic<'_, X> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _st = lock(self.2);
            self.0.store(true, Ordering::Relaxed);
            self.1.notify_all();
        }
    }
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    // A panic elsewhere poisons the lock; the state itself is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Computes the rows of `tasks` (which cover the job's rows in order) into `C`, given an upper
/// bound on each row's entries. Returns `(row_ptr, col_idx, values)`, or `None` when `C` cannot
/// be reserved at its upper bound or an interrupt ([`crate::interrupt`]) stopped the tasks.
pub(super) fn run<T: Scalar>(
    job: &Job<'_, T>,
    bounds: &[u64],
    tasks: &[Range<usize>],
    threads: usize,
    stash_limit: usize,
) -> Option<(Vec<u64>, Vec<u32>, Vec<T>)> {
    let n = bounds.len();
    let total: u64 = bounds.par_iter().sum();
    let cap = usize::try_from(total).ok()?;
    let mut col_idx: Vec<u32> = Vec::new();
    let mut values: Vec<T> = Vec::new();
    col_idx.try_reserve_exact(cap).ok()?;
    values.try_reserve_exact(cap).ok()?;
    let mut row_ptr = vec![0u64; n + 1];

    let placed = {
        let out_c = SharedSlice::new_init(&mut col_idx.spare_capacity_mut()[..cap]);
        let out_v = SharedSlice::new_init(&mut values.spare_capacity_mut()[..cap]);
        let out_r = SharedSlice::new_init(&mut row_ptr[1..]);
        let claim = AtomicUsize::new(0);
        let state = Mutex::new(Frontier::<T> {
            next: 0,
            base: 0,
            stash: BTreeMap::new(),
            stashed: 0,
            free: Vec::new(),
        });
        let moved = Condvar::new();

        let failed = AtomicBool::new(false);
        let worker = || {
            // Should this thread panic (a bug), the others must not wait for its task forever.
            let _wake = WakeOnPanic(&failed, &moved, &state);
            let mut buf = Buf::<T>::default();
            loop {
                {
                    let mut st = lock(&state);
                    while st.stashed > stash_limit && !failed.load(Ordering::Relaxed) {
                        st = moved.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                }
                if crate::interrupt::requested() {
                    // Every thread stops; the unfinished C is dropped by the caller.
                    let _st = lock(&state);
                    failed.store(true, Ordering::Relaxed);
                    moved.notify_all();
                    break;
                }
                let t = claim.fetch_add(1, Ordering::Relaxed);
                let Some(r) = tasks.get(t) else { break };
                compute(job, r.clone(), bounds, &mut buf);

                // Place every task that is now next in line.
                let mut mine = Vec::new();
                {
                    let mut st = lock(&state);
                    st.stashed += buf.len;
                    st.stash.insert(t, std::mem::take(&mut buf));
                    loop {
                        let next = st.next;
                        let Some(b) = st.stash.remove(&next) else {
                            break;
                        };
                        st.stashed -= b.len;
                        mine.push((next, st.base, b));
                        st.base += mine.last().map_or(0, |m| m.2.len);
                        st.next += 1;
                    }
                    buf = st.free.pop().unwrap_or_default();
                }
                if !mine.is_empty() {
                    moved.notify_all();
                }
                for (t, base, b) in mine {
                    let r = &tasks[t];
                    // SAFETY: placed tasks get disjoint ranges of `C` (a prefix sum of their
                    // sizes, which stays within the reserved upper bound) and their own rows.
                    unsafe {
                        let dc = out_c.slice_mut(base, base + b.len);
                        let dv = out_v.slice_mut(base, base + b.len);
                        crate::mem::prefault(dc);
                        crate::mem::prefault(dv);
                        stream_copy(dc, &b.cols[..b.len]);
                        stream_copy(dv, &b.vals[..b.len]);
                        for (d, &e) in out_r.slice_mut(r.start, r.end).iter_mut().zip(&b.ends) {
                            *d = (base as u64) + e;
                        }
                    }
                    lock(&state).free.push(b);
                }
            }
        };
        (0..threads.max(1)).into_par_iter().for_each(|_| worker());
        if failed.load(Ordering::Relaxed) {
            return None;
        }
        let st = lock(&state);
        assert_eq!(st.next, tasks.len(), "every task placed");
        st.base
    };
    // SAFETY: the tasks cover every row, so the placed ranges tile `0..placed`, and each task's
    // buffer held exactly its entries, all written by the accumulators.
    unsafe {
        col_idx.set_len(placed);
        values.set_len(placed);
    }
    col_idx.shrink_to_fit();
    values.shrink_to_fit();
    Some((row_ptr, col_idx, values))
}

/// Copies `src` into `dst` (of equal length) with non-temporal stores where the platform has
/// them: `C` is written once and not read again soon, so its lines need not be read for
/// ownership first nor evict the accumulators and `B` from the caches.
fn stream_copy<E: Copy>(dst: &mut [E], src: &[E]) {
    assert_eq!(dst.len(), src.len());
    let size = std::mem::size_of::<E>();
    #[cfg(target_arch = "x86_64")]
    if size > 0 && 16 % size == 0 && std::mem::size_of_val(dst) >= 256 {
        // Elements before the first 16-byte boundary of `dst` (`align_offset` counts elements),
        // then whole 16-byte blocks.
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let body = (dst.len() - head) / (16 / size) * (16 / size);
        dst[..head].copy_from_slice(&src[..head]);
        let (d, s) = (
            dst[head..head + body].as_mut_ptr(),
            src[head..head + body].as_ptr(),
        );
        // SAFETY: SSE2 is part of x86-64. `d` is 16-byte aligned (`align_offset` above; the
        // element size divides 16, so the boundary falls between elements) and the loop writes
        // `body × size` bytes from `d` and reads as many from `s`, both within the sub-slices
        // they come from. The fence orders the streaming stores before whatever this thread does
        // next.
        #[allow(unused_unsafe)]
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
            let (d, s) = (d as *mut __m128i, s as *const __m128i);
            for q in 0..body * size / 16 {
                _mm_stream_si128(d.add(q), _mm_loadu_si128(s.add(q)));
            }
            _mm_sfence();
        }
        dst[head + body..].copy_from_slice(&src[head + body..]);
        return;
    }
    dst.copy_from_slice(src);
}

/// Computes the rows `r` into `buf`.
fn compute<T: Scalar>(job: &Job<'_, T>, r: Range<usize>, bounds: &[u64], buf: &mut Buf<T>) {
    let room: usize = bounds[r.clone()].iter().map(|&b| b as usize).sum();
    if buf.cols.len() < room {
        buf.cols.resize(room, MaybeUninit::uninit());
        buf.vals.resize(room, MaybeUninit::uninit());
    }
    buf.ends.clear();
    job.pool.with(|ws: &mut Workspace<T>| {
        job.fill_rows(ws, r, bounds, &mut buf.cols, &mut buf.vals, &mut buf.ends)
    });
    buf.len = buf.ends.last().map_or(0, |&e| e as usize);
}

#[cfg(test)]
mod tests {
    use super::stream_copy;

    #[test]
    fn stream_copy_copies_every_alignment_and_length() {
        let src: Vec<u64> = (0..600u64).map(|x| x * 0x9E37_79B9).collect();
        for off in 0..4 {
            for len in [0, 1, 31, 32, 63, 64, 65, 100, 257, 500] {
                let mut d32 = vec![0u32; 600];
                let s32: Vec<u32> = src.iter().map(|&x| x as u32).collect();
                stream_copy(&mut d32[off..off + len], &s32[off..off + len]);
                assert_eq!(&d32[off..off + len], &s32[off..off + len]);
                assert!(d32[..off].iter().chain(&d32[off + len..]).all(|&x| x == 0));
                let mut d64 = vec![0u64; 600];
                stream_copy(&mut d64[off..off + len], &src[off..off + len]);
                assert_eq!(&d64[off..off + len], &src[off..off + len]);
                assert!(d64[..off].iter().chain(&d64[off + len..]).all(|&x| x == 0));
                let mut d3 = vec![[0u8; 3]; 600];
                let s3: Vec<[u8; 3]> = src.iter().map(|&x| [x as u8, 1, 2]).collect();
                stream_copy(&mut d3[off..off + len], &s3[off..off + len]);
                assert_eq!(&d3[off..off + len], &s3[off..off + len]);
            }
        }
    }
}
