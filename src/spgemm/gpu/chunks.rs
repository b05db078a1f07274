//! The heavy rows' chunks: the Ĉ buffers they live in (double-buffered through the multisplit
//! levels), the sets of final chunks each level leaves, and their accumulator launches.

use super::bins::BinLists;
use super::plan::{Bin, DENSE_THREADS};
use super::{sum_bytes, summing};
use crate::error::{Error, Result};
use crate::gpu::prims::{launch, shape, strided, zeros};
use crate::gpu::Gpu;
use crate::scalar::Scalar;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, PushKernelArg};
use std::sync::Arc;

/// Rows (of Ĉ or of one multisplit level's output) whose chunks are final: they are
/// accumulated into C. Rows [first, nrows) of `ptr` are final.
pub(super) struct FinalChunks<T: Scalar> {
    pub(super) buffer: usize,
    pub(super) ptr: CudaSlice<u64>,
    pub(super) h: CudaSlice<u32>,
    pub(super) base: CudaSlice<u32>,
    pub(super) first: u64,
    /// The hash bins of these chunks; bigger chunks go to the dense accumulator.
    pub(super) bins: Vec<Bin>,
    pub(super) lists: BinLists,
    pub(super) _marker: std::marker::PhantomData<T>,
}

/// One launch over a bin of final chunks: its list, the kernel, the table size (hash) or chunk
/// width (dense), and the launch shape.
pub(super) struct ChunkLaunch<'a> {
    pub(super) list: CudaView<'a, u32>,
    pub(super) kernel: String,
    pub(super) size: u32,
    pub(super) cfg: cudarc::driver::LaunchConfig,
}

impl<T: Scalar> FinalChunks<T> {
    /// The offsets, heavy rows and column bases of the final chunks (rows `first..`).
    pub(super) fn rows(&self) -> (CudaView<'_, u64>, CudaView<'_, u32>, CudaView<'_, u32>) {
        let f = self.first as usize;
        (self.ptr.slice(f..), self.h.slice(f..), self.base.slice(f..))
    }

    /// The launches of the symbolic (`numeric` None) or numeric phase (`Some(quantized)`: how
    /// it sums) over the nonempty bins: hash accumulators for the hash bins, the dense
    /// accumulator for the last. Both kinds take the same arguments but the table size or chunk
    /// width.
    pub(super) fn launches(
        &self,
        chunk_width: u64,
        numeric: Option<bool>,
    ) -> Result<Vec<ChunkLaunch<'_>>> {
        let val_bytes = numeric.map_or(0, sum_bytes::<T>);
        let (hash, dense) = if let Some(quantized) = numeric {
            (
                summing::<T>("hash_segs_numeric", quantized),
                summing::<T>("dense_segs_numeric", quantized),
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
                    let slot = 4 + val_bytes;
                    (
                        hash.clone(),
                        bin.table,
                        shape(count, bin.threads, bin.table as u64 * slot)?,
                    )
                }
                None => {
                    let per_col = val_bytes + 1;
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

/// The Ĉ buffers (double-buffered through the multisplit levels). Values are the products'
/// bytes, as wide as the sums each ([`super::sum_bytes`]): `T`s, or for MCL's sums `f64`s.
pub(super) struct Buffers {
    pub(super) col: [Option<CudaSlice<u32>>; 2],
    pub(super) val: [Option<CudaSlice<u8>>; 2],
}

/// For a static partition of the `total` elements laid out by `ptr[0..=n]` into groups of
/// `group_elems`: the row of each group's first and last element.
pub(super) fn group_starts(
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

/// Buffer `i` of a double buffer.
pub(super) fn buf<X>(b: &[Option<CudaSlice<X>>; 2], i: usize) -> Result<&CudaSlice<X>> {
    some(&b[i])
}

/// A buffer that must have been allocated.
pub(super) fn some<X>(b: &Option<CudaSlice<X>>) -> Result<&CudaSlice<X>> {
    b.as_ref()
        .ok_or_else(|| Error::gpu("multisplit", "a Ĉ buffer is missing"))
}

/// A buffer that must have been allocated, to write.
pub(super) fn some_mut<X>(b: &mut Option<CudaSlice<X>>) -> Result<&mut CudaSlice<X>> {
    b.as_mut()
        .ok_or_else(|| Error::gpu("multisplit", "a Ĉ buffer is missing"))
}
