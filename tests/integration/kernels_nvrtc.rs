//! Every CUDA kernel compiles with NVRTC for the architectures gmcl supports. No GPU is needed,
//! only the NVRTC library; CI installs it (`.ci/run`) and sets `GMCL_REQUIRE_NVRTC=1`, so that a
//! missing library fails there instead of skipping.

use gmcl::gpu::kernels;

#[test]
fn kernels_compile_for_hopper_and_ampere() {
    if !kernels::nvrtc_present() {
        assert!(
            std::env::var_os("GMCL_REQUIRE_NVRTC").is_none(),
            "GMCL_REQUIRE_NVRTC is set but libnvrtc.so.13 cannot be loaded (LD_LIBRARY_PATH?)"
        );
        eprintln!("skipped: NVRTC is not installed here");
        return;
    }
    for arch in ["sm_90", "sm_80"] {
        let cubin = match kernels::compile(arch, &[]) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert!(cubin.starts_with(b"\x7fELF"), "{arch}: not a CUBIN");
        for k in kernels::UNTYPED {
            assert!(kernels::defines_kernel(&cubin, k), "{arch}: no kernel {k}");
        }
        for k in kernels::TYPED {
            for s in ["f32", "f64"] {
                let name = format!("{k}_{s}");
                assert!(
                    kernels::defines_kernel(&cubin, &name),
                    "{arch}: no kernel {name}"
                );
            }
        }
        assert!(!kernels::defines_kernel(&cubin, "no_such_kernel"));
        // A prefix of a kernel's name is not a kernel.
        assert!(!kernels::defines_kernel(&cubin, "row_produc"));
    }
}
