//! Helpers shared by the GPU test files.

use std::sync::Arc;

/// The GPU, or `None` (after saying why) where none is usable; with `GMCL_REQUIRE_GPU=1` (set on
/// the GPU machine) a missing GPU fails the test instead.
pub fn gpu() -> Option<Arc<gmcl::gpu::Gpu>> {
    match gmcl::gpu::device() {
        Ok(g) => Some(g),
        Err(why) => {
            assert!(
                std::env::var("GMCL_REQUIRE_GPU").map_or(true, |v| v != "1"),
                "GMCL_REQUIRE_GPU=1 but no GPU is usable: {why}"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}
