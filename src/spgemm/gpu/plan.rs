//! Planning a product: the gMAGNUS parameters for the device, the bins that route C's rows
//! (hash tables by size, the dense-row accumulator, the outer product for the rest), and the
//! row batches whose working memory fits the device.

use super::operands::Operands;
use super::GpuEngine;
use crate::error::Result;
use crate::scalar::Scalar;
use crate::spgemm::params::{self, magnus_params, GroupShape, MagnusParams, SizeModel};
use std::ops::Range;

/// Hash-table sizes (slots) of the light bins below the largest; the largest bin's table is
/// 2τ slots, the whole shared memory. A row goes to the first bin whose table is at least twice
/// its product count (load factor 1/2, so a table never fills).
pub(super) const HASH_TABLES: [u32; 7] = [64, 128, 256, 512, 1024, 2048, 4096];
/// Shared memory kept back from the parameters for the kernels' own small shared variables
/// (counters, scan scratch), so that a table sized from the parameters still fits.
pub(super) const SHARED_RESERVE: u64 = 256;
/// Most slots of a hash table (8 per thread of a 1024-thread block; MAX_SLOTS_PER_THREAD in
/// kernels/accumulate.cu).
pub(super) const MAX_TABLE_SLOTS: u64 = 8 * 1024;
/// Threads of the dense accumulator blocks.
pub(super) const DENSE_THREADS: u32 = 512;
/// Where the hash tables keep rows up to τ products (`hash_limit` at τ or more, as MCL sets it),
/// rows past τ with at least C's columns / DENSE_FRACTION products take the dense-row
/// accumulator and the others the outer product. On an H200, 128 beat 32 on every case of the sym
/// and rmat-paper suites up to s18 (docs/performance.md). Under the default [`HASH_LIMIT`] every
/// row past the hash tables takes the dense-row accumulator, and this fraction does not apply.
pub const DENSE_FRACTION: u64 = 128;
/// Rows with more products than this leave the hash tables for the dense-row accumulator
/// (where it is on): its rank-compressed rows beat a hash table and its sort from here on (H200,
/// s18 A4·B8: 17.9 ms with all hash tables up to τ = 4096, 14.1 ms from 512; docs/performance.md).
pub const HASH_LIMIT: u64 = 512;
/// Threads of the dense-row blocks (DENSE_ROW_THREADS in kernels/dense.cu).
pub(super) const DENSE_ROW_THREADS: u32 = 1024;
/// Threads of the outer-product blocks.
pub(super) const OUTER_THREADS: u32 = 512;
/// Threads of the histogram and multisplit blocks: 8 warps (the paper's n_subGroups), each with
/// its own histogram; small blocks let several share a multiprocessor and hide each other's
/// barriers.
pub(super) const SPLIT_THREADS: u32 = 256;
/// Elements a histogram or multisplit thread holds in registers (MS_PER_THREAD in heavy.cu).
/// (MS_PER_THREAD_F32 / _F64 in heavy.cu.)
pub(super) fn split_per_thread(val_bytes: u64) -> u64 {
    if val_bytes == 4 {
        12
    } else {
        8
    }
}

/// A bin of rows or chunks: the hash table size (0 for the dense bin) and its block size.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bin {
    pub(super) table: u32,
    pub(super) threads: u32,
}

/// The parameters the kernels run with: the paper's, from the shared memory less the kernels'
/// own variables, with τ capped so that the largest hash table has at most
/// `MAX_TABLE_SLOTS` slots (the compaction before the sort stages 8 slots per thread of 1024).
pub(super) fn engine_params(c_cols: u64, shared_per_block: u64, val_bytes: u64) -> MagnusParams {
    // The dense accumulators flag columns with a byte each (plain stores, no atomics).
    let sizes = SizeModel {
        flag_bits: 8,
        ..SizeModel::for_values(val_bytes)
    };
    let mut p = magnus_params(
        c_cols,
        shared_per_block - SHARED_RESERVE,
        sizes,
        GroupShape {
            warps: (SPLIT_THREADS / 32) as u64,
            rows: 2,
        },
    );
    p.tau = p.tau.min(MAX_TABLE_SLOTS / 2);
    p
}

