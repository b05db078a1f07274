//! MCL's per-column steps on the device (kernels/mcl.cu): each expanded column is pruned as
//! [`crate::mcl::prune`] does it, then inflated and normalised as [`crate::mcl::inflate`] does,
//! and its chaos measured, without leaving the GPU. Dense columns that the engine deferred
//! ([`DeferredRows`]) are made and pruned in one kernel (kernels/mcl_dense.cu), so they are
//! never stored unpruned.

use crate::error::Result;
use crate::gpu::matrix::DeviceCsr;
use crate::gpu::prims::{check, exclusive_scan, launch, read_at, shape, uninit, zeros};
use crate::gpu::transfer::{download, upload};
use crate::gpu::Gpu;
use crate::mcl::PruneParams;
use crate::scalar::Scalar;
use crate::spgemm::gpu::{DeferredRows, DENSE_CURSORS, MCL_WIDE_HEAD_BYTES};
use cudarc::driver::{CudaSlice, PushKernelArg};

/// Threads of the pruning blocks (PRUNE_THREADS in kernels/mcl.cu).
const PRUNE_THREADS: u32 = 256;
/// Threads of the fused blocks (DENSE_ROW_THREADS in kernels/dense.cu).
const FUSED_THREADS: u32 = 1024;

/// Slots of the figures buffer the kernels update: the chaos and the smallest value written
/// (bits of non-negative doubles), the entries of M² made by the fused kernel and the pool
/// entries it claimed.
const CHAOS: usize = 0;
const LEAST: usize = 1;
const EXPANDED: usize = 2;
const POOL_USED: usize = 3;
/// The figures before any kernel ran: the smallest value is +inf.
const FIGURES_AT_START: [u64; 4] = [0, 0x7ff0_0000_0000_0000, 0, 0];

/// The rows of an expansion batch that the engine deferred, with the operands `A·B` they are
/// rows of (in one process both are the matrix being squared).
pub struct FusedRows<'a, T: Scalar> {
    /// The left operand: its row `row0 + r` makes the batch's row `r`.
    pub a: &'a DeviceCsr<T>,
    /// The right operand.
    pub b: &'a DeviceCsr<T>,
    /// The row of `a` that makes the batch's row 0.
    pub row0: u64,
    /// The deferred rows.
    pub rows: &'a DeferredRows,
}

/// A pruned batch and its figures.
pub struct Pruned<T: Scalar> {
    /// The pruned, inflated and normalised rows.
    pub batch: DeviceCsr<T>,
    /// The largest chaos of its rows (0 when none is positive).
    pub chaos: f64,
    /// The smallest value it holds (+inf when it holds none).
    pub least: f64,
    /// Entries of M² the fused kernel made (the deferred rows' entries before pruning).
    pub fused_expanded: u64,
}

/// Prunes, inflates (power `inflation`) and normalises every row of `batch` (an expanded batch
/// of `Mᵀ·Mᵀ`, whose row 0 is column `node0` of `M`), as mcl does each column. Returns the new
/// rows and the largest chaos among them (0 when none is positive). With `poison`, the output
/// buffers are filled with 0xFF bytes before the kernels write them.
pub fn prune_batch<T: Scalar>(
    gpu: &Gpu,
    batch: &DeviceCsr<T>,
    node0: u64,
    params: &PruneParams,
    inflation: f64,
    poison: bool,
) -> Result<(DeviceCsr<T>, f64)> {
    let p = prune_expansion(gpu, batch, None, node0, params, inflation, poison)?;
    Ok((p.batch, p.chaos))
}

