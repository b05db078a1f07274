//! Stopping a long run cleanly on Ctrl-C (SIGINT), SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 or SIGALRM.
//!
//! [`install`] makes the first signal set a process-wide flag instead of killing the process; the
//! long loops of the library (MCL iterations and batches, R-MAT rounds, CSR builds, the CPU
//! engine's row tasks, triangle counting, output writing, benchmarks) call [`check`] and return
//! [`Error::Interrupted`], so every value is dropped on the way out: temporary output files are
//! removed and no partial output appears. A second signal, while the first is being handled,
//! ends the process at once with status 130 (temporary files may then remain, as after SIGKILL);
//! one within [`SAME_INTERRUPT`] of the first is that one delivered again, since `timeout` and
//! job control signal the process and then its whole group.
//!
//! Without [`install`] (a library user), nothing sets the flag and [`check`] never fails, unless
//! the caller sets the flag itself with [`request`].

use crate::error::{Error, Result, INTERRUPTED_EXIT_STATUS};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The interrupt flag the signal handler sets.
static FLAG: AtomicBool = AtomicBool::new(false);

/// When the first signal came, in nanoseconds on the monotonic clock (0: none since the flag
/// was last cleared).
static FIRST_AT: AtomicU64 = AtomicU64::new(0);

/// Signals within this time of the first are the same interrupt delivered twice: GNU `timeout`
/// signals the process and then its process group, and each may reach another thread.
pub const SAME_INTERRUPT: Duration = Duration::from_millis(500);

/// Makes SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM set the interrupt flag (each
/// would otherwise kill the process and leave its temporary files); another one, later than
/// [`SAME_INTERRUPT`] after the first, exits at once with status [`INTERRUPTED_EXIT_STATUS`].
/// Every one of them ends a run with that status. A signal of the last four that is ignored when
/// gmcl starts (SIGHUP under `nohup`) stays ignored. Call once, early in `main`.
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
    let optional = [SIGHUP, SIGUSR1, SIGUSR2, SIGALRM]
        .into_iter()
        .filter(|&sig| !ignored_at_start(sig));
    for sig in [SIGINT, SIGTERM].into_iter().chain(optional) {
        // SAFETY: the handler is async-signal-safe: atomics, clock_gettime and _exit.
        unsafe { signal_hook::low_level::register(sig, on_signal) }
            .map_err(|e| Error::Invalid(format!("cannot install the signal handler: {e}")))?;
    }
    Ok(())
}

/// The handler of every signal [`install`] takes.
fn on_signal() {
    let now = monotonic_ns().max(1);
    let first = match FIRST_AT.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => now,
        Err(first) => first,
    };
    if exits_at_once(first, now) {
        signal_hook::low_level::exit(INTERRUPTED_EXIT_STATUS);
    }
    FLAG.store(true, Ordering::SeqCst);
}

/// Whether a signal at `now` ends the process at once, the first having come at `first` (both
/// in nanoseconds): only a later one than [`SAME_INTERRUPT`] after it.
fn exits_at_once(first: u64, now: u64) -> bool {
    now.saturating_sub(first) > SAME_INTERRUPT.as_nanos() as u64
}

/// Nanoseconds on the monotonic clock (async-signal-safe).
fn monotonic_ns() -> u64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec, which `t` is; it is async-signal-safe.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64)
    }
    #[cfg(not(unix))]
    {
        1
    }
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
    FLAG.load(Ordering::Relaxed)
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
    FLAG.store(true, Ordering::Relaxed);
}

/// Clears a requested interrupt (for tests and embedding programs that go on after one); the
/// next signal is a first one again.
pub fn clear() {
    FIRST_AT.store(0, Ordering::SeqCst);
    FLAG.store(false, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_signal_well_after_the_first_exits_at_once() {
        let first = 5_000_000_000;
        let window = SAME_INTERRUPT.as_nanos() as u64;
        assert!(!exits_at_once(first, first));
        assert!(!exits_at_once(first, first + window));
        assert!(exits_at_once(first, first + window + 1));
        // A clock read before the first was stored (another thread) is the same interrupt.
        assert!(!exits_at_once(first, first - 1));
        assert!(monotonic_ns() > 0);
    }
}
