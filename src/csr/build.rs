//! Building a CSR matrix from an edge list in parallel: entries are distributed into buckets
//! of consecutive rows, each bucket is counting-sorted by row in cache, each row sorted by
//! column and its duplicates combined.

use super::{BuildOptions, Csr, Duplicates};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::mem::SharedSlice;
use crate::scalar::Scalar;
use rayon::prelude::*;

impl<T: Scalar> Csr<T> {
    /// Builds a matrix from an edge list in parallel: entries are first distributed into buckets
    /// of consecutive rows (each thread writing its own stretch of every bucket, so no atomics),
    /// then each bucket is counting-sorted by row within its own small, cache-resident region,
    /// each row is sorted by column (ties by value, so sums are the same whatever the thread
    /// count), and duplicates are combined. An unweighted list moves only column indices (every
    /// value is one) until the values are written at the end.
    pub fn from_edges(el: &EdgeList, opts: &BuildOptions) -> Result<Self> {
        // Buckets of about this many entries stay in cache while they are sorted.
        Self::from_edges_in_buckets(el, opts, 1 << 17)
    }

    /// [`Csr::from_edges`] with buckets of about `bucket_entries` entries (at least 1). The
    /// result does not depend on it; tests and fuzzing use tiny buckets to have many on small
    /// inputs.
    pub fn from_edges_in_buckets(
        el: &EdgeList,
        opts: &BuildOptions,
        bucket_entries: usize,
    ) -> Result<Self> {
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
        crate::interrupt::check()?;
        let dup = opts.duplicates;
        let (new_ptr, col_idx, values) = match &el.weights {
            None => {
                let b = bucket_rows(
                    el,
                    opts,
                    bucket_entries,
                    |v, _| v,
                    |row: &mut [u32]| {
                        row.sort_unstable();
                        match dup {
                            Duplicates::Keep => row.len(),
                            _ if row.is_empty() => 0,
                            _ => 1 + row.windows(2).filter(|w| w[0] != w[1]).count(),
                        }
                    },
                )?;
                gather_unweighted(b, dup)?
            }
            Some(w) => {
                let b = bucket_rows(
                    el,
                    opts,
                    bucket_entries,
                    |v, k| (v, T::from_f64(w[k])),
                    |row: &mut [(u32, T)]| {
                        sort_row(row);
                        combine_sorted(row, dup)
                    },
                )?;
                gather_weighted(b)?
            }
        };
        crate::interrupt::check()?;
        Ok(Csr {
            nrows,
            ncols,
            row_ptr: new_ptr,
            col_idx,
            values,
        })
    }
}

/// An edge list's entries grouped by row: row `i` holds `items[start[i]..start[i + 1]]`, of
/// which the first `kept[i]` remain after its row was finished (sorted, maybe combined).
struct Bucketed<P> {
    items: Vec<P>,
    start: Vec<u64>,
    kept: Vec<u64>,
    /// A spent `u32` buffer of capacity at least `items.len()`, for the column indices.
    spare: Vec<u32>,
}

/// How the rows are cut into buckets and the edge list into slices (one per task).
struct Layout {
    /// Buckets of `1 << shift` consecutive rows.
    shift: u32,
    /// Rows per bucket.
    rows: usize,
    /// Buckets in all.
    count: usize,
    /// Edges per slice of the edge list.
    slice_len: usize,
}

