//! Triangle counting on the GPU (kernels/triangles.cu), the host side of
//! [`Method::Fused`]: the simple graph's symmetric adjacency is oriented by degree on the
//! device, then the masked product `C⟨U⟩ = U·U` is summed as it is formed, so no product matrix
//! is ever stored. Built on the device layer's primitives ([`crate::gpu`]).

use super::{Method, Options, SimpleGraph, Triangles};
use crate::error::{Error, Result};
use crate::gpu::prims::{
    check, exclusive_scan, launch, read_at, shape, strided, uninit, zeros, NULL,
};
use crate::gpu::profile::{Phase, Profile};
use crate::gpu::transfer::upload;
use crate::gpu::Gpu;
use crate::spgemm::EngineKind;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use std::time::Instant;

/// Threads of the setup and light-row kernels (TRI_THREADS in kernels/triangles.cu).
const THREADS: u32 = 256;
/// Hash slots of one warp of the light kernel (TRI_WARP_SLOTS): rows of more than half as
/// many entries are heavy.
pub(super) const WARP_SLOTS: u64 = 1024;
/// Rows of U up to this long are sorted a warp each, longer ones a block each
/// (TRI_SORT_WARP).
const SORT_WARP: usize = 256;
/// Threads of the long rows' sort (TRI_SORT_THREADS).
const SORT_THREADS: u32 = 256;
/// Threads of the heavy-row kernel (TRI_HEAVY_THREADS).
const HEAVY_THREADS: u32 = 512;
/// Static shared memory of the heavy-row kernel: one `WedgeSlots` (32 × 20 bytes) per warp and
/// the `u64` item counter, rounded up; the rest of the block's shared memory holds a row's hash
/// table.
const HEAVY_STATIC_SHARED: u64 = (HEAVY_THREADS as u64 / 32) * 32 * 20 + 256;

/// Slots of the hash table of a row of `len` entries (`table_bits` in the kernels): a power of
/// two, at least 32 and at least `2 len`.
fn table_slots(len: u64) -> u64 {
    (2 * len).next_power_of_two().max(32)
}

/// Switches of the triangle kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriangleTuning {
    /// Fill device buffers with 0xFF before the kernels write them.
    pub poison: bool,
    /// Most hash slots (rounded down to a power of two) a row's table may take in the heavy
    /// kernel's shared memory (default: what fits); larger tables live in device memory. Tests
    /// lower it to reach that path on small graphs.
    pub heavy_shared_slots: Option<u32>,
    /// Time each phase (waiting for the device between phases) and print them on stderr.
    pub profile: bool,
}

/// The count, and where the time went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceTriangles {
    /// Number of triangles.
    pub triangles: u64,
    /// Triangles through each vertex, when asked for.
    pub per_vertex: Option<Vec<u64>>,
    /// Copying the adjacency to the device.
    pub upload_seconds: f64,
    /// Checking on the device that the adjacency is symmetric, where asked to.
    pub check_seconds: f64,
    /// Orientation on the device.
    pub orient_seconds: f64,
    /// From the adjacency on the device to the count (orientation included), per-vertex counts'
    /// copy back excluded.
    pub device_seconds: f64,
    /// Phase times, when profiling.
    pub phases: Vec<Phase>,
}

/// Counts the triangles of the simple undirected graph whose symmetric adjacency is
/// `(row_ptr, col_idx)`: rows sorted, no self loops, each edge in both rows.
pub fn count(
    gpu: &Gpu,
    row_ptr: &[u64],
    col_idx: &[u32],
    per_vertex: bool,
    tuning: &TriangleTuning,
) -> Result<DeviceTriangles> {
    let counted = count_rows(gpu, row_ptr, col_idx, per_vertex, tuning, false)?;
    known_symmetric(counted)
}

/// The count of rows known symmetric, which is never `None`.
fn known_symmetric<T>(counted: Option<T>) -> Result<T> {
    counted.ok_or_else(|| {
        Error::Invalid(
            "a count of rows known symmetric came back unchecked: please report this as a bug"
                .into(),
        )
    })
}

