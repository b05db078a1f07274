//! Rows of `C = A·B` one at a time, for a caller that consumes each row as soon as it is made
//! and never needs `C` whole (MCL prunes every column of `M²` straight away), when every
//! intermediate product is known to be positive.
//!
//! Values are MCL's order-free sums ([`crate::quantized`]): each product `a·b` (in `T`) is
//! rounded up to its quantum and added in `f64`, exactly, so a row's values do not depend on
//! the order of its products, and equal those of every other engine and rank count that sums
//! the same quanta (the GPU's kernels, the batched path of [`crate::mcl`]). Since every product
//! is positive here, sums count quanta: `⌈(a·2⁵²)·b⌉` per product ([`quantized::scaled`]).
//! As mcl does, a row with few products ([`quantized::exact_products`]) makes them exactly, in
//! `f64`, and the others round each to `T` first.
//!
//! Positive products make the value of an entry its mark: a column was touched exactly when its
//! accumulated value is not zero (a positive product's quantum is positive). So the dense
//! accumulator is a bare value array, one add per product (no mark or flag bytes), and its
//! nonzero scan yields the row sorted; rows with few products keep a list of the columns they
//! touch (a column is new when its value is still zero) and sort it.
//!
//! Heavy rows are made [`GROUP`] at a time ([`PositiveRows::rows_together`]): the rows of `A`
//! are merged by `k`, each row of `B` is read once for all the rows that have its `k`, and every
//! product goes into an interleaved accumulator (`GROUP` values per column, one vector add for
//! all the rows; a row without that `k` adds the quantum of `0·v`, zero). On power-law graphs
//! consecutive heavy rows share many `k`, so this reads `B` 2-3 times less, which is what bounds
//! the one-row-at-a-time loop.

use super::accum::prefetch_all;
use super::accum::RowProduct;
use super::compact::{self, Lane, SLACK};
use crate::csr::{Csr, CsrRef};
use crate::quantized;
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::marker::PhantomData;
use std::ops::Range;

/// A row takes the dense accumulator when `min(products, columns) × DENSE_RATIO ≥ columns`:
/// the scan of all columns is then small next to the products, and cheaper than sorting the
/// touched columns.
const DENSE_RATIO: u64 = 16;

/// Rows made together by [`PositiveRows::rows_together`].
pub(crate) const GROUP: usize = 4;

/// True when a row with `products` products over `ncols` columns takes the dense accumulator
/// (and may be made in a group).
pub(crate) fn is_dense(products: u64, ncols: usize) -> bool {
    products.min(ncols as u64) * DENSE_RATIO >= ncols as u64
}

/// True when a row with `products` products over `ncols` columns may be made in a group by
/// [`PositiveRows::rows_together`]: it takes the dense accumulator and rounds its products.
pub(crate) fn groupable(products: u64, ncols: usize) -> bool {
    is_dense(products, ncols) && !quantized::exact_products(products, ncols)
}

/// True when every intermediate product `A[i,k]·B[k,j]` is positive in `T`'s arithmetic: every
/// stored value of both operands is positive (no zeros, no NaN) and the product of their
/// smallest values does not underflow to zero. (Multiplication is monotone, so no product is
/// smaller than that one.)
pub(crate) fn products_are_positive<T: Scalar>(a: CsrRef<'_, T>, b: CsrRef<'_, T>) -> bool {
    let smallest = |m: CsrRef<'_, T>| -> Option<T> {
        m.values()
            .par_iter()
            .with_min_len(1 << 16)
            .map(|&v| if v > T::ZERO { Some(v) } else { None })
            .try_reduce(|| T::ONE, |x, y| Some(if y < x { y } else { x }))
    };
    match (smallest(a), smallest(b)) {
        (Some(x), Some(y)) => x * y > T::ZERO,
        _ => false,
    }
}

