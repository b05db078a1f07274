//! The fused count ([`super::gpu`]) for one rank's block of rows in a count across ranks
//! (`dist::tricount`). Every rank ranks the vertices in the same order; a rank orients its
//! block's rows `U(a)` on its GPU and keeps them there for the others to fetch, then lays out
//! its part of the oriented graph by rank as one process lays out the whole graph: its own rows
//! and the fetched rows of the tails of its rows' in-edges, and `L` only for its own rows. The
//! one-process kernels then count exactly the triangles `a < b < c` whose middle vertex `b` the
//! rank owns: `U(b)` is its own row, every `U(a)` of an in-edge `a → b` is own or fetched. Which
//! rows travel, and how, is the caller's.

use super::gpu::{DeviceDag, Job, WARP_SLOTS};
use crate::error::{Error, Result};
use crate::gpu::prims::{check, exclusive_scan, launch, read_at, strided, uninit, zeros};
use crate::gpu::profile::Profile;
use crate::gpu::transfer::{download, upload};
use crate::gpu::Gpu;
use cudarc::driver::{CudaSlice, PushKernelArg};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// A rank's block oriented on its GPU, waiting for the fetched rows.
pub struct BlockCount {
    gpu: Arc<Gpu>,
    /// All vertices.
    n: usize,
    /// The block's first vertex and its rows.
    first: usize,
    rows: usize,
    poison: bool,
    /// Every vertex's rank.
    rank: CudaSlice<u32>,
    /// By rank: the rows of U's lengths (the block's, then the fetched ones too), of L's, and
    /// the light rows' items (`n + 1` each, scanned into offsets when counting).
    out_lens: CudaSlice<u64>,
    in_lens: CudaSlice<u64>,
    items: CudaSlice<u64>,
    heavy_rows: CudaSlice<u32>,
    heavy_count: u32,
    longest: u64,
    /// The block's rows `U(a)` one after another (rank ids, sorted as one process sorts them).
    own_ptr: CudaSlice<u64>,
    own: CudaSlice<u32>,
    /// The same rows' lengths and offsets on the host.
    lengths: Vec<u32>,
    offsets: Vec<u64>,
    /// The vertices outside the block whose rows the count needs, increasing.
    needed: Vec<u32>,
    /// The in-edges of the block's rows.
    in_edges: u64,
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
    /// no loops) by `rank`, every vertex's place in the order all ranks share.
    pub fn orient(
        gpu: Arc<Gpu>,
        ptr: &[u64],
        adj: &[u32],
        first: usize,
        rank: &[u32],
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
        let held = Arc::clone(&gpu);
        let g = &*held;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let s = &g.main;
        let (mut clock, mut steps) = (Clock(Instant::now()), Vec::new());
        let job = Job::new(g, n, poison)?;
        let d_ptr = upload(g, s, ptr, "the block's row offsets")?;
        let mut d_adj = upload(g, s, adj, "the block's columns")?;
        let d_rank = upload(g, s, rank, "the vertices' ranks")?;
        clock.lap(g, "upload", &mut steps)?;
        let mut out_lens = zeros::<u64>(s, n + 1, "the oriented row lengths")?;
        let mut in_lens = zeros::<u64>(s, n + 1, "the in-edge row lengths")?;
        let mut items = zeros::<u64>(s, n + 1, "the light rows' items")?;
        let mut max_out = zeros::<u64>(s, 1, "the longest oriented row")?;
        let mut heavy_count = zeros::<u32>(s, 1, "the heavy row count")?;
        let heavy_bound = (adj.len() as u64 / (WARP_SLOTS / 2 + 1) + 1).min(rows as u64);
        let mut heavy_rows = uninit::<u32>(s, heavy_bound as usize, poison, "the heavy rows")?;
        let mut block_lens = uninit::<u32>(s, rows.max(1), poison, "the block's row lengths")?;
        let mut needed = zeros::<u8>(s, n.max(1), "the vertices needed")?;
        let (rows32, first32) = (rows as u32, first as u32);
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
                .arg(&mut block_lens)
                .arg(&mut needed);
        })?;
        let lengths = download(g, s, &block_lens, rows, "the block's row lengths")?;
        drop(block_lens);
        let flags = download(g, s, &needed, n, "the vertices needed")?;
        drop(needed);
        let needed: Vec<u32> = (0..n as u32)
            .into_par_iter()
            .filter(|&v| flags[v as usize] != 0)
            .collect();
        drop(flags);
        let offsets = prefix(&lengths);
        let total = offsets[rows];
        let own_ptr = upload(g, s, &offsets, "the block's oriented row offsets")?;
        let mut own = uninit::<u32>(s, total as usize, poison, "the block's oriented rows")?;
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
        let longest = read_at(s, &max_out, 0, "the longest oriented row")?;
        let heavy_count = check(
            "read the heavy row count",
            s.clone_dtoh(&heavy_count.slice(0..1)),
        )?[0];
        clock.lap(g, "orient", &mut steps)?;
        Ok(BlockCount {
            steps,
            n,
            first,
            rows,
            poison,
            rank: d_rank,
            out_lens,
            in_lens,
            items,
            heavy_rows,
            heavy_count,
            longest,
            own_ptr,
            own,
            lengths,
            offsets,
            needed,
            in_edges: adj.len() as u64 - total,
            gpu,
        })
    }

    /// The lengths of the block's rows `U(a)`.
    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// The vertices of other blocks whose rows `U(a)` the count needs (the tails of the
    /// in-edges of the block's rows), increasing.
    pub fn needed(&self) -> &[u32] {
        &self.needed
    }

    /// Device memory [`Self::count`] takes beyond what is held now, with `fetched` entries in
    /// the needed rows: the oriented graph's rows, `L`'s, the per-vertex counts when asked
    /// for, and a margin for the heavy rows' tables and the scans.
    pub fn count_bytes(&self, fetched: u64, per_vertex: bool) -> u64 {
        let rows_u = 4 * (self.offsets[self.rows] + fetched);
        let rows_l = 8 * self.in_edges;
        let offsets = 8 * (self.needed.len() as u64 + 1);
        let counts = if per_vertex { 16 * self.n as u64 } else { 0 };
        rows_u + rows_l + offsets + counts + (256 << 20)
    }

    /// The block's rows `U(v)` of the vertices `ids` (of this block, in any order), one after
    /// another in a new buffer, and where each starts (`ids.len() + 1` offsets from 0).
    pub fn gather(&self, ids: &[u32]) -> Result<(CudaSlice<u32>, Vec<u64>)> {
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let local: Vec<u32> = ids.iter().map(|&v| v - self.first as u32).collect();
        let at = {
            let lens: Vec<u32> = local.iter().map(|&i| self.lengths[i as usize]).collect();
            prefix(&lens)
        };
        let total = at[ids.len()] as usize;
        let mut out = uninit::<u32>(s, total, self.poison, "the rows to send")?;
        if !ids.is_empty() {
            let d_rows = upload(g, s, &local, "the rows to send")?;
            let d_at = upload(g, s, &at, "where the rows to send go")?;
            let k = ids.len() as u64;
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

    /// Counts the triangles whose middle vertex is in the block, given the needed rows
    /// `fetched` (one after another in [`Self::needed`]'s order, `lens` long each, as their
    /// owners made them) and every vertex's `rank` (as given to [`Self::orient`]). Returns the
    /// count and, when asked for, the triangles through each vertex found here.
    pub fn count(
        self,
        fetched: &CudaSlice<u32>,
        lens: &[u32],
        rank: &[u32],
        per_vertex: bool,
    ) -> Result<BlockCounted> {
        if lens.len() != self.needed.len() {
            return Err(Error::Invalid(format!(
                "{} fetched rows for {} needed",
                lens.len(),
                self.needed.len()
            )));
        }
        let BlockCount {
            gpu,
            n,
            first,
            rows,
            poison,
            rank: d_rank,
            mut out_lens,
            mut in_lens,
            mut items,
            heavy_rows,
            heavy_count,
            longest,
            own_ptr,
            own,
            needed,
            mut steps,
            ..
        } = self;
        let g = &*gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let mut clock = Clock(Instant::now());
        let job = Job::new(g, n, poison)?;
        let n1 = n as u64 + 1;
        let at_rank: Vec<u32> = needed.par_iter().map(|&v| rank[v as usize]).collect();
        let (d_at, d_lens) = match needed.is_empty() {
            true => (None, None),
            false => (
                Some(upload(g, s, &at_rank, "the fetched rows' ranks")?),
                Some(upload(g, s, lens, "the fetched rows' lengths")?),
            ),
        };
        if let (Some(at), Some(l)) = (&d_at, &d_lens) {
            let k = needed.len() as u64;
            launch(g, s, "scatter_lengths", strided(g, k, 256), |b| {
                b.arg(at).arg(l).arg(&k).arg(&mut out_lens);
            })?;
        }
        exclusive_scan(g, s, &mut out_lens, n1, "the oriented row lengths")?;
        exclusive_scan(g, s, &mut in_lens, n1, "the in-edge row lengths")?;
        exclusive_scan(g, s, &mut items, n1, "the light rows' items")?;
        let (optr, iptr, item_ptr) = (out_lens, in_lens, items);
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
        if let Some(at) = &d_at {
            let fetched_ptr = upload(g, s, &prefix(lens), "the fetched rows' offsets")?;
            let k = needed.len() as u64;
            launch(g, s, "place_pattern", strided(g, k * 32, 256), |l| {
                l.arg(&fetched_ptr)
                    .arg(fetched)
                    .arg(at)
                    .arg(&k)
                    .arg(&optr)
                    .arg(&mut oadj);
            })?;
        }
        let in_edges = read_at(s, &iptr, n, "the in-edge count")?;
        let (iadj, ifrom) = job.transpose(&optr, &oadj, &iptr, in_edges, true)?;
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

/// Offsets from 0 of rows of `lens` entries laid one after another.
fn prefix(lens: &[u32]) -> Vec<u64> {
    let mut at = Vec::with_capacity(lens.len() + 1);
    at.push(0u64);
    let mut run = 0u64;
    at.extend(lens.iter().map(|&l| {
        run += u64::from(l);
        run
    }));
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::transfer::upload;
    use crate::tricount::{self, SimpleGraph};

    /// The GPU where one is usable (required with `GMCL_REQUIRE_GPU=1`, as on the GPU machine).
    fn gpu() -> Option<Arc<Gpu>> {
        match crate::gpu::device() {
            Ok(g) => Some(g),
            Err(why) => {
                assert!(
                    std::env::var("GMCL_REQUIRE_GPU").map_or(true, |v| v != "1"),
                    "GMCL_REQUIRE_GPU=1 but no GPU is usable: {why}"
                );
                None
            }
        }
    }

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
        let Some(gpu) = gpu() else { return };
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
                    BlockCount::orient(gpu.clone(), &local, &adj[lo..hi], rows.start, &rank, true)
                        .unwrap()
                })
                .collect();
            // Each block's needed rows gathered from their owners, through the host.
            let fetched: Vec<(Vec<u32>, Vec<u32>)> = blocks
                .iter()
                .map(|b| {
                    let (mut rows, mut lens) = (Vec::new(), Vec::new());
                    for &v in b.needed() {
                        let owner = (0..parts).find(|&q| (v as usize) < cut(q + 1)).unwrap();
                        assert_ne!(cut(owner), b.first, "a block needs none of its own rows");
                        let (buf, at) = blocks[owner].gather(&[v]).unwrap();
                        let s = &gpu.main;
                        let got = download(&gpu, s, &buf, at[1] as usize, "a row").unwrap();
                        lens.push(got.len() as u32);
                        rows.extend(got);
                    }
                    (rows, lens)
                })
                .collect();
            let (mut total, mut per_vertex) = (0, vec![0u64; n]);
            for (b, (rows, lens)) in blocks.into_iter().zip(fetched) {
                let d = upload(&gpu, &gpu.main, &rows, "the fetched rows").unwrap();
                let (t, pv, steps) = b.count(&d, &lens, &rank, true).unwrap();
                assert_eq!(steps.len(), 4);
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
