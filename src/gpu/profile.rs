//! Phase timings of the GPU engine (`GMCL_GPU_PROFILE=1`, or `gmcl spgemm --engine gpu --json`):
//! each mark waits for the device and records the time since the previous mark, so the phases add
//! up to the whole. Off by default, since waiting serialises the light and heavy streams.

use super::prims::check;
use crate::error::Result;
use cudarc::driver::CudaContext;
use std::sync::Arc;
use std::time::Instant;

/// One phase of a product on the GPU.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Phase {
    /// What ran ("heavy: outer product", "heavy: multisplit, level 1", ...).
    pub name: String,
    /// Seconds, summed over row batches.
    pub seconds: f64,
    /// Bytes the phase's kernel must move at least (read plus written), for the core kernels
    /// (outer product, histogram, multisplit); 0 for the others.
    pub bytes: u64,
}

/// Collects named phase times when enabled; does nothing otherwise.
pub(crate) struct Profile {
    ctx: Option<Arc<CudaContext>>,
    last: Instant,
    phases: Vec<Phase>,
}

impl Profile {
    /// A profile that records when `on`.
    pub(crate) fn new(ctx: &Arc<CudaContext>, on: bool) -> Self {
        Profile {
            ctx: on.then(|| ctx.clone()),
            last: Instant::now(),
            phases: Vec::new(),
        }
    }

    /// Ends phase `name`: waits for the device, then records its time.
    pub(crate) fn mark(&mut self, name: &str) -> Result<()> {
        self.mark_bytes(name, 0)
    }

    /// Ends phase `name`, which moved at least `bytes` bytes.
    pub(crate) fn mark_bytes(&mut self, name: &str, bytes: u64) -> Result<()> {
        if let Some(ctx) = &self.ctx {
            check(name, ctx.synchronize())?;
            let now = Instant::now();
            let secs = (now - self.last).as_secs_f64();
            match self.phases.iter_mut().find(|p| p.name == name) {
                Some(p) => {
                    p.seconds += secs;
                    p.bytes += bytes;
                }
                None => self.phases.push(Phase {
                    name: name.to_string(),
                    seconds: secs,
                    bytes,
                }),
            }
            self.last = now;
        }
        Ok(())
    }

    /// The phases recorded so far.
    pub(crate) fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// Prints the phases on stderr (when enabled). A closed or full stderr is ignored: the
    /// report is a diagnostic, never worth stopping a run for.
    pub(crate) fn report(&self, what: &str) {
        use std::io::Write;
        if self.ctx.is_none() {
            return;
        }
        let total: f64 = self.phases.iter().map(|p| p.seconds).sum();
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "gmcl: GPU phases of {what} ({:.3} ms in all):",
            total * 1e3
        );
        for p in &self.phases {
            let rate = if p.bytes > 0 && p.seconds > 0.0 {
                format!("  {:>7.1} GB/s", p.bytes as f64 / p.seconds / 1e9)
            } else {
                String::new()
            };
            let _ = writeln!(
                err,
                "  {:<36} {:>10.3} ms {:>5.1}%{rate}",
                p.name,
                p.seconds * 1e3,
                100.0 * p.seconds / total.max(1e-12)
            );
        }
    }
}
