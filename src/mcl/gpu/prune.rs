//! MCL's per-column steps on the device (kernels/mcl.cu): each expanded column is pruned as
//! [`crate::mcl::prune`] does it, then inflated and normalised as [`crate::mcl::inflate`] does,
//! and its chaos measured, without leaving the GPU. Dense columns that the engine deferred
//! ([`DeferredRows`]) are made and pruned in one kernel (kernels/mcl_dense.cu), so they are
//! never stored unpruned.

use crate::error::{Error, Result};
use crate::gpu::matrix::DeviceCsr;
use crate::gpu::prims::{
    check, exclusive_scan, launch, read_at, shape, strided, uninit, zeros, NULL,
};
use crate::gpu::transfer::{download, upload, upload_into};
use crate::gpu::Gpu;
use crate::mcl::PruneParams;
use crate::scalar::Scalar;
use crate::spgemm::gpu::{DeferredRows, DENSE_CURSORS, MCL_WIDE_HEAD_BYTES};
use cudarc::driver::{CudaSlice, CudaView, PushKernelArg};

/// Threads of the pruning blocks (PRUNE_THREADS in kernels/mcl.cu), at most.
const PRUNE_THREADS: u32 = 256;
/// A batch whose rows hold at most this many entries on average is pruned a warp a row.
const SHORT_ROWS: u64 = 32;
/// Threads of a warp.
const WARP_THREADS: u32 = 32;
/// Threads of the fused blocks (DENSE_ROW_THREADS in kernels/dense.cu).
const FUSED_THREADS: u32 = 1024;

/// Slots of the figures buffer the kernels update: the chaos and the smallest value written
/// (bits of non-negative doubles), the entries of M² made by the fused kernel and the pool
/// entries it claimed.
const CHAOS: usize = 0;
const LEAST: usize = 1;
const EXPANDED: usize = 2;
const POOL_USED: usize = 3;
/// A row's place in the pool where the pool had no room (kernels/mcl.cu's `NOT_FUSED`).
const NOT_FUSED: u64 = u64::MAX;
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
    /// The pool entries the fused rows took, per row (rounded up; 0 without fused rows): the
    /// next batch's first guess.
    pub pool_per_row: u64,
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
    let p = prune_expansion(gpu, batch, None, node0, params, inflation, 0, poison)?;
    Ok((p.batch, p.chaos))
}

