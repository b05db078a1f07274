//! [`super::is_symmetric_without_loops`] on the GPU (kernels/symmetry.cu), for a pattern a
//! caller has uploaded anyway: each entry looked up by a thread instead of the host's pass,
//! whose random reads of the rows bound it on large graphs.

use crate::error::Result;
use crate::gpu::prims::{check, launch, strided, zeros};
use crate::gpu::Gpu;
use cudarc::driver::{CudaSlice, PushKernelArg};

/// Whether the square pattern of `n` rows `(ptr, cols)` on the device holds no `(i, i)` and holds
/// `(j, i)` for every `(i, j)`; the same pattern requirements as
/// [`super::is_symmetric_without_loops`] (offsets from 0 not decreasing, columns below `n`, each
/// row strictly increasing). Runs on the GPU's main stream and waits for it.
pub fn is_symmetric_without_loops_on(
    gpu: &Gpu,
    ptr: &CudaSlice<u64>,
    cols: &CudaSlice<u32>,
    n: usize,
) -> Result<bool> {
    let s = &gpu.main;
    let mut counts = zeros::<u64>(s, 3, "the symmetry check's counts")?;
    if n > 0 {
        let n64 = n as u64;
        let per_entry = strided(gpu, cols.len() as u64, 256);
        launch(gpu, s, "mirror_check", per_entry, |l| {
            l.arg(ptr).arg(cols).arg(&n64).arg(&mut counts);
        })?;
    }
    let [bad, checked, others] = check("check the pattern's symmetry", s.clone_dtoh(&counts))?[..]
    else {
        unreachable!("three counts were allocated")
    };
    Ok(bad == 0 && checked == others)
}

#[cfg(test)]
mod tests {
    use super::super::symmetry::tests::pattern;
    use super::*;
    use crate::gpu::transfer::upload;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn on_gpu(gpu: &Gpu, ptr: &[u64], cols: &[u32]) -> bool {
        let s = &gpu.main;
        let d_ptr = upload(gpu, s, ptr, "offsets").unwrap();
        let d_cols = upload(gpu, s, cols, "columns").unwrap();
        is_symmetric_without_loops_on(gpu, &d_ptr, &d_cols, ptr.len() - 1).unwrap()
    }

    #[test]
    fn the_gpu_decides_as_the_host_does() {
        let Some(gpu) = crate::gpu::for_tests() else {
            return;
        };
        // A hub joined to every vertex, and a ring: symmetric, rows of every length.
        let n = 300u32;
        let mut sym = BTreeSet::new();
        for v in 1..n {
            sym.extend([(0, v), (v, 0), (v, v % (n - 1) + 1), (v % (n - 1) + 1, v)]);
        }
        let (ptr, cols) = pattern(n as usize, &sym);
        assert!(super::super::is_symmetric_without_loops(&ptr, &cols));
        assert!(on_gpu(&gpu, &ptr, &cols));
        // One mirror missing (in the hub's row, and in a short row), a loop, a mirror moved.
        for (drop, add) in [
            (Some((0, 7)), None),
            (Some((7, 0)), None),
            (None, Some((5, 5))),
            (Some((3, 4)), Some((3, 9))),
        ] {
            let mut e = sym.clone();
            drop.map(|d| e.remove(&d));
            add.map(|a| e.insert(a));
            let (ptr, cols) = pattern(n as usize, &e);
            assert!(!super::super::is_symmetric_without_loops(&ptr, &cols));
            assert!(!on_gpu(&gpu, &ptr, &cols), "{drop:?} {add:?}");
        }
        assert!(on_gpu(&gpu, &[0], &[]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn random_patterns(n in 1usize..40, pairs in prop::collection::vec((0u32..40, 0u32..40), 0..120), mirror in any::<bool>()) {
            let Some(gpu) = crate::gpu::for_tests() else {
                return Ok(());
            };
            let mut e = BTreeSet::new();
            for (i, j) in pairs {
                let (i, j) = (i % n as u32, j % n as u32);
                e.insert((i, j));
                if mirror && i != j {
                    e.insert((j, i));
                }
            }
            let (ptr, cols) = pattern(n, &e);
            prop_assert_eq!(
                on_gpu(&gpu, &ptr, &cols),
                super::super::is_symmetric_without_loops(&ptr, &cols)
            );
        }
    }
}
