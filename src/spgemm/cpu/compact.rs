//! Compaction of dense value runs: the nonzero values of a run of consecutive columns, with
//! their column indices, in column order.
//!
//! This is how the positive-product accumulators ([`super::rows`]) hand out a row (sums of
//! quanta, `f64`): a branch-free scan of every column of the window. Pruning's compaction of the
//! entries over a bar ([`append_at_least`]) takes eight `f32` columns a step with AVX2: one
//! compare, one lookup and two permuted stores.

use crate::scalar::Scalar;
use std::any::TypeId;
use std::mem::MaybeUninit;

/// Spare room the output slices need past the run's length ([`append_at_least`]'s vector path
/// stores whole vectors of 8 entries).
pub(crate) const SLACK: usize = 8;

/// Writes column `base + j` and value `vals[j]` of every nonzero `vals[j]` at
/// `cols[at..]`/`out[at..]`, in order, and returns the new end. Both outputs must have
/// `at + vals.len() + SLACK` entries (the entries past the returned end are left unspecified).
#[inline]
pub(crate) fn nonzero<T: Scalar>(
    vals: &[T],
    base: u32,
    cols: &mut [u32],
    out: &mut [T],
    at: usize,
) -> usize {
    let room = at + vals.len() + SLACK;
    assert!(cols.len() >= room && out.len() >= room);
    // Branch-free: every column is written at the end, which moves on past nonzero ones.
    let mut at = at;
    let (cols, out) = (&mut cols[..at + vals.len()], &mut out[..at + vals.len()]);
    for (j, &v) in vals.iter().enumerate() {
        // SAFETY: `at <= ` the columns seen so far, so `at < ` the length of both slices.
        unsafe {
            *cols.get_unchecked_mut(at) = base + j as u32;
            *out.get_unchecked_mut(at) = v;
        }
        at += (v != T::ZERO) as usize;
    }
    at
}

/// For each 8-bit mask, the positions of its set bits, first to last, then zeros: the
/// permutation that moves the selected lanes of a vector to its front.
#[cfg(target_arch = "x86_64")]
static FRONT: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut bit, mut k) = (0, 0);
        while bit < 8 {
            if m & (1 << bit) != 0 {
                t[m][k] = bit as u32;
                k += 1;
            }
            bit += 1;
        }
        m += 1;
    }
    t
};

/// Appends the entries of `(cols, vals)` whose value is at least `bar` (`v >= bar`, so never a
/// NaN) to `out_cols`/`out_vals`, in order. With AVX2 and `f32`, eight entries take one compare,
/// one lookup and two permuted stores; elsewhere a branch-free loop (whether an entry passes is
/// as good as random, and a branch on it would mispredict about half the time).
pub(crate) fn append_at_least<T: Scalar>(
    cols: &[u32],
    vals: &[T],
    bar: T,
    out_cols: &mut Vec<u32>,
    out_vals: &mut Vec<T>,
) {
    let n = cols.len().min(vals.len());
    out_cols.reserve(n + SLACK);
    out_vals.reserve(n + SLACK);
    let (oc, ov) = (out_cols.spare_capacity_mut(), out_vals.spare_capacity_mut());
    let (oc, ov) = (&mut oc[..n + SLACK], &mut ov[..n + SLACK]);
    let (cols, vals) = (&cols[..n], &vals[..n]);
    // Entries read and written by the vector loop.
    let (mut done, mut o) = (0usize, 0usize);
    #[cfg(target_arch = "x86_64")]
    if TypeId::of::<T>() == TypeId::of::<f32>() && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `T` is `f32` (the same type, so the same layout, and `bar` copies bit for
        // bit); the processor has AVX2; both outputs have `n + SLACK` entries.
        unsafe {
            let vals = std::slice::from_raw_parts(vals.as_ptr() as *const f32, n);
            let ov =
                std::slice::from_raw_parts_mut(ov.as_mut_ptr() as *mut MaybeUninit<f32>, ov.len());
            let bar = std::mem::transmute_copy::<T, f32>(&bar);
            (done, o) = at_least_f32_avx2(cols, vals, bar, oc, ov);
        }
    }
    for (&c, &v) in cols[done..].iter().zip(&vals[done..]) {
        // SAFETY: `o <= ` the entries seen so far `< n`, within both outputs.
        unsafe {
            oc.get_unchecked_mut(o).write(c);
            ov.get_unchecked_mut(o).write(v);
        }
        o += (v >= bar) as usize;
    }
    // SAFETY: the first `o` spare entries of both were written.
    unsafe {
        out_cols.set_len(out_cols.len() + o);
        out_vals.set_len(out_vals.len() + o);
    }
}