/// [`prune_batch`], with the deferred rows of `fused` (which have no entries in `batch`) made
/// and pruned in one kernel and put in their places. Their kept entries go to a pool of
/// `pool_per_row` entries a row, or more (max(S, R) a row; what a batch before took, from
/// [`Pruned::pool_per_row`], saves making rows again where ties keep more).
#[allow(clippy::too_many_arguments)]
pub fn prune_expansion<T: Scalar>(
    gpu: &Gpu,
    batch: &DeviceCsr<T>,
    fused: Option<FusedRows<'_, T>>,
    node0: u64,
    params: &PruneParams,
    inflation: f64,
    pool_per_row: u64,
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
            pool_per_row: 0,
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
    let (threads, blocks) = prune_shape(gpu, n, batch.nnz);
    let plan = format!("mcl_prune_plan_{}", T::NAME);
    // A pruned column keeps at most max(S, R) entries but for ties at the bar: the pool's first
    // size, unless an earlier batch's rows took more. When ties overfill it, the fused kernel
    // has counted what each row needs, and the rows that found no room are made again.
    let fused_count = fused.as_ref().map_or(0, |f| f.rows.count());
    let pool_cap = match (&fused, params.select) {
        (None, _) => 0,
        (Some(_), 0) => batch.ncols as u64,
        (Some(_), s) => (s.max(params.recover) as u64).max(pool_per_row),
    }
    .clamp(1, batch.ncols.max(1) as u64)
        * fused_count;
    let mut pool = Pool::<T>::new(gpu, pool_cap, poison)?;
    let mut out_ptr = zeros::<u64>(s, batch.nrows + 1, "pruned row sizes")?;
    // The wide rows' table of B is made once for the batch: its remake reads it too.
    let bounds = match &fused {
        Some(f) if f.rows.window() > 0 => window_bounds(gpu, f.b, f.rows.window(), poison)?,
        _ => None,
    };
    let fused_run = FusedRun {
        node0,
        params,
        inflation,
        poison,
        bounds,
    };
    if let Some(f) = &fused {
        let work = match f.rows.window() {
            0 => Work::Whole(f.rows.rows()),
            _ => {
                let rows = check(
                    "copy the wide rows to the host",
                    s.clone_dtoh(&f.rows.rows()),
                )?;
                Work::Wide(wide_order(gpu, f, &rows)?)
            }
        };
        let mut rows = FusedOut {
            len: &mut fused_len,
            at: &mut pool_at,
        };
        fused_rows(
            gpu,
            f,
            &work,
            &mut pool,
            &fused_run,
            &mut rows,
            &mut figures,
            None,
        )?;
    }
    let mut chaos = figures.slice_mut(CHAOS..CHAOS + 1);
    launch(gpu, s, &plan, shape(blocks, threads, 0)?, |l| {
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
    let mut got = download(gpu, s, &figures, 4, "the pruning's figures")?;
    // Every fused row claims its entries, room or not: what the rows need.
    let pool_needed = got[POOL_USED];
    if let (Some(f), true) = (&fused, pool_needed > pool.cap) {
        let mut rows = FusedOut {
            len: &mut fused_len,
            at: &mut pool_at,
        };
        pool = remake_overflow(gpu, f, pool, &fused_run, &mut rows, (&mut figures, &got))?;
        got = download(gpu, s, &figures, 4, "the pruning's figures")?;
    }
    let mut col = uninit::<u32>(s, nnz as usize, poison, "pruned columns")?;
    let mut val = uninit::<T>(s, nnz as usize, poison, "pruned values")?;
    let write = format!("mcl_prune_write_{}", T::NAME);
    let mut least = figures.slice_mut(LEAST..LEAST + 1);
    launch(gpu, s, &write, shape(blocks, threads, 0)?, |l| {
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
        pool_per_row: pool_needed.div_ceil(fused_count.max(1)),
    })
}

/// The wide kernel's work: items of four words (the row; its part `p | parts << 16`; the split
/// slot, [`WHOLE_ROW`] for a row made whole; where the parts' lengths start), heaviest first.
#[derive(Debug, PartialEq)]
struct WideItems {
    items: Vec<u32>,
    /// Rows split into parts (each takes a scratch row of its own).
    splits: u64,
    /// Parts of the split rows, all together.
    parts: u64,
}

/// A wide row made whole by one block (kernels/mcl_dense.cu's `WHOLE_ROW`).
const WHOLE_ROW: u32 = u32::MAX;
/// A wide item should hold at most this fraction (1/n) of a block's share of the launch's
/// products: the blocks claim items heaviest first, and a row heavier than that alone kept its
/// block busy long after the others had finished.
const ITEMS_PER_BLOCK: u64 = 4;
/// Most parts of one row (the kernel keeps a part's number in 16 bits).
const MOST_PARTS: u64 = 0xffff;

/// The work of the wide rows `rows` (the products of each from `products`) for `blocks` blocks
/// over `windows` windows a row: the heaviest rows (at most `blocks` of them, as each split row
/// takes a scratch row) split into runs of windows, and every item listed heaviest first (equal
/// ones in row and part order).
fn wide_items(rows: &[u32], products: impl Fn(u32) -> u64, windows: u64, blocks: u64) -> WideItems {
    let total: u64 = rows.iter().map(|&r| products(r)).sum();
    let most = (total / (blocks.max(1) * ITEMS_PER_BLOCK)).max(1);
    let mut order: Vec<(u64, u32)> = rows.iter().map(|&r| (products(r), r)).collect();
    order.sort_unstable_by_key(|&(w, r)| (std::cmp::Reverse(w), r));
    // (weight, row, part, parts, slot, where the row's parts' lengths start)
    let mut items = Vec::with_capacity(order.len());
    let (mut splits, mut parts_all) = (0u64, 0u64);
    for (w, r) in order {
        let parts = w.div_ceil(most).clamp(1, windows.clamp(1, MOST_PARTS));
        if parts == 1 || splits == blocks {
            items.push((w, r, 0, 1, WHOLE_ROW, 0));
            continue;
        }
        for p in 0..parts {
            items.push((w / parts, r, p, parts, splits as u32, parts_all));
        }
        splits += 1;
        parts_all += parts;
    }
    items.sort_by_key(|&(w, r, p, ..)| (std::cmp::Reverse(w), r, p));
    WideItems {
        items: items
            .into_iter()
            // Below 2^32: parts of 16 bits, split rows at most the blocks (multiprocessors).
            .flat_map(|(_, r, p, parts, slot, at)| [r, (p | parts << 16) as u32, slot, at as u32])
            .collect(),
        splits,
        parts: parts_all,
    }
}

/// The wide kernel's items on the device, with their split rows and parts, the longest A row
/// among the rows (the device cursors it needs) and the blocks that make them.
struct WideOrder {
    items: CudaSlice<u32>,
    count: u64,
    splits: u64,
    parts: u64,
    longest: u64,
    blocks: u64,
}

/// Threads and blocks of the pruning kernels for a batch of `rows` rows holding `entries`: a
/// block of PRUNE_THREADS a row, or of one warp where the rows are short on average (MCL's late
/// iterations), whose reductions per row then cost a few shuffles rather than a block's
/// barriers. The kernels' sums are order-free, so the shape changes no bit of the result.
fn prune_shape(gpu: &Gpu, rows: u64, entries: u64) -> (u32, u64) {
    let sms = gpu.multiprocessors() as u64;
    match entries <= SHORT_ROWS.saturating_mul(rows) {
        // As many one-warp blocks as a multiprocessor holds at once.
        true => (WARP_THREADS, rows.min(sms * 32)),
        false => (PRUNE_THREADS, rows.min(sms * 16)),
    }
}

/// The wide rows `rows` (some or all of `f`'s) as [`wide_items`] lists them, for one block per
/// multiprocessor, or per row when there are fewer.
fn wide_order<T: Scalar>(gpu: &Gpu, f: &FusedRows<'_, T>, rows: &[u32]) -> Result<WideOrder> {
    let s = &gpu.main;
    let blocks = (rows.len() as u64).min(gpu.multiprocessors() as u64);
    let longest = match rows.iter().max() {
        None => 0,
        Some(&last) => {
            let first = f.row0 as usize;
            let ptr = check(
                "copy the wide rows' offsets to the host",
                s.clone_dtoh(&f.a.row_ptr.slice(first..first + last as usize + 2)),
            )?;
            rows.iter()
                .map(|&r| ptr[r as usize + 1] - ptr[r as usize])
                .max()
                .unwrap_or(0)
        }
    };
    let windows = (f.b.ncols as u64).div_ceil(u64::from(f.rows.window()));
    let w = wide_items(rows, |r| f.rows.products(r), windows, blocks);
    Ok(WideOrder {
        count: w.items.len() as u64 / 4,
        items: upload(gpu, s, &w.items, "the wide rows' items, heaviest first")?,
        splits: w.splits,
        parts: w.parts,
        longest,
        blocks,
    })
}

/// The fused rows a launch makes: all of them or some (listed) when each fits one window of
/// shared memory, else the wide rows' items.
enum Work<'a> {
    Whole(CudaView<'a, u32>),
    Wide(WideOrder),
}

/// What every launch of the fused kernels over a batch shares.
struct FusedRun<'a> {
    node0: u64,
    params: &'a PruneParams,
    inflation: f64,
    poison: bool,
    /// B's window boundaries for the wide rows ([`window_bounds`]).
    bounds: Option<WindowBounds>,
}

/// Per row of the batch, what the fused kernels write: the kept entries' count and their
/// place in the pool (NOT_FUSED where the pool had no room).
struct FusedOut<'a> {
    len: &'a mut CudaSlice<u64>,
    at: &'a mut CudaSlice<u64>,
}

