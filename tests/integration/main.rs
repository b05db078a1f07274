//! The integration tests: the real `gmcl` binary and the library's public API, one module per
//! area, helpers in [`util`]. Tests that change process-wide state (the interrupt flag, the GPU
//! fault switch) live in binaries of their own beside this one (`tests/interrupt_lib.rs`,
//! `tests/gpu_faults.rs`), since the tests of one binary run in parallel threads.

mod util;

mod cli;
mod cli_habits;
mod determinism;
mod formats;
mod fuzz_regressions;
mod gzip;
mod inputs;
mod interrupt;
mod io_errors;
mod kernels_nvrtc;
mod limits;
mod mcl;
mod mcl_gpu;
#[cfg(feature = "mpi")]
mod mpi;
mod npz;
mod sigkill;
mod spgemm_cpu;
mod spgemm_gpu;
mod tricount;
mod tricount_gpu;
mod wall;
