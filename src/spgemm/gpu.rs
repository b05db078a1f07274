//! gMAGNUS on the GPU (paper Alg. 3): `C = A·B` with light rows in binned shared-memory hash
//! tables and heavy rows through the outer product, the hierarchical multisplit and dense
//! shared-memory accumulators. Light and heavy rows run on their own streams.
//!
//! Memory-bounded: the rows are processed in batches sized from the free device memory; a batch
//! that still runs out of memory is split in two and retried. [`GpuEngine::multiply_batches`]
//! hands each batch to the caller as it is made.

use super::params::{magnus_params, GroupShape, MagnusParams, SizeModel};
use super::{check_operands, Pattern, ProductStats, SpgemmOptions};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::gpu::matrix::DeviceCsr;
use crate::gpu::prims::{
    check, download, exclusive_scan, is_out_of_memory, launch, read_at, shape, strided, uninit,
    upload, zeros,
};
use crate::gpu::profile::{Phase, Profile};
use crate::gpu::{self, Gpu};
use crate::scalar::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, PushKernelArg};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Hash-table sizes (slots) of the light bins below the largest; the largest bin's table is
/// 2τ slots, the whole shared memory. A row goes to the first bin whose table is at least twice
/// its product count (load factor 1/2, so a table never fills).
const HASH_TABLES: [u32; 7] = [64, 128, 256, 512, 1024, 2048, 4096];
/// Shared memory kept back from the parameters for the kernels' own small shared variables
/// (counters, scan scratch), so that a table sized from the parameters still fits.
const SHARED_RESERVE: u64 = 256;
/// Most slots of a hash table (8 per thread of a 1024-thread block; MAX_SLOTS_PER_THREAD in
/// kernels/accumulate.cu).
const MAX_TABLE_SLOTS: u64 = 8 * 1024;
/// Threads of the dense accumulator blocks.
const DENSE_THREADS: u32 = 512;
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
const DENSE_ROW_THREADS: u32 = 1024;
/// Threads of the outer-product blocks.
const OUTER_THREADS: u32 = 512;
/// Threads of the histogram and multisplit blocks: 8 warps (the paper's n_subGroups), each with
/// its own histogram; small blocks let several share a multiprocessor and hide each other's
/// barriers.
const SPLIT_THREADS: u32 = 256;
/// Elements a histogram or multisplit thread holds in registers (MS_PER_THREAD in heavy.cu).
/// (MS_PER_THREAD_F32 / _F64 in heavy.cu.)
fn split_per_thread(val_bytes: u64) -> u64 {
    if val_bytes == 4 {
        12
    } else {
        8
    }
}

/// Knobs of the GPU engine; the defaults are what a user wants.
#[derive(Clone, Debug, Default)]
pub struct GpuTuning {
    /// Use at most this many bytes of device memory for a batch's work (default: what is free,
    /// less a margin). Tests set it low to exercise row batching.
    pub memory_limit: Option<u64>,
    /// Fill outputs with 0xFF bytes before the kernels write them, so that a missed write shows.
    pub poison: bool,
    /// Print the time of each phase on stderr (waits for the device after each phase).
    pub profile: bool,
    /// Most chunks one multisplit level may make (a power of two; default: what shared memory
    /// allows). Tests lower it to force several levels on small inputs.
    pub max_chunks_per_level: Option<u64>,
    /// Most entries a batch of C may have, bounded before the product by the sum over its rows of
    /// min(products, columns): caps the host memory a batch takes when the caller keeps batches
    /// on the host (MCL prunes each one). Default: no cap beyond the device's memory.
    pub max_batch_entries: Option<u64>,
    /// Rows with more products than the hash tables hold and at least this many go to the
    /// dense-row accumulator instead of the outer product (default: C's column count divided
    /// by `dense_fraction`; `u64::MAX`: never). Masked products never use it.
    pub dense_from: Option<u64>,
    /// See `dense_from` (default [`DENSE_FRACTION`]). Both apply only where `hash_limit` keeps
    /// the hash tables up to τ.
    pub dense_fraction: Option<u64>,
    /// Rows with more products than this (rounded down to a table's limit) leave the hash
    /// tables; below τ they all go to the dense-row accumulator, and the limit is ignored where
    /// that is off (masked products, `dense_from` `u64::MAX`). Default [`HASH_LIMIT`];
    /// `u64::MAX` keeps every table up to τ.
    pub hash_limit: Option<u64>,
    /// Columns of the dense-row accumulator's window (a multiple of 32; default: what shared
    /// memory holds). Tests lower it to force several windows on small inputs.
    pub dense_window: Option<u32>,
}

impl GpuTuning {
    /// The defaults, overridden by `GMCL_GPU_MEMORY_LIMIT` (bytes), `GMCL_GPU_POISON=1`,
    /// `GMCL_GPU_PROFILE=1`, `GMCL_GPU_DENSE_FROM`, `GMCL_GPU_DENSE_FRACTION` and
    /// `GMCL_GPU_HASH_LIMIT` (for tuning experiments).
    pub fn from_env() -> Self {
        GpuTuning {
            memory_limit: std::env::var("GMCL_GPU_MEMORY_LIMIT")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            poison: std::env::var("GMCL_GPU_POISON").is_ok_and(|v| v == "1"),
            profile: std::env::var("GMCL_GPU_PROFILE").is_ok_and(|v| v == "1"),
            max_chunks_per_level: None,
            max_batch_entries: None,
            dense_from: std::env::var("GMCL_GPU_DENSE_FROM")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            dense_fraction: std::env::var("GMCL_GPU_DENSE_FRACTION")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            hash_limit: std::env::var("GMCL_GPU_HASH_LIMIT")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            dense_window: None,
        }
    }
}

