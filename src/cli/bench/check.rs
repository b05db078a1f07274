//! Checking a product against a reference: same shape, same structure, values within a relative
//! tolerance. A result that is empty, truncated, malformed or differs anywhere is WRONG, with
//! the first difference named.

use gmcl::csr::Csr;
use gmcl::scalar::Scalar;
use rayon::prelude::*;
use std::cmp::Ordering;

/// A product as an engine handed it back, not yet trusted: 64-bit offsets, columns and values.
/// Rows need not be sorted (they are sorted before comparing); anything else that is not a
/// valid CSR makes the result WRONG.
#[derive(Clone, Debug, PartialEq)]
pub struct RawCsr<T> {
    /// Rows.
    pub nrows: usize,
    /// Columns.
    pub ncols: usize,
    /// `nrows + 1` offsets.
    pub row_ptr: Vec<u64>,
    /// Column of each entry.
    pub col_idx: Vec<u32>,
    /// Value of each entry.
    pub values: Vec<T>,
}

impl<T: Scalar> RawCsr<T> {
    /// The arrays of a checked matrix.
    pub fn of(m: &Csr<T>) -> Self {
        RawCsr {
            nrows: m.nrows(),
            ncols: m.ncols(),
            row_ptr: m.row_ptr().to_vec(),
            col_idx: m.col_idx().to_vec(),
            values: m.values().to_vec(),
        }
    }

    /// Entries listed.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }

    /// A checked matrix of these arrays, rows sorted by column first; the reason when they do
    /// not make a valid CSR (bad offsets, a repeated or out-of-range column).
    pub fn into_csr(mut self) -> std::result::Result<Csr<T>, String> {
        let n = self.nnz();
        let offsets_ok = self.row_ptr.len() == self.nrows + 1
            && self.values.len() == n
            && self.row_ptr.first() == Some(&0)
            && self.row_ptr.last() == Some(&(n as u64))
            && self.row_ptr.windows(2).all(|w| w[0] <= w[1]);
        if !offsets_ok {
            return Err("malformed C: bad offsets or array lengths".into());
        }
        for i in 0..self.nrows {
            let (s, e) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
            if self.col_idx[s..e].windows(2).any(|w| w[0] >= w[1]) {
                let mut pairs: Vec<(u32, T)> = self.col_idx[s..e]
                    .iter()
                    .copied()
                    .zip(self.values[s..e].iter().copied())
                    .collect();
                pairs.sort_by_key(|p| p.0);
                for (k, (c, v)) in pairs.into_iter().enumerate() {
                    self.col_idx[s + k] = c;
                    self.values[s + k] = v;
                }
            }
        }
        Csr::from_parts(
            self.nrows,
            self.ncols,
            self.row_ptr,
            self.col_idx,
            self.values,
        )
        .map_err(|e| e.to_string())
    }
}

/// The relative tolerance of values: sums taken in another order differ by a few units in the
/// last place per addition, far below these.
pub fn default_tolerance<T: Scalar>() -> f64 {
    if std::mem::size_of::<T>() == 4 {
        1e-4
    } else {
        1e-10
    }
}

/// How a result compares with the reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Same shape and structure, every value within the tolerance.
    Equal,
    /// Different; the text says how (the first difference found).
    Wrong(String),
}

// Only the tests ask; the harness matches on the verdict.
#[cfg(test)]
impl Verdict {
    /// True for [`Verdict::Equal`].
    pub fn is_equal(&self) -> bool {
        matches!(self, Verdict::Equal)
    }
}

/// Values agree when `|x - y| <= rel · max(|x|, |y|, m)`, where `m` is the mean magnitude of the
/// reference row: an entry that is small because its products cancel is judged against the
/// size of the row's entries rather than against itself.
fn close(x: f64, y: f64, rel: f64, row_mean: f64) -> bool {
    if x == y {
        return true;
    }
    let scale = x.abs().max(y.abs()).max(row_mean);
    (x - y).abs() <= rel * scale
}