/// Distributes the entries of `el` (mirrored and filtered as `opts` says; `make(col, k)` builds
/// the item of edge `k`) into row order, then runs `finish_row` on every row, which returns how
/// many of its items to keep.
fn bucket_rows<P: Copy + Send + Sync>(
    el: &EdgeList,
    opts: &BuildOptions,
    bucket_entries: usize,
    make: impl Fn(u32, usize) -> P + Sync,
    finish_row: impl Fn(&mut [P]) -> usize + Sync,
) -> Result<Bucketed<P>> {
    let nrows = el.nrows;
    // Buckets of 2^shift consecutive rows, about `bucket_entries` entries each.
    let n_edges = el.edges.len();
    let wanted = (n_edges * (1 + opts.symmetrize as usize) / bucket_entries.max(1)).max(1);
    let shift = (nrows / wanted)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(31);
    let layout = Layout {
        shift,
        rows: 1usize << shift,
        count: nrows.div_ceil(1usize << shift),
        slice_len: n_edges
            .div_ceil(4 * rayon::current_num_threads().max(1))
            .max(1 << 14),
    };
    let (mut cursors, bucket_ptr) = count_buckets(el, opts, &layout);
    let (mut items, mut local_rows) = scatter(el, opts, &layout, &mut cursors, &bucket_ptr, make)?;
    let (start, kept) = sort_buckets(
        &mut items,
        &mut local_rows,
        &bucket_ptr,
        nrows,
        layout.rows,
        finish_row,
    )?;
    Ok(Bucketed {
        items,
        start,
        kept,
        spare: local_rows,
    })
}

/// Whether edge `(u, v)` is kept (not a self loop that is dropped).
fn keep(opts: &BuildOptions, u: u32, v: u32) -> bool {
    !(opts.drop_self_loops && u == v)
}

/// Whether edge `(u, v)` is also entered as `(v, u)`: every kept entry when symmetrizing, a
/// self loop too, so that summing gives A + Aᵀ (its diagonal doubled).
fn mirror(opts: &BuildOptions) -> bool {
    opts.symmetrize
}

/// Step 1: the entries of each bucket in each slice of the edge list, turned into each slice's
/// write cursor per bucket, and the buckets' offsets (`count + 1` of them). Bucket b holds
/// slice 0's entries, then slice 1's, ...: file order within a bucket, so the result does not
/// depend on the slicing.
fn count_buckets(el: &EdgeList, opts: &BuildOptions, layout: &Layout) -> (Vec<Vec<u64>>, Vec<u64>) {
    let (shift, n_buckets) = (layout.shift, layout.count);
    let mut cursors: Vec<Vec<u64>> = el
        .edges
        .par_chunks(layout.slice_len)
        .map(|part| {
            let mut h = vec![0u64; n_buckets];
            for &(u, v) in part {
                if keep(opts, u, v) {
                    h[(u >> shift) as usize] += 1;
                    if mirror(opts) {
                        h[(v >> shift) as usize] += 1;
                    }
                }
            }
            h
        })
        .collect();
    let mut bucket_ptr = vec![0u64; n_buckets + 1];
    let mut total = 0u64;
    for b in 0..n_buckets {
        bucket_ptr[b] = total;
        for h in cursors.iter_mut() {
            let c = h[b];
            h[b] = total;
            total += c;
        }
    }
    bucket_ptr[n_buckets] = total;
    (cursors, bucket_ptr)
}