/// The gMAGNUS engine on one GPU.
pub struct GpuEngine {
    gpu: Arc<Gpu>,
    tuning: GpuTuning,
    /// The phases of the last product, when profiling.
    last_phases: std::sync::Mutex<Vec<Phase>>,
}

/// A bin of rows or chunks: the hash table size (0 for the dense bin) and its block size.
#[derive(Clone, Copy, Debug)]
struct Bin {
    table: u32,
    threads: u32,
}

/// The parameters the kernels run with: the paper's, from the shared memory less the kernels'
/// own variables, with τ capped so that the largest hash table has at most
/// `MAX_TABLE_SLOTS` slots (the compaction before the sort stages 8 slots per thread of 1024).
fn engine_params(c_cols: u64, shared_per_block: u64, val_bytes: u64) -> MagnusParams {
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
fn hash_bins(tau: u64) -> Vec<Bin> {
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
fn table_limits(bins: &[Bin]) -> Vec<u64> {
    bins.iter().map(|b| b.table as u64 / 2).collect()
}

/// The largest item the bins take (0 without bins).
fn top_limit(bins: &[Bin]) -> u64 {
    bins.last().map_or(0, |b| b.table as u64 / 2)
}

/// The hash bins for chunks of the last level (`width` columns wide): a chunk with more than
/// width/16 elements is cheaper in the dense accumulator (clearing and scanning `width` columns)
/// than in a hash table that must be sorted.
fn final_bins(bins: &[Bin], width: u64) -> Vec<Bin> {
    let dense_from = (width / 16).max(32);
    bins.iter()
        .copied()
        .filter(|b| b.table as u64 / 2 <= dense_from)
        .collect()
}

/// The device copies of the operands, shared by all batches.
struct Operands<T: Scalar> {
    a: DeviceCsr<T>,
    /// `None` when B is A (a square is uploaded once).
    b: Option<DeviceCsr<T>>,
    m_ptr: CudaSlice<u64>,
    m_col: CudaSlice<u32>,
    has_mask: i32,
    k_cols: u64,
    c_cols: u64,
    /// Leave the dense rows out of C for the caller ([`DeferredRows`]) when a whole row fits
    /// one window of shared memory.
    defer_dense: bool,
}

impl<T: Scalar> Operands<T> {
    fn b(&self) -> &DeviceCsr<T> {
        self.b.as_ref().unwrap_or(&self.a)
    }

    /// Pushes A's and B's row offsets and columns, the first arguments of the row kernels'
    /// symbolic phases.
    fn push_structure<'a>(&'a self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        l.arg(&self.a.row_ptr)
            .arg(&self.a.col_idx)
            .arg(&self.b().row_ptr)
            .arg(&self.b().col_idx);
    }

    /// Pushes A's and B's row offsets, columns and values, the first arguments of the row
    /// kernels' numeric phases.
    fn push_operands<'a>(&'a self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        l.arg(&self.a.row_ptr)
            .arg(&self.a.col_idx)
            .arg(&self.a.values)
            .arg(&self.b().row_ptr)
            .arg(&self.b().col_idx)
            .arg(&self.b().values);
    }
}

/// Rows (of Ĉ or of one multisplit level's output) whose chunks are final: they are
/// accumulated into C. Rows [first, nrows) of `ptr` are final.
struct FinalChunks<T: Scalar> {
    buffer: usize,
    ptr: CudaSlice<u64>,
    h: CudaSlice<u32>,
    base: CudaSlice<u32>,
    first: u64,
    /// The hash bins of these chunks; bigger chunks go to the dense accumulator.
    bins: Vec<Bin>,
    lists: BinLists,
    _marker: std::marker::PhantomData<T>,
}

/// Items sorted into bins: `lists[offsets[b]..offsets[b] + counts[b]]` are bin b's items.
struct BinLists {
    lists: CudaSlice<u32>,
    counts: Vec<u64>,
    offsets: Vec<u64>,
}

/// One launch over a bin of final chunks: its list, the kernel, the table size (hash) or chunk
/// width (dense), and the launch shape.
struct ChunkLaunch<'a> {
    list: CudaView<'a, u32>,
    kernel: String,
    size: u32,
    cfg: cudarc::driver::LaunchConfig,
}

impl<T: Scalar> FinalChunks<T> {
    /// The offsets, heavy rows and column bases of the final chunks (rows `first..`).
    fn rows(&self) -> (CudaView<'_, u64>, CudaView<'_, u32>, CudaView<'_, u32>) {
        let f = self.first as usize;
        (self.ptr.slice(f..), self.h.slice(f..), self.base.slice(f..))
    }

    /// The launches of the symbolic (`numeric` false) or numeric phase over the nonempty bins:
    /// hash accumulators for the hash bins, the dense accumulator for the last. Both kinds take
    /// the same arguments but the table size or chunk width.
    fn launches(&self, chunk_width: u64, numeric: bool) -> Result<Vec<ChunkLaunch<'_>>> {
        let val_bytes = std::mem::size_of::<T>() as u64;
        let (hash, dense) = if numeric {
            (
                typed::<T>("hash_segs_numeric"),
                typed::<T>("dense_segs_numeric"),
            )
        } else {
            (
                "hash_segs_symbolic".to_string(),
                "dense_segs_symbolic".to_string(),
            )
        };
        let mut out = Vec::new();
        for b in 0..=self.bins.len() {
            let count = self.lists.counts[b];
            if count == 0 {
                continue;
            }
            let (kernel, size, cfg) = match self.bins.get(b) {
                Some(bin) => {
                    let slot = if numeric { 4 + val_bytes } else { 4 };
                    (
                        hash.clone(),
                        bin.table,
                        shape(count, bin.threads, bin.table as u64 * slot)?,
                    )
                }
                None => {
                    let per_col = if numeric { val_bytes + 1 } else { 1 };
                    let cfg = shape(count, DENSE_THREADS, chunk_width * per_col)?;
                    (dense.clone(), chunk_width as u32, cfg)
                }
            };
            out.push(ChunkLaunch {
                list: self.lists.view(b),
                kernel,
                size,
                cfg,
            });
        }
        Ok(out)
    }
}

