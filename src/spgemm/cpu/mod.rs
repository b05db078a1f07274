//! The multithreaded CPU engine: Gustavson's row-by-row product on rayon, also the reference the
//! GPU engine is checked against.
//!
//! 1. **Plan.** Count each row's intermediate products and choose its accumulator; cut the rows
//!    into tasks of about equal product count (not row count: power-law rows are very uneven),
//!    many per thread, handed out dynamically.
//! 2. **Compute.** By default in a single pass ([`Tuning::single_pass`], see `ordered.rs`):
//!    threads claim tasks in order, compute each into a per-thread buffer that stays in cache,
//!    and copy finished tasks into `C` (reserved at an upper bound of its size) as soon as every
//!    earlier task is done, so no symbolic pass walks the products a second time. Otherwise, or
//!    when the bound cannot be reserved, the classic two passes: *symbolic* counts each row's
//!    entries into 64-bit offsets (a prefix sum), then *numeric* writes every row straight into
//!    its place in `C`.
//!
//! The accumulator of a row:
//! - *copy*: a row of `A` with one entry scales one row of `B`, which is already sorted;
//! - *dense*: a value array over all columns, a mark byte per column and a flag byte per 64
//!   columns, whose scan gives the row sorted without sorting; chosen when the columns fit in
//!   cache and the row has enough products for the scan to pay;
//! - *hash*: open addressing sized to the row's products, then a sort of the row's entries;
//! - *chunked* (MAGNUS): the products are bucketed by column chunk and each chunk is summed in a
//!   cache-sized dense accumulator; for long rows when the columns are too many to keep dense;
//! - *masked*: the mask row's columns get slots and other products are dropped.
//!
//! All of them sum an entry's products in the order of `k` in `A`'s row, starting from zero, so
//! the result is bitwise the same whichever accumulator, schedule or thread count computes it.
//! An entry whose products cancel to zero is kept (the structure never depends on values).

mod accum;
pub(crate) mod compact;
mod ordered;
pub(crate) mod rows;

use super::{check_operands, row_products, Pattern, SpgemmOptions};
use crate::csr::{Csr, CsrRef};
use crate::error::{Error, Result};
use crate::scalar::Scalar;
pub(crate) use accum::prefetch;
use accum::{Chunked, Dense, Hash, Masked, RowProduct};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Mutex;

/// Which accumulator the CPU engine uses for its rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Accumulator {
    /// Chosen per row from its product count and the column count (the default).
    #[default]
    Auto,
    /// Dense for every row (chunked when the columns exceed [`Tuning::dense_max_cols`]).
    Dense,
    /// Hash for every row.
    Hash,
    /// MAGNUS chunking for every row.
    Chunked,
}

/// The knobs of the CPU engine. The defaults suit a core with a 1 MiB L2 cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Force one accumulator for every row (for tests and measurements), or choose per row.
    /// Forcing also turns off the copy path for rows of `A` with a single entry.
    pub accumulator: Accumulator,
    /// The dense accumulator spans all columns only when there are at most this many.
    pub dense_max_cols: usize,
    /// A row goes dense when `products × dense_cols_per_product ≥ columns`: the scan of its
    /// flags (one word per 512 columns) is then small next to its products.
    pub dense_cols_per_product: usize,
    /// Columns per MAGNUS chunk (rounded to a power of two, at least 64).
    pub chunk_cols: usize,
    /// With more columns than `dense_max_cols`, rows with at least this many products, and at
    /// least `4 ×` the chunk count, are chunked; others use the hash accumulator.
    pub chunk_min_products: u64,
    /// Tasks per thread in the schedule (at least): more balance better, fewer cost less.
    pub tasks_per_thread: usize,
    /// Compute each task's rows once, into a per-thread buffer, and place the tasks in order
    /// (no symbolic pass); `false` runs the classic symbolic and numeric passes. The single pass
    /// falls back on the two passes when its upper bound on `C` cannot be reserved.
    pub single_pass: bool,
    /// Single pass: at most this many products per task, so that a task's buffer stays in cache.
    pub task_products: u64,
    /// Single pass: how many finished entries may wait for an earlier, slower task before the
    /// threads wait too (bounds the extra memory).
    pub stash_entries: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            accumulator: Accumulator::Auto,
            dense_max_cols: 1 << 18,
            dense_cols_per_product: 512,
            chunk_cols: 1 << 16,
            chunk_min_products: 2048,
            tasks_per_thread: 32,
            single_pass: true,
            task_products: 1 << 15,
            stash_entries: 1 << 22,
        }
    }
}

