//! The candidate stream: position `i` of the stream is one R-MAT draw, a pure function of the
//! seed and `i`. Positions are produced in blocks of [`BLOCK`]; each block runs its own wyrand
//! seeded from (seed, block index), so blocks can be made in any order on any thread.

use super::rng::{mix64, WyRand, GOLDEN};
use super::RmatParams;
use rayon::prelude::*;

/// log2 of the number of stream positions per block.
pub(crate) const BLOCK_BITS: u32 = 16;
/// Stream positions per block.
pub(crate) const BLOCK: usize = 1 << BLOCK_BITS;

/// Accepted candidates of a run of blocks, in stream order, with their weights when asked for.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) edges: Vec<(u32, u32)>,
    pub(crate) weights: Option<Vec<f64>>,
}

/// One block's accepted candidates and their offsets in the block.
type BlockOut = (Vec<(u32, u32)>, Vec<u16>);

/// Levels decided by one table lookup.
const GROUP: u32 = 5;
/// Slots of the largest table, `4^GROUP`.
const SLOTS: usize = 1 << (2 * GROUP);

/// An alias table (Walker/Vose) over the `4^levels` quadrant sequences of `levels` levels, with
/// integer weights out of 2^32, so each sequence's probability is exact to 2^-32. A 32-bit
/// random picks slot `i` with its top `2 * levels` bits; the remaining bits keep the slot's own
/// sequence when below its threshold, else give its alias. A slot packs
/// `threshold << 32 | alias << 16 | own`, a sequence as `source bits << 8 | target bits`.
#[derive(Clone, Debug)]
struct Alias {
    levels: u32,
    slots: Box<[u64; SLOTS]>,
}

impl Alias {
    fn new(levels: u32, p: [f64; 4]) -> Self {
        debug_assert!((1..=GROUP).contains(&levels));
        let n = 1usize << (2 * levels);
        let cap = 1u64 << (32 - 2 * levels);
        let quadrant = |o: usize, j: u32| (o >> (2 * (levels - 1 - j))) & 3;
        let mut w: Vec<u64> = (0..n)
            .map(|o| {
                let pr: f64 = (0..levels).map(|j| p[quadrant(o, j)]).product();
                (pr * 4_294_967_296.0).round() as u64
            })
            .collect();
        // Rounding leaves the total a few units off 2^32: the most likely sequence absorbs it.
        let total: u64 = w.iter().sum();
        let mut imax = 0;
        for (i, &x) in w.iter().enumerate() {
            if x > w[imax] {
                imax = i;
            }
        }
        w[imax] = (w[imax] + (1u64 << 32)).saturating_sub(total);
        let seq = |o: usize| {
            let (mut u, mut v) = (0u64, 0u64);
            for j in 0..levels {
                let q = quadrant(o, j) as u64;
                u = (u << 1) | (q >> 1);
                v = (v << 1) | (q & 1);
            }
            (u << 8) | v
        };
        let mut thr = vec![cap; n];
        let mut alias: Vec<usize> = (0..n).collect();
        let mut small: Vec<usize> = (0..n).filter(|&o| w[o] < cap).collect();
        let mut large: Vec<usize> = (0..n).filter(|&o| w[o] >= cap).collect();
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            large.pop();
            thr[s] = w[s];
            alias[s] = l;
            w[l] -= cap - w[s];
            if w[l] < cap {
                small.push(l);
            } else {
                large.push(l);
            }
        }
        // With exact integer weights whatever is left holds exactly `cap`: it keeps itself.
        let mut slots = Box::new([0u64; SLOTS]);
        for (o, slot) in slots.iter_mut().enumerate().take(n) {
            *slot = (thr[o] << 32) | (seq(alias[o]) << 16) | seq(o);
        }
        Alias { levels, slots }
    }

    /// Appends `levels` bits to the ids, chosen by the 32 random bits `r`.
    #[inline(always)]
    fn step(&self, r: u32, u: &mut u32, v: &mut u32) {
        let idx_bits = 2 * self.levels;
        let i = (r >> (32 - idx_bits)) as usize & (SLOTS - 1);
        let f = (r & ((1u32 << (32 - idx_bits)) - 1)) as u64;
        let s = self.slots[i];
        let o = if f < (s >> 32) { s } else { s >> 16 } as u32;
        *u = (*u << self.levels) | ((o >> 8) & 0xFF);
        *v = (*v << self.levels) | (o & 0xFF);
    }
}

