//! `gmcl._gmcl`: the compiled half of the Python package `gmcl`. The Python half
//! (`python/gmcl/__init__.py`) turns SciPy matrices, NetworkX graphs and paths into the plain
//! arrays these functions take, and their arrays back into SciPy and NumPy objects.

use gmcl::settings::Settings;
use pyo3::prelude::*;
use std::sync::OnceLock;

mod arrays;
mod compute;
mod errors;
mod files;
mod run;

/// What the environment asks of the GPU and of memory (the kernel cache, the memory limit, the
/// engine's knobs), read as the command line reads it, once, when the module is imported.
static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The settings read at import (the defaults before).
pub(crate) fn settings() -> &'static Settings {
    SETTINGS.get_or_init(Settings::default)
}

/// The compiled module: its functions and its exceptions.
#[pymodule]
fn _gmcl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Before anything can open the GPU: a bad GMCL_MEMORY_LIMIT fails the import as it fails
    // the command line.
    let settings = Settings::from_vars(|k| std::env::var_os(k)).map_err(errors::to_py)?;
    settings.apply().map_err(errors::to_py)?;
    let _ = SETTINGS.set(settings);
    m.add("GpuError", py.get_type::<errors::GpuError>())?;
    m.add(
        "EngineUnavailableError",
        py.get_type::<errors::EngineUnavailableError>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("TWO_NUMBERINGS", gmcl::io::TWO_NUMBERINGS)?;
    m.add_function(wrap_pyfunction!(files::load, m)?)?;
    m.add_function(wrap_pyfunction!(files::save, m)?)?;
    m.add_function(wrap_pyfunction!(files::generate_rmat, m)?)?;
    m.add_function(wrap_pyfunction!(compute::spgemm, m)?)?;
    m.add_function(wrap_pyfunction!(compute::cluster_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(compute::cluster_file, m)?)?;
    m.add_function(wrap_pyfunction!(compute::tricount_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(compute::tricount_file, m)?)?;
    m.add_function(wrap_pyfunction!(compute::dist_labels, m)?)?;
    m.add_function(wrap_pyfunction!(compute::dist_files, m)?)?;
    Ok(())
}
