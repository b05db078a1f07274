//! The dedicated CPU kernel ([`Method::Merge`](super::Method::Merge)): it walks the wedges of
//! the oriented graph with a bitmap of each row's entries and forms no product matrix; also the
//! triangles through each vertex, and the kernels it falls back to.

use super::orient::{prefix, Oriented};
use crate::spgemm::prefetch;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

impl Oriented {
    /// The merge method: the total, and the triangles through each vertex (indexed by rank) when
    /// `per_vertex`, which fall back to merging sorted rows past 32-bit positions.
    pub(super) fn count_merge(&self, per_vertex: bool) -> (u64, Option<Vec<u64>>) {
        if per_vertex {
            let pv = self
                .per_vertex_pairs()
                .unwrap_or_else(|| self.per_vertex_merge());
            (pv.iter().sum::<u64>() / 3, Some(pv))
        } else {
            (self.count_pairs(), None)
        }
    }

    /// Consecutive row ranges of about equal work (`Σ_{v ∈ row u} |row v|` plus the row).
    fn tasks(&self) -> Vec<Range<usize>> {
        balanced(self.n(), |u| {
            let row = self.row(u);
            row.len() as u64
                + row
                    .iter()
                    .map(|&v| self.ptr[v as usize + 1] - self.ptr[v as usize])
                    .sum::<u64>()
        })
    }

    /// The in-edges of each vertex `b`, grouped by `b` (offsets, then spans): for an edge
    /// `a → b` at position `e` of `adj`, the span `e + 1 .. end of row a` (the entries of row `a`
    /// after `b`), packed as `start << 32 | end`. `None` when positions pass 32 bits.
    fn in_spans(&self) -> Option<InSpans> {
        let n = self.n();
        if self.adj.len() > u32::MAX as usize {
            return None;
        }
        let tptr = prefix(&self.indeg);
        let cursor: Vec<AtomicU64> = tptr[..n].iter().map(|&p| AtomicU64::new(p)).collect();
        let spans: Vec<AtomicU64> = (0..self.adj.len()).map(|_| AtomicU64::new(0)).collect();
        (0..n).into_par_iter().with_min_len(256).for_each(|a| {
            let (start, end) = (self.ptr[a], self.ptr[a + 1]);
            for e in start..end {
                let b = self.adj[e as usize] as usize;
                let at = cursor[b].fetch_add(1, Relaxed);
                spans[at as usize].store(((e + 1) << 32) | end, Relaxed);
            }
        });
        let mut spans: Vec<u64> = spans.into_iter().map(AtomicU64::into_inner).collect();
        // In order of position, so that the rows of `a` are visited in memory order.
        let lens: Vec<usize> = (0..n).map(|b| (tptr[b + 1] - tptr[b]) as usize).collect();
        crate::mem::split_by_lengths(&mut spans, &lens)
            .into_par_iter()
            .with_min_len(256)
            .for_each(|seg| seg.sort_unstable());
        Some(InSpans { tptr, spans })
    }

    /// The vertices in tasks of about equal work for the wedge walks over `ins`: each vertex
    /// with an out-row costs its row plus the spans of its in-edges.
    fn pair_tasks(&self, ins: &InSpans) -> Vec<Range<usize>> {
        balanced(self.n(), |b| {
            let out = self.row(b).len() as u64;
            if out == 0 {
                return 0;
            }
            out + ins
                .of(b)
                .map(|k| {
                    let (s, e) = ins.span(k);
                    (e - s) as u64
                })
                .sum::<u64>()
        })
    }

    /// The total count, wedge by wedge at the lowest vertex: for each vertex `b`, its row is
    /// marked in a bitmap; then for each in-edge `a → b`, the entries `c` of row `a` after `b`
    /// (up to the largest entry of row `b`) are looked up. Each pair `b < c` of a row is visited
    /// at most once: `Σ out(a)²/2` lookups at most, fewer than the `Σ in(b)·out(b)` of walking
    /// the rows of a row's entries ([`Oriented::count_marked`]) on graphs ordered by degree.
    fn count_pairs(&self) -> u64 {
        let Some(ins) = self.in_spans() else {
            return self.count_marked();
        };
        let n = self.n();
        let tasks = self.pair_tasks(&ins);
        let words = n.div_ceil(64);
        tasks
            .into_par_iter()
            .map(|range| {
                // Interrupted: the rest of the tasks are skipped, and `count`'s check after
                // the count drops the partial total.
                if crate::interrupt::requested() {
                    return 0;
                }
                let mut bits = vec![0u64; words];
                let mut total = 0u64;
                for b in range {
                    let nb = self.row(b);
                    let Some(&hi) = nb.last() else {
                        continue;
                    };
                    for &c in nb {
                        bits[c as usize >> 6] |= 1u64 << (c & 63);
                    }
                    for k in ins.of(b) {
                        // Each span starts at a random place of `adj`: fetch a few ahead.
                        if k + AHEAD < ins.spans.len() {
                            prefetch(self.adj.as_ptr().wrapping_add(ins.span(k + AHEAD).0));
                        }
                        let (s, e) = ins.span(k);
                        for &c in &self.adj[s..e] {
                            if c > hi {
                                break;
                            }
                            total += (bits[c as usize >> 6] >> (c & 63)) & 1;
                        }
                    }
                    for &c in nb {
                        bits[c as usize >> 6] = 0;
                    }
                }
                total
            })
            .sum()
    }

