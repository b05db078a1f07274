//! The numeric phase: each row of C accumulated into its place. Light rows in shared-memory hash
//! tables or dense-row windows on the light stream; the heavy rows' final chunks in hash tables or
//! dense chunk accumulators on the heavy stream, columns shifted back by each chunk's base.

use super::batch::{Batch, DenseList, HeavyChunks};
use super::chunks::buf;
use super::operands::Operands;
use super::{sum_bytes, summing, GpuEngine};
use crate::error::Result;
use crate::gpu::prims::{launch, shape};
use crate::gpu::profile::Profile;
use crate::scalar::Scalar;
use crate::spgemm::params::MagnusParams;
use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};
use std::sync::Arc;

impl GpuEngine {
    /// Writes the batch's rows of C into `c_col` and `c_val` (at the offsets `batch.row_nnz`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn numeric<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        batch: &Batch,
        chunks: &HeavyChunks<T>,
        c_col: &mut CudaSlice<u32>,
        c_val: &mut CudaSlice<T>,
        prof: &mut Profile,
    ) -> Result<()> {
        self.numeric_light(ops, batch, c_col, c_val)?;
        prof.mark("numeric: light rows")?;
        self.numeric_heavy(ops, p, batch, chunks, c_col, c_val)
    }

    /// Light rows: hash-table bins, then the dense rows made here (the large ones first, on
    /// the main stream, where they are split by size: see `symbolic_light`).
    fn numeric_light<T: Scalar>(
        &self,
        ops: &Operands<T>,
        batch: &Batch,
        c_col: &mut CudaSlice<u32>,
        c_val: &mut CudaSlice<T>,
    ) -> Result<()> {
        let g = &*self.gpu;
        let light = &g.light;
        let row0 = batch.row0;
        let quantized = self.tuning.quantized_sums;
        let sum_bytes = sum_bytes::<T>(quantized);
        let exact_below = self.exact_below(ops.c_cols);
        let mut dense = batch.dense_lists();
        if dense.len() > 1 {
            self.dense_numeric(ops, batch, &dense.remove(0), &g.main, c_col, c_val)?;
        }
        for (b, bin) in batch.bins.iter().enumerate() {
            if batch.row_lists.counts[b] == 0 {
                continue;
            }
            let list = batch.row_lists.view(b);
            let cfg = shape(
                batch.row_lists.counts[b],
                bin.threads,
                bin.table as u64 * (4 + sum_bytes),
            )?;
            launch(
                g,
                light,
                &summing::<T>("hash_rows_numeric", quantized),
                cfg,
                |l| {
                    ops.push_operands(l);
                    l.arg(&row0)
                        .arg(&list)
                        .arg(&bin.table)
                        .arg(&ops.m_ptr)
                        .arg(&ops.m_col)
                        .arg(&ops.has_mask)
                        .arg(&batch.prod)
                        .arg(&exact_below)
                        .arg(&batch.row_nnz)
                        .arg(&mut *c_col)
                        .arg(&mut *c_val);
                },
            )?;
        }
        for list in &dense {
            self.dense_numeric(ops, batch, list, light, c_col, c_val)?;
        }
        Ok(())
    }

    /// The dense rows of `list` (rows, count, blocks) on `stream`, into their places in C.
    fn dense_numeric<T: Scalar>(
        &self,
        ops: &Operands<T>,
        batch: &Batch,
        (rows, count, blocks): &DenseList<'_>,
        stream: &Arc<CudaStream>,
        c_col: &mut CudaSlice<u32>,
        c_val: &mut CudaSlice<T>,
    ) -> Result<()> {
        let quantized = self.tuning.quantized_sums;
        let shared = blocks.numeric_shared(sum_bytes::<T>(quantized));
        let cfg = shape(*count, blocks.threads, shared)?;
        let kernel = summing::<T>("dense_rows_numeric", quantized);
        let exact_below = self.exact_below(ops.c_cols);
        launch(&self.gpu, stream, &kernel, cfg, |l| {
            ops.push_operands(l);
            l.arg(&batch.row0)
                .arg(rows)
                .arg(&ops.c_cols)
                .arg(&exact_below)
                .arg(&blocks.numeric_width)
                .arg(&batch.row_nnz)
                .arg(c_col)
                .arg(c_val);
        })
    }

    /// The final chunks of the heavy rows.
    fn numeric_heavy<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        batch: &Batch,
        chunks: &HeavyChunks<T>,
        c_col: &mut CudaSlice<u32>,
        c_val: &mut CudaSlice<T>,
    ) -> Result<()> {
        let g = &*self.gpu;
        let heavy = &g.heavy;
        let row0 = batch.row0;
        let nch = p.chunks_required as u32;
        let width_shift = p.chunk_width.trailing_zeros();
        let heavy_rows = batch.heavy_rows();
        for f in &chunks.finals {
            let (ptr, hh, base) = f.rows();
            let col = buf(&chunks.bufs.col, f.buffer)?;
            let val = buf(&chunks.bufs.val, f.buffer)?;
            for c in f.launches(p.chunk_width, Some(self.tuning.quantized_sums))? {
                launch(g, heavy, &c.kernel, c.cfg, |l| {
                    l.arg(&ptr)
                        .arg(col)
                        .arg(val)
                        .arg(&c.list)
                        .arg(&hh)
                        .arg(&base)
                        .arg(&c.size)
                        .arg(&width_shift)
                        .arg(&nch)
                        .arg(&heavy_rows)
                        .arg(&row0)
                        .arg(&ops.m_ptr)
                        .arg(&ops.m_col)
                        .arg(&ops.has_mask)
                        .arg(&chunks.grid)
                        .arg(&batch.row_nnz)
                        .arg(&mut *c_col)
                        .arg(&mut *c_val);
                })?;
            }
        }
        Ok(())
    }
}
