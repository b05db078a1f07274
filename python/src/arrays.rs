//! CSR matrices across the boundary: in, as the arrays SciPy keeps (already made canonical by
//! the Python half: `int64` offsets seen as `uint64`, `int32` column indices seen as `uint32`,
//! `float32` or `float64` values), checked and read in place through the library's borrowed
//! view ([`CsrRef`]); out, the library's own vectors handed to NumPy without a copy.

use gmcl::{Csr, CsrRef, EdgeList, Error, Result, Scalar};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use rayon::prelude::*;

/// A matrix's values, in the precision the caller chose by their dtype.
#[derive(FromPyObject)]
pub enum Values<'py> {
    /// `float32` values.
    F32(PyReadonlyArray1<'py, f32>),
    /// `float64` values.
    F64(PyReadonlyArray1<'py, f64>),
}

/// A CSR matrix as the Python half passes it: `(nrows, ncols, indptr, indices, data)`.
#[derive(FromPyObject)]
pub struct CsrArg<'py>(
    pub usize,
    pub usize,
    pub PyReadonlyArray1<'py, u64>,
    pub PyReadonlyArray1<'py, u32>,
    pub Values<'py>,
);

/// The arrays of a [`CsrArg`] with values of type `T`, not yet checked: they are checked
/// ([`Parts::check`]) where the work runs, without the GIL.
#[derive(Clone, Copy)]
pub struct Parts<'a, T> {
    nrows: usize,
    ncols: usize,
    indptr: &'a [u64],
    indices: &'a [u32],
    data: &'a [T],
}

/// A CSR matrix's arrays as Python receives them: `(nrows, ncols, indptr, indices, data)`,
/// the indices `uint32`, or `int64` where SciPy needs 64-bit indices ([`csr_out`]).
pub type CsrOut<'py, T> = (
    usize,
    usize,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<T>>,
);

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

impl<'py> CsrArg<'py> {
    /// The matrix's arrays when its values are `f64`.
    pub fn f64(&self) -> PyResult<Parts<'_, f64>> {
        match &self.4 {
            Values::F64(d) => self.view(slice(d)?),
            Values::F32(_) => Err(pyo3::exceptions::PyTypeError::new_err(
                "gmcl: float64 values expected",
            )),
        }
    }

    /// The matrix's arrays when its values are `f32`.
    pub fn f32(&self) -> PyResult<Parts<'_, f32>> {
        match &self.4 {
            Values::F32(d) => self.view(slice(d)?),
            Values::F64(_) => Err(pyo3::exceptions::PyTypeError::new_err(
                "gmcl: float32 values expected",
            )),
        }
    }

    /// Whether the values are `f32`.
    pub fn is_f32(&self) -> bool {
        matches!(self.4, Values::F32(_))
    }

    fn view<'a, T>(&'a self, data: &'a [T]) -> PyResult<Parts<'a, T>> {
        Ok(Parts {
            nrows: self.0,
            ncols: self.1,
            indptr: slice(&self.2)?,
            indices: slice(&self.3)?,
            data,
        })
    }
}

impl<'a, T> Parts<'a, T> {
    /// The library's view of the arrays, every invariant checked as the library checks its own
    /// matrices (a bad matrix is `Error::Invalid`, naming the row); nothing is copied.
    pub fn check(self) -> Result<CsrRef<'a, T>> {
        CsrRef::new(self.nrows, self.ncols, self.indptr, self.indices, self.data)
    }
}

/// A matrix's entries as an edge list, with their values when `weighted`.
pub fn edges_of<T: Scalar>(m: CsrRef<'_, T>, weighted: bool) -> Result<EdgeList> {
    if m.nrows() > u32::MAX as usize + 1 {
        return Err(Error::Invalid(format!(
            "{} rows do not fit 32-bit vertex ids",
            m.nrows()
        )));
    }
    let edges = (0..m.nrows())
        .flat_map(|i| m.row(i).0.iter().map(move |&j| (i as u32, j)))
        .collect();
    let weights = weighted.then(|| m.values().iter().map(|v| v.to_f64()).collect());
    Ok(EdgeList {
        nrows: m.nrows(),
        ncols: m.ncols(),
        edges,
        weights,
    })
}

/// Hands a matrix's vectors to NumPy (no copy), but for one case: SciPy keeps the indices and
/// the offsets in one integer type, 64-bit past 2^31 - 1 entries, rows or columns, so there the
/// column indices are widened to `int64` here, by every thread and without the GIL (NumPy's
/// `astype` would take one thread several times as long at scale 18's products).
pub fn csr_out<T: Scalar + numpy::Element>(py: Python<'_>, m: Csr<T>) -> CsrOut<'_, T> {
    let (nrows, ncols, indptr, indices, data) = m.into_parts();
    let narrow = i32::MAX as usize;
    let indices = if indices.len() > narrow || nrows.max(ncols) > narrow {
        py.detach(|| indices.par_iter().map(|&j| j as i64).collect::<Vec<i64>>())
            .into_pyarray(py)
            .into_any()
    } else {
        indices.into_pyarray(py).into_any()
    };
    (
        nrows,
        ncols,
        indptr.into_pyarray(py),
        indices,
        data.into_pyarray(py),
    )
}
