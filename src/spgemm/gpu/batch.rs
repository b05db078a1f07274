//! A product's row batches: the loop that runs them (a batch that runs out of memory is split in
//! two and retried), and one batch start to finish as the paper's phase list: setup, symbolic,
//! C's offsets, numeric.

use super::bins::BinLists;
use super::chunks::{Buffers, FinalChunks};
use super::operands::Operands;
use super::plan::{Bin, DenseBlocks, DenseRows};
use super::{DeferredRows, GpuEngine};
use crate::error::{Error, Result};
use crate::gpu::matrix::DeviceCsr;
use crate::gpu::prims::{check, is_out_of_memory, zeros};
use crate::gpu::profile::Profile;
use crate::gpu::Gpu;
use crate::scalar::Scalar;
use crate::spgemm::params::MagnusParams;
use crate::spgemm::ProductStats;
use cudarc::driver::{CudaSlice, CudaStream, CudaView};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// One batch's rows as the setup phase routed them, and their sizes in C as the later phases
/// fill them in.
pub(super) struct Batch {
    /// The batch's first row (of C) and its row count.
    pub(super) row0: u64,
    pub(super) n: u64,
    /// The prefix of each row's intermediate products: Ĉ's row offsets.
    pub(super) prod: CudaSlice<u64>,
    /// The hash bins of C's rows.
    pub(super) bins: Vec<Bin>,
    /// Every hash bin (the heavy rows' chunks may use any).
    pub(super) all_bins: Vec<Bin>,
    /// The rows by bin: the hash bins, then the heavy rows, then the dense rows.
    pub(super) row_lists: BinLists,
    /// The dense-row accumulator, when this product uses it.
    pub(super) dense: Option<DenseRows>,
    /// Heavy rows (the outer product's).
    pub(super) nheavy: u64,
    /// Whether the dense rows are left to the caller ([`DeferredRows`]).
    pub(super) deferred: bool,
    /// Each row's entries in C; C's row offsets after the offsets phase.
    pub(super) row_nnz: CudaSlice<u64>,
}

impl Batch {
    /// The heavy rows, numbered from the batch's first row.
    pub(super) fn heavy_rows(&self) -> CudaView<'_, u32> {
        self.row_lists.view(self.bins.len())
    }

    /// The dense rows made here (none when they are deferred to the caller), as lists of rows
    /// numbered from the batch's first row, each with its count and the blocks it runs in: the
    /// large rows first, then the small ones where the plan splits them off (`DenseRows::small`).
    pub(super) fn dense_lists(&self) -> Vec<DenseList<'_>> {
        dense_lists(self.dense.as_ref(), self.bins.len() + 1, &self.row_lists)
    }
}

/// A list of dense rows: the rows (numbered from the batch's first row), their count and the
/// blocks they run in.
pub(super) type DenseList<'a> = (CudaView<'a, u32>, u64, DenseBlocks);

/// The dense rows' lists of [`Batch::dense_lists`], whose first bin is `first`.
pub(super) fn dense_lists<'a>(
    dense: Option<&DenseRows>,
    first: usize,
    bins: &'a BinLists,
) -> Vec<DenseList<'a>> {
    let Some(d) = dense.filter(|d| !d.deferred) else {
        return Vec::new();
    };
    let lists = match d.small {
        Some(small) => vec![(first + 1, d.large), (first, small)],
        None => vec![(first, d.large)],
    };
    lists
        .into_iter()
        .map(|(b, blocks)| (bins.view(b), bins.counts[b], blocks))
        .filter(|&(_, count, _)| count > 0)
        .collect()
}

/// The heavy rows after their reorder: the chunk grid (each chunk's entries in C, then their
/// offsets), the sets of final chunks and the Ĉ buffers they live in.
pub(super) struct HeavyChunks<T: Scalar> {
    pub(super) grid: CudaSlice<u64>,
    pub(super) finals: Vec<FinalChunks<T>>,
    pub(super) bufs: Buffers,
}

