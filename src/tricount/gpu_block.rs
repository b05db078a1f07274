//! The fused count ([`super::gpu`]) for one rank's block of rows in a count across ranks
//! (`dist::tricount`). The triangles `a < b < c` are counted by the rank owning the middle
//! vertex `b` (the pivot), the pivots dealt out by rank id modulo the ranks, so that every
//! degree's vertices (hubs included) are shared evenly whatever the blocks hold. A rank's
//! pivots then touch the rows `U(a)` of nearly every vertex, so every rank holds all of U,
//! laid out by rank as one process lays it out, with `L` for its pivots only, and the
//! one-process kernels count its pivots' triangles.
//!
//! What the ranks share is built as sums of disjoint parts, each element nonzero on at most
//! one rank: every vertex's degree (each block writes its rows'), the ranks (made on one rank:
//! ties between equal degrees fall in any order on a GPU, and every rank must see the same
//! order), the rows' lengths and the rows themselves (each block writes its rows at their
//! places, zeros elsewhere). The caller sums them across the ranks between the steps
//! ([`BlockCount::degrees_mut`], [`BlockCount::ranks_mut`], [`BlockCount::lengths_mut`],
//! [`BlockCount::rows_mut`]); every step waits for the device before it returns.

use super::gpu::{Degrees, DeviceDag, Job, TriangleTuning};
use crate::error::{Error, Result};
use crate::gpu::prims::{check, exclusive_scan, launch, read_at, strided, uninit, zeros};
use crate::gpu::profile::Profile;
use crate::gpu::transfer::{download, upload};
use crate::gpu::Gpu;
use cudarc::driver::{CudaSlice, CudaView, PushKernelArg};
use std::sync::Arc;
use std::time::Instant;

/// A rank's block on its GPU, and what it holds of the whole graph so far.
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
    tuning: TriangleTuning,
    /// Each step's GPU phases, when profiling.
    prof: Profile,
    /// The block's symmetric adjacency, until it is oriented.
    block: Option<(CudaSlice<u64>, CudaSlice<u32>)>,
    /// The block's rows as the orientation leaves them (each entry its neighbour's rank, in
    /// the order read), kept until they are checked against all of U ([`Self::mirrors`]) where
    /// asked for.
    ranked: Option<(CudaSlice<u64>, CudaSlice<u32>)>,
    /// Every vertex's degree (the block's written, zero elsewhere until summed).
    degree: CudaSlice<u32>,
    /// Every vertex's rank (zero until made or summed).
    rank: CudaSlice<u32>,
    /// By rank id, `n + 1` long: the lengths of the rows of U (the block's, until summed),
    /// then their offsets.
    lengths: CudaSlice<u64>,
    /// The block's rows `U(a)` one after another (rank ids, sorted as one process sorts them)
    /// and their offsets, from the orientation until they are placed.
    own: Option<(CudaSlice<u64>, CudaSlice<u32>)>,
    /// All of U laid out by rank (the block's rows placed, zeros elsewhere until summed).
    oadj: Option<CudaSlice<u32>>,
}

/// Writes row `i` of `rows` (offsets, columns) as row `ranks[i]` of U (`optr`, `oadj`), a warp
/// per row (`place_pattern`), on the GPU's main stream.
fn place_rows(
    g: &Gpu,
    (ptr, col): (&CudaSlice<u64>, &CudaSlice<u32>),
    ranks: &CudaView<'_, u32>,
    optr: &CudaSlice<u64>,
    oadj: &mut CudaSlice<u32>,
) -> Result<()> {
    let k = ranks.len() as u64;
    launch(g, &g.main, "place_pattern", strided(g, k * 32, 256), |l| {
        l.arg(ptr).arg(col).arg(ranks).arg(&k).arg(optr).arg(oadj);
    })
}

