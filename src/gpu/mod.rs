//! The GPU: finding a usable one, compiling the kernels for it once per process, and the small
//! device-wide primitives (prefix sums, reads of single values) the engine is built from.
//!
//! Nothing here panics when there is no driver, no NVRTC or no GPU: [`device`] reports why the
//! GPU cannot be used, and the caller falls back to the CPU engine or stops with that message.

pub mod fault;
#[cfg(feature = "mpi")]
pub mod ipc;
pub mod kernels;
pub mod matrix;
#[cfg(feature = "mpi")]
pub mod nccl;
pub(crate) mod prims;
pub mod profile;
pub mod rates;
#[cfg(feature = "mpi")]
mod rows;
pub(crate) mod transfer;

use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaStream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Oldest compute capability the kernels are built for (CUDA 13's NVRTC starts at 7.5).
const MIN_CAPABILITY: (i32, i32) = (7, 5);

/// A usable GPU with the kernels compiled for it.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    /// Setup work and joins.
    pub(crate) main: Arc<CudaStream>,
    /// Light rows of C.
    pub(crate) light: Arc<CudaStream>,
    /// Heavy rows of C (outer product, multisplit, chunk accumulation).
    pub(crate) heavy: Arc<CudaStream>,
    functions: HashMap<String, CudaFunction>,
    _module: Arc<CudaModule>,
    /// Held while a product runs: the streams are shared, so products run one at a time.
    pub(crate) busy: Mutex<()>,
    /// The device's stream-ordered memory pool, which keeps freed memory for reuse.
    pool: PoolHandle,
    copy_bandwidth: OnceLock<f64>,
    /// Pinned host buffers that large copies go through ([`transfer`]).
    staging: Mutex<Option<transfer::Staging>>,
    name: String,
    capability: (i32, i32),
    shared_per_block: u64,
    /// Dynamic shared memory the kernels of [`kernels::LARGE_SHARED`] may take.
    large_shared: u64,
    multiprocessors: u32,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

static DEVICE: OnceLock<std::result::Result<Arc<Gpu>, String>> = OnceLock::new();
static OPTIONS: OnceLock<DeviceOptions> = OnceLock::new();

/// How the process's GPU is opened: which of the machine's GPUs, where compiled kernels are kept
/// and extra macro definitions for the kernels. The default opens GPU 0, keeps no cache and
/// compiles the kernels as shipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceOptions {
    /// A folder that keeps compiled kernels between processes (`None`: compile every time).
    pub kernel_cache: Option<std::path::PathBuf>,
    /// Macro definitions (`NAME=VALUE`) passed to NVRTC, for tuning experiments on the
    /// constants the kernels guard with `#ifndef`.
    pub kernel_defines: Vec<String>,
    /// Which GPU to open, counted modulo the GPUs present, so that the ranks of one host can
    /// pass their local rank and share the GPUs round robin (several ranks to one GPU when
    /// there are more ranks than GPUs).
    pub ordinal: usize,
}

/// Sets how the process's GPU will be opened. Call it before anything opens the GPU (the
/// command line does, first thing); it fails when the GPU was already opened or configured.
pub fn configure(options: DeviceOptions) -> Result<()> {
    if DEVICE.get().is_some() {
        return Err(Error::Invalid(
            "the GPU was opened before its options were set".into(),
        ));
    }
    OPTIONS
        .set(options)
        .map_err(|_| Error::Invalid("the GPU's options were already set".into()))
}

