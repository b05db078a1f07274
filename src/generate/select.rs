//! Taking edges off the candidate stream: the first M accepted candidates, or the first M
//! distinct ones. Rounds of blocks are drawn until enough are found; round sizes only change how
//! much is drawn past the answer, never the answer, which depends on the stream alone.

use super::sort::{keep_first_new, key, merge};
use super::stream::{Batch, Rmat, BLOCK};
use crate::error::{Error, Result};
use rayon::prelude::*;

/// After this many stream positions with nothing accepted the parameters are taken to be unable
/// to give the edges asked for.
const STALL: u64 = 1 << 24;

/// A round of at least this many candidates with no new distinct edge means the distinct edges
/// within reach are (nearly) exhausted.
const STALL_DISTINCT: u64 = 1 << 22;

/// At most this many blocks (2^25 candidates, about 0.1 to 0.5 s of drawing) per round, so that
/// an interrupt is seen promptly ([`crate::interrupt`]).
const ROUND_BLOCKS: u64 = (1 << 25) / BLOCK as u64;

/// Room for `m` edges (and weights), or a clear error when memory cannot be had.
fn reserve(out: &mut Batch, m: u64) -> Result<()> {
    let no_memory = |_| {
        Error::Invalid(format!(
            "cannot generate {m} edges: not enough memory to hold them"
        ))
    };
    let m = usize::try_from(m).map_err(|_| no_memory(()))?;
    out.edges.try_reserve_exact(m).map_err(|_| no_memory(()))?;
    if let Some(w) = &mut out.weights {
        w.try_reserve_exact(m).map_err(|_| no_memory(()))?;
    }
    Ok(())
}

/// Stream positions after which generation gives up: 1000 per requested edge, plus 2^26.
fn position_cap(m: u64) -> u64 {
    m.saturating_mul(1000).saturating_add(1 << 26)
}

/// Where the drawing stands.
struct Cursor {
    next_block: u64,
    positions: u64,
    accepted: u64,
    cap_blocks: u64,
}

impl Cursor {
    fn new(m: u64) -> Self {
        Cursor {
            next_block: 0,
            positions: 0,
            accepted: 0,
            cap_blocks: position_cap(m).div_ceil(BLOCK as u64),
        }
    }

    /// Blocks to draw for about `want` accepted candidates, between 1 and `max_blocks`;
    /// `None` once the position cap is reached.
    fn plan(&self, want: f64, max_blocks: u64) -> Option<u64> {
        let left = self.cap_blocks.saturating_sub(self.next_block);
        if left == 0 {
            return None;
        }
        let acceptance = if self.positions == 0 {
            1.0
        } else {
            (self.accepted as f64 / self.positions as f64).max(1e-9)
        };
        let b = (want / acceptance / BLOCK as f64).ceil();
        // `as` saturates: a huge or infinite estimate becomes u64::MAX, then the clamps apply.
        let b = if b >= 1.0 { b as u64 } else { 1 };
        Some(b.min(max_blocks).min(left).max(1))
    }

    fn take(&mut self, rm: &Rmat, blocks: u64) -> Batch {
        let batch = rm.blocks(self.next_block, blocks);
        self.next_block += blocks;
        self.positions += blocks * BLOCK as u64;
        self.accepted += batch.edges.len() as u64;
        batch
    }

    /// The error for a stream that cannot give `m` edges.
    fn stuck(&self, m: u64, got: u64, distinct: bool) -> Error {
        let what = if distinct { " distinct" } else { "" };
        Error::Invalid(format!(
            "cannot generate {m}{what} edges: only {got} came out of the first {} R-MAT draws \
             ({} of them usable); with these probabilities, this vertex count and these options \
             the generator rarely or never makes more. Lower the edge count, raise the scale or \
             vertex count, or change a/b/c{}",
            self.positions,
            self.accepted,
            if distinct {
                ", or allow duplicate edges"
            } else {
                ""
            }
        ))
    }
}