/// A per-thread accumulator for [`PositiveRows::row`]. Between rows every value is zero.
pub(crate) struct PositiveRows<T> {
    /// One sum per column, in quanta ([`quantized::count`]), rounded up to a power of two so
    /// that `c & mask` is in bounds.
    acc: Vec<f64>,
    mask: usize,
    ncols: usize,
    /// Columns touched by a sparse row.
    touched: Vec<u32>,
    /// The row made last: `ncols + SLACK` long, the first `len` entries valid; its sums, then
    /// its values.
    cols: Vec<u32>,
    sums: Vec<f64>,
    vals: Vec<T>,
    /// The interleaved accumulator of a group (allocated on first use): `GROUP` sums per
    /// column, zero between groups.
    group: Slots<f64>,
    /// The group's entries of `A`: `(k, row in group, value)`, then merged by `k`.
    entries: Vec<(u32, u32, T)>,
    merged: Vec<(u32, [T; GROUP])>,
    /// Rows of the group: made together when there are several ([`PositiveRows::together`]),
    /// else the one row is made on demand.
    rows: Vec<(usize, u64)>,
    /// The rows of a group made together, drained from `group`: columns, sums and length
    /// of each (allocated on first use, `ncols + SLACK` long).
    drained: Vec<Lane<f64>>,
}

impl<T: Scalar> PositiveRows<T> {
    /// An accumulator for products with `ncols` columns.
    pub(crate) fn new(ncols: usize) -> Self {
        let width = ncols.max(1).next_power_of_two();
        PositiveRows {
            acc: vec![0.0; width],
            mask: width - 1,
            ncols,
            touched: Vec::new(),
            cols: vec![0; ncols + SLACK],
            sums: vec![0.0; ncols + SLACK],
            vals: vec![T::ZERO; ncols + SLACK],
            group: Slots::zeroed(0),
            entries: Vec::new(),
            merged: Vec::new(),
            rows: Vec::new(),
            drained: Vec::new(),
        }
    }

    /// Row `i` of `A·B`, sorted by column, valid until the next call. `products` is the row's
    /// number of intermediate products ([`super::row_products`]). Every product must be
    /// positive ([`products_are_positive`]) and `B` must have the accumulator's column count;
    /// otherwise entries whose value is zero are missed (never unsafe).
    pub(crate) fn row(
        &mut self,
        a: CsrRef<'_, T>,
        b: CsrRef<'_, T>,
        i: usize,
        products: u64,
    ) -> (&[u32], &[T]) {
        debug_assert_eq!(b.ncols(), self.ncols);
        let len = if quantized::exact_products(products, self.ncols) {
            self.row_counted(a, b, i, products, quantized::count_exact)
        } else {
            self.row_counted(a, b, i, products, |x, v| quantized::count(x * v))
        };
        values(&self.sums[..len], &mut self.vals[..len]);
        (&self.cols[..len], &self.vals[..len])
    }

    /// Makes row `i` into `cols` and `sums`, each product counted by `count` from its scaled
    /// factor and its entry of `B`; returns its length.
    #[inline(always)]
    fn row_counted(
        &mut self,
        a: CsrRef<'_, T>,
        b: CsrRef<'_, T>,
        i: usize,
        products: u64,
        count: impl Fn(T, T) -> f64,
    ) -> usize {
        let (ac, av) = a.row(i);
        if ac.len() == 1 {
            // One row of B, scaled: already sorted.
            let (bc, bv) = b.row(ac[0] as usize);
            let x = quantized::scaled(av[0]);
            for (o, (&c, &v)) in bc.iter().zip(bv).enumerate() {
                self.cols[o] = c;
                self.sums[o] = count(x, v);
            }
            bc.len()
        } else if is_dense(products, self.ncols) {
            self.dense(RowProduct::prefetching_whole_rows(a, b, i), count)
        } else {
            self.sparse(RowProduct::new(a, b, i), count)
        }
    }

