//! Pruning of one expanded column, as mcl 22-282 does it (its default, heap-based selection).
//!
//! For a column `v` just made by expansion:
//!
//! 1. **Threshold.** Keep the entries `>= 0.99999 / P` (none dropped when `P = 0`).
//! 2. **Recovery.** If fewer than `R` entries are kept and their mass is under `pct`%, go back to
//!    the whole column and keep, besides the entries over the threshold, the `R − kept` largest
//!    of those under it (all of them when the column has at most `R` entries).
//! 3. **Selection.** Otherwise, if more than `S` entries are kept, keep the `S` largest; if that
//!    leaves fewer than `R` entries with mass under `pct`%, recover from the thresholded column
//!    the `R − selected` largest of the entries selection dropped.
//! 4. **Rescale** the kept entries to sum to one.
//!
//! "The `k` largest" keeps every entry equal to the `k`-th largest value too (mcl compares with
//! that value as a bar), so ties never make the result depend on the entries' order.
//! The column's chaos, `(max − Σv²) · kept`, uses the maximum and the sum of squares of the
//! expanded column before pruning, as mcl computes it.

use crate::error::{Error, Result};
use crate::quantized;
use crate::scalar::Scalar;
use crate::spgemm::cpu::compact::append_at_least;

/// mcl's preset resource schemes 1..7: `(P, S, R, pct)`.
const SCHEMES: [(u32, u32, u32, u32); 7] = [
    (3000, 400, 500, 90),
    (4000, 500, 600, 90),
    (5000, 600, 700, 90),
    (6000, 700, 800, 90),
    (7000, 800, 900, 90),
    (10000, 1100, 1400, 90),
    (10000, 1200, 1600, 90),
];

/// The pruning parameters of mcl: `-P`, `-S`, `-R` and `-pct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PruneParams {
    /// `P`: entries under `0.99999 / P` are dropped first (0: no threshold).
    pub prune: u32,
    /// `S`: at most this many entries are selected (0: no selection).
    pub select: u32,
    /// `R`: recovery brings a column back up to this many entries (0: no recovery).
    pub recover: u32,
    /// `pct`: recovery happens when the kept mass is under this percentage (0..=99).
    pub pct: u32,
}

impl Default for PruneParams {
    /// mcl's default, scheme 6: P 10000, S 1100, R 1400, pct 90.
    fn default() -> Self {
        let (prune, select, recover, pct) = SCHEMES[5];
        PruneParams {
            prune,
            select,
            recover,
            pct,
        }
    }
}

impl PruneParams {
    /// The values of mcl's `-scheme k`, for `k` in 1..=7.
    pub fn scheme(k: u32) -> Result<PruneParams> {
        match k {
            1..=7 => {
                let (prune, select, recover, pct) = SCHEMES[k as usize - 1];
                Ok(PruneParams {
                    prune,
                    select,
                    recover,
                    pct,
                })
            }
            _ => Err(Error::Invalid(format!(
                "unknown scheme {k}: mcl's schemes are 1 to 7"
            ))),
        }
    }

    /// Checks the ranges mcl accepts: `pct` under 100.
    pub fn validate(&self) -> Result<()> {
        if self.pct >= 100 {
            return Err(Error::Invalid(format!(
                "--pct {} is out of range: it must be 0 to 99",
                self.pct
            )));
        }
        Ok(())
    }

    /// The threshold of step 1: `0.99999 / P`, or 0 when `P = 0`.
    pub fn cutoff(&self) -> f64 {
        if self.prune == 0 {
            0.0
        } else {
            0.99999 / self.prune as f64
        }
    }
}

/// What pruning one column did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ColumnPrune {
    /// `(max − Σv²) · kept`, from the expanded column's maximum and sum of squares.
    pub chaos: f64,
    /// Entries kept.
    pub kept: usize,
}

/// Reusable buffers for [`prune_column`], one per thread.
#[derive(Default)]
pub struct Scratch<T> {
    /// The entries over the threshold, in column order.
    cols: Vec<u32>,
    vals: Vec<T>,
    /// Values being selected from (reordered).
    values: Vec<T>,
}

/// The `k`-th largest of `vals` (1-based `k`, `1 <= k <= vals.len()`); reorders `vals`.
fn kth_largest<T: Scalar>(vals: &mut [T], k: usize) -> T {
    let idx = k - 1;
    let (_, v, _) = vals.select_nth_unstable_by(idx, |a, b| b.total_cmp(a));
    *v
}