/// [`count`]; with `check_rows`, of rows not known to be symmetric (strictly increasing, every
/// column below the row count): the device checks them after the upload
/// ([`crate::csr::is_symmetric_without_loops_on`]) and counts where they are a simple graph's,
/// `None` where they are not.
fn count_rows(
    gpu: &Gpu,
    row_ptr: &[u64],
    col_idx: &[u32],
    per_vertex: bool,
    tuning: &TriangleTuning,
    check_rows: bool,
) -> Result<Option<DeviceTriangles>> {
    let poison = tuning.poison;
    let n = row_ptr.len().saturating_sub(1);
    if n >= u32::MAX as usize {
        return Err(Error::Invalid(format!(
            "{n} vertices do not fit the GPU kernels' 32-bit vertex ids"
        )));
    }
    let mut out = DeviceTriangles {
        per_vertex: per_vertex.then(|| vec![0; n]),
        ..Default::default()
    };
    if col_idx.len() < 6 && !check_rows {
        // Fewer than three edges: no triangle, nothing to launch.
        return Ok(Some(out));
    }
    let _busy = gpu.busy.lock().unwrap_or_else(|e| e.into_inner());
    let s = &gpu.main;

    let start = Instant::now();
    let ptr = upload(gpu, s, row_ptr, "the adjacency's row offsets")?;
    // Turned into ranks in place by orient_counts.
    let adj = upload(gpu, s, col_idx, "the adjacency's columns")?;
    check("upload the adjacency", s.synchronize())?;
    out.upload_seconds = start.elapsed().as_secs_f64();
    if check_rows {
        let start = Instant::now();
        if !crate::csr::is_symmetric_without_loops_on(gpu, &ptr, &adj, n)? {
            return Ok(None);
        }
        out.check_seconds = start.elapsed().as_secs_f64();
        if col_idx.len() < 6 {
            return Ok(Some(out));
        }
    }

    let start = Instant::now();
    let mut prof = Profile::new(&gpu.ctx, tuning.profile);
    let job = Job::new(gpu, n, poison)?;
    let rank = job.degree_ranks(Degrees::Rows(&ptr), &mut prof)?;
    let dag = job.orient(ptr, adj, &rank, &mut prof)?;
    out.orient_seconds = start.elapsed().as_secs_f64();

    let (total, by_rank) = job.count_oriented(tuning, &dag, per_vertex, &mut prof)?;
    out.triangles = read_at(s, &total, 0, "the triangle count")?;
    out.device_seconds = start.elapsed().as_secs_f64();
    prof.report("triangle counting");
    out.phases = prof.phases().to_vec();
    if per_vertex {
        out.per_vertex = Some(job.gather_by_rank(&rank, by_rank)?);
    }
    Ok(Some(out))
}

/// Where [`Job::degree_ranks`] reads the degrees: the rows' lengths (offsets of `n + 1`), or
/// `n` degrees.
#[derive(Clone, Copy)]
pub(super) enum Degrees<'a> {
    Rows(&'a CudaSlice<u64>),
    Given(&'a CudaSlice<u32>),
}

impl<'a> Degrees<'a> {
    /// The kernels' two arguments: the offsets or null, the degrees or null.
    fn push(self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        match self {
            Degrees::Rows(ptr) => l.arg(ptr).arg(&NULL),
            Degrees::Given(degree) => l.arg(&NULL).arg(degree),
        };
    }
}

/// What every step of one count shares: the GPU, the vertex count, poisoning and the launch
/// shapes.
pub(super) struct Job<'a> {
    pub(super) gpu: &'a Gpu,
    pub(super) n: usize,
    pub(super) poison: bool,
    /// A warp per row, the grid capped.
    pub(super) per_row: LaunchConfig,
    /// A thread per vertex, grid-stride.
    pub(super) per_vertex: LaunchConfig,
}