    /// Makes rows `rows` of `A·B` (at most [`GROUP`], with their product counts) together,
    /// reading each row of `B` once for all of them; [`PositiveRows::take`] then hands them
    /// out, in order. Each is bitwise what [`PositiveRows::row`] makes. Rows are made together
    /// even when they share few `k`: on s16's MCL (Zen 5) that beat making rows sharing under
    /// 1.1 or 1.6 entries per distinct `k` one by one, whose scalar adds still read `B` once
    /// per product and whose dense scans cover every column per row. Rows made together must be
    /// [`groupable`] (a lone row need not be).
    ///
    /// `narrow`, when given, is `B`'s column indices as `u16` (for `B` with at most 2¹⁶
    /// columns: [`narrow_columns`]), read instead of the `u32` ones: a quarter fewer bytes per
    /// entry of `B`, whose reads bound this loop.
    pub(crate) fn rows_together(
        &mut self,
        a: CsrRef<'_, T>,
        b: CsrRef<'_, T>,
        narrow: Option<&[u16]>,
        rows: &[(usize, u64)],
    ) {
        assert!(rows.len() <= GROUP);
        debug_assert_eq!(b.ncols(), self.ncols);
        self.rows.clear();
        self.rows.extend_from_slice(rows);
        if !self.together() {
            return;
        }
        // The group's products are rounded: a row whose products are exact would be wrong.
        assert!(rows.iter().all(|&(_, p)| groupable(p, self.ncols)));
        let entries = &mut self.entries;
        entries.clear();
        for (g, &(i, _)) in rows.iter().enumerate() {
            let (ac, av) = a.row(i);
            entries.extend(ac.iter().zip(av).map(|(&k, &x)| (k, g as u32, x)));
        }
        // By k, then by row: each row's entries are already sorted by k, and a stable sort
        // merges such runs (in the order of the rows) instead of sorting from scratch.
        entries.sort_by_key(|e| e.0);
        self.merged.clear();
        for &(k, g, x) in entries.iter() {
            if self.merged.last().map(|m| m.0) != Some(k) {
                self.merged.push((k, [T::ZERO; GROUP]));
            }
            if let Some(m) = self.merged.last_mut() {
                m.1[g as usize] = quantized::scaled(x);
            }
        }
        if self.group.len() < self.acc.len() {
            self.group = Slots::zeroed(self.acc.len());
        }
        let group = self.group.as_mut_slice();
        match narrow {
            Some(cols) => {
                assert_eq!(cols.len(), b.nnz());
                accumulate_group(group, self.mask, &self.merged, b, cols)
            }
            None => accumulate_group(group, self.mask, &self.merged, b, b.col_idx()),
        }
        self.drain_group(rows.len());
    }

    /// Moves the group's rows out of the interleaved accumulator into `drained` (and zeroes
    /// it), a tile of columns at a time: the tile's lanes are compacted while it is in L1
    /// ([`compact::lanes_nonzero`]), so the accumulator is read from L2 or L3 once, not once per
    /// row.
    fn drain_group(&mut self, len: usize) {
        let n = self.ncols;
        if self.drained.len() < GROUP {
            self.drained = (0..GROUP)
                .map(|_| (vec![0; n + SLACK], vec![0.0; n + SLACK], 0))
                .collect();
        }
        for d in &mut self.drained {
            d.2 = 0;
        }
        for (t, tile) in self.group.as_mut_slice()[..n].chunks_mut(TILE).enumerate() {
            let base = (t * TILE) as u32;
            compact::lanes_nonzero(tile, base, &mut self.drained[..len]);
            tile.fill([0.0; GROUP]);
        }
    }

    /// Whether the last group's rows were made together: every group of two or more is.
    fn together(&self) -> bool {
        self.rows.len() > 1
    }

    /// Row `g` of the group [`PositiveRows::rows_together`] made (`g` counting from 0, in
    /// order: each row once), sorted by column, valid until the next call.
    pub(crate) fn take(&mut self, a: CsrRef<'_, T>, b: CsrRef<'_, T>, g: usize) -> (&[u32], &[T]) {
        let (i, products) = self.rows[g];
        if !self.together() {
            return self.row(a, b, i, products);
        }
        let (cols, sums, len) = &self.drained[g];
        values(&sums[..*len], &mut self.vals[..*len]);
        (&cols[..*len], &self.vals[..*len])
    }

    /// Sums the row in the value array, then scans every column for nonzero values.
    #[inline(always)]
    fn dense(&mut self, row: RowProduct<T>, count: impl Fn(T, T) -> f64) -> usize {
        let (acc, mask) = (&mut self.acc[..], self.mask);
        assert!(acc.len() > mask);
        // SAFETY: `c & mask <= mask < acc.len()`.
        row.for_each_factors(quantized::scaled(T::ONE), |c, x, v| unsafe {
            *acc.get_unchecked_mut(c as usize & mask) += count(x, v)
        });
        let n = self.ncols;
        let o = compact::nonzero(&self.acc[..n], 0, &mut self.cols, &mut self.sums, 0);
        self.acc[..n].fill(0.0);
        o
    }