/// The CPU SpGEMM engine. It runs on the current rayon pool (use `ThreadPool::install` to pick
/// the thread count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuEngine {
    /// The engine's knobs.
    pub tuning: Tuning,
}

/// Computes `C = A·B` (or what `opts` selects of it) with the default CPU engine.
pub fn multiply<'x, T: Scalar>(
    a: impl Into<CsrRef<'x, T>>,
    b: impl Into<CsrRef<'x, T>>,
    opts: &SpgemmOptions,
) -> Result<Csr<T>> {
    CpuEngine::default().multiply(a, b, opts)
}

/// How one row is accumulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Empty,
    Copy,
    Dense,
    Hash,
    Chunked,
    MaskDense,
    MaskHash,
}

/// Everything a row computation reads.
pub(super) struct Ctx<'a, T> {
    a: CsrRef<'a, T>,
    b: CsrRef<'a, T>,
    mask: Option<Pattern<'a>>,
    ncols: usize,
    shift: u32,
    nchunks: usize,
}

#[derive(Default)]
pub(super) struct Workspace<T> {
    dense: Dense<T>,
    hash: Hash<T>,
    chunked: Chunked<T>,
    masked: Masked<T>,
}

/// One workspace per thread of the pool, found by the thread's index.
pub(super) struct Workspaces<T> {
    slots: Vec<Mutex<Workspace<T>>>,
}

impl<T: Scalar> Workspaces<T> {
    fn new(threads: usize) -> Self {
        Workspaces {
            slots: (0..threads).map(|_| Mutex::default()).collect(),
        }
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut Workspace<T>) -> R) -> R {
        if let Some(slot) = rayon::current_thread_index().and_then(|i| self.slots.get(i)) {
            if let Ok(mut ws) = slot.try_lock() {
                return f(&mut ws);
            }
        }
        // Not a thread of the pool we planned for: work in a fresh workspace.
        f(&mut Workspace::default())
    }
}

impl CpuEngine {
    /// An engine with the given knobs.
    pub fn with_tuning(tuning: Tuning) -> Self {
        CpuEngine { tuning }
    }

