//! What the process-wide variables say about how gmcl opens and uses the GPU and memory, for
//! the front ends that read the environment (the command line, the Python package): each reads
//! its variables and hands them here, so both mean the same by them. The library's work never
//! reads the environment; it takes these settings as explicit options.
//!
//! - `GMCL_KERNEL_CACHE`: where compiled kernels are kept (a folder; `0` or `off`: nowhere;
//!   default `$XDG_CACHE_HOME/gmcl`, else `$HOME/.cache/gmcl`);
//! - `GMCL_KERNEL_DEFINES="NAME=VALUE ..."`: macros for tuning experiments on the kernels'
//!   `#ifndef` constants;
//! - `GMCL_MEMORY_LIMIT=SIZE`: the memory the loaders check a graph against, in place of what
//!   the machine, `ulimit -v` and the cgroup leave (bytes, or with a suffix K, M, G, T);
//! - `GMCL_GPU_MEMORY_LIMIT`, `GMCL_GPU_DENSE_FROM`, `GMCL_GPU_DENSE_FRACTION`,
//!   `GMCL_GPU_DENSE_SMALL_TOP`, `GMCL_GPU_HASH_LIMIT`: the GPU engine's tuning knobs
//!   ([`GpuTuning`]);
//! - `GMCL_GPU_POISON=1`, `GMCL_GPU_PROFILE=1`: outputs poisoned before the kernels write them,
//!   phase times on stderr;
//! - `GMCL_GPU_FAULT=N`: a test switch, the N-th checked GPU driver call fails;
//! - the process's place among an MPI launcher's ranks on its host
//!   (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`, `SLURM_LOCALID`): the GPU it opens,
//!   modulo the host's GPUs.

use crate::error::{Error, Result};
use crate::gpu::DeviceOptions;
use crate::spgemm::gpu::GpuTuning;
use crate::tricount::gpu::TriangleTuning;
use std::ffi::OsString;
use std::path::PathBuf;

/// The process-wide settings and the GPU kernels' tuning the variables ask for.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// How the GPU is opened: the kernel cache, the kernels' macros, which GPU.
    pub device: DeviceOptions,
    /// The memory the loaders check a graph against (`None`: what the machine leaves).
    pub memory_limit: Option<u64>,
    /// The checked GPU driver call that fails, counted from 1 (a test switch).
    pub gpu_fault: Option<u64>,
    /// The SpGEMM engine's knobs (MCL's too).
    pub gpu: GpuTuning,
    /// The triangle kernels' switches.
    pub triangles: TriangleTuning,
}

impl Settings {
    /// Reads the settings from the variables `var` gives (`std::env::var_os` in a front end).
    /// A memory limit that cannot be read is an error, never "no limit"; the other numbers are
    /// ignored when they are not numbers, as unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Result<Settings> {
        let set = |k: &str| var(k).filter(|v| !v.is_empty());
        let text = |k: &str| set(k).map(|v| v.to_string_lossy().into_owned());
        let number = |k: &str| text(k).and_then(|v| v.trim().parse::<u64>().ok());
        let on = |k: &str| text(k).is_some_and(|v| v == "1");
        let kernel_cache = match set("GMCL_KERNEL_CACHE") {
            Some(v) if v == "0" || v == "off" => None,
            Some(v) => Some(PathBuf::from(v)),
            None => set("XDG_CACHE_HOME")
                .map(|d| PathBuf::from(d).join("gmcl"))
                .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".cache").join("gmcl"))),
        };
        let kernel_defines = text("GMCL_KERNEL_DEFINES")
            .map(|d| d.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let ordinal = [
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "MPI_LOCALRANKID",
            "SLURM_LOCALID",
        ]
        .iter()
        .find_map(|k| number(k))
        .unwrap_or(0) as usize;
        let memory_limit = match var("GMCL_MEMORY_LIMIT") {
            None => None,
            Some(v) => Some(v.to_str().and_then(size).ok_or_else(|| {
                Error::Invalid(format!(
                    "GMCL_MEMORY_LIMIT={}: expected a number of bytes, optionally with a suffix \
                     K, M, G or T (powers of 1024), such as 8G",
                    v.to_string_lossy()
                ))
            })?),
        };
        let (poison, profile) = (on("GMCL_GPU_POISON"), on("GMCL_GPU_PROFILE"));
        Ok(Settings {
            device: DeviceOptions {
                kernel_cache,
                kernel_defines,
                ordinal,
            },
            memory_limit,
            gpu_fault: number("GMCL_GPU_FAULT"),
            gpu: GpuTuning {
                memory_limit: number("GMCL_GPU_MEMORY_LIMIT"),
                poison,
                profile,
                dense_from: number("GMCL_GPU_DENSE_FROM"),
                dense_fraction: number("GMCL_GPU_DENSE_FRACTION"),
                dense_small_top: number("GMCL_GPU_DENSE_SMALL_TOP"),
                hash_limit: number("GMCL_GPU_HASH_LIMIT"),
                ..Default::default()
            },
            triangles: TriangleTuning {
                poison,
                profile,
                ..Default::default()
            },
        })
    }

    /// Makes the process-wide settings the process's: how the GPU will be opened, the memory
    /// limit, the fault switch. Call it before anything opens the GPU; it fails when the GPU
    /// was already opened or configured.
    pub fn apply(&self) -> Result<()> {
        crate::gpu::configure(self.device.clone())?;
        if let Some(b) = self.memory_limit {
            crate::io::limits::set_memory_limit(Some(b));
        }
        if let Some(n) = self.gpu_fault {
            crate::gpu::fault::inject_at(n);
        }
        Ok(())
    }
}