/// The vector loop of [`append_at_least`] over whole blocks of 8 entries: returns the entries
/// read and the entries written (the first ones of `oc`/`ov`).
///
/// # Safety
/// The processor must have AVX2; `cols` and `vals` must be equally long, and `oc` and `ov`
/// `SLACK` entries longer.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn at_least_f32_avx2(
    cols: &[u32],
    vals: &[f32],
    bar: f32,
    oc: &mut [MaybeUninit<u32>],
    ov: &mut [MaybeUninit<f32>],
) -> (usize, usize) {
    use std::arch::x86_64::*;
    let n = vals.len();
    assert!(cols.len() == n && oc.len() >= n + SLACK && ov.len() >= n + SLACK);
    let bars = _mm256_set1_ps(bar);
    let mut o = 0usize;
    let blocks = n / 8;
    for b in 0..blocks {
        let v = _mm256_loadu_ps(vals.as_ptr().add(8 * b));
        let c = _mm256_loadu_si256(cols.as_ptr().add(8 * b) as *const __m256i);
        let mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(v, bars)) as usize;
        let perm = _mm256_loadu_si256(FRONT.get_unchecked(mask).as_ptr() as *const __m256i);
        _mm256_storeu_ps(
            ov.as_mut_ptr().add(o) as *mut f32,
            _mm256_permutevar8x32_ps(v, perm),
        );
        _mm256_storeu_si256(
            oc.as_mut_ptr().add(o) as *mut __m256i,
            _mm256_permutevar8x32_epi32(c, perm),
        );
        o += mask.count_ones() as usize;
    }
    (8 * blocks, o)
}

/// A row being handed out of an interleaved accumulator: its columns, values and length.
pub(crate) type Lane<T> = (Vec<u32>, Vec<T>, usize);

