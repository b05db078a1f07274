//! Building a CSR matrix from entries that a file already groups by row (a `.npz` file's CSR
//! arrays, or its CSC arrays turned into rows): no bucketing and no edge list; each row is
//! merged with its mirror when symmetrizing, sorted only when it is not already, and combined,
//! by the same rules as [`Csr::from_edges`], so the two give the same matrix for the same
//! entries.

use super::build::{combine_sorted, sort_row};
use super::{BuildOptions, Csr, Duplicates};
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;

/// Entries grouped by row, duplicates allowed and in any order within a row: row `i` holds the
/// columns `cols[ptr[i]..ptr[i + 1]]`, entry `k` the value `values[k]` (every value is one when
/// `values` is `None`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowEntries {
    /// Number of rows.
    pub nrows: usize,
    /// Number of columns.
    pub ncols: usize,
    /// `nrows + 1` offsets into `cols`.
    pub ptr: Vec<u64>,
    /// The column of each entry.
    pub cols: Vec<u32>,
    /// The value of each entry, or `None` when every value is one.
    pub values: Option<Vec<f64>>,
}

/// Rows per task when rows are finished in parallel: enough to amortise a task, few enough to
/// balance skewed degrees.
const ROWS_PER_TASK: usize = 2048;

impl RowEntries {
    /// Checks the invariants the build relies on: offsets from 0 to the entry count, never
    /// decreasing, one value per entry, every column under `ncols`.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(format!("invalid row entries: {m}")));
        if self.ptr.len() != self.nrows + 1 {
            return bad(format!(
                "{} offsets for {} rows",
                self.ptr.len(),
                self.nrows
            ));
        }
        if self.ptr[0] != 0 || self.ptr[self.nrows] != self.cols.len() as u64 {
            return bad("offsets must run from 0 to the entry count".into());
        }
        if self.ptr.par_windows(2).any(|w| w[0] > w[1]) {
            return bad("offsets decrease".into());
        }
        if self
            .values
            .as_ref()
            .is_some_and(|v| v.len() != self.cols.len())
        {
            return bad("not one value per entry".into());
        }
        if let Some(&c) = self
            .cols
            .par_iter()
            .find_any(|&&c| c as usize >= self.ncols)
        {
            return bad(format!("column {c} outside {} columns", self.ncols));
        }
        Ok(())
    }

    /// The entries of the transpose, grouped by its rows (this matrix's columns); within a row
    /// they come in this matrix's row order, entries of one row in their stored order.
    pub fn transposed(&self) -> Result<RowEntries> {
        let (n, m) = (self.ncols, self.nrows);
        let nnz = self.cols.len();
        // Each slice of rows counts and then scatters its own entries, slice after slice within
        // a column, so the order does not depend on timing.
        let slices = rayon::current_num_threads().clamp(1, 4);
        let bounds: Vec<usize> = (0..=slices).map(|s| self.row_at_share(s, slices)).collect();
        let mut counts: Vec<Vec<u64>> = (0..slices)
            .into_par_iter()
            .map(|s| {
                let mut c = vec![0u64; n];
                let range = self.ptr[bounds[s]] as usize..self.ptr[bounds[s + 1]] as usize;
                for &j in &self.cols[range] {
                    c[j as usize] += 1;
                }
                c
            })
            .collect();
        let mut ptr = vec![0u64; n + 1];
        for j in 0..n {
            let mut at = ptr[j];
            for c in counts.iter_mut() {
                let here = c[j];
                c[j] = at;
                at += here;
            }
            ptr[j + 1] = at;
        }
        crate::interrupt::check()?;
        let mut cols: Vec<u32> = crate::mem::try_with_capacity(nnz, "the transposed entries")?;
        let mut values: Option<Vec<f64>> = match &self.values {
            Some(_) => Some(crate::mem::try_with_capacity(nnz, "the transposed values")?),
            None => None,
        };
        {
            let out_cols = crate::mem::SharedSlice::new(&mut cols.spare_capacity_mut()[..nnz]);
            let out_vals = values
                .as_mut()
                .map(|v| crate::mem::SharedSlice::new(&mut v.spare_capacity_mut()[..nnz]));
            counts
                .into_par_iter()
                .enumerate()
                .for_each(|(s, mut cursor)| {
                    for i in bounds[s]..bounds[s + 1] {
                        for k in self.ptr[i] as usize..self.ptr[i + 1] as usize {
                            let j = self.cols[k] as usize;
                            let at = cursor[j] as usize;
                            cursor[j] += 1;
                            // SAFETY: each slice writes the positions its own counts reserved
                            // in each column, and every position is reserved once.
                            unsafe {
                                out_cols.write(at, i as u32);
                                if let (Some(o), Some(v)) = (&out_vals, &self.values) {
                                    o.write(at, v[k]);
                                }
                            }
                        }
                    }
                });
        }
        // SAFETY: the slices wrote all `nnz` positions.
        unsafe {
            cols.set_len(nnz);
            if let Some(v) = values.as_mut() {
                v.set_len(nnz);
            }
        }
        Ok(RowEntries {
            nrows: n,
            ncols: m,
            ptr,
            cols,
            values,
        })
    }

    /// The first row of share `s` of `shares` equal shares of the entries.
    fn row_at_share(&self, s: usize, shares: usize) -> usize {
        let target = (self.cols.len() as u128 * s as u128 / shares as u128) as u64;
        self.ptr.partition_point(|&p| p < target).min(self.nrows)
    }

    /// Whether every row's columns strictly increase (no duplicates, nothing to sort).
    fn rows_sorted(&self) -> bool {
        (0..self.nrows)
            .into_par_iter()
            .with_min_len(ROWS_PER_TASK)
            .all(|i| self.row(i).windows(2).all(|w| w[0] < w[1]))
    }

    fn row(&self, i: usize) -> &[u32] {
        &self.cols[self.ptr[i] as usize..self.ptr[i + 1] as usize]
    }

    fn value<T: Scalar>(&self, k: usize) -> T {
        self.values.as_ref().map_or(T::ONE, |v| T::from_f64(v[k]))
    }
}

