//! Sums whose value does not depend on the order of their terms, for MCL.
//!
//! Every term is rounded up to a multiple of 2⁻⁵² (its *quantum*) before it is added. Every
//! multiple of 2⁻⁵² below 2 is an `f64`, so while a sum stays below 2 each partial sum is exact
//! and addition is associative: a sum split over threads, warps, blocks, batches, ranks or
//! engines comes out as one value, bit for bit, whatever the order. MCL's sums stay below 2: its
//! columns sum to one, so an entry of `M²`, a column's mass, its sum of squares and the sum of
//! its inflated entries (inflation above 1) are at most 1 plus rounding.
//!
//! Rounding *up* keeps a positive term positive, so an accumulator that knows an entry by its
//! value being positive still sees every product. A term moves by less than 2⁻⁵² (2.2·10⁻¹⁶):
//! below what an `f32` entry resolves from 2⁻²⁸ (3.7·10⁻⁹) up, and far below the pruning
//! threshold everywhere. The GPU kernels sum the same quanta as 64-bit integers (`quanta` in
//! kernels/common.cuh), which are the same numbers.

use crate::scalar::Scalar;

/// Quanta in one: 2⁵².
pub const PER_UNIT: f64 = 4_503_599_627_370_496.0;

/// `x` (non-negative) rounded up to a multiple of 2⁻⁵².
#[inline(always)]
pub fn quantum(x: f64) -> f64 {
    (x * PER_UNIT).ceil() * (1.0 / PER_UNIT)
}

/// The product `a·b` in `T`'s arithmetic, rounded up to a multiple of 2⁻⁵²: the term every
/// engine adds for one intermediate product of an MCL expansion.
#[inline(always)]
pub fn product<T: Scalar>(a: T, b: T) -> f64 {
    quantum((a * b).to_f64())
}

/// `a` scaled to count in quanta: `a·2⁵²` in `T` (exact for MCL's values, at most 1). For a
/// product `a·b` that is positive in `T`, `⌈(a·2⁵²)·b⌉` counts the quanta of
/// [`product`]`(a, b)`: where `a·b` is normal, rounding commutes with scaling by a power of two,
/// and where it is subnormal both are one quantum. The accumulators that know every product is
/// positive sum these integer counts (exact below 2⁵³), one multiplication and a rounding per
/// product instead of three operations more.
#[inline(always)]
pub fn scaled<T: Scalar>(a: T) -> T {
    a * T::from_f64(PER_UNIT)
}

/// The quanta of a product made from a [`scaled`] factor: `⌈p⌉`, as an `f64`.
#[inline(always)]
pub fn count<T: Scalar>(p: T) -> f64 {
    p.ceil().to_f64()
}

/// The value, rounded to `T`, of a sum of `quanta`.
#[inline(always)]
pub fn value<T: Scalar>(quanta: f64) -> T {
    T::from_f64(quanta * (1.0 / PER_UNIT))
}

/// The sum of the quanta of `xs`.
#[inline]
pub fn sum(xs: impl IntoIterator<Item = f64>) -> f64 {
    xs.into_iter().fold(0.0, |s, x| s + quantum(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quanta_are_rounded_up_multiples() {
        assert_eq!(quantum(0.0), 0.0);
        assert_eq!(quantum(1.0), 1.0);
        assert_eq!(quantum(0.5), 0.5);
        // The smallest positive value becomes one quantum, never zero.
        assert_eq!(quantum(f64::MIN_POSITIVE), 1.0 / PER_UNIT);
        assert_eq!(quantum(1e-300), 1.0 / PER_UNIT);
        let x = 0.1f64;
        let q = quantum(x);
        assert!(q >= x && q - x < 1.0 / PER_UNIT);
        assert_eq!((q * PER_UNIT).fract(), 0.0);
        // An f32 product is rounded in f32 first.
        assert_eq!(product(0.1f32, 0.3f32), quantum((0.1f32 * 0.3f32) as f64));
    }

    /// Counting a scaled product's quanta is the product's quantum, for every positive product:
    /// normal, subnormal, tiny and one.
    fn counts_agree<T: Scalar>(pairs: &[(f64, f64)]) {
        for &(a, b) in pairs {
            let (a, b) = (T::from_f64(a), T::from_f64(b));
            if a * b > T::ZERO {
                let q = count(scaled(a) * b);
                assert_eq!(q / PER_UNIT, product(a, b), "{a:?} {b:?}");
                assert_eq!(value::<T>(q), T::from_f64(product(a, b)));
            }
        }
    }

    #[test]
    fn scaled_products_count_their_quanta() {
        let mut pairs = vec![
            (1.0, 1.0),
            (0.5, 0.25),
            (1e-20, 1e-20),
            (1e-3, 7e-4),
            (1e-38, 0.5),
        ];
        pairs.extend([
            (f32::MIN_POSITIVE as f64, 0.75),
            (1e-45, 1.0),
            (3e-30, 2e-12),
        ]);
        let mut rng = crate::generate::rng::SplitMix64::new(5);
        for _ in 0..20_000 {
            let mut x = || {
                let e = (rng.next_u64() % 60) as i32;
                (rng.next_u64() % 1_000_000 + 1) as f64 / 1e6 * 2f64.powi(-e)
            };
            pairs.push((x(), x()));
        }
        counts_agree::<f32>(&pairs);
        counts_agree::<f64>(&pairs);
    }

    proptest! {
        /// Any order, any grouping: the same bits.
        #[test]
        fn prop_sums_do_not_depend_on_order(
            mut xs in proptest::collection::vec(0.0f64..0.01, 0..200),
            seed in any::<u64>(),
            split in 0usize..200,
        ) {
            let forward = sum(xs.iter().copied());
            let mut rng = crate::generate::rng::SplitMix64::new(seed);
            for i in (1..xs.len()).rev() {
                xs.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let shuffled = sum(xs.iter().copied());
            let at = split.min(xs.len());
            let halves = sum(xs[..at].iter().copied()) + sum(xs[at..].iter().copied());
            prop_assert_eq!(forward.to_bits(), shuffled.to_bits());
            prop_assert_eq!(forward.to_bits(), halves.to_bits());
        }
    }
}
