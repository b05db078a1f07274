//! Engine choice: `auto` resolved to the GPU engine when a GPU is usable, else the CPU engine;
//! a GPU that fails during an `auto` run falls back to the CPU engine. What the caller should
//! tell its user (why the CPU engine runs) goes to a `notice` callback, so that the command line
//! prints it and a library caller may log or drop it.

use crate::error::{Error, Result};
use crate::spgemm::{self, EngineKind};

/// Picks the engine to run: `auto` becomes the GPU engine when a GPU is usable, else the CPU
/// engine, with one notice saying why. `cpu` and `gpu` are returned as they are.
pub fn resolve(kind: EngineKind, notice: &mut dyn FnMut(&str)) -> EngineKind {
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

/// Starts opening the GPU on a thread of its own when `kind` may use it, so that the driver's
/// and the context's start-up overlaps loading the input; whoever needs the GPU first waits for
/// it there ([`crate::gpu::device`] opens it once).
pub fn open_gpu_early(kind: EngineKind) {
    if kind != EngineKind::Cpu {
        std::thread::spawn(|| crate::gpu::device().is_ok());
    }
}
