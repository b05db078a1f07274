//! `gmcl._gmcl`: the compiled half of the Python package `gmcl`. The Python half
//! (`python/gmcl/__init__.py`) turns SciPy matrices, NetworkX graphs and paths into the plain
//! arrays these functions take, and their arrays back into SciPy and NumPy objects.

use pyo3::prelude::*;

mod arrays;
mod compute;
mod errors;
mod files;
mod run;

/// The compiled module: its functions and its exceptions.
#[pymodule]
fn _gmcl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GpuError", py.get_type::<errors::GpuError>())?;
    m.add(
        "EngineUnavailableError",
        py.get_type::<errors::EngineUnavailableError>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
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