    /// Computes `C = A·B` (or what `opts` selects of it).
    pub fn multiply<'x, T: Scalar>(
        &self,
        a: impl Into<CsrRef<'x, T>>,
        b: impl Into<CsrRef<'x, T>>,
        opts: &SpgemmOptions,
    ) -> Result<Csr<T>> {
        self.multiply_counted(a, b, opts).map(|(c, _)| c)
    }

    /// Computes `C = A·B` (or what `opts` selects of it) and the number of intermediate products
    /// of the rows computed.
    pub fn multiply_counted<'x, T: Scalar>(
        &self,
        a: impl Into<CsrRef<'x, T>>,
        b: impl Into<CsrRef<'x, T>>,
        opts: &SpgemmOptions,
    ) -> Result<(Csr<T>, u64)> {
        let (a, b) = (a.into(), b.into());
        let rows = check_operands(a, b, opts)?;
        let t = &self.tuning;
        let ncols = b.ncols();
        let chunk_cols = t.chunk_cols.clamp(64, 1 << 30).next_power_of_two();
        let shift = chunk_cols.trailing_zeros();
        let ctx = Ctx {
            a,
            b,
            mask: opts.mask,
            ncols,
            shift,
            nchunks: ncols.div_ceil(chunk_cols),
        };

        // 1. Plan.
        let (products, (bounds, kinds)): (Vec<u64>, (Vec<u64>, Vec<Kind>)) = rows
            .clone()
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let p = row_products(a, b, i);
                let kind = ctx.classify(t, i, p);
                (p, (ctx.bound(i, p, kind), kind))
            })
            .unzip();
        let total: u64 = products.par_iter().sum();
        // Interrupts are seen here, between the single pass's tasks, and between the phases of
        // the two passes.
        crate::interrupt::check()?;
        let threads = rayon::current_num_threads();
        let pool = Workspaces::<T>::new(threads);
        let want = threads * t.tasks_per_thread.max(1);
        let job = Job {
            ctx: &ctx,
            first_row: rows.start,
            kinds: &kinds,
            products: &products,
            pool: &pool,
        };

        if t.single_pass {
            let tasks = plan_tasks(&products, a, rows.start, want, t.task_products.max(1));
            if let Some((row_ptr, col_idx, values)) =
                ordered::run(&job, &bounds, &tasks, threads, t.stash_entries)
            {
                crate::interrupt::check()?;
                let c = Csr::from_parts_unchecked(rows.len(), ncols, row_ptr, col_idx, values);
                return Ok((c, total));
            }
        }
        drop(bounds);
        crate::interrupt::check()?;
        let tasks = plan_tasks(&products, a, rows.start, want, u64::MAX);
        let (row_ptr, col_idx, values) = job.two_pass(&tasks)?;
        crate::interrupt::check()?;
        let c = Csr::from_parts_unchecked(rows.len(), ncols, row_ptr, col_idx, values);
        Ok((c, total))
    }
}

/// What the tasks of one product share.
pub(super) struct Job<'a, T> {
    pub(super) ctx: &'a Ctx<'a, T>,
    /// Row of `A` of local row 0.
    pub(super) first_row: usize,
    pub(super) kinds: &'a [Kind],
    pub(super) products: &'a [u64],
    pub(super) pool: &'a Workspaces<T>,
}

