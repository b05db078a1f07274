//! Figures of a timed run, defined once for the whole crate: the median of repeated times and
//! GFLOP/s of a product.

/// The median (the mean of the two middle values for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Billions of floating-point operations per second of a product: 2 per intermediate product
/// (one multiply, one add); 0 when no time was measured.
pub fn gflops(products: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        2.0 * products as f64 / seconds / 1e9
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn gflops_count_two_flops_per_product() {
        assert!((gflops(500_000_000, 0.5) - 2.0).abs() < 1e-12);
        assert_eq!(gflops(5, 0.0), 0.0);
    }
}