/// Appends, for each lane `g < outs.len()` of the interleaved run `slots` (slot `j` holds column
/// `base + j` of every lane), the lane's nonzero entries to `outs[g]` as [`nonzero`] does. Each
/// output needs `SLACK` entries of room past its length plus `slots.len()`.
pub(crate) fn lanes_nonzero<T: Scalar, const L: usize>(
    slots: &[[T; L]],
    base: u32,
    outs: &mut [Lane<T>],
) {
    assert!(outs.len() <= L);
    for (g, (cols, vals, at)) in outs.iter_mut().enumerate() {
        let room = *at + slots.len() + SLACK;
        let (cols, vals) = (&mut cols[..room], &mut vals[..room]);
        let mut o = *at;
        for (j, slot) in slots.iter().enumerate() {
            let v = slot[g];
            // SAFETY: `o <= *at + j < room`, the length of both slices.
            unsafe {
                *cols.get_unchecked_mut(o) = base + j as u32;
                *vals.get_unchecked_mut(o) = v;
            }
            o += (v != T::ZERO) as usize;
        }
        *at = o;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference<T: Scalar>(vals: &[T], base: u32) -> (Vec<u32>, Vec<T>) {
        let mut c = Vec::new();
        let mut v = Vec::new();
        for (j, &x) in vals.iter().enumerate() {
            if x != T::ZERO {
                c.push(base + j as u32);
                v.push(x);
            }
        }
        (c, v)
    }

    fn check<T: Scalar>(vals: &[T], base: u32, at: usize) {
        let room = at + vals.len() + SLACK;
        // Poisoned outputs: whatever is not written must not be read back.
        let mut cols = vec![u32::MAX; room];
        let mut out = vec![T::from_f64(-7.0); room];
        let end = nonzero(vals, base, &mut cols, &mut out, at);
        let (rc, rv) = reference(vals, base);
        assert_eq!(end - at, rc.len());
        assert_eq!(&cols[at..end], &rc[..]);
        assert_eq!(&out[at..end], &rv[..]);
        assert!(
            cols[..at].iter().all(|&c| c == u32::MAX),
            "nothing before `at`"
        );
    }

    #[test]
    fn every_mask_of_eight_columns() {
        for m in 0..256u32 {
            let vals: Vec<f32> = (0..8)
                .map(|b| {
                    if m & (1 << b) != 0 {
                        0.5 + b as f32
                    } else {
                        0.0
                    }
                })
                .collect();
            check(&vals, 100, 3);
            let wide: Vec<f64> = vals.iter().map(|&x| x as f64).collect();
            check(&wide, 100, 0);
        }
    }

    #[test]
    fn runs_of_any_length_and_offset() {
        let mut rng = crate::generate::rng::SplitMix64::new(2);
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 512, 1000] {
            for density in [0u64, 3, 50, 97, 100] {
                let vals: Vec<f32> = (0..len)
                    .map(|_| {
                        let s = rng.next_u64();
                        if s % 100 < density {
                            1e-6 + (s % 1000) as f32
                        } else {
                            0.0
                        }
                    })
                    .collect();
                check(&vals, 12_345, len % 5);
                let wide: Vec<f64> = vals.iter().map(|&x| x as f64).collect();
                check(&wide, 7, 1);
            }
        }
    }

    #[test]
    fn lanes_equal_their_own_compaction() {
        let mut rng = crate::generate::rng::SplitMix64::new(1);
        for len in [0usize, 1, 5, 8, 13, 64, 509, 512] {
            let slots: Vec<[f32; 8]> = (0..len)
                .map(|_| {
                    std::array::from_fn(|g| {
                        let s = rng.next_u64();
                        // Lane g is nonzero with probability g/8.
                        if (s % 8) < g as u64 {
                            (s % 997) as f32 + 0.25
                        } else {
                            0.0
                        }
                    })
                })
                .collect();
            for used in [1usize, 3, 8] {
                let mut outs: Vec<Lane<f32>> = (0..used)
                    .map(|g| {
                        (
                            vec![u32::MAX; g + len + SLACK],
                            vec![-1.0; g + len + SLACK],
                            g,
                        )
                    })
                    .collect();
                lanes_nonzero(&slots, 40, &mut outs);
                for (g, (cols, vals, at)) in outs.iter().enumerate() {
                    let lane: Vec<f32> = slots.iter().map(|x| x[g]).collect();
                    let (rc, rv) = reference(&lane, 40);
                    assert_eq!(*at - g, rc.len());
                    assert_eq!(&cols[g..*at], &rc[..]);
                    assert_eq!(&vals[g..*at], &rv[..]);
                }
                let wide: Vec<[f64; 8]> = slots.iter().map(|x| x.map(|v| v as f64)).collect();
                let mut outs: Vec<Lane<f64>> = (0..used)
                    .map(|_| (vec![0; len + SLACK], vec![0.0; len + SLACK], 0))
                    .collect();
                lanes_nonzero(&wide, 0, &mut outs);
                for (g, (cols, vals, at)) in outs.iter().enumerate() {
                    let lane: Vec<f64> = wide.iter().map(|x| x[g]).collect();
                    assert_eq!(
                        reference(&lane, 0),
                        (cols[..*at].to_vec(), vals[..*at].to_vec())
                    );
                }
            }
        }
    }

    #[test]
    fn at_least_equals_a_filter() {
        let mut rng = crate::generate::rng::SplitMix64::new(3);
        for len in [0usize, 1, 7, 8, 9, 31, 64, 100, 1000] {
            let cols: Vec<u32> = (0..len as u32).map(|c| 3 * c + 1).collect();
            let vals: Vec<f32> = (0..len)
                .map(|_| {
                    let s = rng.next_u64();
                    (s % 1000) as f32 / 1000.0
                })
                .collect();
            for bar in [0.0f32, 0.25, 0.5, 0.999, 2.0] {
                let keep = |v: f64| v >= bar as f64;
                let expect: Vec<(u32, f32)> = cols
                    .iter()
                    .zip(&vals)
                    .filter(|p| keep(*p.1 as f64))
                    .map(|(&c, &v)| (c, v))
                    .collect();
                // Appends after what is there.
                let (mut oc, mut ov) = (vec![7u32], vec![7f32]);
                append_at_least(&cols, &vals, bar, &mut oc, &mut ov);
                assert_eq!(oc.len(), expect.len() + 1);
                assert_eq!((oc[0], ov[0]), (7, 7.0));
                let got: Vec<(u32, f32)> = oc[1..]
                    .iter()
                    .copied()
                    .zip(ov[1..].iter().copied())
                    .collect();
                assert_eq!(got, expect);
                let wide: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
                let (mut wc, mut wv) = (Vec::new(), Vec::new());
                append_at_least(&cols, &wide, bar as f64, &mut wc, &mut wv);
                assert_eq!(wc, expect.iter().map(|p| p.0).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn negative_zero_is_zero_and_tiny_values_are_kept() {
        let vals = [
            -0.0f32,
            f32::MIN_POSITIVE,
            0.0,
            1e-45,
            -0.0,
            0.0,
            0.0,
            3.0,
            0.0,
        ];
        check(&vals, 0, 0);
    }
}
