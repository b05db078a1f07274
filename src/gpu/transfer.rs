//! Copies between host and device memory. A copy from or to pageable memory runs at a fraction
//! of the bus's speed (the driver bounces it through a small pinned buffer of its own, one piece
//! at a time), so large copies go through two pinned staging buffers that the [`Gpu`] keeps:
//! the device copies through one while host threads fill or drain the other.

use super::prims::check;
use super::Gpu;
use crate::error::Result;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, PinnedHostSlice};
use rayon::prelude::*;
use std::sync::{Arc, MutexGuard};

/// Bytes of each of the two staging buffers a process pins first. Pinning takes time in
/// proportion to the bytes pinned, which a process that copies little (a small MCL run, one
/// upload of a graph) would mostly spend on buffers larger than it needs.
const STAGING_FIRST: usize = 16 << 20;

/// Bytes of each of the larger pair, which replaces the first once [`GROW_AFTER`] bytes have
/// gone through the staging buffers: larger pieces copy faster (fewer waits between the host's
/// half of a piece and the device's), which pays for their pinning on the copies that follow.
const STAGING_BYTES: usize = 64 << 20;

/// Bytes through the staging buffers (the copy about to start included) from which the larger
/// pair is used.
const GROW_AFTER: u64 = 1 << 30;

/// Downloads of at least this many bytes take the larger pair at once: the host threads that
/// map and fill the new memory of each piece gain most from larger pieces.
const LARGE_DOWNLOAD: u64 = 256 << 20;

/// Which way a copy goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Up,
    Down,
}

/// What the staging buffers are taken for.
#[derive(Clone, Copy, Debug)]
enum Use {
    /// A copy of this many bytes, this way.
    Copy(u64, Way),
    /// A loan ([`Gpu::pinned`]): its callers size their pieces by [`PINNED_WORDS`], so it
    /// takes the larger pair.
    Loan,
    /// The pair a copy of this many bytes up would take, pinned ahead of it
    /// ([`Gpu::prepare_upload`]); nothing moves.
    Ahead(u64),
}

/// Bytes of each staging buffer for a copy of `moving` bytes `way` after `moved` bytes went
/// through the staging buffers before it.
fn staging_bytes(moved: u64, moving: u64, way: Way) -> usize {
    let large = moved.saturating_add(moving) >= GROW_AFTER
        || (way == Way::Down && moving >= LARGE_DOWNLOAD);
    if large {
        STAGING_BYTES
    } else {
        STAGING_FIRST
    }
}

/// Copies of at most this many bytes go straight to or from pageable memory: staging them would
/// cost more than it saves.
const DIRECT_BYTES: usize = 4 << 20;

// The direct copies are smaller than the first pair, and the first pair than the larger one.
const _: () = assert!(DIRECT_BYTES < STAGING_FIRST && STAGING_FIRST < STAGING_BYTES);

/// Elements one host thread moves between the staging buffer and the caller's memory at a time.
const HOST_PIECE: usize = 1 << 18;

/// The two pinned staging buffers, allocated on the first large copy and kept by the [`Gpu`]
/// (pinning host memory costs milliseconds, every product and every MCL run would pay it).
pub(crate) struct Staging {
    buffers: [PinnedHostSlice<u8>; 2],
    /// Bytes that went through the staging buffers so far (through smaller ones too).
    moved: u64,
}

impl Staging {
    /// Two new pinned buffers of `bytes` bytes each.
    fn allocate(gpu: &Gpu, bytes: usize, moved: u64, stage: &str) -> Result<Staging> {
        // SAFETY: a staging buffer is only read where a copy has written it first.
        let alloc = || {
            check(stage, unsafe {
                gpu.ctx.alloc_pinned_with_flags::<u8>(bytes, 0)
            })
        };
        Ok(Staging {
            buffers: [alloc()?, alloc()?],
            moved,
        })
    }

    /// Bytes of each buffer.
    fn bytes(&self) -> usize {
        self.buffers[0].len()
    }
}

impl Gpu {
    /// Pins the staging buffers that a copy of `bytes` bytes up to the device will take, ahead
    /// of it: pinning takes time in proportion to the bytes pinned, which a caller can spend
    /// while it still reads what it will copy (an input loading). A copy small enough to go
    /// straight from pageable memory pins nothing.
    pub fn prepare_upload(&self, bytes: u64) -> Result<()> {
        if bytes <= DIRECT_BYTES as u64 {
            return Ok(());
        }
        let guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        self.allocated(guard, Use::Ahead(bytes), "pin the staging buffers")
            .map(drop)
    }

