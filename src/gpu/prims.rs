//! Small device-wide building blocks: launch shapes, prefix sums, single-value reads, poisoning.

use super::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use std::sync::Arc;

/// Elements one block of the scan kernel covers (SCAN_ITEMS in kernels/scan.cu).
const SCAN_ITEMS: u64 = 4096;

/// Maps a driver error to gmcl's, naming the stage (and raises a fault injected by
/// [`super::fault`]).
pub(crate) fn check<T>(
    stage: &str,
    r: std::result::Result<T, cudarc::driver::DriverError>,
) -> Result<T> {
    let v = r.map_err(|e| Error::gpu(stage, e))?;
    // A fault injected here drops `v`, freeing what the call took, as a real failure would.
    super::fault::trip(stage)?;
    Ok(v)
}

/// Whether an error is the device running out of memory (the caller then works in smaller
/// batches).
pub(crate) fn is_out_of_memory(e: &Error) -> bool {
    matches!(e, Error::Gpu { message, .. } if message.contains("CUDA_ERROR_OUT_OF_MEMORY"))
}

/// A launch of `blocks` blocks of `threads` threads with `shared` bytes of dynamic shared memory.
pub(crate) fn shape(blocks: u64, threads: u32, shared: u64) -> Result<LaunchConfig> {
    if blocks == 0 || blocks > i32::MAX as u64 {
        return Err(Error::gpu(
            "launch",
            format!("{blocks} blocks is outside what one launch can take"),
        ));
    }
    Ok(LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared as u32,
    })
}

/// A grid-stride launch over `n` items: enough blocks to fill the GPU, no more than needed.
pub(crate) fn strided(gpu: &Gpu, n: u64, threads: u32) -> LaunchConfig {
    let blocks = n
        .div_ceil(threads as u64)
        .clamp(1, gpu.multiprocessors() as u64 * 16);
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A buffer of `n` zeros.
pub(crate) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
    what: &str,
) -> Result<CudaSlice<T>> {
    check(
        &format!("allocate {what}"),
        stream.alloc_zeros::<T>(n.max(1)),
    )
}

/// A buffer of `n` elements whose bytes are all 0xFF when `poison` is set (so a kernel that
/// fails to write an element leaves a value no correct run produces), else uninitialised.
pub(crate) fn uninit<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    n: usize,
    poison: bool,
    what: &str,
) -> Result<CudaSlice<T>> {
    let stage = format!("allocate {what}");
    // SAFETY: every element is written by a kernel before it is read (or poisoned below).
    let mut s = check(&stage, unsafe { stream.alloc::<T>(n.max(1)) })?;
    if poison {
        let bytes = s.num_bytes();
        let (ptr, _sync) = s.device_ptr_mut(stream);
        // SAFETY: ptr addresses `bytes` bytes of this allocation, on this stream.
        check(&stage, unsafe {
            cudarc::driver::result::memset_d8_async(ptr, 0xFF, bytes, stream.cu_stream())
        })?;
    }
    Ok(s)
}

/// Copies a host slice to a new device buffer.
pub(crate) fn upload<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    h: &[T],
    what: &str,
) -> Result<CudaSlice<T>> {
    if h.is_empty() {
        return check(&format!("upload {what}"), unsafe { stream.alloc::<T>(1) });
    }
    check(&format!("upload {what}"), stream.clone_htod(h))
}

/// Reads element `i` of a device buffer (waits for the stream).
pub(crate) fn read_at(
    stream: &Arc<CudaStream>,
    s: &CudaSlice<u64>,
    i: usize,
    what: &str,
) -> Result<u64> {
    let v = check(
        &format!("read {what}"),
        stream.clone_dtoh(&s.slice(i..i + 1)),
    )?;
    Ok(v[0])
}