/// Step 2: the items and their rows within the bucket, in bucket order.
fn scatter<P: Copy + Send + Sync>(
    el: &EdgeList,
    opts: &BuildOptions,
    layout: &Layout,
    cursors: &mut [Vec<u64>],
    bucket_ptr: &[u64],
    make: impl Fn(u32, usize) -> P + Sync,
) -> Result<(Vec<P>, Vec<u32>)> {
    let (shift, slice_len) = (layout.shift, layout.slice_len);
    let mask = (layout.rows - 1) as u32;
    let total = bucket_ptr[layout.count] as usize;
    let mut items: Vec<P> = crate::mem::try_with_capacity(total, "the matrix's entries")?;
    let mut local_rows: Vec<u32> = crate::mem::try_with_capacity(total, "the matrix's entries")?;
    crate::mem::advise_huge_pages(&mut items);
    crate::mem::advise_huge_pages(&mut local_rows);
    {
        let out = SharedSlice::new(items.spare_capacity_mut());
        let rows_out = SharedSlice::new(local_rows.spare_capacity_mut());
        el.edges
            .par_chunks(slice_len)
            .zip(cursors.par_iter_mut())
            .enumerate()
            .for_each(|(s, (part, cur))| {
                let base = s * slice_len;
                for (k, &(u, v)) in part.iter().enumerate() {
                    if keep(opts, u, v) {
                        let c = &mut cur[(u >> shift) as usize];
                        let at = *c as usize;
                        *c += 1;
                        // SAFETY: slice s owns positions [its cursor start, + its count) of
                        // every bucket, and writes each once.
                        unsafe {
                            out.write(at, make(v, base + k));
                            rows_out.write(at, u & mask);
                        }
                        if mirror(opts) {
                            let c = &mut cur[(v >> shift) as usize];
                            let at = *c as usize;
                            *c += 1;
                            unsafe {
                                out.write(at, make(u, base + k));
                                rows_out.write(at, v & mask);
                            }
                        }
                    }
                }
            });
    }
    // SAFETY: the histogram and scatter passes visit the same entries, so all `total`
    // positions were written.
    unsafe {
        items.set_len(total);
        local_rows.set_len(total);
    }
    Ok((items, local_rows))
}

/// Step 3: in each bucket, a counting sort by row (through a scratch copy of the bucket), then
/// `finish_row` on each row. Returns each row's start in `items` (`nrows + 1` offsets) and how
/// many of its items it kept.
fn sort_buckets<P: Copy + Send + Sync>(
    items: &mut [P],
    local_rows: &mut [u32],
    bucket_ptr: &[u64],
    nrows: usize,
    bucket_rows: usize,
    finish_row: impl Fn(&mut [P]) -> usize + Sync,
) -> Result<(Vec<u64>, Vec<u64>)> {
    let total = items.len();
    let mut start = crate::mem::try_filled(nrows + 1, 0u64, "the matrix's row offsets")?;
    let mut kept = crate::mem::try_filled(nrows, 0u64, "the matrix's row offsets")?;
    let lens: Vec<usize> = bucket_ptr
        .windows(2)
        .map(|w| (w[1] - w[0]) as usize)
        .collect();
    let regions = crate::mem::split_by_lengths(items, &lens);
    let row_regions = crate::mem::split_by_lengths(local_rows, &lens);
    start[..nrows]
        .par_chunks_mut(bucket_rows)
        .zip(kept.par_chunks_mut(bucket_rows))
        .zip(regions)
        .zip(row_regions)
        .enumerate()
        .with_max_len(1)
        .for_each_init(Vec::new, |scratch, (b, (((ptr, kept), region), rows))| {
            ptr.fill(0);
            for &r in rows.iter() {
                ptr[r as usize] += 1;
            }
            let mut acc = 0u64;
            for p in ptr.iter_mut() {
                let c = *p;
                *p = acc;
                acc += c;
            }
            kept.copy_from_slice(ptr);
            scratch.clear();
            scratch.extend_from_slice(region);
            for (&r, &e) in rows.iter().zip(scratch.iter()) {
                let c = &mut kept[r as usize];
                region[*c as usize] = e;
                *c += 1;
            }
            let len = region.len() as u64;
            for i in 0..ptr.len() {
                let s = ptr[i] as usize;
                let e = ptr.get(i + 1).copied().unwrap_or(len) as usize;
                kept[i] = finish_row(&mut region[s..e]) as u64;
            }
            let base = bucket_ptr[b];
            for p in ptr.iter_mut() {
                *p += base;
            }
        });
    start[nrows] = total as u64;
    Ok((start, kept))
}

/// Offsets from per-row counts.
fn prefix_offsets(kept: &[u64]) -> Vec<u64> {
    let mut ptr = Vec::with_capacity(kept.len() + 1);
    ptr.push(0u64);
    let mut acc = 0u64;
    for k in kept {
        acc += k;
        ptr.push(acc);
    }
    ptr
}

