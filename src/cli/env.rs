//! The environment variables gmcl reads: only the command line (and the Python package) read
//! them, and hand what they say to the library as explicit options. The GPU's, the memory
//! limit's and the kernels' variables are read as the library's [`Settings`] describes them;
//! the distributed runs' are read here:
//!
//! - `GMCL_DIST_STAGE=N`: a distributed run exchanges at most N edges or row entries per rank
//!   and round (small values force many rounds, for tests);
//! - `GMCL_NCCL_MIN_WORDS=N`: exchanges of fewer words go by MPI even where the ranks' GPUs are
//!   joined by NCCL (default [`gmcl::dist::nccl::MIN_WORDS`]; 0 sends every one through NCCL,
//!   for tests);
//! - with the `mpi` feature, the variables an MPI launcher sets for its ranks
//!   (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `PMIX_RANK`): gmcl runs across ranks when one is set;
//! - the ranks on the process's host (`OMPI_COMM_WORLD_LOCAL_SIZE`, `MPI_LOCALNRANKS`): MCL's
//!   share of the host's memory.

use gmcl::settings::Settings;
use gmcl::spgemm::gpu::GpuTuning;
use gmcl::tricount::gpu::TriangleTuning;
use gmcl::Result;
use std::sync::OnceLock;

/// The settings [`configure`] read and applied.
static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Sets up the library from the process-wide variables (kernel cache and macros, the GPU of
/// the rank, the memory limit, the fault switch). Call before anything opens the GPU. A memory
/// limit that cannot be read is an error (exit 2), never "no limit".
pub fn configure() -> Result<()> {
    let settings = Settings::from_vars(|k| std::env::var_os(k))?;
    settings.apply()?;
    let _ = SETTINGS.set(settings);
    Ok(())
}

/// The settings, as [`configure`] read them (the defaults before it runs).
fn settings() -> &'static Settings {
    SETTINGS.get_or_init(Settings::default)
}

/// The GPU engine's tuning: the defaults, with the `GMCL_GPU_*` knobs that are set.
pub fn gpu_tuning() -> GpuTuning {
    settings().gpu.clone()
}

/// The triangle kernels' switches: poisoning and profiling as for the engine.
pub fn triangle_tuning() -> TriangleTuning {
    settings().triangles
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
        gpu: triangle_tuning(),
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

/// The distributed product's options: the defaults, with `GMCL_DIST_STAGE` bounding both stages.
pub fn dist_spgemm_options() -> gmcl::dist::spgemm::Options {
    let mut o = gmcl::dist::spgemm::Options::default();
    if let Some(n) = number("GMCL_DIST_STAGE") {
        o.stage_edges = n as usize;
        o.stage_entries = n as usize;
    }
    o
}

/// The stages of MCL across ranks: `GMCL_DIST_STAGE` bounds both (as for tricount), and with it
/// blocks of any size are cut again where uneven (small stages are for tests, on small graphs);
/// without it, each rank sizes its rounds by its share of the host's memory (the ranks the
/// launcher started on this host).
pub fn dist_mcl_options() -> gmcl::dist::mcl::Options {
    let mut o = gmcl::dist::mcl::Options {
        ranks_on_host: ranks_on_host(),
        ..Default::default()
    };
    if let Some(n) = number("GMCL_DIST_STAGE") {
        o.stage_edges = n as usize;
        o.stage_entries = Some(n as usize);
        o.rebalance.least = 0;
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
