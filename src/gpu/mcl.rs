//! MCL's per-column steps on the device (kernels/mcl.cu): each expanded column is pruned as
//! [`crate::mcl::prune`] does it, then inflated and normalised as [`crate::mcl::inflate`] does,
//! and its chaos measured, without leaving the GPU.

use super::matrix::DeviceCsr;
use super::prims::{check, exclusive_scan, launch, read_at, shape, uninit, zeros};
use super::Gpu;
use crate::error::Result;
use crate::mcl::PruneParams;
use crate::scalar::Scalar;
use cudarc::driver::PushKernelArg;

/// Threads of the pruning blocks (PRUNE_THREADS in kernels/mcl.cu).
const PRUNE_THREADS: u32 = 256;

/// Prunes, inflates (power `inflation`) and normalises every row of `batch` (an expanded batch
/// of `Mᵀ·Mᵀ`, whose row 0 is column `row0` of `M`), as mcl does each column. Returns the new
/// rows and the largest chaos among them (0 when none is positive). With `poison`, the output
/// buffers are filled with 0xFF bytes before the kernels write them.
pub fn prune_batch<T: Scalar>(
    gpu: &Gpu,
    batch: &DeviceCsr<T>,
    row0: u64,
    params: &PruneParams,
    inflation: f64,
    poison: bool,
) -> Result<(DeviceCsr<T>, f64)> {
    let s = &gpu.main;
    let n = batch.nrows as u64;
    let mut out_ptr = zeros::<u64>(s, batch.nrows + 1, "pruned row sizes")?;
    let mut chaos = zeros::<u64>(s, 1, "the chaos")?;
    if n == 0 {
        return Ok((
            DeviceCsr {
                nrows: 0,
                ncols: batch.ncols,
                nnz: 0,
                row_ptr: out_ptr,
                col_idx: zeros(s, 1, "pruned columns")?,
                values: zeros(s, 1, "pruned values")?,
            },
            0.0,
        ));
    }
    let mut bar = zeros::<T>(s, batch.nrows, "pruning bars")?;
    let mut mass = zeros::<f64>(s, batch.nrows, "kept masses")?;
    let mut isum = zeros::<f64>(s, batch.nrows, "inflated sums")?;
    let cutoff = T::from_f64(params.cutoff());
    let pct = params.pct as f64 / 100.0;
    let blocks = n.min(gpu.multiprocessors() as u64 * 16);
    let plan = format!("mcl_prune_plan_{}", T::NAME);
    launch(gpu, s, &plan, shape(blocks, PRUNE_THREADS, 0)?, |l| {
        l.arg(&batch.row_ptr)
            .arg(&batch.values)
            .arg(&n)
            .arg(&cutoff)
            .arg(&params.select)
            .arg(&params.recover)
            .arg(&pct)
            .arg(&inflation)
            .arg(&mut out_ptr)
            .arg(&mut bar)
            .arg(&mut mass)
            .arg(&mut isum)
            .arg(&mut chaos);
    })?;
    exclusive_scan(gpu, s, &mut out_ptr, n + 1, "pruned row sizes")?;
    let nnz = read_at(s, &out_ptr, batch.nrows, "the pruned entry count")?;
    let mut col = uninit::<u32>(s, nnz as usize, poison, "pruned columns")?;
    let mut val = uninit::<T>(s, nnz as usize, poison, "pruned values")?;
    let write = format!("mcl_prune_write_{}", T::NAME);
    launch(gpu, s, &write, shape(blocks, PRUNE_THREADS, 0)?, |l| {
        l.arg(&batch.row_ptr)
            .arg(&batch.col_idx)
            .arg(&batch.values)
            .arg(&n)
            .arg(&row0)
            .arg(&bar)
            .arg(&mass)
            .arg(&isum)
            .arg(&inflation)
            .arg(&out_ptr)
            .arg(&mut col)
            .arg(&mut val);
    })?;
    let bits = read_at(s, &chaos, 0, "the chaos")?;
    check("prune a batch", s.synchronize())?;
    Ok((
        DeviceCsr {
            nrows: batch.nrows,
            ncols: batch.ncols,
            nnz,
            row_ptr: out_ptr,
            col_idx: col,
            values: val,
        },
        f64::from_bits(bits),
    ))
}
