//! Running the library's long calls from Python: without the GIL, on a thread of their own, while
//! the calling thread watches for Ctrl-C; and the library's notices written to `sys.stderr`.
//!
//! Python's SIGINT handler only records the signal; the exception is raised when the main thread
//! runs `PyErr_CheckSignals`, which it cannot do while it is inside a call into Rust. So the
//! call runs on a scoped thread and the calling thread polls `check_signals` every few
//! milliseconds; when it raises, the library's interrupt flag ([`gmcl::interrupt::request`])
//! makes the call stop at its next check with `Error::Interrupted`, the thread is joined (every
//! value dropped, no partial output), the flag cleared, and the `KeyboardInterrupt` (or whatever
//! the signal handler raised) propagates. The flag is process-wide: calls running at the same
//! time on other Python threads stop too, and raise `KeyboardInterrupt`.

use crate::errors::to_py;
use pyo3::prelude::*;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// How often the calling thread looks for a pending signal: short enough for Ctrl-C to feel
/// immediate, long enough to cost nothing.
const POLL: Duration = Duration::from_millis(20);

/// Runs `work` without the GIL on a thread of its own, stopping it on Ctrl-C (see the module's
/// comment), and turns its error into a Python exception.
pub fn interruptible<R: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> gmcl::Result<R> + Send,
) -> PyResult<R> {
    let outcome: Result<gmcl::Result<R>, PyErr> = py.detach(|| {
        std::thread::scope(|s| {
            let (tx, rx) = channel();
            s.spawn(move || {
                // The receiver outlives the thread's work, so the send cannot fail; a panic in
                // `work` drops `tx` and is re-raised when the scope ends.
                let _ = tx.send(work());
            });
            loop {
                match rx.recv_timeout(POLL) {
                    Ok(r) => return Ok(r),
                    Err(RecvTimeoutError::Timeout) => {
                        if let Err(signal) = Python::attach(|py| py.check_signals()) {
                            gmcl::interrupt::request();
                            let stopped = rx.recv();
                            gmcl::interrupt::clear();
                            return match stopped {
                                // The work finished before it saw the flag: its result is
                                // dropped, the signal's exception still wins.
                                Ok(_) | Err(_) => Err(signal),
                            };
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Ok(Err(gmcl::Error::Invalid(
                            "gmcl: the computation ended without a result".into(),
                        )))
                    }
                }
            }
        })
    });
    outcome?.map_err(to_py)
}

/// The library's notices of one call ("no usable GPU ...: running on the CPU engine"), kept
/// while the call runs without the GIL and written to `sys.stderr` after it, as the CLI writes
/// them ("gmcl: ...").
#[derive(Default)]
pub struct Notices(Mutex<Vec<String>>);

impl Notices {
    /// Keeps one notice.
    pub fn push(&self, msg: &str) {
        if let Ok(mut v) = self.0.lock() {
            v.push(msg.to_string());
        }
    }

    /// Keeps the notice of a SNAP text file's columns past its source and target, which the
    /// loader skips ([`gmcl::io::snap_extra_columns`]), as the command line says it.
    pub fn skipped_columns(&self, path: &std::path::Path, format: Option<gmcl::io::Format>) {
        if let Some(extra) = gmcl::io::snap_extra_columns(path, format) {
            self.push(&format!(
                "{} (for weights in the third column, read it with format=\"wel\")",
                extra.describe(path)
            ));
        }
    }

    /// Writes the notices to `sys.stderr`.
    pub fn emit(self, py: Python<'_>) -> PyResult<()> {
        let msgs = self.0.into_inner().unwrap_or_default();
        if msgs.is_empty() {
            return Ok(());
        }
        let stderr = py.import("sys")?.getattr("stderr")?;
        if stderr.is_none() {
            return Ok(());
        }
        for m in msgs {
            stderr.call_method1("write", (format!("gmcl: {m}\n"),))?;
        }
        Ok(())
    }
}
