//! Sorting items (rows of C, chunks of heavy rows) into bins by size on the device
//! (`classify_sizes` and `scatter_bins` in kernels/setup.cu).

use super::GpuEngine;
use crate::error::Result;
use crate::gpu::prims::{check, launch, strided, zeros};
use crate::gpu::transfer::upload;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, PushKernelArg};
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

impl GpuEngine {
    /// Sorts items [first, first + n) of `ptr` (sizes `ptr[i+1] - ptr[i]`) into bins: bin `b`
    /// takes the sizes up to `limits[b]` (the first that fits), bin `limits.len()` the rest;
    /// empty items go nowhere.
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
        let limits = upload(g, s, limits, "bin limits")?;
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
        let mut cursor = upload(g, s, &cursor, "bin cursors")?;
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
}