/// [`prune_batch`], with the deferred rows of `fused` (which have no entries in `batch`) made
/// and pruned in one kernel and put in their places.
pub fn prune_expansion<T: Scalar>(
    gpu: &Gpu,
    batch: &DeviceCsr<T>,
    fused: Option<FusedRows<'_, T>>,
    node0: u64,
    params: &PruneParams,
    inflation: f64,
    poison: bool,
) -> Result<Pruned<T>> {
    let s = &gpu.main;
    let n = batch.nrows as u64;
    let mut figures = upload(gpu, s, &FIGURES_AT_START, "the pruning's figures")?;
    if n == 0 {
        return Ok(Pruned {
            batch: DeviceCsr {
                nrows: 0,
                ncols: batch.ncols,
                nnz: 0,
                row_ptr: zeros(s, 1, "pruned row sizes")?,
                col_idx: zeros(s, 1, "pruned columns")?,
                values: zeros(s, 1, "pruned values")?,
            },
            chaos: 0.0,
            least: f64::INFINITY,
            fused_expanded: 0,
        });
    }
    let cutoff = T::from_f64(params.cutoff());
    let pct = params.pct as f64 / 100.0;
    let fused = fused.filter(|f| f.rows.count() > 0);
    let has_fused = i32::from(fused.is_some());
    // Every row starts as not fused (NOT_FUSED: all bits set).
    let mut fused_len = uninit::<u64>(s, batch.nrows, true, "fused row sizes")?;
    let mut pool_at = zeros::<u64>(s, batch.nrows, "fused row places")?;
    let mut bar = zeros::<T>(s, batch.nrows, "pruning bars")?;
    let mut mass = zeros::<f64>(s, batch.nrows, "kept masses")?;
    let mut isum = zeros::<f64>(s, batch.nrows, "inflated sums")?;
    let blocks = n.min(gpu.multiprocessors() as u64 * 16);
    let plan = format!("mcl_prune_plan_{}", T::NAME);
    // A pruned column keeps at most max(S, R) entries but for ties at the bar: the pool's first
    // size. When ties overfill it, the fused kernel has counted what it needs, and everything
    // runs again with that (the rows' sizes may move by rounding, hence the margin).
    let mut pool_cap = match (&fused, params.select) {
        (None, _) => 0,
        (Some(_), 0) => batch.ncols as u64,
        (Some(_), s) => s.max(params.recover) as u64,
    }
    .clamp(1, batch.ncols.max(1) as u64)
        * fused.as_ref().map_or(0, |f| f.rows.count());
    // The wide rows' order, made once for every run of the loop.
    let wide = match &fused {
        Some(f) if f.rows.window() > 0 => Some(longest_first(gpu, f)?),
        _ => None,
    };
    let (pool, out_ptr, nnz, got) = loop {
        let mut pool = Pool::<T>::new(gpu, pool_cap, poison)?;
        let mut out_ptr = zeros::<u64>(s, batch.nrows + 1, "pruned row sizes")?;
        if let Some(f) = &fused {
            fused_rows(
                gpu,
                f,
                wide.as_ref(),
                &mut pool,
                node0,
                params,
                inflation,
                &mut fused_len,
                &mut pool_at,
                &mut figures,
                poison,
            )?;
        }
        let mut chaos = figures.slice_mut(CHAOS..CHAOS + 1);
        launch(gpu, s, &plan, shape(blocks, PRUNE_THREADS, 0)?, |l| {
            l.arg(&batch.row_ptr)
                .arg(&batch.values)
                .arg(&n)
                .arg(&cutoff)
                .arg(&params.select)
                .arg(&params.recover)
                .arg(&pct)
                .arg(&inflation)
                .arg(&fused_len)
                .arg(&has_fused)
                .arg(&mut out_ptr)
                .arg(&mut bar)
                .arg(&mut mass)
                .arg(&mut isum)
                .arg(&mut chaos);
        })?;
        exclusive_scan(gpu, s, &mut out_ptr, n + 1, "pruned row sizes")?;
        let nnz = read_at(s, &out_ptr, batch.nrows, "the pruned entry count")?;
        let got = download(gpu, s, &figures, 4, "the pruning's figures")?;
        if got[POOL_USED] <= pool.cap {
            break (pool, out_ptr, nnz, got);
        }
        pool_cap = got[POOL_USED] + got[POOL_USED] / 8;
        figures = upload(gpu, s, &FIGURES_AT_START, "the pruning's figures")?;
    };
    let mut col = uninit::<u32>(s, nnz as usize, poison, "pruned columns")?;
    let mut val = uninit::<T>(s, nnz as usize, poison, "pruned values")?;
    let write = format!("mcl_prune_write_{}", T::NAME);
    let mut least = figures.slice_mut(LEAST..LEAST + 1);
    launch(gpu, s, &write, shape(blocks, PRUNE_THREADS, 0)?, |l| {
        l.arg(&batch.row_ptr)
            .arg(&batch.col_idx)
            .arg(&batch.values)
            .arg(&n)
            .arg(&node0)
            .arg(&bar)
            .arg(&mass)
            .arg(&isum)
            .arg(&inflation)
            .arg(&fused_len)
            .arg(&pool_at)
            .arg(&pool.col)
            .arg(&pool.val)
            .arg(&has_fused)
            .arg(&out_ptr)
            .arg(&mut col)
            .arg(&mut val)
            .arg(&mut least);
    })?;
    let least = read_at(s, &figures, LEAST, "the smallest pruned value")?;
    check("prune a batch", s.synchronize())?;
    Ok(Pruned {
        batch: DeviceCsr {
            nrows: batch.nrows,
            ncols: batch.ncols,
            nnz,
            row_ptr: out_ptr,
            col_idx: col,
            values: val,
        },
        chaos: f64::from_bits(got[CHAOS]),
        least: f64::from_bits(least),
        fused_expanded: got[EXPANDED],
    })
}

