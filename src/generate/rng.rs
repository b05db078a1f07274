//! gmcl's random numbers. The generator's stream is counter-based: every value is a pure
//! function of the seed and a position, so any thread can produce any part of it.
//! [`SplitMix64`] is the small sequential generator for samples and test data.

/// 2^64 divided by the golden ratio, the usual odd constant for spreading counters.
pub(crate) const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finaliser: a bijective mix of 64 bits (Stafford's variant 13).
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64: a counter stepped by the golden constant, each value the counter mixed by the
/// splitmix64 finaliser. The same seed gives the same values on every machine and run.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator whose first value follows `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix64(self.0)
    }

    /// The next value uniform in [0, 1), with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// wyrand (Wang Yi): a 64-bit state, one 64×64→128-bit multiply per output. Small and fast
/// enough to seed one per block of the stream.
#[derive(Clone, Debug)]
pub(crate) struct WyRand(u64);

impl WyRand {
    /// A generator whose state is `seed` (callers mix the seed first).
    #[inline]
    pub(crate) fn new(seed: u64) -> Self {
        WyRand(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xA076_1D64_78BD_642F);
        let t = (self.0 as u128) * ((self.0 ^ 0xE703_7ED1_A0B4_28DB) as u128);
        ((t >> 64) as u64) ^ (t as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_not_identity_and_spreads_bits() {
        assert_ne!(mix64(0), mix64(1));
        let ones: u32 = (0..1000u64).map(|i| mix64(i).count_ones()).sum();
        // About 32 set bits per output on average.
        assert!((30_000..34_000).contains(&ones), "{ones}");
    }

    #[test]
    fn wyrand_halves_are_uniform() {
        let mut r = WyRand::new(mix64(7));
        let n = 200_000;
        let (mut lo, mut hi) = (0u64, 0u64);
        for _ in 0..n {
            let x = r.next_u64();
            lo += ((x as u32) >> 31) as u64;
            hi += (x >> 63) & 1;
        }
        for c in [lo, hi] {
            let f = c as f64 / n as f64;
            assert!((f - 0.5).abs() < 0.01, "{f}");
        }
    }
}
