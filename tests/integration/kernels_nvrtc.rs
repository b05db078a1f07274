//! Every CUDA kernel compiles with NVRTC, to PTX and a CUBIN, for the architectures gmcl
//! supports. No GPU is needed, only the NVRTC library; CI installs it (`.ci/run`) and sets
//! `GMCL_REQUIRE_NVRTC=1`, so that a missing library fails there instead of skipping.

use gmcl::gpu::kernels;

/// Whether NVRTC can be loaded here; says the test is skipped where not, and fails where
/// `GMCL_REQUIRE_NVRTC` asks for it.
fn nvrtc_here() -> bool {
    if kernels::nvrtc_present() {
        return true;
    }
    assert!(
        std::env::var_os("GMCL_REQUIRE_NVRTC").is_none(),
        "GMCL_REQUIRE_NVRTC is set but libnvrtc.so.13 cannot be loaded (LD_LIBRARY_PATH?)"
    );
    eprintln!("skipped: NVRTC is not installed here");
    false
}

#[test]
fn kernels_compile_for_hopper_and_ampere() {
    if !nvrtc_here() {
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

#[test]
fn a_cached_cubin_is_loaded_not_compiled_again() {
    use std::os::unix::fs::MetadataExt;
    if !nvrtc_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = || -> Vec<_> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    kernels::compile_cached("sm_90", &[], Some(dir.path()), false).unwrap();
    let stored = files();
    assert_eq!(
        stored.len(),
        1,
        "one cache file, no temporary left: {stored:?}"
    );
    let inode = std::fs::metadata(&stored[0]).unwrap().ino();
    // A compile stores a new file (a new inode, renamed over the old); a read leaves it.
    kernels::compile_cached("sm_90", &[], Some(dir.path()), false).unwrap();
    assert_eq!(
        std::fs::metadata(&stored[0]).unwrap().ino(),
        inode,
        "compiled again"
    );
    kernels::compile_cached("sm_90", &[], Some(dir.path()), true).unwrap();
    assert_ne!(
        std::fs::metadata(&stored[0]).unwrap().ino(),
        inode,
        "refresh kept the file"
    );
    // A file cut short is not loaded: compiled again and replaced.
    let bytes = std::fs::read(&stored[0]).unwrap();
    std::fs::write(&stored[0], &bytes[..bytes.len() / 2]).unwrap();
    kernels::compile_cached("sm_90", &[], Some(dir.path()), false).unwrap();
    assert_eq!(std::fs::read(&stored[0]).unwrap(), bytes);
}
