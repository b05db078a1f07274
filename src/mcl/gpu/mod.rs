//! MCL with the matrix resident on the GPU: expansion by the gMAGNUS engine in row batches that
//! stay on the device, each pruned, inflated and measured there (`prune.rs`) as soon as
//! it is made; the pruned batches are stacked into the next matrix on the device. Only the
//! per-batch chaos crosses to the host between iterations, and the limit at the end.

use super::{Iteration, IterationProgress, MclParams};
use crate::csr::Csr;
use crate::error::Result;
use crate::gpu::matrix::DeviceCsr;
mod prune;

use crate::scalar::Scalar;
use crate::spgemm::gpu::{DeferredConsumer, GpuEngine, GpuTuning};
pub use prune::{prune_batch, prune_expansion, FusedRows, Pruned};
use std::time::Instant;

/// MCL's dense rows on the GPU: those with at least the columns / this many products.
const DENSE_FRACTION: u64 = 8;

/// The GPU engine for MCL, tuned by `params.gpu`: batches bounded by `params.batch_entries`
/// when given, else by the device's memory alone.
pub(crate) fn engine(params: &MclParams) -> Result<GpuEngine> {
    let tuning = params.gpu.clone();
    Ok(GpuEngine::open()?.with_tuning(GpuTuning {
        max_batch_entries: params.batch_entries.or(tuning.max_batch_entries),
        // Dense rows are made and pruned by the fused kernels, which sweep every column of
        // the row: rows with an eighth of the columns' products repay the sweep, against the
        // hash tables' cost per product and the stored columns' pruning (docs/performance.md,
        // sessions 19 and 25); rows with far fewer do not.
        dense_fraction: tuning.dense_fraction.or(Some(DENSE_FRACTION)),
        // For the same reason the other rows keep the hash tables up to τ.
        hash_limit: tuning.hash_limit.or(Some(u64::MAX)),
        // Sums equal to the CPU engine's, the same in every run.
        quantized_sums: true,
        ..tuning
    }))
}

/// The matrix of an MCL process on the device (the transposed matrix, as on the host), with
/// whether all the products of its square are positive: the GPU then makes and prunes the dense
/// columns of `M²` in one kernel, as the CPU engine's fused path does.
pub(crate) struct DeviceMatrix<T: Scalar> {
    pub(crate) m: DeviceCsr<T>,
    positive_products: bool,
}

impl<T: Scalar> DeviceMatrix<T> {
    /// Uploads `m`.
    pub(crate) fn upload(engine: &GpuEngine, m: &Csr<T>) -> Result<Self> {
        Ok(DeviceMatrix {
            m: DeviceCsr::upload(engine.gpu(), m)?,
            positive_products: crate::spgemm::cpu::rows::products_are_positive(m.view(), m.view()),
        })
    }
}

