//! What the command line prints besides results: notices and progress bars on stderr (unless
//! --quiet), results on stdout through [`out!`]/[`outln!`], JSON through [`to_json`].

use gmcl::{Error, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Writes to stdout like `print!`, but a failed write (a closed pipe, a full disk) is an error
/// naming `<stdout>` instead of a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        std::io::stdout()
            .write_fmt(format_args!($($arg)*))
            .map_err(|e| gmcl::Error::io("<stdout>", "cannot write output", e))
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {
        out!("{}\n", format_args!($($arg)*))
    };
}

/// Flushes stdout (a failed write is an error naming `<stdout>`), then commits `outputs`: what a
/// command prints is out before any output replaces a file, so a stdout that cannot take it
/// fails the run whole.
pub fn print_then_commit(outputs: Vec<gmcl::output::AtomicOutput>) -> Result<()> {
    std::io::Write::flush(&mut std::io::stdout())
        .map_err(|e| Error::io("<stdout>", "cannot write output", e))?;
    gmcl::output::AtomicOutput::commit_all(outputs)
}

/// Where notices and progress go: stderr, unless --quiet.
#[derive(Clone, Copy)]
pub struct Ui {
    pub quiet: bool,
}

impl Ui {
    pub fn notice(&self, msg: &str) {
        if !self.quiet {
            // A closed stderr must not stop the run: the notice is lost, nothing else.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "gmcl: {msg}");
        }
    }

    /// Whether progress bars are drawn: stderr is a terminal, and no --quiet.
    fn shows_bars(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }

    /// A progress bar on stderr when it is a terminal; hidden otherwise.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.shows_bars() {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        let style =
            ProgressStyle::with_template("{msg} [{bar:40}] {human_pos}/{human_len} ({eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style.progress_chars("=> "));
        bar.set_message(what.to_string());
        bar
    }
}

impl Ui {
    /// Runs `work` with a progress bar that a thread of its own redraws every tenth of a second
    /// from `read` (position, length, message): for work whose counters other threads advance.
    /// Without a terminal on stderr (a log, a batch job, mpirun) the thread prints a line of
    /// the same reading every [`PROGRESS_LINE_EVERY`] instead; under --quiet no thread starts.
    /// `work` gets the bar to print notices above it ([`ProgressBar::suspend`]).
    pub fn watch<R>(
        &self,
        read: impl Fn() -> (u64, u64, String) + Sync,
        work: impl FnOnce(&ProgressBar) -> R,
    ) -> R {
        if self.quiet {
            return work(&ProgressBar::hidden());
        }
        if !self.shows_bars() {
            return self.watch_in_lines(read, work);
        }
        // Drawn once there is something to show.
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        // Short enough for an 80-column terminal with a long message.
        let style = ProgressStyle::with_template("{msg} [{bar:30}] {percent:>3}% ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style.progress_chars("=> "));
        let r = beside(
            Duration::from_millis(100),
            || {
                let (pos, len, msg) = read();
                if len != bar.length().unwrap_or(0) || pos < bar.position() {
                    // A new stage: its rate and ETA start afresh.
                    bar.reset();
                    bar.set_length(len);
                }
                bar.set_position(pos);
                bar.set_message(msg);
                if len > 0 && bar.is_hidden() {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                }
            },
            || work(&bar),
        );
        bar.finish_and_clear();
        r
    }

    /// [`Ui::watch`] without a terminal: a line of `read`'s reading every
    /// [`PROGRESS_LINE_EVERY`], so that a long step in a log shows how far it has got.
    fn watch_in_lines<R>(
        &self,
        read: impl Fn() -> (u64, u64, String) + Sync,
        work: impl FnOnce(&ProgressBar) -> R,
    ) -> R {
        in_lines(
            PROGRESS_LINE_EVERY,
            read,
            |l| self.notice(&l),
            || work(&ProgressBar::hidden()),
        )
    }
}

/// Runs `work` while a thread hands `emit` a line of `read`'s reading every `every`.
fn in_lines<R>(
    every: Duration,
    read: impl Fn() -> (u64, u64, String) + Sync,
    emit: impl Fn(String) + Sync,
    work: impl FnOnce() -> R,
) -> R {
    let start = Instant::now();
    let mut next = every;
    // A tenth of the period, at most a tenth of a second: the thread ends soon after `work`.
    let nap = (every / 10).min(Duration::from_millis(100));
    beside(
        nap,
        || {
            let elapsed = start.elapsed();
            if elapsed >= next {
                next += every;
                let (pos, len, msg) = read();
                emit(progress_line(&msg, pos, len, elapsed));
            }
        },
        work,
    )
}

/// Runs `work` while a thread of its own calls `tick` every `nap`, until `work` ends (however
/// it ends, a panic included).
fn beside<R>(nap: Duration, mut tick: impl FnMut() + Send, work: impl FnOnce() -> R) -> R {
    let done = AtomicBool::new(false);
    /// Stops the thread when dropped.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| loop {
            std::thread::sleep(nap);
            if done.load(Ordering::Relaxed) {
                break;
            }
            tick();
        });
        let _stop = Stop(&done);
        work()
    })
}