impl<T: Scalar> Job<'_, T> {
    /// Computes local rows `r` into `cols`/`vals` (room for their bounds, in order); returns
    /// the number of entries written after each row, from the start of `cols`, in `ends`.
    pub(super) fn fill_rows(
        &self,
        ws: &mut Workspace<T>,
        r: Range<usize>,
        bounds: &[u64],
        cols: &mut [MaybeUninit<u32>],
        vals: &mut [MaybeUninit<T>],
        ends: &mut Vec<u64>,
    ) {
        let mut at = 0usize;
        for li in r {
            let room = at + bounds[li] as usize;
            at += self.ctx.fill_row(
                ws,
                self.first_row + li,
                self.kinds[li],
                self.products[li],
                &mut cols[at..room],
                &mut vals[at..room],
            );
            ends.push(at as u64);
        }
    }

    /// The classic two passes: count the entries of every row (symbolic), take the prefix sum,
    /// allocate `C` and write every row in its place (numeric).
    fn two_pass(&self, tasks: &[Range<usize>]) -> Result<(Vec<u64>, Vec<u32>, Vec<T>)> {
        let (ctx, kinds, products) = (self.ctx, self.kinds, self.products);
        let n = kinds.len();
        // Symbolic: entries per row.
        let mut counts = vec![0u64; n];
        let mut jobs = Vec::with_capacity(tasks.len());
        let mut rest = counts.as_mut_slice();
        for r in tasks {
            let (here, tail) = rest.split_at_mut(r.len());
            jobs.push((r.clone(), here));
            rest = tail;
        }
        jobs.into_par_iter().with_max_len(1).for_each(|(r, out)| {
            self.pool.with(|ws| {
                for (li, o) in r.zip(out.iter_mut()) {
                    *o = ctx.count_row(ws, self.first_row + li, kinds[li], products[li]) as u64;
                }
            })
        });
        let mut row_ptr = Vec::with_capacity(n + 1);
        row_ptr.push(0u64);
        let mut acc = 0u64;
        for &c in &counts {
            acc += c;
            row_ptr.push(acc);
        }
        drop(counts);
        let nnz = usize::try_from(acc).map_err(|_| too_big(acc))?;

        // Numeric: every row written in place.
        let mut col_idx: Vec<u32> = Vec::new();
        let mut values: Vec<T> = Vec::new();
        col_idx.try_reserve_exact(nnz).map_err(|_| too_big(acc))?;
        values.try_reserve_exact(nnz).map_err(|_| too_big(acc))?;
        {
            let mut jobs = Vec::with_capacity(tasks.len());
            let mut crest = &mut col_idx.spare_capacity_mut()[..nnz];
            let mut vrest = &mut values.spare_capacity_mut()[..nnz];
            for r in tasks {
                let len = (row_ptr[r.end] - row_ptr[r.start]) as usize;
                let (c, ctail) = crest.split_at_mut(len);
                let (v, vtail) = vrest.split_at_mut(len);
                jobs.push((r.clone(), c, v));
                crest = ctail;
                vrest = vtail;
            }
            jobs.into_par_iter()
                .with_max_len(1)
                .try_for_each(|(r, cols, vals)| {
                    crate::mem::prefault(cols);
                    crate::mem::prefault(vals);
                    self.pool.with(|ws| {
                        let base = row_ptr[r.start];
                        for li in r {
                            let s = (row_ptr[li] - base) as usize;
                            let e = (row_ptr[li + 1] - base) as usize;
                            let i = self.first_row + li;
                            let wrote = ctx.fill_row(
                                ws,
                                i,
                                kinds[li],
                                products[li],
                                &mut cols[s..e],
                                &mut vals[s..e],
                            );
                            if wrote != e - s {
                                return Err(Error::Invalid(format!(
                                    "internal error in the CPU SpGEMM engine: row {i} counted {} \
                                     entries but produced {wrote}; please report this",
                                    e - s
                                )));
                            }
                        }
                        Ok(())
                    })
                })?;
        }
        // SAFETY: the tasks cover all rows, every row wrote exactly its `row_ptr` range (checked
        // above), so the first `nnz` elements of both vectors are initialised.
        unsafe {
            col_idx.set_len(nnz);
            values.set_len(nnz);
        }
        Ok((row_ptr, col_idx, values))
    }
}

fn too_big(nnz: u64) -> Error {
    Error::Invalid(format!(
        "the product has {nnz} entries, more than this machine can hold; compute it in row \
         batches"
    ))
}

/// Cuts rows `0..products.len()` into contiguous tasks of about equal work (products plus a
/// per-row cost): about `want` of them, each at most `max_weight` unless one row weighs more.
fn plan_tasks<T: Scalar>(
    products: &[u64],
    a: CsrRef<'_, T>,
    first_row: usize,
    want: usize,
    max_weight: u64,
) -> Vec<Range<usize>> {
    let n = products.len();
    let weight = |li: usize| products[li] + a.row_len(first_row + li) as u64 + 4;
    let total: u64 = (0..n).into_par_iter().with_min_len(4096).map(weight).sum();
    let target = (total / want as u64).clamp(1, max_weight.max(1));
    let mut tasks = Vec::with_capacity((total / target) as usize + 2);
    let (mut start, mut acc) = (0, 0u64);
    for li in 0..n {
        let w = weight(li);
        if acc > 0 && acc + w > target {
            tasks.push(start..li);
            start = li;
            acc = 0;
        }
        acc += w;
    }
    if start < n {
        tasks.push(start..n);
    }
    tasks
}

