//! Compressed sparse row matrices and their parallel construction from edge lists.

use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A sparse matrix in compressed sparse row form: 64-bit row offsets (nonzero counts pass 2^32 on
/// real products), 32-bit column indices sorted within each row, and values of type `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T> {
    nrows: usize,
    ncols: usize,
    row_ptr: Vec<u64>,
    col_idx: Vec<u32>,
    values: Vec<T>,
}

/// How entries with the same row and column are combined when a matrix is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Duplicates {
    /// Add their values (Matrix Market and edge-list convention).
    #[default]
    Sum,
    /// Keep the largest value (what mcl does with label input).
    Max,
    /// Keep every entry; rows may then hold repeated columns (used to count duplicates).
    Keep,
}

/// Options of [`Csr::from_edges`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildOptions {
    /// Add `(v, u)` for every `(u, v)`: the undirected graph. Needs a square shape.
    pub symmetrize: bool,
    /// Drop `(u, u)` entries.
    pub drop_self_loops: bool,
    /// How repeated entries are combined.
    pub duplicates: Duplicates,
}

impl<T: Scalar> Csr<T> {
    /// An `nrows × ncols` matrix with no entries.
    pub fn empty(nrows: usize, ncols: usize) -> Self {
        Csr {
            nrows,
            ncols,
            row_ptr: vec![0; nrows + 1],
            col_idx: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Assembles a matrix from its arrays, checking every invariant: offsets start at 0, never
    /// decrease and end at the entry count, and columns are in range and strictly increasing
    /// within each row.
    pub fn from_parts(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<u64>,
        col_idx: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Self> {
        let bad = |m: String| Err(Error::Invalid(format!("invalid CSR: {m}")));
        if row_ptr.len() != nrows + 1 {
            return bad(format!("{} row offsets for {nrows} rows", row_ptr.len()));
        }
        if row_ptr[0] != 0 || row_ptr[nrows] as usize != col_idx.len() {
            return bad("offsets must start at 0 and end at the entry count".into());
        }
        if col_idx.len() != values.len() {
            return bad(format!(
                "{} columns but {} values",
                col_idx.len(),
                values.len()
            ));
        }
        if ncols > u32::MAX as usize + 1 {
            return bad(format!("{ncols} columns do not fit 32-bit indices"));
        }
        let m = Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        };
        let bad_row = (0..nrows).into_par_iter().find_any(|&i| {
            let (s, e) = (m.row_ptr[i], m.row_ptr[i + 1]);
            if e < s || e as usize > m.col_idx.len() {
                return true;
            }
            let cols = &m.col_idx[s as usize..e as usize];
            cols.windows(2).any(|w| w[0] >= w[1])
                || cols.last().is_some_and(|&c| c as usize >= ncols)
        });
        if let Some(i) = bad_row {
            return bad(format!(
                "row {i} has bad offsets, unsorted or out-of-range columns"
            ));
        }
        Ok(m)
    }

    /// Assembles a matrix from arrays the caller guarantees valid (as [`Csr::from_parts`] checks).
    /// Used by engines that construct sorted rows themselves; debug builds still check.
    pub fn from_parts_unchecked(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<u64>,
        col_idx: Vec<u32>,
        values: Vec<T>,
    ) -> Self {
        debug_assert!(Csr::from_parts(
            nrows,
            ncols,
            row_ptr.clone(),
            col_idx.clone(),
            values.clone()
        )
        .is_ok());
        Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        }
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
    pub fn row_ptr(&self) -> &[u64] {
        &self.row_ptr
    }
    /// Column index of each entry.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    /// Value of each entry.
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Mutable values (the structure stays fixed).
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
    /// Number of entries in row `i`.
    #[inline]
    pub fn row_len(&self, i: usize) -> usize {
        (self.row_ptr[i + 1] - self.row_ptr[i]) as usize
    }
    /// The columns and values of row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> (&[u32], &[T]) {
        let (s, e) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        (&self.col_idx[s..e], &self.values[s..e])
    }
    /// Takes the matrix apart into (nrows, ncols, row_ptr, col_idx, values).
    pub fn into_parts(self) -> (usize, usize, Vec<u64>, Vec<u32>, Vec<T>) {
        (
            self.nrows,
            self.ncols,
            self.row_ptr,
            self.col_idx,
            self.values,
        )
    }

    /// The same matrix with values converted to another scalar type.
    pub fn cast<U: Scalar>(&self) -> Csr<U> {
        Csr {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr: self.row_ptr.clone(),
            col_idx: self.col_idx.clone(),
            values: self
                .values
                .par_iter()
                .map(|v| U::from_f64(v.to_f64()))
                .collect(),
        }
    }

    /// Builds a matrix from a dense row-major array, storing every nonzero (for tests and small
    /// examples).
    pub fn from_dense(nrows: usize, ncols: usize, dense: &[T]) -> Self {
        assert_eq!(dense.len(), nrows * ncols, "dense array has the wrong size");
        let mut row_ptr = vec![0u64];
        let (mut col_idx, mut values) = (Vec::new(), Vec::new());
        for i in 0..nrows {
            for j in 0..ncols {
                let v = dense[i * ncols + j];
                if v != T::ZERO {
                    col_idx.push(j as u32);
                    values.push(v);
                }
            }
            row_ptr.push(col_idx.len() as u64);
        }
        Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// The dense row-major form (for tests and small examples).
    pub fn to_dense(&self) -> Vec<T> {
        let mut d = vec![T::ZERO; self.nrows * self.ncols];
        for i in 0..self.nrows {
            let (c, v) = self.row(i);
            for (&j, &x) in c.iter().zip(v) {
                d[i * self.ncols + j as usize] += x;
            }
        }
        d
    }

    /// The transpose, built by a parallel counting sort over columns; rows of the result are
    /// sorted because rows of `self` are visited in order.
    pub fn transpose(&self) -> Csr<T> {
        let el = EdgeList {
            nrows: self.ncols,
            ncols: self.nrows,
            edges: (0..self.nrows)
                .into_par_iter()
                .flat_map_iter(|i| self.row(i).0.iter().map(move |&j| (j, i as u32)))
                .collect(),
            weights: Some(self.values.par_iter().map(|v| v.to_f64()).collect()),
        };
        let opts = BuildOptions {
            duplicates: Duplicates::Keep,
            ..Default::default()
        };
        // The input has no repeated (row, col) pairs, so Keep changes nothing and cannot fail.
        Csr::from_edges(&el, &opts).unwrap_or_else(|_| unreachable!("transpose of a valid CSR"))
    }

    /// Builds a matrix from an edge list in parallel: count entries per row, scatter, sort each
    /// row by column (ties by value, so sums are the same whatever the thread count), then
    /// combine duplicates.
    pub fn from_edges(el: &EdgeList, opts: &BuildOptions) -> Result<Self> {
        let (nrows, ncols) = (el.nrows, el.ncols);
        if opts.symmetrize && nrows != ncols {
            return Err(Error::Invalid(format!(
                "cannot symmetrize a {nrows} x {ncols} matrix: it is not square"
            )));
        }
        if ncols > u32::MAX as usize + 1 {
            return Err(Error::Invalid(format!(
                "{ncols} columns do not fit 32-bit indices"
            )));
        }
        if let Some(&(u, v)) = el
            .edges
            .par_iter()
            .find_any(|&&(u, v)| u as usize >= nrows || v as usize >= ncols)
        {
            return Err(Error::Invalid(format!(
                "entry ({u}, {v}) lies outside the {nrows} x {ncols} shape"
            )));
        }
        let keep = |u: u32, v: u32| !(opts.drop_self_loops && u == v);
        let mirror = |u: u32, v: u32| opts.symmetrize && u != v;

        // 1. Entries per row.
        let counts: Vec<AtomicU64> = (0..nrows)
            .into_par_iter()
            .map(|_| AtomicU64::new(0))
            .collect();
        el.edges
            .par_iter()
            .with_min_len(1 << 14)
            .for_each(|&(u, v)| {
                if keep(u, v) {
                    counts[u as usize].fetch_add(1, Relaxed);
                    if mirror(u, v) {
                        counts[v as usize].fetch_add(1, Relaxed);
                    }
                }
            });
        let mut row_ptr = Vec::with_capacity(nrows + 1);
        row_ptr.push(0u64);
        let mut total = 0u64;
        for c in &counts {
            total += c.load(Relaxed);
            row_ptr.push(total);
        }

        // 2. Scatter (column, value) pairs; the cursor of each row starts at its offset.
        counts
            .par_iter()
            .enumerate()
            .for_each(|(i, c)| c.store(row_ptr[i], Relaxed));
        let mut entries: Vec<(u32, T)> = Vec::with_capacity(total as usize);
        {
            let out = SharedSlice::new(entries.spare_capacity_mut());
            el.edges
                .par_iter()
                .enumerate()
                .with_min_len(1 << 14)
                .for_each(|(k, &(u, v))| {
                    if keep(u, v) {
                        let w = T::from_f64(el.weight(k));
                        let at = counts[u as usize].fetch_add(1, Relaxed) as usize;
                        // SAFETY: each cursor hands out every slot of its row exactly once.
                        unsafe { out.write(at, (v, w)) };
                        if mirror(u, v) {
                            let at = counts[v as usize].fetch_add(1, Relaxed) as usize;
                            unsafe { out.write(at, (u, w)) };
                        }
                    }
                });
        }
        // SAFETY: the counting pass and the scatter pass visit the same entries, so all
        // `total` slots were written.
        unsafe { entries.set_len(total as usize) };
        drop(counts);

        // 3. Sort each row; 4. combine duplicates, counting what each row keeps.
        let mut kept = vec![0u64; nrows];
        for_each_row_mut(&row_ptr, &mut entries, &mut kept, |row, kept| {
            row.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            *kept = combine_sorted(row, opts.duplicates) as u64;
        });
        let mut new_ptr = Vec::with_capacity(nrows + 1);
        new_ptr.push(0u64);
        let mut acc = 0u64;
        for k in &kept {
            acc += k;
            new_ptr.push(acc);
        }
        let nnz = acc as usize;
        let mut col_idx: Vec<u32> = Vec::with_capacity(nnz);
        let mut values: Vec<T> = Vec::with_capacity(nnz);
        {
            let cols = SharedSlice::new(col_idx.spare_capacity_mut());
            let vals = SharedSlice::new(values.spare_capacity_mut());
            (0..nrows).into_par_iter().with_min_len(1024).for_each(|i| {
                let src = &entries[row_ptr[i] as usize..][..kept[i] as usize];
                let at = new_ptr[i] as usize;
                for (k, &(c, v)) in src.iter().enumerate() {
                    // SAFETY: rows own disjoint ranges [new_ptr[i], new_ptr[i+1]).
                    unsafe {
                        cols.write(at + k, c);
                        vals.write(at + k, v);
                    }
                }
            });
        }
        // SAFETY: every row wrote its whole range.
        unsafe {
            col_idx.set_len(nnz);
            values.set_len(nnz);
        }
        Ok(Csr {
            nrows,
            ncols,
            row_ptr: new_ptr,
            col_idx,
            values,
        })
    }
}

/// Combines runs of equal columns at the front of a sorted row; returns how many entries remain.
fn combine_sorted<T: Scalar>(row: &mut [(u32, T)], dup: Duplicates) -> usize {
    if dup == Duplicates::Keep || row.len() < 2 {
        return row.len();
    }
    let mut w = 0;
    for r in 1..row.len() {
        if row[r].0 == row[w].0 {
            row[w].1 = match dup {
                Duplicates::Max => row[w].1.max_of(row[r].1),
                _ => row[w].1 + row[r].1,
            };
        } else {
            w += 1;
            row[w] = row[r];
        }
    }
    w + 1
}

/// Runs `f` on every row of `data` (split by `row_ptr`) in parallel, with that row's `extra` slot.
fn for_each_row_mut<E: Send, X: Send>(
    row_ptr: &[u64],
    data: &mut [E],
    extra: &mut [X],
    f: impl Fn(&mut [E], &mut X) + Sync,
) {
    let data = SharedSlice::new_init(data);
    extra
        .par_iter_mut()
        .enumerate()
        .with_min_len(256)
        .for_each(|(i, x)| {
            let (s, e) = (row_ptr[i] as usize, row_ptr[i + 1] as usize);
            // SAFETY: rows are disjoint ranges of `data`.
            f(unsafe { data.slice_mut(s, e) }, x)
        });
}

/// A slice that many threads may write at disjoint positions. The caller promises that no two
/// threads touch the same position.
pub(crate) struct SharedSlice<E> {
    ptr: *mut E,
    len: usize,
}
unsafe impl<E: Send> Sync for SharedSlice<E> {}
unsafe impl<E: Send> Send for SharedSlice<E> {}

impl<E> SharedSlice<E> {
    /// Over uninitialised spare capacity of a vector.
    pub(crate) fn new(s: &mut [std::mem::MaybeUninit<E>]) -> Self {
        SharedSlice {
            ptr: s.as_mut_ptr() as *mut E,
            len: s.len(),
        }
    }
    /// Over an initialised slice.
    pub(crate) fn new_init(s: &mut [E]) -> Self {
        SharedSlice {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }
    /// Writes `v` at `i` without dropping what was there.
    ///
    /// # Safety
    /// No other thread may access position `i` meanwhile.
    #[inline]
    pub(crate) unsafe fn write(&self, i: usize, v: E) {
        assert!(i < self.len);
        self.ptr.add(i).write(v)
    }
    /// The sub-slice `[s, e)`.
    ///
    /// # Safety
    /// No other thread may access `[s, e)` while the returned slice lives.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice_mut(&self, s: usize, e: usize) -> &mut [E] {
        assert!(s <= e && e <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.add(s), e - s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(n: usize, e: &[(u32, u32)], w: Option<&[f64]>) -> EdgeList {
        EdgeList::square(n, e.to_vec(), w.map(|w| w.to_vec()))
    }

    #[test]
    fn builds_sorted_rows_and_sums_duplicates() {
        let e = el(
            3,
            &[(0, 2), (0, 1), (2, 0), (0, 2)],
            Some(&[1.0, 2.0, 3.0, 4.0]),
        );
        let m: Csr<f64> = Csr::from_edges(&e, &BuildOptions::default()).unwrap();
        assert_eq!(m.row_ptr(), &[0, 2, 2, 3]);
        assert_eq!(m.col_idx(), &[1, 2, 0]);
        assert_eq!(m.values(), &[2.0, 5.0, 3.0]);
    }

    #[test]
    fn max_keep_symmetrize_and_self_loops() {
        let e = el(
            3,
            &[(0, 1), (1, 0), (1, 1), (0, 1)],
            Some(&[1.0, 5.0, 7.0, 2.0]),
        );
        let opts = BuildOptions {
            symmetrize: true,
            drop_self_loops: true,
            duplicates: Duplicates::Max,
        };
        let m: Csr<f32> = Csr::from_edges(&e, &opts).unwrap();
        assert_eq!(
            m.to_dense(),
            vec![0.0, 5.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
        let keep = BuildOptions {
            duplicates: Duplicates::Keep,
            ..Default::default()
        };
        let k: Csr<f32> = Csr::from_edges(&e, &keep).unwrap();
        assert_eq!(k.nnz(), 4);
        assert_eq!(k.row(0).0, &[1, 1]);
    }

    #[test]
    fn rejects_out_of_shape_and_nonsquare_symmetrize() {
        let e = el(2, &[(0, 5)], None);
        assert!(Csr::<f64>::from_edges(&e, &BuildOptions::default()).is_err());
        let r = EdgeList {
            nrows: 2,
            ncols: 3,
            edges: vec![(0, 2)],
            weights: None,
        };
        let opts = BuildOptions {
            symmetrize: true,
            ..Default::default()
        };
        assert!(Csr::<f64>::from_edges(&r, &opts).is_err());
        assert_eq!(
            Csr::<f64>::from_edges(&r, &BuildOptions::default())
                .unwrap()
                .ncols(),
            3
        );
    }

    #[test]
    fn transpose_and_checked_parts() {
        let a = Csr::from_dense(2, 3, &[1.0f64, 0.0, 2.0, 0.0, 3.0, 0.0]);
        let t = a.transpose();
        assert_eq!(t.to_dense(), vec![1.0, 0.0, 0.0, 3.0, 2.0, 0.0]);
        assert_eq!(t.transpose(), a);
        assert!(Csr::<f64>::from_parts(1, 3, vec![0, 2], vec![2, 1], vec![1.0, 1.0]).is_err());
        assert!(Csr::<f64>::from_parts(1, 3, vec![0, 1], vec![3], vec![1.0]).is_err());
        assert!(Csr::<f64>::from_parts(1, 3, vec![0, 2], vec![0, 2], vec![1.0, 1.0]).is_ok());
    }

    #[test]
    fn empty_shapes() {
        let m: Csr<f64> = Csr::from_edges(&el(0, &[], None), &BuildOptions::default()).unwrap();
        assert_eq!((m.nrows(), m.nnz(), m.row_ptr().len()), (0, 0, 1));
        assert_eq!(Csr::<f32>::empty(4, 2).row_len(3), 0);
    }
}
