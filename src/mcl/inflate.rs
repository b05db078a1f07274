//! Inflation and normalisation of one column, as mcl does them: each entry raised to the power
//! `r` (rounded to the value type), the column then divided by its sum (a [`quantized`] sum, in
//! `f64`, so that every engine divides by the same value).

use crate::quantized;
use crate::scalar::Scalar;

/// Divides `vals` by their sum, so they sum to one; returns the sum. A column summing to zero
/// (or less) is left as it is.
pub fn normalise<T: Scalar>(vals: &mut [T]) -> f64 {
    let sum: f64 = vals.iter().map(|v| v.to_f64()).sum();
    if sum > 0.0 {
        for v in vals.iter_mut() {
            *v = T::from_f64(v.to_f64() / sum);
        }
    }
    sum
}

/// Raises every entry to the power `r`, then normalises. Returns `false` when the powers sum to
/// zero (every entry underflowed): mcl then empties the column, and so must the caller.
pub fn inflate<T: Scalar>(vals: &mut [T], r: f64) -> bool {
    if vals.is_empty() {
        return true;
    }
    let mut sum = 0.0f64;
    if r == 2.0 {
        // The default inflation: `x·x` is the correctly rounded square (for an `f32`, exact in
        // `f64`, and what `powf(2.0)` returns: checked for every positive `f32` up to 1), at a
        // fraction of the cost of `pow`, and the same on the GPU, whose `pow` is not glibc's.
        for v in vals.iter_mut() {
            let x = v.to_f64();
            *v = T::from_f64(x * x);
            sum += quantized::quantum(v.to_f64());
        }
    } else {
        for v in vals.iter_mut() {
            *v = T::from_f64(v.to_f64().powf(r));
            sum += quantized::quantum(v.to_f64());
        }
    }
    if sum <= 0.0 {
        return false;
    }
    for v in vals.iter_mut() {
        *v = T::from_f64(v.to_f64() / sum);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflation_squares_and_renormalises() {
        let mut v = [0.5f64, 0.25, 0.25];
        assert!(inflate(&mut v, 2.0));
        assert!((v[0] - 0.25 / 0.375).abs() < 1e-12);
        assert!((v[1] - 0.0625 / 0.375).abs() < 1e-12);
        let mut e: [f32; 0] = [];
        assert!(inflate(&mut e, 2.0));
        let mut tiny = [1e-30f32, 1e-30];
        assert!(!inflate(&mut tiny, 30.0));
    }

    #[test]
    fn squares_equal_powf() {
        let mut rng = crate::generate::rng::SplitMix64::new(1);
        let mut a: Vec<f32> = (0..10_000)
            .map(|_| {
                let s = rng.next_u64();
                f32::from_bits((s % 0x3F80_0000) as u32 + 1)
            })
            .collect();
        let mut b = a.clone();
        assert!(inflate(&mut a, 2.0));
        // mcl's order: raise every entry (rounded to f32), sum, divide.
        let mut sum = 0.0f64;
        for v in b.iter_mut() {
            *v = (*v as f64).powf(2.0) as f32;
            sum += quantized::quantum(*v as f64);
        }
        for v in b.iter_mut() {
            *v = (*v as f64 / sum) as f32;
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
    }

    #[test]
    fn normalise_sums_to_one() {
        let mut v = [1.0f32, 3.0];
        assert_eq!(normalise(&mut v), 4.0);
        assert_eq!(v, [0.25, 0.75]);
        let mut z = [0.0f64, 0.0];
        assert_eq!(normalise(&mut z), 0.0);
        assert_eq!(z, [0.0, 0.0]);
    }
}
