//! The heavy rows' reorder (paper Alg. 4 and 5): masked CSR→CSC of A's heavy rows, the
//! load-balanced outer product into Ĉ, then the hierarchical multisplit, level by level, until
//! every chunk is light enough for a shared-memory accumulator.

use super::chunks::{buf, group_starts, some, some_mut, Buffers, FinalChunks};
use super::operands::Operands;
use super::plan::{final_bins, split_per_thread, table_limits, Bin, OUTER_THREADS, SPLIT_THREADS};
use super::{moving_heavy, sum_bytes, summing, typed, GpuEngine};
use crate::error::{Error, Result};
use crate::gpu::prims::{check, exclusive_scan, launch, read_at, shape, strided, uninit, zeros};
use crate::gpu::profile::Profile;
use crate::scalar::Scalar;
use crate::spgemm::params::MagnusParams;
use cudarc::driver::{CudaSlice, CudaView, PushKernelArg};

/// Ã: the heavy rows of A by column, a slice per column `k` that has entries, with where each
/// slice's products start in the flattened outer product.
struct Slices<T: Scalar> {
    count: u64,
    k: CudaSlice<u32>,
    at_ptr: CudaSlice<u64>,
    at_row: CudaSlice<u32>,
    at_val: CudaSlice<T>,
    offsets: CudaSlice<u64>,
    at_nnz: u64,
}

/// A multisplit level's input: rows of a Ĉ buffer (the heavy rows, then the heavy chunks of the
/// level before), each with its heavy row and the first column its chunk covers.
struct LevelInput {
    ptr: CudaSlice<u64>,
    h: CudaSlice<u32>,
    base: CudaSlice<u32>,
    rows: u64,
    buf: usize,
}

/// A multisplit level's output: its chunks (heavy ones first) in the other Ĉ buffer.
struct LevelOutput {
    ptr: CudaSlice<u64>,
    h: CudaSlice<u32>,
    base: CudaSlice<u32>,
    buf: usize,
    /// Chunks in all.
    chunks: u64,
    /// Of them, the heavy ones (they come first).
    heavy: u64,
}

/// The shape of the multisplit blocks, the same for every level.
struct SplitShape {
    elems: u64,
    max_rows: u32,
    warps: u64,
    entry: u64,
}