/// How often [`Ui::watch`] prints a line of progress where it draws no bar.
pub const PROGRESS_LINE_EVERY: Duration = Duration::from_secs(60);

/// A line of progress: the message, the share of the work done where its total is known, and
/// the time since the work began.
fn progress_line(msg: &str, pos: u64, len: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    let at = format!("{}:{:02}", secs / 60, secs % 60);
    match len {
        0 => format!("{msg} (at {at})"),
        _ => format!(
            "{msg}, {:.1}% of the work (at {at})",
            100.0 * pos.min(len) as f64 / len as f64
        ),
    }
}

/// `n` and the noun, singular for one: "1 cluster", "2 clusters", "0 clusters".
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A command's JSON report with gmcl's version and the run's parameters first, so that every
/// report says what made it.
#[derive(serde::Serialize)]
pub struct Report<'a, S: serde::Serialize> {
    pub version: &'static str,
    pub parameters: serde_json::Value,
    #[serde(flatten)]
    pub report: &'a S,
}

/// [`to_json`] of `report` with the version and `parameters` (see [`Report`]).
pub fn report_json<S: serde::Serialize>(
    report: &S,
    parameters: serde_json::Value,
) -> Result<String> {
    to_json(&Report {
        version: env!("CARGO_PKG_VERSION"),
        parameters,
        report,
    })
}

pub fn to_json<S: serde::Serialize>(v: &S) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Invalid(format!("cannot format JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_work_prints_a_line_each_period_and_none_after_it_ends() {
        let lines = std::sync::Mutex::new(Vec::new());
        let every = Duration::from_millis(20);
        let r = in_lines(
            every,
            || (1, 4, "iteration 2: 5/20 columns".to_string()),
            |l| lines.lock().unwrap().push(l),
            || {
                std::thread::sleep(every * 10);
                7
            },
        );
        assert_eq!(r, 7);
        let seen = lines.lock().unwrap().clone();
        // About one a period (a busy machine may wake the thread late, never early).
        assert!((2..=11).contains(&seen.len()), "{seen:?}");
        assert!(seen
            .iter()
            .all(|l| l.starts_with("iteration 2: 5/20 columns, 25.0% of the work (at 0:00)")));
        // Short work prints nothing.
        let quiet = std::sync::Mutex::new(Vec::new());
        in_lines(
            Duration::from_secs(60),
            || (0, 0, String::new()),
            |l| quiet.lock().unwrap().push(l),
            || (),
        );
        assert!(quiet.lock().unwrap().is_empty());
    }

    #[test]
    fn a_progress_line_names_the_share_done_and_the_time() {
        let line = progress_line("iteration 2: 5/20 columns", 1, 4, Duration::from_secs(125));
        assert_eq!(
            line,
            "iteration 2: 5/20 columns, 25.0% of the work (at 2:05)"
        );
        let line = progress_line("starting", 0, 0, Duration::from_secs(60));
        assert_eq!(line, "starting (at 1:00)");
        // Counters read while they move may pass their total: never over 100%.
        assert!(progress_line("x", 9, 4, Duration::ZERO).ends_with("100.0% of the work (at 0:00)"));
    }
}
