//! Sums whose value does not depend on the order of their terms, for MCL.
//!
//! Every term is rounded up to a multiple of 2⁻⁵² (its *quantum*) before it is added. Every
//! multiple of 2⁻⁵² below 2 is an `f64`, so while a sum stays below 2 each partial sum is exact
//! and addition is associative: a sum split over threads, warps, blocks, batches, ranks or
//! engines comes out as one value, bit for bit, whatever the order. MCL's sums stay below 2: its
//! columns sum to one, so an entry of `M²`, a column's mass and its sum of squares are at most 1
//! plus rounding.
//!
//! Rounding *up* keeps a positive term positive, so an accumulator that knows an entry by its
//! value being positive still sees every product. A term moves by less than 2⁻⁵² (2.2·10⁻¹⁶):
//! below what an `f32` entry resolves from 2⁻²⁸ (3.7·10⁻⁹) up, and far below the pruning
//! threshold everywhere. The GPU kernels sum the same quanta as 64-bit integers (`quanta` in
//! kernels/common.cuh), which are the same numbers.
//!
//! That fixed quantum does not suit a sum whose terms may all lie far below it: at a high
//! inflation a column's powers (before they are normalised) can be 10⁻¹⁴ and less, and rounding
//! each up to 2⁻⁵² would change their sum, and so the column, beyond what mcl's `double` sum
//! does. [`ColumnScale`] sums such terms at a quantum scaled to the largest of them.

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

/// Whether mcl makes the products of a column of `M²` exactly: when the column has fewer than
/// a tenth as many intermediate products as the matrix has columns (`n`). mcl 22-282's
/// `mclExpandVector1` (src/mcl/expand.c) then makes each product of two `float`s in `double`
/// (`mclxVectorCompose`), and otherwise rounds each to `float` first (`matrix_vector_array`).
/// Every engine follows the same rule per column, so its values are mcl's wherever an ulp of a
/// product would decide a tie in pruning.
#[inline(always)]
pub fn exact_products(products: u64, n: usize) -> bool {
    products < exact_below(n)
}

/// The product counts below which a column of `M²` (of `n` columns) makes its products
/// exactly ([`exact_products`]): `⌈n / 10⌉`, as the GPU kernels take it (`makes_exact` in
/// kernels/common.cuh).
#[inline(always)]
pub fn exact_below(n: usize) -> u64 {
    (n as u64).div_ceil(10)
}

/// The quanta of the exact product of a [`scaled`] factor and `b`: `⌈(a·2⁵²)·b⌉`, made in
/// `f64`, where the product of two `f32`s is exact (48 significant bits); for `f64` values it
/// is [`count`]`(scaled·b)`. The quanta of [`exact_product`]`(a, b)`.
#[inline(always)]
pub fn count_exact<T: Scalar>(scaled: T, b: T) -> f64 {
    (scaled.to_f64() * b.to_f64()).ceil()
}

/// The product `a·b` made in `f64` (exact for `f32` values), rounded up to a multiple of
/// 2⁻⁵²: the term of a product where [`exact_products`] holds.
#[inline(always)]
pub fn exact_product<T: Scalar>(a: T, b: T) -> f64 {
    quantum(a.to_f64() * b.to_f64())
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

/// An order-free sum of non-negative terms at the scale of their largest, `largest`: each term
/// rounded up to a multiple of the quantum `2^(E + h - 63)`, where `2^E > largest` and `2^h` is
/// at least the number of terms, and the multiples summed as integers. Each is below `2^(63 - h)`,
/// so the sum stays below `2^63` and is exact in a `u64`, whatever the order; a term moves by at
/// most `2^(1 + h - 63)` of the largest. The GPU kernels make the same multiples (`sum_shift`,
/// `quanta_at` in kernels/common.cuh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnScale {
    /// A term's multiples are `⌈x · 2^shift⌉`.
    shift: i32,
}

impl ColumnScale {
    /// The scale for `terms` terms (at least one) whose largest is `largest`; `None` when that is
    /// 0 (every term is 0) or not finite.
    pub fn new(largest: f64, terms: u64) -> Option<Self> {
        if !(largest > 0.0 && largest.is_finite()) {
            return None;
        }
        let h = 64 - terms.max(1).saturating_sub(1).leading_zeros() as i32;
        Some(ColumnScale {
            shift: 62 - ilogb(largest) - h,
        })
    }

    /// `x` (non-negative, at most the largest) in multiples of the quantum, rounded up.
    #[inline(always)]
    pub fn quanta(self, x: f64) -> u64 {
        ldexp(x, self.shift).ceil() as u64
    }