/// Replaces `data[0..n]` by its exclusive prefix sum, on `stream`. Callers keep one extra slot at
/// the end holding 0, which then receives the total.
pub(crate) fn exclusive_scan(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    data: &mut CudaSlice<u64>,
    n: u64,
    what: &str,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let stage = format!("prefix sum of {what}");
    let blocks = n.div_ceil(SCAN_ITEMS);
    let mut totals = zeros::<u64>(stream, blocks as usize + 1, &stage)?;
    let f = gpu.function("scan_blocks_u64")?;
    // SAFETY: the kernel reads and writes data[0..n] and totals[0..blocks].
    check(&stage, unsafe {
        stream
            .launch_builder(f)
            .arg(&mut *data)
            .arg(&n)
            .arg(&mut totals)
            .launch(shape(blocks, 1024, 0)?)
    })?;
    if blocks > 1 {
        exclusive_scan(gpu, stream, &mut totals, blocks, what)?;
        let f = gpu.function("scan_add_u64")?;
        // SAFETY: as above; totals now holds each block's offset.
        check(&stage, unsafe {
            stream
                .launch_builder(f)
                .arg(&mut *data)
                .arg(&n)
                .arg(&totals)
                .launch(shape(blocks, 1024, 0)?)
        })?;
    }
    Ok(())
}

/// Bytes of each pinned staging buffer of [`download`].
const STAGING_BYTES: usize = 64 << 20;

/// Copies `src[..n]` to a new host vector through two pinned staging buffers: the device copies
/// into one while host threads move the other into the vector (a plain copy from pageable memory
/// runs at a fraction of the bus's speed).
pub(crate) fn download<T: DeviceRepr + ValidAsZeroBits + Copy + Send + Sync>(
    gpu: &Gpu,
    s: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    n: usize,
    what: &str,
) -> Result<Vec<T>> {
    use rayon::prelude::*;
    let stage = format!("copy {what} to the host");
    let chunk = (STAGING_BYTES / std::mem::size_of::<T>()).max(1);
    if n <= chunk {
        if n == 0 {
            return Ok(Vec::new());
        }
        return check(&stage, s.clone_dtoh(&src.slice(..n)));
    }
    // SAFETY: the staging buffers are written by the device before they are read.
    let alloc = || {
        check(&stage, unsafe {
            gpu.ctx.alloc_pinned_with_flags::<T>(chunk, 0)
        })
    };
    let (mut p0, mut p1) = (alloc()?, alloc()?);
    let mut staging = [
        check(&stage, p0.as_mut_slice())?,
        check(&stage, p1.as_mut_slice())?,
    ];
    let mut out: Vec<T> = Vec::with_capacity(n);
    let pieces = n.div_ceil(chunk);
    let range = |j: usize| j * chunk..((j + 1) * chunk).min(n);
    // Queues piece j into its staging buffer; the event marks when it has landed.
    let fetch = |j: usize, staging: &mut [&mut [T]; 2]| {
        let r = range(j);
        let dst = &mut staging[j % 2][..r.len()];
        check(&stage, s.memcpy_dtoh(&src.slice(r), dst))?;
        check(&stage, s.record_event(None))
    };
    let mut landed = [Some(fetch(0, &mut staging)?), None];
    {
        let spare = &mut out.spare_capacity_mut()[..n];
        for j in 0..pieces {
            if j + 1 < pieces {
                landed[(j + 1) % 2] = Some(fetch(j + 1, &mut staging)?);
            }
            if let Some(ev) = landed[j % 2].take() {
                check(&stage, ev.synchronize())?;
            }
            let r = range(j);
            let host = &staging[j % 2][..r.len()];
            spare[r]
                .par_chunks_mut(1 << 18)
                .zip(host.par_chunks(1 << 18))
                .for_each(|(d, h)| {
                    for (x, y) in d.iter_mut().zip(h) {
                        x.write(*y);
                    }
                });
        }
    }
    // SAFETY: every element of out[..n] was written above.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// Launches kernel `name` on `s`, its arguments pushed by `args`.
pub(crate) fn launch<'a>(
    g: &'a Gpu,
    s: &'a Arc<CudaStream>,
    name: &str,
    cfg: cudarc::driver::LaunchConfig,
    args: impl FnOnce(&mut cudarc::driver::LaunchArgs<'a>),
) -> Result<()> {
    let f = g.function(name)?;
    let mut l = s.launch_builder(f);
    args(&mut l);
    // SAFETY: each call site passes the arguments its kernel declares, in order and type, and
    // sizes the grid and shared memory as the kernel expects.
    check(name, unsafe { l.launch(cfg) }).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::defined;

    #[test]
    fn scan_items_match_the_kernel() {
        let threads = defined("SCAN_THREADS").unwrap();
        assert_eq!(SCAN_ITEMS, threads * defined("SCAN_PER_THREAD").unwrap());
    }
}
