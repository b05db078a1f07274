//! MCL with the matrix resident on the GPU: expansion by the gMAGNUS engine in row batches that
//! stay on the device, each pruned, inflated and measured there ([`crate::gpu::mcl`]) as soon as
//! it is made; the pruned batches are stacked into the next matrix on the device. Only the
//! per-batch chaos crosses to the host between iterations, and the limit at the end.

use super::{Iteration, MclParams};
use crate::csr::Csr;
use crate::error::Result;
use crate::gpu::matrix::DeviceCsr;
use crate::scalar::Scalar;
use crate::spgemm::gpu::{GpuEngine, GpuTuning};
use std::time::Instant;

/// The GPU engine for MCL: batches bounded by `params.batch_entries` when given, else by the
/// device's memory alone.
pub(crate) fn engine(params: &MclParams) -> Result<GpuEngine> {
    let tuning = GpuTuning::from_env();
    Ok(GpuEngine::open()?.with_tuning(GpuTuning {
        max_batch_entries: params.batch_entries.or(tuning.max_batch_entries),
        ..tuning
    }))
}

/// One MCL iteration on the device matrix `m` (the transposed matrix, as on the host). Returns
/// the next matrix and the iteration's figures (`index` 0).
pub(crate) fn iterate<T: Scalar>(
    engine: &GpuEngine,
    m: DeviceCsr<T>,
    params: &MclParams,
    inflation: f64,
) -> Result<(DeviceCsr<T>, Iteration)> {
    let start = Instant::now();
    let gpu = engine.gpu();
    let n = m.ncols();
    let poison = engine.poisons();
    let mut it = Iteration::default();
    let mut parts = Vec::new();
    let (stats, m) = engine.square_on_device(m, |rows, c| {
        it.expanded += c.nnz();
        it.batches += 1;
        let (pruned, chaos) = crate::gpu::mcl::prune_batch(
            gpu,
            &c,
            rows.start as u64,
            &params.prune,
            inflation,
            poison,
        )?;
        drop(c);
        it.chaos = it.chaos.max(chaos);
        it.kept += pruned.nnz();
        parts.push(pruned);
        crate::interrupt::check()
    })?;
    drop(m);
    let next = DeviceCsr::stack(gpu, parts, n)?;
    it.products = stats.intermediate_products;
    it.expand_seconds = stats.device_seconds;
    it.seconds = start.elapsed().as_secs_f64();
    Ok((next, it))
}

/// One iteration of a host matrix through the device (for [`super::iterate`]'s callers).
pub(crate) fn iterate_host<T: Scalar>(
    m: &Csr<T>,
    params: &MclParams,
    inflation: f64,
) -> Result<(Csr<T>, Iteration)> {
    let engine = engine(params)?;
    let dm = DeviceCsr::upload(engine.gpu(), m)?;
    let (next, it) = iterate(&engine, dm, params, inflation)?;
    Ok((next.download(engine.gpu())?, it))
}