/// The first `m` accepted candidates of the stream.
pub(crate) fn first_accepted(rm: &Rmat, m: u64) -> Result<Batch> {
    let mut cur = Cursor::new(m);
    let mut out = Batch {
        edges: Vec::new(),
        weights: rm.has_weights().then(Vec::new),
    };
    reserve(&mut out, m)?;
    while (out.edges.len() as u64) < m {
        crate::interrupt::check()?;
        let need = m - out.edges.len() as u64;
        if cur.positions >= STALL && cur.accepted == 0 {
            return Err(cur.stuck(m, 0, false));
        }
        // The first round assumes every draw is accepted (exact when none can be rejected);
        // later rounds use the acceptance seen so far, with a small margin.
        let want = if cur.positions == 0 {
            need as f64
        } else {
            need as f64 * 1.02 + 1024.0
        };
        let max_blocks =
            (need.div_ceil(BLOCK as u64).max(STALL / BLOCK as u64) * 4).min(ROUND_BLOCKS);
        let Some(nb) = cur.plan(want, max_blocks) else {
            return Err(cur.stuck(m, out.edges.len() as u64, false));
        };
        let batch = cur.take(rm, nb);
        let take = batch.edges.len().min(need as usize);
        out.edges.extend_from_slice(&batch.edges[..take]);
        if let (Some(w), Some(bw)) = (&mut out.weights, &batch.weights) {
            w.extend_from_slice(&bw[..take]);
        }
    }
    Ok(out)
}

/// The model of how many distinct edges a number of accepted draws gives: a cell whose path
/// takes `na, nb, nc, nd` quadrants a, b, c, d has probability `a^na b^nb c^nc d^nd`, and there
/// are `k! / (na! nb! nc! nd!)` such cells. Each class of cells is kept as (count, ln(1 - q)),
/// with q a cell's probability among the allowed ones. Ids redrawn for vertex counts that are
/// not powers of two are not modelled.
struct DistinctModel {
    classes: Vec<(f64, f64)>,
}

impl DistinctModel {
    fn new(rm: &Rmat) -> Self {
        let k = rm.k as usize;
        let [a, b, c, d] = rm.probs;
        let mut ln_fact = vec![0.0f64; k + 1];
        for i in 1..=k {
            ln_fact[i] = ln_fact[i - 1] + (i as f64).ln();
        }
        let pw = |x: f64, n: usize| if n == 0 { 1.0 } else { x.powi(n as i32) };
        // Self loops are the paths of a and d alone.
        let diag: f64 = (0..=k)
            .map(|na| {
                (ln_fact[k] - ln_fact[na] - ln_fact[k - na]).exp() * pw(a, na) * pw(d, k - na)
            })
            .sum();
        let z = if rm.no_self_loops { 1.0 - diag } else { 1.0 };
        let mut classes = Vec::new();
        if z <= 0.0 {
            return DistinctModel { classes };
        }
        let mut add = |count: f64, q: f64| {
            if q > 0.0 {
                classes.push((count, (-(q / z).min(1.0)).ln_1p()));
            }
        };
        for na in 0..=k {
            for nb in 0..=k - na {
                for nc in 0..=k - na - nb {
                    let nd = k - na - nb - nc;
                    let diagonal = nb == 0 && nc == 0;
                    if diagonal && rm.no_self_loops {
                        continue;
                    }
                    let count =
                        (ln_fact[k] - ln_fact[na] - ln_fact[nb] - ln_fact[nc] - ln_fact[nd]).exp();
                    let p = pw(a, na) * pw(b, nb) * pw(c, nc) * pw(d, nd);
                    if !rm.undirected || diagonal {
                        add(count, p);
                    } else if nb < nc {
                        // A pair {u, v} is one cell here and its mirror in (na, nc, nb, nd).
                        add(count, p + pw(a, na) * pw(b, nc) * pw(c, nb) * pw(d, nd));
                    } else if nb == nc {
                        add(count / 2.0, 2.0 * p);
                    }
                }
            }
        }
        DistinctModel { classes }
    }

    /// The expected number of distinct edges among `draws` accepted draws.
    fn expected(&self, draws: f64) -> f64 {
        self.classes
            .iter()
            .map(|&(count, ln_miss)| -count * (draws * ln_miss).exp_m1())
            .sum()
    }

