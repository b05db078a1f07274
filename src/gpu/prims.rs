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

/// A null device pointer, for the kernels' optional arguments.
pub(crate) const NULL: u64 = 0;

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