/// Writes the final arrays of an unweighted build: each row's sorted columns, runs of equal
/// columns combined as `dup` says (every value is one).
fn gather_unweighted<T: Scalar>(
    b: Bucketed<u32>,
    dup: Duplicates,
) -> Result<(Vec<u64>, Vec<u32>, Vec<T>)> {
    let new_ptr = prefix_offsets(&b.kept);
    let nnz = new_ptr[b.kept.len()] as usize;
    let mut col_idx = b.spare;
    col_idx.clear();
    let mut values: Vec<T> = crate::mem::try_with_capacity(nnz, "the matrix's values")?;
    crate::mem::advise_huge_pages(&mut values);
    {
        let cols = SharedSlice::new(&mut col_idx.spare_capacity_mut()[..nnz]);
        let vals = SharedSlice::new(values.spare_capacity_mut());
        (0..b.kept.len())
            .into_par_iter()
            .with_min_len(1024)
            .for_each(|i| {
                let src = &b.items[b.start[i] as usize..b.start[i + 1] as usize];
                let mut at = new_ptr[i] as usize;
                let mut s = 0;
                while s < src.len() {
                    let c = src[s];
                    let mut e = s + 1;
                    while e < src.len() && src[e] == c {
                        e += 1;
                    }
                    // SAFETY: row i writes exactly its range [new_ptr[i], new_ptr[i + 1]): one
                    // entry per run, or per item with Keep, as its `kept` count said.
                    if dup == Duplicates::Keep {
                        for _ in s..e {
                            unsafe {
                                cols.write(at, c);
                                vals.write(at, T::ONE);
                            }
                            at += 1;
                        }
                    } else {
                        // The same value the weighted path computes: ONE combined e - s times.
                        let mut v = T::ONE;
                        for _ in s + 1..e {
                            v = if dup == Duplicates::Max {
                                v.max_of(T::ONE)
                            } else {
                                v + T::ONE
                            };
                        }
                        unsafe {
                            cols.write(at, c);
                            vals.write(at, v);
                        }
                        at += 1;
                    }
                    s = e;
                }
            });
    }
    // SAFETY: every row wrote its whole range.
    unsafe {
        col_idx.set_len(nnz);
        values.set_len(nnz);
    }
    Ok((new_ptr, col_idx, values))
}

