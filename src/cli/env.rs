//! The environment variables gmcl reads: only the command line reads them, and it hands what
//! they say to the library as explicit options.
//!
//! - `GMCL_KERNEL_CACHE`: where compiled kernels are kept (a folder; `0` or `off`: nowhere;
//!   default `$XDG_CACHE_HOME/gmcl`, else `$HOME/.cache/gmcl`);
//! - `GMCL_KERNEL_DEFINES="NAME=VALUE ..."`: macros for tuning experiments on the kernels'
//!   `#ifndef` constants;
//! - `GMCL_MEMORY_LIMIT=SIZE`: the memory the loaders check a graph against, in place of what
//!   the machine, `ulimit -v` and the cgroup leave (bytes, or with a suffix K, M, G, T);
//! - `GMCL_GPU_MEMORY_LIMIT`, `GMCL_GPU_DENSE_FROM`, `GMCL_GPU_DENSE_FRACTION`,
//!   `GMCL_GPU_HASH_LIMIT`: the GPU engine's tuning knobs ([`GpuTuning`]);
//! - `GMCL_GPU_POISON=1`, `GMCL_GPU_PROFILE=1`: outputs poisoned before the kernels write them,
//!   phase times on stderr;
//! - `GMCL_GPU_FAULT=N`: a test switch, the N-th checked GPU driver call fails;
//! - `GMCL_DIST_STAGE=N`: a distributed run exchanges at most N edges or row entries per rank
//!   and round (small values force many rounds, for tests);
//! - `GMCL_NCCL_MIN_WORDS=N`: exchanges of fewer words go by MPI even where the ranks' GPUs are
//!   joined by NCCL (default [`gmcl::dist::nccl::MIN_WORDS`]; 0 sends every one through NCCL,
//!   for tests);
//! - with the `mpi` feature, the variables an MPI launcher sets for its ranks
//!   (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `PMIX_RANK`): gmcl runs across ranks when one is set;
//! - the rank's place on its host (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`,
//!   `SLURM_LOCALID`): the GPU it opens, modulo the host's GPUs; and the ranks on its host
//!   (`OMPI_COMM_WORLD_LOCAL_SIZE`, `MPI_LOCALNRANKS`): MCL's share of the host's memory.

use gmcl::spgemm::gpu::GpuTuning;
use gmcl::tricount::gpu::TriangleTuning;
use gmcl::{Error, Result};
use std::path::PathBuf;

/// Sets up the library from the process-wide variables (kernel cache and macros, the memory
/// limit, the fault switch). Call before anything opens the GPU. A memory limit that cannot be
/// read is an error (exit 2), never "no limit".
pub fn configure() -> Result<()> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let kernel_cache = match var("GMCL_KERNEL_CACHE") {
        Some(v) if v == "0" || v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => var("XDG_CACHE_HOME")
            .map(|d| PathBuf::from(d).join("gmcl"))
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache").join("gmcl"))),
    };
    let kernel_defines = std::env::var("GMCL_KERNEL_DEFINES")
        .map(|d| d.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    // Nothing has opened the GPU yet, so this cannot fail.
    let _ = gmcl::gpu::configure(gmcl::gpu::DeviceOptions {
        kernel_cache,
        kernel_defines,
        ordinal: local_rank(),
    });
    if let Some(v) = std::env::var_os("GMCL_MEMORY_LIMIT") {
        let bytes = v.to_str().ok_or(()).and_then(|v| size(v).map_err(|_| ()));
        match bytes {
            Ok(b) => gmcl::io::limits::set_memory_limit(Some(b)),
            Err(()) => {
                return Err(Error::Invalid(format!(
                    "GMCL_MEMORY_LIMIT={}: expected a number of bytes, optionally with a suffix \
                     K, M, G or T (powers of 1024), such as 8G",
                    v.to_string_lossy()
                )))
            }
        }
    }
    if let Some(n) = number("GMCL_GPU_FAULT") {
        gmcl::gpu::fault::inject_at(n);
    }
    Ok(())
}

/// A size in bytes: digits, optionally followed by K, M, G or T (powers of 1024, either case).
/// Anything else (empty, `1e9`, `1.5G`, `-1`, `1GB`) is refused rather than read as no limit.
fn size(v: &str) -> Result<u64, ()> {
    let v = v.trim();
    let (digits, shift) = match v.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&v[..v.len() - 1], 10),
        Some(b'M') => (&v[..v.len() - 1], 20),
        Some(b'G') => (&v[..v.len() - 1], 30),
        Some(b'T') => (&v[..v.len() - 1], 40),
        _ => (v, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    let n: u64 = digits.parse().map_err(|_| ())?;
    n.checked_mul(1 << shift).ok_or(())
}