/// Compares `got` with `reference` (already a valid CSR). Runs over the rows in parallel and
/// reports the first difference in row order.
pub fn compare<T: Scalar>(reference: &Csr<T>, got: &RawCsr<T>, rel: f64) -> Verdict {
    if (got.nrows, got.ncols) != (reference.nrows(), reference.ncols()) {
        return Verdict::Wrong(format!(
            "C is {} x {}, expected {} x {}",
            got.nrows,
            got.ncols,
            reference.nrows(),
            reference.ncols()
        ));
    }
    let (want, have) = (reference.nnz(), got.nnz());
    if have == 0 && want > 0 {
        return Verdict::Wrong(format!("empty C: 0 of {want} nonzeros"));
    }
    if got.row_ptr.len() != got.nrows + 1 {
        return Verdict::Wrong(format!(
            "malformed C: {} row offsets for {} rows",
            got.row_ptr.len(),
            got.nrows
        ));
    }
    if got.values.len() != have {
        return Verdict::Wrong(format!(
            "malformed C: {have} columns but {} values",
            got.values.len()
        ));
    }
    if got.row_ptr[0] != 0
        || got.row_ptr[got.nrows] != have as u64
        || got.row_ptr.windows(2).any(|w| w[0] > w[1])
    {
        return Verdict::Wrong(format!(
            "malformed C: offsets do not run from 0 up to the {have} entries listed"
        ));
    }
    let count = match have.cmp(&want) {
        Ordering::Less => Some(format!("truncated: {have} of {want} nonzeros")),
        Ordering::Greater => Some(format!("{have} nonzeros, expected {want}")),
        Ordering::Equal => None,
    };
    let first = (0..got.nrows)
        .into_par_iter()
        .with_min_len(256)
        .filter_map(|i| row_difference(reference, got, i, rel).map(|d| (i, d)))
        .min_by_key(|(i, _)| *i);
    match (count, first) {
        (None, None) => Verdict::Equal,
        (Some(c), None) => Verdict::Wrong(c),
        (None, Some((i, d))) => Verdict::Wrong(format!("row {i}: {d}")),
        (Some(c), Some((i, d))) => Verdict::Wrong(format!("{c}; first difference in row {i}: {d}")),
    }
}

