//! The CUDA kernels of `kernels/`: their source, compiled with NVRTC for one architecture.
//!
//! The `.cu` files are embedded in the binary and concatenated behind `common.cuh` (NVRTC has no
//! system headers and no include path to the source tree at run time).

use crate::error::{Error, Result};
use cudarc::nvrtc::{CompileOptions, Ptx};

/// The kernel files, in the order they are concatenated.
const SOURCES: [(&str, &str); 9] = [
    ("common.cuh", include_str!("../../kernels/common.cuh")),
    ("scan.cu", include_str!("../../kernels/scan.cu")),
    ("setup.cu", include_str!("../../kernels/setup.cu")),
    ("accumulate.cu", include_str!("../../kernels/accumulate.cu")),
    ("heavy.cu", include_str!("../../kernels/heavy.cu")),
    ("entry.cu", include_str!("../../kernels/entry.cu")),
    ("triangles.cu", include_str!("../../kernels/triangles.cu")),
    ("mcl.cu", include_str!("../../kernels/mcl.cu")),
    ("dense.cu", include_str!("../../kernels/dense.cu")),
];

/// Every entry point gmcl launches; a typed kernel `k` exists as `k_f32` and `k_f64`.
pub const UNTYPED: &[&str] = &[
    "scan_blocks_u64",
    "scan_add_u64",
    "add_offset_u64",
    "row_products",
    "classify_sizes",
    "scatter_bins",
    "gather_sizes",
    "iota_u32",
    "grid_row_sums",
    "group_starts",
    "hash_rows_symbolic",
    "hash_segs_symbolic",
    "dense_segs_symbolic",
    "heavy_col_counts",
    "slice_flags",
    "slice_build",
    "multisplit_histogram",
    "chunk_flags",
    "chunk_place",
    "degree_histogram",
    "degree_ranks",
    "orient_counts",
    "orient_fill",
    "sort_rows",
    "transpose_fill",
    "triangles_light",
    "heavy_items",
    "triangles_heavy",
    "gather_by_rank",
    "dense_rows_symbolic",
];

/// Kernels instantiated once per value type (suffix `_f32` / `_f64`).
pub const TYPED: &[&str] = &[
    "hash_rows_numeric",
    "hash_segs_numeric",
    "dense_segs_numeric",
    "csc_scatter",
    "outer_product",
    "multisplit",
    "mcl_prune_plan",
    "mcl_prune_write",
    "dense_rows_numeric",
];

/// Kernels that take more dynamic shared memory than the default 48 KiB (the device's opt-in
/// maximum, less [`OPTIN_RESERVE`] for their static shared variables); typed ones by base name.
pub const LARGE_SHARED: &[&str] = &["dense_rows_symbolic", "dense_rows_numeric"];

/// Bytes of the opt-in shared memory left for the static shared variables of the
/// [`LARGE_SHARED`] kernels.
pub const OPTIN_RESERVE: u64 = 1024;

/// The whole translation unit NVRTC compiles, with `#line` markers so that compiler messages
/// name the original file and line.
pub fn source() -> String {
    let mut s = String::new();
    for (name, text) in SOURCES {
        s.push_str(&format!("#line 1 \"{name}\"\n"));
        s.push_str(text);
        s.push('\n');
    }
    s
}

/// Whether the NVRTC library can be loaded (cudarc panics on a call into a missing library, so
/// this is asked first).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to open the shared library by its candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles every kernel to PTX for `arch` (such as `sm_90`).
pub fn compile(arch: &str) -> Result<Ptx> {
    if !nvrtc_present() {
        return Err(Error::EngineUnavailable(
            "NVRTC (libnvrtc.so.13) was not found: install the CUDA 13 toolkit or \
             `pip install nvidia-cuda-nvrtc` and put its lib folder on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "-lineinfo".into(),
        ],
        name: Some("gmagnus.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(source(), opts)
        .map_err(|e| Error::gpu(format!("compile kernels for {arch}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_file_is_in_the_source() {
        let s = source();
        for (name, _) in SOURCES {
            assert!(s.contains(&format!("#line 1 \"{name}\"")), "{name}");
        }
        for k in UNTYPED {
            assert!(s.contains(&format!("{k}(")), "{k} has no definition");
        }
        for k in TYPED {
            assert!(
                s.contains(&format!("{k}_##S(")),
                "{k} has no typed entry point"
            );
        }
    }
}