    /// Sums the row in the value array, listing each column when its value is still zero,
    /// then sorts the list and gathers it.
    #[inline(always)]
    fn sparse(&mut self, row: RowProduct<T>, count: impl Fn(T, T) -> f64) -> usize {
        let (acc, mask, touched) = (&mut self.acc[..], self.mask, &mut self.touched);
        touched.clear();
        row.for_each_factors(quantized::scaled(T::ONE), |c, x, v| {
            let j = c as usize & mask;
            let s = acc[j];
            if s == 0.0 {
                touched.push(c);
            }
            acc[j] = s + count(x, v);
        });
        touched.sort_unstable();
        for (o, &c) in touched.iter().enumerate() {
            let j = c as usize & mask;
            self.cols[o] = c;
            self.sums[o] = acc[j];
            acc[j] = 0.0;
        }
        touched.len()
    }
}

/// Positions `0..products.len()` cut into consecutive groups of about `target` products each
/// (a group holds at least one).
pub(crate) fn groups(products: &[u64], target: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut acc) = (0usize, 0u64);
    for (i, &p) in products.iter().enumerate() {
        acc += p + 1;
        if acc >= target {
            out.push(start..i + 1);
            start = i + 1;
            acc = 0;
        }
    }
    if start < products.len() {
        out.push(start..products.len());
    }
    out
}

/// Rows of `A·B` with MCL's order-free sums ([`crate::quantized`]) whatever the products'
/// signs: a column is listed when first touched (a mark per column, not its value), so an entry
/// whose products are zero is kept, as every engine keeps it. The batched path of MCL's
/// expansion, for when [`PositiveRows`] does not apply.
pub(crate) struct MarkedRows {
    acc: Vec<f64>,
    marked: Vec<bool>,
    touched: Vec<u32>,
}

impl MarkedRows {
    /// An accumulator for products with `ncols` columns.
    pub(crate) fn new(ncols: usize) -> Self {
        MarkedRows {
            acc: vec![0.0; ncols],
            marked: vec![false; ncols],
            touched: Vec::new(),
        }
    }

    /// Appends row `i` of `a·b`, sorted by column, to `cols`/`vals`; its products are made
    /// exactly when `exact` ([`quantized::exact_products`]).
    pub(crate) fn row<T: Scalar>(
        &mut self,
        a: CsrRef<'_, T>,
        b: CsrRef<'_, T>,
        i: usize,
        exact: bool,
        cols: &mut Vec<u32>,
        vals: &mut Vec<T>,
    ) {
        let (acc, marked, touched) = (&mut self.acc, &mut self.marked, &mut self.touched);
        touched.clear();
        RowProduct::new(a, b, i).for_each_factors(T::ONE, |c, x, v| {
            let j = c as usize;
            if !marked[j] {
                marked[j] = true;
                touched.push(c);
            }
            acc[j] += if exact {
                quantized::exact_product(x, v)
            } else {
                quantized::product(x, v)
            };
        });
        touched.sort_unstable();
        for &c in touched.iter() {
            let j = c as usize;
            cols.push(c);
            vals.push(T::from_f64(acc[j]));
            acc[j] = 0.0;
            marked[j] = false;
        }
    }
}