impl GpuEngine {
    /// The heavy-row path up to the final chunks: masked CSR->CSC of A's heavy rows, the outer
    /// product into Ĉ, then the multisplit levels. Returns the sets of final chunks, each binned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn heavy_reorder<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        prod: &CudaSlice<u64>,
        heavy_rows: &CudaView<'_, u32>,
        nheavy: u64,
        row0: u64,
        bins: &[Bin],
        bufs: &mut Buffers,
        prof: &mut Profile,
    ) -> Result<Vec<FinalChunks<T>>> {
        let g = &*self.gpu;
        let s = &g.heavy;
        // Ĉ.rowPtr of the heavy rows.
        let mut c_hat_ptr = zeros::<u64>(s, nheavy as usize + 1, "Ĉ's row offsets")?;
        launch(g, s, "gather_sizes", strided(g, nheavy + 1, 256), |l| {
            l.arg(prod).arg(heavy_rows).arg(&nheavy).arg(&mut c_hat_ptr);
        })?;
        exclusive_scan(g, s, &mut c_hat_ptr, nheavy + 1, "Ĉ's row offsets")?;
        let total = read_at(s, &c_hat_ptr, nheavy as usize, "Ĉ's size")?;

        let slices = self.heavy_slices(ops, prod, heavy_rows, nheavy, row0, total)?;
        prof.mark("heavy: CSR to CSC of A's rows")?;
        self.outer_product(ops, p, &c_hat_ptr, total, slices, bufs, prof)?;

        let mut h = zeros::<u32>(s, nheavy as usize, "heavy row ids")?;
        launch(g, s, "iota_u32", strided(g, nheavy, 256), |l| {
            l.arg(&mut h).arg(&nheavy);
        })?;
        let base = zeros::<u32>(s, nheavy as usize, "chunk bases")?;
        if p.levels.is_empty() {
            let fb = final_bins(bins, p.chunk_width);
            let lists = self.bin_items(s, &c_hat_ptr, 0, nheavy, &table_limits(&fb))?;
            return Ok(vec![FinalChunks {
                buffer: 0,
                ptr: c_hat_ptr,
                h,
                base,
                first: 0,
                bins: fb,
                lists,
                _marker: Default::default(),
            }]);
        }
        let input = LevelInput {
            ptr: c_hat_ptr,
            h,
            base,
            rows: nheavy,
            buf: 0,
        };
        self.multisplit(p, bins, input, total, bufs, prof)
    }

    /// Masked CSR->CSC of the heavy rows of A (`total` products, `prod` the prefix of the
    /// batch's rows' products), one slice per column k that has entries; each entry's row is
    /// tagged when the row makes its products exactly (`EXACT_ROW` in kernels/heavy.cu).
    fn heavy_slices<T: Scalar>(
        &self,
        ops: &Operands<T>,
        prod: &CudaSlice<u64>,
        heavy_rows: &CudaView<'_, u32>,
        nheavy: u64,
        row0: u64,
        total: u64,
    ) -> Result<Slices<T>> {
        let g = &*self.gpu;
        let s = &g.heavy;
        let poison = self.tuning.poison;
        let k = ops.k_cols;
        // The tag takes the top bit of a heavy row's index.
        if nheavy >= 1 << 31 {
            return Err(Error::gpu(
                "outer product setup",
                format!("{nheavy} heavy rows in one batch (at most 2^31)"),
            ));
        }
        let exact_below = self.exact_below(ops.c_cols);
        let mut col_cnt = zeros::<u32>(s, k as usize, "Ã's column counts")?;
        launch(
            g,
            s,
            "heavy_col_counts",
            strided(g, nheavy * 32, 256),
            |l| {
                l.arg(&ops.a.row_ptr)
                    .arg(&ops.a.col_idx)
                    .arg(heavy_rows)
                    .arg(&nheavy)
                    .arg(&row0)
                    .arg(&mut col_cnt);
            },
        )?;
        let mut flags = zeros::<u64>(s, k as usize + 1, "slice flags")?;
        launch(g, s, "slice_flags", strided(g, k + 1, 256), |l| {
            l.arg(&col_cnt)
                .arg(&ops.b().row_ptr)
                .arg(&k)
                .arg(&mut flags);
        })?;
        exclusive_scan(g, s, &mut flags, k + 1, "slice flags")?;
        let nslices = read_at(s, &flags, k as usize, "slice count")?;
        let mut slice_k = zeros::<u32>(s, nslices as usize, "slice columns")?;
        let mut at_ptr = zeros::<u64>(s, nslices as usize + 1, "Ã's column offsets")?;
        let mut slice_off = zeros::<u64>(s, nslices as usize + 1, "slice offsets")?;
        launch(g, s, "slice_build", strided(g, k, 256), |l| {
            l.arg(&col_cnt)
                .arg(&ops.b().row_ptr)
                .arg(&flags)
                .arg(&k)
                .arg(&mut slice_k)
                .arg(&mut at_ptr)
                .arg(&mut slice_off);
        })?;
        exclusive_scan(g, s, &mut at_ptr, nslices + 1, "Ã's column offsets")?;
        exclusive_scan(g, s, &mut slice_off, nslices + 1, "slice offsets")?;
        let at_nnz = read_at(s, &at_ptr, nslices as usize, "Ã's size")?;
        let flat = read_at(s, &slice_off, nslices as usize, "the outer product's size")?;
        if flat != total {
            return Err(Error::gpu(
                "outer product setup",
                format!("the slices hold {flat} products but the heavy rows have {total}"),
            ));
        }
        let mut fill = zeros::<u32>(s, nslices as usize, "slice fill counters")?;
        let mut at_row = uninit::<u32>(s, at_nnz as usize, poison, "Ã's rows")?;
        let mut at_val = uninit::<T>(s, at_nnz as usize, poison, "Ã's values")?;
        launch(
            g,
            s,
            &typed::<T>("csc_scatter"),
            strided(g, nheavy * 32, 256),
            |l| {
                l.arg(&ops.a.row_ptr)
                    .arg(&ops.a.col_idx)
                    .arg(&ops.a.values)
                    .arg(heavy_rows)
                    .arg(&nheavy)
                    .arg(&row0)
                    .arg(&ops.b().row_ptr)
                    .arg(prod)
                    .arg(&exact_below)
                    .arg(&flags)
                    .arg(&at_ptr)
                    .arg(&mut fill)
                    .arg(&mut at_row)
                    .arg(&mut at_val);
            },
        )?;
        Ok(Slices {
            count: nslices,
            k: slice_k,
            at_ptr,
            at_row,
            at_val,
            offsets: slice_off,
            at_nnz,
        })
    }

    /// The load-balanced outer product (Alg. 4) of Ã's slices and B's rows into Ĉ (buffer 0),
    /// each row's products from its offset in `c_hat_ptr`.
    #[allow(clippy::too_many_arguments)]
    fn outer_product<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        c_hat_ptr: &CudaSlice<u64>,
        total: u64,
        slices: Slices<T>,
        bufs: &mut Buffers,
        prof: &mut Profile,
    ) -> Result<()> {
        let g = &*self.gpu;
        let s = &g.heavy;
        let poison = self.tuning.poison;
        let Slices {
            count: nslices,
            k: slice_k,
            at_ptr,
            at_row,
            at_val,
            offsets: slice_off,
            at_nnz,
        } = slices;
        let quantized = self.tuning.quantized_sums;
        let val_bytes = sum_bytes::<T>(quantized);
        let mut cursor = check("copy Ĉ's row offsets", s.clone_dtod(c_hat_ptr))?;
        let mut col0 = uninit::<u32>(s, total as usize, poison, "Ĉ's columns")?;
        let mut val0 = uninit::<u8>(s, (total * val_bytes) as usize, poison, "Ĉ's values")?;
        let ge = p.outer_group_elems;
        let (first, last) = group_starts(g, s, &slice_off, nslices, ge, total)?;
        prof.mark("heavy: allocate Ĉ")?;
        launch(
            g,
            s,
            &summing::<T>("outer_product", quantized),
            shape(total.div_ceil(ge), OUTER_THREADS, ge * 8)?,
            |l| {
                l.arg(&at_ptr)
                    .arg(&at_row)
                    .arg(&at_val)
                    .arg(&slice_k)
                    .arg(&slice_off)
                    .arg(&nslices)
                    .arg(&first)
                    .arg(&last)
                    .arg(&ops.b().row_ptr)
                    .arg(&ops.b().col_idx)
                    .arg(&ops.b().values)
                    .arg(&mut cursor)
                    .arg(&mut col0)
                    .arg(&mut val0)
                    .arg(&ge)
                    .arg(&total);
            },
        )?;
        let t_bytes = std::mem::size_of::<T>() as u64;
        // Ĉ written, B's entries read once per product, Ã read once.
        prof.mark_bytes(
            "heavy: outer product",
            total * (4 + val_bytes) + total * (4 + t_bytes) + at_nnz * (4 + t_bytes),
        )?;
        drop((at_row, at_val, slice_k, at_ptr, slice_off, cursor));
        bufs.col[0] = Some(col0);
        bufs.val[0] = Some(val0);
        Ok(())
    }

    /// The hierarchical multisplit (Alg. 5), double-buffered, from the heavy rows in Ĉ
    /// (`input`, `total` elements): each level splits its rows into chunks, heavy chunks first
    /// in its output, and only those go on to the next level.
    fn multisplit<T: Scalar>(
        &self,
        p: &MagnusParams,
        bins: &[Bin],
        mut input: LevelInput,
        total: u64,
        bufs: &mut Buffers,
        prof: &mut Profile,
    ) -> Result<Vec<FinalChunks<T>>> {
        let entry = 4 + sum_bytes::<T>(self.tuning.quantized_sums);
        let ms_elems = p.multisplit_group_elems;
        let split = SplitShape {
            elems: ms_elems,
            max_rows: ((ms_elems - 1).div_ceil(p.tau + 1) + 1) as u32,
            warps: (SPLIT_THREADS / 32) as u64,
            entry,
        };
        if ms_elems > split_per_thread(entry - 4) * SPLIT_THREADS as u64 {
            return Err(Error::gpu(
                "multisplit",
                format!("{ms_elems} elements per block is more than its threads can hold"),
            ));
        }
        let mut finals = Vec::new();
        let mut width = p.chunks_required * p.chunk_width;
        for (level, &nch) in p.levels.iter().enumerate() {
            width /= nch;
            let last = level + 1 == p.levels.len();
            let (fin, next) = self.multisplit_level(
                p, bins, &input, &split, level, nch, width, last, total, bufs, prof,
            )?;
            finals.push(fin);
            match next {
                Some(next) => input = next,
                None => break,
            }
        }
        Ok(finals)
    }

    /// One multisplit level: histogram, chunk placement, the split into the other Ĉ buffer and
    /// the binning of its final chunks. Returns those with the next level's input (`None` when
    /// no chunk is heavy, or on the last level).
    #[allow(clippy::too_many_arguments)]
    fn multisplit_level<T: Scalar>(
        &self,
        p: &MagnusParams,
        bins: &[Bin],
        input: &LevelInput,
        split: &SplitShape,
        level: usize,
        nch: u64,
        width: u64,
        last: bool,
        total: u64,
        bufs: &mut Buffers,
        prof: &mut Profile,
    ) -> Result<(FinalChunks<T>, Option<LevelInput>)> {
        let g = &*self.gpu;
        let s = &g.heavy;
        let poison = self.tuning.poison;
        let (in_ptr, in_h, in_base, in_rows, in_buf) =
            (&input.ptr, &input.h, &input.base, input.rows, input.buf);
        let (ms_elems, max_rows, warps, entry) =
            (split.elems, split.max_rows, split.warps, split.entry);
        let shift = width.trailing_zeros();
        let nch32 = nch as u32;
        let in_total = read_at(s, in_ptr, in_rows as usize, "a level's size")?;
        let nout = in_rows * nch;
        if nout >= u32::MAX as u64 {
            return Err(Error::gpu(
                "multisplit",
                format!("{nout} chunks in one level"),
            ));
        }
        let mut counts = zeros::<u64>(s, nout as usize, "chunk counts")?;
        let hist_bytes = max_rows as u64 * nch * warps * 4;
        let blocks = in_total.div_ceil(ms_elems);
        let (group_row, _) = group_starts(g, s, in_ptr, in_rows, ms_elems, in_total)?;
        {
            let col = buf(&bufs.col, in_buf)?;
            launch(
                g,
                s,
                "multisplit_histogram",
                shape(blocks, SPLIT_THREADS, hist_bytes)?,
                |l| {
                    l.arg(in_ptr)
                        .arg(&in_rows)
                        .arg(col)
                        .arg(&nch32)
                        .arg(&shift)
                        .arg(&ms_elems)
                        .arg(&max_rows)
                        .arg(&group_row)
                        .arg(&mut counts);
                },
            )?;
        }
        prof.mark_bytes(
            &format!("heavy: histogram, level {}", level + 1),
            in_total * 4,
        )?;
        let mut flags = zeros::<u64>(s, nout as usize + 1, "chunk flags")?;
        let (tau, last_i) = (p.tau, last as i32);
        launch(g, s, "chunk_flags", strided(g, nout + 1, 256), |l| {
            l.arg(&counts)
                .arg(&nout)
                .arg(&tau)
                .arg(&last_i)
                .arg(&mut flags);
        })?;
        exclusive_scan(g, s, &mut flags, nout + 1, "chunk flags")?;
        let next_heavy = read_at(s, &flags, nout as usize, "heavy chunk count")?;
        let mut pos = zeros::<u32>(s, nout as usize, "chunk positions")?;
        let mut out_ptr = zeros::<u64>(s, nout as usize + 1, "Ĉ_reord's row offsets")?;
        let mut out_h = zeros::<u32>(s, nout as usize, "chunk rows")?;
        let mut out_base = zeros::<u32>(s, nout as usize, "chunk bases")?;
        launch(g, s, "chunk_place", strided(g, nout + 1, 256), |l| {
            l.arg(&counts)
                .arg(&flags)
                .arg(&nout)
                .arg(&nch32)
                .arg(&shift)
                .arg(in_h)
                .arg(in_base)
                .arg(&mut pos)
                .arg(&mut out_ptr)
                .arg(&mut out_h)
                .arg(&mut out_base);
        })?;
        exclusive_scan(g, s, &mut out_ptr, nout + 1, "Ĉ_reord's row offsets")?;
        let mut cursor = check("copy Ĉ_reord's row offsets", s.clone_dtod(&out_ptr))?;
        prof.mark(&format!("heavy: partition chunks, level {}", level + 1))?;
        let out_buf = 1 - in_buf;
        if bufs.col[out_buf].is_none() {
            bufs.col[out_buf] = Some(uninit::<u32>(
                s,
                total as usize,
                poison,
                "Ĉ_reord's columns",
            )?);
            let val_bytes = (entry - 4) * total;
            bufs.val[out_buf] = Some(uninit::<u8>(
                s,
                val_bytes as usize,
                poison,
                "Ĉ_reord's values",
            )?);
        }
        prof.mark("heavy: allocate Ĉ_reord")?;
        let local = max_rows as u64 * nch;
        let shared = local * 8 + warps * local * 4 + (local + 1) * 4 + ms_elems * entry + 8;
        if shared > g.shared_per_block() {
            return Err(Error::gpu(
                "multisplit",
                format!("needs {shared} bytes of shared memory per block"),
            ));
        }
        {
            let [c0, c1] = &mut bufs.col;
            let [v0, v1] = &mut bufs.val;
            let (in_col, out_col) = if in_buf == 0 { (c0, c1) } else { (c1, c0) };
            let (in_val, out_val) = if in_buf == 0 { (v0, v1) } else { (v1, v0) };
            let (in_col, in_val) = (some(in_col)?, some(in_val)?);
            let (out_col, out_val) = (some_mut(out_col)?, some_mut(out_val)?);
            launch(
                g,
                s,
                &moving_heavy::<T>("multisplit", self.tuning.quantized_sums),
                shape(blocks, SPLIT_THREADS, shared)?,
                |l| {
                    l.arg(in_ptr)
                        .arg(&in_rows)
                        .arg(in_col)
                        .arg(in_val)
                        .arg(&nch32)
                        .arg(&shift)
                        .arg(&ms_elems)
                        .arg(&max_rows)
                        .arg(&group_row)
                        .arg(&pos)
                        .arg(&mut cursor)
                        .arg(out_col)
                        .arg(out_val);
                },
            )?;
        }
        prof.mark_bytes(
            &format!("heavy: multisplit, level {}", level + 1),
            2 * in_total * entry,
        )?;
        let out = LevelOutput {
            ptr: out_ptr,
            h: out_h,
            base: out_base,
            buf: out_buf,
            chunks: nout,
            heavy: next_heavy,
        };
        self.level_result(p, bins, out, last, prof)
    }

    /// A level's final chunks, binned (all of them on the last level, the light ones before),
    /// and the next level's input: copies of the heavy chunks' rows (`None` when there are none
    /// or this was the last level).
    fn level_result<T: Scalar>(
        &self,
        p: &MagnusParams,
        bins: &[Bin],
        out: LevelOutput,
        last: bool,
        prof: &mut Profile,
    ) -> Result<(FinalChunks<T>, Option<LevelInput>)> {
        let s = &self.gpu.heavy;
        let LevelOutput {
            ptr: out_ptr,
            h: out_h,
            base: out_base,
            buf: out_buf,
            chunks: nout,
            heavy: next_heavy,
        } = out;
        let first = if last { 0 } else { next_heavy };
        let fb = if last {
            final_bins(bins, p.chunk_width)
        } else {
            bins.to_vec()
        };
        let lists = self.bin_items(s, &out_ptr, first, nout - first, &table_limits(&fb))?;
        prof.mark("heavy: bin final chunks")?;
        if !last && lists.counts[fb.len()] > 0 {
            return Err(Error::gpu(
                "multisplit",
                "a light chunk was binned as heavy",
            ));
        }
        let next_ptr = if next_heavy > 0 && !last {
            Some(check(
                "copy heavy chunk offsets",
                s.clone_dtod(&out_ptr.slice(..next_heavy as usize + 1)),
            )?)
        } else {
            None
        };
        let (next_h, next_base) = if next_ptr.is_some() {
            (
                Some(check(
                    "copy heavy chunk rows",
                    s.clone_dtod(&out_h.slice(..next_heavy as usize)),
                )?),
                Some(check(
                    "copy heavy chunk bases",
                    s.clone_dtod(&out_base.slice(..next_heavy as usize)),
                )?),
            )
        } else {
            (None, None)
        };
        let fin = FinalChunks {
            buffer: out_buf,
            ptr: out_ptr,
            h: out_h,
            base: out_base,
            first,
            bins: fb,
            lists,
            _marker: Default::default(),
        };
        let next = match (next_ptr, next_h, next_base) {
            (Some(ptr), Some(h), Some(base)) => Some(LevelInput {
                ptr,
                h,
                base,
                rows: next_heavy,
                buf: out_buf,
            }),
            _ => None,
        };
        Ok((fin, next))
    }
}