/// The process's GPU (device 0), opened and its kernels compiled on first use, then cached.
/// Fails with [`Error::EngineUnavailable`] saying why when there is none that gmcl can use.
pub fn device() -> Result<Arc<Gpu>> {
    DEVICE
        .get_or_init(|| {
            let options = OPTIONS.get_or_init(DeviceOptions::default);
            Gpu::open(options.ordinal, options)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(Error::EngineUnavailable)
}

/// For tests that run on the GPU where there is one: the GPU, or `None` where none is usable —
/// a failure when `GMCL_REQUIRE_GPU=1` (as the GPU machine runs the tests), so that a GPU run
/// cannot pass by skipping.
#[cfg(test)]
pub(crate) fn for_tests() -> Option<Arc<Gpu>> {
    match device() {
        Ok(g) => Some(g),
        Err(why) => {
            assert!(
                std::env::var("GMCL_REQUIRE_GPU").map_or(true, |v| v != "1"),
                "GMCL_REQUIRE_GPU=1 but no GPU is usable: {why}"
            );
            None
        }
    }
}

/// Why no GPU can be used here, or `None` when one can (opens it as a side effect).
pub fn unavailable_reason() -> Option<String> {
    device().err().map(|e| e.to_string())
}

fn driver<T>(stage: &str, r: std::result::Result<T, cudarc::driver::DriverError>) -> Result<T> {
    r.map_err(|e| Error::gpu(stage, e))
}

/// The device's default memory pool (what cudarc's stream-ordered allocations draw from).
struct PoolHandle(sys::CUmemoryPool);

// SAFETY: a pool handle is a plain driver handle, usable from any thread of the process.
unsafe impl Send for PoolHandle {}
// SAFETY: as above; the driver synchronises access to the pool.
unsafe impl Sync for PoolHandle {}

impl PoolHandle {
    fn attribute(&self, attr: sys::CUmemPool_attribute) -> Result<u64> {
        let mut v: u64 = 0;
        // SAFETY: the attributes read here are 64-bit values written into `v`.
        let r = unsafe { sys::cuMemPoolGetAttribute(self.0, attr, (&mut v as *mut u64).cast()) };
        driver("read the memory pool", r.result())?;
        Ok(v)
    }
}

/// Makes the device's memory pool keep freed memory instead of returning it to the driver at
/// each synchronisation, so that repeated products (row batches, MCL iterations, benchmark runs)
/// reuse their buffers without paying for fresh allocations (as CuPy's pool does).
fn keep_freed_memory(ctx: &Arc<CudaContext>) -> Result<PoolHandle> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` receives the device's default pool handle.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) };
    driver("find the memory pool", r.result())?;
    let mut threshold = u64::MAX;
    // SAFETY: the release threshold is a 64-bit value read from `threshold`.
    let r = unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    };
    driver("configure the memory pool", r.result())?;
    Ok(PoolHandle(pool))
}

impl Gpu {
    fn open(ordinal: usize, options: &DeviceOptions) -> Result<Gpu> {
        // SAFETY: only tries to open libcuda by its candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::EngineUnavailable(
                "no CUDA driver (libcuda.so) on this machine".into(),
            ));
        }
        let count = CudaContext::device_count()
            .map_err(|e| Error::EngineUnavailable(format!("the CUDA driver found no GPU: {e}")))?;
        if count <= 0 {
            return Err(Error::EngineUnavailable(
                "the CUDA driver found no GPU".into(),
            ));
        }
        let ordinal = ordinal % count as usize;
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| Error::EngineUnavailable(format!("cannot open GPU {ordinal}: {e}")))?;
        // cudarc would record an event and make the stream wait on another for every buffer
        // a launch or copy takes, and so serialize the product's light and heavy streams, whose
        // kernels write disjoint rows of the same arrays; small products and MCL's late
        // iterations, made of many short launches, paid for those calls.
        // SAFETY: gmcl orders its streams itself, before any buffer exists. A buffer is used
        // and freed on the stream that allocated it (`main` for all but the product's phases);
        // `spgemm::gpu::batch` forks the light and heavy streams from `main` and joins them
        // back around the phases that use them, and waits for every stream before a failed
        // batch's buffers are freed; NCCL's stream and CUDA IPC wait for the whole context
        // before they read other streams' buffers.
        unsafe { ctx.disable_event_tracking() };
        let capability = driver("read the compute capability", ctx.compute_capability())?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        if capability < MIN_CAPABILITY {
            return Err(Error::EngineUnavailable(format!(
                "{name} has compute capability {}.{}; gmcl's kernels need {}.{} or later",
                capability.0, capability.1, MIN_CAPABILITY.0, MIN_CAPABILITY.1
            )));
        }
        let shared_per_block = driver(
            "read the shared memory per block",
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
        )? as u64;
        let multiprocessors = driver(
            "read the multiprocessor count",
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        )? as u32;
        let arch = format!("sm_{}{}", capability.0, capability.1);
        let (defines, cache) = (&options.kernel_defines, options.kernel_cache.as_deref());
        let cubin = kernels::compile_cached(&arch, defines, cache, false)?;
        let module = match ctx.load_module(cubin) {
            Ok(m) => m,
            // A cached file the driver refuses (damaged, or from an older driver): compile again.
            Err(_) => driver(
                "load the compiled kernels",
                ctx.load_module(kernels::compile_cached(&arch, defines, cache, true)?),
            )?,
        };
        let mut functions = HashMap::new();
        for k in kernels::entry_points() {
            let f = driver(&format!("find kernel {k}"), module.load_function(&k))?;
            functions.insert(k, f);
        }
        // The dense-row kernels size their windows from the opt-in maximum (227 KiB on Hopper).
        let optin = driver(
            "read the opt-in shared memory per block",
            ctx.attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            ),
        )? as u64;
        let large_shared = optin.max(shared_per_block) - kernels::OPTIN_RESERVE;
        for (name, f) in functions.iter() {
            if kernels::LARGE_SHARED.contains(&kernels::base_name(name)) {
                driver(
                    &format!("allow {name} more shared memory"),
                    f.set_attribute(
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        large_shared as i32,
                    ),
                )?;
            }
        }
        let pool = keep_freed_memory(&ctx)?;
        let main = driver("create a stream", ctx.new_stream())?;
        let light = driver("create a stream", ctx.new_stream())?;
        let heavy = driver("create a stream", ctx.new_stream())?;
        Ok(Gpu {
            ctx,
            main,
            light,
            heavy,
            functions,
            _module: module,
            busy: Mutex::new(()),
            pool,
            copy_bandwidth: OnceLock::new(),
            staging: Mutex::new(None),
            name,
            capability,
            shared_per_block,
            large_shared,
            multiprocessors,
        })
    }

    /// The kernel `name` (typed kernels with their `_f32`/`_f64` suffix).
    pub(crate) fn function(&self, name: &str) -> Result<&CudaFunction> {
        self.functions
            .get(name)
            .ok_or_else(|| Error::gpu("launch", format!("no kernel named {name}")))
    }

    /// The CUDA context, for code outside the library that drives the device itself (the
    /// command line's cuSPARSE benchmark).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Shared memory one block may use without opting in, in bytes.
    pub fn shared_per_block(&self) -> u64 {
        self.shared_per_block
    }

    /// Dynamic shared memory per block of the kernels that opt into more than
    /// [`Gpu::shared_per_block`] (the dense-row accumulators).
    pub fn large_shared(&self) -> u64 {
        self.large_shared
    }

    /// Streaming multiprocessors.
    pub fn multiprocessors(&self) -> u32 {
        self.multiprocessors
    }

    /// Bytes of gmcl's memory pool in use once the device has finished its queued work
    /// (frees are stream-ordered): what a failed run must give back.
    pub fn pool_in_use(&self) -> Result<u64> {
        driver("wait for the device", self.ctx.synchronize())?;
        self.pool
            .attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    /// The most bytes of gmcl's memory pool in use at once since the last
    /// [`Gpu::reset_pool_peak`] (or since the GPU was opened).
    pub fn pool_peak(&self) -> Result<u64> {
        driver("wait for the device", self.ctx.synchronize())?;
        self.pool
            .attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }

    /// `alloc`'s buffer; where the device's memory is short, once more after the pool has given
    /// back what it holds unused. The pool keeps freed buffers for reuse, in the sizes they had:
    /// a buffer larger than any of them (a stacked matrix after a product's batches) finds no
    /// room though the memory is free. For one-off large buffers only: a product's batches
    /// take a shortage as the sign to split, and giving the pool back there would unmap the
    /// buffers the next batches reuse.
    pub(crate) fn alloc_or_release<R>(&self, alloc: impl Fn() -> Result<R>) -> Result<R> {
        match alloc() {
            Err(e) if prims::is_out_of_memory(&e) => {
                self.release_unused()?;
                alloc()
            }
            r => r,
        }
    }

    /// Gives the memory the pool holds unused back to the driver (after the device has
    /// finished with every freed buffer).
    fn release_unused(&self) -> Result<()> {
        driver("wait for the device", self.ctx.synchronize())?;
        // SAFETY: the pool handle is the device's default pool, alive with the context.
        let r = unsafe { sys::cuMemPoolTrimTo(self.pool.0, 0) };
        driver("release the memory pool's unused memory", r.result())
    }

    /// Starts a new measurement of [`Gpu::pool_peak`] from what is in use now.
    pub fn reset_pool_peak(&self) -> Result<()> {
        driver("wait for the device", self.ctx.synchronize())?;
        let mut zero = 0u64;
        // SAFETY: the high-water mark is a 64-bit value read from `zero` (the driver accepts
        // only 0, which resets it to the current use).
        let r = unsafe {
            sys::cuMemPoolSetAttribute(
                self.pool.0,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                (&mut zero as *mut u64).cast(),
            )
        };
        driver("reset the memory pool's peak", r.result())
    }

    /// Device memory available to gmcl (free, plus what gmcl's pool holds unused) and the
    /// device's total, in bytes.
    pub fn memory(&self) -> Result<(u64, u64)> {
        let (free, total) = driver("read free memory", self.ctx.mem_get_info())?;
        let cached = self
            .pool
            .attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?
            .saturating_sub(
                self.pool
                    .attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            );
        Ok((free as u64 + cached, total as u64))
    }

    /// The device's copy bandwidth in bytes per second (read plus written), measured once per
    /// process by timing device-to-device copies of 256 MiB: the "speed of light" that the
    /// bandwidth-bound kernels are compared with.
    pub fn copy_bandwidth(&self) -> Result<f64> {
        if let Some(b) = self.copy_bandwidth.get() {
            return Ok(*b);
        }
        let s = &self.main;
        let n = 32usize << 20; // u64 elements: 256 MiB
        let src = driver("measure copy bandwidth", s.alloc_zeros::<u64>(n))?;
        let mut dst = driver("measure copy bandwidth", s.alloc_zeros::<u64>(n))?;
        driver("measure copy bandwidth", s.memcpy_dtod(&src, &mut dst))?;
        driver("measure copy bandwidth", s.synchronize())?;
        let start = std::time::Instant::now();
        let reps = 5;
        for _ in 0..reps {
            driver("measure copy bandwidth", s.memcpy_dtod(&src, &mut dst))?;
        }
        driver("measure copy bandwidth", s.synchronize())?;
        let secs = start.elapsed().as_secs_f64();
        let b = 2.0 * (n * 8 * reps) as f64 / secs.max(1e-9);
        Ok(*self.copy_bandwidth.get_or_init(|| b))
    }

    /// "NVIDIA H200 (sm_90, 132 SMs, 48 KiB shared per block)".
    pub fn describe(&self) -> String {
        format!(
            "{} (sm_{}{}, {} SMs, {} KiB shared per block)",
            self.name,
            self.capability.0,
            self.capability.1,
            self.multiprocessors,
            self.shared_per_block / 1024
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "fills the GPU's memory: run alone (--ignored --test-threads 1) on a GPU"]
    fn a_buffer_larger_than_any_the_pool_holds_is_made_once_the_pool_gives_back() {
        let Some(gpu) = for_tests() else { return };
        let s = &gpu.main;
        let (free, _) = gpu.ctx.mem_get_info().unwrap();
        // Pieces of a tenth of the free memory, freed: the pool keeps 80% of it in pieces.
        let piece = free / 10;
        let pieces: Vec<_> = (0..8)
            .map(|_| prims::zeros::<u8>(s, piece, "a piece").unwrap())
            .collect();
        drop(pieces);
        gpu.ctx.synchronize().unwrap();
        let reserved = |g: &Gpu| {
            g.pool
                .attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
                .unwrap()
        };
        assert!(reserved(&gpu) >= 8 * piece as u64);
        // Larger than any piece and than the memory outside the pool.
        let big = gpu.alloc_or_release(|| prims::zeros::<u8>(s, 3 * piece, "a large buffer"));
        assert!(big.is_ok(), "{:?}", big.err());
        drop(big);
        gpu.release_unused().unwrap();
        assert!(reserved(&gpu) < piece as u64);
    }
}
