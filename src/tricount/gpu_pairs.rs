//! The GPU half of the count across ranks (`dist::tricount`): for listed edges `a → b`, the
//! triangles `c ∈ U(a) ∩ U(b)`, each warp intersecting one pair of sorted rows by binary search
//! (kernel `triangles_pairs`). The rank's own rows stay on the device for the whole count; each
//! round's fetched rows and pairs are uploaded, counted and freed. Counts are integers, so the
//! result equals the CPU engine's exactly.

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
    /// The global vertex id of each row.
    pub ids: &'a [u32],
}

/// Rows copied to the device.
struct DeviceRows {
    ptr: CudaSlice<u64>,
    idx: CudaSlice<u32>,
    ids: CudaSlice<u32>,
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
        })
    }
}

/// Which rows the `b` of a round's pairs index.
pub enum Other<'a> {
    /// The rank's own rows (the `a` rows).
    Own,
    /// Rows fetched from other ranks.
    Fetched(Rows<'a>),
}

/// A count in progress on the GPU: the rank's rows `U(a)`, the running total and, when asked
/// for, the per-vertex counts of all `n` vertices.
pub struct PairCounter {
    gpu: Arc<Gpu>,
    own: DeviceRows,
    own_rows: usize,
    total: CudaSlice<u64>,
    /// Per-vertex counts (`n` of them) when `per_vertex`, else one unused element.
    counts: CudaSlice<u64>,
    per_vertex: bool,
    n: usize,
}

impl PairCounter {
    /// Puts the rank's rows `own` on the device, with per-vertex counts of `n` vertices when
    /// `per_vertex`.
    pub fn new(gpu: Arc<Gpu>, own: Rows<'_>, n: usize, per_vertex: bool) -> Result<Self> {
        let s = &gpu.main;
        let counts = zeros::<u64>(s, if per_vertex { n } else { 1 }, "the per-vertex counts")?;
        Ok(PairCounter {
            own: DeviceRows::upload(&gpu, own)?,
            own_rows: own.ids.len(),
            total: zeros::<u64>(s, 1, "the triangle count")?,
            counts,
            per_vertex,
            n,
            gpu,
        })
    }

    /// Counts the triangles through the pairs `(pair_a[p], pair_b[p])`: an index into the own
    /// rows and one into `other`'s rows.
    pub fn count(&mut self, other: Other<'_>, pair_a: &[u32], pair_b: &[u32]) -> Result<()> {
        if pair_a.len() != pair_b.len() {
            return Err(Error::Invalid(format!(
                "{} first ends for {} second ends",
                pair_a.len(),
                pair_b.len()
            )));
        }
        let other_rows = match &other {
            Other::Own => self.own_rows,
            Other::Fetched(r) => r.ids.len(),
        };
        let in_range = |idx: &[u32], rows: usize| idx.iter().all(|&i| (i as usize) < rows);
        if !in_range(pair_a, self.own_rows) || !in_range(pair_b, other_rows) {
            return Err(Error::Invalid(
                "a pair names a row that is not there".into(),
            ));
        }
        if pair_a.is_empty() {
            return Ok(());
        }
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let fetched = match other {
            Other::Own => None,
            Other::Fetched(r) => Some(DeviceRows::upload(g, r)?),
        };
        let b = fetched.as_ref().unwrap_or(&self.own);
        let pa = upload(g, s, pair_a, "the pairs' first ends")?;
        let pb = upload(g, s, pair_b, "the pairs' second ends")?;
        let npairs = pair_a.len() as u64;
        let a = &self.own;
        let cfg = strided(g, npairs * 32, 256);
        let per_vertex = u32::from(self.per_vertex);
        let (counts, total) = (&mut self.counts, &mut self.total);
        launch(g, s, "triangles_pairs", cfg, |l| {
            l.arg(&a.ptr)
                .arg(&a.idx)
                .arg(&a.ids)
                .arg(&b.ptr)
                .arg(&b.idx)
                .arg(&b.ids)
                .arg(&pa)
                .arg(&pb)
                .arg(&npairs)
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
