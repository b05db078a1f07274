//! The fused count ([`super::gpu`]) for one rank's block of rows in a count across ranks
//! (`dist::tricount`). Every rank ranks the vertices in the same order and orients its block's
//! rows `U(a)` on its GPU. The triangles `a < b < c` are counted by the rank owning the middle
//! vertex `b` (the pivot), the pivots dealt out by rank id modulo the ranks, so that every
//! degree's vertices (hubs included) are shared evenly whatever the blocks hold. Each row goes
//! to the ranks that need it ([`BlockCount::destinations`]: the owners of the pivots it holds,
//! and of its own vertex as a pivot); a rank lays out what it holds by rank as one process lays
//! out the whole graph, with `L` for its pivots only, and the one-process kernels count its
//! pivots' triangles. How the rows travel is the caller's.

use super::gpu::{DeviceDag, Job};
use super::orient::prefix;
use crate::error::{Error, Result};
use crate::gpu::prims::{check, exclusive_scan, launch, read_at, strided, uninit, zeros};
use crate::gpu::profile::Profile;
use crate::gpu::transfer::{download, upload};
use crate::gpu::Gpu;
use cudarc::driver::{CudaSlice, PushKernelArg};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// The most ranks a count with the one-process kernels takes (a row's destinations are the
/// bits of a word).
pub const MAX_PARTS: usize = 64;