impl<T: Scalar> Csr<T> {
    /// Builds a matrix from entries grouped by row, as [`Csr::from_edges`] builds it from the
    /// same entries listed as edges (same symmetrization, self-loop and duplicate rules, same
    /// result), without distributing them into rows first.
    pub fn from_row_entries(rows: RowEntries, opts: &BuildOptions) -> Result<Self> {
        rows.check()?;
        let (nrows, ncols) = (rows.nrows, rows.ncols);
        if opts.symmetrize && nrows != ncols {
            return Err(Error::Invalid(format!(
                "cannot symmetrize a {nrows} x {ncols} matrix: it is not square"
            )));
        }
        crate::interrupt::check()?;
        let sorted = rows.rows_sorted();
        if sorted && !opts.symmetrize && !opts.drop_self_loops {
            // Already a CSR matrix: the arrays are taken over as they are.
            let values = match &rows.values {
                Some(v) => v.par_iter().map(|&w| T::from_f64(w)).collect(),
                None => vec![T::ONE; rows.cols.len()],
            };
            return Ok(Csr {
                nrows,
                ncols,
                row_ptr: rows.ptr,
                col_idx: rows.cols,
                values,
            });
        }
        let mirror = if opts.symmetrize {
            Some(rows.transposed()?)
        } else {
            None
        };
        crate::interrupt::check()?;
        // The mirror of sorted rows is sorted: a row of each is then merged, not sorted.
        let merge = sorted && mirror.is_some();
        let blocks: Vec<Block<T>> = (0..nrows.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|b| {
                let first = b * ROWS_PER_TASK;
                let last = (first + ROWS_PER_TASK).min(nrows);
                finish_rows(&rows, mirror.as_ref(), first..last, opts, merge)
            })
            .collect();
        crate::interrupt::check()?;
        assemble(nrows, ncols, blocks)
    }
}

/// The finished rows of one task: their lengths, columns and values.
struct Block<T> {
    lens: Vec<u64>,
    cols: Vec<u32>,
    values: Vec<T>,
}