    /// Triangles through each vertex (indexed by rank), walking the wedges as
    /// [`Oriented::count_pairs`] does. A triangle `a < b < c` is found from the in-edge `a → b`
    /// and the entry `c` of row `b`: `b`'s count is kept locally, `c`'s per entry of row `b`
    /// (found by a binary search in the row) and added once per entry, and `a`'s per in-edge,
    /// stored at the in-edge's position in `adj` and summed row by row at the end. `None` when
    /// positions pass 32 bits.
    fn per_vertex_pairs(&self) -> Option<Vec<u64>> {
        let ins = self.in_spans()?;
        let n = self.n();
        let tasks = self.pair_tasks(&ins);
        let counts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        // Triangles whose lowest two vertices are the edge at each position of `adj`.
        let low: Vec<AtomicU32> = (0..self.adj.len()).map(|_| AtomicU32::new(0)).collect();
        let words = n.div_ceil(64);
        tasks.into_par_iter().for_each(|range| {
            // Interrupted: as in `count_pairs`.
            if crate::interrupt::requested() {
                return;
            }
            let mut bits = vec![0u64; words];
            let mut high: Vec<u64> = Vec::new();
            for b in range {
                let nb = self.row(b);
                let Some(&hi) = nb.last() else {
                    continue;
                };
                for &c in nb {
                    bits[c as usize >> 6] |= 1u64 << (c & 63);
                }
                high.clear();
                high.resize(nb.len(), 0);
                let mut mid = 0u64;
                for k in ins.of(b) {
                    if k + AHEAD < ins.spans.len() {
                        prefetch(self.adj.as_ptr().wrapping_add(ins.span(k + AHEAD).0));
                    }
                    let (s, e) = ins.span(k);
                    let mut found = 0u32;
                    for &c in &self.adj[s..e] {
                        if c > hi {
                            break;
                        }
                        if (bits[c as usize >> 6] >> (c & 63)) & 1 == 1 {
                            found += 1;
                            high[nb.partition_point(|&x| x < c)] += 1;
                        }
                    }
                    if found > 0 {
                        // Position s - 1 holds b in row a: the edge a → b.
                        low[s - 1].store(found, Relaxed);
                        mid += found as u64;
                    }
                }
                for &c in nb {
                    bits[c as usize >> 6] = 0;
                }
                if mid > 0 {
                    counts[b].fetch_add(mid, Relaxed);
                    for (&c, &h) in nb.iter().zip(&high) {
                        if h > 0 {
                            counts[c as usize].fetch_add(h, Relaxed);
                        }
                    }
                }
            }
        });
        Some(
            counts
                .into_par_iter()
                .enumerate()
                .map(|(a, t)| {
                    let row = self.ptr[a] as usize..self.ptr[a + 1] as usize;
                    t.into_inner() + low[row].iter().map(|x| x.load(Relaxed) as u64).sum::<u64>()
                })
                .collect(),
        )
    }

    /// The total count: for each vertex `u`, its row is marked in a bitmap, and for each `v` of
    /// its row, the entries of row `v` up to the largest of row `u` are looked up.
    fn count_marked(&self) -> u64 {
        let words = self.n().div_ceil(64);
        self.tasks()
            .into_par_iter()
            .map(|range| {
                // Interrupted: the rest of the tasks are skipped, and `count`'s check after
                // the count drops the partial total.
                if crate::interrupt::requested() {
                    return 0;
                }
                let mut bits = vec![0u64; words];
                let mut total = 0u64;
                for u in range {
                    let nu = self.row(u);
                    let Some((&hi, firsts)) = nu.split_last() else {
                        continue;
                    };
                    for &w in nu {
                        bits[w as usize >> 6] |= 1u64 << (w & 63);
                    }
                    for &v in firsts {
                        for &w in self.row(v as usize) {
                            if w > hi {
                                break;
                            }
                            total += (bits[w as usize >> 6] >> (w & 63)) & 1;
                        }
                    }
                    for &w in nu {
                        bits[w as usize >> 6] = 0;
                    }
                }
                total
            })
            .sum()
    }