/// The oriented graph on the device, renumbered by rank: `U` (`optr`, `oadj`), its transpose `L`
/// (`iptr`, `iadj`, with `ifrom` the offset of each in-edge in `oadj`), the light rows' items and
/// the heavy rows, as the counting kernels read them.
pub(super) struct DeviceDag {
    pub(super) optr: CudaSlice<u64>,
    pub(super) oadj: CudaSlice<u32>,
    pub(super) iptr: CudaSlice<u64>,
    pub(super) iadj: CudaSlice<u32>,
    pub(super) ifrom: CudaSlice<u32>,
    pub(super) item_ptr: CudaSlice<u64>,
    pub(super) heavy_rows: CudaSlice<u32>,
    /// How many rows `heavy_rows` lists.
    pub(super) heavy_count: u32,
    /// The longest row of U with in-edges (the heavy rows' tables are sized by it).
    pub(super) longest: u64,
}

impl Job<'_> {
    pub(super) fn new(gpu: &Gpu, n: usize, poison: bool) -> Result<Job<'_>> {
        let per_row = shape(
            (n as u64 * 32)
                .div_ceil(THREADS as u64)
                .min(gpu.multiprocessors() as u64 * 64),
            THREADS,
            0,
        )?;
        let per_vertex = strided(gpu, n as u64, THREADS);
        Ok(Job {
            gpu,
            n,
            poison,
            per_row,
            per_vertex,
        })
    }

    /// Ranks by degree: a counting sort (ties in any order).
    pub(super) fn degree_ranks(
        &self,
        degrees: Degrees<'_>,
        prof: &mut Profile,
    ) -> Result<CudaSlice<u32>> {
        let (gpu, s, n) = (self.gpu, &self.gpu.main, self.n);
        let n32 = n as u32;
        let mut starts = zeros::<u64>(s, n + 1, "the degree histogram")?;
        launch(gpu, s, "degree_histogram", self.per_vertex, |l| {
            degrees.push(l);
            l.arg(&n32).arg(&mut starts);
        })?;
        exclusive_scan(gpu, s, &mut starts, n as u64 + 1, "the degree histogram")?;
        let mut rank = uninit::<u32>(s, n, self.poison, "the degree ranks")?;
        launch(gpu, s, "degree_ranks", self.per_vertex, |l| {
            degrees.push(l);
            l.arg(&n32).arg(&mut starts).arg(&mut rank);
        })?;
        drop(starts);
        prof.mark("ranks by degree")?;
        Ok(rank)
    }

    /// U and L, renumbered by rank, from the adjacency on the device, which is freed once U is
    /// filled.
    fn orient(
        &self,
        ptr: CudaSlice<u64>,
        mut adj: CudaSlice<u32>,
        rank: &CudaSlice<u32>,
        prof: &mut Profile,
    ) -> Result<DeviceDag> {
        let (gpu, s, n, poison) = (self.gpu, &self.gpu.main, self.n, self.poison);
        let entries = adj.len();
        let (n32, n1) = (n as u32, n as u64 + 1);
        let mut optr = zeros::<u64>(s, n + 1, "the oriented row offsets")?;
        let mut iptr = zeros::<u64>(s, n + 1, "the in-edge row offsets")?;
        let mut max_out = zeros::<u64>(s, 1, "the longest oriented row")?;
        let mut item_ptr = zeros::<u64>(s, n + 1, "the light rows' items")?;
        let mut heavy_count = zeros::<u32>(s, 1, "the heavy row count")?;
        // Heavy rows have more than WARP_SLOTS / 2 entries: at most this many.
        let mut heavy_rows = uninit::<u32>(
            s,
            (entries as u64 / 2 / (WARP_SLOTS / 2 + 1) + 1).min(n as u64) as usize,
            poison,
            "the heavy row list",
        )?;
        self.ranks_into_rows(&ptr, &mut adj, 0, rank, &mut optr)?;
        launch(gpu, s, "orient_counts", self.per_vertex, |l| {
            l.arg(&ptr)
                .arg(&n32)
                .arg(&0u32)
                .arg(rank)
                .arg(&optr)
                .arg(&mut iptr)
                .arg(&mut max_out)
                .arg(&mut item_ptr)
                .arg(&mut heavy_rows)
                .arg(&mut heavy_count)
                .arg(&NULL);
        })?;
        exclusive_scan(gpu, s, &mut optr, n1, "the oriented row lengths")?;
        exclusive_scan(gpu, s, &mut iptr, n1, "the in-edge row lengths")?;
        exclusive_scan(gpu, s, &mut item_ptr, n1, "the light rows' items")?;
        prof.mark("orient: row lengths")?;
        let oriented = read_at(s, &optr, n, "the oriented edge count")?;
        if 2 * oriented != entries as u64 {
            return Err(Error::Invalid(format!(
                "the adjacency is not symmetric: {oriented} oriented edges from {entries} entries"
            )));
        }
        let mut oadj = uninit::<u32>(s, oriented as usize, poison, "the oriented adjacency")?;
        self.fill_rows(&ptr, &adj, 0, rank, &optr, false, &mut oadj)?;
        drop((ptr, adj));
        prof.mark("orient: fill")?;
        self.sort_rows(&optr, &mut oadj, n)?;
        prof.mark("orient: sort rows")?;
        let (iadj, ifrom) = self.transpose(&optr, &oadj, &iptr, oriented, false)?;
        prof.mark("transpose")?;
        let longest = read_at(s, &max_out, 0, "the longest oriented row")?;
        let heavy_count = check(
            "read the heavy row count",
            s.clone_dtoh(&heavy_count.slice(0..1)),
        )?[0];
        Ok(DeviceDag {
            optr,
            oadj,
            iptr,
            iadj,
            ifrom,
            item_ptr,
            heavy_rows,
            heavy_count,
            longest,
        })
    }

    /// The first step of the orientation of `rows` rows of the adjacency (`ptr`, `adj`; row `u`
    /// is vertex `first + u`): each entry of `adj` becomes its vertex's rank, and `out_lens[r]`
    /// (zeroed) gains the neighbours of rank `r` ranked above it. The kernel walks the entries,
    /// not the rows, so that a hub's row takes many warps.
    pub(super) fn ranks_into_rows(
        &self,
        ptr: &CudaSlice<u64>,
        adj: &mut CudaSlice<u32>,
        first: u32,
        rank: &CudaSlice<u32>,
        out_lens: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let rows = ptr.len().saturating_sub(1) as u32;
        if rows == 0 {
            return Ok(());
        }
        let per_entry = strided(self.gpu, adj.len().max(1) as u64, THREADS);
        launch(self.gpu, &self.gpu.main, "orient_ranks", per_entry, |l| {
            l.arg(ptr)
                .arg(adj)
                .arg(&rows)
                .arg(&first)
                .arg(rank)
                .arg(out_lens);
        })
    }

    /// Writes the rows of U (`oadj`, laid out by `optr`: by rank, or by row with `by_row`)
    /// from the adjacency that [`Self::ranks_into_rows`] turned into ranks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill_rows(
        &self,
        ptr: &CudaSlice<u64>,
        ranked_adj: &CudaSlice<u32>,
        first: u32,
        rank: &CudaSlice<u32>,
        optr: &CudaSlice<u64>,
        by_row: bool,
        oadj: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let s = &self.gpu.main;
        let rows = ptr.len().saturating_sub(1);
        if rows == 0 {
            return Ok(());
        }
        let mut cursor = zeros::<u32>(s, rows, "the oriented rows' cursors")?;
        let per_entry = strided(self.gpu, ranked_adj.len().max(1) as u64, THREADS);
        let (rows32, by_row) = (rows as u32, u32::from(by_row));
        launch(self.gpu, s, "orient_fill", per_entry, |l| {
            l.arg(ptr)
                .arg(ranked_adj)
                .arg(&rows32)
                .arg(&first)
                .arg(rank)
                .arg(optr)
                .arg(&by_row)
                .arg(&mut cursor)
                .arg(oadj);
        })
    }

    /// Sorts the rows of U (`rows` of them, laid out by `optr`) of up to 1024 entries
    /// (TRI_SORT_MAX): short ones a warp each; long ones listed, then a block each.
    pub(super) fn sort_rows(
        &self,
        optr: &CudaSlice<u64>,
        oadj: &mut CudaSlice<u32>,
        rows: usize,
    ) -> Result<()> {
        let (gpu, s, rows32) = (self.gpu, &self.gpu.main, rows as u32);
        if rows == 0 {
            return Ok(());
        }
        launch(gpu, s, "sort_rows", self.per_row, |l| {
            l.arg(optr).arg(&mut *oadj).arg(&rows32);
        })?;
        // Rows past SORT_WARP entries: at most this many.
        let most = (oadj.len() / (SORT_WARP + 1) + 1).min(rows);
        let mut long_rows = uninit::<u32>(s, most, self.poison, "the long oriented rows")?;
        let mut long_count = zeros::<u32>(s, 1, "the long oriented row count")?;
        launch(gpu, s, "list_long_rows", self.per_vertex, |l| {
            l.arg(optr)
                .arg(&rows32)
                .arg(&mut long_rows)
                .arg(&mut long_count);
        })?;
        let blocks = shape(gpu.multiprocessors() as u64 * 8, SORT_THREADS, 0)?;
        launch(gpu, s, "sort_long_rows", blocks, |l| {
            l.arg(optr).arg(oadj).arg(&long_rows).arg(&long_count);
        })
    }

    /// The rows of L (`in_edges` of them, laid out by `iptr`) from U: the in-edges and where
    /// each sits in its tail's row. With `filtered`, only the vertices with a row in `iptr`
    /// take their in-edges (a rank's part of U across ranks holds others' too).
    pub(super) fn transpose(
        &self,
        optr: &CudaSlice<u64>,
        oadj: &CudaSlice<u32>,
        iptr: &CudaSlice<u64>,
        in_edges: u64,
        filtered: bool,
    ) -> Result<(CudaSlice<u32>, CudaSlice<u32>)> {
        let (gpu, s, poison) = (self.gpu, &self.gpu.main, self.poison);
        let n32 = self.n as u32;
        let mut cursor = check("copy the in-edge offsets", s.clone_dtod(iptr))?;
        let mut iadj = uninit::<u32>(s, in_edges as usize, poison, "the in-edges")?;
        let mut ifrom = uninit::<u32>(s, in_edges as usize, poison, "the in-edges' offsets")?;
        let filtered = u32::from(filtered);
        launch(gpu, s, "transpose_fill", self.per_row, |l| {
            l.arg(optr)
                .arg(oadj)
                .arg(&n32)
                .arg(iptr)
                .arg(&filtered)
                .arg(&mut cursor)
                .arg(&mut iadj)
                .arg(&mut ifrom);
        })?;
        Ok((iadj, ifrom))
    }

    /// The count: light rows, then heavy rows. Returns the total and the per-vertex counts by
    /// rank (one unused slot when not asked for), on the device.
    pub(super) fn count_oriented(
        &self,
        tuning: &TriangleTuning,
        dag: &DeviceDag,
        per_vertex: bool,
        prof: &mut Profile,
    ) -> Result<(CudaSlice<u64>, CudaSlice<u64>)> {
        let (gpu, s, n) = (self.gpu, &self.gpu.main, self.n);
        let n32 = n as u32;
        let mut next_item = zeros::<u64>(s, 1, "the item counter")?;
        let mut total = zeros::<u64>(s, 1, "the triangle count")?;
        let mut by_rank = zeros::<u64>(s, if per_vertex { n } else { 1 }, "the per-vertex counts")?;
        let count_per_vertex = per_vertex as u32;
        let light = shape(gpu.multiprocessors() as u64 * 8, THREADS, 0)?;
        // The kernels read optr/iptr/item_ptr[0..=n] and the rows they delimit, and write the
        // counters and by_rank[0..n] when counting per vertex.
        launch(gpu, s, "triangles_light", light, |l| {
            l.arg(&dag.optr)
                .arg(&dag.oadj)
                .arg(&dag.iptr)
                .arg(&dag.iadj)
                .arg(&dag.ifrom)
                .arg(&dag.item_ptr)
                .arg(&n32)
                .arg(&mut next_item)
                .arg(&mut total)
                .arg(&count_per_vertex)
                .arg(&mut by_rank);
        })?;
        prof.mark("count: light rows")?;
        if dag.heavy_count > 0 {
            count_heavy(gpu, tuning, dag, &mut total, count_per_vertex, &mut by_rank)?;
        }
        prof.mark("count: heavy rows")?;
        Ok((total, by_rank))
    }

    /// The per-vertex counts by rank, moved to vertex ids and copied to the host.
    pub(super) fn gather_by_rank(
        &self,
        rank: &CudaSlice<u32>,
        by_rank: CudaSlice<u64>,
    ) -> Result<Vec<u64>> {
        let (gpu, s, n) = (self.gpu, &self.gpu.main, self.n);
        let n32 = n as u32;
        let mut by_vertex = uninit::<u64>(s, n, self.poison, "the per-vertex counts")?;
        launch(gpu, s, "gather_by_rank", self.per_vertex, |l| {
            l.arg(rank).arg(&n32).arg(&by_rank).arg(&mut by_vertex);
        })?;
        check(
            "copy the per-vertex counts to the host",
            s.clone_dtoh(&by_vertex.slice(0..n)),
        )
    }
}

