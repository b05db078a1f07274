//! The orientation every CPU method counts on: GAP's rule for when relabelling by degree pays
//! ([`worth_relabelling`]), and the oriented DAG ([`Oriented`]) that keeps each edge once, from
//! its lower-ranked end to its higher-ranked end, ranks being vertex ids or positions in order
//! of degree.

use super::SimpleGraph;
use crate::generate::rng::SplitMix64;
use rayon::prelude::*;

/// GAP's rule for relabelling by degree (`WorthRelabelling` in its `tc.cc`): only when the
/// graph has at least 10 edges per vertex on average, and the mean of 1000 sampled degrees (of
/// vertices with an edge, drawn with a fixed seed) is more than 1.3 times their median: the
/// sign of a skewed, power-law degree distribution.
pub fn worth_relabelling(g: &SimpleGraph) -> bool {
    let n = g.vertices();
    if n == 0 || g.edges() / (n as u64) < 10 {
        return false;
    }
    let samples = n.min(1000);
    let mut rng = SplitMix64::new(27491095);
    let mut degrees = Vec::with_capacity(samples);
    // Vertices with an edge are at least √(20 n) of n here; the bound on draws only guards
    // against looping long on a huge, nearly empty vertex set.
    for _ in 0..(1000 * samples as u64) {
        if degrees.len() == samples {
            break;
        }
        let v = (rng.next_u64() % n as u64) as usize;
        let d = g.degree(v);
        if d > 0 {
            degrees.push(d as u64);
        }
    }
    if degrees.is_empty() {
        return false;
    }
    degrees.sort_unstable();
    let mean = degrees.iter().sum::<u64>() as f64 / degrees.len() as f64;
    let median = degrees[degrees.len() / 2] as f64;
    mean / 1.3 > median
}

/// Every vertex's rank in the order of (degree, id), high-degree vertices last, and the vertex
/// of each rank: the order the CPU count orients by. A stable counting sort by degree: each chunk of
/// vertices counts its degrees below [`COUNTED_DEGREES`], then places its vertices in id order
/// at its share of each degree's places; the few vertices of higher degree are sorted after.
fn degree_ranks(n: usize, degree: impl Fn(usize) -> u64 + Sync) -> (Vec<u32>, Vec<u32>) {
    let top = (0..n).into_par_iter().map(&degree).max().unwrap_or(0);
    let small = (top + 1).min(COUNTED_DEGREES as u64) as usize;
    let chunks = (rayon::current_num_threads() * 4)
        .clamp(1, 64)
        .min(n.max(1));
    let size = n.div_ceil(chunks).max(1);
    let span = |c: usize| c * size..((c + 1) * size).min(n);
    let hist: Vec<Vec<u32>> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let mut h = vec![0u32; small];
            for v in span(c) {
                if let Some(x) = h.get_mut(degree(v) as usize) {
                    *x += 1;
                }
            }
            h
        })
        .collect();
    // Where each chunk's vertices of each degree start: degree-major, chunk-minor.
    let mut next = vec![vec![0u32; small]; chunks];
    let mut at = 0u32;
    for d in 0..small {
        for c in 0..chunks {
            next[c][d] = at;
            at += hist[c][d];
        }
    }
    drop(hist);
    let counted = at as usize;
    let mut high: Vec<u64> = (0..n)
        .into_par_iter()
        .filter_map(|v| {
            let d = degree(v);
            (d >= small as u64).then_some((d << 32) | v as u64)
        })
        .collect();
    high.par_sort_unstable();
    let (mut rank, mut order) = (vec![0u32; n], vec![0u32; n]);
    let (rank_out, order_out) = (
        crate::mem::SharedSlice::new_init(&mut rank),
        crate::mem::SharedSlice::new_init(&mut order),
    );
    next.into_par_iter().enumerate().for_each(|(c, mut next)| {
        for v in span(c) {
            if let Some(r) = next.get_mut(degree(v) as usize) {
                // SAFETY: the places of chunk c's vertices of each degree are its own, each
                // taken once, and every vertex is in one chunk.
                unsafe {
                    rank_out.write(v, *r);
                    order_out.write(*r as usize, v as u32);
                }
                *r += 1;
            }
        }
    });
    high.par_iter().enumerate().for_each(|(k, &key)| {
        let (v, r) = (key as u32, (counted + k) as u32);
        // SAFETY: the vertices of high degree and their places are distinct from the others.
        unsafe {
            rank_out.write(v as usize, r);
            order_out.write(r as usize, v);
        }
    });
    (rank, order)
}

/// Degrees counted by [`degree_ranks`]'s histograms; higher ones are sorted.
const COUNTED_DEGREES: usize = 1 << 16;

/// The oriented graph: row `r` holds the neighbours of rank higher than `r`, sorted. Rows are
/// ranks; `order[r]` is the original vertex of rank `r` when relabelled.
pub(super) struct Oriented {
    /// Row offsets.
    pub(super) ptr: Vec<u64>,
    /// The rows, one after the other.
    pub(super) adj: Vec<u32>,
    /// The number of lower-ranked neighbours of each row (its in-degree in the DAG).
    pub(super) indeg: Vec<u64>,
    order: Option<Vec<u32>>,
}

