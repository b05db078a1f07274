//! Device memory shared between the processes of one host (CUDA IPC): a process exports a
//! buffer of its GPU, another maps it into its own context and copies from it GPU to GPU
//! (over NVLink or PCIe, or within one GPU), with no host memory between and no library to
//! start. Handles mean nothing on another host: the caller makes sure the processes share one.

use super::prims::check;
use super::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr};
use std::sync::Arc;

/// The bytes of a handle as it travels between processes.
pub const HANDLE_BYTES: usize = 64;

/// A copy of device data in memory other processes of the host may map. It is made apart from
/// the device's pool (whose memory cannot be exported this way) and freed when dropped: the
/// processes that mapped it must have finished reading first.
pub struct Exported {
    gpu: Arc<Gpu>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
    handle: [u8; HANDLE_BYTES],
}

/// Maps a driver status to gmcl's error (the stage named).
fn status(stage: &str, r: sys::CUresult) -> Result<()> {
    check(stage, r.result())
}

impl Exported {
    /// A copy of `src` (not empty), complete when this returns, that other processes may map
    /// through [`Exported::handle`].
    pub fn copy_of<T: DeviceRepr>(gpu: &Arc<Gpu>, src: &CudaView<'_, T>) -> Result<Exported> {
        let stage = "share device memory with the host's other processes (CUDA IPC)";
        let bytes = src.len() * std::mem::size_of::<T>();
        if bytes == 0 {
            return Err(Error::gpu(stage, "nothing to share"));
        }
        check(stage, gpu.ctx.bind_to_thread())?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: the driver writes one device pointer to `ptr`.
        status(stage, unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) })?;
        let made = Exported {
            gpu: Arc::clone(gpu),
            ptr,
            bytes,
            handle: [0; HANDLE_BYTES],
        };
        made.fill(src, stage)
    }

    /// Copies `src` into the buffer and takes its handle.
    fn fill<T: DeviceRepr>(mut self, src: &CudaView<'_, T>, stage: &str) -> Result<Exported> {
        let s = &self.gpu.main;
        {
            let (from, _read) = src.device_ptr(s);
            // SAFETY: both spans hold `self.bytes` bytes on this context's device.
            let r = unsafe { sys::cuMemcpyDtoDAsync_v2(self.ptr, from, self.bytes, s.cu_stream()) };
            status(stage, r)?;
        }
        check(stage, s.synchronize())?;
        let mut handle = sys::CUipcMemHandle {
            reserved: [0; HANDLE_BYTES],
        };
        // SAFETY: the driver writes the handle of memory this process allocated.
        status(stage, unsafe {
            sys::cuIpcGetMemHandle(&mut handle, self.ptr)
        })?;
        self.handle = handle.reserved.map(|b| b as u8);
        Ok(self)
    }

    /// What another process of the host hands to [`Mapped::open`].
    pub fn handle(&self) -> [u8; HANDLE_BYTES] {
        self.handle
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        // Nothing to do about a failure here but leak the buffer.
        if self.gpu.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `copy_of`, freed once.
            let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
        }
    }
}

/// Another process's [`Exported`] buffer mapped into this process's context, unmapped when
/// dropped.
pub struct Mapped {
    gpu: Arc<Gpu>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl Mapped {
    /// Maps the buffer of `bytes` bytes whose handle is `handle` (on this GPU or another of the
    /// host that this one can reach).
    pub fn open(gpu: &Arc<Gpu>, handle: &[u8; HANDLE_BYTES], bytes: usize) -> Result<Mapped> {
        let stage = "map another process's device memory (CUDA IPC)";
        check(stage, gpu.ctx.bind_to_thread())?;
        let h = sys::CUipcMemHandle {
            reserved: handle.map(|b| b as std::ffi::c_char),
        };
        let mut ptr: sys::CUdeviceptr = 0;
        let flags = sys::CUipcMem_flags_enum::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: the driver writes one device pointer to `ptr`.
        status(stage, unsafe {
            sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags)
        })?;
        Ok(Mapped {
            gpu: Arc::clone(gpu),
            ptr,
            bytes,
        })
    }

    /// Copies `dst.len()` elements from element `from` of the mapped buffer into `dst`, on the
    /// GPU's main stream (the caller waits for it).
    pub fn copy_into<T: DeviceRepr>(
        &self,
        from: usize,
        dst: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let stage = "copy from another process's device memory (CUDA IPC)";
        let size = std::mem::size_of::<T>();
        let bytes = dst.len() * size;
        if (from * size).saturating_add(bytes) > self.bytes {
            return Err(Error::gpu(
                stage,
                format!(
                    "{bytes} bytes from byte {} run past the {} bytes mapped",
                    from * size,
                    self.bytes
                ),
            ));
        }
        let s = &self.gpu.main;
        let (to, _written) = dst.device_ptr_mut(s);
        // SAFETY: the spans were checked above against the mapped bytes and `dst`'s length.
        let r = unsafe {
            sys::cuMemcpyDtoDAsync_v2(to, self.ptr + (from * size) as u64, bytes, s.cu_stream())
        };
        status(stage, r)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.gpu.ctx.bind_to_thread().is_ok() {
            // SAFETY: mapped by `open`, unmapped once.
            let _ = unsafe { sys::cuIpcCloseMemHandle(self.ptr) };
        }
    }
}