/// Cuts the heavy rows' in-edges into items and counts their triangles into `total` (and
/// `by_rank` when `count_per_vertex` is 1).
fn count_heavy(
    gpu: &Gpu,
    tuning: &TriangleTuning,
    h: &DeviceDag,
    total: &mut CudaSlice<u64>,
    count_per_vertex: u32,
    by_rank: &mut CudaSlice<u64>,
) -> Result<()> {
    let s = &gpu.main;
    let heavy = h.heavy_count;
    let mut item_ptr = zeros::<u64>(s, heavy as usize + 1, "the heavy rows' items")?;
    launch(
        gpu,
        s,
        "heavy_items",
        shape((heavy as u64).div_ceil(256), 256, 0)?,
        |l| {
            l.arg(&h.heavy_rows)
                .arg(&heavy)
                .arg(&h.iptr)
                .arg(&mut item_ptr);
        },
    )?;
    exclusive_scan(
        gpu,
        s,
        &mut item_ptr,
        heavy as u64 + 1,
        "the heavy rows' items",
    )?;
    let mut next_item = zeros::<u64>(s, 1, "the heavy item counter")?;
    // Shared memory for the largest table needed (at most what a block can take), so that
    // as many blocks as fit share each multiprocessor.
    let needed = table_slots(h.longest);
    let fits = prev_power_of_two(gpu.shared_per_block().saturating_sub(HEAVY_STATIC_SHARED) / 4);
    let shared_slots = tuning
        .heavy_shared_slots
        .map_or(fits, |c| prev_power_of_two(c as u64).min(fits))
        .min(needed);
    let blocks = gpu.multiprocessors() as u64 * 4;
    let global_slots = if needed > shared_slots { needed } else { 0 };
    let mut scratch = uninit::<u32>(
        s,
        (blocks * global_slots) as usize,
        false,
        "the heavy rows' hash tables",
    )?;
    let cfg = shape(blocks, HEAVY_THREADS, shared_slots * 4)?;
    let shared_slots32 = shared_slots as u32;
    // A block's table takes shared_slots * 4 bytes of dynamic shared memory, or its
    // global_slots slots of scratch (which holds blocks * global_slots); the kernel reads
    // item_ptr[0..=heavy] and the rows the items name.
    launch(gpu, s, "triangles_heavy", cfg, |l| {
        l.arg(&h.optr)
            .arg(&h.oadj)
            .arg(&h.iptr)
            .arg(&h.iadj)
            .arg(&h.ifrom)
            .arg(&h.heavy_rows)
            .arg(&item_ptr)
            .arg(&heavy)
            .arg(&mut next_item)
            .arg(&shared_slots32)
            .arg(&mut scratch)
            .arg(&global_slots)
            .arg(total)
            .arg(&count_per_vertex)
            .arg(by_rank);
    })
}