/// Makes again, into a pool grown to hold them, the fused rows of `f` that found `old` full
/// (their places NOT_FUSED): the other rows' entries keep their places (copied over), the
/// plan already counted every row at the size the first run found (`out.len`; the sums are
/// exact and order-free, so a row made again has the same size, which is checked), and the
/// entries made are not counted again. `figures`: the pruning's figures, with their values as
/// last read. Returns the new pool.
fn remake_overflow<T: Scalar>(
    gpu: &Gpu,
    f: &FusedRows<'_, T>,
    old: Pool<T>,
    run: &FusedRun<'_>,
    out: &mut FusedOut<'_>,
    (figures, read): (&mut CudaSlice<u64>, &[u64]),
) -> Result<Pool<T>> {
    let s = &gpu.main;
    let listed = check(
        "copy the fused rows to the host",
        s.clone_dtoh(&f.rows.rows()),
    )?;
    let at = check("copy the fused rows' places", s.clone_dtoh(&*out.at))?;
    let len = check("copy the fused rows' sizes", s.clone_dtoh(&*out.len))?;
    let again: Vec<u32> = listed
        .into_iter()
        .filter(|&r| at[r as usize] == NOT_FUSED)
        .collect();
    let need: u64 = again.iter().map(|&r| len[r as usize]).sum();
    let mut pool = Pool::<T>::new(gpu, old.cap + need, run.poison)?;
    let kept = old.cap as usize;
    // Claims go on past the old pool's entries.
    let mut restart = read.to_vec();
    restart[POOL_USED] = old.cap;
    check(
        "copy the fused rows' pool",
        s.memcpy_dtod(&old.col.slice(..kept), &mut pool.col.slice_mut(..kept)),
    )?;
    check(
        "copy the fused rows' pool",
        s.memcpy_dtod(&old.val.slice(..kept), &mut pool.val.slice_mut(..kept)),
    )?;
    drop(old);
    upload_into(gpu, s, &restart, figures, "the pruning's figures")?;
    let again_dev = upload(gpu, s, &again, "the fused rows made again")?;
    let work = match f.rows.window() {
        0 => Work::Whole(again_dev.slice(..)),
        _ => Work::Wide(wide_order(gpu, f, &again)?),
    };
    let mut uncounted = zeros::<u64>(s, 1, "entries made again")?;
    fused_rows(
        gpu,
        f,
        &work,
        &mut pool,
        run,
        out,
        figures,
        Some(&mut uncounted),
    )?;
    let after = check("copy the fused rows' sizes", s.clone_dtoh(&*out.len))?;
    let used = read_at(s, figures, POOL_USED, "the fused rows' pool claims")?;
    if used > pool.cap || again.iter().any(|&r| after[r as usize] != len[r as usize]) {
        return Err(Error::gpu(
            "prune the fused columns",
            "a column made again came out a different size".to_string(),
        ));
    }
    Ok(pool)
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

/// Launches kernels/mcl_dense.cu over the deferred rows `work` (row 0 of the batch is node
/// `run.node0`): `mcl_dense_prune` when a whole row fits one window of shared memory, else
/// `mcl_wide_prune` with a scratch row and cursors in device memory for each of its blocks
/// (claiming the items one at a time; the cursors poisoned with `run.poison`, as every walk
/// must write one before the next reads it) and a scratch row for each split row. Their sizes
/// and places in `pool` go to `out`, the chaos, entries made and pool entries claimed to
/// `figures` (the entries made to `made_to` instead, when given).
#[allow(clippy::too_many_arguments)]
fn fused_rows<T: Scalar>(
    gpu: &Gpu,
    f: &FusedRows<'_, T>,
    work: &Work<'_>,
    pool: &mut Pool<T>,
    run: &FusedRun<'_>,
    out: &mut FusedOut<'_>,
    figures: &mut CudaSlice<u64>,
    made_to: Option<&mut CudaSlice<u64>>,
) -> Result<()> {
    let s = &gpu.main;
    let ncols = f.b.ncols as u64;
    let (params, node0, inflation) = (run.params, run.node0, run.inflation);
    let cutoff = T::from_f64(params.cutoff());
    let pct = params.pct as f64 / 100.0;
    let (mut chaos, mut rest) = figures.split_at_mut(EXPANDED);
    let mut chaos = chaos.slice_mut(CHAOS..CHAOS + 1);
    let (mut expanded, mut used) = rest.split_at_mut(1);
    let mut expanded = match made_to {
        Some(m) => m.slice_mut(..1),
        None => expanded.slice_mut(..),
    };
    // Rows with few products make them exactly, as mcl does.
    let exact_below = crate::quantized::exact_below(ncols as usize);
    let wide = match work {
        Work::Wide(wide) => wide,
        Work::Whole(rows) => {
            // The window holds the row's sums as quanta, 8 bytes each.
            let shared = ncols.div_ceil(32) * 32 * 8;
            let kernel = format!("mcl_dense_prune_{}", T::NAME);
            return launch(
                gpu,
                s,
                &kernel,
                shape(rows.len() as u64, FUSED_THREADS, shared)?,
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
                        .arg(&ncols)
                        .arg(&exact_below)
                        .arg(&cutoff)
                        .arg(&params.select)
                        .arg(&params.recover)
                        .arg(&pct)
                        .arg(&inflation)
                        .arg(&pool.cap)
                        .arg(&mut used)
                        .arg(&mut *out.len)
                        .arg(&mut *out.at)
                        .arg(&mut pool.col)
                        .arg(&mut pool.val)
                        .arg(&mut expanded)
                        .arg(&mut chaos);
                },
            );
        }
    };
    let window = f.rows.window();
    let blocks = wide.blocks;
    let scratch = (blocks * ncols) as usize;
    let mut scratch_col = uninit::<u32>(s, scratch, false, "the wide rows' columns")?;
    let mut scratch_val = uninit::<T>(s, scratch, false, "the wide rows' values")?;
    let split = (wide.splits * ncols) as usize;
    let mut split_col = uninit::<u32>(s, split, false, "the split rows' columns")?;
    let mut split_val = uninit::<T>(s, split, false, "the split rows' values")?;
    let mut part_len = uninit::<u64>(s, wide.parts as usize, run.poison, "the parts' lengths")?;
    let mut parts_done = zeros::<u32>(s, wide.splits as usize, "the split rows' counters")?;
    // The blocks claim the items one at a time from this counter, heaviest first.
    let mut next_item = zeros::<u64>(s, 1, "the wide rows' counter")?;
    // Cursors for the A entries past the shared ones, as many as the longest row needs.
    let more_len = wide.longest.saturating_sub(DENSE_CURSORS);
    let mut more_cursors = uninit::<u32>(
        s,
        (blocks * more_len) as usize,
        run.poison,
        "the wide rows' cursors",
    )?;
    // The head (cursors, list), then the window's sums as quanta, 8 bytes each.
    let shared = MCL_WIDE_HEAD_BYTES + window as u64 * 8;
    let kernel = format!("mcl_wide_prune_{}", T::NAME);
    launch(
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
                .arg(&wide.items)
                .arg(&wide.count)
                .arg(&ncols)
                .arg(&exact_below)
                .arg(&window)
                .arg(&cutoff)
                .arg(&params.select)
                .arg(&params.recover)
                .arg(&pct)
                .arg(&inflation)
                .arg(&pool.cap)
                .arg(&mut used)
                .arg(&mut *out.len)
                .arg(&mut *out.at)
                .arg(&mut pool.col)
                .arg(&mut pool.val)
                .arg(&mut expanded)
                .arg(&mut chaos)
                .arg(&mut scratch_col)
                .arg(&mut scratch_val)
                .arg(&mut split_col)
                .arg(&mut split_val)
                .arg(&mut part_len)
                .arg(&mut parts_done)
                .arg(&mut more_cursors)
                .arg(&more_len);
            match &run.bounds {
                Some(b) => l.arg(&b.table).arg(&b.per_row),
                None => l.arg(&NULL).arg(&0u32),
            };
            l.arg(&mut next_item);
        },
    )
}

