//! Triangle counting on the GPU (kernels/triangles.cu): the simple graph's symmetric adjacency
//! is oriented by degree on the device, then the masked product `C⟨U⟩ = U·U` is summed as it is
//! formed, so no product matrix is ever stored.

use super::prims::{check, exclusive_scan, read_at, shape, uninit, upload, zeros};
use super::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::PushKernelArg;
use std::time::Instant;

/// Threads of the orientation and light-row kernels (TRI_THREADS in kernels/triangles.cu).
const THREADS: u32 = 256;
/// Longest row one warp of the light kernel holds (TRI_WARP_ROW).
const WARP_ROW: u64 = 512;
/// Threads of the heavy-row kernel (TRI_HEAVY_THREADS).
const HEAVY_THREADS: u32 = 512;
/// Static shared memory of the heavy-row kernel: one `WedgeSlots` (32 × 20 bytes) per warp and
/// one `u32`, rounded up; the rest of the block's shared memory holds the row.
const HEAVY_STATIC_SHARED: u64 = (HEAVY_THREADS as u64 / 32) * 32 * 20 + 256;

/// Switches of the triangle kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriangleTuning {
    /// Fill device buffers with 0xFF before the kernels write them.
    pub poison: bool,
    /// Longest row the heavy kernel copies to shared memory (default: what fits); longer rows
    /// are searched in device memory. Tests lower it to reach that path on small graphs.
    pub heavy_shared_cap: Option<u32>,
}

impl TriangleTuning {
    /// The defaults, with `GMCL_GPU_POISON=1` turning poisoning on.
    pub fn from_env() -> Self {
        TriangleTuning {
            poison: std::env::var("GMCL_GPU_POISON").is_ok_and(|v| v == "1"),
            heavy_shared_cap: None,
        }
    }
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
    /// Orientation on the device.
    pub orient_seconds: f64,
    /// From the adjacency on the device to the count (orientation included), per-vertex counts'
    /// copy back excluded.
    pub device_seconds: f64,
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
    if col_idx.len() < 6 {
        // Fewer than three edges: no triangle, nothing to launch.
        return Ok(out);
    }
    let _busy = gpu.busy.lock().unwrap_or_else(|e| e.into_inner());
    let s = &gpu.main;
    let n32 = n as u32;

    let start = Instant::now();
    let ptr = upload(s, row_ptr, "the adjacency's row offsets")?;
    let adj = upload(s, col_idx, "the adjacency's columns")?;
    check("upload the adjacency", s.synchronize())?;
    out.upload_seconds = start.elapsed().as_secs_f64();

    let start = Instant::now();
    let rows = shape(
        (n as u64 * 32)
            .div_ceil(THREADS as u64)
            .min(gpu.multiprocessors() as u64 * 64),
        THREADS,
        0,
    )?;
    let mut optr = zeros::<u64>(s, n + 1, "the oriented row offsets")?;
    // SAFETY: the kernel reads ptr[0..=n] and adj[ptr[0]..ptr[n]] and writes optr[0..n].
    check("orient the graph", unsafe {
        s.launch_builder(gpu.function("orient_counts")?)
            .arg(&ptr)
            .arg(&adj)
            .arg(&n32)
            .arg(&mut optr)
            .launch(rows)
    })?;
    exclusive_scan(gpu, s, &mut optr, n as u64 + 1, "the oriented row lengths")?;
    let oriented = read_at(s, &optr, n, "the oriented edge count")?;
    if 2 * oriented != col_idx.len() as u64 {
        return Err(Error::Invalid(format!(
            "the adjacency is not symmetric: {oriented} oriented edges from {} entries",
            col_idx.len()
        )));
    }
    let mut oadj = uninit::<u32>(s, oriented as usize, poison, "the oriented adjacency")?;
    // SAFETY: as above; each row u writes oadj[optr[u]..optr[u + 1]].
    check("orient the graph", unsafe {
        s.launch_builder(gpu.function("orient_fill")?)
            .arg(&ptr)
            .arg(&adj)
            .arg(&n32)
            .arg(&optr)
            .arg(&mut oadj)
            .launch(rows)
    })?;
    check("orient the graph", s.synchronize())?;
    out.orient_seconds = start.elapsed().as_secs_f64();
    drop((ptr, adj));