/// The wide rows of `f`, their A rows longest first (equal ones in row order), and the longest
/// one's A entries: the wide kernel's blocks claim rows in list order, and a long row claimed
/// last kept its block busy long after the others had finished.
fn longest_first<T: Scalar>(gpu: &Gpu, f: &FusedRows<'_, T>) -> Result<(CudaSlice<u32>, u64)> {
    let s = &gpu.main;
    let listed = f.rows.rows();
    let mut rows = check("copy the wide rows to the host", s.clone_dtoh(&listed))?;
    let Some(&last) = rows.iter().max() else {
        return Ok((upload(gpu, s, &rows, "the wide rows")?, 0));
    };
    let first = f.row0 as usize;
    let ptr = check(
        "copy the wide rows' offsets to the host",
        s.clone_dtoh(&f.a.row_ptr.slice(first..first + last as usize + 2)),
    )?;
    let len = |r: u32| ptr[r as usize + 1] - ptr[r as usize];
    rows.sort_unstable_by_key(|&r| (std::cmp::Reverse(len(r)), r));
    let longest = len(rows[0]);
    Ok((
        upload(gpu, s, &rows, "the wide rows, longest first")?,
        longest,
    ))
}

/// Where the fused kernel writes the kept entries of its rows.
struct Pool<T> {
    cap: u64,
    col: CudaSlice<u32>,
    val: CudaSlice<T>,
}

impl<T: Scalar> Pool<T> {
    fn new(gpu: &Gpu, cap: u64, poison: bool) -> Result<Self> {
        Ok(Pool {
            cap,
            col: uninit(&gpu.main, cap as usize, poison, "the fused rows' pool")?,
            val: uninit(&gpu.main, cap as usize, poison, "the fused rows' pool")?,
        })
    }
}