/// A size in bytes: digits, optionally followed by K, M, G or T (powers of 1024, either case).
/// Anything else (empty, `1e9`, `1.5G`, `-1`, `1GB`) is refused rather than read as no limit.
fn size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (digits, shift) = match v.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&v[..v.len() - 1], 10),
        Some(b'M') => (&v[..v.len() - 1], 20),
        Some(b'G') => (&v[..v.len() - 1], 30),
        Some(b'T') => (&v[..v.len() - 1], 40),
        _ => (v, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Result<Settings> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Settings::from_vars(|k| vars.get(k).cloned())
    }

    #[test]
    fn memory_sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(size("1073741824"), Some(1 << 30));
        assert_eq!(size(" 8G "), Some(8 << 30));
        assert_eq!(size("512k"), Some(512 << 10));
        assert_eq!(size("3M"), Some(3 << 20));
        assert_eq!(size("2T"), Some(2 << 40));
        for bad in [
            "",
            " ",
            "1e9",
            "1.5G",
            "-1",
            "1GB",
            "G",
            "+5",
            "99999999999999999999",
            "16777216T",
        ] {
            assert_eq!(size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn variables_become_the_settings() {
        let s = from(&[
            ("HOME", "/h"),
            ("GMCL_KERNEL_DEFINES", " A=1  B=2 "),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
            ("GMCL_MEMORY_LIMIT", "2G"),
            ("GMCL_GPU_FAULT", "7"),
            ("GMCL_GPU_DENSE_FRACTION", "8"),
            ("GMCL_GPU_DENSE_SMALL_TOP", "0"),
            ("GMCL_GPU_HASH_LIMIT", "x"),
            ("GMCL_GPU_POISON", "1"),
            ("GMCL_GPU_PROFILE", "yes"),
        ])
        .unwrap();
        assert_eq!(s.device.kernel_cache, Some(PathBuf::from("/h/.cache/gmcl")));
        assert_eq!(s.device.kernel_defines, ["A=1", "B=2"]);
        assert_eq!(s.device.ordinal, 3);
        assert_eq!(s.memory_limit, Some(2 << 30));
        assert_eq!(s.gpu_fault, Some(7));
        assert_eq!(s.gpu.dense_fraction, Some(8));
        assert_eq!(s.gpu.dense_small_top, Some(0));
        assert_eq!(s.gpu.hash_limit, None, "not a number: unset");
        assert!(s.gpu.poison && s.triangles.poison);
        assert!(!s.gpu.profile && !s.triangles.profile, "only 1 switches on");
    }

    #[test]
    fn the_kernel_cache_follows_xdg_and_can_be_turned_off() {
        let at = |vars: &[(&str, &str)]| from(vars).unwrap().device.kernel_cache;
        assert_eq!(
            at(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")]),
            Some(PathBuf::from("/x/gmcl"))
        );
        assert_eq!(
            at(&[("HOME", "/h"), ("GMCL_KERNEL_CACHE", "/k")]),
            Some(PathBuf::from("/k"))
        );
        assert_eq!(at(&[("HOME", "/h"), ("GMCL_KERNEL_CACHE", "off")]), None);
        assert_eq!(at(&[("GMCL_KERNEL_CACHE", "0")]), None);
        assert_eq!(at(&[]), None);
    }

    #[test]
    fn an_unreadable_memory_limit_is_an_error() {
        let e = from(&[("GMCL_MEMORY_LIMIT", "1.5G")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GMCL_MEMORY_LIMIT=1.5G") && e.contains("such as 8G"),
            "{e}"
        );
        assert!(from(&[("GMCL_MEMORY_LIMIT", "")]).is_err());
    }
}
