//! gMAGNUS on the GPU (paper Alg. 3): `C = A·B` with light rows in binned shared-memory hash
//! tables and heavy rows through the outer product, the hierarchical multisplit and dense
//! shared-memory accumulators. Light and heavy rows run on their own streams.
//!
//! Memory-bounded: the rows are processed in batches sized from the free device memory; a batch
//! that still runs out of memory is split in two and retried. [`GpuEngine::multiply_batches`]
//! hands each batch to the caller as it is made.
//!
//! The host code reads as the paper's phase list, one file per phase (the kernels each phase
//! launches are named in its file):
//!
//! | phase | file | kernels |
//! |---|---|---|
//! | operands on the device, products per row | `operands.rs` | `setup.cu` |
//! | parameters, bins, batches | `plan.rs` | — |
//! | a batch, phase by phase | `batch.rs` | — |
//! | setup: products, bins (Alg. 3, 1-5) | `setup.rs`, `bins.rs` | `setup.cu`, `scan.cu` |
//! | symbolic (light rows; heavy chunks) | `symbolic.rs` | `accumulate.cu`, `dense.cu` |
//! | heavy rows' reorder (Alg. 4, 5) | `heavy.rs`, `chunks.rs` | `heavy.cu` |
//! | C's offsets, allocation | `offsets.rs` | `heavy.cu`, `scan.cu` |
//! | numeric (light rows; heavy chunks) | `numeric.rs` | `accumulate.cu`, `dense.cu` |

mod batch;
mod bins;
mod chunks;
mod heavy;
mod numeric;
mod offsets;
mod operands;
mod plan;
mod setup;
mod symbolic;

pub(crate) use plan::{DENSE_CURSORS, MCL_WIDE_HEAD_BYTES};
pub use plan::{DENSE_FRACTION, HASH_LIMIT};

use super::{check_operands, ProductStats, SpgemmOptions};
use crate::csr::{Csr, CsrRef};
use crate::error::{Error, Result};
use crate::gpu::matrix::{DeviceCsr, HostRows};
use crate::gpu::prims::{check, zeros};
use crate::gpu::profile::{Phase, Profile};
use crate::gpu::transfer::upload;
use crate::gpu::{self, Gpu};
use crate::scalar::Scalar;
use bins::BinLists;
use cudarc::driver::CudaView;
use operands::{check_columns, host_products, Operands};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Knobs of the GPU engine; the defaults are what a user wants.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Dense-row accumulator rows with at most this many products run in smaller blocks,
    /// several to a multiprocessor (default: as many as such a block sums in one walk; below
    /// the dense rows' smallest: never). Tests lower it to run both shapes on small inputs.
    pub dense_small_top: Option<u64>,
    /// Sum products as MCL's order-free sums ([`crate::quantized`], for non-negative values
    /// whose sums stay below 2): values then do not vary from run to run and equal the CPU
    /// engine's MCL expansion bit for bit, at 8 bytes of shared memory per sum. Default off:
    /// sums in `T`, whose rounding depends on the order the atomic adds land in.
    pub quantized_sums: bool,
}

/// The gMAGNUS engine on one GPU.
pub struct GpuEngine {
    gpu: Arc<Gpu>,
    tuning: GpuTuning,
    /// The phases of the last product, when profiling.
    last_phases: std::sync::Mutex<Vec<Phase>>,
}

/// The dense rows of a batch that [`GpuEngine::square_on_device`] left out of C (they have no
/// entries there) for its caller to make: MCL makes and prunes them in one kernel
/// ([`crate::mcl::gpu`]).
pub struct DeferredRows {
    lists: BinLists,
    bin: usize,
    window: u32,
    /// The intermediate products of the batch's rows, as a prefix (row `r`'s are
    /// `products[r + 1] - products[r]`).
    products: Vec<u64>,
}

/// What receives each row batch of a product whose dense rows are deferred
/// ([`GpuEngine::multiply_deferred`]): the batch's rows, its rows of C, the deferred rows, and
/// A and B on the device.
pub type DeferredConsumer<'c, T> = dyn FnMut(
        Range<usize>,
        DeviceCsr<T>,
        Option<DeferredRows>,
        &DeviceCsr<T>,
        &DeviceCsr<T>,
    ) -> Result<()>
    + 'c;

