//! How fast the staged copies ([`super::transfer`]) move data between host and device, against
//! a plain copy from and to page-locked memory in the same run (`gmcl bench transfer`). Every
//! copy is checked against its source; no time counts before the data arrived intact.

use super::prims::check;
use super::transfer::{download, download_append, upload_into};
use super::Gpu;
use crate::error::{Error, Result};
use serde::Serialize;
use std::time::Instant;

/// Median rates in GB/s (10^9 bytes a second) of one size of copy.
#[derive(Clone, Debug, Serialize)]
pub struct TransferRates {
    /// Bytes each copy moved.
    pub bytes: u64,
    /// Timed copies of each kind (after one warm-up), whose median is given.
    pub repeat: usize,
    /// A page-locked host buffer to the device: one DMA, the bus's own rate.
    pub pinned_up: f64,
    /// The device to a page-locked host buffer.
    pub pinned_down: f64,
    /// A pageable host vector to the device through the staging buffers (every upload).
    pub staged_up: f64,
    /// The device to a host vector whose pages are already mapped, through the staging buffers.
    pub staged_down_mapped: f64,
    /// The device to a new host vector (pages mapped as they are written), as a product's
    /// download lands.
    pub staged_down_fresh: f64,
}

impl TransferRates {
    /// Each staged rate as a share of the plain pinned rate in its direction:
    /// `(up, down into mapped pages, down into fresh pages)`.
    pub fn shares(&self) -> (f64, f64, f64) {
        (
            self.staged_up / self.pinned_up,
            self.staged_down_mapped / self.pinned_down,
            self.staged_down_fresh / self.pinned_down,
        )
    }
}

/// Measures every kind of copy of `bytes` bytes (rounded down to 4-byte words, at least one),
/// `repeat` times each after a warm-up.
pub fn measure(gpu: &Gpu, bytes: usize, repeat: usize) -> Result<TransferRates> {
    if repeat == 0 {
        return Err(Error::Invalid(
            "a transfer measure needs at least one run".into(),
        ));
    }
    let n = (bytes / 4).max(1);
    let stage = "measure the copies";
    let s = &gpu.main;
    // Never all zeros: every word differs from its neighbours and from the poison.
    let source: Vec<u32> = (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) | 1)
        .collect();
    // SAFETY: every element is written by the first upload before anything reads it.
    let mut dev = check(stage, unsafe { s.alloc::<u32>(n) })?;
    let timed = |copy: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        copy()?;
        let mut secs = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            let t = Instant::now();
            copy()?;
            secs.push(t.elapsed().as_secs_f64());
        }
        secs.sort_by(f64::total_cmp);
        Ok((4 * n) as f64 / secs[repeat / 2] / 1e9)
    };
    let intact = |got: &[u32], what: &str| match got == source.as_slice() {
        true => Ok(()),
        false => Err(Error::gpu(
            stage,
            format!("{what}: the copy differs from its source"),
        )),
    };

    let staged_up = timed(&mut || {
        upload_into(gpu, s, &source, &mut dev, "the measured words")?;
        check(stage, s.synchronize())
    })?;
    // Each download is checked once (into poisoned memory, which also checks the uploads
    // before it), then timed.
    let mut mapped = vec![u32::MAX; n];
    mapped.clear();
    download_append(gpu, s, &dev, n, "the measured words", &mut mapped)?;
    intact(&mapped, "a staged download")?;
    let staged_down_mapped = timed(&mut || {
        mapped.clear();
        download_append(gpu, s, &dev, n, "the measured words", &mut mapped)
    })?;
    drop(mapped);
    intact(
        &download(gpu, s, &dev, n, "the measured words")?,
        "a staged download into new memory",
    )?;
    let staged_down_fresh =
        timed(&mut || download(gpu, s, &dev, n, "the measured words").map(drop))?;
    // SAFETY: the buffer is written by the first download before it is read.
    let mut pinned = check(stage, unsafe { gpu.ctx.alloc_pinned::<u32>(n) })?;
    let host = check(stage, pinned.as_mut_slice())?;
    host.fill(u32::MAX);
    let pinned_down = timed(&mut || {
        check(stage, s.memcpy_dtoh(&dev, &mut *host))?;
        check(stage, s.synchronize())
    })?;
    intact(host, "a download into pinned memory")?;
    let pinned_up = timed(&mut || {
        check(stage, s.memcpy_htod(&*host, &mut dev))?;
        check(stage, s.synchronize())
    })?;
    Ok(TransferRates {
        bytes: 4 * n as u64,
        repeat,
        pinned_up,
        pinned_down,
        staged_up,
        staged_down_mapped,
        staged_down_fresh,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_copy_arrives_intact_and_is_timed() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        // Past one staging buffer, so the pieces alternate between the two.
        let r = measure(&gpu, 80 << 20, 1).unwrap();
        assert_eq!(r.bytes, 80 << 20);
        for rate in [
            r.pinned_up,
            r.pinned_down,
            r.staged_up,
            r.staged_down_mapped,
            r.staged_down_fresh,
        ] {
            assert!(rate.is_finite() && rate > 0.0);
        }
        assert!(measure(&gpu, 4, 0).is_err());
    }
}