/// The count of a block: its triangles, the triangles through each vertex when asked for, and
/// the steps of the count's layout and count with their seconds.
pub type BlockCounted = (u64, Option<Vec<u64>>, Vec<(&'static str, f64)>);

/// A block's part of the symmetry check of rows taken unchecked ([`BlockCount::mirrors`]),
/// summed over the blocks by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mirrors {
    /// Entries whose mirror is missing.
    pub missing: u64,
    /// The block's down entries `b → a` whose lower end's row of U is unsorted.
    pub into_unsorted: u64,
    /// The entries of U's unsorted rows whose upper end is the block's.
    pub unsorted_owned: u64,
}

impl Mirrors {
    /// Whether the blocks are symmetric, `self` summed over all of them and U holding half of
    /// all their entries: no mirror missing, and as many down entries into U's unsorted rows
    /// as those rows hold.
    pub fn symmetric(&self) -> bool {
        self.missing == 0 && self.into_unsorted == self.unsorted_owned
    }

    /// The counts as words, for a sum across the ranks.
    pub fn words(&self) -> [u64; 3] {
        [self.missing, self.into_unsorted, self.unsorted_owned]
    }

    /// The counts from their words.
    pub fn from_words([missing, into_unsorted, unsorted_owned]: [u64; 3]) -> Mirrors {
        Mirrors {
            missing,
            into_unsorted,
            unsorted_owned,
        }
    }
}

impl std::ops::Add for Mirrors {
    type Output = Mirrors;
    fn add(self, o: Mirrors) -> Mirrors {
        let (a, b) = (self.words(), o.words());
        Mirrors::from_words(std::array::from_fn(|i| a[i] + b[i]))
    }
}

impl BlockCount {
    /// Uploads the block of rows `first..` (the symmetric adjacency `ptr`, `adj`: rows sorted,
    /// no loops) of rank `me` of `parts`, of a graph of `n` vertices, and writes its vertices'
    /// degrees into every vertex's ([`Self::degrees_mut`]). `tuning` poisons the outputs and
    /// times the steps' GPU phases, reported on stderr by [`Self::count`].
    #[allow(clippy::too_many_arguments)]
    pub fn upload(
        gpu: Arc<Gpu>,
        ptr: &[u64],
        adj: &[u32],
        first: usize,
        n: usize,
        parts: usize,
        me: usize,
        tuning: TriangleTuning,
    ) -> Result<BlockCount> {
        let rows = ptr.len().saturating_sub(1);
        if n >= u32::MAX as usize || first + rows > n {
            return Err(Error::Invalid(format!(
                "a block of rows {first}..{} of {n} vertices does not fit the GPU kernels' \
                 32-bit vertex ids",
                first + rows
            )));
        }
        if parts == 0 || parts > u32::MAX as usize || me >= parts {
            return Err(Error::Invalid(format!("rank {me} of {parts} ranks")));
        }
        let g = &*gpu;
        let s = &g.main;
        let mut prof = Profile::new(&g.ctx, tuning.profile);
        let block = {
            let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
            let d_ptr = upload(g, s, ptr, "the block's row offsets")?;
            prof.mark("upload: row offsets")?;
            let d_adj = upload(g, s, adj, "the block's columns")?;
            prof.mark("upload: columns")?;
            let mut degree = zeros::<u32>(s, n.max(1), "every vertex's degree")?;
            if rows > 0 {
                let (rows32, first32) = (rows as u32, first as u32);
                launch(g, s, "block_degrees", strided(g, rows as u64, 256), |l| {
                    l.arg(&d_ptr).arg(&rows32).arg(&first32).arg(&mut degree);
                })?;
            }
            let rank = zeros::<u32>(s, n.max(1), "every vertex's rank")?;
            let lengths = zeros::<u64>(s, n + 1, "the rows' lengths")?;
            check("upload the block", s.synchronize())?;
            prof.mark("upload: degrees")?;
            BlockCount {
                n,
                first,
                rows,
                parts,
                me,
                tuning,
                prof,
                block: Some((d_ptr, d_adj)),
                ranked: None,
                degree,
                rank,
                lengths,
                own: None,
                oadj: None,
                gpu: Arc::clone(&gpu),
            }
        };
        Ok(block)
    }

    /// Every vertex's degree (`n` of them), for the caller to sum across the ranks.
    pub fn degrees_mut(&mut self) -> &mut CudaSlice<u32> {
        &mut self.degree
    }

    /// Ends a GPU phase of the caller's (a sum across the ranks) when profiling.
    pub fn mark(&mut self, phase: &str) -> Result<()> {
        self.prof.mark(phase)
    }

    /// Ranks every vertex by its degree (the degrees summed), ties in any order: on one rank
    /// only, whose ranks the caller then sums across the ranks.
    pub fn rank_by_degree(&mut self) -> Result<()> {
        let g = &*self.gpu;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let job = Job::new(g, self.n, self.tuning.poison)?;
        self.rank = job.degree_ranks(Degrees::Given(&self.degree), &mut self.prof)?;
        check("rank the vertices", g.main.synchronize())
    }

    /// Every vertex's rank (`n` of them), for the caller to sum across the ranks.
    pub fn ranks_mut(&mut self) -> &mut CudaSlice<u32> {
        &mut self.rank
    }

    /// Orients the block's rows by the ranks (summed): each row `U(a)` keeps the neighbours
    /// ranked above `a`, sorted; its length is written at `a`'s rank ([`Self::lengths_mut`]).
    /// Returns the block's entries of U. With `keep`, the block's rows (their entries turned
    /// into ranks) stay on the device for [`Self::mirrors`].
    pub fn orient(&mut self, keep: bool) -> Result<u64> {
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let Some((d_ptr, mut d_adj)) = self.block.take() else {
            return Err(Error::Invalid("the block is oriented once".into()));
        };
        let job = Job::new(g, self.n, self.tuning.poison)?;
        let poison = self.tuning.poison;
        let rows = self.rows;
        let (rows32, first32) = (rows as u32, self.first as u32);
        // The one-process orientation's other figures are the pivots' business here: freed
        // once written.
        let mut in_lens = zeros::<u64>(s, self.n + 1, "the in-edge row lengths")?;
        let mut items = zeros::<u64>(s, self.n + 1, "the light rows' items")?;
        let mut max_out = zeros::<u64>(s, 1, "the longest oriented row")?;
        let mut heavy_count = zeros::<u32>(s, 1, "the heavy row count")?;
        let mut heavy_rows = uninit::<u32>(s, rows.max(1), poison, "the heavy rows")?;
        let mut own_ptr = zeros::<u64>(s, rows + 1, "the block's oriented row offsets")?;
        job.ranks_into_rows(&d_ptr, &mut d_adj, first32, &self.rank, &mut self.lengths)?;
        launch(g, s, "orient_counts", job.per_vertex, |l| {
            l.arg(&d_ptr)
                .arg(&rows32)
                .arg(&first32)
                .arg(&self.rank)
                .arg(&self.lengths)
                .arg(&mut in_lens)
                .arg(&mut max_out)
                .arg(&mut items)
                .arg(&mut heavy_rows)
                .arg(&mut heavy_count)
                .arg(&mut own_ptr);
        })?;
        drop((in_lens, items, max_out, heavy_count, heavy_rows));
        self.prof.mark("orient: counts")?;
        exclusive_scan(
            g,
            s,
            &mut own_ptr,
            rows as u64 + 1,
            "the block's oriented rows",
        )?;
        let entries = read_at(s, &own_ptr, rows, "the block's oriented entries")?;
        let mut own = uninit::<u32>(s, entries as usize, poison, "the block's rows")?;
        job.fill_rows(
            &d_ptr, &d_adj, first32, &self.rank, &own_ptr, true, &mut own,
        )?;
        if keep {
            self.ranked = Some((d_ptr, d_adj));
        }
        self.prof.mark("orient: fill")?;
        job.sort_rows(&own_ptr, &mut own, rows)?;
        check("orient the block", s.synchronize())?;
        self.prof.mark("orient: sort rows")?;
        self.own = Some((own_ptr, own));
        Ok(entries)
    }

    /// The lengths of the rows of U by rank (`n + 1`, the last zero), for the caller to sum
    /// across the ranks.
    pub fn lengths_mut(&mut self) -> &mut CudaSlice<u64> {
        &mut self.lengths
    }

    /// Lays out all of U by rank from the lengths (summed), the block's rows at their places
    /// and zeros elsewhere, for the caller to sum across the ranks ([`Self::rows_mut`]).
    /// Returns U's entries.
    pub fn place(&mut self) -> Result<u64> {
        let gpu = Arc::clone(&self.gpu);
        let g = &*gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let (own_ptr, own) = self.take_own()?;
        let entries = self.offsets()?;
        let mut oadj = zeros::<u32>(s, (entries as usize).max(1), "the oriented adjacency")?;
        if self.rows > 0 {
            let own_ranks = self.rank.slice(self.first..self.first + self.rows);
            place_rows(g, (&own_ptr, &own), &own_ranks, &self.lengths, &mut oadj)?;
        }
        check("place the block's rows", s.synchronize())?;
        self.prof.mark("place: rows")?;
        self.oadj = Some(oadj);
        Ok(entries)
    }

    /// The block's rows of U one after another (its vertices' in order), from the orientation
    /// until they are placed: what the block gives to [`Self::place_gathered`] on every rank.
    pub fn own_rows(&self) -> Result<&CudaSlice<u32>> {
        self.own
            .as_ref()
            .map(|(_, own)| own)
            .ok_or_else(|| Error::Invalid("the block's rows are given once oriented".into()))
    }

    /// Every vertex's row length in U by vertex (`n + 1`), the block's written and zeros
    /// elsewhere: what the block gives to [`Self::place_gathered`] on every rank.
    pub fn lengths_by_vertex(&self) -> Result<CudaSlice<u64>> {
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let (own_ptr, _) = self
            .own
            .as_ref()
            .ok_or_else(|| Error::Invalid("the block's lengths are given once oriented".into()))?;
        let mut lens = zeros::<u64>(s, self.n + 1, "the rows' lengths by vertex")?;
        if self.rows > 0 {
            let (rows32, first32) = (self.rows as u32, self.first as u32);
            launch(
                g,
                s,
                "block_lengths",
                strided(g, self.rows as u64, 256),
                |l| {
                    l.arg(own_ptr).arg(&rows32).arg(&first32).arg(&mut lens);
                },
            )?;
        }
        check("the block's lengths by vertex", s.synchronize())?;
        Ok(lens)
    }

    /// Lays out all of U by rank from `by_vertex` (every block's [`Self::lengths_by_vertex`],
    /// gathered) and `all` (every block's [`Self::own_rows`] one after another in block order,
    /// so every vertex's row in vertex order), gathered by the caller instead of summed: the
    /// lengths summed by rank ([`Self::lengths_mut`]) are not needed. Returns U's entries.
    pub fn place_gathered(
        &mut self,
        mut by_vertex: CudaSlice<u64>,
        all: CudaSlice<u32>,
    ) -> Result<u64> {
        let gpu = Arc::clone(&self.gpu);
        let g = &*gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        drop(self.take_own()?);
        let n = self.n;
        let n32 = n as u32;
        if n > 0 {
            launch(g, s, "lengths_by_rank", strided(g, n as u64, 256), |l| {
                l.arg(&by_vertex)
                    .arg(&self.rank)
                    .arg(&n32)
                    .arg(&mut self.lengths);
            })?;
        }
        let entries = self.offsets()?;
        if (all.len() as u64) < entries {
            return Err(Error::Invalid(format!(
                "{} rows' entries gathered for {entries} entries of U",
                all.len()
            )));
        }
        let mut oadj = uninit::<u32>(
            s,
            (entries as usize).max(1),
            self.tuning.poison,
            "the oriented adjacency",
        )?;
        if n > 0 {
            let offsets = "the gathered rows' offsets";
            exclusive_scan(g, s, &mut by_vertex, n as u64 + 1, offsets)?;
            let every_rank = self.rank.slice(0..n);
            place_rows(g, (&by_vertex, &all), &every_rank, &self.lengths, &mut oadj)?;
        }
        check("place the gathered rows", s.synchronize())?;
        self.prof.mark("place: gathered rows")?;
        self.oadj = Some(oadj);
        Ok(entries)
    }

    /// The block's oriented rows and their offsets, taken to be placed.
    fn take_own(&mut self) -> Result<(CudaSlice<u64>, CudaSlice<u32>)> {
        self.own
            .take()
            .ok_or_else(|| Error::Invalid("the block is placed once, after its orientation".into()))
    }

    /// The lengths (summed) made U's offsets by rank; returns U's entries.
    fn offsets(&mut self) -> Result<u64> {
        let gpu = Arc::clone(&self.gpu);
        let g = &*gpu;
        let s = &g.main;
        let n = self.n as u64;
        exclusive_scan(g, s, &mut self.lengths, n + 1, "the oriented row lengths")?;
        let entries = read_at(s, &self.lengths, n as usize, "the oriented edge count")?;
        self.prof.mark("place: offsets")?;
        Ok(entries)
    }

    /// This block's part of the check that the blocks' rows, taken unchecked (rows strictly
    /// increasing, no diagonal entry), are a simple graph's, once all of U is summed: the
    /// mirrors of the block's down entries looked for in U's sorted rows, and of the entries
    /// of U's unsorted rows in the block's rows (kept by [`Self::orient`]; see
    /// `mirrors_of_down_entries` in kernels/triangles.cu). Summed over the blocks, where U
    /// holds half of all their entries, [`Mirrors::symmetric`] decides. Frees the kept rows.
    pub fn mirrors(&mut self) -> Result<Mirrors> {
        let g = &*self.gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let (Some((ptr, radj)), Some(oadj)) = (self.ranked.take(), self.oadj.as_ref()) else {
            return Err(Error::Invalid(
                "the block's rows are checked once, kept from the orientation and U summed".into(),
            ));
        };
        let n = self.n;
        let mut counts = zeros::<u64>(s, 3, "the mirrors' counts")?;
        if self.rows > 0 {
            let poison = self.tuning.poison;
            let n32 = n as u32;
            let (rows32, first32) = (self.rows as u32, self.first as u32);
            let per_entry = strided(g, radj.len() as u64, 256);
            launch(g, s, "mirrors_of_down_entries", per_entry, |l| {
                l.arg(&ptr)
                    .arg(&radj)
                    .arg(&rows32)
                    .arg(&first32)
                    .arg(&self.rank)
                    .arg(&self.lengths)
                    .arg(oadj)
                    .arg(&mut counts);
            })?;
            let mut vertex = uninit::<u32>(s, n, poison, "each rank's vertex")?;
            launch(g, s, "invert_ranks", strided(g, n as u64, 256), |l| {
                l.arg(&self.rank).arg(&n32).arg(&mut vertex);
            })?;
            launch(
                g,
                s,
                "mirrors_of_unsorted_rows",
                strided(g, n as u64, 256),
                |l| {
                    l.arg(&self.lengths)
                        .arg(oadj)
                        .arg(&n32)
                        .arg(&vertex)
                        .arg(&first32)
                        .arg(&rows32)
                        .arg(&ptr)
                        .arg(&radj)
                        .arg(&mut counts);
                },
            )?;
        }
        let counts = download(g, s, &counts, 3, "the mirrors' counts")?;
        self.prof.mark("check the rows")?;
        Ok(Mirrors::from_words([counts[0], counts[1], counts[2]]))
    }

    /// All of U (`entries` of [`Self::place`]), for the caller to sum across the ranks.
    pub fn rows_mut(&mut self) -> Result<&mut CudaSlice<u32>> {
        self.oadj
            .as_mut()
            .ok_or_else(|| Error::Invalid("the rows are summed once placed".into()))
    }

    /// Device memory [`Self::place`] and [`Self::count`] take beyond what is held after the
    /// orientation, for `entries` entries of U: U itself, L of the pivots (at most one in-edge
    /// and its offset per entry), their offsets and the items, the per-vertex counts when asked
    /// for, and a margin for the heavy rows' tables.
    pub fn count_bytes(&self, entries: u64, per_vertex: bool) -> u64 {
        let n1 = self.n as u64 + 1;
        let counts = if per_vertex { 16 * n1 } else { 0 };
        12 * entries + 16 * n1 + counts + (256 << 20)
    }

    /// Counts the triangles of this rank's pivots in all of U (summed). Returns the count and,
    /// when asked for, the triangles through each vertex found here.
    pub fn count(self, per_vertex: bool) -> Result<BlockCounted> {
        let BlockCount {
            gpu,
            n,
            parts,
            me,
            tuning,
            mut prof,
            rank: d_rank,
            lengths: optr,
            oadj,
            ..
        } = self;
        let poison = tuning.poison;
        let Some(oadj) = oadj else {
            return Err(Error::Invalid("the rows are counted once placed".into()));
        };
        let g = &*gpu;
        let s = &g.main;
        let _busy = g.busy.lock().unwrap_or_else(|e| e.into_inner());
        let mut clock = Instant::now();
        let mut steps = Vec::new();
        let job = Job::new(g, n, poison)?;
        let n1 = n as u64 + 1;
        let (n32, parts32, me32) = (n as u32, parts as u32, me as u32);
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
        let mut heavy_rows = uninit::<u32>(s, pivots.max(1), poison, "the heavy rows")?;
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
        prof.mark("lay out: in-edges")?;
        let (iadj, ifrom) = job.transpose(&optr, &oadj, &iptr, in_edges, true)?;
        let heavy_count = check(
            "read the heavy row count",
            s.clone_dtoh(&heavy_count.slice(0..1)),
        )?[0];
        let longest = read_at(s, &longest, 0, "the longest heavy row")?;
        check("lay out the pivots' rows", s.synchronize())?;
        prof.mark("lay out: transpose")?;
        steps.push(("lay out", clock.elapsed().as_secs_f64()));
        clock = Instant::now();
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
        let (total, by_rank) = job.count_oriented(&tuning, &dag, per_vertex, &mut prof)?;
        drop(dag);
        let triangles = read_at(s, &total, 0, "the triangle count")?;
        let by_vertex = match per_vertex {
            true => Some(job.gather_by_rank(&d_rank, by_rank)?),
            false => None,
        };
        check("count the pivots' triangles", s.synchronize())?;
        steps.push(("count", clock.elapsed().as_secs_f64()));
        prof.report(&format!("the count on rank {me} of {parts}"));
        Ok((triangles, by_vertex, steps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::transfer::{download, upload_into};
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

    /// Sums one buffer of every block element by element, as the ranks' sums do.
    fn sum_over<T>(
        gpu: &Gpu,
        blocks: &mut [BlockCount],
        len: usize,
        buf: impl Fn(&mut BlockCount) -> &mut CudaSlice<T>,
    ) where
        T: cudarc::driver::DeviceRepr + Copy + Default + Send + Sync + std::ops::Add<Output = T>,
    {
        let mut sum = vec![T::default(); len];
        for b in blocks.iter_mut() {
            let part = download(gpu, &gpu.main, buf(b), len, "a part").unwrap();
            for (s, x) in sum.iter_mut().zip(part) {
                *s = *s + x;
            }
        }
        for b in blocks.iter_mut() {
            upload_into(gpu, &gpu.main, &sum, buf(b), "the sums").unwrap();
        }
    }

    /// The graph `(ptr, adj)` of `n` vertices uploaded as `parts` blocks of about equal rows.
    fn upload_blocks(
        gpu: &Arc<Gpu>,
        ptr: &[u64],
        adj: &[u32],
        n: usize,
        parts: usize,
    ) -> Vec<BlockCount> {
        let cut = |p: usize| p * n / parts;
        (0..parts)
            .map(|p| {
                let rows = cut(p)..cut(p + 1);
                let (lo, hi) = (ptr[rows.start] as usize, ptr[rows.end] as usize);
                let local: Vec<u64> = ptr[rows.start..=rows.end]
                    .iter()
                    .map(|&x| x - lo as u64)
                    .collect();
                let tuning = TriangleTuning {
                    poison: true,
                    ..Default::default()
                };
                let adj = &adj[lo..hi];
                BlockCount::upload(gpu.clone(), &local, adj, rows.start, n, parts, p, tuning)
                    .unwrap()
            })
            .collect()
    }

    /// The steps of a count across ranks up to all of U on every block, the sums made here:
    /// the degrees, the ranks (made by the first block), the orientation (block `p` keeping its
    /// rows where `keep(p)`), the lengths and the rows (summed, or `gathered` in block order).
    /// Returns U's entries.
    fn orient_and_place(
        gpu: &Arc<Gpu>,
        blocks: &mut [BlockCount],
        n: usize,
        keep: impl Fn(usize) -> bool,
        gathered: bool,
    ) -> u64 {
        sum_over(gpu, blocks, n, |b| b.degrees_mut());
        blocks[0].rank_by_degree().unwrap();
        sum_over(gpu, blocks, n, |b| b.ranks_mut());
        let own: u64 = (blocks.iter_mut().enumerate())
            .map(|(p, b)| b.orient(keep(p)).unwrap())
            .sum();
        if gathered {
            let (mut all, mut lengths) = (Vec::new(), vec![0u64; n + 1]);
            for b in blocks.iter() {
                let rows = b.own_rows().unwrap();
                all.extend(download(gpu, &gpu.main, rows, rows.len(), "rows").unwrap());
                let part = b.lengths_by_vertex().unwrap();
                let part = download(gpu, &gpu.main, &part, n + 1, "lengths").unwrap();
                for (s, x) in lengths.iter_mut().zip(part) {
                    *s += x;
                }
            }
            assert_eq!(all.len() as u64, own);
            assert_eq!(lengths.iter().sum::<u64>(), own);
            for b in blocks.iter_mut() {
                let mut d =
                    crate::gpu::prims::uninit::<u32>(&gpu.main, all.len(), true, "all").unwrap();
                upload_into(gpu, &gpu.main, &all, &mut d, "all").unwrap();
                let mut l =
                    crate::gpu::prims::uninit::<u64>(&gpu.main, n + 1, true, "lengths").unwrap();
                upload_into(gpu, &gpu.main, &lengths, &mut l, "lengths").unwrap();
                assert_eq!(b.place_gathered(l, d).unwrap(), own);
            }
            return own;
        }
        sum_over(gpu, blocks, n + 1, |b| b.lengths_mut());
        for b in blocks.iter_mut() {
            assert_eq!(b.place().unwrap(), own);
        }
        sum_over(gpu, blocks, own as usize, |b| b.rows_mut().unwrap());
        own
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
        let (ptr, adj) = (g.row_ptr(), g.col_idx());
        for (parts, gathered) in [(1, false), (2, false), (2, true), (3, true), (5, false)] {
            let mut blocks = upload_blocks(&gpu, ptr, adj, n, parts);
            // Every other block keeps its rows to check them against U.
            let own = orient_and_place(&gpu, &mut blocks, n, |p| p % 2 == 0, gathered);
            assert_eq!(2 * own, adj.len() as u64, "{parts} blocks");
            let degree = download(&gpu, &gpu.main, blocks[0].degrees_mut(), n, "d").unwrap();
            assert!((0..n).all(|v| degree[v] as usize == g.degree(v)));
            let rank = download(&gpu, &gpu.main, blocks[parts - 1].ranks_mut(), n, "r").unwrap();
            let mut order = vec![u32::MAX; n];
            for (v, &r) in rank.iter().enumerate() {
                assert_eq!(order[r as usize], u32::MAX, "rank {r} taken twice");
                order[r as usize] = v as u32;
            }
            assert!(order
                .windows(2)
                .all(|w| degree[w[0] as usize] <= degree[w[1] as usize]));
            for (p, b) in blocks.iter_mut().enumerate() {
                let missing = b.mirrors().ok().map(|m| m.missing);
                assert_eq!(missing, (p % 2 == 0).then_some(0), "{parts} blocks");
            }
            let (mut total, mut per_vertex) = (0, vec![0u64; n]);
            for b in blocks {
                let (t, pv, steps) = b.count(true).unwrap();
                let names: Vec<_> = steps.iter().map(|s| s.0).collect();
                assert_eq!(names, ["lay out", "count"]);
                total += t;
                for (s, x) in per_vertex.iter_mut().zip(pv.unwrap()) {
                    *s += x;
                }
            }
            assert_eq!(total, want.triangles, "{parts} blocks, {gathered}");
            assert_eq!(
                Some(per_vertex),
                want.per_vertex,
                "{parts} blocks, {gathered}"
            );
        }
    }

    /// Rows with the same entry count as the simple graph's and U half of them, one row's
    /// entry swapped for another vertex's, on 1-3 blocks: where the two are ranked below the
    /// row's vertex (the hub's row), U lacks the entry's mirror; where above (a light row), U's
    /// new entry finds no mirror. The degrees stay the same, so the ranks do too.
    #[test]
    fn a_row_with_an_entry_swapped_is_found_against_u() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        let g = graph();
        let n = g.vertices();
        let adjacent = |v: usize, w: usize| g.neighbours(v).contains(&(w as u32));
        // Vertices 0 and 1 are joined to every other: the heaviest of the rest.
        let hub = (2..n).max_by_key(|&v| g.degree(v)).unwrap();
        let light = (0..n)
            .filter(|&v| g.degree(v) > 0)
            .min_by_key(|&v| g.degree(v))
            .unwrap();
        // (row, entry out, entry in), each a vertex of a differing degree from the row's.
        let below = g
            .neighbours(hub)
            .iter()
            .map(|&w| w as usize)
            .find(|&w| g.degree(w) < g.degree(hub))
            .unwrap();
        let outside = (0..n)
            .find(|&w| w != hub && !adjacent(hub, w) && g.degree(w) < g.degree(hub))
            .unwrap();
        let above = (g.neighbours(light).iter())
            .map(|&w| w as usize)
            .find(|&w| g.degree(w) > g.degree(light))
            .unwrap();
        let other = (0..n)
            .find(|&w| w != light && !adjacent(light, w) && g.degree(w) > g.degree(light))
            .unwrap();
        for (row, out, into) in [(hub, below, outside), (light, above, other)] {
            let mut ptr = vec![0u64];
            let mut adj: Vec<u32> = Vec::new();
            for v in 0..n {
                let mut r: Vec<u32> = g.neighbours(v).to_vec();
                if v == row {
                    r.retain(|&w| w as usize != out);
                    r.push(into as u32);
                    r.sort_unstable();
                }
                adj.extend(r);
                ptr.push(adj.len() as u64);
            }
            for parts in [1, 2, 3] {
                let what = format!("row {row}: {out} for {into}, {parts} blocks");
                let mut blocks = upload_blocks(&gpu, &ptr, &adj, n, parts);
                let own = orient_and_place(&gpu, &mut blocks, n, |_| true, parts == 2);
                assert_eq!(2 * own, adj.len() as u64, "{what}");
                let summed = (blocks.iter_mut())
                    .map(|b| b.mirrors().unwrap())
                    .fold(Mirrors::default(), |a, b| a + b);
                assert!(!summed.symmetric(), "{what}: {summed:?}");
            }
        }
    }

    /// Whether `(ptr, adj)` (rows strictly increasing) is symmetric, checked on the host.
    fn symmetric_on_host(ptr: &[u64], adj: &[u32]) -> bool {
        let row = |v: usize| &adj[ptr[v] as usize..ptr[v + 1] as usize];
        (0..ptr.len() - 1).all(|v| {
            row(v)
                .iter()
                .all(|&w| row(w as usize).binary_search(&(v as u32)).is_ok())
        })
    }

    /// A clique large enough for rows of U past the sorted length (`TRI_SORT_MAX`), among
    /// sparser vertices: rows with an entry swapped for another vertex's, on 1-3 blocks, are
    /// found not symmetric whichever part of the check their pairs fall to, and the graph
    /// itself is found symmetric.
    #[test]
    fn swapped_entries_are_found_in_rows_of_u_past_the_sorted_length() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        let (clique, n) = (1100u32, 1400u32);
        let mut rng = crate::generate::rng::SplitMix64::new(5);
        let mut edges = Vec::new();
        for a in 0..clique {
            for b in a + 1..clique {
                edges.push((a, b));
            }
        }
        for v in clique..n {
            for _ in 0..4 {
                edges.push((v, rng.next_u64() as u32 % n));
            }
        }
        let g = SimpleGraph::from_edges(crate::EdgeList::square(n as usize, edges, None)).unwrap();
        let n = n as usize;
        let rows: Vec<Vec<u32>> = (0..n).map(|v| g.neighbours(v).to_vec()).collect();
        let csr = |rows: &[Vec<u32>]| {
            let mut ptr = vec![0u64];
            let mut adj = Vec::new();
            for r in rows {
                adj.extend_from_slice(r);
                ptr.push(adj.len() as u64);
            }
            (ptr, adj)
        };
        let mut cases = vec![(rows.clone(), true)];
        for _ in 0..12 {
            let mut swapped = rows.clone();
            // A row of the clique or of the rest, an entry out for a vertex not adjacent.
            let v = match cases.len() % 2 {
                0 => rng.next_u64() as usize % clique as usize,
                _ => clique as usize + rng.next_u64() as usize % (n - clique as usize),
            };
            let out = rng.next_u64() as usize % swapped[v].len();
            let into = loop {
                let w = (rng.next_u64() % n as u64) as u32;
                if w as usize != v && swapped[v].binary_search(&w).is_err() {
                    break w;
                }
            };
            swapped[v].remove(out);
            let at = swapped[v].binary_search(&into).unwrap_err();
            swapped[v].insert(at, into);
            cases.push((swapped, false));
        }
        let mut unsorted_seen = false;
        for (k, (rows, symmetric)) in cases.iter().enumerate() {
            let (ptr, adj) = csr(rows);
            assert_eq!(symmetric_on_host(&ptr, &adj), *symmetric, "case {k}");
            for parts in [1, 2, 3] {
                let mut blocks = upload_blocks(&gpu, &ptr, &adj, n, parts);
                let own = orient_and_place(&gpu, &mut blocks, n, |_| true, parts == 3);
                if 2 * own != adj.len() as u64 {
                    // Found before the check: U does not hold half of all entries.
                    assert!(!symmetric, "case {k}, {parts} blocks");
                    continue;
                }
                let summed = (blocks.iter_mut())
                    .map(|b| b.mirrors().unwrap())
                    .fold(Mirrors::default(), |a, b| a + b);
                unsorted_seen |= summed.unsorted_owned > 0;
                assert_eq!(
                    summed.symmetric(),
                    *symmetric,
                    "case {k}, {parts} blocks: {summed:?}"
                );
            }
        }
        assert!(unsorted_seen, "no row of U past the sorted length");
    }
}