/// The `k`-th largest of the values of `vals` that pass `keep`.
fn kth_largest_where<T: Scalar>(
    vals: &[T],
    keep: impl Fn(T) -> bool,
    k: usize,
    scratch: &mut Vec<T>,
) -> T {
    scratch.clear();
    scratch.extend(vals.iter().copied().filter(|&v| keep(v)));
    kth_largest(scratch, k)
}

/// `Σ v` over `vals`, summed as [`quantized`] sums are: the same in any order, and on every
/// engine.
fn mass<T: Scalar>(vals: &[T]) -> f64 {
    quantized::sum(vals.iter().map(|v| v.to_f64()))
}

/// The column's maximum, `Σv²` and the entries `>= cutoff`, compacted into `scratch` in order.
/// The sum of squares is a [`quantized`] sum, so its four lanes (a fourth of the latency chain)
/// add up to what any other order gives.
fn first_pass<T: Scalar>(
    cols: &[u32],
    vals: &[T],
    cutoff: T,
    scratch: &mut Scratch<T>,
) -> (f64, f64) {
    let n = cols.len().min(vals.len());
    scratch.cols.clear();
    scratch.vals.clear();
    append_at_least(cols, vals, cutoff, &mut scratch.cols, &mut scratch.vals);
    let (mut mx, mut sq) = ([0.0f64; 4], [0.0f64; 4]);
    let chunks = vals[..n].chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..4 {
            let x = c[l].to_f64();
            sq[l] += quantized::quantum(x * x);
            mx[l] = if x > mx[l] { x } else { mx[l] };
        }
    }
    for (l, v) in rest.iter().enumerate() {
        let x = v.to_f64();
        sq[l] += quantized::quantum(x * x);
        mx[l] = if x > mx[l] { x } else { mx[l] };
    }
    let maxval = mx.iter().fold(0.0f64, |a, &b| if b > a { b } else { a });
    (maxval, (sq[0] + sq[1]) + (sq[2] + sq[3]))
}