impl DeferredRows {
    /// The columns of shared memory a row is made in at a time: 0 when a whole row of C fits
    /// one window.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// The rows, numbered from the batch's first row, in no particular order.
    pub fn rows(&self) -> CudaView<'_, u32> {
        self.lists.view(self.bin)
    }

    /// How many rows there are.
    pub fn count(&self) -> u64 {
        self.lists.counts[self.bin]
    }

    /// The intermediate products of the batch's row `r` (numbered as [`Self::rows`] numbers
    /// them): the work of making it.
    pub fn products(&self, r: u32) -> u64 {
        let r = r as usize;
        self.products[r + 1] - self.products[r]
    }
}

impl GpuEngine {
    /// Opens the GPU (compiling the kernels on first use in the process), with the default
    /// tuning ([`GpuEngine::with_tuning`] changes it). Fails with [`Error::EngineUnavailable`] saying why when there is no usable GPU.
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
            tuning: GpuTuning::default(),
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

    /// Computes `C = A·B` (the rows and entries `opts` asks for) and copies it to the host.
    pub fn multiply<'x, T: Scalar>(
        &self,
        a: impl Into<CsrRef<'x, T>>,
        b: impl Into<CsrRef<'x, T>>,
        opts: &SpgemmOptions,
    ) -> Result<(Csr<T>, ProductStats)> {
        let (a, b) = (a.into(), b.into());
        let rows = check_operands(a, b, opts)?;
        let mut host = HostRows::new(rows.len())?;
        // Each batch lands straight in C's final arrays.
        let stats = self.multiply_on_device(a, b, opts, |_, c, prof| {
            c.append_to(&self.gpu, &mut host)?;
            prof.mark("copy C to the host")
        })?;
        let HostRows {
            row_ptr,
            col_idx,
            values,
        } = host;
        let c = Csr::from_parts_unchecked(rows.len(), b.ncols(), row_ptr, col_idx, values);
        Ok((c, stats))
    }

    /// Computes `C = A·B` in row batches, handing each batch (its rows of `C`, and those rows as a
    /// matrix whose row 0 is the batch's first row) to `consume` as soon as it is made, in order.
    pub fn multiply_batches<'x, T: Scalar>(
        &self,
        a: impl Into<CsrRef<'x, T>>,
        b: impl Into<CsrRef<'x, T>>,
        opts: &SpgemmOptions,
        mut consume: impl FnMut(Range<usize>, Csr<T>) -> Result<()>,
    ) -> Result<ProductStats> {
        let (a, b) = (a.into(), b.into());
        let g = &*self.gpu;
        self.multiply_on_device(a, b, opts, |batch, c, prof| {
            let c = c.download(g)?;
            prof.mark("copy C to the host")?;
            consume(batch, c)
        })
    }

    /// Computes `C = A·B` in row batches, handing each batch, still on the device, to `consume`.
    fn multiply_on_device<T: Scalar>(
        &self,
        a: CsrRef<'_, T>,
        b: CsrRef<'_, T>,
        opts: &SpgemmOptions,
        mut consume: impl FnMut(Range<usize>, &DeviceCsr<T>, &mut Profile) -> Result<()>,
    ) -> Result<ProductStats> {
        let rows = check_operands(a, b, opts)?;
        check_columns(b.ncols())?;
        let _busy = self.gpu.busy.lock().unwrap_or_else(|p| p.into_inner());
        let start = Instant::now();
        let mut prof = Profile::new(&self.gpu.ctx, self.tuning.profile);
        let ops = self.upload_operands(a, b, opts.mask.as_ref())?;
        let products = host_products(a, b, &rows);
        // Copied beside the operands, for the first batch rather than counted again.
        let counted = upload(&self.gpu, &self.gpu.main, &products, "products per row")?;
        prof.mark("upload A, B; plan batches")?;
        let stats = self.run_batches(
            &ops,
            rows,
            &products,
            Some(counted),
            &mut prof,
            |batch, c, _, prof| consume(batch, &c, prof),
        )?;
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
        let s = &self.gpu.main;
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
        let stats = self.batches_on_device(&ops, |batch, c, deferred, ops| {
            consume(batch, c, deferred, &ops.a)
        })?;
        Ok((stats, ops.a))
    }

    /// Computes `C = A·B` in row batches that stay on the device, as [`Self::square_on_device`]
    /// squares: each batch goes to `consume` with its deferred dense rows (with `defer_dense`)
    /// and A and B as uploaded.
    pub fn multiply_deferred<'x, T: Scalar>(
        &self,
        a: impl Into<CsrRef<'x, T>>,
        b: impl Into<CsrRef<'x, T>>,
        defer_dense: bool,
        consume: &mut DeferredConsumer<'_, T>,
    ) -> Result<ProductStats> {
        let (a, b) = (a.into(), b.into());
        check_operands(a, b, &SpgemmOptions::default())?;
        check_columns(b.ncols())?;
        let _busy = self.gpu.busy.lock().unwrap_or_else(|p| p.into_inner());
        let ops = Operands {
            defer_dense,
            ..self.upload_operands(a, b, None)?
        };
        self.deferred_batches(&ops, consume)
    }

    /// [`Self::multiply_deferred`] of operands already on the device (dropped once the product
    /// is made).
    pub fn multiply_resident<T: Scalar>(
        &self,
        a: DeviceCsr<T>,
        b: DeviceCsr<T>,
        defer_dense: bool,
        consume: &mut DeferredConsumer<'_, T>,
    ) -> Result<ProductStats> {
        if a.ncols != b.nrows {
            return Err(Error::Invalid(format!(
                "cannot multiply a {} x {} matrix by a {} x {} matrix",
                a.nrows, a.ncols, b.nrows, b.ncols
            )));
        }
        check_columns(b.ncols)?;
        let _busy = self.gpu.busy.lock().unwrap_or_else(|p| p.into_inner());
        let s = &self.gpu.main;
        let ops = Operands {
            k_cols: a.ncols as u64,
            c_cols: b.ncols as u64,
            a,
            b: Some(b),
            m_ptr: zeros(s, 1, "an empty mask")?,
            m_col: zeros(s, 1, "an empty mask")?,
            has_mask: 0,
            defer_dense,
        };
        self.deferred_batches(&ops, consume)
    }

    /// Every row batch of `ops` handed to `consume` with A and B (the caller holds the GPU).
    fn deferred_batches<T: Scalar>(
        &self,
        ops: &Operands<T>,
        consume: &mut DeferredConsumer<'_, T>,
    ) -> Result<ProductStats> {
        self.batches_on_device(ops, |batch, c, deferred, ops| {
            consume(batch, c, deferred, &ops.a, ops.b())
        })
    }

    /// Runs every row batch of `ops` (the caller holds the GPU), products per row counted on
    /// the device, each batch handed to `consume` with the operands.
    fn batches_on_device<T: Scalar>(
        &self,
        ops: &Operands<T>,
        mut consume: impl FnMut(
            Range<usize>,
            DeviceCsr<T>,
            Option<DeferredRows>,
            &Operands<T>,
        ) -> Result<()>,
    ) -> Result<ProductStats> {
        let start = Instant::now();
        let mut prof = Profile::new(&self.gpu.ctx, self.tuning.profile);
        let (products, counted) = self.device_products(ops)?;
        prof.mark("products per row; plan batches")?;
        let rows = ops.a.nrows;
        let stats = self.run_batches(
            ops,
            0..rows,
            &products,
            Some(counted),
            &mut prof,
            |batch, c, deferred, _| consume(batch, c, deferred, ops),
        )?;
        self.finish(
            stats,
            start,
            prof,
            (
                rows,
                ops.k_cols as usize,
                ops.k_cols as usize,
                ops.c_cols as usize,
            ),
        )
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
}