impl Oriented {
    /// The orientation of `g` by vertex id, or by degree when `relabel`.
    pub(super) fn new(g: &SimpleGraph, relabel: bool) -> Oriented {
        let n = g.vertices();
        if !relabel {
            let keep = |u: usize| {
                let nb = g.neighbours(u);
                &nb[nb.partition_point(|&v| v as usize <= u)..]
            };
            let lens: Vec<u64> = (0..n)
                .into_par_iter()
                .with_min_len(1024)
                .map(|u| keep(u).len() as u64)
                .collect();
            let ptr = prefix(&lens);
            let adj = fill_rows(&ptr, |u, out| out.copy_from_slice(keep(u)));
            let indeg = lens
                .par_iter()
                .enumerate()
                .map(|(u, &l)| g.degree(u) as u64 - l)
                .collect();
            return Oriented {
                ptr,
                adj,
                indeg,
                order: None,
            };
        }
        let (rank, order) = degree_ranks(n, |v| g.degree(v) as u64);
        let lens: Vec<u64> = (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|r| {
                let u = order[r] as usize;
                g.neighbours(u)
                    .iter()
                    .filter(|&&v| rank[v as usize] as usize > r)
                    .count() as u64
            })
            .collect();
        let ptr = prefix(&lens);
        let adj = fill_rows(&ptr, |r, out| {
            let u = order[r] as usize;
            let mut at = 0;
            for &v in g.neighbours(u) {
                let rv = rank[v as usize];
                if rv as usize > r {
                    out[at] = rv;
                    at += 1;
                }
            }
            out.sort_unstable();
        });
        let indeg = lens
            .par_iter()
            .enumerate()
            .map(|(r, &l)| g.degree(order[r] as usize) as u64 - l)
            .collect();
        Oriented {
            ptr,
            adj,
            indeg,
            order: Some(order),
        }
    }

    /// Number of rows (vertices).
    pub(super) fn n(&self) -> usize {
        self.ptr.len() - 1
    }

    /// The entries of row `u`, sorted.
    #[inline]
    pub(super) fn row(&self, u: usize) -> &[u32] {
        &self.adj[self.ptr[u] as usize..self.ptr[u + 1] as usize]
    }

    /// Per-vertex counts indexed by rank, moved to original vertex ids.
    pub(super) fn to_original(&self, by_rank: Vec<u64>) -> Vec<u64> {
        match &self.order {
            None => by_rank,
            Some(order) => {
                let mut out = vec![0u64; by_rank.len()];
                for (r, &v) in order.iter().enumerate() {
                    out[v as usize] = by_rank[r];
                }
                out
            }
        }
    }
}

/// Offsets from lengths: `[0, l0, l0 + l1, ...]`.
pub(super) fn prefix<L: Copy + Into<u64>>(lens: &[L]) -> Vec<u64> {
    let mut ptr = Vec::with_capacity(lens.len() + 1);
    let mut acc = 0u64;
    ptr.push(0);
    for &l in lens {
        acc += l.into();
        ptr.push(acc);
    }
    ptr
}

/// Allocates the rows `ptr` describes and fills each with `fill(row, slice)`, in parallel over
/// blocks of rows.
fn fill_rows(ptr: &[u64], fill: impl Fn(usize, &mut [u32]) + Sync) -> Vec<u32> {
    let n = ptr.len() - 1;
    let total = ptr[n] as usize;
    let mut adj = vec![0u32; total];
    let block = (n / (16 * rayon::current_num_threads().max(1))).max(1024);
    let starts: Vec<usize> = (0..n).step_by(block).collect();
    let lens: Vec<usize> = starts
        .iter()
        .map(|&s| (ptr[(s + block).min(n)] - ptr[s]) as usize)
        .collect();
    let parts = crate::mem::split_by_lengths(&mut adj, &lens);
    parts.into_par_iter().zip(starts).for_each(|(part, s)| {
        let base = ptr[s];
        for r in s..(s + block).min(n) {
            let (a, b) = ((ptr[r] - base) as usize, (ptr[r + 1] - base) as usize);
            fill(r, &mut part[a..b]);
        }
    });
    adj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tricount::tests::graph;

    #[test]
    fn ranks_follow_degree_then_id() {
        let mut rng = SplitMix64::new(5);
        for n in [0usize, 1, 7, 1000, 70_000] {
            let degree: Vec<u64> = (0..n)
                .map(|_| match rng.next_u64() % 10 {
                    0 => 65_536 + rng.next_u64() % 3,
                    1 => 65_535,
                    _ => rng.next_u64() % 40,
                })
                .collect();
            let (rank, order) = degree_ranks(n, |v| degree[v]);
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&v| (degree[v as usize], v));
            assert_eq!(order, want, "{n} vertices");
            for (r, &v) in order.iter().enumerate() {
                assert_eq!(rank[v as usize], r as u32);
            }
        }
    }

    #[test]
    fn relabelling_rule() {
        // A ring: too few edges per vertex.
        let ring: Vec<(u32, u32)> = (0..100).map(|i| (i, (i + 1) % 100)).collect();
        assert!(!worth_relabelling(&graph(100, &ring)));
        // A clique of 30 (29 neighbours each, uniform): dense but not skewed.
        let mut e = Vec::new();
        for a in 0..30u32 {
            for b in a + 1..30 {
                e.push((a, b));
            }
        }
        assert!(!worth_relabelling(&graph(30, &e)));
        // Skewed: 2000 vertices of degree about 20 around hubs of degree 2000.
        let mut e = Vec::new();
        for h in 0..10u32 {
            for v in 10..2000u32 {
                e.push((h, v));
            }
        }
        for v in 10..2000u32 {
            e.push((v, 10 + (v + 1 - 10) % 1990));
        }
        assert!(worth_relabelling(&graph(2000, &e)));
    }
}
