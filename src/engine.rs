//! Engine choice: `auto` resolved to the GPU engine when the work is large enough for the GPU
//! to finish first and a GPU is usable, else the CPU engine; a GPU that fails during an `auto`
//! run falls back to the CPU engine. What the caller should tell its user (why the CPU engine
//! runs) goes to a `notice` callback, so that the command line prints it and a library caller
//! may log or drop it.

use crate::error::{Error, Result};
use crate::spgemm::{self, EngineKind};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

/// The work of a run, in the unit `auto` weighs it by: what the run's time grows with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Markov clustering: the intermediate products of the first expansion.
    MclExpansion(u64),
    /// One sparse product: its intermediate products.
    Product(u64),
    /// Triangle counting: the edges of the simple graph.
    TriangleEdges(u64),
}

/// How fast each engine does a kind of [`Work`], whole process included: the CPU engine does
/// `cpu_one_thread * threads^CPU_SCALING` units per second; the GPU engine first spends
/// `gpu_start` seconds (driver, context, kernels), then does `gpu_rate` units per second.
/// Fitted to `scripts/bench-crossover.py` on a 16-core host with an H100, at 2 and 16
/// threads (docs/performance.md has the run).
struct Speeds {
    cpu_one_thread: f64,
    gpu_rate: f64,
    gpu_start: f64,
}

/// Threads do not add speed one for one (shared memory bandwidth, hyper-threads).
const CPU_SCALING: f64 = 0.6;

impl Work {
    fn speeds(self) -> Speeds {
        match self {
            Work::MclExpansion(_) => Speeds {
                cpu_one_thread: 19e6,
                gpu_rate: 2e9,
                gpu_start: 0.35,
            },
            Work::Product(_) => Speeds {
                cpu_one_thread: 167e6,
                gpu_rate: 1.3e9,
                gpu_start: 0.35,
            },
            Work::TriangleEdges(_) => Speeds {
                cpu_one_thread: 3.7e6,
                gpu_rate: 1e9,
                gpu_start: 0.36,
            },
        }
    }

    fn units(self) -> f64 {
        match self {
            Work::MclExpansion(u) | Work::Product(u) | Work::TriangleEdges(u) => u as f64,
        }
    }

    /// Whether the GPU engine is expected to finish this work before the CPU engine on
    /// `threads` threads.
    pub fn gpu_pays(self, threads: usize) -> bool {
        let s = self.speeds();
        let cpu = self.units() / (s.cpu_one_thread * (threads.max(1) as f64).powf(CPU_SCALING));
        let gpu = s.gpu_start + self.units() / s.gpu_rate;
        gpu < cpu
    }
}

/// Picks the engine to run. `auto` becomes the CPU engine when `work` is known and too small
/// for the GPU to pay on this many threads (without a word: nothing is missing), else the GPU
/// engine when a GPU is usable, else the CPU engine with one notice saying why. `cpu` and `gpu`
/// are returned as they are.
pub fn resolve(kind: EngineKind, work: Option<Work>, notice: &mut dyn FnMut(&str)) -> EngineKind {
    if kind == EngineKind::Auto && work.is_some_and(|w| !w.gpu_pays(rayon::current_num_threads())) {
        return EngineKind::Cpu;
    }
    let (engine, why) = spgemm::resolve(kind);
    if let Some(why) = why {
        notice(&format!("no usable GPU ({why}): running on the CPU engine"));
    }
    engine
}

/// Runs `work` on `resolved` (what [`resolve`] made of `asked`) and returns its result with the
/// engine that made it. When `auto` picked the GPU and the GPU fails during the run
/// ([`Error::Gpu`]), says so once through `notice` and runs `work` again on the CPU engine; an
/// explicit `gpu` fails with the GPU's error.
pub fn run_with_fallback<R>(
    asked: EngineKind,
    resolved: EngineKind,
    notice: &mut dyn FnMut(&str),
    mut work: impl FnMut(EngineKind) -> Result<R>,
) -> Result<(R, EngineKind)> {
    match work(resolved) {
        Err(Error::Gpu { stage, message })
            if asked == EngineKind::Auto && resolved == EngineKind::Gpu =>
        {
            notice(&format!(
                "the GPU failed ({stage}: {message}): running on the CPU engine instead"
            ));
            Ok((work(EngineKind::Cpu)?, EngineKind::Cpu))
        }
        r => r.map(|v| (v, resolved)),
    }
}

/// Inputs smaller than this make too little work for `auto` to take the GPU on any thread
/// count (the smallest crossover, one thread, is several times larger): the GPU is not opened
/// early for them.
const EARLY_OPEN_MIN_BYTES: u64 = 1 << 18;

/// Whether `kind` may run on the GPU: `gpu`, or `auto` with an input of `input_bytes` (`None`:
/// unknown) not too small for the GPU to pay.
pub fn gpu_may_pay(kind: EngineKind, input_bytes: Option<u64>) -> bool {
    kind == EngineKind::Gpu
        || (kind == EngineKind::Auto && input_bytes.map_or(true, |b| b >= EARLY_OPEN_MIN_BYTES))
}