    /// Triangles through each vertex (indexed by rank), by merging sorted rows: for each edge
    /// `(u, v)` of the oriented graph, the rows of `u` (after `v`) and `v` are merged; each common
    /// `w` is a triangle `u < v < w`. `u`'s count is kept locally; those of `v` and `w` are
    /// summed per row of `u` and added once per edge.
    fn per_vertex_merge(&self) -> Vec<u64> {
        let counts: Vec<AtomicU64> = (0..self.n()).map(|_| AtomicU64::new(0)).collect();
        self.tasks().into_par_iter().for_each(|range| {
            // Interrupted: as in `count_pairs`.
            if crate::interrupt::requested() {
                return;
            }
            let mut acc: Vec<u64> = Vec::new();
            for u in range {
                let nu = self.row(u);
                acc.clear();
                acc.resize(nu.len(), 0);
                let mut low = 0u64;
                for (i, &v) in nu.iter().enumerate() {
                    let (a, b) = (&nu[i + 1..], self.row(v as usize));
                    let (mut x, mut y, mut found) = (0, 0, 0u64);
                    while x < a.len() && y < b.len() {
                        if a[x] < b[y] {
                            x += 1;
                        } else if a[x] > b[y] {
                            y += 1;
                        } else {
                            acc[i + 1 + x] += 1;
                            found += 1;
                            x += 1;
                            y += 1;
                        }
                    }
                    acc[i] += found;
                    low += found;
                }
                if low > 0 {
                    counts[u].fetch_add(low, Relaxed);
                    for (&v, &c) in nu.iter().zip(&acc) {
                        if c > 0 {
                            counts[v as usize].fetch_add(c, Relaxed);
                        }
                    }
                }
            }
        });
        counts.into_iter().map(AtomicU64::into_inner).collect()
    }
}

/// Spans ahead of the current one whose first entries are prefetched.
const AHEAD: usize = 8;

/// The in-edges of each vertex ([`Oriented::in_spans`]).
struct InSpans {
    /// Offsets of each vertex's in-edges in `spans` (`n + 1`).
    tptr: Vec<u64>,
    /// For the in-edge `a → b` at position `e` of `adj`: `(e + 1) << 32 | end of row a`.
    spans: Vec<u64>,
}

impl InSpans {
    /// The positions in `spans` of `b`'s in-edges.
    fn of(&self, b: usize) -> Range<usize> {
        self.tptr[b] as usize..self.tptr[b + 1] as usize
    }

    /// In-edge `k`'s span of `adj`: start and end.
    fn span(&self, k: usize) -> (usize, usize) {
        let x = self.spans[k];
        ((x >> 32) as usize, (x & u32::MAX as u64) as usize)
    }
}

/// Cuts `0..n` into consecutive ranges of about equal total `cost`, many per thread so that
/// rayon can balance them.
fn balanced(n: usize, cost: impl Fn(usize) -> u64 + Sync) -> Vec<Range<usize>> {
    let cost: Vec<u64> = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map(&cost)
        .collect();
    let total: u64 = cost.iter().sum();
    let pieces = (64 * rayon::current_num_threads().max(1)) as u64;
    let target = (total / pieces).max(1 << 12);
    let mut tasks = Vec::new();
    let (mut begin, mut acc) = (0usize, 0u64);
    for (u, &c) in cost.iter().enumerate() {
        acc += c;
        if acc >= target {
            tasks.push(begin..u + 1);
            begin = u + 1;
            acc = 0;
        }
    }
    if begin < n {
        tasks.push(begin..n);
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tricount::tests::graph;

    #[test]
    fn the_three_cpu_kernels_agree() {
        // A small skewed graph: hubs 0..8 joined to many, plus a ring; in both orientations.
        let mut e = Vec::new();
        let mut x = 12345u64;
        for _ in 0..3000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((x >> 33) % 8) as u32;
            let v = ((x >> 40) % 400) as u32;
            e.push((u, v));
        }
        e.extend((0..400u32).map(|i| (i, (i + 1) % 400)));
        let g = graph(400, &e);
        for relabel in [false, true] {
            let o = Oriented::new(&g, relabel);
            let pairs = o.count_pairs();
            assert_eq!(o.count_marked(), pairs);
            let pv = o.per_vertex_merge();
            assert_eq!(pv.iter().sum::<u64>(), 3 * pairs);
            assert_eq!(o.per_vertex_pairs(), Some(pv));
            assert!(pairs > 0);
        }
    }
}