    /// The value of `quanta` multiples of the quantum (one rounding, to `f64`).
    pub fn value(self, quanta: u64) -> f64 {
        ldexp(quanta as f64, -self.shift)
    }
}

/// `⌊log2 x⌋` of a positive finite `x`, subnormals included (C's `ilogb`).
fn ilogb(x: f64) -> i32 {
    let bits = x.to_bits() & !(1u64 << 63);
    match (bits >> 52) as i32 {
        0 => -1074 + 63 - bits.leading_zeros() as i32,
        e => e - 1023,
    }
}

/// `x · 2^k`, rounded once (C's `ldexp`) when the result is below `f64`'s normal range; exact
/// otherwise (short of overflow).
fn ldexp(x: f64, k: i32) -> f64 {
    // 2^k for k in [-1022, 1023].
    let pow2 = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    match k {
        -1022..=1023 => x * pow2(k),
        // Up: each step is exact.
        1024.. => ldexp(x * pow2(1023), k - 1023),
        // Down: the first step (to at least 2^-1000 of x) is exact for the quantities scaled
        // here (at least 1), so only the last step rounds.
        _ => ldexp(x * pow2(-1000), k + 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn column_scales_sum_tiny_terms_exactly_in_any_order() {
        // Powers of 20 of a column's entries: far below 2^-52, where fixed quanta were wrong.
        let xs: Vec<f64> = [0.1f64, 0.09, 0.05, 0.08, 0.07]
            .iter()
            .map(|x| x.powf(20.0))
            .collect();
        let largest = xs.iter().copied().fold(0.0, f64::max);
        let s = ColumnScale::new(largest, xs.len() as u64).unwrap();
        let q: u64 = xs.iter().map(|&x| s.quanta(x)).sum();
        let exact: f64 = xs.iter().sum();
        assert!(
            (s.value(q) - exact).abs() <= exact * 1e-15,
            "{} {exact}",
            s.value(q)
        );
        assert!(
            sum(xs.iter().copied()) > exact * 1.5,
            "the fixed quanta were far off"
        );
        let r: u64 = xs.iter().rev().map(|&x| s.quanta(x)).sum();
        assert_eq!(q, r);
        // Every term the largest and as many as the scale allows: no overflow.
        for n in [1u64, 2, 3, 4, 1000, 1024, 1025, 1 << 20] {
            for m in [1.0, 0.75, 1e-300, 5e-324, 3e300] {
                let s = ColumnScale::new(m, n).unwrap();
                let q = s.quanta(m);
                assert!(q.checked_mul(n).is_some_and(|t| t <= 1 << 63), "{m} {n}");
                let v = s.value(q);
                assert!(
                    v >= m && v <= m * (1.0 + 2f64.powi(-40)) || m < 1e-290,
                    "{m} {n}"
                );
            }
        }
        assert_eq!(ColumnScale::new(0.0, 3), None);
        assert_eq!(ilogb(1.0), 0);
        assert_eq!(ilogb(0.75), -1);
        assert_eq!(ilogb(5e-324), -1074);
        assert_eq!(ilogb(f64::MIN_POSITIVE), -1022);
        assert_eq!(ldexp(1.0, 1100), f64::INFINITY);
        assert_eq!(ldexp(3.0, -1074), 5e-324 * 3.0);
        assert_eq!(ldexp(1.0, -1074), 5e-324);
    }

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
                let e = count_exact(scaled(a), b);
                assert_eq!(e / PER_UNIT, exact_product(a, b), "{a:?} {b:?}");
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

    #[test]
    fn exact_products_are_made_where_mcl_makes_them_and_differ_from_rounded_ones() {
        // mcl's rule: products × 10 < N.
        assert!(exact_products(9, 100));
        assert!(!exact_products(10, 100));
        assert!(!exact_products(0, 0));
        assert!(!exact_products(u64::MAX, usize::MAX));
        for n in 0..1000usize {
            for p in 0..120u64 {
                assert_eq!(exact_products(p, n), p * 10 < n as u64, "{p} {n}");
            }
        }
        // 1/3 · 1/3 in f32 has bits below f32's precision: the exact product keeps them.
        let (a, b) = (1.0f32 / 3.0, 1.0f32 / 3.0);
        let exact = (a as f64) * (b as f64);
        assert_eq!(exact_product(a, b), quantum(exact));
        assert_ne!(exact_product(a, b), product(a, b));
        // In f64 both are the f64 product.
        let (a, b) = (1.0f64 / 3.0, 0.1f64);
        assert_eq!(exact_product(a, b), product(a, b));
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