impl GpuEngine {
    /// The product counts below which a row of a product of `c_cols` columns makes its
    /// products exactly: MCL's rule ([`crate::quantized::exact_below`]) when the engine sums
    /// MCL's quanta, else none (0).
    fn exact_below(&self, c_cols: u64) -> u64 {
        match self.tuning.quantized_sums {
            true => crate::quantized::exact_below(c_cols as usize),
            false => 0,
        }
    }
}

/// The name of a typed kernel for values of type `T`.
fn typed<T: Scalar>(kernel: &str) -> String {
    format!("{kernel}_{}", T::NAME)
}

/// The name of a kernel that sums products of type `T`, in `T` or (`quantized`) as quanta.
fn summing<T: Scalar>(kernel: &str, quantized: bool) -> String {
    match quantized {
        true => format!("{kernel}_{}q", T::NAME),
        false => typed::<T>(kernel),
    }
}

/// The name of a kernel that moves Ĉ's values, which are as wide as the sums ([`sum_bytes`]:
/// a `T`, or for MCL's sums an `f64`, which holds a product made exactly: `Heavy` of
/// `QuantaSum` in kernels/common.cuh). The multisplit's blocks are sized by that width too
/// (`engine_params`).
fn moving_heavy<T: Scalar>(kernel: &str, quantized: bool) -> String {
    match quantized {
        true => format!("{kernel}_f64"),
        false => typed::<T>(kernel),
    }
}

/// Bytes of shared memory one sum of products of type `T` takes, in `T` or as quanta.
fn sum_bytes<T: Scalar>(quantized: bool) -> u64 {
    match quantized {
        true => 8,
        false => std::mem::size_of::<T>() as u64,
    }
}
