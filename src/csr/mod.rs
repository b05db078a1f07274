//! Compressed sparse row matrices: the type, its accessors and conversions. Building one from
//! an edge list in parallel is `build.rs`'s job, from entries a file already groups by row
//! `rows.rs`'s; whether a pattern already is a simple undirected graph's, `symmetry.rs`'s (on the GPU,
//! `gpu_symmetry.rs`'s).

use crate::edges::EdgeList;
use crate::error::Result;
use crate::scalar::Scalar;
use rayon::prelude::*;

mod build;
mod gpu_symmetry;
mod rows;
mod symmetry;
mod view;

pub use gpu_symmetry::is_symmetric_without_loops_on;
pub use rows::RowEntries;
pub use symmetry::{diagonal_block_is_symmetric, is_symmetric, is_symmetric_without_loops};
pub use view::CsrRef;

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
    /// Add `(v, u)` for every `(u, v)`, self loops included: with [`Duplicates::Sum`] the
    /// matrix A + Aᵀ (a diagonal entry counts twice), with [`Duplicates::Max`] the undirected
    /// graph. Needs a square shape.
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
        view::check_parts(nrows, ncols, &row_ptr, &col_idx, values.len())?;
        Ok(Csr {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        })
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
    /// The matrix as a borrowed view, the form the engines read.
    pub fn view(&self) -> CsrRef<'_, T> {
        CsrRef::from(self)
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

    /// `parts`' rows one after another (each `ncols` wide): a single part is returned as it is,
    /// more are copied once, in parallel chunks, into arrays of the final size.
    pub fn stack(mut parts: Vec<Csr<T>>, ncols: usize) -> Csr<T> {
        if parts.len() == 1 {
            if let Some(p) = parts.pop() {
                return p;
            }
        }
        let rows: usize = parts.iter().map(|p| p.nrows).sum();
        let nnz: usize = parts.iter().map(|p| p.nnz()).sum();
        // Zeroed arrays come from fresh pages, first touched by the parallel copies.
        let mut row_ptr = vec![0u64; rows + 1];
        let mut col_idx = vec![0u32; nnz];
        let mut values = vec![T::ZERO; nnz];
        const CHUNK: usize = 1 << 18;
        let (mut r, mut e) = (0usize, 0usize);
        for p in &parts {
            let base = e as u64;
            row_ptr[r + 1..r + 1 + p.nrows]
                .par_chunks_mut(CHUNK)
                .zip(p.row_ptr[1..].par_chunks(CHUNK))
                .for_each(|(o, x)| o.iter_mut().zip(x).for_each(|(o, &x)| *o = base + x));
            crate::mem::par_copy(&mut col_idx[e..e + p.nnz()], &p.col_idx);
            crate::mem::par_copy(&mut values[e..e + p.nnz()], &p.values);
            r += p.nrows;
            e += p.nnz();
        }
        Csr::from_parts_unchecked(rows, ncols, row_ptr, col_idx, values)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows stacked from pieces are the whole matrix's; one piece is kept, not copied.
    #[test]
    fn stacked_pieces_are_the_whole() {
        let dense: Vec<f32> = (0..7 * 5).map(|i| ((i * 7) % 3) as f32).collect();
        let whole = Csr::from_dense(7, 5, &dense);
        for cuts in [vec![0, 7], vec![0, 3, 7], vec![0, 0, 2, 2, 6, 7]] {
            let parts: Vec<Csr<f32>> = cuts
                .windows(2)
                .map(|w| Csr::from_dense(w[1] - w[0], 5, &dense[w[0] * 5..w[1] * 5]))
                .collect();
            assert_eq!(Csr::stack(parts, 5), whole, "{cuts:?}");
        }
        let at = whole.col_idx().as_ptr();
        assert_eq!(Csr::stack(vec![whole], 5).col_idx().as_ptr(), at);
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
        let none = EdgeList::square(0, Vec::new(), None);
        let m: Csr<f64> = Csr::from_edges(&none, &BuildOptions::default()).unwrap();
        assert_eq!((m.nrows(), m.nnz(), m.row_ptr().len()), (0, 0, 1));
        assert_eq!(Csr::<f32>::empty(4, 2).row_len(3), 0);
    }
}