    let mut next_row = zeros::<u64>(s, 1, "the row counter")?;
    let mut heavy_count = zeros::<u32>(s, 1, "the heavy row count")?;
    let mut next_heavy = zeros::<u32>(s, 1, "the heavy row counter")?;
    let mut total = zeros::<u64>(s, 1, "the triangle count")?;
    let mut heavy_rows = uninit::<u32>(
        s,
        (oriented / (WARP_ROW + 1) + 1).min(n as u64) as usize,
        poison,
        "the heavy row list",
    )?;
    let mut counts = match per_vertex {
        true => Some(zeros::<u64>(s, n, "the per-vertex counts")?),
        false => None,
    };
    // A null pointer tells the kernels not to count per vertex.
    let null: u64 = 0;
    let light = shape(gpu.multiprocessors() as u64 * 8, THREADS, 0)?;
    let stage = "count triangles (light rows)";
    // SAFETY: reads optr[0..=n] and oadj; writes at most one heavy_rows entry per row longer
    // than WARP_ROW (there are at most oriented / (WARP_ROW + 1) of them), and the counters.
    check(stage, unsafe {
        let mut b = s.launch_builder(gpu.function("triangles_light")?);
        b.arg(&optr)
            .arg(&oadj)
            .arg(&n32)
            .arg(&mut next_row)
            .arg(&mut heavy_rows)
            .arg(&mut heavy_count)
            .arg(&mut total);
        match counts.as_mut() {
            Some(c) => b.arg(c),
            None => b.arg(&null),
        };
        b.launch(light)
    })?;
    let dynamic = gpu.shared_per_block().saturating_sub(HEAVY_STATIC_SHARED);
    let fits = (dynamic / 4).min(u32::MAX as u64) as u32;
    let cap = tuning.heavy_shared_cap.map_or(fits, |c| c.min(fits));
    let heavy = shape(gpu.multiprocessors() as u64 * 2, HEAVY_THREADS, dynamic)?;
    let stage = "count triangles (heavy rows)";
    // SAFETY: reads the heavy rows the light kernel listed; a row of at most `cap` entries is
    // copied into the `dynamic` bytes of shared memory.
    check(stage, unsafe {
        let mut b = s.launch_builder(gpu.function("triangles_heavy")?);
        b.arg(&optr)
            .arg(&oadj)
            .arg(&heavy_rows)
            .arg(&heavy_count)
            .arg(&mut next_heavy)
            .arg(&cap)
            .arg(&mut total);
        match counts.as_mut() {
            Some(c) => b.arg(c),
            None => b.arg(&null),
        };
        b.launch(heavy)
    })?;
    out.triangles = read_at(s, &total, 0, "the triangle count")?;
    out.device_seconds = start.elapsed().as_secs_f64();
    if let Some(c) = counts {
        out.per_vertex = Some(check(
            "copy the per-vertex counts to the host",
            s.clone_dtoh(&c.slice(0..n)),
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launch constants above must be the kernels' own.
    #[test]
    fn constants_match_the_kernels() {
        let src = include_str!("../../kernels/triangles.cu");
        for (name, value) in [
            ("TRI_THREADS", THREADS as u64),
            ("TRI_WARP_ROW", WARP_ROW),
            ("TRI_HEAVY_THREADS", HEAVY_THREADS as u64),
        ] {
            assert!(
                src.contains(&format!("#define {name} {value}\n")),
                "{name} is not {value} in kernels/triangles.cu"
            );
        }
    }
}
