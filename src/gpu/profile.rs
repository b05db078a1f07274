//! Phase timings of the GPU engine (`GMCL_GPU_PROFILE=1`): each mark waits for the device and
//! records the time since the previous mark, so the phases add up to the whole. Off by default,
//! since waiting serialises the light and heavy streams.

use super::prims::check;
use crate::error::Result;
use cudarc::driver::CudaContext;
use std::sync::Arc;
use std::time::Instant;

/// Collects named phase times when enabled; does nothing otherwise.
pub(crate) struct Profile {
    ctx: Option<Arc<CudaContext>>,
    last: Instant,
    phases: Vec<(&'static str, f64)>,
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
    pub(crate) fn mark(&mut self, name: &'static str) -> Result<()> {
        if let Some(ctx) = &self.ctx {
            check(name, ctx.synchronize())?;
            let now = Instant::now();
            let secs = (now - self.last).as_secs_f64();
            match self.phases.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += secs,
                None => self.phases.push((name, secs)),
            }
            self.last = now;
        }
        Ok(())
    }

    /// Prints the phases on stderr (when enabled).
    pub(crate) fn report(&self, what: &str) {
        if self.ctx.is_none() {
            return;
        }
        let total: f64 = self.phases.iter().map(|(_, t)| t).sum();
        eprintln!("gmcl: GPU phases of {what} ({:.3} ms in all):", total * 1e3);
        for (name, t) in &self.phases {
            eprintln!(
                "  {name:<28} {:>10.3} ms {:>5.1}%",
                t * 1e3,
                100.0 * t / total.max(1e-12)
            );
        }
    }
}
