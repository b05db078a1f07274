//! A borrowed CSR matrix: arrays someone else owns (a caller's buffers, a NumPy array) checked
//! once and read in place, so the engines can run on them without copying them into a [`Csr`].

use super::Csr;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// A CSR matrix over borrowed arrays, with the invariants of [`Csr`]: `nrows + 1` row offsets
/// from 0 to the entry count, never decreasing; columns in range and strictly increasing within
/// each row; one value per entry. [`CsrRef::new`] checks them; [`Csr::view`] borrows a `Csr`.
#[derive(Debug)]
pub struct CsrRef<'a, T> {
    nrows: usize,
    ncols: usize,
    row_ptr: &'a [u64],
    col_idx: &'a [u32],
    values: &'a [T],
}

// Derived `Clone` and `Copy` would ask the same of `T`; a view is copied whatever it holds.
impl<T> Clone for CsrRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for CsrRef<'_, T> {}

impl<'a, T> From<&'a Csr<T>> for CsrRef<'a, T> {
    fn from(m: &'a Csr<T>) -> Self {
        CsrRef {
            nrows: m.nrows,
            ncols: m.ncols,
            row_ptr: &m.row_ptr,
            col_idx: &m.col_idx,
            values: &m.values,
        }
    }
}

impl<'a, T> CsrRef<'a, T> {
    /// A view of the arrays after checking every invariant, as [`Csr::from_parts`] does and with
    /// its messages (a bad matrix is [`Error::Invalid`] naming the first bad row found).
    pub fn new(
        nrows: usize,
        ncols: usize,
        row_ptr: &'a [u64],
        col_idx: &'a [u32],
        values: &'a [T],
    ) -> Result<Self> {
        check_parts(nrows, ncols, row_ptr, col_idx, values.len())?;
        Ok(CsrRef {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        })
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }
    /// Row offsets, `nrows + 1` of them.
    pub fn row_ptr(&self) -> &'a [u64] {
        self.row_ptr
    }
    /// Column index of each entry.
    pub fn col_idx(&self) -> &'a [u32] {
        self.col_idx
    }
    /// Value of each entry.
    pub fn values(&self) -> &'a [T] {
        self.values
    }
    /// Number of entries in row `i`.
    #[inline]
    pub fn row_len(&self, i: usize) -> usize {
        (self.row_ptr[i + 1] - self.row_ptr[i]) as usize
    }
    /// The columns and values of row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> (&'a [u32], &'a [T]) {
        let (s, e) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        (&self.col_idx[s..e], &self.values[s..e])
    }
    /// Whether both views show the very same arrays (a product's operands that are one
    /// matrix, which an engine then copies to the device once).
    pub fn same(&self, other: &Self) -> bool {
        (self.nrows, self.ncols) == (other.nrows, other.ncols)
            && std::ptr::eq(self.row_ptr, other.row_ptr)
            && std::ptr::eq(self.col_idx, other.col_idx)
            && std::ptr::eq(self.values, other.values)
    }
}

impl<T: Clone> CsrRef<'_, T> {
    /// An owned copy of the matrix.
    pub fn to_csr(&self) -> Csr<T> {
        Csr {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr: self.row_ptr.to_vec(),
            col_idx: self.col_idx.to_vec(),
            values: self.values.to_vec(),
        }
    }
}

/// Checks a CSR matrix's arrays (`values` entries long): what [`Csr::from_parts`] and
/// [`CsrRef::new`] promise. The rows are checked in parallel, one read of the columns.
pub(super) fn check_parts(
    nrows: usize,
    ncols: usize,
    row_ptr: &[u64],
    col_idx: &[u32],
    values: usize,
) -> Result<()> {
    let bad = |m: String| Err(Error::Invalid(format!("invalid CSR: {m}")));
    if row_ptr.len() != nrows.saturating_add(1) {
        return bad(format!("{} row offsets for {nrows} rows", row_ptr.len()));
    }
    if row_ptr[0] != 0 || row_ptr[nrows] != col_idx.len() as u64 {
        return bad("offsets must start at 0 and end at the entry count".into());
    }
    if col_idx.len() != values {
        return bad(format!("{} columns but {values} values", col_idx.len()));
    }
    if ncols > u32::MAX as usize + 1 {
        return bad(format!("{ncols} columns do not fit 32-bit indices"));
    }
    let bad_row = (0..nrows)
        .into_par_iter()
        .with_min_len(1024)
        .find_any(|&i| {
            let (s, e) = (row_ptr[i], row_ptr[i + 1]);
            if e < s || e > col_idx.len() as u64 {
                return true;
            }
            let cols = &col_idx[s as usize..e as usize];
            cols.windows(2).any(|w| w[0] >= w[1])
                || cols.last().is_some_and(|&c| c as usize >= ncols)
        });
    if let Some(i) = bad_row {
        return bad(format!(
            "row {i} has bad offsets, unsorted or out-of-range columns"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_reads_the_arrays_in_place() {
        let (ptr, cols, vals) = (
            vec![0u64, 2, 2, 3],
            vec![0u32, 2, 1],
            vec![1.0f64, 2.0, 3.0],
        );
        let v = CsrRef::new(3, 3, &ptr, &cols, &vals).unwrap();
        assert_eq!((v.nrows(), v.ncols(), v.nnz(), v.row_len(1)), (3, 3, 3, 0));
        assert_eq!(v.row(0), (&[0u32, 2][..], &[1.0, 2.0][..]));
        assert!(std::ptr::eq(v.col_idx(), &cols[..]));
        let owned = v.to_csr();
        assert_eq!(
            owned.to_dense(),
            vec![1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0]
        );
        let again = CsrRef::from(&owned);
        assert_eq!(again.row(2), v.row(2));
        assert_eq!(owned.view().values(), &vals[..]);
    }

    #[test]
    fn every_broken_invariant_is_refused_with_the_owned_matrix_message() {
        let vals = [1.0f32; 3];
        let cases: [(usize, &[u64], &[u32], &str); 6] = [
            (2, &[0, 1], &[0], "2 row offsets"),
            (1, &[1, 1], &[0], "start at 0"),
            (1, &[0, 2], &[0, 1, 2], "end at the entry count"),
            (3, &[0, 2, 1, 2], &[0, 1], "row 1 has bad offsets"),
            (1, &[0, 2], &[1, 0], "row 0 has bad offsets, unsorted"),
            (1, &[0, 1], &[3], "out-of-range"),
        ];
        for (n, ptr, cols, what) in cases {
            let e = CsrRef::new(n, 3, ptr, cols, &vals[..cols.len()])
                .unwrap_err()
                .to_string();
            assert!(e.contains(what) && e.contains("invalid CSR"), "{what}: {e}");
            let owned = Csr::from_parts(
                n,
                3,
                ptr.to_vec(),
                cols.to_vec(),
                vals[..cols.len()].to_vec(),
            );
            assert_eq!(owned.unwrap_err().to_string(), e);
        }
        let e = CsrRef::new(1, 3, &[0, 1], &[0], &vals[..2]).unwrap_err();
        assert!(e.to_string().contains("1 columns but 2 values"), "{e}");
    }
}