/// One MCL iteration on the device matrix `m`. Returns the next matrix and the iteration's
/// figures (`index` 0).
pub(crate) fn iterate<T: Scalar>(
    engine: &GpuEngine,
    m: DeviceMatrix<T>,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(DeviceMatrix<T>, Iteration)> {
    let start = Instant::now();
    let n = m.m.ncols();
    // The device knows each column's products; the host counts columns.
    progress.set_totals(m.m.nrows() as u64, m.m.nrows() as u64);
    let mut made = Made::new(engine, params, inflation, progress);
    let fuse = params.fused && m.positive_products;
    let (stats, _) = engine.square_on_device(m.m, fuse, |rows, c, deferred, m| {
        let fused = deferred.as_ref().map(|d| FusedRows {
            a: m,
            b: m,
            row0: rows.start as u64,
            rows: d,
        });
        made.absorb(rows.clone(), c, fused, rows.start as u64)
    })?;
    let (next, it, least) = made.finish(n, &stats, start)?;
    // The next square's products are positive when its smallest value squared is.
    let least = T::from_f64(least.min(1.0));
    let next = DeviceMatrix {
        m: next,
        positive_products: least * least > T::ZERO,
    };
    Ok((next, it))
}

/// One iteration's columns on the GPU engine, from host matrices: row `i` of `a·b`, pruned and
/// inflated as node `first + i`, for every row of `a` (the GPU half of
/// [`super::expand_prune`], whose contract it keeps: across ranks, `a` is a rank's rows of `Mᵀ`
/// and `b` holds, at their nodes, the rows of `Mᵀ` they name). The sums are order-free, so the
/// rows are bitwise the CPU engine's. Returns the rows on the host with the figures.
pub(crate) fn expand_prune<T: Scalar>(
    engine: &GpuEngine,
    a: &Csr<T>,
    b: &Csr<T>,
    first: usize,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(Csr<T>, Iteration)> {
    let fuse = params.fused && crate::spgemm::cpu::rows::products_are_positive(a.view(), b.view());
    let expansion = Expansion::new(engine, params, inflation, progress, first);
    let (next, it, _) = expansion.run(a.nrows(), b.ncols(), |consume| {
        engine.multiply_deferred(a, b, fuse, consume)
    })?;
    Ok((next.download(engine.gpu())?, it))
}

/// [`expand_prune`] of operands on the device, the rows made staying there. `positive`: every
/// product of `a·b` is positive (its dense rows are then made and pruned in one kernel).
/// Returns the rows, the figures and the smallest value kept.
#[cfg(feature = "mpi")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn expand_prune_resident<T: Scalar>(
    engine: &GpuEngine,
    a: DeviceCsr<T>,
    b: DeviceCsr<T>,
    positive: bool,
    first: usize,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(DeviceCsr<T>, Iteration, f64)> {
    let fuse = params.fused && positive;
    let expansion = Expansion::new(engine, params, inflation, progress, first);
    let (nrows, ncols) = (a.nrows(), b.ncols());
    expansion.run(nrows, ncols, |consume| {
        engine.multiply_resident(a, b, fuse, consume)
    })
}

/// What a product's batches need to be pruned as rows of `M²` from node `first` on.
struct Expansion<'a> {
    engine: &'a GpuEngine,
    params: &'a MclParams,
    inflation: f64,
    progress: &'a IterationProgress,
    first: usize,
}

impl<'a> Expansion<'a> {
    fn new(
        engine: &'a GpuEngine,
        params: &'a MclParams,
        inflation: f64,
        progress: &'a IterationProgress,
        first: usize,
    ) -> Self {
        Expansion {
            engine,
            params,
            inflation,
            progress,
            first,
        }
    }

    /// The rows of a product of `nrows` rows and `ncols` columns that `multiply` makes,
    /// handing each batch to the callback it is given, pruned as they come and stacked.
    fn run<T: Scalar>(
        self,
        nrows: usize,
        ncols: usize,
        multiply: impl FnOnce(&mut DeferredConsumer<'_, T>) -> Result<crate::spgemm::ProductStats>,
    ) -> Result<(DeviceCsr<T>, Iteration, f64)> {
        let start = Instant::now();
        self.progress.set_totals(nrows as u64, nrows as u64);
        let first = self.first;
        let mut made = Made::new(self.engine, self.params, self.inflation, self.progress);
        let stats = multiply(&mut |rows, c, deferred, da, db| {
            let fused = deferred.as_ref().map(|d| FusedRows {
                a: da,
                b: db,
                row0: rows.start as u64,
                rows: d,
            });
            made.absorb(rows.clone(), c, fused, (first + rows.start) as u64)
        })?;
        made.finish(ncols, &stats, start)
    }
}

/// An iteration's pruned batches as they come from the engine, with their figures.
struct Made<'a, T: Scalar> {
    engine: &'a GpuEngine,
    params: &'a MclParams,
    inflation: f64,
    progress: &'a IterationProgress,
    parts: Vec<DeviceCsr<T>>,
    it: Iteration,
    /// The smallest value kept.
    least: f64,
    /// The most pool entries a fused row of the batches so far took (with a margin): where
    /// ties keep more than max(S, R) entries (iteration 1 of an unweighted graph), they do so
    /// in every batch, and a pool sized for max(S, R) made each batch's fused rows twice.
    pool_per_row: u64,
}

impl<'a, T: Scalar> Made<'a, T> {
    fn new(
        engine: &'a GpuEngine,
        params: &'a MclParams,
        inflation: f64,
        progress: &'a IterationProgress,
    ) -> Self {
        Made {
            engine,
            params,
            inflation,
            progress,
            parts: Vec::new(),
            it: Iteration::default(),
            least: f64::INFINITY,
            pool_per_row: 0,
        }
    }

    /// Prunes the expanded batch `c` of `rows` (row 0 is node `node0`), its deferred dense rows
    /// `fused` made and pruned in one kernel, and keeps it.
    fn absorb(
        &mut self,
        rows: std::ops::Range<usize>,
        c: DeviceCsr<T>,
        fused: Option<FusedRows<'_, T>>,
        node0: u64,
    ) -> Result<()> {
        self.it.batches += 1;
        self.it.fused += fused.as_ref().map_or(0, |f| f.rows.count());
        let p = prune_expansion(
            self.engine.gpu(),
            &c,
            fused,
            node0,
            &self.params.prune,
            self.inflation,
            self.pool_per_row,
            self.engine.poisons(),
        )?;
        self.pool_per_row = self.pool_per_row.max(p.pool_per_row + p.pool_per_row / 8);
        drop(c);
        self.it.expanded += p.fused_expanded;
        self.it.chaos = self.it.chaos.max(p.chaos);
        self.it.kept += p.batch.nnz();
        self.least = self.least.min(p.least);
        self.parts.push(p.batch);
        self.progress.advance(rows.len() as u64, rows.len() as u64);
        crate::interrupt::check()
    }

    /// The pruned batches stacked into one matrix of `ncols` columns, with the iteration's
    /// figures (the product's `stats`, timed from `start`) and the smallest value kept.
    fn finish(
        self,
        ncols: usize,
        stats: &crate::spgemm::ProductStats,
        start: Instant,
    ) -> Result<(DeviceCsr<T>, Iteration, f64)> {
        let next = DeviceCsr::stack(self.engine.gpu(), self.parts, ncols)?;
        let mut it = self.it;
        it.expanded += stats.nnz;
        it.products = stats.intermediate_products;
        it.expand_seconds = stats.device_seconds;
        it.seconds = start.elapsed().as_secs_f64();
        Ok((next, it, self.least))
    }
}

/// One iteration of a host matrix through the device (for [`super::iterate`]'s callers).
pub(crate) fn iterate_host<T: Scalar>(
    m: &Csr<T>,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(Csr<T>, Iteration)> {
    let engine = engine(params)?;
    let dm = DeviceMatrix::upload(&engine, m)?;
    let (next, it) = iterate(&engine, dm, params, inflation, progress)?;
    Ok((next.m.download(engine.gpu())?, it))
}