/// Rows `rows` of `a·b` with MCL's order-free sums, as a matrix (its row 0 is row
/// `rows.start`), made in parallel; `products[i]` is row `i`'s product count. Values and
/// structure equal [`PositiveRows`]'s where that applies.
pub(crate) fn marked_product<T: Scalar>(
    a: CsrRef<'_, T>,
    b: CsrRef<'_, T>,
    rows: Range<usize>,
    products: &[u64],
) -> Csr<T> {
    let threads = rayon::current_num_threads().max(1) as u64;
    let total: u64 = products[rows.clone()].iter().map(|&p| p + 1).sum();
    let target = total.div_ceil(threads * 8).max(1);
    let runs: Vec<Range<usize>> = groups(&products[rows.clone()], target)
        .into_iter()
        .map(|g| rows.start + g.start..rows.start + g.end)
        .collect();
    let parts: Vec<(Vec<u64>, Vec<u32>, Vec<T>)> = runs
        .into_par_iter()
        .map_init(
            || MarkedRows::new(b.ncols()),
            |m, run| {
                let mut lens = Vec::with_capacity(run.len());
                let (mut cols, mut vals) = (Vec::new(), Vec::new());
                for i in run {
                    let before = cols.len();
                    let exact = quantized::exact_products(products[i], b.ncols());
                    m.row(a, b, i, exact, &mut cols, &mut vals);
                    lens.push((cols.len() - before) as u64);
                }
                (lens, cols, vals)
            },
        )
        .collect();
    let nnz: usize = parts.iter().map(|p| p.1.len()).sum();
    let mut ptr = Vec::with_capacity(rows.len() + 1);
    ptr.push(0u64);
    let (mut cols, mut vals) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
    for (lens, c, v) in parts {
        for l in lens {
            ptr.push(ptr[ptr.len() - 1] + l);
        }
        cols.extend_from_slice(&c);
        vals.extend_from_slice(&v);
    }
    Csr::from_parts_unchecked(rows.len(), b.ncols(), ptr, cols, vals)
}

/// The values of a row's sums of quanta, rounded to `T`.
fn values<T: Scalar>(sums: &[f64], vals: &mut [T]) {
    for (v, &s) in vals.iter_mut().zip(sums) {
        *v = quantized::value(s);
    }
}

/// Storage for the interleaved accumulator: `GROUP` values per column, in whole cache lines, so
/// that no column's slot straddles two lines. (A `Vec<[f32; GROUP]>` is only 4-byte aligned,
/// so where it lands is the allocator's choice; 16 bytes past a line, every other 32-byte slot
/// straddles two, which a timing probe measured ~10% slower on the grouped loop.)
struct Slots<T> {
    lines: Vec<CacheLine>,
    len: usize,
    values: PhantomData<T>,
}

/// 64 bytes aligned as a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct CacheLine([u8; 64]);