    /// The staging buffers for a copy of `moving` bytes `way`, allocated on first use (and
    /// replaced by the larger pair as [`staging_bytes`] says); held for one copy at a time.
    fn staging(
        &self,
        moving: usize,
        way: Way,
        stage: &str,
    ) -> Result<MutexGuard<'_, Option<Staging>>> {
        let guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        self.allocated(guard, Use::Copy(moving as u64, way), stage)
    }

    /// `guard`'s staging buffers for `usage`, allocated if they are not yet, or not as large as
    /// it needs; a copy's bytes are counted.
    fn allocated<'g>(
        &self,
        mut guard: MutexGuard<'g, Option<Staging>>,
        usage: Use,
        stage: &str,
    ) -> Result<MutexGuard<'g, Option<Staging>>> {
        let moved = guard.as_ref().map_or(0, |s| s.moved);
        let (bytes, moving) = match usage {
            Use::Copy(moving, way) => (staging_bytes(moved, moving, way), moving),
            Use::Loan => (STAGING_BYTES, 0),
            Use::Ahead(moving) => (staging_bytes(moved, moving, Way::Up), 0),
        };
        if guard.as_ref().map_or(true, |s| s.bytes() < bytes) {
            // The smaller pair is unpinned before the larger one is pinned.
            *guard = None;
            *guard = Some(Staging::allocate(self, bytes, moved, stage)?);
        }
        if let Some(s) = guard.as_mut() {
            s.moved = moved.saturating_add(moving);
        }
        Ok(guard)
    }
}

/// Words of each of the pinned buffers [`Gpu::pinned`] lends.
pub(crate) const PINNED_WORDS: usize = STAGING_BYTES / std::mem::size_of::<u32>();

/// Two pinned buffers lent out: the GPU's staging buffers (every copy through them waits
/// until this is dropped), or a pair of the loan's own, as large as asked, where those were
/// in use.
pub(crate) enum Pinned<'a> {
    Shared(MutexGuard<'a, Option<Staging>>),
    Own(Staging),
}

impl Pinned<'_> {
    /// The two buffers: [`PINNED_WORDS`] words each, or at least the words the loan asked for.
    pub(crate) fn words(&mut self, stage: &str) -> Result<[&mut [u32]; 2]> {
        match self {
            Pinned::Shared(guard) => match guard.as_mut() {
                Some(staging) => typed::<u32>(staging, stage),
                None => Err(crate::error::Error::gpu(stage, "no staging buffers")),
            },
            Pinned::Own(staging) => typed::<u32>(staging, stage),
        }
    }
}

impl Gpu {
    /// Lends two pinned buffers of at least `words` words each (at most [`PINNED_WORDS`]),
    /// host memory that copies to and from the device reach at the bus's speed, for a caller
    /// that moves data through them itself (across ranks, holding them through collectives):
    /// the staging buffers (allocated on first use), or a new pair of `words` words where
    /// another thread holds those. Never waiting for them keeps ranks that share one `Gpu` in
    /// a process (threads standing for ranks) from waiting on each other's loans.
    pub(crate) fn pinned(&self, words: usize, stage: &str) -> Result<Pinned<'_>> {
        match self.staging.try_lock() {
            Ok(guard) => self.allocated(guard, Use::Loan, stage).map(Pinned::Shared),
            Err(std::sync::TryLockError::Poisoned(p)) => self
                .allocated(p.into_inner(), Use::Loan, stage)
                .map(Pinned::Shared),
            Err(std::sync::TryLockError::WouldBlock) => {
                let bytes = words.clamp(1, PINNED_WORDS) * std::mem::size_of::<u32>();
                Staging::allocate(self, bytes, 0, stage).map(Pinned::Own)
            }
        }
    }
}

/// The two staging buffers as slices of `T` (pinned memory is page aligned, so none is lost).
fn typed<'a, T>(staging: &'a mut Staging, stage: &str) -> Result<[&'a mut [T]; 2]> {
    let [b0, b1] = &mut staging.buffers;
    let view = |b: &'a mut PinnedHostSlice<u8>| -> Result<&'a mut [T]> {
        let bytes = check(stage, b.as_mut_slice())?;
        // SAFETY: T is a plain number type (DeviceRepr) for which every bit pattern is a value,
        // and only elements a copy has written are read.
        let (head, body, _) = unsafe { bytes.align_to_mut::<T>() };
        if !head.is_empty() || body.is_empty() {
            return Err(crate::error::Error::gpu(
                stage,
                "the pinned staging buffer is not aligned for the copy",
            ));
        }
        Ok(body)
    };
    Ok([view(b0)?, view(b1)?])
}

