//! gmcl's errors as Python exceptions, by the CLI's exit status: bad input (2) is a
//! `ValueError` (an `OSError` when the system refused a file), an unavailable engine (3) an
//! `EngineUnavailableError`, a GPU failure (4) a `GpuError`, an interrupt (130) a
//! `KeyboardInterrupt`. The message is the CLI's.

use gmcl::Error;
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::PyErr;

pyo3::create_exception!(
    gmcl,
    GpuError,
    PyRuntimeError,
    "The GPU failed during a run (the CLI's exit status 4): the driver's or the engine's message, naming the step."
);
pyo3::create_exception!(
    gmcl,
    EngineUnavailableError,
    PyRuntimeError,
    "The engine asked for cannot run here (the CLI's exit status 3), such as engine=\"gpu\" without a usable GPU."
);

/// The Python exception for a gmcl error.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Io { source, .. } => PyOSError::new_err((source.raw_os_error().unwrap_or(0), msg)),
        Error::Parse { .. } | Error::Input { .. } | Error::Invalid(_) => PyValueError::new_err(msg),
        Error::EngineUnavailable(_) => EngineUnavailableError::new_err(msg),
        Error::Gpu { .. } => GpuError::new_err(msg),
        Error::Interrupted => PyKeyboardInterrupt::new_err(msg),
        Error::Remote { .. } => PyRuntimeError::new_err(msg),
    }
}