/// The bins for a product: hash bins by size, then (implicitly) the heavy/dense bin.
pub(super) fn hash_bins(tau: u64) -> Vec<Bin> {
    let top = (2 * tau) as u32;
    let mut bins: Vec<Bin> = HASH_TABLES
        .iter()
        .copied()
        .filter(|&t| t < top)
        .map(|t| Bin {
            table: t,
            threads: (t / 2).clamp(32, 1024),
        })
        .collect();
    bins.push(Bin {
        table: top,
        threads: (top / 2).clamp(32, 1024),
    });
    bins
}

/// The largest item each hash bin takes: half its table.
pub(super) fn table_limits(bins: &[Bin]) -> Vec<u64> {
    bins.iter().map(|b| b.table as u64 / 2).collect()
}

/// The largest item the bins take (0 without bins).
pub(super) fn top_limit(bins: &[Bin]) -> u64 {
    bins.last().map_or(0, |b| b.table as u64 / 2)
}

/// The hash bins for chunks of the last level (`width` columns wide): a chunk with more than
/// width/16 elements is cheaper in the dense accumulator (clearing and scanning `width` columns)
/// than in a hash table that must be sorted.
pub(super) fn final_bins(bins: &[Bin], width: u64) -> Vec<Bin> {
    let dense_from = (width / 16).max(32);
    bins.iter()
        .copied()
        .filter(|b| b.table as u64 / 2 <= dense_from)
        .collect()
}

/// A entries of a row whose place in their B rows the dense-row kernels keep between the
/// row's windows (kernels/dense.cu's `DENSE_CURSORS`).
pub(crate) const DENSE_CURSORS: u64 = 4096;

/// Bytes of dynamic shared memory the dense-row kernels' cursors take ahead of their windows.
const DENSE_CURSOR_BYTES: u64 = 4 * DENSE_CURSORS;

/// Bytes of dynamic shared memory ahead of the window of MCL's kernel for deferred rows wider
/// than one window (kernels/mcl_dense.cu's `MCL_WIDE_HEAD_BYTES`).
pub(crate) const MCL_WIDE_HEAD_BYTES: u64 = 18448;

/// The dense-row path of a product: rows with at least `from` products, the blocks that make
/// them (`small` for the rows of at most `small_top` products, `large` for the others), whether
/// the rows are left to the caller, and the windows the caller makes them in (0: all of C's
/// columns in one).
pub(super) struct DenseRows {
    pub(super) from: u64,
    pub(super) large: DenseBlocks,
    /// Rows of up to `small_top` products run in smaller blocks several to a multiprocessor
    /// (none when `small` is `None`): in one block a multiprocessor, a row of a few thousand
    /// products kept most of the block's warps waiting at its barriers.
    pub(super) small: Option<DenseBlocks>,
    pub(super) small_top: u64,
    pub(super) deferred: bool,
    pub(super) deferred_window: u32,
}

/// A launch shape of the dense-row kernels: threads a block and the window widths (columns) of
/// the symbolic and numeric kernels, sized from the shared memory a block gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DenseBlocks {
    pub(super) threads: u32,
    pub(super) numeric_width: u32,
    pub(super) symbolic_width: u32,
}

impl DenseBlocks {
    /// Dynamic shared memory of the numeric kernel: the cursors, then `numeric_width` sums of
    /// `sum_bytes` and their presence bits.
    pub(super) fn numeric_shared(&self, sum_bytes: u64) -> u64 {
        let w = self.numeric_width as u64;
        DENSE_CURSOR_BYTES + w * sum_bytes + w / 8
    }

    /// Dynamic shared memory of the symbolic kernel: the cursors, then `symbolic_width` bits.
    pub(super) fn symbolic_shared(&self) -> u64 {
        DENSE_CURSOR_BYTES + self.symbolic_width as u64 / 8
    }

    /// The most entries a row of C may have for the numeric kernel to sum it in one walk: what
    /// its sums leave after one rank window over all `c_cols` columns (kernels/dense.cu's
    /// `rank_row_numeric`); 0 where that window does not fit.
    pub(super) fn one_walk_entries(&self, sum_bytes: u64, c_cols: u64) -> u64 {
        let w = self.numeric_width as u64;
        let shared = w * sum_bytes + w / 8;
        let window = c_cols.div_ceil(RANK_BLOCK) * RANK_BLOCK;
        let ranks = (window / 8 + window / 32 + (window / RANK_BLOCK + 1) * 4).next_multiple_of(16);
        if shared < ranks + RANK_MIN_VALUES * sum_bytes + 32 {
            return 0;
        }
        (shared - ranks) / sum_bytes
    }
}

