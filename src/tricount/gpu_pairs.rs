//! The GPU half of the count across ranks (`dist::tricount`): for the edges `a → b` of the
//! rank's own rows, the triangles `c ∈ U(a) ∩ U(b)` (kernel `triangles_rows`: warps deal out
//! the edges, each intersecting one pair of sorted rows at a time by binary search). The rank's
//! own rows stay on the device for the whole count; the edges whose `b` is also its own are
//! counted once, and each round's fetched rows are uploaded, the edges into them counted, and
//! freed. No list of pairs is made. Counts are integers, so the result equals the CPU
//! engine's exactly.

use crate::error::{Error, Result};
use crate::gpu::prims::{check, launch, strided, zeros};
use crate::gpu::transfer::{download, upload};
use crate::gpu::Gpu;
use cudarc::driver::{CudaSlice, PushKernelArg};
use std::sync::Arc;

/// Sorted rows on the host: offsets (`ids.len() + 1`), entries, and the global id of each row.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// Row offsets, the first 0.
    pub ptr: &'a [u64],
    /// Each row's entries, sorted.
    pub idx: &'a [u32],
    /// The global vertex id of each row, increasing.
    pub ids: &'a [u32],
}

/// Rows copied to the device.
struct DeviceRows {
    ptr: CudaSlice<u64>,
    idx: CudaSlice<u32>,
    ids: CudaSlice<u32>,
    rows: usize,
}

impl DeviceRows {
    fn upload(gpu: &Gpu, rows: Rows<'_>) -> Result<Self> {
        if rows.ptr.len() != rows.ids.len() + 1 {
            return Err(Error::Invalid(format!(
                "{} row offsets for {} rows",
                rows.ptr.len(),
                rows.ids.len()
            )));
        }
        let s = &gpu.main;
        Ok(DeviceRows {
            ptr: upload(gpu, s, rows.ptr, "the rows' offsets")?,
            idx: upload(gpu, s, rows.idx, "the rows' entries")?,
            ids: upload(gpu, s, rows.ids, "the rows' ids")?,
            rows: rows.ids.len(),
        })
    }
}

/// Which rows the `b` of the edges counted are in.
pub enum Other<'a> {
    /// The rank's own rows (the `a` rows).
    Own,
    /// Rows fetched from other ranks.
    Fetched(Rows<'a>),
}

/// A count in progress on the GPU: the rank's rows `U(a)` (vertices `first..`), the running
/// total and, when asked for, the per-vertex counts of all `n` vertices.
pub struct PairCounter {
    gpu: Arc<Gpu>,
    own: DeviceRows,
    own_rows: usize,
    own_entries: u64,
    first: u32,
    total: CudaSlice<u64>,
    /// Per-vertex counts (`n` of them) when `per_vertex`, else one unused element.
    counts: CudaSlice<u64>,
    per_vertex: bool,
    n: usize,
}

impl PairCounter {
    /// Puts the rank's rows `own` on the device (their ids must be `first`, `first + 1`, …),
    /// with per-vertex counts of `n` vertices when `per_vertex`.
    pub fn new(gpu: Arc<Gpu>, own: Rows<'_>, n: usize, per_vertex: bool) -> Result<Self> {
        let first = own.ids.first().copied().unwrap_or(0);
        if own.ids.iter().zip(first..).any(|(&id, want)| id != want) {
            return Err(Error::Invalid(
                "the own rows' ids are not consecutive".into(),
            ));
        }
        let s = &gpu.main;
        let counts = zeros::<u64>(s, if per_vertex { n } else { 1 }, "the per-vertex counts")?;
        Ok(PairCounter {
            own: DeviceRows::upload(&gpu, own)?,
            own_rows: own.ids.len(),
            own_entries: own.idx.len() as u64,
            first,
            total: zeros::<u64>(s, 1, "the triangle count")?,
            counts,
            per_vertex,
            n,
            gpu,
        })
    }

    /// Counts the triangles through the edges `a → b` of the own rows whose `b` is in `other`:
    /// the own rows, or a round's fetched rows (ids outside the own rows, increasing).
    pub fn count(&mut self, other: Other<'_>) -> Result<()> {
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let fetched = match other {
            Other::Own => None,
            Other::Fetched(r) => {
                if r.ids.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Error::Invalid(
                        "the fetched rows' ids are not increasing".into(),
                    ));
                }
                Some(DeviceRows::upload(g, r)?)
            }
        };
        let b = fetched.as_ref().unwrap_or(&self.own);
        let b_rows = fetched.as_ref().map_or(self.own_rows, |_| b.rows) as u64;
        let is_fetched = u32::from(fetched.is_some());
        let a = &self.own;
        let a_rows = self.own_rows as u64;
        let entries = self.own_entries;
        if entries == 0 {
            return Ok(());
        }
        // A warp per 32 entries of the own rows.
        let cfg = strided(g, entries, 256);
        let per_vertex = u32::from(self.per_vertex);
        let (counts, total) = (&mut self.counts, &mut self.total);
        launch(g, s, "triangles_rows", cfg, |l| {
            l.arg(&a.ptr)
                .arg(&a.idx)
                .arg(&a_rows)
                .arg(&self.first)
                .arg(&b.ptr)
                .arg(&b.idx)
                .arg(&b.ids)
                .arg(&b_rows)
                .arg(&is_fetched)
                .arg(&per_vertex)
                .arg(counts)
                .arg(total);
        })?;
        // The round's buffers are freed when this returns; wait for the kernel first, so that a
        // failure is reported by the round that caused it.
        check("count the triangles of a round", s.synchronize())
    }

    /// The triangles counted, and the per-vertex counts when asked for.
    pub fn finish(self) -> Result<(u64, Option<Vec<u64>>)> {
        let g = &*self.gpu;
        let s = &g.main;
        let total = download(g, s, &self.total, 1, "the triangle count")?;
        let counts = match self.per_vertex {
            true => Some(download(
                g,
                s,
                &self.counts,
                self.n,
                "the per-vertex counts",
            )?),
            false => None,
        };
        Ok((total.first().copied().unwrap_or(0), counts))
    }
}
