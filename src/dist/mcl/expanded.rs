//! Each column's entries before pruning in the next expansion, estimated before any row moves.
//!
//! An expansion's time on a GPU follows the entries its columns hold before pruning (each is
//! pruned from them) more than their products: in the first iteration a hub's column sums many
//! long rows that overlap, so its products far exceed its entries, while a leaf's few hub
//! neighbours make a long column from few rows. Counting the entries exactly is the symbolic
//! product itself, on rows other ranks hold. Instead every row's set of columns is summarised
//! in a HyperLogLog sketch of [`REGISTERS`] bytes, every rank gathers all the sketches, and a
//! column's entries are estimated from the union (register-wise maximum) of the sketches of the
//! rows it names. A column's estimate strays by about a fifth; a block's sum, over many
//! columns, less (hubs named by many columns make their errors alike): enough to cut blocks
//! of about equal work.

use crate::csr::Csr;
use crate::dist::Comm;
use crate::scalar::Scalar;
use rayon::prelude::*;

/// Registers (one byte each) in a row's sketch: a power of two.
const REGISTERS: usize = 32;

/// The bits of a hash that pick its register.
const INDEX_BITS: u32 = REGISTERS.trailing_zeros();

type Sketch = [u8; REGISTERS];

/// The estimated entries of each of the block `m`'s rows of `M·M` (its rows are `Mᵀ`'s rows of
/// this rank's nodes, in rank order, naming all `m.ncols()` nodes): for row `j`, the distinct
/// columns of the rows it names. `None`, on every rank alike, where every node's sketch would
/// take more than `most_bytes` (one gather carries them all: see
/// [`crate::dist::MAX_MESSAGE`]). Collective; every rank's estimates are the ones a single
/// process would make for the same rows.
pub(super) fn expanded_per_row<T: Scalar>(
    comm: &dyn Comm,
    m: &Csr<T>,
    most_bytes: usize,
) -> Option<Vec<u64>> {
    if m.ncols().saturating_mul(REGISTERS) > most_bytes {
        return None;
    }
    let own = row_sketches(m);
    // Every node's sketch, in node order (the blocks are in rank order), read where gathered.
    let (all, _) = comm.all_gather_bytes(own.as_flattened());
    drop(own);
    let estimates = (0..m.nrows())
        .into_par_iter()
        .with_min_len(256)
        .map(|i| {
            let mut union = [0u8; REGISTERS];
            for &k in m.row(i).0 {
                let at = k as usize * REGISTERS;
                // A row beyond the gathered ones (a malformed block) adds nothing.
                if let Some(s) = all.get(at..at + REGISTERS) {
                    merge(&mut union, s);
                }
            }
            estimate(&union).round() as u64
        })
        .collect();
    Some(estimates)
}

/// Each of `m`'s rows summarised: the sketch of its set of columns.
fn row_sketches<T: Scalar>(m: &Csr<T>) -> Vec<Sketch> {
    (0..m.nrows())
        .into_par_iter()
        .with_min_len(256)
        .map(|i| {
            let mut s = [0u8; REGISTERS];
            for &c in m.row(i).0 {
                add(&mut s, u64::from(c));
            }
            s
        })
        .collect()
}

/// Adds `item` to the sketch `s`.
fn add(s: &mut Sketch, item: u64) {
    let h = mix(item);
    let index = (h >> (64 - INDEX_BITS)) as usize;
    // The position of the first set bit of the rest, from 1 (all zeros: one past the last).
    let rest = h << INDEX_BITS;
    let rank = (rest.leading_zeros().min(64 - INDEX_BITS) + 1) as u8;
    s[index] = s[index].max(rank);
}

/// `into` becomes the sketch of the union of its set and `other`'s.
fn merge(into: &mut Sketch, other: &[u8]) {
    for (a, &b) in into.iter_mut().zip(other) {
        *a = (*a).max(b);
    }
}

/// The distinct items a sketch has seen, estimated by Ertl's improved estimator (2017, "New
/// cardinality estimation algorithms for HyperLogLog sketches"), unbiased from empty sets to
/// large ones, where the classic harmonic mean overshoots small sets.
fn estimate(s: &Sketch) -> f64 {
    let m = REGISTERS as f64;
    // Registers take 0 (nothing seen) to `top`, all of a hash's remaining bits zero.
    let top = (64 - INDEX_BITS + 1) as usize;
    let mut counts = [0u32; 66];
    for &r in s {
        counts[usize::from(r).min(top)] += 1;
    }
    let mut z = m * tau(1.0 - f64::from(counts[top]) / m);
    for k in (1..top).rev() {
        z = 0.5 * (z + f64::from(counts[k]));
    }
    z += m * sigma(f64::from(counts[0]) / m);
    m * m / (2.0 * std::f64::consts::LN_2) / z
}