/// Most bytes the window boundaries of B may take beyond B's own size.
const BOUNDS_EXTRA_BYTES: u64 = 64 << 20;

/// The boundaries between windows of B's columns, for each of B's rows: its entries before
/// each boundary (kernels/dense.cu's `window_bounds`).
struct WindowBounds {
    table: CudaSlice<u32>,
    /// Boundaries a row (inside C's columns).
    per_row: u32,
}

/// How many boundaries a row of `ncols` columns has between windows of `window` columns, where
/// a table of them for `nrows` rows is worth keeping beside a B of `b_bytes`: `None` for rows of
/// one window, or where the table would outgrow B by more than [`BOUNDS_EXTRA_BYTES`] (very
/// narrow windows: the walks then search).
fn bounds_per_row(ncols: u64, nrows: u64, window: u32, b_bytes: u64) -> Option<u32> {
    let per_row = ncols.saturating_sub(1) / u64::from(window.max(1));
    let bytes = per_row.saturating_mul(nrows).saturating_mul(4);
    if per_row == 0 || bytes > b_bytes.saturating_add(BOUNDS_EXTRA_BYTES) {
        return None;
    }
    u32::try_from(per_row).ok()
}

/// For each row of `b` and each boundary between windows of `window` columns, the row's entries
/// before it: the wide rows' walks read where each B row enters and leaves a window instead of
/// searching for it. `None` where [`bounds_per_row`] says no table is kept. With `poison`, the
/// table is filled with 0xFF before the kernel writes every entry of it.
fn window_bounds<T: Scalar>(
    gpu: &Gpu,
    b: &DeviceCsr<T>,
    window: u32,
    poison: bool,
) -> Result<Option<WindowBounds>> {
    let (ncols, nrows) = (b.ncols as u64, b.nrows as u64);
    let b_bytes = b.nnz * (4 + std::mem::size_of::<T>() as u64);
    let Some(per_row) = bounds_per_row(ncols, nrows, window, b_bytes) else {
        return Ok(None);
    };
    let s = &gpu.main;
    let len = nrows * u64::from(per_row);
    let mut table = uninit::<u32>(s, len as usize, poison, "the B rows' window boundaries")?;
    launch(gpu, s, "window_bounds", strided(gpu, len, 256), |l| {
        l.arg(&b.row_ptr)
            .arg(&b.col_idx)
            .arg(&nrows)
            .arg(&window)
            .arg(&per_row)
            .arg(&mut table);
    })?;
    Ok(Some(WindowBounds { table, per_row }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::defined;

    #[test]
    fn window_bounds_are_kept_for_rows_of_several_windows_and_no_larger_than_b() {
        // One window: nothing to look up.
        assert_eq!(bounds_per_row(1000, 1000, 1000, 0), None);
        assert_eq!(bounds_per_row(0, 1000, 1000, 0), None);
        // The boundaries strictly inside the columns: 1001 columns in windows of 1000 have one,
        // 2000 columns too, 2001 two.
        assert_eq!(bounds_per_row(1001, 10, 1000, 0), Some(1));
        assert_eq!(bounds_per_row(2000, 10, 1000, 0), Some(1));
        assert_eq!(bounds_per_row(2001, 10, 1000, 0), Some(2));
        // A table past B's bytes and the allowance is not made.
        let rows = (BOUNDS_EXTRA_BYTES / 4) + 1;
        assert_eq!(bounds_per_row(2001, rows / 2, 1000, 0), Some(2));
        assert_eq!(bounds_per_row(2001, rows, 1000, 0), None);
        assert_eq!(
            bounds_per_row(2001, rows, 1000, BOUNDS_EXTRA_BYTES + 8),
            Some(2)
        );
    }

    /// Every window of every row made exactly once, by whole rows or by the parts of a split.
    fn check_cover(rows: &[u32], w: &WideItems, windows: u64) {
        let mut made = std::collections::BTreeMap::<u32, Vec<(u64, u64)>>::new();
        let mut slots = std::collections::BTreeMap::<u32, (u32, u32)>::new();
        for it in w.items.chunks(4) {
            let (r, p, parts) = (it[0], u64::from(it[1] & 0xffff), u64::from(it[1] >> 16));
            assert!(p < parts && parts <= windows.max(1));
            if it[2] == WHOLE_ROW {
                assert_eq!(parts, 1);
            } else {
                assert!(u64::from(it[2]) < w.splits);
                let (row, at) = *slots.entry(it[2]).or_insert((r, it[3]));
                assert_eq!((row, at), (r, it[3]), "a slot holds one row");
                assert!(u64::from(at) + parts <= w.parts);
            }
            made.entry(r)
                .or_default()
                .push((p * windows / parts, (p + 1) * windows / parts));
        }
        assert_eq!(made.len(), rows.len());
        for runs in made.values_mut() {
            runs.sort_unstable();
            let mut next = 0;
            for &(a, b) in runs.iter() {
                assert_eq!(a, next);
                assert!(b > a || windows == 0);
                next = b;
            }
            assert_eq!(next, windows);
        }
    }

    #[test]
    fn wide_items_split_the_heaviest_rows_and_list_heaviest_first() {
        // One hub with most of the products, some middling rows, many light ones.
        let rows: Vec<u32> = (0..40).rev().collect();
        let products = |r: u32| match r {
            7 => 1_000_000,
            0..=3 => 30_000,
            _ => 1_000 + u64::from(r),
        };
        let w = wide_items(&rows, products, 40, 8);
        check_cover(&rows, &w, 40);
        // The hub alone is heavier than a quarter of a block's share: split, into runs no
        // heavier than that.
        let most = rows.iter().map(|&r| products(r)).sum::<u64>() / 32;
        let hub: Vec<&[u32]> = w.items.chunks(4).filter(|it| it[0] == 7).collect();
        assert_eq!(hub.len() as u64, 1_000_000u64.div_ceil(most));
        assert_eq!(w.splits, 1);
        assert_eq!(w.parts, hub.len() as u64);
        // Heaviest first: the hub's parts, then rows 0-3, then the light rows, heaviest first.
        let weight = |it: &[u32]| products(it[0]) / u64::from(it[1] >> 16);
        let weights: Vec<u64> = w.items.chunks(4).map(weight).collect();
        assert!(weights.windows(2).all(|p| p[0] >= p[1]));
        assert_eq!(
            w,
            wide_items(&rows, products, 40, 8),
            "the same order every time"
        );
    }

    #[test]
    fn wide_items_split_no_more_rows_than_blocks_nor_parts_than_windows() {
        let rows: Vec<u32> = (0..10).collect();
        // Three rows, each far heavier than a quarter of a block's share: two blocks split two.
        let w = wide_items(&rows, |r| if r < 3 { 1 << 30 } else { 1 }, 3, 2);
        check_cover(&rows, &w, 3);
        assert_eq!(w.splits, 2);
        assert_eq!(w.parts, 6);
        // One window a row: nothing to split.
        let w = wide_items(&rows, |r| u64::from(r) * 1000, 1, 4);
        check_cover(&rows, &w, 1);
        assert_eq!((w.splits, w.parts), (0, 0));
        let order: Vec<u32> = w.items.chunks(4).map(|it| it[0]).collect();
        assert_eq!(order, (0..10).rev().collect::<Vec<u32>>());
        // No rows, no products.
        let w = wide_items(&[], |_| 0, 5, 4);
        assert_eq!((w.items.len(), w.splits, w.parts), (0, 0, 0));
        let w = wide_items(&rows, |_| 0, 5, 4);
        check_cover(&rows, &w, 5);
    }

    #[test]
    fn markers_match_the_kernels() {
        assert_eq!(Some(u64::from(WHOLE_ROW)), defined("WHOLE_ROW"));
        assert_eq!(Some(NOT_FUSED), defined("NOT_FUSED"));
    }

    #[test]
    fn launch_sizes_match_the_kernels() {
        assert_eq!(Some(PRUNE_THREADS as u64), defined("PRUNE_THREADS"));
        assert_eq!(Some(FUSED_THREADS as u64), defined("DENSE_ROW_THREADS"));
    }
}