/// The R-MAT sampler with everything precomputed from the parameters.
#[derive(Clone, Debug)]
pub(crate) struct Rmat {
    /// Levels of the recursion: ids are drawn in `0..2^k`.
    pub(crate) k: u32,
    /// Vertices; ids `>= n` are rejected.
    n: u64,
    /// Full groups of [`GROUP`] levels, drawn first (the high bits).
    groups: u32,
    /// The table of a full group.
    full: Alias,
    /// The table of the last `k % GROUP` levels, if any.
    rest: Option<Alias>,
    seed_key: u64,
    weight_key: u64,
    /// a, b, c, d.
    pub(crate) probs: [f64; 4],
    pub(crate) no_self_loops: bool,
    pub(crate) undirected: bool,
    range_check: bool,
    weights: bool,
}

impl Rmat {
    /// The sampler for validated parameters.
    pub(crate) fn new(p: &RmatParams) -> Self {
        let n = p.n_vertices();
        let k = p.gen_scale();
        let probs = [p.a, p.b, p.c, p.d()];
        Rmat {
            k,
            n,
            groups: k / GROUP,
            full: Alias::new(GROUP, probs),
            rest: (k % GROUP > 0).then(|| Alias::new(k % GROUP, probs)),
            probs,
            seed_key: mix64(p.seed ^ 0x5EED_0FC0_FFEE_0000),
            weight_key: mix64(p.seed.wrapping_add(GOLDEN) ^ 0x0057_E1A5_7E16_0000),
            no_self_loops: p.no_self_loops,
            undirected: p.undirected,
            range_check: n < (1u64 << k),
            weights: p.weights,
        }
    }

    /// True when each accepted edge carries a weight.
    pub(crate) fn has_weights(&self) -> bool {
        self.weights
    }

    /// True when every candidate is accepted, so a block yields exactly [`BLOCK`] edges.
    pub(crate) fn accepts_all(&self) -> bool {
        !self.no_self_loops && !self.range_check
    }

    /// The weight of the edge drawn at stream position `pos`: uniform over the 2^23 values
    /// `0.5 + j / 2^23` in `[0.5, 1.5)`, all exact in `f32`.
    #[inline]
    pub(crate) fn weight(&self, pos: u64) -> f64 {
        let r = mix64(self.weight_key ^ pos.wrapping_mul(GOLDEN));
        0.5 + (r >> 41) as f64 * (1.0 / (1u64 << 23) as f64)
    }

    #[inline]
    fn block_rng(&self, block: u64) -> WyRand {
        WyRand::new(mix64(self.seed_key ^ mix64(block.wrapping_mul(GOLDEN))))
    }

    /// The raw draw of the next stream position: one table lookup per [`GROUP`] levels, each on
    /// 32 random bits, two per 64-bit output.
    #[inline(always)]
    fn draw(&self, rng: &mut WyRand) -> (u32, u32) {
        let (mut u, mut v) = (0u32, 0u32);
        let mut left = self.groups;
        while left >= 2 {
            let r = rng.next_u64();
            self.full.step(r as u32, &mut u, &mut v);
            self.full.step((r >> 32) as u32, &mut u, &mut v);
            left -= 2;
        }
        if left == 1 {
            let r = rng.next_u64();
            self.full.step(r as u32, &mut u, &mut v);
            if let Some(t) = &self.rest {
                t.step((r >> 32) as u32, &mut u, &mut v);
            }
        } else if let Some(t) = &self.rest {
            t.step(rng.next_u64() as u32, &mut u, &mut v);
        }
        (u, v)
    }

    /// The draw as it enters the graph: `None` when rejected (an id `>= n`, or a self loop when
    /// those are off), folded to `(min, max)` when undirected.
    #[inline(always)]
    fn accept(&self, (u, v): (u32, u32)) -> Option<(u32, u32)> {
        if self.range_check && (u as u64 >= self.n || v as u64 >= self.n) {
            return None;
        }
        if self.no_self_loops && u == v {
            return None;
        }
        Some(if self.undirected && u > v {
            (v, u)
        } else {
            (u, v)
        })
    }

    /// The accepted candidates of one block with each one's offset in the block (offsets only
    /// when weights are asked for).
    fn block(&self, block: u64) -> BlockOut {
        let mut rng = self.block_rng(block);
        let mut edges = Vec::with_capacity(BLOCK);
        let mut offs = Vec::with_capacity(if self.weights { BLOCK } else { 0 });
        for off in 0..BLOCK {
            if let Some(e) = self.accept(self.draw(&mut rng)) {
                edges.push(e);
                if self.weights {
                    offs.push(off as u16);
                }
            }
        }
        (edges, offs)
    }