/// Copies `src[..n]` to the end of `out`, growing it (an error, not an abort, when the host's
/// memory is short).
pub(crate) fn download_append<T: DeviceRepr + Copy + Send + Sync>(
    gpu: &Gpu,
    s: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    n: usize,
    what: &str,
    out: &mut Vec<T>,
) -> Result<()> {
    let stage = format!("copy {what} to the host");
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if n == 0 {
        return Ok(());
    }
    // Exact: a product in row batches grows its arrays once per batch (a remap, not a copy).
    out.try_reserve_exact(n).map_err(|_| {
        crate::io::limits::out_of_memory(&format!("{what} on the host"), bytes as u64)
    })?;
    if bytes <= DIRECT_BYTES {
        let v = check(&stage, s.clone_dtoh(&src.slice(..n)))?;
        out.extend_from_slice(&v);
        return Ok(());
    }
    let mut guard = gpu.staging(bytes, Way::Down, &stage)?;
    let Some(staging) = guard.as_mut() else {
        return Err(crate::error::Error::gpu(&stage, "no staging buffers"));
    };
    let mut buffers = typed::<T>(staging, &stage)?;
    let chunk = buffers[0].len();
    let base = out.len();
    let spare = &mut out.spare_capacity_mut()[..n];
    let pieces = n.div_ceil(chunk);
    let range = |j: usize| j * chunk..((j + 1) * chunk).min(n);
    // Queues piece j into its staging buffer; the event marks when it has landed.
    let fetch = |j: usize, buffers: &mut [&mut [T]; 2]| {
        let r = range(j);
        let dst = &mut buffers[j % 2][..r.len()];
        check(&stage, s.memcpy_dtoh(&src.slice(r), dst))?;
        check(&stage, s.record_event(None))
    };
    let copied = (|| {
        let mut landed = [Some(fetch(0, &mut buffers)?), None];
        for j in 0..pieces {
            if j + 1 < pieces {
                landed[(j + 1) % 2] = Some(fetch(j + 1, &mut buffers)?);
            }
            if let Some(ev) = landed[j % 2].take() {
                check(&stage, ev.synchronize())?;
            }
            let r = range(j);
            let host = &buffers[j % 2][..r.len()];
            spare[r]
                .par_chunks_mut(HOST_PIECE)
                .zip(host.par_chunks(HOST_PIECE))
                .for_each(|(d, h)| {
                    // The new memory's pages mapped in one call rather than a fault each.
                    crate::mem::prefault(d);
                    for (x, y) in d.iter_mut().zip(h) {
                        x.write(*y);
                    }
                });
        }
        Ok(())
    })();
    if copied.is_err() {
        // A copy may still be landing in a staging buffer the next transfer will use.
        let _ = s.synchronize();
        return copied;
    }
    // SAFETY: every element of out[base..base + n] was written above.
    unsafe { out.set_len(base + n) };
    Ok(())
}

/// Copies `src[..n]` to a new host vector.
pub(crate) fn download<T: DeviceRepr + Copy + Send + Sync>(
    gpu: &Gpu,
    s: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    n: usize,
    what: &str,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    download_append(gpu, s, src, n, what, &mut out)?;
    Ok(out)
}

/// Copies a host slice to a new device buffer.
pub(crate) fn upload<T: DeviceRepr + Copy + Send + Sync>(
    gpu: &Gpu,
    s: &Arc<CudaStream>,
    h: &[T],
    what: &str,
) -> Result<CudaSlice<T>> {
    let stage = format!("upload {what}");
    if h.is_empty() {
        // SAFETY: an empty buffer's one element is never read.
        return check(&stage, unsafe { s.alloc::<T>(1) });
    }
    if std::mem::size_of_val(h) <= DIRECT_BYTES {
        return check(&stage, s.clone_htod(h));
    }
    // SAFETY: every element is written by the copies below before the buffer is handed out.
    let mut dst = check(&stage, unsafe { s.alloc::<T>(h.len()) })?;
    upload_into(gpu, s, h, &mut dst, what)?;
    Ok(dst)
}