impl BinLists {
    fn view(&self, b: usize) -> CudaView<'_, u32> {
        let o = self.offsets[b] as usize;
        self.lists.slice(o..o + self.counts[b] as usize)
    }
}

/// The dense-row path of a product: rows with at least `from` products, the window widths
/// (columns) of its symbolic and numeric kernels, and whether the rows are left to the caller.
struct DenseRows {
    from: u64,
    numeric_width: u32,
    symbolic_width: u32,
    deferred: bool,
}

/// The dense rows of a batch that [`GpuEngine::square_on_device`] left out of C (they have no
/// entries there) for its caller to make: MCL makes and prunes them in one kernel
/// ([`crate::gpu::mcl`]). A whole row of C fits in one window of shared memory.
pub struct DeferredRows {
    lists: BinLists,
    bin: usize,
}

impl DeferredRows {
    /// The rows, numbered from the batch's first row, in no particular order.
    pub fn rows(&self) -> CudaView<'_, u32> {
        self.lists.view(self.bin)
    }

    /// How many rows there are.
    pub fn count(&self) -> u64 {
        self.lists.counts[self.bin]
    }
}

/// The Ĉ buffers (double-buffered through the multisplit levels).
struct Buffers<T: Scalar> {
    col: [Option<CudaSlice<u32>>; 2],
    val: [Option<CudaSlice<T>>; 2],
}

impl GpuEngine {
    /// Opens the GPU (compiling the kernels on first use in the process), with tuning from the
    /// environment. Fails with [`Error::EngineUnavailable`] saying why when there is no usable GPU.
    pub fn open() -> Result<Self> {
        Self::open_unadvised().map_err(|e| match e {
            Error::EngineUnavailable(why) => Error::EngineUnavailable(format!(
                "the GPU engine cannot run: {why}; use --engine cpu (or auto, which falls back \
                 to the CPU)"
            )),
            other => other,
        })
    }

    /// As [`GpuEngine::open`], but an [`Error::EngineUnavailable`] carries the reason alone, for
    /// callers that give their own advice (`gmcl bench` names its `--engines` option).
    pub fn open_unadvised() -> Result<Self> {
        Ok(GpuEngine {
            gpu: gpu::device()?,
            tuning: GpuTuning::from_env(),
            last_phases: Default::default(),
        })
    }