/// Prunes the expanded column `(cols, vals)` of node `self_col`, appends the kept entries
/// (rescaled to sum to one, in column order) to `out_cols`/`out_vals`, and reports its chaos and
/// size. An empty result without recovery gets mcl's "emergency" loop: `(self_col, 1)`.
///
/// Work is one pass over the column (maximum, sum of squares, and the entries over the
/// threshold compacted), then only over the thresholded entries unless recovery reaches under
/// the threshold; every comparison and every sum the kept values depend on is the one a
/// straightforward loop in column order makes, so the result does not depend on this layout.
#[allow(clippy::too_many_arguments)]
pub fn prune_column<T: Scalar>(
    cols: &[u32],
    vals: &[T],
    self_col: u32,
    params: &PruneParams,
    cutoff: T,
    out_cols: &mut Vec<u32>,
    out_vals: &mut Vec<T>,
    scratch: &mut Scratch<T>,
) -> ColumnPrune {
    let n = vals.len();
    let (maxval, center) = first_pass(cols, vals, cutoff, scratch);
    let recover = params.recover as usize;
    let select = params.select as usize;
    let pct = params.pct as f64 / 100.0;

    // Step 1: the threshold (the entries over it are in `scratch`).
    let n_kept = scratch.vals.len();
    if recover == 0 && n_kept == 0 {
        out_cols.push(self_col);
        out_vals.push(T::ONE);
        return ColumnPrune {
            chaos: maxval - center,
            kept: 1,
        };
    }
    // The bar every kept entry passes (entries >= bar are kept).
    let mut bar = cutoff;
    if recover > 0 && n_kept < recover && mass(&scratch.vals) < pct {
        // Step 2: recover the largest entries under the threshold.
        bar = if n > recover {
            kth_largest_where(vals, |v| v < cutoff, recover - n_kept, &mut scratch.values)
        } else {
            T::ZERO
        };
    } else if select > 0 && n_kept > select {
        // Step 3: select the S largest of the thresholded column.
        scratch.values.clear();
        scratch.values.extend_from_slice(&scratch.vals);
        let sbar = kth_largest(&mut scratch.values, select);
        // `values` holds the thresholded entries (reordered), and sbar >= cutoff.
        let n_sel = scratch.values.iter().filter(|&&v| v >= sbar).count();
        bar = sbar;
        if recover > 0 && n_sel < recover {
            let mass_sel = quantized::sum(
                scratch
                    .vals
                    .iter()
                    .filter(|&&v| v >= sbar)
                    .map(|v| v.to_f64()),
            );
            if mass_sel < pct {
                bar = if n_kept > recover {
                    kth_largest_where(
                        &scratch.vals,
                        |v| v < sbar,
                        recover - n_sel,
                        &mut scratch.values,
                    )
                } else {
                    cutoff
                };
            }
        }
    }
    let start = out_vals.len();
    if bar >= cutoff {
        append_at_least(&scratch.cols, &scratch.vals, bar, out_cols, out_vals);
    } else {
        append_at_least(cols, vals, bar, out_cols, out_vals);
    }
    let kept_mass = mass(&out_vals[start..]);
    if kept_mass != 0.0 {
        for v in &mut out_vals[start..] {
            *v = T::from_f64(v.to_f64() / kept_mass);
        }
    }
    let kept = out_vals.len() - start;
    ColumnPrune {
        chaos: (maxval - center) * kept as f64,
        kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(vals: &[f64], p: PruneParams) -> (Vec<u32>, Vec<f64>, ColumnPrune) {
        let cols: Vec<u32> = (0..vals.len() as u32).collect();
        let (mut oc, mut ov) = (Vec::new(), Vec::new());
        let r = prune_column(
            &cols,
            vals,
            99,
            &p,
            p.cutoff(),
            &mut oc,
            &mut ov,
            &mut Scratch::default(),
        );
        (oc, ov, r)
    }

    fn params(prune: u32, select: u32, recover: u32, pct: u32) -> PruneParams {
        PruneParams {
            prune,
            select,
            recover,
            pct,
        }
    }

    #[test]
    fn schemes_match_mcl() {
        assert_eq!(PruneParams::scheme(6).unwrap(), PruneParams::default());
        assert_eq!(PruneParams::scheme(1).unwrap(), params(3000, 400, 500, 90));
        assert_eq!(
            PruneParams::scheme(7).unwrap(),
            params(10000, 1200, 1600, 90)
        );
        assert!(PruneParams::scheme(0).is_err());
        assert!(PruneParams::scheme(8).is_err());
        assert!(params(1, 1, 1, 100).validate().is_err());
        assert!(params(1, 1, 1, 99).validate().is_ok());
    }

    #[test]
    fn threshold_drops_small_entries_and_rescales() {
        // P = 10: cutoff 0.099999; no selection, no recovery.
        let (c, v, r) = run(&[0.5, 0.05, 0.3, 0.15], params(10, 0, 0, 90));
        assert_eq!(c, vec![0, 2, 3]);
        let s: f64 = v.iter().sum();
        assert!((s - 1.0).abs() < 1e-12);
        assert!((v[0] - 0.5 / 0.95).abs() < 1e-12);
        assert_eq!(r.kept, 3);
        let center = 0.25 + 0.0025 + 0.09 + 0.0225;
        assert!((r.chaos - (0.5 - center) * 3.0).abs() < 1e-12);
    }

    #[test]
    fn selection_keeps_the_largest_and_ties() {
        let (c, _, r) = run(&[0.1, 0.4, 0.2, 0.2, 0.1], params(0, 2, 0, 90));
        assert_eq!(c, vec![1, 2, 3]); // the 2nd largest is 0.2, which two entries have
        assert_eq!(r.kept, 3);
    }

    #[test]
    fn recovery_after_threshold() {
        // cutoff 0.2 keeps 0.5 only (mass 0.5 < 0.9); R = 3 brings back the 2 largest below.
        let vals = [0.5, 0.15, 0.05, 0.19, 0.11];
        let (c, _, _) = run(&vals, params(5, 0, 3, 90));
        assert_eq!(c, vec![0, 1, 3]);
        // A column no longer than R comes back whole.
        let (c, _, _) = run(&vals, params(5, 0, 5, 90));
        assert_eq!(c, vec![0, 1, 2, 3, 4]);
        // Enough mass kept: no recovery.
        let (c, _, _) = run(&vals, params(5, 0, 3, 40));
        assert_eq!(c, vec![0]);
    }

    #[test]
    fn recovery_after_selection() {
        // No threshold; S = 1 keeps 0.3 (mass 0.3 < 0.9); R = 3 recovers the 2 largest dropped.
        let vals = [0.3, 0.25, 0.2, 0.15, 0.1];
        let (c, _, _) = run(&vals, params(0, 1, 3, 90));
        assert_eq!(c, vec![0, 1, 2]);
        // R larger than the thresholded column: everything over the threshold comes back.
        let (c, _, _) = run(&vals, params(8, 1, 10, 90));
        assert_eq!(c, vec![0, 1, 2, 3]);
    }

    #[test]
    fn emergency_loop_without_recovery() {
        let (c, v, r) = run(&[0.01, 0.02], params(2, 0, 0, 90));
        assert_eq!((c, v), (vec![99], vec![1.0]));
        assert_eq!(r.kept, 1);
    }

    /// The straightforward pruning (one loop per step, in column order) that
    /// [`prune_column`] must equal.
    #[allow(clippy::too_many_arguments)]
    fn reference<T: Scalar>(
        cols: &[u32],
        vals: &[T],
        self_col: u32,
        params: &PruneParams,
        cutoff: T,
        out_cols: &mut Vec<u32>,
        out_vals: &mut Vec<T>,
        scratch: &mut Vec<T>,
    ) -> ColumnPrune {
        let (mut maxval, mut center) = (0.0f64, 0.0f64);
        for &v in vals {
            let x = v.to_f64();
            center += x * x;
            if x > maxval {
                maxval = x;
            }
        }
        let n = vals.len();
        let recover = params.recover as usize;
        let select = params.select as usize;
        let pct = params.pct as f64 / 100.0;

        // Step 1: the threshold.
        let (mut n_kept, mut mass) = (0usize, 0.0f64);
        for &v in vals {
            if v >= cutoff {
                n_kept += 1;
                mass += v.to_f64();
            }
        }
        // The bar every kept entry passes (entries >= bar are kept).
        let mut bar = cutoff;
        if recover == 0 && n_kept == 0 {
            out_cols.push(self_col);
            out_vals.push(T::ONE);
            return ColumnPrune {
                chaos: maxval - center,
                kept: 1,
            };
        }
        if recover > 0 && n_kept < recover && mass < pct {
            // Step 2: recover the largest entries under the threshold.
            bar = if n > recover {
                kth_largest_where(vals, |v| v < cutoff, recover - n_kept, scratch)
            } else {
                T::ZERO
            };
        } else if select > 0 && n_kept > select {
            // Step 3: select the S largest of the thresholded column.
            scratch.clear();
            scratch.extend(vals.iter().copied().filter(|&v| v >= cutoff));
            let sbar = kth_largest(scratch, select);
            let (mut n_sel, mut mass_sel) = (0usize, 0.0f64);
            for &v in vals {
                if v >= sbar {
                    n_sel += 1;
                    mass_sel += v.to_f64();
                }
            }
            bar = sbar;
            if recover > 0 && n_sel < recover && mass_sel < pct {
                bar = if n_kept > recover {
                    kth_largest_where(vals, |v| v >= cutoff && v < sbar, recover - n_sel, scratch)
                } else {
                    cutoff
                };
            }
        }
        let start = out_vals.len();
        let mut kept_mass = 0.0f64;
        for (&c, &v) in cols.iter().zip(vals) {
            if v >= bar {
                out_cols.push(c);
                out_vals.push(v);
                kept_mass += v.to_f64();
            }
        }
        if kept_mass != 0.0 {
            for v in &mut out_vals[start..] {
                *v = T::from_f64(v.to_f64() / kept_mass);
            }
        }
        let kept = out_vals.len() - start;
        ColumnPrune {
            chaos: (maxval - center) * kept as f64,
            kept,
        }
    }

    /// A column of `n` values from `seed`: many ties (values on a coarse grid) and a spread
    /// around the threshold, so every step and tie rule happens.
    fn column(n: usize, seed: u64, grid: u32) -> Vec<f32> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let u = (rng.next_u64() % grid as u64) as f32 / grid as f32;
                // Between 1e-6 and 1, log-uniform-ish.
                (-(u * 13.8)).exp()
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        #[test]
        fn equals_the_reference(
            n in 0usize..3000, seed in proptest::prelude::any::<u64>(), grid in 2u32..5000,
            prune in 0u32..20000, select in 0u32..1500, recover in 0u32..1800, pct in 0u32..100,
        ) {
            let vals = column(n, seed, grid);
            let cols: Vec<u32> = (0..n as u32).map(|c| c * 3 + 1).collect();
            let p = params(prune, select, recover, pct);
            let cutoff = p.cutoff() as f32;
            let (mut ac, mut av, mut bc, mut bv) = (vec![7], vec![0.5f32], vec![7], vec![0.5f32]);
            let a = prune_column(&cols, &vals, 5, &p, cutoff, &mut ac, &mut av, &mut Scratch::default());
            let b = reference(&cols, &vals, 5, &p, cutoff, &mut bc, &mut bv, &mut Vec::new());
            proptest::prop_assert_eq!(ac, bc);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            proptest::prop_assert_eq!(bits(&av), bits(&bv));
            proptest::prop_assert_eq!(a.kept, b.kept);
            // The sum of squares is summed in another order: equal within rounding.
            proptest::prop_assert!((a.chaos - b.chaos).abs() <= 1e-12 * (1.0 + b.chaos.abs()));
        }
    }
}