/// Writes the final arrays of a weighted build: the kept front of each row.
fn gather_weighted<T: Scalar>(b: Bucketed<(u32, T)>) -> Result<(Vec<u64>, Vec<u32>, Vec<T>)> {
    let new_ptr = prefix_offsets(&b.kept);
    let nnz = new_ptr[b.kept.len()] as usize;
    let mut col_idx = b.spare;
    col_idx.clear();
    let mut values: Vec<T> = crate::mem::try_with_capacity(nnz, "the matrix's values")?;
    crate::mem::advise_huge_pages(&mut values);
    if nnz == b.items.len() {
        // Nothing was combined: the items are already in place.
        const PART: usize = 1 << 16;
        col_idx.spare_capacity_mut()[..nnz]
            .par_chunks_mut(PART)
            .zip(values.spare_capacity_mut()[..nnz].par_chunks_mut(PART))
            .zip(b.items.par_chunks(PART))
            .for_each(|((c, v), e)| {
                for ((c, v), &(col, val)) in c.iter_mut().zip(v.iter_mut()).zip(e) {
                    c.write(col);
                    v.write(val);
                }
            });
    } else {
        let cols = SharedSlice::new(&mut col_idx.spare_capacity_mut()[..nnz]);
        let vals = SharedSlice::new(values.spare_capacity_mut());
        (0..b.kept.len())
            .into_par_iter()
            .with_min_len(1024)
            .for_each(|i| {
                let src = &b.items[b.start[i] as usize..][..b.kept[i] as usize];
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
    // SAFETY: both branches wrote all `nnz` positions.
    unsafe {
        col_idx.set_len(nnz);
        values.set_len(nnz);
    }
    Ok((new_ptr, col_idx, values))
}

/// Sorts a row by column, ties by value: by column first (a cheap key), then each run of equal
/// columns by value. The result is the same as one sort by (column, value).
pub(super) fn sort_row<T: Scalar>(row: &mut [(u32, T)]) {
    if row.len() < 2 {
        return;
    }
    row.sort_unstable_by_key(|e| e.0);
    let mut s = 0;
    while s < row.len() {
        let c = row[s].0;
        let mut e = s + 1;
        while e < row.len() && row[e].0 == c {
            e += 1;
        }
        if e - s > 1 {
            row[s..e].sort_unstable_by(|a, b| a.1.total_cmp(&b.1));
        }
        s = e;
    }
}

/// Combines runs of equal columns at the front of a sorted row; returns how many entries remain.
pub(super) fn combine_sorted<T: Scalar>(row: &mut [(u32, T)], dup: Duplicates) -> usize {
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

    /// The reference: a map from (row, col) to the combined value, built one entry at a time.
    fn reference(e: &EdgeList, o: &BuildOptions) -> Vec<(u32, u32, Vec<f64>)> {
        let mut m: std::collections::BTreeMap<(u32, u32), Vec<f64>> = Default::default();
        for (k, &(u, v)) in e.edges.iter().enumerate() {
            if o.drop_self_loops && u == v {
                continue;
            }
            m.entry((u, v)).or_default().push(e.weight(k));
            if o.symmetrize {
                m.entry((v, u)).or_default().push(e.weight(k));
            }
        }
        m.into_iter().map(|((u, v), w)| (u, v, w)).collect()
    }

    proptest::proptest! {
        #[test]
        fn matches_a_simple_reference(
            n in 1usize..40,
            raw in proptest::collection::vec((0u32..40, 0u32..40, -3i8..4), 0..300),
            sym in proptest::bool::ANY,
            loops in proptest::bool::ANY,
            dup in 0u8..3,
            bucket in 1usize..64,
            weighted in proptest::bool::ANY,
        ) {
            let edges: Vec<(u32, u32)> = raw.iter().map(|&(u, v, _)| (u % n as u32, v % n as u32)).collect();
            let w: Vec<f64> = raw.iter().map(|&(_, _, w)| w as f64).collect();
            let e = EdgeList::square(n, edges, weighted.then_some(w));
            let o = BuildOptions {
                symmetrize: sym,
                drop_self_loops: loops,
                duplicates: [Duplicates::Sum, Duplicates::Max, Duplicates::Keep][dup as usize],
            };
            let m: Csr<f64> = Csr::from_edges_in_buckets(&e, &o, bucket).unwrap();
            proptest::prop_assert_eq!(&m, &Csr::from_edges(&e, &o).unwrap());
            let mut expect_ptr = vec![0u64; n + 1];
            let (mut cols, mut vals) = (vec![], vec![]);
            for (u, v, mut ws) in reference(&e, &o) {
                ws.sort_by(f64::total_cmp);
                let combined: Vec<f64> = match o.duplicates {
                    Duplicates::Sum => vec![ws.iter().sum()],
                    Duplicates::Max => vec![ws.iter().copied().fold(f64::MIN, f64::max)],
                    Duplicates::Keep => ws,
                };
                for x in combined {
                    expect_ptr[u as usize + 1] += 1;
                    cols.push(v);
                    vals.push(x);
                }
            }
            for i in 0..n {
                expect_ptr[i + 1] += expect_ptr[i];
            }
            proptest::prop_assert_eq!(m.row_ptr(), &expect_ptr[..]);
            proptest::prop_assert_eq!(m.col_idx(), &cols[..]);
            proptest::prop_assert_eq!(m.values(), &vals[..]);
        }
    }
}