    /// Replaces the tuning.
    pub fn with_tuning(mut self, tuning: GpuTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// The phases of the last product (empty unless `tuning.profile` is on).
    pub fn last_phases(&self) -> Vec<Phase> {
        self.last_phases
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// The GPU in use.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Whether outputs are poisoned before the kernels write them ([`GpuTuning::poison`]).
    pub fn poisons(&self) -> bool {
        self.tuning.poison
    }

    /// The gMAGNUS parameters for a product of `c_cols` columns with values of type `T`.
    pub fn params<T: Scalar>(&self, c_cols: u64) -> MagnusParams {
        let mut p = engine_params(
            c_cols,
            self.gpu.shared_per_block(),
            std::mem::size_of::<T>() as u64,
        );
        if let Some(cap) = self.tuning.max_chunks_per_level {
            let cap = cap.max(2).next_power_of_two();
            if cap < p.chunks_max {
                p.chunks_max = cap;
                p.levels = super::params::chunk_levels(p.chunks_required, cap);
            }
        }
        p
    }

    /// Computes `C = A·B` (the rows and entries `opts` asks for) and copies it to the host.
    pub fn multiply<T: Scalar>(
        &self,
        a: &Csr<T>,
        b: &Csr<T>,
        opts: &SpgemmOptions,
    ) -> Result<(Csr<T>, ProductStats)> {
        let rows = check_operands(a, b, opts)?;
        let mut parts = Vec::new();
        let stats = self.multiply_batches(a, b, opts, |_, part| {
            parts.push(part);
            Ok(())
        })?;
        if parts.len() == 1 {
            if let Some(c) = parts.pop() {
                return Ok((c, stats));
            }
        }
        // Several batches: one copy into arrays of the final size.
        let nnz: usize = parts.iter().map(|c| c.nnz()).sum();
        let mut row_ptr: Vec<u64> = Vec::with_capacity(rows.len() + 1);
        row_ptr.push(0);
        let mut col_idx = Vec::with_capacity(nnz);
        let mut values = Vec::with_capacity(nnz);
        for part in parts {
            let base = col_idx.len() as u64;
            let (_, _, p, c, v) = part.into_parts();
            row_ptr.extend(p[1..].iter().map(|&x| x + base));
            col_idx.extend_from_slice(&c);
            values.extend_from_slice(&v);
        }
        let c = Csr::from_parts_unchecked(rows.len(), b.ncols(), row_ptr, col_idx, values);
        Ok((c, stats))
    }

    /// Computes `C = A·B` in row batches, handing each batch (its rows of `C`, and those rows as a
    /// matrix whose row 0 is the batch's first row) to `consume` as soon as it is made, in order.
    pub fn multiply_batches<T: Scalar>(
        &self,
        a: &Csr<T>,
        b: &Csr<T>,
        opts: &SpgemmOptions,
        mut consume: impl FnMut(Range<usize>, Csr<T>) -> Result<()>,
    ) -> Result<ProductStats> {
        let rows = check_operands(a, b, opts)?;
        check_columns(b.ncols())?;
        let _busy = self.gpu.busy.lock().unwrap_or_else(|p| p.into_inner());
        let start = Instant::now();
        let mut prof = Profile::new(&self.gpu.ctx, self.tuning.profile);
        let ops = self.upload_operands(a, b, opts.mask.as_ref())?;
        let products = host_products(a, b, &rows);
        prof.mark("upload A, B; plan batches")?;
        let g = &*self.gpu;
        let stats = self.run_batches(&ops, rows, &products, &mut prof, |batch, c, _, prof| {
            let c = c.download(g)?;
            prof.mark("copy C to the host")?;
            consume(batch, c)
        })?;
        self.finish(
            stats,
            start,
            prof,
            (a.nrows(), a.ncols(), b.nrows(), b.ncols()),
        )
    }

    /// Squares the square matrix `m`, already on the device, in row batches that stay on the
    /// device: each (its rows of `m²`, row 0 being the batch's first row) goes to `consume` as
    /// soon as it is made, in order, with `m` itself. With `defer_dense`, the dense rows are
    /// left out of each batch and handed over as [`DeferredRows`] when a whole row fits one
    /// window of shared memory (`Some` only then). Gives `m` back with the product's figures.
    pub fn square_on_device<T: Scalar>(
        &self,
        m: DeviceCsr<T>,
        defer_dense: bool,
        mut consume: impl FnMut(
            Range<usize>,
            DeviceCsr<T>,
            Option<DeferredRows>,
            &DeviceCsr<T>,
        ) -> Result<()>,
    ) -> Result<(ProductStats, DeviceCsr<T>)> {
        if m.nrows != m.ncols {
            return Err(Error::Invalid(format!(
                "cannot square a {} x {} matrix",
                m.nrows, m.ncols
            )));
        }
        check_columns(m.ncols)?;
        let _busy = self.gpu.busy.lock().unwrap_or_else(|p| p.into_inner());
        let start = Instant::now();
        let s = &self.gpu.main;
        let mut prof = Profile::new(&self.gpu.ctx, self.tuning.profile);
        let n = m.nrows as u64;
        let ops = Operands {
            k_cols: n,
            c_cols: n,
            a: m,
            b: None,
            m_ptr: zeros(s, 1, "an empty mask")?,
            m_col: zeros(s, 1, "an empty mask")?,
            has_mask: 0,
            defer_dense,
        };
        let products = self.device_products(&ops)?;
        prof.mark("products per row; plan batches")?;
        let stats = self.run_batches(
            &ops,
            0..n as usize,
            &products,
            &mut prof,
            |batch, c, deferred, _| consume(batch, c, deferred, &ops.a),
        )?;
        let stats = self.finish(
            stats,
            start,
            prof,
            (n as usize, n as usize, n as usize, n as usize),
        )?;
        Ok((stats, ops.a))
    }

    /// The prefix of the intermediate products of A·B's rows (`n + 1` values from 0), counted on
    /// the device.
    fn device_products<T: Scalar>(&self, ops: &Operands<T>) -> Result<Vec<u64>> {
        let g = &*self.gpu;
        let s = &g.main;
        let n = ops.a.nrows as u64;
        let mut prod = zeros::<u64>(s, n as usize + 1, "products per row")?;
        if n > 0 {
            let row0 = 0u64;
            launch(g, s, "row_products", strided(g, n, 256), |l| {
                l.arg(&ops.a.row_ptr)
                    .arg(&ops.a.col_idx)
                    .arg(&ops.b().row_ptr)
                    .arg(&row0)
                    .arg(&n)
                    .arg(&mut prod);
            })?;
            exclusive_scan(g, s, &mut prod, n + 1, "products per row")?;
        }
        download(g, s, &prod, n as usize + 1, "products per row")
    }

    /// Runs the batches of `rows` (`products`: the prefix of their intermediate products),
    /// splitting a batch that runs out of memory, and hands each product to `consume` in order.
    fn run_batches<T: Scalar>(
        &self,
        ops: &Operands<T>,
        rows: Range<usize>,
        products: &[u64],
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
        while let Some(batch) = pending.pop() {
            match self.run_batch(ops, &p, batch.clone(), prof, &mut stats) {
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

    /// Waits for the device, stamps the wall time and keeps (and, when profiling, prints) the
    /// phases of a product of an `a.0 x a.1` by a `a.2 x a.3` matrix.
    fn finish(
        &self,
        mut stats: ProductStats,
        start: Instant,
        prof: Profile,
        shape: (usize, usize, usize, usize),
    ) -> Result<ProductStats> {
        check("finish", self.gpu.main.synchronize())?;
        stats.seconds = start.elapsed().as_secs_f64();
        if let Ok(mut last) = self.last_phases.lock() {
            *last = prof.phases().to_vec();
        }
        prof.report(&format!(
            "{} x {} times {} x {}",
            shape.0, shape.1, shape.2, shape.3
        ));
        Ok(stats)
    }

    fn upload_operands<T: Scalar>(
        &self,
        a: &Csr<T>,
        b: &Csr<T>,
        mask: Option<&Pattern>,
    ) -> Result<Operands<T>> {
        let s = &self.gpu.main;
        let bytes = |m_nnz: usize, m_rows: usize, val: usize| {
            (m_rows as u64 + 1) * 8 + m_nnz as u64 * (4 + val as u64)
        };
        let val = std::mem::size_of::<T>();
        let need = bytes(a.nnz(), a.nrows(), val)
            + bytes(b.nnz(), b.nrows(), val)
            + mask.map_or(0, |m| bytes(m.nnz(), m.nrows(), 0));
        let (free, _) = self.gpu.memory()?;
        if need > free {
            return Err(Error::gpu(
                "upload the operands",
                format!(
                    "A and B need {:.2} GiB on the GPU but {:.2} GiB is free; use --engine cpu",
                    need as f64 / (1u64 << 30) as f64,
                    free as f64 / (1u64 << 30) as f64
                ),
            ));
        }
        let (m_ptr, m_col, has_mask) = match mask {
            Some(m) => (
                upload(s, m.row_ptr, "the mask's row offsets")?,
                upload(s, m.col_idx, "the mask's columns")?,
                1,
            ),
            None => (
                zeros(s, 1, "an empty mask")?,
                zeros(s, 1, "an empty mask")?,
                0,
            ),
        };
        let a_dev = DeviceCsr::upload(&self.gpu, a)?;
        // A square (the same matrix twice) is uploaded once.
        let b_dev = if std::ptr::eq(a, b) {
            None
        } else {
            Some(DeviceCsr::upload(&self.gpu, b)?)
        };
        Ok(Operands {
            a: a_dev,
            b: b_dev,
            m_ptr,
            m_col,
            has_mask,
            k_cols: a.ncols() as u64,
            c_cols: b.ncols() as u64,
            defer_dense: false,
        })
    }

    /// Splits `rows` into batches whose working memory fits: Ĉ (twice, for the multisplit's double
    /// buffer) for heavy rows and an estimate of C. A batch that does not fit after all is split
    /// again when it runs out of memory.
    fn plan_batches<T: Scalar>(
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
                copies * prods * entry
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

    /// One batch of rows, start to finish: setup, symbolic, C's offsets, numeric. Its rows of C
    /// stay on the device; deferred dense rows are left out of C and listed.
    fn run_batch<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        rows: Range<usize>,
        prof: &mut Profile,
        stats: &mut ProductStats,
    ) -> Result<(DeviceCsr<T>, Option<DeferredRows>)> {
        let g = &*self.gpu;
        let timer = Instant::now();
        let (main, light, heavy) = (&g.main, &g.light, &g.heavy);
        let n = rows.len() as u64;
        let row0 = rows.start as u64;
        if n == 0 {
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
        // Setup: products per row and their prefix (Ĉ.rowPtr of the whole batch).
        let mut prod = zeros::<u64>(main, n as usize + 1, "products per row")?;
        launch(g, main, "row_products", strided(g, n, 256), |l| {
            l.arg(&ops.a.row_ptr)
                .arg(&ops.a.col_idx)
                .arg(&ops.b().row_ptr)
                .arg(&row0)
                .arg(&n)
                .arg(&mut prod);
        })?;
        exclusive_scan(g, main, &mut prod, n + 1, "products per row")?;
        // The hash bins of C's rows (all of them for the heavy rows' chunks).
        let all_bins = hash_bins(p.tau);
        let bins = self.row_bins(ops, p);
        // Rows past the hash tables: the outer product, or the dense-row bin (past dense_from).
        let mut limits = table_limits(&bins);
        let dense = self.dense_rows(ops, p);
        if let Some(d) = &dense {
            limits.push(d.from - 1);
        }
        let row_lists = self.bin_items(main, &prod, 0, n, &limits)?;
        let nheavy = row_lists.counts[bins.len()];
        let heavy_rows = row_lists.view(bins.len());
        // Deferred dense rows are not made here: their `ndense` stays 0.
        let deferred = dense.as_ref().is_some_and(|d| d.deferred);
        let ndense = match deferred {
            true => 0,
            false => row_lists.counts.get(bins.len() + 1).copied().unwrap_or(0),
        };
        let mut row_nnz = zeros::<u64>(main, n as usize + 1, "row sizes of C")?;
        prof.mark("setup: products, bins")?;
        fork(main, &[light, heavy])?;

        // Symbolic, light rows.
        for (b, bin) in bins.iter().enumerate() {
            if row_lists.counts[b] == 0 {
                continue;
            }
            let list = row_lists.view(b);
            let cfg = shape(row_lists.counts[b], bin.threads, bin.table as u64 * 4)?;
            launch(g, light, "hash_rows_symbolic", cfg, |l| {
                ops.push_structure(l);
                l.arg(&row0)
                    .arg(&list)
                    .arg(&bin.table)
                    .arg(&ops.m_ptr)
                    .arg(&ops.m_col)
                    .arg(&ops.has_mask)
                    .arg(&mut row_nnz);
            })?;
        }

        if let (Some(d), true) = (&dense, ndense > 0) {
            let list = row_lists.view(bins.len() + 1);
            let cfg = shape(ndense, DENSE_ROW_THREADS, d.symbolic_width as u64 / 8)?;
            launch(g, light, "dense_rows_symbolic", cfg, |l| {
                ops.push_structure(l);
                l.arg(&row0)
                    .arg(&list)
                    .arg(&ops.c_cols)
                    .arg(&d.symbolic_width)
                    .arg(&mut row_nnz);
            })?;
        }
        prof.mark("symbolic: light rows")?;
        // Heavy rows: outer product, multisplit levels, symbolic of the final chunks.
        let r_chunks = p.chunks_required;
        let width_shift = p.chunk_width.trailing_zeros();
        let mut grid = zeros::<u64>(heavy, (nheavy * r_chunks) as usize + 1, "the chunk grid")?;
        let mut finals: Vec<FinalChunks<T>> = Vec::new();
        let mut bufs = Buffers::<T> {
            col: [None, None],
            val: [None, None],
        };
        if nheavy > 0 {
            finals = self.heavy_reorder(
                ops,
                p,
                &prod,
                &heavy_rows,
                nheavy,
                row0,
                &all_bins,
                &mut bufs,
                prof,
            )?;
            let nch = r_chunks as u32;
            for f in &finals {
                let (ptr, hh, base) = f.rows();
                let col = buf(&bufs.col, f.buffer)?;
                for c in f.launches(p.chunk_width, false)? {
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
        }
        join(main, &[light, heavy])?;
        prof.mark("symbolic: heavy chunks")?;

        // C's row offsets: heavy rows sum their chunks, then one prefix sum over all rows.
        if nheavy > 0 {
            exclusive_scan(g, main, &mut grid, nheavy * r_chunks + 1, "the chunk grid")?;
            let nch = r_chunks as u32;
            launch(g, main, "grid_row_sums", strided(g, nheavy, 256), |l| {
                l.arg(&grid)
                    .arg(&heavy_rows)
                    .arg(&nheavy)
                    .arg(&nch)
                    .arg(&mut row_nnz);
            })?;
        }
        exclusive_scan(g, main, &mut row_nnz, n + 1, "row sizes of C")?;
        let nnz = read_at(main, &row_nnz, n as usize, "C's entry count")?;
        let mut c_col = uninit::<u32>(main, nnz as usize, self.tuning.poison, "C's columns")?;
        let mut c_val = uninit::<T>(main, nnz as usize, self.tuning.poison, "C's values")?;
        prof.mark("C's offsets, allocate C")?;
        fork(main, &[light, heavy])?;

        // Numeric, light rows.
        let val_bytes = std::mem::size_of::<T>() as u64;
        for (b, bin) in bins.iter().enumerate() {
            if row_lists.counts[b] == 0 {
                continue;
            }
            let list = row_lists.view(b);
            let cfg = shape(
                row_lists.counts[b],
                bin.threads,
                bin.table as u64 * (4 + val_bytes),
            )?;
            launch(g, light, &typed::<T>("hash_rows_numeric"), cfg, |l| {
                ops.push_operands(l);
                l.arg(&row0)
                    .arg(&list)
                    .arg(&bin.table)
                    .arg(&ops.m_ptr)
                    .arg(&ops.m_col)
                    .arg(&ops.has_mask)
                    .arg(&row_nnz)
                    .arg(&mut c_col)
                    .arg(&mut c_val);
            })?;
        }
        if let (Some(d), true) = (&dense, ndense > 0) {
            let list = row_lists.view(bins.len() + 1);
            let shared = d.numeric_width as u64 * val_bytes + d.numeric_width as u64 / 8;
            let cfg = shape(ndense, DENSE_ROW_THREADS, shared)?;
            launch(g, light, &typed::<T>("dense_rows_numeric"), cfg, |l| {
                ops.push_operands(l);
                l.arg(&row0)
                    .arg(&list)
                    .arg(&ops.c_cols)
                    .arg(&d.numeric_width)
                    .arg(&row_nnz)
                    .arg(&mut c_col)
                    .arg(&mut c_val);
            })?;
        }
        prof.mark("numeric: light rows")?;
        // Numeric, final chunks of heavy rows.
        let nch = r_chunks as u32;
        for f in &finals {
            let (ptr, hh, base) = f.rows();
            let col = buf(&bufs.col, f.buffer)?;
            let val = buf(&bufs.val, f.buffer)?;
            for c in f.launches(p.chunk_width, true)? {
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
                        .arg(&grid)
                        .arg(&row_nnz)
                        .arg(&mut c_col)
                        .arg(&mut c_val);
                })?;
            }
        }
        join(main, &[light, heavy])?;
        prof.mark("numeric: heavy chunks")?;
        check("numeric", main.synchronize())?;
        stats.device_seconds += timer.elapsed().as_secs_f64();

        let c = DeviceCsr {
            nrows: n as usize,
            ncols: ops.c_cols as usize,
            nnz,
            row_ptr: row_nnz,
            col_idx: c_col,
            values: c_val,
        };
        let deferred = deferred.then(|| DeferredRows {
            lists: row_lists,
            bin: bins.len() + 1,
        });
        Ok((c, deferred))
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
    fn row_bins<T: Scalar>(&self, ops: &Operands<T>, p: &MagnusParams) -> Vec<Bin> {
        match self.dense_rows(ops, p) {
            Some(_) => self.lowered_bins(p),
            None => hash_bins(p.tau),
        }
    }

    /// Whether and how this product uses the dense-row accumulator: from how many products a
    /// row goes there and the windows (columns) of its two kernels, sized from shared memory.
    fn dense_rows<T: Scalar>(&self, ops: &Operands<T>, p: &MagnusParams) -> Option<DenseRows> {
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
        let val_bytes = std::mem::size_of::<T>() as u64;
        let shared = self.gpu.large_shared();
        // Windows are multiples of 1024 columns, no wider than C (rounded up to 32).
        let fit = |w: u64| {
            let w = match self.tuning.dense_window {
                Some(t) => (t as u64).max(32) & !31,
                None => w & !1023,
            };
            w.min(ops.c_cols.div_ceil(32) * 32).min(1 << 30) as u32
        };
        let numeric_width = fit(shared * 8 / (8 * val_bytes + 1));
        let symbolic_width = fit(shared * 8);
        // A deferred row is made in one window of values alone (no presence bits).
        let fused_cols = match self.tuning.dense_window {
            Some(t) => t as u64,
            None => shared / val_bytes,
        };
        (numeric_width >= 32).then_some(DenseRows {
            from,
            numeric_width,
            symbolic_width,
            deferred: ops.defer_dense && ops.c_cols.div_ceil(32) * 32 <= fused_cols,
        })
    }

    /// Sorts items [first, first + n) of `ptr` (sizes `ptr[i+1] - ptr[i]`) into bins: bin `b`
    /// takes the sizes up to `limits[b]` (the first that fits), bin `limits.len()` the rest;
    /// empty items go nowhere.
    fn bin_items(
        &self,
        s: &Arc<CudaStream>,
        ptr: &CudaSlice<u64>,
        first: u64,
        n: u64,
        limits: &[u64],
    ) -> Result<BinLists> {
        let g = &*self.gpu;
        let nb = limits.len();
        let limits = upload(s, limits, "bin limits")?;
        let mut bin_of = zeros::<u32>(s, n as usize, "bin of each row")?;
        let mut counts = zeros::<u32>(s, nb + 1, "bin counts")?;
        let nbins = nb as u32;
        let view = ptr.slice(first as usize..);
        launch(g, s, "classify_sizes", strided(g, n, 256), |l| {
            l.arg(&view)
                .arg(&n)
                .arg(&limits)
                .arg(&nbins)
                .arg(&mut bin_of)
                .arg(&mut counts);
        })?;
        let counts: Vec<u64> = check("read bin counts", s.clone_dtoh(&counts))?
            .into_iter()
            .map(u64::from)
            .collect();
        let mut offsets = vec![0u64; nb + 1];
        for b in 1..=nb {
            offsets[b] = offsets[b - 1] + counts[b - 1];
        }
        let total = offsets[nb] + counts[nb];
        let cursor: Vec<u32> = offsets.iter().map(|&o| o as u32).collect();
        let mut cursor = upload(s, &cursor, "bin cursors")?;
        let mut lists = zeros::<u32>(s, total as usize, "bin lists")?;
        launch(g, s, "scatter_bins", strided(g, n, 256), |l| {
            l.arg(&bin_of).arg(&n).arg(&mut cursor).arg(&mut lists);
        })?;
        Ok(BinLists {
            lists,
            counts,
            offsets,
        })
    }

    /// The heavy-row path up to the final chunks: masked CSR->CSC of A's heavy rows, the outer
    /// product into Ĉ, then the multisplit levels. Returns the sets of final chunks, each binned.
    #[allow(clippy::too_many_arguments)]
    fn heavy_reorder<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        prod: &CudaSlice<u64>,
        heavy_rows: &CudaView<'_, u32>,
        nheavy: u64,
        row0: u64,
        bins: &[Bin],
        bufs: &mut Buffers<T>,
        prof: &mut Profile,
    ) -> Result<Vec<FinalChunks<T>>> {
        let g = &*self.gpu;
        let s = &g.heavy;
        let poison = self.tuning.poison;
        // Ĉ.rowPtr of the heavy rows.
        let mut c_hat_ptr = zeros::<u64>(s, nheavy as usize + 1, "Ĉ's row offsets")?;
        launch(g, s, "gather_sizes", strided(g, nheavy + 1, 256), |l| {
            l.arg(prod).arg(heavy_rows).arg(&nheavy).arg(&mut c_hat_ptr);
        })?;
        exclusive_scan(g, s, &mut c_hat_ptr, nheavy + 1, "Ĉ's row offsets")?;
        let total = read_at(s, &c_hat_ptr, nheavy as usize, "Ĉ's size")?;

        // Masked CSR->CSC of the heavy rows of A, one slice per column k that has entries.
        let k = ops.k_cols;
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
                    .arg(&flags)
                    .arg(&at_ptr)
                    .arg(&mut fill)
                    .arg(&mut at_row)
                    .arg(&mut at_val);
            },
        )?;

        prof.mark("heavy: CSR to CSC of A's rows")?;
        // The outer product into Ĉ (buffer 0).
        let mut cursor = check("copy Ĉ's row offsets", s.clone_dtod(&c_hat_ptr))?;
        let mut col0 = uninit::<u32>(s, total as usize, poison, "Ĉ's columns")?;
        let mut val0 = uninit::<T>(s, total as usize, poison, "Ĉ's values")?;
        let ge = p.outer_group_elems;
        let (first, last) = group_starts(g, s, &slice_off, nslices, ge, total)?;
        prof.mark("heavy: allocate Ĉ")?;
        launch(
            g,
            s,
            &typed::<T>("outer_product"),
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
        let val_bytes = std::mem::size_of::<T>() as u64;
        // Ĉ written, B's entries read once per product, Ã read once.
        prof.mark_bytes(
            "heavy: outer product",
            2 * total * (4 + val_bytes) + at_nnz * (4 + val_bytes),
        )?;
        drop((
            at_row, at_val, fill, slice_k, at_ptr, slice_off, flags, col_cnt, cursor,
        ));
        bufs.col[0] = Some(col0);
        bufs.val[0] = Some(val0);

        let mut h = zeros::<u32>(s, nheavy as usize, "heavy row ids")?;
        launch(g, s, "iota_u32", strided(g, nheavy, 256), |l| {
            l.arg(&mut h).arg(&nheavy);
        })?;
        let base = zeros::<u32>(s, nheavy as usize, "chunk bases")?;
        let mut finals = Vec::new();
        if p.levels.is_empty() {
            let fb = final_bins(bins, p.chunk_width);
            let lists = self.bin_items(s, &c_hat_ptr, 0, nheavy, &table_limits(&fb))?;
            finals.push(FinalChunks {
                buffer: 0,
                ptr: c_hat_ptr,
                h,
                base,
                first: 0,
                bins: fb,
                lists,
                _marker: Default::default(),
            });
            return Ok(finals);
        }

        // The hierarchical multisplit, double-buffered; heavy chunks first in each output.
        let entry = 4 + std::mem::size_of::<T>() as u64;
        let ms_elems = p.multisplit_group_elems;
        let max_rows = ((ms_elems - 1).div_ceil(p.tau + 1) + 1) as u32;
        let warps = (SPLIT_THREADS / 32) as u64;
        if ms_elems > split_per_thread(entry - 4) * SPLIT_THREADS as u64 {
            return Err(Error::gpu(
                "multisplit",
                format!("{ms_elems} elements per block is more than its threads can hold"),
            ));
        }
        let mut width = p.chunks_required * p.chunk_width;
        let (mut in_ptr, mut in_h, mut in_base, mut in_rows, mut in_buf) =
            (c_hat_ptr, h, base, nheavy, 0usize);
        for (level, &nch) in p.levels.iter().enumerate() {
            let last = level + 1 == p.levels.len();
            width /= nch;
            let shift = width.trailing_zeros();
            let nch32 = nch as u32;
            let in_total = read_at(s, &in_ptr, in_rows as usize, "a level's size")?;
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
            let (group_row, _) = group_starts(g, s, &in_ptr, in_rows, ms_elems, in_total)?;
            {
                let col = buf(&bufs.col, in_buf)?;
                launch(
                    g,
                    s,
                    "multisplit_histogram",
                    shape(blocks, SPLIT_THREADS, hist_bytes)?,
                    |l| {
                        l.arg(&in_ptr)
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
                    .arg(&in_h)
                    .arg(&in_base)
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
                bufs.val[out_buf] =
                    Some(uninit::<T>(s, total as usize, poison, "Ĉ_reord's values")?);
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
                    &typed::<T>("multisplit"),
                    shape(blocks, SPLIT_THREADS, shared)?,
                    |l| {
                        l.arg(&in_ptr)
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
            finals.push(FinalChunks {
                buffer: out_buf,
                ptr: out_ptr,
                h: out_h,
                base: out_base,
                first,
                bins: fb,
                lists,
                _marker: Default::default(),
            });
            match (next_ptr, next_h, next_base) {
                (Some(np), Some(nh), Some(nb)) => {
                    in_ptr = np;
                    in_h = nh;
                    in_base = nb;
                    in_rows = next_heavy;
                    in_buf = out_buf;
                }
                _ => break,
            }
        }
        Ok(finals)
    }
}

/// The products per row of the rows asked for, as a prefix (host side, to plan batches).
/// Refuses products wider than the kernels' column indices allow.
fn check_columns(ncols: usize) -> Result<()> {
    if ncols >= u32::MAX as usize / 2 {
        return Err(Error::Invalid(format!(
            "the GPU engine handles products of up to 2^31 columns; B has {ncols}"
        )));
    }
    Ok(())
}

fn host_products<T: Scalar>(a: &Csr<T>, b: &Csr<T>, rows: &Range<usize>) -> Vec<u64> {
    let mut out = Vec::with_capacity(rows.len() + 1);
    out.push(0u64);
    let mut run = 0;
    for r in rows.clone() {
        run += super::row_products(a, b, r);
        out.push(run);
    }
    out
}

/// For a static partition of the `total` elements laid out by `ptr[0..=n]` into groups of
/// `group_elems`: the row of each group's first and last element.
fn group_starts(
    g: &Gpu,
    s: &Arc<CudaStream>,
    ptr: &CudaSlice<u64>,
    n: u64,
    group_elems: u64,
    total: u64,
) -> Result<(CudaSlice<u32>, CudaSlice<u32>)> {
    let blocks = total.div_ceil(group_elems);
    let mut first = zeros::<u32>(s, blocks as usize, "group starts")?;
    let mut last = zeros::<u32>(s, blocks as usize, "group ends")?;
    launch(g, s, "group_starts", strided(g, blocks, 256), |l| {
        l.arg(ptr)
            .arg(&n)
            .arg(&group_elems)
            .arg(&total)
            .arg(&blocks)
            .arg(&mut first)
            .arg(&mut last);
    })?;
    Ok((first, last))
}

/// The name of a typed kernel for values of type `T`.
fn typed<T: Scalar>(kernel: &str) -> String {
    format!("{kernel}_{}", T::NAME)
}

fn buf<X>(b: &[Option<CudaSlice<X>>; 2], i: usize) -> Result<&CudaSlice<X>> {
    some(&b[i])
}

fn some<X>(b: &Option<CudaSlice<X>>) -> Result<&CudaSlice<X>> {
    b.as_ref()
        .ok_or_else(|| Error::gpu("multisplit", "a Ĉ buffer is missing"))
}

fn some_mut<X>(b: &mut Option<CudaSlice<X>>) -> Result<&mut CudaSlice<X>> {
    b.as_mut()
        .ok_or_else(|| Error::gpu("multisplit", "a Ĉ buffer is missing"))
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

#[cfg(test)]
mod tests {
    use super::*;

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
