//! The kernel cache on a GPU: the first run keeps the kernels' PTX and the machine code the
//! driver made of it (a CUBIN); later runs load the CUBIN, and a damaged one is made again with
//! the same answers. Without a usable GPU the test says so and passes, unless
//! `GMCL_REQUIRE_GPU=1` (set on the GPU machine).

use crate::util::{cmd, generated, gpu};

/// The count of `gmcl tricount g --engine gpu` with the kernel cache in `cache`.
fn count(g: &std::path::Path, cache: &std::path::Path) -> String {
    let out = cmd()
        .args(["tricount", g.to_str().unwrap(), "--engine", "gpu", "-q"])
        .env("GMCL_KERNEL_CACHE", cache)
        .output()
        .expect("the gmcl binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The cache's files ending in `ext`.
fn files(cache: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

#[test]
fn the_cache_keeps_the_drivers_cubin_and_makes_a_damaged_one_again() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let g = generated(
        dir.path().join("g.el"),
        &["-s", "10", "-e", "8", "--undirected", "--seed", "5"],
    );
    let want = crate::util::ok(&["tricount", g.to_str().unwrap(), "--engine", "cpu", "-q"]);
    let cache = dir.path().join("cache");
    assert_eq!(count(&g, &cache), want);
    let cubins = files(&cache, "cubin");
    assert_eq!((files(&cache, "ptx").len(), cubins.len()), (1, 1));
    let kept = std::fs::read(&cubins[0]).unwrap();
    assert!(kept.len() > 1000);
    assert_eq!(count(&g, &cache), want);
    assert_eq!(std::fs::read(&cubins[0]).unwrap(), kept);
    std::fs::write(&cubins[0], b"damaged").unwrap();
    assert_eq!(count(&g, &cache), want);
    assert!(std::fs::read(&cubins[0]).unwrap().len() > 1000);
}
