//! Every CUDA kernel compiles with NVRTC, to PTX and a CUBIN, for the architectures gmcl
//! supports. No GPU is needed, only the NVRTC library; CI installs it (`.ci/run`) and sets
//! `GMCL_REQUIRE_NVRTC=1`, so that a missing library fails there instead of skipping.

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
        let compiled = match kernels::compile(arch, &[]) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        // The image the driver loads: an ELF file, for this architecture.
        assert!(compiled.cubin.starts_with(b"\x7fELF"), "{arch}: no CUBIN");
        let text = &compiled.ptx;
        for k in kernels::UNTYPED {
            assert!(
                text.contains(&format!(".entry {k}(")),
                "{arch}: no entry {k}"
            );
        }
        for k in kernels::TYPED {
            for s in ["f32", "f64"] {
                assert!(
                    text.contains(&format!(".entry {k}_{s}(")),
                    "{arch}: no entry {k}_{s}"
                );
            }
        }
    }
}
