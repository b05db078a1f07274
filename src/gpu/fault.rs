//! A test switch for GPU faults. [`inject_at`] (the command line calls it for
//! `GMCL_GPU_FAULT=N`) makes the N-th driver call that gmcl checks from then on (an allocation, a copy, a kernel launch, a wait: every
//! call that goes through `prims::check`) fail as if the driver had returned an error, so that
//! tests can make each stage of a GPU run fail in turn and see that it stops cleanly, names the
//! stage and frees what it took. Off (and one relaxed atomic load per call) unless set.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Checked calls left before the injected fault; 0 when off.
static COUNTDOWN: AtomicU64 = AtomicU64::new(0);
/// Whether the armed fault has been raised.
static FIRED: AtomicBool = AtomicBool::new(false);

/// The message of an injected fault.
pub const INJECTED: &str = "injected fault (GMCL_GPU_FAULT)";

/// Arms a fault at the `n`-th checked driver call from now (0 disarms), for this process.
pub fn inject_at(n: u64) {
    FIRED.store(false, Ordering::Relaxed);
    COUNTDOWN.store(n, Ordering::Relaxed);
}

/// Whether the fault armed last has been raised.
pub fn fired() -> bool {
    FIRED.load(Ordering::Relaxed)
}

/// Counts one checked call of `stage`; fails it when it is the armed one.
pub(crate) fn trip(stage: &str) -> Result<()> {
    let before = COUNTDOWN.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1));
    if before == Ok(1) {
        FIRED.store(true, Ordering::Relaxed);
        return Err(Error::gpu(stage, INJECTED));
    }
    Ok(())
}