/// Launches kernels/mcl_dense.cu over the deferred rows (row 0 of the batch is node `node0`):
/// `mcl_dense_prune` when a whole row fits one window of shared memory, else (`wide`: the rows
/// in [`longest_first`]'s order and the longest one's A entries) `mcl_wide_prune` with a
/// scratch row and cursors in device memory for each of its blocks (one per multiprocessor,
/// claiming the rows one at a time; the cursors poisoned with `poison`, as every walk must write
/// one before the next reads it). Their sizes go to `fused_len`, their places in
/// `pool` to `pool_at`, the chaos, entries made and pool entries claimed to `figures`.
#[allow(clippy::too_many_arguments)]
fn fused_rows<T: Scalar>(
    gpu: &Gpu,
    f: &FusedRows<'_, T>,
    wide: Option<&(CudaSlice<u32>, u64)>,
    pool: &mut Pool<T>,
    node0: u64,
    params: &PruneParams,
    inflation: f64,
    fused_len: &mut CudaSlice<u64>,
    pool_at: &mut CudaSlice<u64>,
    figures: &mut CudaSlice<u64>,
    poison: bool,
) -> Result<()> {
    let s = &gpu.main;
    let ncols = f.b.ncols as u64;
    let cutoff = T::from_f64(params.cutoff());
    let pct = params.pct as f64 / 100.0;
    let rows = f.rows.rows();
    let (mut chaos, mut rest) = figures.split_at_mut(EXPANDED);
    let mut chaos = chaos.slice_mut(CHAOS..CHAOS + 1);
    let (mut expanded, mut used) = rest.split_at_mut(1);
    if let Some((rows, longest)) = wide {
        let window = f.rows.window();
        let blocks = f.rows.count().min(gpu.multiprocessors() as u64);
        let scratch = (blocks * ncols) as usize;
        let mut scratch_col = uninit::<u32>(s, scratch, false, "the wide rows' columns")?;
        let mut scratch_val = uninit::<T>(s, scratch, false, "the wide rows' values")?;
        // The blocks claim the rows one at a time from this counter, longest first.
        let mut next_row = zeros::<u64>(s, 1, "the wide rows' counter")?;
        // Cursors for the A entries past the shared ones, as many as the longest row needs.
        let more_len = longest.saturating_sub(DENSE_CURSORS);
        let mut more_cursors = uninit::<u32>(
            s,
            (blocks * more_len) as usize,
            poison,
            "the wide rows' cursors",
        )?;
        // The head (cursors, list), then the window's sums as quanta, 8 bytes each.
        let shared = MCL_WIDE_HEAD_BYTES + window as u64 * 8;
        let nrows = f.rows.count();
        let kernel = format!("mcl_wide_prune_{}", T::NAME);
        return launch(
            gpu,
            s,
            &kernel,
            shape(blocks, FUSED_THREADS, shared)?,
            |l| {
                l.arg(&f.a.row_ptr)
                    .arg(&f.a.col_idx)
                    .arg(&f.a.values)
                    .arg(&f.b.row_ptr)
                    .arg(&f.b.col_idx)
                    .arg(&f.b.values)
                    .arg(&f.row0)
                    .arg(&node0)
                    .arg(rows)
                    .arg(&nrows)
                    .arg(&ncols)
                    .arg(&window)
                    .arg(&cutoff)
                    .arg(&params.select)
                    .arg(&params.recover)
                    .arg(&pct)
                    .arg(&inflation)
                    .arg(&pool.cap)
                    .arg(&mut used)
                    .arg(fused_len)
                    .arg(pool_at)
                    .arg(&mut pool.col)
                    .arg(&mut pool.val)
                    .arg(&mut expanded)
                    .arg(&mut chaos)
                    .arg(&mut scratch_col)
                    .arg(&mut scratch_val)
                    .arg(&mut more_cursors)
                    .arg(&more_len)
                    .arg(&mut next_row);
            },
        );
    }
    // The window holds the row's sums as quanta, 8 bytes each.
    let shared = ncols.div_ceil(32) * 32 * 8;
    let kernel = format!("mcl_dense_prune_{}", T::NAME);
    launch(
        gpu,
        s,
        &kernel,
        shape(f.rows.count(), FUSED_THREADS, shared)?,
        |l| {
            l.arg(&f.a.row_ptr)
                .arg(&f.a.col_idx)
                .arg(&f.a.values)
                .arg(&f.b.row_ptr)
                .arg(&f.b.col_idx)
                .arg(&f.b.values)
                .arg(&f.row0)
                .arg(&node0)
                .arg(&rows)
                .arg(&ncols)
                .arg(&cutoff)
                .arg(&params.select)
                .arg(&params.recover)
                .arg(&pct)
                .arg(&inflation)
                .arg(&pool.cap)
                .arg(&mut used)
                .arg(fused_len)
                .arg(pool_at)
                .arg(&mut pool.col)
                .arg(&mut pool.val)
                .arg(&mut expanded)
                .arg(&mut chaos);
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::defined;

    #[test]
    fn launch_sizes_match_the_kernels() {
        assert_eq!(Some(PRUNE_THREADS as u64), defined("PRUNE_THREADS"));
        assert_eq!(Some(FUSED_THREADS as u64), defined("DENSE_ROW_THREADS"));
    }
}