/// The GPU engine's tuning: the defaults, with the `GMCL_GPU_*` knobs that are set.
pub fn gpu_tuning() -> GpuTuning {
    GpuTuning {
        memory_limit: number("GMCL_GPU_MEMORY_LIMIT"),
        poison: on("GMCL_GPU_POISON"),
        profile: on("GMCL_GPU_PROFILE"),
        dense_from: number("GMCL_GPU_DENSE_FROM"),
        dense_fraction: number("GMCL_GPU_DENSE_FRACTION"),
        hash_limit: number("GMCL_GPU_HASH_LIMIT"),
        ..Default::default()
    }
}

/// The triangle kernels' switches: poisoning and profiling as for the engine.
pub fn triangle_tuning() -> TriangleTuning {
    TriangleTuning {
        poison: on("GMCL_GPU_POISON"),
        profile: on("GMCL_GPU_PROFILE"),
        ..Default::default()
    }
}

/// Whether an MPI launcher (`mpirun`, `mpiexec`, `srun`) started this process as one of its
/// ranks: OpenMPI, MPICH (PMI) and PMIx launchers set these.
#[cfg(feature = "mpi")]
pub fn launched_by_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
        .iter()
        .any(|k| std::env::var_os(k).is_some())
}

/// The distributed count's options: the defaults, with `GMCL_DIST_STAGE` bounding both stages.
pub fn dist_tricount_options(per_vertex: bool) -> gmcl::dist::tricount::Options {
    let mut o = gmcl::dist::tricount::Options {
        per_vertex,
        ..Default::default()
    };
    if let Some(n) = number("GMCL_DIST_STAGE") {
        o.stage_edges = n as usize;
        o.stage_entries = n as usize;
    }
    o
}

/// The smallest exchange NCCL carries: `GMCL_NCCL_MIN_WORDS`, else the library's default.
#[cfg(feature = "mpi")]
pub fn nccl_min_words() -> u64 {
    number("GMCL_NCCL_MIN_WORDS").unwrap_or(gmcl::dist::nccl::MIN_WORDS)
}

/// This process's rank among the ranks an MPI launcher started on this host (0 without one):
/// the GPU it opens, modulo the host's GPUs. OpenMPI, MPICH and Slurm name it.
fn local_rank() -> usize {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|k| number(k))
    .unwrap_or(0) as usize
}

/// The distributed product's options: the defaults, with `GMCL_DIST_STAGE` bounding both stages.
pub fn dist_spgemm_options() -> gmcl::dist::spgemm::Options {
    let mut o = gmcl::dist::spgemm::Options::default();
    if let Some(n) = number("GMCL_DIST_STAGE") {
        o.stage_edges = n as usize;
        o.stage_entries = n as usize;
    }
    o
}

/// The stages of MCL across ranks: `GMCL_DIST_STAGE` bounds both (as for tricount); without
/// it, each rank sizes its rounds by its share of the host's memory (the ranks the launcher
/// started on this host).
pub fn dist_mcl_options() -> gmcl::dist::mcl::Options {
    let mut o = gmcl::dist::mcl::Options {
        ranks_on_host: ranks_on_host(),
        ..Default::default()
    };
    if let Some(n) = number("GMCL_DIST_STAGE") {
        o.stage_edges = n as usize;
        o.stage_entries = Some(n as usize);
    }
    o
}

/// The number of ranks an MPI launcher started on this host (1 without one). OpenMPI and
/// MPICH name it.
fn ranks_on_host() -> usize {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|k| number(k))
        .unwrap_or(1)
        .max(1) as usize
}

/// A variable that holds a number (unset or unreadable: `None`).
fn number(k: &str) -> Option<u64> {
    std::env::var(k).ok().and_then(|v| v.trim().parse().ok())
}

/// A switch: on when the variable is `1`.
fn on(k: &str) -> bool {
    std::env::var(k).is_ok_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn memory_sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(size("1073741824"), Ok(1 << 30));
        assert_eq!(size(" 8G "), Ok(8 << 30));
        assert_eq!(size("512k"), Ok(512 << 10));
        assert_eq!(size("3M"), Ok(3 << 20));
        assert_eq!(size("2T"), Ok(2 << 40));
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
            assert_eq!(size(bad), Err(()), "{bad:?}");
        }
    }
}