/// Columns of a rank block, values a rank window leaves room for at least (kernels/dense.cu's
/// `RANK_BLOCK`, `RANK_MIN_VALUES`).
const RANK_BLOCK: u64 = 1024;
const RANK_MIN_VALUES: u64 = 4096;

/// Blocks a multiprocessor the small dense rows are made in, tried in turn: the first whose
/// shared memory still sums a row in one walk.
const SMALL_DENSE_BLOCKS: [u32; 2] = [4, 2];

impl GpuEngine {
    /// The gMAGNUS parameters for a product of `c_cols` columns with values of type `T`.
    pub fn params<T: Scalar>(&self, c_cols: u64) -> MagnusParams {
        let mut p = engine_params(
            c_cols,
            self.gpu.shared_per_block(),
            super::sum_bytes::<T>(self.tuning.quantized_sums),
        );
        if let Some(cap) = self.tuning.max_chunks_per_level {
            let cap = cap.max(2).next_power_of_two();
            if cap < p.chunks_max {
                p.chunks_max = cap;
                p.levels = params::chunk_levels(p.chunks_required, cap);
            }
        }
        p
    }

    /// Splits `rows` into batches whose working memory fits: Ĉ (twice, for the multisplit's double
    /// buffer) for heavy rows and an estimate of C. A batch that does not fit after all is split
    /// again when it runs out of memory.
    pub(super) fn plan_batches<T: Scalar>(
        &self,
        prefix: &[u64],
        rows: &Range<usize>,
        p: &MagnusParams,
        ops: &Operands<T>,
    ) -> Result<Vec<Range<usize>>> {
        let (free, _) = self.gpu.memory()?;
        let budget = match self.tuning.memory_limit {
            Some(l) => l.min(free),
            None => free / 10 * 8,
        };
        let entry = 4 + std::mem::size_of::<T>() as u64;
        let heavy_entry = 4 + super::sum_bytes::<T>(self.tuning.quantized_sums);
        let copies = if p.levels.is_empty() { 1 } else { 2 };
        let entry_cap = self.tuning.max_batch_entries.unwrap_or(u64::MAX);
        let c_cols = ops.c_cols;
        let dense_from = self.dense_rows(ops, p).map_or(u64::MAX, |d| d.from);
        let hash_limit = top_limit(&self.row_bins(ops, p));
        let mut out = Vec::new();
        let mut first = rows.start;
        let mut used = 0u64;
        let mut entries = 0u64;
        for r in rows.clone() {
            let prods = prefix[r - rows.start + 1] - prefix[r - rows.start];
            let bound = prods.min(c_cols);
            if entries > 0 && entries.saturating_add(bound) > entry_cap && r > first {
                out.push(first..r);
                first = r;
                used = 0;
                entries = 0;
            }
            entries += bound;
            // Heavy rows hold their products in Ĉ (dense rows do not); every row's C entries are
            // at most its products and its columns.
            let heavy = if prods > hash_limit && prods < dense_from {
                copies * prods * heavy_entry
            } else {
                0
            };
            let cost = heavy + bound * entry + 64;
            if used + cost > budget && r > first {
                out.push(first..r);
                first = r;
                used = 0;
                entries = bound;
            }
            used += cost;
        }
        if first < rows.end || out.is_empty() {
            out.push(first..rows.end);
        }
        Ok(out)
    }

    /// The hash bins whose limit is at most the tuning's `hash_limit`.
    fn lowered_bins(&self, p: &MagnusParams) -> Vec<Bin> {
        let limit = self.tuning.hash_limit.unwrap_or(HASH_LIMIT);
        hash_bins(p.tau)
            .into_iter()
            .filter(|b| b.table as u64 / 2 <= limit)
            .collect()
    }

    /// The hash bins that take C's rows: all of them, or those under a lowered `hash_limit`
    /// where the dense-row accumulator takes the rest.
    pub(super) fn row_bins<T: Scalar>(&self, ops: &Operands<T>, p: &MagnusParams) -> Vec<Bin> {
        match self.dense_rows(ops, p) {
            Some(_) => self.lowered_bins(p),
            None => hash_bins(p.tau),
        }
    }