impl<T: Scalar> Ctx<'_, T> {
    /// Picks the accumulator of row `i` with `p` products.
    fn classify(&self, t: &Tuning, i: usize, p: u64) -> Kind {
        if p == 0 {
            return Kind::Empty;
        }
        let fits = self.ncols <= t.dense_max_cols;
        if let Some(m) = &self.mask {
            let mlen = m.row(i).len();
            if mlen == 0 {
                return Kind::Empty;
            }
            return match t.accumulator {
                Accumulator::Auto | Accumulator::Dense if fits => Kind::MaskDense,
                _ => Kind::MaskHash,
            };
        }
        let chunked_pays = p >= t.chunk_min_products && p >= 4 * self.nchunks as u64;
        match t.accumulator {
            Accumulator::Dense if fits => Kind::Dense,
            Accumulator::Dense | Accumulator::Chunked => Kind::Chunked,
            Accumulator::Hash => Kind::Hash,
            Accumulator::Auto => {
                if self.a.row_len(i) == 1 {
                    Kind::Copy
                } else if fits {
                    if p.saturating_mul(t.dense_cols_per_product as u64) >= self.ncols as u64 {
                        Kind::Dense
                    } else {
                        Kind::Hash
                    }
                } else if chunked_pays {
                    Kind::Chunked
                } else {
                    Kind::Hash
                }
            }
        }
    }

    /// At most how many entries row `i` of `C` has, given its `p` products.
    fn bound(&self, i: usize, p: u64, kind: Kind) -> u64 {
        let b = p.min(self.ncols as u64);
        match kind {
            Kind::Empty => 0,
            Kind::MaskDense | Kind::MaskHash => b.min(self.mask_row(i).len() as u64),
            _ => b,
        }
    }

    /// The number of entries of row `i` of `C`.
    fn count_row(&self, ws: &mut Workspace<T>, i: usize, kind: Kind, p: u64) -> usize {
        let row = RowProduct::new(self.a, self.b, i);
        match kind {
            Kind::Empty => 0,
            Kind::Copy => self.b.row_len(self.a.row(i).0[0] as usize),
            Kind::Dense => {
                let d = &mut ws.dense;
                d.begin(self.ncols, false);
                d.mark_product(row);
                d.count_and_clear()
            }
            Kind::Hash => {
                let h = &mut ws.hash;
                h.begin(p, self.ncols, false);
                h.count_product(row)
            }
            Kind::Chunked => {
                let ch = &mut ws.chunked;
                ch.bucket(row, p as usize, self.nchunks, self.shift, false);
                ch.count(self.nchunks, 1 << self.shift)
            }
            Kind::MaskDense | Kind::MaskHash => {
                let mrow = self.mask_row(i);
                let m = &mut ws.masked;
                m.begin(mrow, self.ncols, kind == Kind::MaskDense);
                m.mark_product(row);
                m.count_and_clear(mrow)
            }
        }
    }

    /// Writes row `i` of `C` into `cols`/`vals`; returns the number of entries written.
    fn fill_row(
        &self,
        ws: &mut Workspace<T>,
        i: usize,
        kind: Kind,
        p: u64,
        cols: &mut [MaybeUninit<u32>],
        vals: &mut [MaybeUninit<T>],
    ) -> usize {
        let row = RowProduct::new(self.a, self.b, i);
        match kind {
            Kind::Empty => 0,
            Kind::Copy => {
                let (ac, av) = self.a.row(i);
                let a = av[0];
                let (bc, bv) = self.b.row(ac[0] as usize);
                for (o, (&c, &v)) in bc.iter().zip(bv).enumerate() {
                    cols[o].write(c);
                    vals[o].write(T::ZERO + a * v);
                }
                bc.len()
            }
            Kind::Dense => {
                let d = &mut ws.dense;
                d.begin(self.ncols, true);
                d.add_product(row);
                d.drain(0, cols, vals)
            }
            Kind::Hash => {
                let h = &mut ws.hash;
                h.begin(p, self.ncols, true);
                h.add_product(row);
                h.drain(cols, vals)
            }
            Kind::Chunked => {
                let ch = &mut ws.chunked;
                ch.bucket(row, p as usize, self.nchunks, self.shift, true);
                ch.drain(self.nchunks, self.shift, cols, vals)
            }
            Kind::MaskDense | Kind::MaskHash => {
                let mrow = self.mask_row(i);
                let m = &mut ws.masked;
                m.begin(mrow, self.ncols, kind == Kind::MaskDense);
                m.add_product(row);
                m.drain(mrow, cols, vals)
            }
        }
    }

    fn mask_row(&self, i: usize) -> &[u32] {
        self.mask.as_ref().map_or(&[], |m| m.row(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Accumulator; 4] = [
        Accumulator::Auto,
        Accumulator::Dense,
        Accumulator::Hash,
        Accumulator::Chunked,
    ];

    fn engine(acc: Accumulator, chunk_cols: usize) -> CpuEngine {
        CpuEngine::with_tuning(Tuning {
            accumulator: acc,
            chunk_cols,
            ..Tuning::default()
        })
    }

    /// Row-by-row reference in the engine's summation order: bitwise what the engine must give.
    fn reference(a: &Csr<f64>, b: &Csr<f64>) -> Csr<f64> {
        let mut rp = vec![0u64];
        let (mut ci, mut vs) = (Vec::new(), Vec::new());
        for i in 0..a.nrows() {
            let mut acc: Vec<Option<f64>> = vec![None; b.ncols()];
            for (&k, &x) in a.row(i).0.iter().zip(a.row(i).1) {
                for (&j, &y) in b.row(k as usize).0.iter().zip(b.row(k as usize).1) {
                    let e = acc[j as usize].get_or_insert(0.0);
                    *e += x * y;
                }
            }
            for (j, v) in acc.iter().enumerate() {
                if let Some(v) = v {
                    ci.push(j as u32);
                    vs.push(*v);
                }
            }
            rp.push(ci.len() as u64);
        }
        Csr::from_parts(a.nrows(), b.ncols(), rp, ci, vs).unwrap()
    }

    /// A deterministic sparse matrix with skewed rows and columns.
    fn skewed(nrows: usize, ncols: usize, nnz: usize, seed: u64) -> Csr<f64> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let mut next = move || rng.next_u64();
        let mut edges = Vec::new();
        let mut w = Vec::new();
        for _ in 0..nnz {
            // Squaring a uniform number skews indices towards 0, like a power law.
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let v = (next() >> 11) as f64 / (1u64 << 53) as f64;
            edges.push((
                ((u * u) * nrows as f64) as u32,
                ((v * v) * ncols as f64) as u32,
            ));
            w.push(((next() % 2000) as f64 - 1000.0) / 256.0);
        }
        let el = crate::EdgeList {
            nrows,
            ncols,
            edges,
            weights: Some(w),
        };
        Csr::from_edges(&el, &crate::BuildOptions::default()).unwrap()
    }

    #[test]
    fn every_accumulator_matches_the_reference_bitwise() {
        let a = skewed(300, 700, 3000, 1);
        let b = skewed(700, 500, 4000, 2);
        let want = reference(&a, &b);
        for acc in ALL {
            for chunk in [64, 128, 1 << 16] {
                for single_pass in [true, false] {
                    let mut e = engine(acc, chunk);
                    e.tuning.single_pass = single_pass;
                    let c = e.multiply(&a, &b, &SpgemmOptions::default()).unwrap();
                    assert_eq!(c, want, "{acc:?} chunk {chunk} {single_pass}");
                }
            }
        }
    }

    #[test]
    fn large_column_ranges_take_every_path() {
        // More columns than dense_max_cols: long rows are chunked, short ones hashed.
        let a = skewed(64, 64, 400, 3);
        let b = skewed(64, 5000, 3000, 4);
        let want = reference(&a, &b);
        let t = Tuning {
            dense_max_cols: 1000,
            chunk_cols: 256,
            chunk_min_products: 16,
            ..Tuning::default()
        };
        let e = CpuEngine::with_tuning(t);
        let ctx = Ctx {
            a: a.view(),
            b: b.view(),
            mask: None,
            ncols: b.ncols(),
            shift: 8,
            nchunks: b.ncols().div_ceil(256),
        };
        let kinds: Vec<Kind> = (0..a.nrows())
            .map(|i| ctx.classify(&t, i, row_products(a.view(), b.view(), i)))
            .collect();
        assert!(kinds.contains(&Kind::Chunked) && kinds.contains(&Kind::Hash));
        assert_eq!(e.multiply(&a, &b, &SpgemmOptions::default()).unwrap(), want);
    }

    #[test]
    fn single_pass_placement_matches_two_passes() {
        let a = skewed(500, 400, 4000, 8);
        let b = skewed(400, 600, 3000, 9);
        let want = reference(&a, &b);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for (task_products, stash) in [(1, 0), (7, 0), (50, 10), (1 << 16, 1 << 22)] {
            for single_pass in [true, false] {
                let e = CpuEngine::with_tuning(Tuning {
                    single_pass,
                    task_products,
                    stash_entries: stash,
                    tasks_per_thread: 64,
                    ..Tuning::default()
                });
                let c = pool
                    .install(|| e.multiply(&a, &b, &SpgemmOptions::default()))
                    .unwrap();
                assert_eq!(c, want, "{task_products} {stash} {single_pass}");
                let (.., cols, vals) = c.into_parts();
                assert_eq!((cols.capacity(), vals.capacity()), (cols.len(), vals.len()));
            }
        }
    }

    #[test]
    fn cancellation_keeps_explicit_zeros() {
        let a = Csr::from_dense(1, 2, &[1.0f64, 1.0]);
        let b = Csr::from_dense(2, 2, &[1.0f64, 2.0, -1.0, 0.0]);
        for acc in ALL {
            let c = engine(acc, 64)
                .multiply(&a, &b, &SpgemmOptions::default())
                .unwrap();
            assert_eq!(c.col_idx(), &[0, 1], "{acc:?}");
            assert_eq!(c.values(), &[0.0, 2.0], "{acc:?}");
        }
    }

    #[test]
    fn masks_and_batches() {
        let a = skewed(200, 200, 1500, 5);
        let mask = skewed(200, 200, 2500, 6);
        let full = reference(&a, &a);
        for (acc, single_pass) in ALL.iter().flat_map(|&a| [(a, true), (a, false)]) {
            let mut e = engine(acc, 64);
            e.tuning.single_pass = single_pass;
            let opts = SpgemmOptions {
                mask: Some(Pattern::of(&mask)),
                rows: Some(37..151),
                ..Default::default()
            };
            let c = e.multiply(&a, &a, &opts).unwrap();
            assert_eq!((c.nrows(), c.ncols()), (114, 200));
            for li in 0..c.nrows() {
                let i = 37 + li;
                let (fc, fv) = full.row(i);
                let m = mask.row(i).0;
                let want: Vec<(u32, f64)> = fc
                    .iter()
                    .zip(fv)
                    .filter(|(j, _)| m.binary_search(j).is_ok())
                    .map(|(&j, &v)| (j, v))
                    .collect();
                let got: Vec<(u32, f64)> = c
                    .row(li)
                    .0
                    .iter()
                    .zip(c.row(li).1)
                    .map(|(&j, &v)| (j, v))
                    .collect();
                assert_eq!(got, want, "{acc:?} row {i}");
            }
        }
    }

    #[test]
    fn tasks_cover_all_rows() {
        let a = skewed(1000, 50, 3000, 7);
        let p = vec![5u64; 1000];
        for want in [1, 3, 64, 5000] {
            let t = plan_tasks(&p, a.view(), 0, want, if want == 3 { 50 } else { u64::MAX });
            assert_eq!(t.first().map(|r| r.start), Some(0));
            assert_eq!(t.last().map(|r| r.end), Some(1000));
            assert!(t
                .windows(2)
                .all(|w| w[0].end == w[1].start && !w[0].is_empty()));
        }
        assert!(plan_tasks(&[], a.view(), 0, 8, 1).is_empty());
    }
}
