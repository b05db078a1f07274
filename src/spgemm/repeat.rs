//! Repeated products for benchmarks: the same product made several times, each checked equal
//! to the first, with the median of each time.

use super::ProductStats;
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::measure::median;
use crate::scalar::Scalar;
use rayon::prelude::*;

/// Multiplies `repeat` times (after a warm-up product when more than once), freeing each product
/// before the next as a fresh process would start without it; returns the last product with
/// the median of each time ([`crate::measure::median`]). Products that differ (which would be a
/// bug) are an error, and so is a `repeat` of 0.
pub fn multiply_repeatedly<T: Scalar>(
    repeat: usize,
    mut product: impl FnMut() -> Result<(Csr<T>, ProductStats)>,
) -> Result<(Csr<T>, ProductStats)> {
    if repeat == 0 {
        return Err(Error::Invalid("repeat must be at least 1".into()));
    }
    let warm_up = usize::from(repeat > 1);
    // `repeat` comes from the user: the list of times grows as runs finish rather than being
    // reserved up front, and the count with the warm-up must not overflow.
    let Some(runs) = repeat.checked_add(warm_up) else {
        return Err(Error::Invalid(format!("repeat {repeat} is too large")));
    };
    let mut times = Vec::new();
    let mut first: Option<ProductFingerprint> = None;
    let mut last = None;
    for run in 0..runs {
        drop(last.take());
        let (c, stats) = product()?;
        // A single product has nothing to be compared with (and C may be tens of GB).
        if runs > 1 {
            let print = ProductFingerprint::of(&c);
            match &first {
                None => first = Some(print),
                Some(f) if !f.matches(&print) => {
                    return Err(Error::Invalid(
                        "repeated products differ: please report this as a bug".into(),
                    ))
                }
                Some(_) => {}
            }
        }
        if run >= warm_up {
            times.push((stats.seconds, stats.device_seconds));
        }
        last = Some((c, stats));
    }
    let Some((c, mut stats)) = last else {
        return Err(Error::Invalid("repeat must be at least 1".into()));
    };
    // `times` holds `repeat` runs, so each median exists.
    let median_of =
        |f: fn(&(f64, f64)) -> f64| median(&times.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0);
    stats.seconds = median_of(|t| t.0);
    stats.device_seconds = median_of(|t| t.1);
    Ok((c, stats))
}

/// What repeated products are compared by without keeping two of them: the structure exactly
/// (a hash of offsets and columns), the values by their sum (the GPU engine's float atomics may
/// add in another order, so the values may differ within rounding).
pub struct ProductFingerprint {
    nnz: usize,
    structure: u64,
    value_sum: f64,
    value_abs_sum: f64,
}

impl ProductFingerprint {
    /// The fingerprint of `c`.
    pub fn of<T: Scalar>(c: &Csr<T>) -> Self {
        let mix = |h: u64, x: u64| (h ^ x).wrapping_mul(0x100_0000_01b3).rotate_left(29);
        let rows = c
            .row_ptr()
            .par_chunks(1 << 16)
            .map(|ch| ch.iter().fold(0u64, |h, &x| mix(h, x)));
        let cols = c
            .col_idx()
            .par_chunks(1 << 16)
            .map(|ch| ch.iter().fold(0u64, |h, &x| mix(h, x as u64)));
        let structure = rows
            .chain(cols)
            .collect::<Vec<u64>>()
            .into_iter()
            .fold(0xcbf2_9ce4_8422_2325, mix);
        let (value_sum, value_abs_sum) = c
            .values()
            .par_iter()
            .map(|v| (v.to_f64(), v.to_f64().abs()))
            .reduce(|| (0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
        Self {
            nnz: c.nnz(),
            structure,
            value_sum,
            value_abs_sum,
        }
    }

    /// Whether two products are the same: equal structure, value sums equal within a relative
    /// 1e-4 of the larger absolute sum.
    pub fn matches(&self, other: &Self) -> bool {
        let scale = self
            .value_abs_sum
            .max(other.value_abs_sum)
            .max(f64::MIN_POSITIVE);
        self.nnz == other.nnz
            && self.structure == other.structure
            && (self.value_sum - other.value_sum).abs() <= 1e-4 * scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_count_that_overflows_with_its_warm_up_is_an_error() {
        let r = multiply_repeatedly::<f64>(usize::MAX, || panic!("no product is made"));
        assert!(matches!(r, Err(Error::Invalid(m)) if m.contains("too large")));
    }
}
