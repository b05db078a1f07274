//! Sorting items (rows of C, chunks of heavy rows) into bins by size on the device
//! (`classify_sizes` and `scatter_bins` in kernels/setup.cu).

use super::GpuEngine;
use crate::error::{Error, Result};
use crate::gpu::prims::{check, launch, strided, uninit, zeros};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, PushKernelArg};
use std::sync::Arc;

/// Items sorted into bins: `lists[offsets[b]..offsets[b] + counts[b]]` are bin b's items.
pub(super) struct BinLists {
    lists: CudaSlice<u32>,
    pub(super) counts: Vec<u64>,
    offsets: Vec<u64>,
}

impl BinLists {
    /// Bin `b`'s items.
    pub(super) fn view(&self, b: usize) -> CudaView<'_, u32> {
        let o = self.offsets[b] as usize;
        self.lists.slice(o..o + self.counts[b] as usize)
    }
}

/// The most bins one sorting has (kernels/setup.cu's `MAX_BINS`): a product's hash bins, its
/// heavy rows and two lists of dense rows.
const MAX_BINS: usize = 16;

/// The bins' limits, passed by value with the launch (kernels/setup.cu's `BinLimits`).
#[repr(C)]
#[derive(Clone, Copy)]
struct BinLimits {
    limit: [u64; MAX_BINS - 1],
}

// SAFETY: a plain array of u64, laid out as the kernel's struct.
unsafe impl DeviceRepr for BinLimits {}

impl GpuEngine {
    /// Sorts items [first, first + n) of `ptr` (sizes `ptr[i+1] - ptr[i]`) into bins: bin `b`
    /// takes the sizes up to `limits[b]` (the first that fits), bin `limits.len()` the rest;
    /// empty items go nowhere. Queues both kernels before it waits for the bins' counts.
    pub(super) fn bin_items(
        &self,
        s: &Arc<CudaStream>,
        ptr: &CudaSlice<u64>,
        first: u64,
        n: u64,
        limits: &[u64],
    ) -> Result<BinLists> {
        let g = &*self.gpu;
        let nb = limits.len();
        if nb >= MAX_BINS {
            return Err(Error::gpu(
                "sort rows into bins",
                format!("{} bins is past the {MAX_BINS} the kernels take", nb + 1),
            ));
        }
        let mut by_value = BinLimits {
            limit: [0; MAX_BINS - 1],
        };
        by_value.limit[..nb].copy_from_slice(limits);
        let poison = self.tuning.poison;
        // Every item's bin is written; the lists hold at most every item.
        let mut bin_of = uninit::<u32>(s, n as usize, poison, "bin of each row")?;
        let mut lists = uninit::<u32>(s, n as usize, poison, "bin lists")?;
        // The bins' counts, then the cursors that claim places within them.
        let mut tallies = zeros::<u32>(s, 2 * (nb + 1), "bin counts")?;
        let nbins = nb as u32;
        let view = ptr.slice(first as usize..);
        launch(g, s, "classify_sizes", strided(g, n, 256), |l| {
            l.arg(&view)
                .arg(&n)
                .arg(&by_value)
                .arg(&nbins)
                .arg(&mut bin_of)
                .arg(&mut tallies);
        })?;
        launch(g, s, "scatter_bins", strided(g, n, 256), |l| {
            l.arg(&bin_of)
                .arg(&n)
                .arg(&nbins)
                .arg(&mut tallies)
                .arg(&mut lists);
        })?;
        let counts: Vec<u64> = check("read bin counts", s.clone_dtoh(&tallies.slice(..nb + 1)))?
            .into_iter()
            .map(u64::from)
            .collect();
        let mut offsets = vec![0u64; nb + 1];
        for b in 1..=nb {
            offsets[b] = offsets[b - 1] + counts[b - 1];
        }
        Ok(BinLists {
            lists,
            counts,
            offsets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::defined;
    use crate::spgemm::gpu::plan::{hash_bins, table_limits, HASH_TABLES};

    #[test]
    fn the_bins_fit_the_kernels() {
        assert_eq!(defined("MAX_BINS"), Some(MAX_BINS as u64));
        // The most limits a product's rows take: every hash bin, the heavy rows' bin and the
        // two lists of dense rows.
        let most = table_limits(&hash_bins(1 << 20)).len() + 2;
        assert!(most < MAX_BINS, "{most} limits");
        assert!(HASH_TABLES.len() + 3 < MAX_BINS);
    }
}