impl<T: Scalar> Slots<T> {
    /// `len` slots, every value zero.
    fn zeroed(len: usize) -> Self {
        let size = std::mem::size_of::<[T; GROUP]>();
        // Whole slots per line (f32) or whole lines per slot (f64).
        assert!(64 % size == 0 || size % 64 == 0);
        Slots {
            lines: vec![CacheLine([0; 64]); (len * size).div_ceil(64)],
            len,
            values: PhantomData,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_mut_slice(&mut self) -> &mut [[T; GROUP]] {
        // SAFETY: `lines` holds at least `len` slots' bytes, 64-byte aligned (more than a
        // slot needs); its bytes are zero or were written as `T`, and zero bytes are a valid
        // `T` (`Scalar: ValidAsZeroBits`, and they are `+0.0`).
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }
}

/// `B`'s column indices as `u16`, when it has at most 2¹⁶ columns (for
/// [`PositiveRows::rows_together`]).
pub(crate) fn narrow_columns<T: Scalar>(b: CsrRef<'_, T>) -> Option<Vec<u16>> {
    (b.ncols() <= 1 << 16).then(|| {
        b.col_idx()
            .par_iter()
            .with_min_len(1 << 16)
            .map(|&c| c as u16)
            .collect()
    })
}

/// A column index as stored: `u32`, or `u16` for matrices of at most 2¹⁶ columns.
trait Col: Copy {
    fn index(self) -> usize;
}

impl Col for u32 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

impl Col for u16 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// Adds `x[g]·B[k,j]` to `acc[j][g]` for every `(k, x)` of `merged` (in order) and every entry
/// `(k, j)` of `B`, whose column indices are read from `bc`: with AVX2 where the processor has
/// it (the same arithmetic, wider vectors).
fn accumulate_group<T: Scalar, C: Col>(
    acc: &mut [[f64; GROUP]],
    mask: usize,
    merged: &[(u32, [T; GROUP])],
    b: CsrRef<'_, T>,
    bc: &[C],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2.
        unsafe { accumulate_group_avx2(acc, mask, merged, b, bc) };
        return;
    }
    accumulate_group_any(acc, mask, merged, b, bc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn accumulate_group_avx2<T: Scalar, C: Col>(
    acc: &mut [[f64; GROUP]],
    mask: usize,
    merged: &[(u32, [T; GROUP])],
    b: CsrRef<'_, T>,
    bc: &[C],
) {
    accumulate_group_any(acc, mask, merged, b, bc)
}

#[inline(always)]
fn accumulate_group_any<T: Scalar, C: Col>(
    acc: &mut [[f64; GROUP]],
    mask: usize,
    merged: &[(u32, [T; GROUP])],
    b: CsrRef<'_, T>,
    bc: &[C],
) {
    assert!(acc.len() > mask);
    let (bp, bv) = (b.row_ptr(), b.values());
    for (t, &(k, x)) in merged.iter().enumerate() {
        if let Some(&(k2, _)) = merged.get(t + AHEAD) {
            let (s, e) = (bp[k2 as usize] as usize, bp[k2 as usize + 1] as usize);
            prefetch_all(bc, s, e);
            prefetch_all(bv, s, e);
        }
        let (s, e) = (bp[k as usize] as usize, bp[k as usize + 1] as usize);
        for (&c, &v) in bc[s..e].iter().zip(&bv[s..e]) {
            // SAFETY: `c & mask <= mask < acc.len()`.
            let slot = unsafe { acc.get_unchecked_mut(c.index() & mask) };
            for g in 0..GROUP {
                slot[g] += quantized::count(x[g] * v);
            }
        }
    }
}

/// Rows of `B` ahead that are prefetched whole (measured on iteration 2 of s16's MCL, Zen 5:
/// 8-10% faster than prefetching their first lines only).
const AHEAD: usize = 4;

/// Columns drained together by [`PositiveRows::drain_group`]: a tile of the accumulator (32 KB)
/// and its lanes stay in L1 or L2 while they are compacted.
const TILE: usize = 512;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spgemm::row_products;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// `a·b` summed naively: each row's quanta in a map, in the order of the loops; a row's
    /// products exact where mcl makes them so.
    fn reference<T: Scalar>(a: &Csr<T>, b: &Csr<T>) -> Csr<T> {
        let mut ptr = vec![0u64];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for i in 0..a.nrows() {
            let mut row = BTreeMap::new();
            let (ac, av) = a.row(i);
            let exact = quantized::exact_products(row_products(a.view(), b.view(), i), b.ncols());
            for (&k, &x) in ac.iter().zip(av) {
                let (bc, bv) = b.row(k as usize);
                for (&c, &v) in bc.iter().zip(bv) {
                    *row.entry(c).or_insert(0.0) += if exact {
                        quantized::exact_product(x, v)
                    } else {
                        quantized::product(x, v)
                    };
                }
            }
            for (c, s) in row {
                cols.push(c);
                vals.push(T::from_f64(s));
            }
            ptr.push(cols.len() as u64);
        }
        Csr::from_parts(a.nrows(), b.ncols(), ptr, cols, vals).unwrap()
    }

    /// A random matrix with positive values and some long rows.
    fn random(nrows: usize, ncols: usize, seed: u64, density: f64) -> Csr<f32> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let mut next = || rng.next_u64();
        let mut dense = vec![0f32; nrows * ncols];
        for (i, x) in dense.iter_mut().enumerate() {
            let row = i / ncols;
            // Rows divisible by 5 are dense, the others sparse.
            let p = if row % 5 == 0 { 0.9 } else { density };
            if (next() % 1_000_000) as f64 / 1e6 < p {
                *x = 1e-3 + (next() % 1000) as f32 / 997.0;
            }
        }
        Csr::from_dense(nrows, ncols, &dense)
    }

    fn check(a: &Csr<f32>, b: &Csr<f32>) {
        let c = reference(a, b);
        let (a, b) = (a.view(), b.view());
        assert!(products_are_positive(a, b));
        let mut rows = PositiveRows::new(b.ncols());
        for i in 0..a.nrows() {
            let (cols, vals) = rows.row(a, b, i, row_products(a, b, i));
            assert_eq!(cols, c.row(i).0, "row {i}");
            // Bitwise the reference's values: the sums do not depend on their order.
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(vals), bits(c.row(i).1), "row {i}");
        }
    }

