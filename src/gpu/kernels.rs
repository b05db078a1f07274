//! The CUDA kernels of `kernels/`: their source, compiled with NVRTC for one architecture.
//!
//! The `.cu` files are embedded in the binary and concatenated behind `common.cuh` (NVRTC has no
//! system headers and no include path to the source tree at run time).

use crate::error::{Error, Result};
use cudarc::nvrtc::{self, Ptx};
use std::ffi::{CStr, CString};

/// The kernel files, in the order they are concatenated.
const SOURCES: [(&str, &str); 12] = [
    ("common.cuh", include_str!("../../kernels/common.cuh")),
    ("scan.cu", include_str!("../../kernels/scan.cu")),
    ("setup.cu", include_str!("../../kernels/setup.cu")),
    ("accumulate.cu", include_str!("../../kernels/accumulate.cu")),
    ("heavy.cu", include_str!("../../kernels/heavy.cu")),
    ("entry.cu", include_str!("../../kernels/entry.cu")),
    ("triangles.cu", include_str!("../../kernels/triangles.cu")),
    ("mcl.cu", include_str!("../../kernels/mcl.cu")),
    ("dense.cu", include_str!("../../kernels/dense.cu")),
    ("mcl_dense.cu", include_str!("../../kernels/mcl_dense.cu")),
    ("rows.cu", include_str!("../../kernels/rows.cu")),
    ("symmetry.cu", include_str!("../../kernels/symmetry.cu")),
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
    "orient_ranks",
    "orient_counts",
    "orient_fill",
    "sort_rows",
    "list_long_rows",
    "sort_long_rows",
    "transpose_fill",
    "block_degrees",
    "invert_ranks",
    "block_lengths",
    "lengths_by_rank",
    "mirrors_of_down_entries",
    "mirrors_of_unsorted_rows",
    "pivot_in_lens",
    "pivot_items",
    "triangles_light",
    "heavy_items",
    "triangles_heavy",
    "gather_by_rank",
    "triangles_rows",
    "dense_rows_symbolic",
    "window_bounds",
    "flag_columns",
    "place_pattern",
    "mirror_check",
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
    "mcl_dense_prune",
    "mcl_wide_prune",
    "gather_rows",
];

/// The typed kernels that sum products: also instantiated with MCL's order-free sums
/// ([`crate::quantized`]), with the suffix `_f32q` / `_f64q`.
pub const SUMMING: &[&str] = &[
    "outer_product",
    "hash_rows_numeric",
    "hash_segs_numeric",
    "dense_segs_numeric",
    "dense_rows_numeric",
];

/// The suffixes of typed entry points.
const SUFFIXES: [&str; 4] = ["_f32q", "_f64q", "_f32", "_f64"];

/// The name of every entry point gmcl launches.
pub fn entry_points() -> Vec<String> {
    let typed = TYPED
        .iter()
        .flat_map(|k| [format!("{k}_f32"), format!("{k}_f64")]);
    let summing = SUMMING
        .iter()
        .flat_map(|k| [format!("{k}_f32q"), format!("{k}_f64q")]);
    UNTYPED
        .iter()
        .map(|k| k.to_string())
        .chain(typed)
        .chain(summing)
        .collect()
}

/// An entry point's kernel, without its type suffix.
pub fn base_name(entry: &str) -> &str {
    SUFFIXES
        .iter()
        .find_map(|s| entry.strip_suffix(s))
        .unwrap_or(entry)
}

/// Kernels that take more dynamic shared memory than the default 48 KiB (the device's opt-in
/// maximum, less [`OPTIN_RESERVE`] for their static shared variables); typed ones by base name.
pub const LARGE_SHARED: &[&str] = &[
    "dense_rows_symbolic",
    "dense_rows_numeric",
    "mcl_dense_prune",
    "mcl_wide_prune",
];

/// Bytes of the opt-in shared memory left for the static shared variables of the
/// [`LARGE_SHARED`] kernels.
pub const OPTIN_RESERVE: u64 = 3072;

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

/// The value of the integer macro `name` as the kernels define it (`#define NAME 1024`), or
/// `None` when no kernel file defines it so. Host code whose launch sizes must match a kernel's
/// constant checks the pair with this in its tests.
pub fn defined(name: &str) -> Option<u64> {
    SOURCES.iter().find_map(|(_, text)| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some("#define") || words.next() != Some(name) {
                return None;
            }
            let value = words.next()?.trim_end_matches(['u', 'U', 'l', 'L']);
            match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => value.parse().ok(),
            }
        })
    })
}

/// Whether the NVRTC library can be loaded (cudarc panics on a call into a missing library, so
/// this is asked first).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to open the shared library by its candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The NVRTC options for `arch`, with the macro definitions `defines` (`NAME=VALUE`, such as
/// `DENSE_UNROLL=8`): a knob for tuning experiments on the constants the kernels guard with
/// `#ifndef`.
fn options(arch: &str, defines: &[String]) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "-lineinfo".into(),
    ];
    o.extend(defines.iter().map(|d| format!("-D{d}")));
    o
}

