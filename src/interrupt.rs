//! Stopping a long run cleanly on Ctrl-C (SIGINT), SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 or SIGALRM.
//!
//! [`install`] makes the first signal set a process-wide flag instead of killing the process; the
//! long loops of the library (MCL iterations and batches, R-MAT rounds, CSR builds, the CPU
//! engine's row tasks, triangle counting, output writing, benchmarks) call [`check`] and return
//! [`Error::Interrupted`], so every value is dropped on the way out: temporary output files are
//! removed and no partial output appears. A second signal, while the first is being handled,
//! ends the process at once with status 130 (temporary files may then remain, as after SIGKILL).
//!
//! Without [`install`] (a library user), nothing sets the flag and [`check`] never fails, unless
//! the caller sets the flag itself with [`request`].

use crate::error::{Error, Result, INTERRUPTED_EXIT_STATUS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The flag the signal handler sets. An `Arc` because signal-hook's registration takes one.
fn flag() -> &'static Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Makes SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM set the interrupt flag (each
/// would otherwise kill the process and leave its temporary files); a second one while the flag
/// is set exits at once with status [`INTERRUPTED_EXIT_STATUS`]. Every one of them ends a run
/// with that status. A signal of the last four that is ignored when gmcl starts (SIGHUP under
/// `nohup`) stays ignored. Call once, early in `main`.
///
/// It also ignores SIGXFSZ, so that a write past a file size limit (`ulimit -f`) fails with an
/// error naming the file (EFBIG) rather than killing the process and leaving its temporary file.
pub fn install() -> Result<()> {
    use signal_hook::consts::{SIGALRM, SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let f = flag();
    let optional = [SIGHUP, SIGUSR1, SIGUSR2, SIGALRM]
        .into_iter()
        .filter(|&sig| !ignored_at_start(sig));
    for sig in [SIGINT, SIGTERM].into_iter().chain(optional) {
        // Registered first, so it sees the flag before this signal's own handler sets it: the
        // second signal exits, the first only sets the flag.
        signal_hook::flag::register_conditional_shutdown(
            sig,
            INTERRUPTED_EXIT_STATUS,
            Arc::clone(f),
        )
        .and_then(|_| signal_hook::flag::register(sig, Arc::clone(f)))
        .map_err(|e| Error::Invalid(format!("cannot install the signal handler: {e}")))?;
    }
    Ok(())
}

/// True when `sig`'s disposition is "ignore" (as `nohup` leaves SIGHUP).
fn ignored_at_start(sig: i32) -> bool {
    #[cfg(unix)]
    {
        let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: a null new action only reads the current one into `old`, which is large
        // enough and zero-initialised.
        let rc = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
        // SAFETY: zeroed is a valid `sigaction`, and a successful call filled it.
        rc == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
    }
    #[cfg(not(unix))]
    {
        let _ = sig;
        false
    }
}

/// True once an interrupt was requested.
#[inline]
pub fn requested() -> bool {
    flag().load(Ordering::Relaxed)
}

/// `Err(Error::Interrupted)` once an interrupt was requested; cheap enough for any loop that
/// does at least a few microseconds of work per call.
#[inline]
pub fn check() -> Result<()> {
    if requested() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Requests an interrupt, as the signal handler does (for tests and embedding programs).
pub fn request() {
    flag().store(true, Ordering::Relaxed);
}

/// Clears a requested interrupt (for tests and embedding programs that go on after one).
pub fn clear() {
    flag().store(false, Ordering::Relaxed);
}