    /// The accepted candidates of blocks `first..first + count`, in stream order.
    pub(crate) fn blocks(&self, first: u64, count: u64) -> Batch {
        if self.accepts_all() {
            let len = count as usize * BLOCK;
            let mut edges: Vec<(u32, u32)> = Vec::with_capacity(len);
            edges.spare_capacity_mut()[..len]
                .par_chunks_mut(BLOCK)
                .enumerate()
                .for_each(|(i, chunk)| {
                    let mut rng = self.block_rng(first + i as u64);
                    for slot in chunk {
                        let e = self.accept(self.draw(&mut rng));
                        slot.write(e.unwrap_or_else(|| unreachable!("every draw is accepted")));
                    }
                });
            // SAFETY: the chunks cover the first `len` slots and every slot was written.
            unsafe { edges.set_len(len) };
            let base = first << BLOCK_BITS;
            let weights = self.weights.then(|| {
                (0..len as u64)
                    .into_par_iter()
                    .map(|i| self.weight(base + i))
                    .collect()
            });
            return Batch { edges, weights };
        }
        let parts: Vec<BlockOut> = (first..first + count)
            .into_par_iter()
            .map(|b| self.block(b))
            .collect();
        let edges = concat(parts.iter().map(|p| &p.0[..]).collect());
        let weights = self.weights.then(|| {
            let w: Vec<Vec<f64>> = parts
                .par_iter()
                .enumerate()
                .map(|(i, p)| {
                    let base = (first + i as u64) << BLOCK_BITS;
                    p.1.iter().map(|&o| self.weight(base + o as u64)).collect()
                })
                .collect();
            concat(w.iter().map(|x| &x[..]).collect())
        });
        Batch { edges, weights }
    }
}

/// The concatenation of `parts`, copied in parallel.
pub(crate) fn concat<T: Copy + Send + Sync>(parts: Vec<&[T]>) -> Vec<T> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut out: Vec<T> = Vec::with_capacity(total);
    {
        let mut rest = &mut out.spare_capacity_mut()[..total];
        let mut dsts = Vec::with_capacity(parts.len());
        for p in &parts {
            let (d, r) = std::mem::take(&mut rest).split_at_mut(p.len());
            dsts.push(d);
            rest = r;
        }
        dsts.into_par_iter()
            .zip(parts.par_iter())
            .with_max_len(1)
            .for_each(|(d, s)| {
                for (x, y) in d.iter_mut().zip(s.iter()) {
                    x.write(*y);
                }
            });
    }
    // SAFETY: the destinations tile the first `total` slots and each was fully written.
    unsafe { out.set_len(total) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probability out of 2^32 that `t` gives each packed sequence.
    fn implied(t: &Alias) -> std::collections::HashMap<u64, u64> {
        let n = 1usize << (2 * t.levels);
        let cap = 1u64 << (32 - 2 * t.levels);
        let mut m = std::collections::HashMap::new();
        for &s in &t.slots[..n] {
            let thr = s >> 32;
            assert!(thr <= cap);
            *m.entry(s & 0xFFFF).or_insert(0) += thr;
            *m.entry((s >> 16) & 0xFFFF).or_insert(0) += cap - thr;
        }
        m.retain(|_, w| *w > 0);
        m
    }

    #[test]
    fn alias_tables_give_each_sequence_its_probability() {
        for p in [
            [0.57, 0.19, 0.19, 0.05],
            [0.45, 0.22, 0.22, 0.11],
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.6, 0.2, 0.2, 0.0],
            [0.1, 0.5, 0.3, 0.1],
        ] {
            for levels in 1..=GROUP {
                let t = Alias::new(levels, p);
                let m = implied(&t);
                assert_eq!(m.values().sum::<u64>(), 1 << 32);
                for (&sq, &w) in &m {
                    let (u, v) = (sq >> 8, sq & 0xFF);
                    let mut pr = 1.0;
                    for j in (0..levels).rev() {
                        pr *= p[(((u >> j) & 1) * 2 + ((v >> j) & 1)) as usize];
                    }
                    let want = pr * 4_294_967_296.0;
                    assert!(pr > 0.0, "{p:?} {levels}: impossible sequence {sq:x}");
                    // Each weight is rounded; the most likely sequence absorbs the total's error.
                    let tol = if w as f64 >= want * 0.999 {
                        1 << (2 * levels)
                    } else {
                        1
                    };
                    assert!(
                        (w as f64 - want).abs() <= tol as f64,
                        "{p:?} {levels} {sq:x}"
                    );
                }
            }
        }
    }
}
