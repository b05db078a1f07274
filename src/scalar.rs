//! The value types a matrix can hold: `f32` and `f64`.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul};

/// A matrix value type. Implemented for `f32` and `f64` only.
pub trait Scalar:
    Copy
    + Send
    + Sync
    + Default
    + Debug
    + PartialEq
    + PartialOrd
    + Add<Output = Self>
    + AddAssign
    + Mul<Output = Self>
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + 'static
{
    /// The additive identity.
    const ZERO: Self;
    /// The multiplicative identity.
    const ONE: Self;
    /// "f32" or "f64".
    const NAME: &'static str;
    /// The 32-bit words of one value's bits (1 for `f32`, 2 for `f64`), as exchanges carry it.
    const WORDS: usize;
    /// Converts from `f64`, rounding to nearest.
    fn from_f64(x: f64) -> Self;
    /// Converts to `f64` exactly.
    fn to_f64(self) -> f64;
    /// The larger of two values (`other` wins ties; no NaN reaches a matrix).
    fn max_of(self, other: Self) -> Self;
    /// The smallest integer not below `self`.
    fn ceil(self) -> Self;
    /// A total order, so that sorting entries with equal columns is deterministic.
    fn total_cmp(&self, other: &Self) -> std::cmp::Ordering;
    /// Appends the shortest decimal text that reads back as the same value.
    fn write_to(self, out: &mut Vec<u8>);
    /// The value's bits, in the low [`Scalar::WORDS`] words.
    fn to_bits64(self) -> u64;
    /// The value of [`Scalar::to_bits64`]'s bits.
    fn from_bits64(bits: u64) -> Self;
}

macro_rules! impl_scalar {
    ($t:ty, $name:literal, $bits:ty) => {
        impl Scalar for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAME: &'static str = $name;
            const WORDS: usize = std::mem::size_of::<$t>() / 4;
            #[inline]
            fn to_bits64(self) -> u64 {
                u64::from(self.to_bits())
            }
            #[inline]
            fn from_bits64(bits: u64) -> Self {
                <$t>::from_bits(bits as $bits)
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline]
            fn max_of(self, other: Self) -> Self {
                if self > other {
                    self
                } else {
                    other
                }
            }
            #[inline]
            fn total_cmp(&self, other: &Self) -> std::cmp::Ordering {
                <$t>::total_cmp(self, other)
            }
            #[inline]
            fn write_to(self, out: &mut Vec<u8>) {
                if self == self.trunc() && self.abs() < 1e15 {
                    // Integral values print as integers ("3", not "3.0"): shorter files, and
                    // what mcl and GraphBLAS print too.
                    let mut b = itoa::Buffer::new();
                    out.extend_from_slice(b.format(self as i64).as_bytes());
                } else {
                    let mut b = ryu::Buffer::new();
                    out.extend_from_slice(b.format(self).as_bytes());
                }
            }
        }
    };
}

impl_scalar!(f32, "f32", u32);
impl_scalar!(f64, "f64", u64);

#[cfg(test)]
mod tests {
    use super::*;

    fn text<T: Scalar>(x: T) -> String {
        let mut v = Vec::new();
        x.write_to(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn writes_round_trip_text() {
        assert_eq!(text(3.0f64), "3");
        assert_eq!(text(-2.0f32), "-2");
        assert_eq!(text(0.1f64), "0.1");
        assert_eq!(text(0.1f32), "0.1");
        assert_eq!(text(1e20f64), "1e20");
        let x = 1.0f64 / 3.0;
        assert_eq!(text(x).parse::<f64>().unwrap(), x);
    }

    #[test]
    fn max_and_order() {
        assert_eq!(2.0f64.max_of(3.0), 3.0);
        assert_eq!(Scalar::total_cmp(&1.0f32, &2.0), std::cmp::Ordering::Less);
    }
}