impl GpuEngine {
    /// Runs the batches of `rows` (`products`: the prefix of their intermediate products;
    /// `counted`: that prefix on the device, where it is there already, for the first batch to
    /// take), splitting a batch that runs out of memory, and hands each product to `consume`
    /// in order.
    pub(super) fn run_batches<T: Scalar>(
        &self,
        ops: &Operands<T>,
        rows: Range<usize>,
        products: &[u64],
        mut counted: Option<CudaSlice<u64>>,
        prof: &mut Profile,
        mut consume: impl FnMut(
            Range<usize>,
            DeviceCsr<T>,
            Option<DeferredRows>,
            &mut Profile,
        ) -> Result<()>,
    ) -> Result<ProductStats> {
        let p = self.params::<T>(ops.c_cols);
        let mut stats = ProductStats {
            intermediate_products: *products.last().unwrap_or(&0),
            ..Default::default()
        };
        let mut pending = self.plan_batches(products, &rows, &p, ops)?;
        pending.reverse();
        // The batches' device time starts once the operands are on the device (their copies
        // overlapped the host's planning): a product's time is the product's, as cuSPARSE's is.
        check("upload the operands", self.gpu.main.synchronize())?;
        while let Some(batch) = pending.pop() {
            let at = batch.start - rows.start;
            let batch_products = &products[at..=at + batch.len()];
            // The prefix of every row serves the batch of the first rows (its values from 0).
            let counted = counted.take().filter(|_| at == 0);
            match self.run_batch(
                ops,
                &p,
                batch.clone(),
                batch_products,
                counted,
                prof,
                &mut stats,
            ) {
                Ok((c, deferred)) => {
                    stats.nnz += c.nnz;
                    consume(batch, c, deferred, prof)?;
                    prof.mark("hand over the batch")?;
                }
                Err(e) if is_out_of_memory(&e) && batch.len() > 1 => {
                    // Split and retry: the second half is done after the first.
                    let mid = batch.start + batch.len() / 2;
                    pending.push(mid..batch.end);
                    pending.push(batch.start..mid);
                }
                Err(e) if is_out_of_memory(&e) => {
                    return Err(Error::gpu(
                        format!("row {}", batch.start),
                        format!(
                            "one row's product does not fit in the GPU's memory ({e}); \
                             use --engine cpu"
                        ),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(stats)
    }

    /// One batch of rows, start to finish: setup, symbolic, C's offsets, numeric. Its rows of C
    /// stay on the device; deferred dense rows are left out of C and listed, with `products`
    /// (the prefix of the batch's intermediate products; on the device in `counted`, where
    /// it is there already).
    #[allow(clippy::too_many_arguments)]
    fn run_batch<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        rows: Range<usize>,
        products: &[u64],
        counted: Option<CudaSlice<u64>>,
        prof: &mut Profile,
        stats: &mut ProductStats,
    ) -> Result<(DeviceCsr<T>, Option<DeferredRows>)> {
        let g = &*self.gpu;
        let timer = Instant::now();
        let (main, light, heavy) = (&g.main, &g.light, &g.heavy);
        if rows.is_empty() {
            let c = DeviceCsr {
                nrows: 0,
                ncols: ops.c_cols as usize,
                nnz: 0,
                row_ptr: zeros(main, 1, "C's row offsets")?,
                col_idx: zeros(main, 1, "C's columns")?,
                values: zeros(main, 1, "C's values")?,
            };
            return Ok((c, None));
        }
        // The batch's buffers are declared before the guard, so that a batch failing part-way
        // (out of memory: split and retried) frees them only after the guard has waited for
        // every stream: the light and heavy streams' queued kernels may still use them.
        let mut batch: Batch;
        let mut chunks: HeavyChunks<T>;
        let (nnz, mut c_col, mut c_val): (u64, CudaSlice<u32>, CudaSlice<T>);
        let settle = Settle::new(g);
        batch = self.setup(ops, p, &rows, counted, prof)?;
        fork(main, &[light, heavy])?;
        chunks = self.symbolic(ops, p, &mut batch, prof)?;
        join(main, &[light, heavy])?;
        prof.mark("symbolic: heavy chunks")?;
        (nnz, c_col, c_val) = self.offsets(p, &mut batch, &mut chunks)?;
        prof.mark("C's offsets, allocate C")?;
        fork(main, &[light, heavy])?;
        self.numeric(ops, p, &batch, &chunks, &mut c_col, &mut c_val, prof)?;
        join(main, &[light, heavy])?;
        prof.mark("numeric: heavy chunks")?;
        check("numeric", main.synchronize())?;
        settle.done();
        stats.device_seconds += timer.elapsed().as_secs_f64();

        let c = DeviceCsr {
            nrows: batch.n as usize,
            ncols: ops.c_cols as usize,
            nnz,
            row_ptr: batch.row_nnz,
            col_idx: c_col,
            values: c_val,
        };
        let window = batch.dense.as_ref().map_or(0, |d| d.deferred_window);
        let deferred = batch.deferred.then(|| DeferredRows {
            lists: batch.row_lists,
            bin: batch.bins.len() + 1,
            window,
            products: products.to_vec(),
        });
        Ok((c, deferred))
    }
}

/// Waits for every stream of the GPU when dropped before [`Settle::done`]. The streams order
/// themselves (cudarc's per-buffer events are off: `gpu::Gpu`), so a batch that fails part-way
/// must not free a buffer while another stream's queued kernels may still use it.
struct Settle<'g> {
    gpu: &'g Gpu,
    pending: bool,
}

impl<'g> Settle<'g> {
    fn new(gpu: &'g Gpu) -> Self {
        Settle { gpu, pending: true }
    }

    /// Every stream is known to be done (the batch ended with `main` joined and synchronized).
    fn done(mut self) {
        self.pending = false;
    }
}

impl Drop for Settle<'_> {
    fn drop(&mut self) {
        if self.pending {
            // The batch's error is what the caller reports; a failed wait leaves nothing more
            // to do here than free the buffers, as before.
            let _ = self.gpu.ctx.synchronize();
        }
    }
}

/// Makes each of `others` wait for the work queued so far on `main`.
fn fork(main: &Arc<CudaStream>, others: &[&Arc<CudaStream>]) -> Result<()> {
    for o in others {
        check("order the streams", o.join(main))?;
    }
    Ok(())
}

/// Makes `main` wait for the work queued so far on each of `others`.
fn join(main: &Arc<CudaStream>, others: &[&Arc<CudaStream>]) -> Result<()> {
    for o in others {
        check("order the streams", main.join(o))?;
    }
    Ok(())
}