    #[test]
    fn rows_equal_the_reference() {
        for (m, k, n, seed) in [
            (40, 30, 50, 1),
            (64, 64, 64, 2),
            (7, 200, 1000, 3),
            (1, 1, 1, 4),
        ] {
            let a = random(m, k, seed, 0.05);
            let b = random(k, n, seed + 100, 0.02);
            check(&a, &b);
        }
    }

    /// Every group of consecutive rows, made together, equals the reference bitwise; returns how
    /// many groups were made together (not as a lone row).
    fn check_groups<T: Scalar>(a: &Csr<T>, b: &Csr<T>) -> usize {
        let mut together = 0;
        let c = reference(a, b);
        let (a, b) = (a.view(), b.view());
        let mut rows = PositiveRows::new(b.ncols());
        let all: Vec<(usize, u64)> = (0..a.nrows()).map(|i| (i, row_products(a, b, i))).collect();
        let narrow = narrow_columns(b);
        for (size, narrow) in [
            (1, None),
            (3, narrow.as_deref()),
            (GROUP, None),
            (GROUP, narrow.as_deref()),
        ] {
            for group in runs(&all, size, b.ncols()) {
                rows.rows_together(a, b, narrow, group);
                together += rows.together() as usize;
                for (g, &(i, _)) in group.iter().enumerate() {
                    let (cols, vals) = rows.take(a, b, g);
                    assert_eq!(cols, c.row(i).0, "row {i}");
                    // `to_f64` is exact, so equal bits there are equal bits in `T`.
                    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(vals), bits(c.row(i).1), "row {i}");
                }
            }
        }
        together
    }

    /// `all` cut as the MCL iteration cuts it: runs of up to `size` consecutive groupable rows,
    /// each other row alone.
    fn runs(all: &[(usize, u64)], size: usize, ncols: usize) -> Vec<&[(usize, u64)]> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < all.len() {
            let mut end = at;
            while end < all.len() && end - at < size && groupable(all[end].1, ncols) {
                end += 1;
            }
            let end = end.max(at + 1);
            out.push(&all[at..end]);
            at = end;
        }
        out
    }

    #[test]
    fn groups_equal_the_reference() {
        for (m, k, n, seed) in [
            (40, 30, 50, 1),
            (64, 64, 64, 2),
            (17, 200, 1000, 3),
            (1, 1, 1, 4),
        ] {
            // Dense rows of A share most k; sparse ones few.
            check_groups(&random(m, k, seed, 0.05), &random(k, n, seed + 100, 0.3));
            let (a, b) = (random(m, k, seed, 0.6), random(k, n, seed + 100, 0.3));
            let shared = check_groups(&a, &b);
            assert!(shared > 0 || m == 1);
            // f64: one slot of the group accumulator per cache line, not two.
            check_groups(&a.cast::<f64>(), &b.cast::<f64>());
        }
        // A row whose k are all absent from B (empty rows of B) and an empty row of A.
        let a = Csr::from_dense(3, 2, &[1f32, 0.5, 0.0, 0.0, 2.0, 0.0]);
        let b = Csr::from_dense(2, 3, &[0f32, 0.0, 0.0, 1.0, 0.0, 3.0]);
        check_groups(&a, &b);
    }

    #[test]
    fn rows_with_few_products_make_them_exactly_as_mcl_does() {
        // x·x = 1/4 + 2⁻²⁴ + 2⁻⁴⁸ rounds to 1/4 + 2⁻²⁴ in f32; plus 2⁻²⁶ the sum lies on a tie
        // of f32 (to even: down) or, with the exact product, just above it (up).
        let x = 0.5f32 + 2f32.powi(-24);
        let a = Csr::from_parts(1, 2, vec![0, 2], vec![0, 1], vec![x, 0.5]).unwrap();
        let rounded = 0.25f32 + 2f32.powi(-24);
        let exact = 0.25f32 + 3.0 * 2f32.powi(-25);
        // Two products: exact from 21 columns on (2 × 10 < 21).
        for (ncols, want) in [(2, rounded), (20, rounded), (21, exact), (64, exact)] {
            let b = Csr::from_parts(2, ncols, vec![0, 1, 2], vec![0, 0], vec![x, 2f32.powi(-25)])
                .unwrap();
            let mut rows = PositiveRows::new(ncols);
            let (cols, vals) = rows.row(a.view(), b.view(), 0, 2);
            assert_eq!((cols, vals), (&[0u32][..], &[want][..]), "{ncols} columns");
            let m = marked_product(a.view(), b.view(), 0..1, &[2]);
            assert_eq!(m.row(0).1, &[want], "{ncols} columns");
            assert_eq!(reference(&a, &b).row(0).1, &[want], "{ncols} columns");
        }
    }

    #[test]
    fn groups_cover_the_rows_in_order() {
        assert_eq!(groups(&[5, 5, 20, 1, 1], 10), vec![0..2, 2..3, 3..5]);
        assert_eq!(groups(&[0, 0, 0], 100), vec![0..3]);
        assert_eq!(groups(&[], 10), Vec::<Range<usize>>::new());
    }

    /// The marked rows equal the reference, zero products included (kept as entries).
    fn check_marked<T: Scalar>(a: &Csr<T>, b: &Csr<T>) {
        let c = reference(a, b);
        let (a, b) = (a.view(), b.view());
        let per_row: Vec<u64> = (0..a.nrows()).map(|i| row_products(a, b, i)).collect();
        let n = a.nrows();
        for rows in [0..n, n / 3..n, 0..n / 2] {
            let m = marked_product(a, b, rows.clone(), &per_row);
            assert_eq!(m.nrows(), rows.len());
            for (li, i) in rows.enumerate() {
                assert_eq!(m.row(li).0, c.row(i).0, "row {i}");
                let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(m.row(li).1), bits(c.row(i).1), "row {i}");
            }
        }
    }

    #[test]
    fn marked_rows_equal_the_reference_and_keep_zero_products() {
        check_marked(&random(40, 30, 1, 0.05), &random(30, 50, 2, 0.3));
        // An explicit zero in A: its products are zero and their columns still entries.
        let a = Csr::from_parts(2, 2, vec![0, 2, 3], vec![0, 1, 1], vec![0f32, 0.5, 1.0]).unwrap();
        let b = Csr::from_dense(2, 3, &[1f32, 0.0, 2.0, 0.0, 1.0, 0.0]);
        let m = marked_product(a.view(), b.view(), 0..2, &[3, 1]);
        assert_eq!(m.row(0).0, &[0, 1, 2]);
        assert_eq!(m.row(0).1, &[0.0, 0.5, 0.0]);
        check_marked(&a, &b);
    }

    #[test]
    fn positivity_is_checked() {
        let a = Csr::from_dense(2, 2, &[1f32, 0.5, 0.0, 2.0]);
        assert!(products_are_positive(a.view(), a.view()));
        let z = Csr::from_parts(1, 2, vec![0, 2], vec![0, 1], vec![1f32, 0.0]).unwrap();
        assert!(!products_are_positive(z.view(), a.view()));
        let neg = Csr::from_parts(1, 2, vec![0, 1], vec![1], vec![-1f32]).unwrap();
        assert!(!products_are_positive(a.view(), neg.view()));
        // 1e-30 squared underflows to zero in f32, not in f64.
        let tiny = Csr::from_parts(1, 1, vec![0, 1], vec![0], vec![1e-30f32]).unwrap();
        assert!(!products_are_positive(tiny.view(), tiny.view()));
        let wide = tiny.cast::<f64>();
        assert!(products_are_positive(wide.view(), wide.view()));
        let empty = Csr::<f32>::empty(3, 3);
        assert!(products_are_positive(empty.view(), empty.view()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn prop_rows_equal_the_reference(
            m in 1usize..40, k in 1usize..40, n in 1usize..300,
            seed in any::<u64>(), d in 0.0f64..0.3,
        ) {
            check(&random(m, k, seed, d), &random(k, n, seed ^ 0xABCD, d));
        }

        #[test]
        fn prop_groups_equal_the_reference(
            m in 1usize..40, k in 1usize..40, n in 1usize..300,
            seed in any::<u64>(), d in 0.0f64..0.9,
        ) {
            check_groups(&random(m, k, seed, d), &random(k, n, seed ^ 0xABCD, d));
        }
    }
}
