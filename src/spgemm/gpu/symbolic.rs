//! The symbolic phase: how many entries each row of C has. Light rows count theirs in
//! shared-memory hash tables or dense-row windows on the light stream; heavy rows are reordered
//! into chunks (`heavy.rs`) on the heavy stream and each final chunk's count goes into the chunk
//! grid.

use super::batch::{dense_lists, Batch, DenseList, HeavyChunks};
use super::chunks::{buf, Buffers};
use super::operands::Operands;
use super::GpuEngine;
use crate::error::Result;
use crate::gpu::prims::{launch, shape, zeros};
use crate::gpu::profile::Profile;
use crate::scalar::Scalar;
use crate::spgemm::params::MagnusParams;
use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};
use std::sync::Arc;

impl GpuEngine {
    /// Counts the entries of the batch's light rows into `batch.row_nnz` and those of its heavy
    /// rows' final chunks into the chunk grid, which it returns with the chunks.
    pub(super) fn symbolic<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        batch: &mut Batch,
        prof: &mut Profile,
    ) -> Result<HeavyChunks<T>> {
        self.symbolic_light(ops, batch)?;
        prof.mark("symbolic: light rows")?;
        self.symbolic_heavy(ops, p, batch, prof)
    }

    /// Light rows: hash-table bins, then the dense rows made here. Where the dense rows are
    /// split by size, the large ones go first, on the main stream (idle until the join), so
    /// that their blocks, a multiprocessor each, start before the light rows fill the GPU.
    fn symbolic_light<T: Scalar>(&self, ops: &Operands<T>, batch: &mut Batch) -> Result<()> {
        let g = &*self.gpu;
        let light = &g.light;
        let Batch {
            row0,
            bins,
            row_lists,
            dense,
            row_nnz,
            ..
        } = batch;
        let mut dense = dense_lists(dense.as_ref(), bins.len() + 1, row_lists);
        if dense.len() > 1 {
            self.dense_symbolic(ops, *row0, &dense.remove(0), &g.main, row_nnz)?;
        }
        for (b, bin) in bins.iter().enumerate() {
            if row_lists.counts[b] == 0 {
                continue;
            }
            let list = row_lists.view(b);
            let cfg = shape(row_lists.counts[b], bin.threads, bin.table as u64 * 4)?;
            launch(g, light, "hash_rows_symbolic", cfg, |l| {
                ops.push_structure(l);
                l.arg(&*row0)
                    .arg(&list)
                    .arg(&bin.table)
                    .arg(&ops.m_ptr)
                    .arg(&ops.m_col)
                    .arg(&ops.has_mask)
                    .arg(&mut *row_nnz);
            })?;
        }
        for list in &dense {
            self.dense_symbolic(ops, *row0, list, light, row_nnz)?;
        }
        Ok(())
    }

    /// The dense rows of `list` (rows, count, blocks) on `stream`: each row's entries in C.
    fn dense_symbolic<T: Scalar>(
        &self,
        ops: &Operands<T>,
        row0: u64,
        (rows, count, blocks): &DenseList<'_>,
        stream: &Arc<CudaStream>,
        row_nnz: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let cfg = shape(*count, blocks.threads, blocks.symbolic_shared())?;
        launch(&self.gpu, stream, "dense_rows_symbolic", cfg, |l| {
            ops.push_structure(l);
            l.arg(&row0)
                .arg(rows)
                .arg(&ops.c_cols)
                .arg(&blocks.symbolic_width)
                .arg(row_nnz);
        })
    }

    /// Heavy rows: outer product, multisplit levels, then the symbolic of the final chunks.
    fn symbolic_heavy<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        batch: &Batch,
        prof: &mut Profile,
    ) -> Result<HeavyChunks<T>> {
        let g = &*self.gpu;
        let heavy = &g.heavy;
        let (nheavy, row0) = (batch.nheavy, batch.row0);
        let r_chunks = p.chunks_required;
        let width_shift = p.chunk_width.trailing_zeros();
        let mut grid = zeros::<u64>(heavy, (nheavy * r_chunks) as usize + 1, "the chunk grid")?;
        let mut bufs = Buffers {
            col: [None, None],
            val: [None, None],
        };
        if nheavy == 0 {
            return Ok(HeavyChunks {
                grid,
                finals: Vec::new(),
                bufs,
            });
        }
        let heavy_rows = batch.heavy_rows();
        let finals = self.heavy_reorder(
            ops,
            p,
            &batch.prod,
            &heavy_rows,
            nheavy,
            row0,
            &batch.all_bins,
            &mut bufs,
            prof,
        )?;
        let nch = r_chunks as u32;
        for f in &finals {
            let (ptr, hh, base) = f.rows();
            let col = buf(&bufs.col, f.buffer)?;
            for c in f.launches(p.chunk_width, None)? {
                launch(g, heavy, &c.kernel, c.cfg, |l| {
                    l.arg(&ptr)
                        .arg(col)
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
                        .arg(&mut grid);
                })?;
            }
        }
        Ok(HeavyChunks { grid, finals, bufs })
    }
}