/// Ertl's σ(x) = x + Σₖ x^(2ᵏ) 2^(k−1): the empty registers' term (infinite when all are).
fn sigma(mut x: f64) -> f64 {
    if x >= 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// Ertl's τ(x) = (1 − x − Σₖ (1 − x^(2⁻ᵏ))² 2⁻ᵏ) / 3: the full registers' term.
fn tau(mut x: f64) -> f64 {
    if x <= 0.0 || x >= 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// A 64-bit finaliser (SplitMix64's): every bit of the node id spread over the hash.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::on_ranks;
    use crate::dist::{SelfComm, MAX_MESSAGE};

    /// A symmetric R-MAT graph's rows with a loop on every node, as MCL's start matrix.
    fn start_rows(scale: u32, seed: u64) -> Csr<f32> {
        let mut p = crate::generate::RmatParams::new(scale, 8 << scale);
        p.seed = seed;
        p.undirected = true;
        let el = crate::generate::generate(&p).unwrap();
        let n = 1usize << scale;
        let mut rows: Vec<Vec<u32>> = (0..n as u32).map(|v| vec![v]).collect();
        for &(u, v) in &el.edges {
            rows[u as usize].push(v);
        }
        for r in &mut rows {
            r.sort_unstable();
            r.dedup();
        }
        let mut ptr = vec![0u64];
        let mut cols = Vec::new();
        for r in &rows {
            cols.extend_from_slice(r);
            ptr.push(cols.len() as u64);
        }
        let vals = vec![1.0f32; cols.len()];
        Csr::from_parts_unchecked(n, n, ptr, cols, vals)
    }

    /// Each row's exact entries of `M·M`: the distinct columns of the rows it names.
    fn exact(m: &Csr<f32>) -> Vec<u64> {
        let mut seen = vec![usize::MAX; m.ncols()];
        (0..m.nrows())
            .map(|i| {
                let mut count = 0;
                for &k in m.row(i).0 {
                    for &c in m.row(k as usize).0 {
                        if seen[c as usize] != i {
                            seen[c as usize] = i;
                            count += 1;
                        }
                    }
                }
                count
            })
            .collect()
    }

    #[test]
    fn small_sets_are_counted_about_exactly_and_large_ones_within_a_quarter() {
        for size in [1u64, 2, 3, 5, 8] {
            let mut s = [0u8; REGISTERS];
            (0..size).for_each(|v| add(&mut s, v * 7919));
            let e = estimate(&s);
            assert!((e - size as f64).abs() <= 0.5 * size as f64, "{size}: {e}");
        }
        // Adding an item twice changes nothing; the union is the sketch of both sets.
        let (mut a, mut b, mut both) = ([0u8; REGISTERS], [0u8; REGISTERS], [0u8; REGISTERS]);
        (0..5000u64).for_each(|v| add(&mut a, v));
        (0..5000u64).for_each(|v| add(&mut a, v));
        (3000..9000u64).for_each(|v| add(&mut b, v));
        (0..9000u64).for_each(|v| add(&mut both, v));
        merge(&mut a, &b);
        assert_eq!(a, both);
        // Over many sets of 10,000 the mean estimate is near the truth.
        let mean: f64 = (0..200u64)
            .map(|t| {
                let mut s = [0u8; REGISTERS];
                (0..10_000u64).for_each(|v| add(&mut s, (t << 32) | v));
                estimate(&s)
            })
            .sum::<f64>()
            / 200.0;
        assert!((mean - 10_000.0).abs() < 0.05 * 10_000.0, "mean {mean}");
    }

    /// Blocks' sums of the estimates are within 8% of the exact entries, on one rank
    /// and on several (whose estimates are the single process's).
    #[test]
    fn blocks_of_estimates_follow_the_exact_entries() {
        let m = start_rows(12, 3);
        let truth = exact(&m);
        let one = expanded_per_row(&SelfComm, &m, MAX_MESSAGE).unwrap();
        assert_eq!(one.len(), m.nrows());
        assert!(one.iter().all(|&e| e > 0));
        for blocks in [2usize, 4, 8] {
            let len = m.nrows() / blocks;
            for b in 0..blocks {
                let r = b * len..(b + 1) * len;
                let (t, e) = (
                    truth[r.clone()].iter().sum::<u64>() as f64,
                    one[r].iter().sum::<u64>() as f64,
                );
                assert!(
                    (e - t).abs() < 0.08 * t,
                    "block {b} of {blocks}: {e} against {t}"
                );
            }
        }
        for ranks in 1..=3 {
            let got = on_ranks(ranks, |c| {
                let per = m.nrows().div_ceil(ranks);
                let rows = per * c.rank()..(per * (c.rank() + 1)).min(m.nrows());
                let block = crate::dist::mcl::fetch::round_rows(&m, rows);
                expanded_per_row(c, &block, MAX_MESSAGE).unwrap()
            });
            assert_eq!(got.concat(), one, "{ranks} ranks");
        }
        // Sketches of every node past the bound: no estimates, on any rank.
        let bound = m.ncols() * REGISTERS;
        assert!(expanded_per_row(&SelfComm, &m, bound).is_some());
        let none = on_ranks(2, |c| expanded_per_row(c, &m, bound - 1).is_none());
        assert_eq!(none, vec![true; 2]);
    }
}