/// The largest power of two at most `x` (1 for 0).
fn prev_power_of_two(x: u64) -> u64 {
    if x <= 1 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

/// The fused GPU kernel ([`Method::Fused`]), on the GPU engine only.
pub(super) fn count_fused(
    g: &SimpleGraph,
    opts: &Options,
    engine: EngineKind,
    start: Instant,
) -> Result<Triangles> {
    let counted = count_fused_rows(g.row_ptr(), g.col_idx(), false, opts, engine, start)?;
    known_symmetric(counted)
}

/// [`count_fused`] of rows `(row_ptr, col_idx)` that are a simple graph's where `check_rows` is
/// false, else strictly increasing rows checked on the device first: `None` where they are not
/// symmetric.
pub(super) fn count_fused_rows(
    row_ptr: &[u64],
    col_idx: &[u32],
    check_rows: bool,
    opts: &Options,
    engine: EngineKind,
    start: Instant,
) -> Result<Option<Triangles>> {
    if engine != EngineKind::Gpu {
        return Err(Error::Invalid(
            "the fused method runs on the GPU engine: use --engine gpu, or --method merge on \
             the CPU"
                .into(),
        ));
    }
    let gpu = crate::gpu::device().map_err(|e| match e {
        Error::EngineUnavailable(why) => {
            Error::EngineUnavailable(format!("the GPU engine cannot count triangles here: {why}"))
        }
        other => other,
    })?;
    let counted = count_rows(
        &gpu,
        row_ptr,
        col_idx,
        opts.per_vertex,
        &opts.gpu,
        check_rows,
    )?;
    Ok(counted.map(|d| Triangles {
        triangles: d.triangles,
        per_vertex: d.per_vertex,
        method: Method::Fused,
        relabelled: false,
        orient_seconds: d.orient_seconds,
        upload_seconds: d.upload_seconds,
        check_seconds: d.check_seconds,
        device_seconds: d.device_seconds,
        seconds: start.elapsed().as_secs_f64(),
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launch constants above must be the kernels' own.
    #[test]
    fn constants_match_the_kernels() {
        for (name, value) in [
            ("TRI_THREADS", THREADS as u64),
            ("TRI_WARP_SLOTS", WARP_SLOTS),
            ("TRI_HEAVY_THREADS", HEAVY_THREADS as u64),
            ("TRI_SORT_WARP", SORT_WARP as u64),
            ("TRI_SORT_THREADS", SORT_THREADS as u64),
        ] {
            assert_eq!(
                crate::gpu::kernels::defined(name),
                Some(value),
                "{name} in kernels/triangles.cu"
            );
        }
    }

    #[test]
    fn table_sizes() {
        assert_eq!(table_slots(0), 32);
        assert_eq!(table_slots(16), 32);
        assert_eq!(table_slots(17), 64);
        assert_eq!(table_slots(512), WARP_SLOTS);
        assert_eq!(prev_power_of_two(9664), 8192);
        assert_eq!(prev_power_of_two(8192), 8192);
        assert_eq!(prev_power_of_two(0), 1);
    }
}
