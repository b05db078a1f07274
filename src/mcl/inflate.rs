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
/// zero (every entry underflowed): mcl then empties the column, and so must the caller. The sum
/// is order-free at the scale of the largest power ([`quantized::ColumnScale`]: at a high `r`
/// the powers lie far below the fixed quanta of MCL's other sums), as the GPU kernels make it.
pub fn inflate<T: Scalar>(vals: &mut [T], r: f64) -> bool {
    if vals.is_empty() {
        return true;
    }
    let mut largest = 0.0f64;
    if r == 2.0 {
        // The default inflation: `x·x` is the correctly rounded square (for an `f32`, exact in
        // `f64`, and what `powf(2.0)` returns: checked for every positive `f32` up to 1), at a
        // fraction of the cost of `pow`, and the same on the GPU, whose `pow` is not glibc's.
        for v in vals.iter_mut() {
            let x = v.to_f64();
            *v = T::from_f64(x * x);
            largest = largest.max(v.to_f64());
        }
    } else {
        for v in vals.iter_mut() {
            *v = T::from_f64(v.to_f64().powf(r));
            largest = largest.max(v.to_f64());
        }
    }
    let Some(scale) = quantized::ColumnScale::new(largest, vals.len() as u64) else {
        return false;
    };
    let sum = scale.value(vals.iter().map(|v| scale.quanta(v.to_f64())).sum());
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
        // Raise every entry by `powf` (rounded to f32), sum, divide.
        for v in b.iter_mut() {
            *v = (*v as f64).powf(2.0) as f32;
        }
        let largest = b.iter().fold(0.0f64, |m, &v| m.max(v as f64));
        let scale = quantized::ColumnScale::new(largest, b.len() as u64).unwrap();
        let sum = scale.value(b.iter().map(|&v| scale.quanta(v as f64)).sum());
        for v in b.iter_mut() {
            *v = (*v as f64 / sum) as f32;
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
    }

    /// At a high inflation the powers lie far below 2^-52: the column still sums to one as
    /// mcl's `double` sum makes it (karate's first column at -I 20 summed to 0.92 with fixed
    /// quanta, and columns whose powers were near 10^-20 to nearly 0).
    #[test]
    fn high_inflation_divides_by_the_powers_sum() {
        for r in [16.0, 20.0, 30.0] {
            let col = [0.2188f32, 0.125, 0.0625, 0.0313, 0.02, 0.011, 0.5375];
            let mut v = col;
            assert!(inflate(&mut v, r));
            let powers: Vec<f64> = col
                .iter()
                .map(|&x| (x as f64).powf(r) as f32 as f64)
                .collect();
            let sum: f64 = powers.iter().sum();
            for (got, p) in v.iter().zip(&powers) {
                assert_eq!(*got, (p / sum) as f32, "r {r}");
            }
            let total: f64 = v.iter().map(|&x| x as f64).sum();
            assert!((total - 1.0).abs() < 1e-6, "r {r}: {total}");
            let mut tiny = [1e-3f64, 2e-3, 5e-4];
            assert!(inflate(&mut tiny, r));
            assert!((tiny.iter().sum::<f64>() - 1.0).abs() < 1e-12, "r {r}");
        }
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