/// Finishes the rows in `range`: each row's entries (and its mirror's), loops dropped as
/// `opts` says, sorted by column (ties by value) and combined.
fn finish_rows<T: Scalar>(
    rows: &RowEntries,
    mirror: Option<&RowEntries>,
    range: std::ops::Range<usize>,
    opts: &BuildOptions,
    merge: bool,
) -> Block<T> {
    let mut block = Block {
        lens: Vec::with_capacity(range.len()),
        cols: Vec::new(),
        values: Vec::new(),
    };
    let mut row: Vec<(u32, T)> = Vec::new();
    for i in range {
        let keep = |c: u32| !(opts.drop_self_loops && c as usize == i);
        let own = rows.ptr[i] as usize..rows.ptr[i + 1] as usize;
        if let (true, Some(m)) = (merge, mirror) {
            let before = block.cols.len();
            merge_row(
                (rows, own),
                (m, m.ptr[i] as usize..m.ptr[i + 1] as usize),
                i,
                opts,
                &mut block,
            );
            block.lens.push((block.cols.len() - before) as u64);
            continue;
        }
        row.clear();
        row.extend(
            own.filter(|&k| keep(rows.cols[k]))
                .map(|k| (rows.cols[k], rows.value::<T>(k))),
        );
        if let Some(m) = mirror {
            row.extend(
                (m.ptr[i] as usize..m.ptr[i + 1] as usize)
                    .filter(|&k| keep(m.cols[k]))
                    .map(|k| (m.cols[k], m.value::<T>(k))),
            );
        }
        sort_row(&mut row);
        let kept = combine_sorted(&mut row, opts.duplicates);
        block.lens.push(kept as u64);
        block.cols.extend(row[..kept].iter().map(|e| e.0));
        block.values.extend(row[..kept].iter().map(|e| e.1));
    }
    block
}

/// Appends row `i` to `block`: the entries `a` of one side and `b` of the other, each strictly
/// increasing by column, merged by column, self loops dropped as `opts` says, and a column both
/// hold combined as [`combine_sorted`] combines it (the smaller value first).
fn merge_row<T: Scalar>(
    (ra, a): (&RowEntries, std::ops::Range<usize>),
    (rb, b): (&RowEntries, std::ops::Range<usize>),
    i: usize,
    opts: &BuildOptions,
    block: &mut Block<T>,
) {
    let (ca, cb) = (&ra.cols[a.clone()], &rb.cols[b.clone()]);
    let va = ra.values.as_ref().map(|v| &v[a]);
    let vb = rb.values.as_ref().map(|v| &v[b]);
    let value = |v: Option<&[f64]>, k: usize| v.map_or(T::ONE, |v| T::from_f64(v[k]));
    let (mut x, mut y) = (0, 0);
    loop {
        let c = match (ca.get(x), cb.get(y)) {
            (Some(&p), Some(&q)) => p.min(q),
            (Some(&p), None) => p,
            (None, Some(&q)) => q,
            (None, None) => break,
        };
        let from_a = ca.get(x) == Some(&c);
        let from_b = cb.get(y) == Some(&c);
        let pa = from_a.then(|| value(va, x));
        let pb = from_b.then(|| value(vb, y));
        x += from_a as usize;
        y += from_b as usize;
        if opts.drop_self_loops && c as usize == i {
            continue;
        }
        match (pa, pb) {
            (Some(p), Some(q)) => {
                let (lo, hi) = if q.total_cmp(&p).is_lt() {
                    (q, p)
                } else {
                    (p, q)
                };
                match opts.duplicates {
                    Duplicates::Keep => {
                        block.cols.extend([c, c]);
                        block.values.extend([lo, hi]);
                    }
                    Duplicates::Max => {
                        block.cols.push(c);
                        block.values.push(lo.max_of(hi));
                    }
                    Duplicates::Sum => {
                        block.cols.push(c);
                        block.values.push(lo + hi);
                    }
                }
            }
            (Some(p), None) | (None, Some(p)) => {
                block.cols.push(c);
                block.values.push(p);
            }
            (None, None) => {}
        }
    }
}