/// The kernels compiled for one architecture: the PTX NVRTC made (for reading) and the CUBIN its
/// assembler made from it, which the driver loads as it is, with no compile of its own.
pub struct Compiled {
    /// The PTX text.
    pub ptx: String,
    /// The machine code, an ELF image.
    pub cubin: Vec<u8>,
}

/// An NVRTC program, destroyed when dropped.
struct Program(nvrtc::sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by create_program and is destroyed only here.
        let _ = unsafe { nvrtc::result::destroy_program(self.0) };
    }
}

/// Compiles every kernel for `arch` (a real architecture such as `sm_90`) with NVRTC, with the
/// macro definitions `defines` (`NAME=VALUE`; none for the kernels as shipped).
pub fn compile(arch: &str, defines: &[String]) -> Result<Compiled> {
    if !nvrtc_present() {
        return Err(Error::EngineUnavailable(
            "NVRTC (libnvrtc.so.13) was not found: install the CUDA 13 toolkit or \
             `pip install nvidia-cuda-nvrtc` and put its lib folder on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    let stage = || format!("compile kernels for {arch}");
    let src = CString::new(source()).map_err(|e| Error::gpu(stage(), e))?;
    let prog = Program(
        nvrtc::result::create_program(&src, Some(c"gmagnus.cu"))
            .map_err(|e| Error::gpu(stage(), e))?,
    );
    // SAFETY: `prog` is a live program (destroyed only by its Drop); `src` outlives it.
    unsafe {
        if let Err(e) = nvrtc::result::compile_program(prog.0, &options(arch, defines)) {
            let log = nvrtc::result::get_program_log(prog.0)
                .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                .unwrap_or_default();
            return Err(Error::gpu(stage(), format!("{e}\n{log}")));
        }
        let ptx = nvrtc::result::get_ptx(prog.0).map_err(|e| Error::gpu(stage(), e))?;
        let ptx = CStr::from_ptr(ptx.as_ptr()).to_string_lossy().into_owned();
        let mut size = 0usize;
        nvrtc::sys::nvrtcGetCUBINSize(prog.0, &mut size)
            .result()
            .map_err(|e| Error::gpu(stage(), e))?;
        let mut cubin = vec![0u8; size];
        nvrtc::sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast())
            .result()
            .map_err(|e| Error::gpu(stage(), e))?;
        Ok(Compiled { ptx, cubin })
    }
}

/// Whether `bytes` is a whole CUBIN: a 64-bit little-endian ELF image for CUDA whose program
/// and section header tables lie inside it. A cached file failing this (another program's, cut
/// short, or PTX) is compiled again: the driver is not asked to load a broken image.
fn is_cubin(bytes: &[u8]) -> bool {
    const EM_CUDA: u64 = 190;
    // Header fields widened to u64, so that a table's end is computed without overflow.
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as u64;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let table_inside = |offset: u64, entries: u64, size: u64| {
        entries == 0
            || offset
                .checked_add(entries * size)
                .is_some_and(|end| end <= bytes.len() as u64)
    };
    bytes.len() >= 64
        && bytes.starts_with(b"\x7fELF\x02\x01")
        && u16_at(18) == EM_CUDA
        && table_inside(u64_at(0x20), u16_at(0x38), u16_at(0x36))
        && table_inside(u64_at(0x28), u16_at(0x3c), u16_at(0x3a))
}

/// The kernels for `arch` with the macro definitions `defines`, as the CUBIN the driver loads:
/// read from the folder `cache` when an earlier run compiled the same source with the same
/// options (unless `refresh`), else compiled (seconds) and stored there. A cache that cannot be
/// read or written only costs the compile; without one, every call compiles.
pub fn compile_cached(
    arch: &str,
    defines: &[String],
    cache: Option<&std::path::Path>,
    refresh: bool,
) -> Result<Ptx> {
    let Some(path) = cache.map(|d| d.join(cache_name(arch, defines))) else {
        return Ok(Ptx::from_binary(compile(arch, defines)?.cubin));
    };
    if !refresh {
        if let Ok(bytes) = std::fs::read(&path) {
            if is_cubin(&bytes) {
                return Ok(Ptx::from_binary(bytes));
            }
        }
    }
    let cubin = compile(arch, defines)?.cubin;
    let _ = store(&path, &cubin);
    Ok(Ptx::from_binary(cubin))
}

/// The cache file of `arch`: named by an FNV-1a hash of the source and the options, so that a
/// changed kernel or option never reads a stale file.
fn cache_name(arch: &str, defines: &[String]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let text = source() + &options(arch, defines).join(" ");
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("kernels-{arch}-{h:016x}.cubin")
}

/// Writes `bytes` to `path` through a temporary file and a rename, so that a reader never sees
/// half a file.
fn store(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Unique to the call, not just the process: threads of one process may store at once.
    static STORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".kernels.{}.{n}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_names_follow_the_architecture() {
        assert_ne!(cache_name("sm_90", &[]), cache_name("sm_80", &[]));
        assert_eq!(cache_name("sm_90", &[]), cache_name("sm_90", &[]));
        assert!(cache_name("sm_90", &[]).starts_with("kernels-sm_90-"));
        let dir = std::env::temp_dir().join(format!("gmcl-cache-test-{}", std::process::id()));
        let path = dir.join("a.cubin");
        let image = elf_image(190, 128);
        store(&path, &image).unwrap();
        assert!(is_cubin(&std::fs::read(&path).unwrap()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An ELF header for `machine` of a file of `len` bytes whose one section header (64 bytes)
    /// starts at byte 64.
    fn elf_image(machine: u16, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len.max(64)];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
        b.truncate(len);
        b
    }

    #[test]
    fn only_whole_cuda_images_are_loaded_from_the_cache() {
        assert!(is_cubin(&elf_image(190, 128)));
        assert!(!is_cubin(&elf_image(190, 127)), "cut short");
        assert!(!is_cubin(&elf_image(62, 128)), "an x86-64 image");
        assert!(!is_cubin(&elf_image(190, 40)), "shorter than a header");
        assert!(!is_cubin(b".version 9.0"), "PTX");
        let mut far = elf_image(190, 128);
        far[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(!is_cubin(&far), "a table past the end of the file");
    }

    #[test]
    fn integer_macros_are_read_from_the_kernels() {
        assert_eq!(defined("WARP"), Some(32));
        assert_eq!(defined("EMPTY_KEY"), Some(0xffff_ffff));
        assert_eq!(defined("SCAN_ITEMS"), None, "an expression, not an integer");
        assert_eq!(defined("NO_SUCH_MACRO"), None);
    }

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
        for k in SUMMING {
            assert!(TYPED.contains(k), "{k} is not typed");
            assert!(s.contains(&format!("{k}_##S(")));
        }
        // Every way of summing is instantiated for both types.
        for m in ["GMCL_SUMMING_KERNELS", "GMCL_DENSE_ROW_KERNELS"] {
            for (ty, sum, suffix) in [
                ("float", "PlainSum", "f32"),
                ("double", "PlainSum", "f64"),
                ("float", "QuantaSum", "f32q"),
                ("double", "QuantaSum", "f64q"),
            ] {
                assert!(
                    s.contains(&format!("{m}({ty}, {sum}, {suffix})")),
                    "{m} {suffix}"
                );
            }
        }
    }

    /// The names of the kernels the source defines (`extern "C" __global__`), a typed one with
    /// its `_##S` suffix.
    fn defined_kernels(s: &str) -> Vec<String> {
        let mut names = Vec::new();
        // Macros continue their lines with backslashes.
        let blank = |c: char| c.is_whitespace() || c == '\\';
        for (k, _) in s.match_indices("extern \"C\" __global__") {
            let mut rest = s[k..].trim_start_matches("extern \"C\" __global__");
            rest = rest.trim_start_matches(blank);
            rest = rest
                .strip_prefix("void")
                .unwrap_or(rest)
                .trim_start_matches(blank);
            if let Some(r) = rest.strip_prefix("__launch_bounds__(") {
                rest = r[r.find(')').unwrap() + 1..].trim_start_matches(blank);
            }
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '#'))
                .unwrap();
            names.push(rest[..end].to_string());
        }
        names
    }

    #[test]
    fn every_kernel_defined_is_listed() {
        // A kernel missing from the lists is not loaded, and launching it fails on the GPU
        // alone: caught here, without one.
        let names = defined_kernels(&source());
        assert!(names.len() > 40, "{names:?}");
        for name in names {
            match name.strip_suffix("_##S") {
                Some(typed) => assert!(TYPED.contains(&typed), "{typed} is not in TYPED"),
                None => assert!(UNTYPED.contains(&name.as_str()), "{name} is not in UNTYPED"),
            }
        }
    }

    #[test]
    fn entry_points_and_their_kernels() {
        let all = entry_points();
        assert!(all.contains(&"dense_rows_numeric_f32q".to_string()));
        assert!(all.contains(&"mcl_dense_prune_f64".to_string()));
        assert!(!all.contains(&"mcl_dense_prune_f64q".to_string()));
        assert_eq!(base_name("dense_rows_numeric_f32q"), "dense_rows_numeric");
        assert_eq!(base_name("dense_rows_numeric_f64"), "dense_rows_numeric");
        assert_eq!(base_name("scan_add_u64"), "scan_add_u64");
    }
}
