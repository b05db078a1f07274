//! C's row offsets: heavy rows sum their chunks' counts from the chunk grid, one prefix sum over
//! the batch's rows gives the offsets, and C is allocated at its exact size.

use super::batch::{Batch, HeavyChunks};
use super::GpuEngine;
use crate::error::Result;
use crate::gpu::prims::{exclusive_scan, launch, read_at, strided, uninit};
use crate::scalar::Scalar;
use crate::spgemm::params::MagnusParams;
use cudarc::driver::{CudaSlice, PushKernelArg};

impl GpuEngine {
    /// Turns `batch.row_nnz` into C's row offsets (and the chunk grid into the chunks' offsets),
    /// then allocates C's columns and values. Returns C's entry count with them.
    pub(super) fn offsets<T: Scalar>(
        &self,
        p: &MagnusParams,
        batch: &mut Batch,
        chunks: &mut HeavyChunks<T>,
    ) -> Result<(u64, CudaSlice<u32>, CudaSlice<T>)> {
        let g = &*self.gpu;
        let main = &g.main;
        let (n, nheavy) = (batch.n, batch.nheavy);
        let r_chunks = p.chunks_required;
        if nheavy > 0 {
            let grid = &mut chunks.grid;
            exclusive_scan(g, main, grid, nheavy * r_chunks + 1, "the chunk grid")?;
            let nch = r_chunks as u32;
            let heavy_rows = batch.row_lists.view(batch.bins.len());
            launch(g, main, "grid_row_sums", strided(g, nheavy, 256), |l| {
                l.arg(&*grid)
                    .arg(&heavy_rows)
                    .arg(&nheavy)
                    .arg(&nch)
                    .arg(&mut batch.row_nnz);
            })?;
        }
        exclusive_scan(g, main, &mut batch.row_nnz, n + 1, "row sizes of C")?;
        let nnz = read_at(main, &batch.row_nnz, n as usize, "C's entry count")?;
        let poison = self.tuning.poison;
        let c_col = uninit::<u32>(main, nnz as usize, poison, "C's columns")?;
        let c_val = uninit::<T>(main, nnz as usize, poison, "C's values")?;
        Ok((nnz, c_col, c_val))
    }
}