/// Copies a host slice to the start of the device buffer `dst` (at least as long), through the
/// staging buffers when it is large; queued on `s`, the host's side done when it returns.
pub(crate) fn upload_into<T: DeviceRepr + Copy + Send + Sync>(
    gpu: &Gpu,
    s: &Arc<CudaStream>,
    h: &[T],
    dst: &mut CudaSlice<T>,
    what: &str,
) -> Result<()> {
    let stage = format!("upload {what}");
    if h.is_empty() {
        return Ok(());
    }
    if std::mem::size_of_val(h) <= DIRECT_BYTES {
        return check(&stage, s.memcpy_htod(h, &mut dst.slice_mut(..h.len())));
    }
    let mut guard = gpu.staging(std::mem::size_of_val(h), Way::Up, &stage)?;
    let Some(staging) = guard.as_mut() else {
        return Err(crate::error::Error::gpu(&stage, "no staging buffers"));
    };
    let mut buffers = typed::<T>(staging, &stage)?;
    let chunk = buffers[0].len();
    let n = h.len();
    let copied = (|| {
        // The copy that last read each staging buffer: the host refills it only once it is done.
        let mut sent: [Option<cudarc::driver::CudaEvent>; 2] = [None, None];
        for j in 0..n.div_ceil(chunk) {
            let r = j * chunk..((j + 1) * chunk).min(n);
            if let Some(ev) = sent[j % 2].take() {
                check(&stage, ev.synchronize())?;
            }
            let buf = &mut buffers[j % 2][..r.len()];
            buf.par_chunks_mut(HOST_PIECE)
                .zip(h[r.clone()].par_chunks(HOST_PIECE))
                .for_each(|(d, x)| d.copy_from_slice(x));
            let buf = &buffers[j % 2][..r.len()];
            check(&stage, s.memcpy_htod(buf, &mut dst.slice_mut(r)))?;
            sent[j % 2] = Some(check(&stage, s.record_event(None))?);
        }
        for ev in sent.into_iter().flatten() {
            check(&stage, ev.synchronize())?;
        }
        Ok(())
    })();
    if let Err(e) = copied {
        let _ = s.synchronize();
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_pair_is_small_and_the_larger_one_comes_with_the_bytes() {
        for way in [Way::Up, Way::Down] {
            assert_eq!(staging_bytes(0, 20 << 20, way), STAGING_FIRST);
            assert_eq!(staging_bytes(0, GROW_AFTER, way), STAGING_BYTES);
            assert_eq!(
                staging_bytes(GROW_AFTER - (8 << 20), 8 << 20, way),
                STAGING_BYTES
            );
            assert_eq!(staging_bytes(u64::MAX, u64::MAX, way), STAGING_BYTES);
        }
        // An upload of most of a GiB (a graph, once) keeps the first pair; a download as
        // large takes the larger one.
        assert_eq!(staging_bytes(0, GROW_AFTER - 1, Way::Up), STAGING_FIRST);
        assert_eq!(
            staging_bytes(0, LARGE_DOWNLOAD - 1, Way::Down),
            STAGING_FIRST
        );
        assert_eq!(staging_bytes(0, LARGE_DOWNLOAD, Way::Down), STAGING_BYTES);
    }

    #[test]
    fn staging_pinned_ahead_is_the_pair_the_upload_takes_and_moves_nothing() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        let pair = |gpu: &Gpu| {
            let guard = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
            guard.as_ref().map(|s| (s.bytes(), s.moved))
        };
        gpu.prepare_upload(GROW_AFTER).unwrap();
        let (bytes, moved) = pair(&gpu).unwrap();
        assert_eq!(bytes, STAGING_BYTES);
        gpu.prepare_upload(GROW_AFTER).unwrap();
        gpu.prepare_upload(DIRECT_BYTES as u64).unwrap();
        // Other tests' copies may have gone through meanwhile, never fewer bytes.
        let (again, after) = pair(&gpu).unwrap();
        assert!(again == STAGING_BYTES && after >= moved);
        // A copy through the pinned pair lands whole.
        let h: Vec<u32> = (0..(20u32 << 20) / 4)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let s = &gpu.main;
        let d = upload(&gpu, s, &h, "a test's words").unwrap();
        assert_eq!(download(&gpu, s, &d, h.len(), "a test's words").unwrap(), h);
    }

    #[test]
    fn a_loan_while_the_staging_buffers_are_out_gets_its_own_pair() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        let stage = "test the loans";
        // The staging pair held here (once other tests' copies are done with it), as a rank's
        // loan holds it through a collective.
        let held = gpu.staging(0, Way::Up, stage).unwrap();
        // A loan from another thread, as a rank standing beside this one takes it: no waiting.
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut own = gpu.pinned(5000, stage).unwrap();
                assert!(matches!(own, Pinned::Own(_)));
                let [a, b] = own.words(stage).unwrap();
                assert!(a.len() >= 5000 && b.len() >= 5000 && a.len() < PINNED_WORDS);
                a.fill(7);
                b.copy_from_slice(a);
                assert!(b.iter().all(|&w| w == 7));
            });
        });
        drop(held);
        let mut lent = gpu.pinned(1, stage).unwrap();
        let shared = matches!(lent, Pinned::Shared(_));
        let [a, _] = lent.words(stage).unwrap();
        // Another test's copy may hold the pair right now, and then the loan is its own.
        assert!(a.len() == PINNED_WORDS || !shared && !a.is_empty());
    }
}
