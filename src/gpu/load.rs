//! The compiled kernels loaded into a context. Loading PTX has the driver translate it to the
//! GPU's machine code (a CUBIN) in every process, from its own cache at best; loading a CUBIN
//! skips that step. So with a kernel cache, the CUBIN the driver makes of the PTX on the first
//! run is kept beside it, named after the PTX's file and the driver's version (another driver
//! translates again), and later processes load it directly.

use super::kernels;
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaModule, DriverError};
use cudarc::nvrtc::Ptx;
use std::path::Path;
use std::sync::Arc;

/// The kernels for `arch` (with the macro definitions `defines`) loaded into `ctx`: from the
/// CUBIN kept in `cache` by an earlier process, else from the PTX ([`kernels::compile_cached`]),
/// keeping the driver's CUBIN of it there for the next process.
pub(super) fn kernels(
    ctx: &Arc<CudaContext>,
    arch: &str,
    defines: &[String],
    cache: Option<&Path>,
) -> Result<Arc<CudaModule>> {
    let cubin = cache.and_then(|dir| {
        driver_version().map(|v| dir.join(kernels::cubin_cache_name(arch, defines, v)))
    });
    load(ctx, cubin.as_deref(), &|refresh| {
        kernels::compile_cached(arch, defines, cache, refresh)
    })
}

/// The module of the PTX `ptx(false)` gives (`ptx(true)`: compiled afresh, when the driver
/// refuses the first), through the CUBIN file `cubin` when given: read from it when it loads,
/// else made by the driver from the PTX and written there.
fn load(
    ctx: &Arc<CudaContext>,
    cubin: Option<&Path>,
    ptx: &dyn Fn(bool) -> Result<Ptx>,
) -> Result<Arc<CudaModule>> {
    if let Some(path) = cubin {
        if let Ok(bytes) = std::fs::read(path) {
            if let Ok(m) = ctx.load_module(Ptx::from_binary(bytes)) {
                return Ok(m);
            }
        }
    }
    let source = ptx(false)?;
    if let Some(path) = cubin {
        // A failed translation or write costs only the CUBIN: the PTX is loaded below.
        if let Ok(bytes) = translate(ctx, &source.to_src()) {
            if let Ok(m) = ctx.load_module(Ptx::from_binary(bytes.clone())) {
                let _ = kernels::store(path, &bytes);
                return Ok(m);
            }
        }
    }
    match ctx.load_module(source) {
        Ok(m) => Ok(m),
        // A cached PTX the driver refuses (damaged, or from an older driver): compile again.
        Err(_) => ctx
            .load_module(ptx(true)?)
            .map_err(|e| Error::gpu("load the compiled kernels", e)),
    }
}

/// The driver's version (such as 13000), `None` when it cannot be read.
fn driver_version() -> Option<i32> {
    let mut v = 0;
    // SAFETY: writes one int.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}

/// The CUBIN the driver makes of `ptx` for `ctx`'s GPU (the translation loading the PTX does).
fn translate(ctx: &Arc<CudaContext>, ptx: &str) -> std::result::Result<Vec<u8>, DriverError> {
    ctx.bind_to_thread()?;
    let text = std::ffi::CString::new(ptx)
        .map_err(|_| DriverError(sys::CUresult::CUDA_ERROR_INVALID_PTX))?;
    let name = c"gmagnus.ptx";
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    // SAFETY: no options; `state` receives the new link state.
    unsafe { sys::cuLinkCreate_v2(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state) }
        .result()?;
    let linked = (|| {
        // SAFETY: `text` is NUL-terminated and lives through the call, which copies it.
        unsafe {
            sys::cuLinkAddData_v2(
                state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                text.as_ptr() as *mut _,
                text.as_bytes_with_nul().len(),
                name.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        let mut image: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: the image belongs to `state` and is copied out before it is destroyed.
        unsafe { sys::cuLinkComplete(state, &mut image, &mut size) }.result()?;
        if image.is_null() || size == 0 {
            return Err(DriverError(sys::CUresult::CUDA_ERROR_INVALID_IMAGE));
        }
        // SAFETY: the driver hands back `size` bytes at `image`.
        Ok(unsafe { std::slice::from_raw_parts(image as *const u8, size) }.to_vec())
    })();
    // SAFETY: `state` was created above and is destroyed once.
    let _ = unsafe { sys::cuLinkDestroy(state) };
    linked
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::{LaunchConfig, PushKernelArg};

    /// A kernel small enough to compile and translate in a moment.
    const TINY: &str = r#"extern "C" __global__ void tiny(unsigned* x) { x[threadIdx.x] = 7u + 3u * threadIdx.x; }"#;

    /// What `tiny` of module `m` writes for 32 threads.
    fn run(gpu: &crate::gpu::Gpu, m: &Arc<CudaModule>) -> Vec<u32> {
        let f = m.load_function("tiny").unwrap();
        let s = &gpu.main;
        let mut x = s.clone_htod(&[u32::MAX; 32]).unwrap();
        let mut b = s.launch_builder(&f);
        b.arg(&mut x);
        // SAFETY: `tiny` writes one u32 per thread of a block of 32 into `x`'s 32.
        unsafe { b.launch(LaunchConfig::for_num_elems(32)) }.unwrap();
        s.clone_dtoh(&x).unwrap()
    }

    #[test]
    fn the_drivers_cubin_is_kept_loaded_and_made_again_when_damaged() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        let want: Vec<u32> = (0..32).map(|t| 7 + 3 * t).collect();
        let compiles = std::sync::atomic::AtomicUsize::new(0);
        let ptx = |_refresh: bool| {
            compiles.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            cudarc::nvrtc::compile_ptx(TINY).map_err(|e| Error::gpu("compile the test kernel", e))
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.cubin");
        // First: compiled, translated by the driver, and the CUBIN kept.
        assert_eq!(run(&gpu, &load(&gpu.ctx, Some(&path), &ptx).unwrap()), want);
        let kept = std::fs::read(&path).unwrap();
        assert!(!kept.is_empty() && !kept.starts_with(b"//"), "not a CUBIN");
        assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Then: loaded from the file, nothing compiled.
        assert_eq!(run(&gpu, &load(&gpu.ctx, Some(&path), &ptx).unwrap()), want);
        assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 1);
        // A damaged file is made again.
        std::fs::write(&path, b"not a cubin").unwrap();
        assert_eq!(run(&gpu, &load(&gpu.ctx, Some(&path), &ptx).unwrap()), want);
        assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!(std::fs::read(&path).unwrap().len() > 100);
        assert_eq!(run(&gpu, &load(&gpu.ctx, Some(&path), &ptx).unwrap()), want);
        assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 2);
        // Without a cache: from the PTX, nothing written.
        assert_eq!(run(&gpu, &load(&gpu.ctx, None, &ptx).unwrap()), want);
        assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