/// Joins the tasks' rows into one matrix.
fn assemble<T: Scalar>(nrows: usize, ncols: usize, blocks: Vec<Block<T>>) -> Result<Csr<T>> {
    let mut row_ptr: Vec<u64> = crate::mem::try_with_capacity(nrows + 1, "the row offsets")?;
    row_ptr.push(0);
    let mut at = 0;
    for b in &blocks {
        for &len in &b.lens {
            at += len;
            row_ptr.push(at);
        }
    }
    let nnz = at as usize;
    let mut col_idx: Vec<u32> = crate::mem::try_with_capacity(nnz, "the matrix's columns")?;
    let mut values: Vec<T> = crate::mem::try_with_capacity(nnz, "the matrix's values")?;
    {
        let mut cols_out = &mut col_idx.spare_capacity_mut()[..nnz];
        let mut vals_out = &mut values.spare_capacity_mut()[..nnz];
        let mut parts = Vec::with_capacity(blocks.len());
        for b in &blocks {
            let (c, c_rest) = cols_out.split_at_mut(b.cols.len());
            let (v, v_rest) = vals_out.split_at_mut(b.values.len());
            parts.push((b, c, v));
            cols_out = c_rest;
            vals_out = v_rest;
        }
        parts.into_par_iter().for_each(|(b, c, v)| {
            for (o, &x) in c.iter_mut().zip(&b.cols) {
                o.write(x);
            }
            for (o, &x) in v.iter_mut().zip(&b.values) {
                o.write(x);
            }
        });
    }
    // SAFETY: the blocks' entries fill all `nnz` positions.
    unsafe {
        col_idx.set_len(nnz);
        values.set_len(nnz);
    }
    Ok(Csr {
        nrows,
        ncols,
        row_ptr,
        col_idx,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edges::EdgeList;
    use proptest::prelude::*;

    /// The same entries as an edge list, in row order.
    fn as_edges(r: &RowEntries) -> EdgeList {
        let mut edges = Vec::new();
        for i in 0..r.nrows {
            for k in r.ptr[i]..r.ptr[i + 1] {
                edges.push((i as u32, r.cols[k as usize]));
            }
        }
        EdgeList {
            nrows: r.nrows,
            ncols: r.ncols,
            edges,
            weights: r.values.clone(),
        }
    }

    fn rows_of(n: usize, m: usize, per_row: &[Vec<(u32, f64)>], weighted: bool) -> RowEntries {
        let mut r = RowEntries {
            nrows: n,
            ncols: m,
            ptr: vec![0],
            ..Default::default()
        };
        let mut vals = Vec::new();
        for row in per_row.iter().take(n) {
            for &(c, v) in row {
                r.cols.push(c % m as u32);
                vals.push(v);
            }
            r.ptr.push(r.cols.len() as u64);
        }
        while r.ptr.len() < n + 1 {
            r.ptr.push(r.cols.len() as u64);
        }
        r.values = weighted.then_some(vals);
        r
    }

    #[test]
    fn a_sorted_matrix_is_taken_over() {
        let r = rows_of(
            3,
            3,
            &[vec![(0, 2.0), (2, 1.0)], vec![], vec![(1, 3.0)]],
            true,
        );
        let m = Csr::<f64>::from_row_entries(r.clone(), &BuildOptions::default()).unwrap();
        assert_eq!(
            m,
            Csr::from_edges(&as_edges(&r), &BuildOptions::default()).unwrap()
        );
        assert_eq!(m.nnz(), 3);
    }

    #[test]
    fn bad_entries_and_nonsquare_symmetrize_are_refused() {
        let mut r = rows_of(2, 2, &[vec![(1, 1.0)], vec![]], false);
        r.cols[0] = 5;
        assert!(Csr::<f32>::from_row_entries(r, &BuildOptions::default()).is_err());
        let r = rows_of(2, 3, &[vec![(1, 1.0)], vec![]], false);
        let sym = BuildOptions {
            symmetrize: true,
            ..Default::default()
        };
        let e = Csr::<f32>::from_row_entries(r, &sym)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not square"), "{e}");
    }

    proptest! {
        #[test]
        fn same_matrix_as_from_edges(
            n in 1usize..12,
            m in 1usize..12,
            per_row in proptest::collection::vec(
                proptest::collection::vec((0u32..12, -2i32..3), 0..8), 0..12),
            weighted in any::<bool>(),
            sorted in any::<bool>(),
            sym in any::<bool>(),
            loops in any::<bool>(),
            dup in 0usize..3,
        ) {
            let m = if sym { n } else { m };
            let mut per_row: Vec<Vec<(u32, f64)>> = per_row
                .into_iter()
                .map(|r| r.into_iter().map(|(c, v)| (c % m as u32, v as f64 * 0.5)).collect())
                .collect();
            if sorted {
                for r in per_row.iter_mut() {
                    r.sort_by_key(|e| e.0);
                    r.dedup_by_key(|e| e.0);
                }
            }
            let r = rows_of(n, m, &per_row, weighted);
            let opts = BuildOptions {
                symmetrize: sym,
                drop_self_loops: loops,
                duplicates: [Duplicates::Sum, Duplicates::Max, Duplicates::Keep][dup],
            };
            let want = Csr::<f64>::from_edges(&as_edges(&r), &opts).unwrap();
            prop_assert_eq!(Csr::<f64>::from_row_entries(r, &opts).unwrap(), want);
        }
    }
}