/// Starts opening the GPU on a thread of its own when `kind` may use it, so that the driver's
/// and the context's start-up overlaps loading the input; whoever needs the GPU first waits for
/// it there ([`crate::gpu::device`] opens it once). The same thread then pins the staging
/// buffers an upload of `input_bytes` will take ([`crate::gpu::Gpu::prepare_upload`]: the
/// input's size stands for what is uploaded). Under `auto`, an input of `input_bytes` (`None`:
/// unknown, as for a pipe) too small for the GPU to pay is left alone.
/// Where the GPU is already being opened ([`start_opening_gpu`]), the thread waits for it.
pub fn open_gpu_early(kind: EngineKind, input_bytes: Option<u64>) {
    open_on_thread(kind, input_bytes, input_bytes);
}

/// Starts opening the GPU on a thread of its own where `kind` may use it for an input of
/// `input_bytes` ([`gpu_may_pay`]), as [`open_gpu_early`] does, pinning nothing: for a caller
/// that has more to do before it knows what it will upload (an MPI rank, once MPI has started:
/// never while it starts, when Open MPI changes the environment the driver reads).
pub fn start_opening_gpu(kind: EngineKind, input_bytes: Option<u64>) {
    open_on_thread(kind, input_bytes, None);
}

/// The threads [`open_on_thread`] started, until [`finish_opening_gpu`] waits for them.
static OPENING: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Opens the GPU on a thread of its own where `kind` may use it for `input_bytes`, then pins
/// the staging pair an upload of `pin_for` bytes takes. A failure is kept by the device, or met
/// again by the copy, and reported there.
fn open_on_thread(kind: EngineKind, input_bytes: Option<u64>, pin_for: Option<u64>) {
    if gpu_may_pay(kind, input_bytes) {
        let opening = std::thread::spawn(move || {
            if let (Ok(gpu), Some(bytes)) = (crate::gpu::device(), pin_for) {
                let _ = gpu.prepare_upload(bytes);
            }
        });
        OPENING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(opening);
    }
}

/// Waits until no thread started by [`open_gpu_early`] or [`start_opening_gpu`] is still
/// opening the GPU or pinning for it. A process calls it before it exits: a command that ended
/// early (bad input, the CPU engine chosen) may leave the opening inside the driver, and the
/// process's exit tears down the driver's state under that thread.
pub fn finish_opening_gpu() {
    let opening = std::mem::take(&mut *OPENING.lock().unwrap_or_else(PoisonError::into_inner));
    for thread in opening {
        let _ = thread.join();
    }
}

/// The size of the file at `path`, when it is a regular file (for [`open_gpu_early`]).
pub fn file_bytes(path: &std::path::Path) -> Option<u64> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_waits_for_the_gpus_opening_before_it_exits() {
        open_gpu_early(EngineKind::Gpu, Some(1 << 20));
        start_opening_gpu(EngineKind::Gpu, None);
        open_gpu_early(EngineKind::Cpu, Some(1 << 30));
        let started = OPENING.lock().unwrap().len();
        assert!(
            started >= 2,
            "the GPU engine opens early; the CPU engine does not"
        );
        finish_opening_gpu();
        assert!(OPENING.lock().unwrap().is_empty(), "every opening joined");
    }

    #[test]
    fn small_work_runs_on_the_cpu_and_large_work_on_the_gpu() {
        // The thread counts the speeds were measured at, and one between.
        for threads in [1, 2, 8, 16] {
            assert!(!Work::MclExpansion(1_000).gpu_pays(threads));
            assert!(Work::MclExpansion(10_000_000_000).gpu_pays(threads));
            assert!(!Work::Product(1_000).gpu_pays(threads));
            assert!(Work::Product(100_000_000_000).gpu_pays(threads));
            assert!(!Work::TriangleEdges(1_000).gpu_pays(threads));
            assert!(Work::TriangleEdges(10_000_000_000).gpu_pays(threads));
        }
    }

    #[test]
    fn more_threads_move_the_crossover_up() {
        // The first size at which the GPU pays, found by doubling.
        let crossover = |threads: usize| {
            let mut u = 1u64;
            while !Work::MclExpansion(u).gpu_pays(threads) {
                u *= 2;
            }
            u
        };
        assert!(crossover(2) < crossover(16));
        assert!(crossover(16) < crossover(128));
    }

    #[test]
    fn small_work_needs_no_gpu_and_says_nothing() {
        let mut said = Vec::new();
        let engine = resolve(EngineKind::Auto, Some(Work::MclExpansion(10)), &mut |m| {
            said.push(m.to_string())
        });
        assert_eq!(engine, EngineKind::Cpu);
        assert!(said.is_empty());
        // Asked for explicitly, an engine is kept whatever the work.
        let engine = resolve(EngineKind::Gpu, Some(Work::MclExpansion(10)), &mut |_| {});
        assert_eq!(engine, EngineKind::Gpu);
    }
}