/// A rank's block oriented on its GPU, waiting for the other ranks' rows.
pub struct BlockCount {
    gpu: Arc<Gpu>,
    /// All vertices.
    n: usize,
    /// The block's first vertex and its rows.
    first: usize,
    rows: usize,
    /// The ranks, and this one.
    parts: usize,
    me: usize,
    poison: bool,
    /// Every vertex's rank.
    rank: CudaSlice<u32>,
    /// By rank id, `n + 1` long: the lengths of the rows of U held (the block's so far).
    out_lens: CudaSlice<u64>,
    /// The block's rows `U(a)` one after another (rank ids, sorted as one process sorts them).
    own_ptr: CudaSlice<u64>,
    own: CudaSlice<u32>,
    /// The same rows' lengths on the host, and the ranks that need each (bit `q`: rank `q`).
    lengths: Vec<u32>,
    masks: Vec<u64>,
    /// The steps taken so far and their seconds (the device waited for at each).
    steps: Vec<(&'static str, f64)>,
}

/// The count of a block: its triangles, the triangles through each vertex when asked for, and
/// the steps from the orientation on with their seconds.
pub type BlockCounted = (u64, Option<Vec<u64>>, Vec<(&'static str, f64)>);

/// Times steps, waiting for the device at the end of each.
struct Clock(Instant);

impl Clock {
    fn lap(
        &mut self,
        gpu: &Gpu,
        name: &'static str,
        steps: &mut Vec<(&'static str, f64)>,
    ) -> Result<()> {
        check("wait for the device", gpu.main.synchronize())?;
        steps.push((name, self.0.elapsed().as_secs_f64()));
        self.0 = Instant::now();
        Ok(())
    }
}

impl BlockCount {
    /// Orients the block of rows `first..` (the symmetric adjacency `ptr`, `adj`: rows sorted,
    /// no loops) of rank `me` of `parts` by `rank`, every vertex's place in the order all ranks
    /// share.
    #[allow(clippy::too_many_arguments)]
    pub fn orient(
        gpu: Arc<Gpu>,
        ptr: &[u64],
        adj: &[u32],
        first: usize,
        rank: &[u32],
        parts: usize,
        me: usize,
        poison: bool,
    ) -> Result<BlockCount> {
        let n = rank.len();
        let rows = ptr.len().saturating_sub(1);
        if n >= u32::MAX as usize || first + rows > n {
            return Err(Error::Invalid(format!(
                "a block of rows {first}..{} of {n} vertices does not fit the GPU kernels' \
                 32-bit vertex ids",
                first + rows
            )));
        }
        if parts == 0 || parts > MAX_PARTS || me >= parts {
            return Err(Error::Invalid(format!(
                "rank {me} of {parts}: the one-process kernels count on 1 to {MAX_PARTS} ranks"
            )));
        }
        let held = Arc::clone(&gpu);
        let g = &*held;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let s = &g.main;
        let (mut clock, mut steps) = (Clock(Instant::now()), Vec::new());
        let job = Job::new(g, n, poison)?;
        let (rows32, first32, parts32) = (rows as u32, first as u32, parts as u32);
        let d_ptr = upload(g, s, ptr, "the block's row offsets")?;
        let mut d_adj = upload(g, s, adj, "the block's columns")?;
        let d_rank = upload(g, s, rank, "the vertices' ranks")?;
        clock.lap(g, "upload", &mut steps)?;
        let mut out_lens = zeros::<u64>(s, n + 1, "the oriented row lengths")?;
        // The one-process orientation's other figures are the pivots' business here: freed
        // once written.
        let mut in_lens = zeros::<u64>(s, n + 1, "the in-edge row lengths")?;
        let mut items = zeros::<u64>(s, n + 1, "the light rows' items")?;
        let mut max_out = zeros::<u64>(s, 1, "the longest oriented row")?;
        let mut heavy_count = zeros::<u32>(s, 1, "the heavy row count")?;
        let mut heavy_rows = uninit::<u32>(s, rows.max(1), poison, "the heavy rows")?;
        let mut block_lens = uninit::<u32>(s, rows, poison, "the block's row lengths")?;
        launch(g, s, "orient_counts", job.per_row, |l| {
            l.arg(&d_ptr)
                .arg(&mut d_adj)
                .arg(&rows32)
                .arg(&first32)
                .arg(&d_rank)
                .arg(&mut out_lens)
                .arg(&mut in_lens)
                .arg(&mut max_out)
                .arg(&mut items)
                .arg(&mut heavy_rows)
                .arg(&mut heavy_count)
                .arg(&mut block_lens);
        })?;
        drop((in_lens, items, max_out, heavy_count, heavy_rows));
        let lengths = download(g, s, &block_lens, rows, "the block's row lengths")?;
        let offsets = prefix(&lengths);
        let own_ptr = upload(g, s, &offsets, "the block's oriented row offsets")?;
        let mut own = uninit::<u32>(s, offsets[rows] as usize, poison, "the block's rows")?;
        launch(g, s, "orient_fill", job.per_row, |l| {
            l.arg(&d_ptr)
                .arg(&d_adj)
                .arg(&rows32)
                .arg(&first32)
                .arg(&d_rank)
                .arg(&own_ptr)
                .arg(&1u32)
                .arg(&mut own);
        })?;
        drop((d_ptr, d_adj));
        launch(g, s, "sort_rows", job.per_row, |l| {
            l.arg(&own_ptr).arg(&mut own).arg(&rows32);
        })?;
        clock.lap(g, "orient", &mut steps)?;
        let mut d_masks = uninit::<u64>(s, rows, poison, "the rows' destinations")?;
        launch(g, s, "pivot_owners", job.per_row, |l| {
            l.arg(&own_ptr)
                .arg(&own)
                .arg(&rows32)
                .arg(&first32)
                .arg(&d_rank)
                .arg(&parts32)
                .arg(&mut d_masks);
        })?;
        let masks = download(g, s, &d_masks, rows, "the rows' destinations")?;
        clock.lap(g, "destinations", &mut steps)?;
        Ok(BlockCount {
            n,
            first,
            rows,
            parts,
            me,
            poison,
            rank: d_rank,
            out_lens,
            own_ptr,
            own,
            lengths,
            masks,
            steps,
            gpu,
        })
    }

    /// How many steps the orientation took (the first of those [`Self::count`] returns).
    pub fn oriented_steps(&self) -> usize {
        self.steps.len()
    }

    /// The lengths of the block's rows `U(a)` (row `i` is vertex `first + i`).
    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// For each rank, the block's rows (indices from 0) it needs, increasing; none for this
    /// rank, which holds them.
    pub fn destinations(&self) -> Vec<Vec<u32>> {
        (0..self.parts)
            .map(|q| match q == self.me {
                true => Vec::new(),
                false => (0..self.rows as u32)
                    .into_par_iter()
                    .filter(|&i| self.masks[i as usize] >> q & 1 != 0)
                    .collect(),
            })
            .collect()
    }

    /// Device memory [`Self::count`] takes beyond what is held now, with `received` entries
    /// in `rows` rows from the other ranks: the rows of U and L held, their offsets, the items
    /// and the per-vertex counts when asked for, and a margin for the heavy rows' tables.
    pub fn count_bytes(&self, received: u64, rows: u64, per_vertex: bool) -> u64 {
        let held = self.own.len() as u64 + received;
        // U's rows, L's (a vertex and an offset each, at most one per entry held), the
        // received rows' offsets and ranks, the in-edge and item offsets.
        let rows_u = 4 * held;
        let rows_l = 8 * held;
        let offsets = 12 * (rows + 1) + 16 * (self.n as u64 + 1);
        let counts = if per_vertex { 16 * self.n as u64 } else { 0 };
        rows_u + rows_l + offsets + counts + (256 << 20)
    }

    /// The block's rows `rows` (indices from 0, in any order), one after another in a new
    /// buffer, and where each starts (`rows.len() + 1` offsets from 0).
    pub fn gather(&self, rows: &[u32]) -> Result<(CudaSlice<u32>, Vec<u64>)> {
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let at = {
            let lens: Vec<u32> = rows.iter().map(|&i| self.lengths[i as usize]).collect();
            prefix(&lens)
        };
        let total = at[rows.len()] as usize;
        let mut out = uninit::<u32>(s, total, self.poison, "the rows to send")?;
        if !rows.is_empty() {
            let d_rows = upload(g, s, rows, "the rows to send")?;
            let d_at = upload(g, s, &at, "where the rows to send go")?;
            let k = rows.len() as u64;
            launch(g, s, "gather_pattern", strided(g, k * 32, 256), |l| {
                l.arg(&self.own_ptr)
                    .arg(&self.own)
                    .arg(&d_rows)
                    .arg(&k)
                    .arg(&d_at)
                    .arg(&mut out);
            })?;
        }
        check("gather the rows to send", s.synchronize())?;
        Ok((out, at))
    }

    /// Counts the triangles of this rank's pivots, given the rows the other ranks sent
    /// (`received`: one after another, `lens` long each, of the vertices of rank ids `ids`).
    /// Returns the count and, when asked for, the triangles through each vertex found here.
    pub fn count(
        self,
        received: &CudaSlice<u32>,
        ids: &[u32],
        lens: &[u32],
        per_vertex: bool,
    ) -> Result<BlockCounted> {
        if lens.len() != ids.len() {
            return Err(Error::Invalid(format!(
                "{} lengths for {} received rows",
                lens.len(),
                ids.len()
            )));
        }
        let BlockCount {
            gpu,
            n,
            first,
            rows,
            parts,
            me,
            poison,
            rank: d_rank,
            mut out_lens,
            own_ptr,
            own,
            mut steps,
            ..
        } = self;
        let g = &*gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let mut clock = Clock(Instant::now());
        let job = Job::new(g, n, poison)?;
        let n1 = n as u64 + 1;
        let (n32, parts32, me32) = (n as u32, parts as u32, me as u32);
        // The received rows' ranks, where there are any.
        let d_ids = match ids.is_empty() {
            true => None,
            false => Some(upload(g, s, ids, "the received rows' ranks")?),
        };
        if let Some(at) = &d_ids {
            let d_lens = upload(g, s, lens, "the received rows' lengths")?;
            let k = ids.len() as u64;
            launch(g, s, "scatter_lengths", strided(g, k, 256), |b| {
                b.arg(at).arg(&d_lens).arg(&k).arg(&mut out_lens);
            })?;
        }
        exclusive_scan(g, s, &mut out_lens, n1, "the oriented row lengths")?;
        let optr = out_lens;
        let entries = read_at(s, &optr, n, "the oriented edge count")?;
        let mut oadj = uninit::<u32>(s, entries as usize, poison, "the oriented adjacency")?;
        if rows > 0 {
            let own_ranks = d_rank.slice(first..first + rows);
            let k = rows as u64;
            launch(g, s, "place_pattern", strided(g, k * 32, 256), |l| {
                l.arg(&own_ptr)
                    .arg(&own)
                    .arg(&own_ranks)
                    .arg(&k)
                    .arg(&optr)
                    .arg(&mut oadj);
            })?;
        }
        drop((own_ptr, own));
        if let Some(at) = &d_ids {
            let received_ptr = upload(g, s, &prefix(lens), "the received rows' offsets")?;
            let k = ids.len() as u64;
            launch(g, s, "place_pattern", strided(g, k * 32, 256), |l| {
                l.arg(&received_ptr)
                    .arg(received)
                    .arg(at)
                    .arg(&k)
                    .arg(&optr)
                    .arg(&mut oadj);
            })?;
        }
        // L, the items and the heavy rows of this rank's pivots.
        let mut iptr = zeros::<u64>(s, n + 1, "the in-edge row lengths")?;
        launch(g, s, "pivot_in_lens", job.per_row, |l| {
            l.arg(&optr)
                .arg(&oadj)
                .arg(&n32)
                .arg(&parts32)
                .arg(&me32)
                .arg(&mut iptr);
        })?;
        let pivots = n.saturating_sub(me).div_ceil(parts);
        let mut item_ptr = zeros::<u64>(s, n + 1, "the light rows' items")?;
        let mut heavy_rows = uninit::<u32>(s, pivots, poison, "the heavy rows")?;
        let mut heavy_count = zeros::<u32>(s, 1, "the heavy row count")?;
        let mut longest = zeros::<u64>(s, 1, "the longest heavy row")?;
        if pivots > 0 {
            launch(g, s, "pivot_items", strided(g, pivots as u64, 256), |l| {
                l.arg(&optr)
                    .arg(&iptr)
                    .arg(&n32)
                    .arg(&parts32)
                    .arg(&me32)
                    .arg(&mut item_ptr)
                    .arg(&mut heavy_rows)
                    .arg(&mut heavy_count)
                    .arg(&mut longest);
            })?;
        }
        exclusive_scan(g, s, &mut iptr, n1, "the in-edge row lengths")?;
        exclusive_scan(g, s, &mut item_ptr, n1, "the light rows' items")?;
        let in_edges = read_at(s, &iptr, n, "the in-edge count")?;
        let (iadj, ifrom) = job.transpose(&optr, &oadj, &iptr, in_edges, true)?;
        let heavy_count = check(
            "read the heavy row count",
            s.clone_dtoh(&heavy_count.slice(0..1)),
        )?[0];
        let longest = read_at(s, &longest, 0, "the longest heavy row")?;
        clock.lap(g, "lay out", &mut steps)?;
        let dag = DeviceDag {
            optr,
            oadj,
            iptr,
            iadj,
            ifrom,
            item_ptr,
            heavy_rows,
            heavy_count,
            longest,
        };
        let mut prof = Profile::new(&g.ctx, false);
        let tuning = super::gpu::TriangleTuning {
            poison,
            ..Default::default()
        };
        let (total, by_rank) = job.count_oriented(&tuning, &dag, per_vertex, &mut prof)?;
        drop(dag);
        let triangles = read_at(s, &total, 0, "the triangle count")?;
        let by_vertex = match per_vertex {
            true => Some(job.gather_by_rank(&d_rank, by_rank)?),
            false => None,
        };
        clock.lap(g, "count", &mut steps)?;
        Ok((triangles, by_vertex, steps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::transfer::upload;
    use crate::tricount::{self, SimpleGraph};

    /// A power-law-ish graph with hubs heavy enough for the block-wide kernel.
    fn graph() -> SimpleGraph<'static> {
        let mut rng = crate::generate::rng::SplitMix64::new(11);
        let n = 3000u32;
        let mut edges = Vec::new();
        for _ in 0..40_000 {
            let skew = |r: u64| ((r % u64::from(n)) * (r % 97) / 97) as u32;
            edges.push((skew(rng.next_u64()), rng.next_u64() as u32 % n));
        }
        // Two vertices joined to every other: rows of U past a warp's table.
        for v in 2..n {
            edges.push((0, v));
            edges.push((1, v));
        }
        SimpleGraph::from_edges(crate::EdgeList::square(n as usize, edges, None)).unwrap()
    }

    #[test]
    fn blocks_counted_apart_sum_to_the_one_process_count() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        let g = graph();
        let opts = tricount::Options {
            per_vertex: true,
            ..Default::default()
        };
        let want = tricount::count(&g, &opts).unwrap();
        assert!(want.triangles > 0);
        let n = g.vertices();
        let (rank, _) = crate::tricount::orient::degree_ranks(n, |v| g.degree(v) as u64);
        let (ptr, adj) = (g.row_ptr(), g.col_idx());
        for parts in [1, 2, 3, 5] {
            let cut = |p: usize| p * n / parts;
            let blocks: Vec<BlockCount> = (0..parts)
                .map(|p| {
                    let rows = cut(p)..cut(p + 1);
                    let (lo, hi) = (ptr[rows.start] as usize, ptr[rows.end] as usize);
                    let local: Vec<u64> = ptr[rows.start..=rows.end]
                        .iter()
                        .map(|&x| x - lo as u64)
                        .collect();
                    let adj = &adj[lo..hi];
                    BlockCount::orient(gpu.clone(), &local, adj, rows.start, &rank, parts, p, true)
                        .unwrap()
                })
                .collect();
            // The rows each rank needs, from every other block, through the host.
            let dest: Vec<Vec<Vec<u32>>> = blocks.iter().map(|b| b.destinations()).collect();
            let received: Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> = (0..parts)
                .map(|q| {
                    let (mut ids, mut lens, mut rows) = (Vec::new(), Vec::new(), Vec::new());
                    for (p, b) in blocks.iter().enumerate() {
                        let mine = &dest[p][q];
                        if p == q {
                            assert!(mine.is_empty(), "a block sends nothing to itself");
                            continue;
                        }
                        let (buf, at) = b.gather(mine).unwrap();
                        let got = download(&gpu, &gpu.main, &buf, at[mine.len()] as usize, "rows")
                            .unwrap();
                        rows.extend(got);
                        for (k, &i) in mine.iter().enumerate() {
                            ids.push(rank[cut(p) + i as usize]);
                            lens.push((at[k + 1] - at[k]) as u32);
                            assert_eq!(lens[lens.len() - 1], b.lengths()[i as usize]);
                        }
                    }
                    (ids, lens, rows)
                })
                .collect();
            let (mut total, mut per_vertex) = (0, vec![0u64; n]);
            for (b, (ids, lens, rows)) in blocks.into_iter().zip(received) {
                let d = upload(&gpu, &gpu.main, &rows, "the received rows").unwrap();
                let (t, pv, steps) = b.count(&d, &ids, &lens, true).unwrap();
                assert_eq!(steps.len(), 5);
                total += t;
                for (s, x) in per_vertex.iter_mut().zip(pv.unwrap()) {
                    *s += x;
                }
            }
            assert_eq!(total, want.triangles, "{parts} blocks");
            assert_eq!(Some(per_vertex), want.per_vertex, "{parts} blocks");
        }
    }
}
