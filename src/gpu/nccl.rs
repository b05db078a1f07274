//! NCCL between the GPUs of a run across processes: a [`Link`] joins this process's GPU to
//! the others' and moves 32-bit words between them (over NVLink or PCIe within a host, over
//! the network between hosts), a personalised exchange at a time, or sums buffers across
//! them. It knows nothing of what the words mean, nor how the processes found one another (the
//! caller hands it the unique id every process must share).
//!
//! NCCL is loaded at run time, as the CUDA driver is: [`missing`] says why it cannot be used
//! before anything calls it (a missing library would otherwise abort the process).

use super::transfer::{download_append, upload_into};
use super::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::{sys as cuda, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use cudarc::nccl::{result, sys};
use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;
use std::sync::Arc;

/// Bytes of the id every process of one NCCL communicator must share.
pub const ID_BYTES: usize = 128;

/// Why NCCL cannot be used in this process (its library not found), or `None`.
pub fn missing() -> Option<String> {
    // SAFETY: only tries to open the library by its candidate names.
    match unsafe { sys::is_culib_present() } {
        true => None,
        false => Some(
            "no NCCL library (libnccl.so) on the library path; NCCL's pip wheel ships only \
             libnccl.so.2: link libnccl.so to it in a folder on LD_LIBRARY_PATH"
                .into(),
        ),
    }
}

/// NCCL's own words for `e`.
fn describe(e: &result::NcclError) -> String {
    // SAFETY: NCCL returns a static, NUL-terminated string for every result code.
    let text = unsafe { CStr::from_ptr(sys::ncclGetErrorString(e.0)) };
    text.to_string_lossy().into_owned()
}

fn nccl<T>(stage: &str, r: std::result::Result<T, result::NcclError>) -> Result<T> {
    r.map_err(|e| Error::gpu(stage, format!("NCCL: {}", describe(&e))))
}

/// A new id for one communicator (made by one process, handed to every other).
pub fn unique_id() -> Result<[u8; ID_BYTES]> {
    let id = nccl("make an NCCL id", result::get_uniqueid())?;
    Ok(id.internal.map(|c| c as u8))
}

/// This process's GPU in an NCCL communicator of `size` processes.
pub struct Link {
    comm: sys::ncclComm_t,
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    rank: usize,
    size: usize,
}

/// Words of the large sum that connects NCCL's collectives when a link is made (4 MiB).
const WARM_SUM_WORDS: usize = 1 << 20;

/// The device buffers of one exchange: what this process sends, and room for what it receives.
pub struct Buffers {
    send: CudaSlice<u32>,
    recv: CudaSlice<u32>,
}

impl Link {
    /// Joins process `rank` of `size` to the communicator of `id`. Collective: every process
    /// calls it with the same id, and it returns once all have; then it exchanges one word with
    /// every other process, so that NCCL sets up its connections while the GPU's memory is
    /// free rather than in the middle of a run.
    pub fn join(gpu: Arc<Gpu>, rank: usize, size: usize, id: &[u8; ID_BYTES]) -> Result<Link> {
        let stage = "join the ranks' GPUs (NCCL)";
        // The joining thread may be a new one: the context is made its current first.
        super::prims::check(stage, gpu.ctx.bind_to_thread())?;
        let stream = super::prims::check(stage, gpu.ctx.new_stream())?;
        let id = sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let (n, r) = (c_int::try_from(size), c_int::try_from(rank));
        let (Ok(n), Ok(r)) = (n, r) else {
            return Err(Error::gpu(
                stage,
                format!("{size} ranks are too many for NCCL"),
            ));
        };
        let mut comm = std::ptr::null_mut();
        // SAFETY: `comm` receives the new communicator; the id is the one every rank shares.
        nccl(stage, unsafe {
            result::comm_init_rank(&mut comm, n, id, r)
        })?;
        let link = Link {
            comm,
            gpu,
            stream,
            rank,
            size,
        };
        let ones = vec![1usize; size];
        let mut warm = link
            .buffers(size, size)?
            .ok_or_else(|| Error::gpu(stage, "no device memory for the first exchange"))?;
        link.exchange(&mut warm, &vec![0u32; size], &ones, &ones, &mut Vec::new())?;
        // NCCL connects its collectives on their first use, which costs far more than a sum:
        // one small and one large sum connect the protocols it picks by size.
        let mut sum = super::prims::zeros::<u32>(&link.stream, WARM_SUM_WORDS, "a first sum")?;
        link.sum_in_place(&mut sum, 1)?;
        link.sum_in_place(&mut sum, WARM_SUM_WORDS)?;
        Ok(link)
    }

    /// Device buffers for an exchange that sends `send` words and receives `recv`; `None` when
    /// the GPU's memory is short (other failures are errors).
    pub fn buffers(&self, send: usize, recv: usize) -> Result<Option<Buffers>> {
        let stage = "make room for an exchange between the ranks' GPUs";
        let alloc = |n: usize| {
            // SAFETY: an exchange writes every word it later reads.
            match unsafe { self.stream.alloc::<u32>(n.max(1)) } {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.0 == cuda::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Ok(None),
                Err(e) => Err(Error::gpu(stage, e)),
            }
        };
        let Some(send) = alloc(send)? else {
            return Ok(None);
        };
        Ok(alloc(recv)?.map(|recv| Buffers { send, recv }))
    }

    /// The personalised exchange: `send` holds, in rank order, `send_counts[q]` words for each
    /// process `q`; what each process sent to this one is appended to `out`, in rank order
    /// (`recv_counts[q]` words from `q`, as the senders' counts say). Collective, with every
    /// process's counts matching; `bufs` must hold both sides.
    pub fn exchange(
        &self,
        bufs: &mut Buffers,
        send: &[u32],
        send_counts: &[usize],
        recv_counts: &[usize],
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let stage = "exchange words between the ranks' GPUs (NCCL)";
        let s = &self.stream;
        let at = |counts: &[usize]| -> Vec<usize> {
            let mut acc = 0;
            let mut v: Vec<usize> = counts
                .iter()
                .map(|&c| {
                    acc += c;
                    acc - c
                })
                .collect();
            v.push(acc);
            v
        };
        let (sat, rat) = (at(send_counts), at(recv_counts));
        upload_into(&self.gpu, s, send, &mut bufs.send, "the words to exchange")?;
        let me = self.rank;
        if send_counts[me] > 0 {
            let from = bufs.send.slice(sat[me]..sat[me + 1]);
            let mut to = bufs.recv.slice_mut(rat[me]..rat[me + 1]);
            super::prims::check(stage, s.memcpy_dtod(&from, &mut to))?;
        }
        {
            let (sp, _s) = bufs.send.device_ptr(s);
            let (rp, _r) = bufs.recv.device_ptr_mut(s);
            let word = std::mem::size_of::<u32>() as u64;
            let cs = s.cu_stream() as sys::cudaStream_t;
            let dt = sys::ncclDataType_t::ncclUint32;
            nccl(stage, result::group_start())?;
            let posted = (0..self.size).filter(|&q| q != me).try_for_each(|q| {
                let peer = q as c_int;
                if send_counts[q] > 0 {
                    let p = (sp + word * sat[q] as u64) as *const c_void;
                    // SAFETY: the words sat[q]..sat[q + 1] of the send buffer, uploaded above.
                    unsafe { result::send(p, send_counts[q], dt, peer, self.comm, cs) }?;
                }
                if recv_counts[q] > 0 {
                    let p = (rp + word * rat[q] as u64) as *mut c_void;
                    // SAFETY: the words rat[q]..rat[q + 1] of the receive buffer.
                    unsafe { result::recv(p, recv_counts[q], dt, peer, self.comm, cs) }?;
                }
                Ok(())
            });
            // The group is closed whether or not every call was posted.
            let ended = result::group_end();
            nccl(stage, posted)?;
            nccl(stage, ended)?;
        }
        let total = rat[self.size];
        download_append(&self.gpu, s, &bufs.recv, total, "the exchanged words", out)?;
        super::prims::check(stage, s.synchronize())
    }
}

impl Link {
    /// Moves spans of device buffers between the processes: `send[q]` (a buffer and a span of
    /// it) goes to process `q`, which receives it into its span `recv[p]` of `into` (`p` this
    /// process; the span lengths of a pair match). This process's own spans are left alone (the
    /// caller copies them). Waits for every stream of the GPU first (the kernels that wrote the
    /// buffers) and returns once `into` holds what arrived. Collective, with matching spans on
    /// every process.
    pub fn send_recv<T: DeviceRepr>(
        &self,
        send: &[(&CudaSlice<T>, Range<usize>)],
        into: &mut CudaSlice<T>,
        recv: &[Range<usize>],
    ) -> Result<()> {
        let stage = "move rows between the ranks' GPUs (NCCL)";
        let s = &self.stream;
        super::prims::check(stage, self.gpu.ctx.synchronize())?;
        let size = std::mem::size_of::<T>();
        {
            let from: Vec<_> = send.iter().map(|(b, _)| b.device_ptr(s)).collect();
            let (rp, _r) = into.device_ptr_mut(s);
            let cs = s.cu_stream() as sys::cudaStream_t;
            let dt = sys::ncclDataType_t::ncclUint8;
            nccl(stage, result::group_start())?;
            let posted = (0..self.size)
                .filter(|&q| q != self.rank)
                .try_for_each(|q| {
                    let peer = q as c_int;
                    let span = &send[q].1;
                    if !span.is_empty() {
                        let p = (from[q].0 + (size * span.start) as u64) as *const c_void;
                        // SAFETY: a span of buffer send[q].0, written before the wait above.
                        unsafe { result::send(p, size * span.len(), dt, peer, self.comm, cs) }?;
                    }
                    if !recv[q].is_empty() {
                        let p = (rp + (size * recv[q].start) as u64) as *mut c_void;
                        // SAFETY: span recv[q] of `into`, which the caller sized to hold it.
                        unsafe { result::recv(p, size * recv[q].len(), dt, peer, self.comm, cs) }?;
                    }
                    Ok(())
                });
            // The group is closed whether or not every call was posted.
            let ended = result::group_end();
            nccl(stage, posted)?;
            nccl(stage, ended)?;
        }
        super::prims::check(stage, s.synchronize())
    }
}

impl Link {
    /// Sums the first `len` elements of `buf` across the processes, element by element, in
    /// place: every process ends with the sums. Waits for every stream of the GPU first (the
    /// kernels that wrote the buffer) and returns once the sums are there. Collective, with the
    /// same `len` on every process.
    pub fn sum_in_place<T: Word>(&self, buf: &mut CudaSlice<T>, len: usize) -> Result<()> {
        let stage = "sum across the ranks' GPUs (NCCL)";
        if len > buf.len() {
            return Err(Error::gpu(
                stage,
                format!("{len} elements asked of a buffer of {}", buf.len()),
            ));
        }
        let s = &self.stream;
        super::prims::check(stage, self.gpu.ctx.synchronize())?;
        {
            let (p, _p) = buf.device_ptr_mut(s);
            let cs = s.cu_stream() as sys::cudaStream_t;
            // SAFETY: the first `len` elements of `buf`, written before the wait above; NCCL
            // sums in place where the send and receive buffers are the same.
            nccl(stage, unsafe {
                result::all_reduce(
                    p as *const c_void,
                    p as *mut c_void,
                    len,
                    T::TYPE,
                    sys::ncclRedOp_t::ncclSum,
                    self.comm,
                    cs,
                )
            })?;
        }
        super::prims::check(stage, s.synchronize())
    }
}

/// An element type NCCL sums.
pub trait Word: DeviceRepr {
    /// NCCL's name of the type.
    const TYPE: sys::ncclDataType_t;
}

impl Word for u32 {
    const TYPE: sys::ncclDataType_t = sys::ncclDataType_t::ncclUint32;
}

impl Word for u64 {
    const TYPE: sys::ncclDataType_t = sys::ncclDataType_t::ncclUint64;
}

// SAFETY: a communicator may be used from any thread, one at a time: a `Link` is made on one
// thread and then used (through `&self`, never from two threads at once: it is not `Sync`) on
// the one it is moved to.
unsafe impl Send for Link {}

impl Link {
    /// Leaves the communicator, its buffers and this process's GPU to the process's end, which
    /// must follow (see `NcclComm::end_with_process`).
    pub fn end_with_process(self) {
        std::mem::forget(self);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // SAFETY: the communicator is this link's, and nothing uses it after this.
        let _ = unsafe { result::comm_destroy(self.comm) };
    }
}

impl Gpu {
    /// The GPU's PCI address (domain:bus:device), which names it among the host's GPUs.
    pub fn pci_address(&self) -> Result<String> {
        use cuda::CUdevice_attribute as A;
        let read = |a| super::driver("read the PCI address", self.ctx.attribute(a));
        Ok(format!(
            "{:04x}:{:02x}:{:02x}",
            read(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            read(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            read(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
        ))
    }
}