    /// Whether and how this product uses the dense-row accumulator: from how many products a
    /// row goes there and the windows (columns) of its two kernels, sized from shared memory.
    pub(super) fn dense_rows<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
    ) -> Option<DenseRows> {
        if ops.has_mask != 0 || self.tuning.dense_from == Some(u64::MAX) || ops.c_cols == 0 {
            return None;
        }
        let fraction = self.tuning.dense_fraction.unwrap_or(DENSE_FRACTION).max(1);
        let hash_top = top_limit(&self.lowered_bins(p));
        // Rows turned away by a lowered hash limit all come here: the outer product's groups
        // are sized for rows of more than τ products.
        let from = match hash_top < p.tau {
            true => hash_top + 1,
            false => self
                .tuning
                .dense_from
                .unwrap_or(ops.c_cols / fraction)
                .max(p.tau + 1),
        };
        let val_bytes = super::sum_bytes::<T>(self.tuning.quantized_sums);
        let shared = self.gpu.large_shared();
        let large = self.dense_blocks(DENSE_ROW_THREADS, shared, val_bytes, ops.c_cols);
        // A deferred row is made in windows of sums alone (no presence bits), MCL's quanta of
        // 8 bytes whatever the engine's own sums: all of C's columns in one when they fit,
        // else windows behind the wide kernel's head.
        let quanta_bytes = 8;
        let (fused_cols, wide_cols) = match self.tuning.dense_window {
            Some(t) => (t as u64, (t as u64).max(32) & !31),
            None => (
                shared / quanta_bytes,
                (shared.saturating_sub(MCL_WIDE_HEAD_BYTES) / quanta_bytes) & !1023,
            ),
        };
        let one_window = ops.c_cols.div_ceil(32) * 32 <= fused_cols;
        (large.numeric_width >= 32).then_some(DenseRows {
            from,
            large,
            small: None,
            small_top: 0,
            deferred: ops.defer_dense && (one_window || wide_cols >= 32),
            deferred_window: if one_window {
                0
            } else {
                wide_cols.min(1 << 30) as u32
            },
        })
    }

    /// The dense-row kernels' shape for blocks of `threads` with `shared` bytes of dynamic
    /// shared memory, for values summed in `val_bytes` and C's `c_cols` columns. Windows are
    /// multiples of 1024 columns (or the tuning's), no wider than C (rounded up to 32).
    fn dense_blocks(&self, threads: u32, shared: u64, val_bytes: u64, c_cols: u64) -> DenseBlocks {
        let fit = |w: u64| {
            let w = match self.tuning.dense_window {
                Some(t) => (t as u64).max(32) & !31,
                None => w & !1023,
            };
            w.min(c_cols.div_ceil(32) * 32).min(1 << 30) as u32
        };
        // The dense-row kernels keep their cursors ahead of the windows.
        let windows = shared.saturating_sub(DENSE_CURSOR_BYTES);
        DenseBlocks {
            threads,
            numeric_width: fit(windows * 8 / (8 * val_bytes + 1)),
            symbolic_width: fit(windows * 8),
        }
    }

    /// Splits the dense rows `d` made here (not deferred) by size: the rows of at most
    /// `small_top` products go to blocks of a fraction of [`DENSE_ROW_THREADS`] several to a
    /// multiprocessor, each with the shared memory that leaves it, where that still sums such
    /// a row in one walk over one rank window of all of C's columns. `small_top` is that row
    /// size (capped by the tuning's `dense_small_top`). Leaves `d` as it is where no such shape
    /// fits (wide C, tuned windows), and where the tuning turns the split off.
    pub(super) fn split_dense<T: Scalar>(&self, d: &mut DenseRows, c_cols: u64) -> Result<()> {
        let cap = self.tuning.dense_small_top.unwrap_or(u64::MAX);
        if d.deferred || cap < d.from || self.tuning.dense_window.is_some() {
            return Ok(());
        }
        let quantized = self.tuning.quantized_sums;
        let val_bytes = super::sum_bytes::<T>(quantized);
        let g = &*self.gpu;
        let numeric = g.function(&super::summing::<T>("dense_rows_numeric", quantized))?;
        let symbolic = g.function("dense_rows_symbolic")?;
        let room = |f: &cudarc::driver::CudaFunction, k: u32, threads: u32| -> Result<u64> {
            let r = f.occupancy_available_dynamic_smem_per_block(k, threads);
            Ok(crate::gpu::prims::check("size the small dense rows' blocks", r)? as u64)
        };
        for k in SMALL_DENSE_BLOCKS {
            let threads = DENSE_ROW_THREADS / k;
            let shared = room(numeric, k, threads)?.min(room(symbolic, k, threads)?);
            let small = self.dense_blocks(threads, shared, val_bytes, c_cols);
            let top = small.one_walk_entries(val_bytes, c_cols).min(cap);
            let fits = |f: &cudarc::driver::CudaFunction, shared: u64| -> Result<bool> {
                let r = f.occupancy_max_active_blocks_per_multiprocessor(
                    threads,
                    shared as usize,
                    None,
                );
                Ok(crate::gpu::prims::check("size the small dense rows' blocks", r)? >= k)
            };
            if top >= d.from
                && small.symbolic_width >= 32
                && fits(numeric, small.numeric_shared(val_bytes))?
                && fits(symbolic, small.symbolic_shared())?
            {
                d.small = Some(small);
                d.small_top = top;
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::defined;

    #[test]
    fn one_walk_holds_what_the_rank_window_leaves() {
        let blocks = |w: u32| DenseBlocks {
            threads: 256,
            numeric_width: w,
            symbolic_width: w,
        };
        // 4096 columns: their bits, word ranks and block ranks take 672 bytes; the rest sums.
        let b = blocks(8192);
        let shared = 8192 * 4 + 8192 / 8;
        assert_eq!(b.one_walk_entries(4, 4096), (shared - 672) / 4);
        assert_eq!(b.one_walk_entries(8, 4096), (8192 * 8 + 1024 - 672) / 8);
        // Too little room for the window and RANK_MIN_VALUES sums.
        assert_eq!(blocks(4096).one_walk_entries(4, 4096), 0);
        assert_eq!(b.one_walk_entries(4, 1 << 20), 0);
        // The numeric kernel's shared memory is what `numeric_shared` asks for.
        assert_eq!(b.numeric_shared(4), DENSE_CURSOR_BYTES + shared);
    }

    #[test]
    fn launch_sizes_match_the_kernels() {
        assert_eq!(Some(DENSE_ROW_THREADS as u64), defined("DENSE_ROW_THREADS"));
        assert_eq!(Some(RANK_BLOCK), defined("RANK_BLOCK"));
        assert_eq!(Some(RANK_MIN_VALUES), defined("RANK_MIN_VALUES"));
        for k in SMALL_DENSE_BLOCKS {
            assert_eq!(DENSE_ROW_THREADS % (k * 32), 0, "whole warps in {k} blocks");
        }
        assert_eq!(Some(DENSE_CURSORS), defined("DENSE_CURSORS"));
        assert_eq!(Some(MCL_WIDE_HEAD_BYTES), defined("MCL_WIDE_HEAD_BYTES"));
        assert_eq!(Some(SPLIT_THREADS as u64), defined("SPLIT_THREADS"));
        assert_eq!(Some(split_per_thread(4)), defined("MS_PER_THREAD_F32"));
        assert_eq!(Some(split_per_thread(8)), defined("MS_PER_THREAD_F64"));
        let slots = defined("MAX_SLOTS_PER_THREAD").unwrap();
        assert_eq!(
            MAX_TABLE_SLOTS,
            slots * 1024,
            "8 slots per thread of a 1024-thread block"
        );
    }

    #[test]
    fn bins_cover_up_to_tau_and_fit_shared_memory() {
        for (shared, val) in [(49152u64, 4u64), (49152, 8), (101376, 4)] {
            let p = engine_params(1 << 20, shared, val);
            let bins = hash_bins(p.tau);
            let top = bins.last().unwrap();
            assert_eq!(top.table as u64 / 2, p.tau);
            assert!(top.table as u64 * (4 + val) <= shared);
            assert!(p.chunk_width * (val + 1) <= shared - SHARED_RESERVE);
            for w in bins.windows(2) {
                assert!(w[0].table < w[1].table);
            }
            for b in &bins {
                assert!(b.table <= b.threads * 8, "at most 8 slots per thread");
                assert!(b.threads % 32 == 0 && b.threads <= 1024);
            }
        }
    }
}