    /// Accepted draws that give `m` distinct edges with a few standard deviations to spare (so
    /// a second round seldom happens); at least `m`.
    fn draws_for(&self, m: u64) -> f64 {
        let m = m as f64;
        let target = m + 4.0 * m.sqrt() + 64.0;
        let (mut lo, mut hi) = (m, m * 1.05 + 1024.0);
        while self.expected(hi) < target {
            lo = hi;
            hi *= 2.0;
            if hi > m * 1e4 {
                // The model's cells run out: leave it to the rounds and the caps.
                return m * 1.1 + 1024.0;
            }
        }
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if self.expected(mid) < target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }
}

/// The first `m` distinct edges of the stream, in the order of their first occurrence, each
/// with the weight of its first occurrence.
pub(crate) fn first_distinct(rm: &Rmat, m: u64) -> Result<Batch> {
    // At most 2^25 candidates per round bounds the memory a round takes (about 1 GB).
    let max_blocks = ROUND_BLOCKS;
    let mut cur = Cursor::new(m);
    let mut out = Batch {
        edges: Vec::new(),
        weights: rm.has_weights().then(Vec::new),
    };
    let mut seen: Vec<u64> = Vec::new();
    // The first round draws what the model says gives m distinct edges with a margin.
    let model = DistinctModel::new(rm);
    let mut want = model.draws_for(m);
    // Rounds after the first grow at most fourfold, so a stream that stops giving new edges
    // is noticed after a bounded amount of work.
    let mut round_max = max_blocks;
    while (out.edges.len() as u64) < m {
        crate::interrupt::check()?;
        let need = m - out.edges.len() as u64;
        if cur.positions >= STALL && cur.accepted == 0 {
            return Err(cur.stuck(m, 0, true));
        }
        let Some(nb) = cur.plan(want, round_max) else {
            return Err(cur.stuck(m, out.edges.len() as u64, true));
        };
        round_max = (nb * 4).clamp(16, max_blocks);
        let mut batch = cur.take(rm, nb);
        let candidates = batch.edges.len() as u64;
        let found = keep_first_new(&mut batch, rm.k, &seen, need);
        if found == 0 && candidates >= STALL_DISTINCT {
            return Err(cur.stuck(m, out.edges.len() as u64, true));
        }
        let took = batch.edges.len() as u64;
        if took < need {
            // Every new edge of this round was kept: they join the seen set.
            let mut keys: Vec<u64> = batch.edges.par_iter().map(|&(u, v)| key(u, v)).collect();
            keys.par_sort_unstable();
            seen = if seen.is_empty() {
                keys
            } else {
                merge(&seen, &keys)
            };
            let rate = found as f64 / candidates.max(1) as f64;
            want = (need - took) as f64 / rate.max(1e-9) * 1.25 + BLOCK as f64;
        }
        if out.edges.is_empty() {
            out = batch;
        } else {
            out.edges.extend_from_slice(&batch.edges);
            if let (Some(w), Some(bw)) = (&mut out.weights, &batch.weights) {
                w.extend_from_slice(bw);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::RmatParams;
    use std::collections::HashSet;

    #[test]
    fn distinct_model_matches_the_stream() {
        for (scale, draws, undirected, no_self_loops, abc) in [
            (12u32, 100_000u64, false, false, (0.57, 0.19, 0.19)),
            (12, 100_000, true, true, (0.57, 0.19, 0.19)),
            (10, 300_000, true, false, (0.45, 0.15, 0.3)),
            (16, 200_000, false, true, (0.25, 0.25, 0.25)),
        ] {
            let mut p = RmatParams::new(scale, draws);
            (p.a, p.b, p.c) = abc;
            p.undirected = undirected;
            p.no_self_loops = no_self_loops;
            let rm = Rmat::new(&p);
            let el = crate::generate::generate(&p).unwrap();
            let got = el.edges.iter().collect::<HashSet<_>>().len() as f64;
            let model = DistinctModel::new(&rm);
            let want = model.expected(draws as f64);
            assert!((got / want - 1.0).abs() < 0.01, "{p:?}: {got} vs {want}");
            // The first round's size gives the count asked for, by the model.
            let m = got as u64;
            let d = model.draws_for(m);
            assert!(d >= m as f64 && model.expected(d) >= m as f64);
        }
    }
}
