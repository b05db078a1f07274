//! What the command line prints besides results: notices and progress bars on stderr (unless
//! --quiet), results on stdout through [`out!`]/[`outln!`], JSON through [`to_json`].

use gmcl::{Error, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

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

    /// A progress bar on stderr when it is a terminal; hidden otherwise.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if self.quiet || !std::io::stderr().is_terminal() {
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
