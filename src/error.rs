//! The one error type of gmcl. Every failure a user can cause (bad input, a bad path, a
//! product of mismatched shapes) becomes one of these, with the file and line where known.

use std::path::PathBuf;

/// The exit status of a process ended by an interrupt (128 + SIGINT), as shells report it.
pub const INTERRUPTED_EXIT_STATUS: i32 = 130;

/// Every error gmcl reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused an operation on a path.
    #[error("{path}: {action}: {source}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What gmcl was doing ("cannot open", "cannot write", ...).
        action: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of an input file could not be understood.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The input file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong with the line.
        message: String,
    },
    /// An input file is wrong as a whole (header, entry count, format).
    #[error("{path}: {message}")]
    Input {
        /// The input file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Options or operands that cannot work together (mismatched shapes, bad parameters).
    #[error("{0}")]
    Invalid(String),
    /// The requested engine cannot run here.
    #[error("{0}")]
    EngineUnavailable(String),
    /// A GPU operation failed; `stage` names the step of the computation that failed.
    #[error("GPU engine: {stage}: {message}")]
    Gpu {
        /// The step that failed ("upload A", "outer product", ...).
        stage: String,
        /// What the driver or the engine reported, and what to do where known.
        message: String,
    },
    /// The run was stopped by a signal (Ctrl-C, SIGTERM, SIGHUP, ...); see [`crate::interrupt`].
    #[error("interrupted")]
    Interrupted,
    /// Another rank of a distributed run failed ([`crate::dist::agree`]): its message (naming
    /// the rank) and its exit status, the same on every rank.
    #[error("{message}")]
    Remote {
        /// The failing rank's exit status.
        code: i32,
        /// The failing rank's message, naming the rank.
        message: String,
    },
}

/// gmcl's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A GPU failure at `stage`.
    pub fn gpu(stage: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Error::Gpu {
            stage: stage.into(),
            message: message.to_string(),
        }
    }

    /// A problem with the input file `path`, at `line` when one is known ([`Error::Parse`]),
    /// else with the file as a whole ([`Error::Input`]).
    pub fn in_file(path: &std::path::Path, line: Option<u64>, message: String) -> Self {
        match line {
            Some(line) => Error::Parse {
                path: path.to_path_buf(),
                line,
                message,
            },
            None => Error::Input {
                path: path.to_path_buf(),
                message,
            },
        }
    }

    /// Wraps an I/O error with the path and the action that failed.
    pub fn io(path: impl Into<PathBuf>, action: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            action,
            source,
        }
    }

    /// The process exit status for this error: 2 for anything the user can fix in the input or
    /// the command line, 3 when the requested engine is unavailable, 4 when the GPU failed,
    /// 130 when interrupted.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::EngineUnavailable(_) => 3,
            Error::Gpu { .. } => 4,
            Error::Interrupted => INTERRUPTED_EXIT_STATUS,
            Error::Remote { code, .. } => *code,
            _ => 2,
        }
    }
}