/// How row `i` of `got` differs from the reference, if it does.
fn row_difference<T: Scalar>(
    reference: &Csr<T>,
    got: &RawCsr<T>,
    i: usize,
    rel: f64,
) -> Option<String> {
    let (rc, rv) = reference.row(i);
    let (s, e) = (got.row_ptr[i] as usize, got.row_ptr[i + 1] as usize);
    let (mut gc, mut gv) = (&got.col_idx[s..e], &got.values[s..e]);
    if gc.len() != rc.len() {
        return Some(format!("{} entries, expected {}", gc.len(), rc.len()));
    }
    // Sort a copy when the engine left the row unsorted.
    let sorted: (Vec<u32>, Vec<T>);
    if gc.windows(2).any(|w| w[0] >= w[1]) {
        let mut pairs: Vec<(u32, T)> = gc.iter().copied().zip(gv.iter().copied()).collect();
        pairs.sort_by_key(|p| p.0);
        if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
            return Some("a column appears twice".into());
        }
        sorted = pairs.into_iter().unzip();
        gc = &sorted.0;
        gv = &sorted.1;
    }
    let mean = if rv.is_empty() {
        0.0
    } else {
        rv.iter().map(|v| v.to_f64().abs()).sum::<f64>() / rv.len() as f64
    };
    for k in 0..rc.len() {
        if gc[k] != rc[k] {
            return Some(format!("column {} where {} was expected", gc[k], rc[k]));
        }
        let (x, y) = (gv[k].to_f64(), rv[k].to_f64());
        if !close(x, y, rel, mean) {
            return Some(format!(
                "entry ({i}, {}) is {x}, expected {y} (relative difference {:.2e})",
                rc[k],
                (x - y).abs() / y.abs().max(mean).max(f64::MIN_POSITIVE)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> Csr<f32> {
        Csr::from_dense(3, 3, &[1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 4.0, 5.0])
    }

    #[test]
    fn equal_results_pass_even_unsorted_and_rounded() {
        let r = reference();
        assert_eq!(compare(&r, &RawCsr::of(&r), 1e-4), Verdict::Equal);
        let mut g = RawCsr::of(&r);
        // Row 2 listed backwards, one value off by one part in a million.
        g.col_idx[2..5].reverse();
        g.values[2..5].copy_from_slice(&[5.000005, 4.0, 3.0]);
        assert!(compare(&r, &g, 1e-4).is_equal());
    }

    #[test]
    fn empty_truncated_and_malformed_results_are_wrong() {
        let r = reference();
        let empty = RawCsr {
            nrows: 3,
            ncols: 3,
            row_ptr: vec![0; 4],
            col_idx: vec![],
            values: vec![],
        };
        let Verdict::Wrong(w) = compare(&r, &empty, 1e-4) else {
            panic!("an empty C passed")
        };
        assert_eq!(w, "empty C: 0 of 5 nonzeros");

        let mut t = RawCsr::of(&r);
        t.row_ptr[3] = 4;
        t.col_idx.pop();
        t.values.pop();
        let Verdict::Wrong(w) = compare(&r, &t, 1e-4) else {
            panic!("a truncated C passed")
        };
        assert!(w.starts_with("truncated: 4 of 5 nonzeros"), "{w}");
        assert!(w.contains("row 2: 2 entries, expected 3"), "{w}");

        let mut m = RawCsr::of(&r);
        m.row_ptr[1] = 7;
        let Verdict::Wrong(w) = compare(&r, &m, 1e-4) else {
            panic!("bad offsets passed")
        };
        assert!(w.starts_with("malformed C"), "{w}");

        let mut s = RawCsr::of(&r);
        s.nrows = 2;
        assert!(!compare(&r, &s, 1e-4).is_equal());
    }

    #[test]
    fn different_structure_or_values_are_wrong() {
        let r = reference();
        let mut g = RawCsr::of(&r);
        g.col_idx[1] = 1;
        let Verdict::Wrong(w) = compare(&r, &g, 1e-4) else {
            panic!()
        };
        assert_eq!(w, "row 0: column 1 where 2 was expected");
        let mut g = RawCsr::of(&r);
        g.values[4] = 5.01;
        let Verdict::Wrong(w) = compare(&r, &g, 1e-4) else {
            panic!()
        };
        assert!(w.starts_with("row 2: entry (2, 2) is 5.01"), "{w}");
        let mut g = RawCsr::of(&r);
        g.col_idx[2..4].copy_from_slice(&[1, 1]);
        let Verdict::Wrong(w) = compare(&r, &g, 1e-4) else {
            panic!()
        };
        assert_eq!(w, "row 2: a column appears twice");
    }

    #[test]
    fn raw_results_become_matrices_when_valid() {
        let r = reference();
        let mut g = RawCsr::of(&r);
        g.col_idx[2..5].reverse();
        g.values[2..5].reverse();
        assert_eq!(g.into_csr().unwrap(), r);
        let mut g = RawCsr::of(&r);
        g.col_idx[2..4].copy_from_slice(&[1, 1]);
        assert!(g.into_csr().is_err());
        let mut g = RawCsr::of(&r);
        g.row_ptr[3] = 9;
        assert!(g.into_csr().unwrap_err().starts_with("malformed C"));
    }

    #[test]
    fn cancellation_is_judged_against_the_row() {
        // Reference entry 1e-7 (products cancelled), result 3e-7: fine against a row of ones.
        let r = Csr::from_dense(1, 3, &[1.0f64, 1e-7, 1.0]);
        let mut g = RawCsr::of(&r);
        g.values[1] = 3e-7;
        assert!(compare(&r, &g, 1e-4).is_equal());
        assert!(!compare(&r, &g, 1e-10).is_equal());
    }
}
