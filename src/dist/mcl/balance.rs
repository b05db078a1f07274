//! Blocks of equal work: the rows of `Mᵀ` move between ranks so that each rank's block of
//! columns costs about the same to expand.
//!
//! Blocks of equal node counts are far from equal work on power-law graphs, whose hubs sit
//! together (R-MAT puts them at low ids): the first rank of two would make most of every `M²`.
//! Each iteration cuts the blocks again by its own products ([`rebalance`], from the row lengths
//! every rank gathers anyway) where the heaviest block strays from the mean: the first by each
//! column's share of the first expansion, `Σ (deg(k) + 1)` over its `k` (its neighbours and
//! itself, the loop added), the later ones as the work moves while the matrix fills and then
//! empties. Blocks are cut where the running sum of the work crosses each
//! multiple of the total over the ranks. The clusters do not depend on the cut (every column
//! is made by the same code from the same rows), only the time does.
//!
//! A product does not cost the same everywhere: the engines make a column with many products
//! in a dense accumulator and the others in hash tables or sorted merges, at different costs
//! per product, and the hubs' blocks hold most of the dense columns. [`Cost`] weighs a column by
//! its class, the weight learned after each iteration from the time every rank spent making its
//! columns.

use super::super::Comm;
use super::fetch;
use crate::csr::Csr;
use crate::scalar::Scalar;

/// What a column costs to make, in products of a dense column: the engine makes columns of at
/// least `dense_from` products in its dense accumulator, the others at `sparse_weight` times
/// the cost per product. The weight starts at 1 (every product alike) and is learned after each
/// iteration from every rank's time and products ([`Cost::learn`]), so the next cut evens out
/// the time the blocks take rather than their products.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    dense_from: u64,
    sparse_weight: f64,
}

/// The learned weight of a sparse product stays within this factor of a dense one's: a
/// bound on what a fit over a few ranks' noisy times may conclude.
const MOST_WEIGHT: f64 = 16.0;

/// The ranks' times tell the classes' costs apart only where the ranks mix them differently:
/// `1 − cos²` of the angle between the ranks' sparse and dense products (as vectors over the
/// ranks) must reach this, else the fit is left alone.
const LEAST_SPREAD: f64 = 0.01;

/// Below this, the slowest rank's time is mostly noise: nothing is learned from it.
const LEAST_SECONDS: f64 = 0.05;

impl Cost {
    /// Every product weighing the same; `dense_from`: the products from which the engine makes
    /// a column in its dense accumulator.
    pub fn new(dense_from: u64) -> Self {
        Cost {
            dense_from: dense_from.max(1),
            sparse_weight: 1.0,
        }
    }

    /// The cost of a column of `products` products.
    pub fn of(&self, products: u64) -> u64 {
        match products >= self.dense_from {
            true => products,
            false => (products as f64 * self.sparse_weight).round() as u64,
        }
    }

    /// The products of the columns under `dense_from` and of the others.
    pub fn split(&self, products: &[u64]) -> [u64; 2] {
        products
            .iter()
            .fold([0, 0], |[sparse, dense], &p| match p >= self.dense_from {
                true => [sparse, dense + p],
                false => [sparse + p, dense],
            })
    }

    /// The weight of a sparse product against a dense one (1 until something was learned).
    pub fn sparse_weight(&self) -> f64 {
        self.sparse_weight
    }

    /// Learns the weight of a sparse product from every rank's `seconds` making its columns
    /// and its products `split` ([`Cost::split`]): the least-squares fit of the times as
    /// `α·sparse + β·dense` gives the weight `α/β`. Kept as it was where the fit cannot tell the
    /// classes apart (a class missing, the ranks' mixes alike, the times too short) or finds
    /// a cost that is not positive. Collective; every rank learns the same weight.
    pub fn learn(&mut self, comm: &dyn Comm, seconds: f64, split: [u64; 2]) {
        let (all, _) = comm.all_gather_u64(&[seconds.to_bits(), split[0], split[1]]);
        let ranks: Vec<(f64, f64, f64)> = all
            .chunks_exact(3)
            .map(|r| (f64::from_bits(r[0]), r[1] as f64, r[2] as f64))
            .collect();
        if let Some(w) = fitted_weight(&ranks) {
            self.sparse_weight = w.clamp(1.0 / MOST_WEIGHT, MOST_WEIGHT);
        }
    }
}

/// `α/β` of the least-squares fit of `t ≈ α·s + β·d` over the ranks' `(t, s, d)`, or `None`
/// where the fit is not well posed or not positive.
fn fitted_weight(ranks: &[(f64, f64, f64)]) -> Option<f64> {
    let slowest = ranks.iter().map(|r| r.0).fold(0.0, f64::max);
    if ranks.len() < 2 || slowest < LEAST_SECONDS {
        return None;
    }
    // Products in units of the largest rank's, so the sums stay near 1.
    let scale = ranks.iter().map(|r| r.1 + r.2).fold(0.0, f64::max);
    let (mut ss, mut sd, mut dd, mut st, mut dt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(t, s, d) in ranks {
        let (s, d) = (s / scale, d / scale);
        (ss, sd, dd, st, dt) = (ss + s * s, sd + s * d, dd + d * d, st + s * t, dt + d * t);
    }
    let det = ss * dd - sd * sd;
    // (NaN from a rank's time fails the positive check below.)
    if det <= LEAST_SPREAD * ss * dd {
        return None;
    }
    let alpha = (st * dd - dt * sd) / det;
    let beta = (dt * ss - st * sd) / det;
    (alpha > 0.0 && beta > 0.0 && (alpha / beta).is_finite()).then(|| alpha / beta)
}

/// A block moved to new owners: the blocks' first nodes, this rank's rows, and the bytes it
/// received.
pub struct Moved<T> {
    /// The blocks' first nodes, then the node count (ranks + 1 values).
    pub starts: Vec<usize>,
    /// This rank's rows under `starts`.
    pub rows: Csr<T>,
    /// Bytes this rank received while the rows moved.
    pub received: u64,
}

/// The block `rows` of every rank (`starts`: the blocks' first nodes) cut again at equal shares
/// of `work` (this rank's, per row), its rows moved to their new owners (`lengths`: every
/// node's row length), or `None` when the heaviest block is within `slack` times the mean
/// (every rank takes the same decision). Collective.
pub fn rebalance<T: Scalar>(
    comm: &dyn Comm,
    rows: &Csr<T>,
    starts: &[usize],
    work: &[u64],
    lengths: &[u32],
    slack: f64,
) -> Option<Moved<T>> {
    let new = new_starts(comm, starts, work, slack)?;
    let (rows, received) = moved(comm, rows, starts, &new, lengths);
    Some(Moved {
        starts: new,
        rows,
        received,
    })
}

/// The blocks (`starts`: their first nodes) cut again at equal shares of `work` (this rank's,
/// per row of its block), or `None` when the heaviest block is within `slack` times the mean or
/// the cut stays where it is (every rank takes the same decision). Collective.
pub fn new_starts(
    comm: &dyn Comm,
    starts: &[usize],
    work: &[u64],
    slack: f64,
) -> Option<Vec<usize>> {
    let n = *starts.last()?;
    let (totals, _) = comm.all_gather_u64(&[work.iter().sum()]);
    let all: u64 = totals.iter().sum();
    let heaviest = totals.iter().copied().max().unwrap_or(0);
    if heaviest as f64 <= slack * all as f64 / comm.size() as f64 {
        return None;
    }
    let new = cut(comm, starts[comm.rank()], work, &totals, n);
    (new != starts).then_some(new)
}

/// The blocks' first nodes (ranks + 1 values, the last the node count `n`) at equal shares of
/// the work, given each rank's `work` per row of its block (whose first node is `first`) and
/// every rank's total. Block `p` starts at the node whose work brings the running sum closest
/// to `p` times the total over the ranks. Collective.
fn cut(comm: &dyn Comm, first: usize, work: &[u64], totals: &[u64], n: usize) -> Vec<usize> {
    let p = comm.size();
    let before: u64 = totals[..comm.rank()].iter().sum();
    let all: u128 = totals.iter().map(|&t| u128::from(t)).sum();
    let target = |q: usize| (all * q as u128 / p as u128) as u64;
    // The cuts that fall in this block: (block, its first node).
    let mut found = Vec::new();
    let mut q = (1..p).find(|&q| target(q) > before).unwrap_or(p);
    let mut run = before;
    for (i, &w) in work.iter().enumerate() {
        while q < p && target(q) <= run + w {
            // The node goes to the side of the cut nearer its middle.
            let node = match target(q) - run < run + w - target(q) {
                true => first + i,
                false => first + i + 1,
            };
            found.extend_from_slice(&[q as u64, node as u64]);
            q += 1;
        }
        run += w;
    }
    let (all_found, _) = comm.all_gather_u64(&found);
    let mut starts = vec![n; p + 1];
    starts[0] = 0;
    for pair in all_found.chunks_exact(2) {
        starts[pair[0] as usize] = pair[1] as usize;
    }
    // Cuts no rank found (no work left past them) end at `n`; keep the starts increasing.
    for q in (1..p).rev() {
        starts[q] = starts[q].min(starts[q + 1]);
    }
    starts
}

/// This rank's rows under the blocks `new`: its own rows (`rows`, under the blocks `old`) that
/// stay, the others fetched from their owners (`lengths`: every node's row length), with the
/// bytes received. Collective.
fn moved<T: Scalar>(
    comm: &dyn Comm,
    rows: &Csr<T>,
    old: &[usize],
    new: &[usize],
    lengths: &[u32],
) -> (Csr<T>, u64) {
    let rank = comm.rank();
    let had = old[rank]..old[rank + 1];
    let gets = new[rank]..new[rank + 1];
    let wanted: Vec<u32> = gets
        .clone()
        .filter(|v| !had.contains(v))
        .map(|v| v as u32)
        .collect();
    let got = fetch::fetch_in_pieces(comm, old, rows, &wanted, lengths);
    // The new block in node order: the fetched rows before the rows kept, the rows kept, the
    // fetched rows after them (with nothing kept, every row is fetched: all "before").
    let keep = had.start.max(gets.start)..had.end.min(gets.end);
    let (split, own) = match keep.is_empty() {
        true => (got.nodes.len(), 0..0),
        false => (
            got.nodes.partition_point(|&k| (k as usize) < keep.start),
            keep.start - had.start..keep.end - had.start,
        ),
    };
    let mut row_ptr = Vec::with_capacity(gets.len() + 1);
    row_ptr.push(0u64);
    let fetched_len = |i: usize| got.ptr[i + 1] - got.ptr[i];
    let lens = (0..split)
        .map(fetched_len)
        .chain(own.clone().map(|i| rows.row_len(i) as u64))
        .chain((split..got.nodes.len()).map(fetched_len));
    let mut total = 0u64;
    for l in lens {
        total += l;
        row_ptr.push(total);
    }
    let span = rows.row_ptr()[own.start] as usize..rows.row_ptr()[own.end] as usize;
    let at = got.ptr[split] as usize;
    let cols = fetch::around(&got.cols, at, &rows.col_idx()[span.clone()]);
    let vals = fetch::around(&got.vals, at, &rows.values()[span]);
    let block = Csr::from_parts_unchecked(gets.len(), rows.ncols(), row_ptr, cols, vals);
    (block, got.received)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::mcl::GraphBlock;
    use crate::dist::threads::on_ranks;

    /// `graph` cut at equal shares of its first expansion's work, as the first iteration cuts
    /// the start matrix (whose rows add the loop).
    fn balance<T: Scalar>(comm: &dyn Comm, graph: GraphBlock<T>) -> GraphBlock<T> {
        let own: Vec<u32> = (0..graph.rows.nrows())
            .map(|i| graph.rows.row_len(i) as u32)
            .collect();
        let (degree, _) = comm.all_gather_u32(&own);
        let work: Vec<u64> = (0..graph.rows.nrows())
            .map(|i| {
                let (cols, _) = graph.rows.row(i);
                let through: u64 = cols
                    .iter()
                    .map(|&k| u64::from(degree[k as usize]) + 1)
                    .sum();
                through + u64::from(own[i]) + 1
            })
            .collect();
        match rebalance(comm, &graph.rows, &graph.starts, &work, &degree, 1.0) {
            Some(moved) => GraphBlock {
                starts: moved.starts,
                rows: moved.rows,
                ..graph
            },
            None => graph,
        }
    }

    /// Times made as `α·sparse + β·dense` give back `α/β`, on 2 and on 4 ranks.
    #[test]
    fn the_fit_finds_the_weight_the_times_were_made_with() {
        let g = 1e9;
        let times = |alpha: f64, beta: f64, mixes: &[(f64, f64)]| -> Vec<(f64, f64, f64)> {
            mixes
                .iter()
                .map(|&(s, d)| (alpha * s + beta * d, s * g, d * g))
                .collect()
        };
        let two = times(3.0, 1.0, &[(1.0, 3.0), (3.0, 1.0)]);
        assert!((fitted_weight(&two).unwrap() - 3.0).abs() < 1e-9);
        let four = times(0.5, 2.0, &[(4.0, 1.0), (3.0, 2.0), (2.0, 3.0), (1.0, 4.0)]);
        assert!((fitted_weight(&four).unwrap() - 0.25).abs() < 1e-9);
        // Noise on the times moves the weight a little, not its side of 1.
        let mut noisy = times(
            4.5,
            1.0,
            &[(9.07, 8.08), (7.13, 10.02), (7.0, 10.15), (5.6, 11.5)],
        );
        for (r, t) in noisy.iter_mut().enumerate() {
            t.0 *= 1.0 + 0.02 * (r as f64 - 1.5);
        }
        let w = fitted_weight(&noisy).unwrap();
        assert!(w > 2.0 && w < 10.0, "{w}");
    }

    /// No weight where the times cannot tell the classes apart or give a cost that is not
    /// positive.
    #[test]
    fn the_fit_declines_what_the_times_cannot_tell() {
        let g = 1e9;
        // One rank; no dense products; the same mix on every rank.
        assert_eq!(fitted_weight(&[(2.0, g, g)]), None);
        assert_eq!(fitted_weight(&[(1.0, g, 0.0), (2.0, 2.0 * g, 0.0)]), None);
        assert_eq!(fitted_weight(&[(1.0, g, g), (2.0, 2.0 * g, 2.0 * g)]), None);
        // Times too short to be more than noise.
        assert_eq!(
            fitted_weight(&[(0.001, g, 3.0 * g), (0.002, 3.0 * g, g)]),
            None
        );
        // The rank with more dense products and fewer sparse ones much slower: β > 0 but
        // α < 0, which no engine's cost is.
        assert_eq!(fitted_weight(&[(1.0, 3.0 * g, g), (9.0, g, 3.0 * g)]), None);
    }

    /// Every rank learns the same weight, bounded; what cannot be learned leaves it as it was.
    #[test]
    fn every_rank_learns_the_same_bounded_weight() {
        let g = 1_000_000_000u64;
        let learned = on_ranks(3, |c| {
            let mut cost = Cost::new(100);
            let [s, d] = [[g, 3 * g], [2 * g, 2 * g], [3 * g, g]][c.rank()];
            // 2 s per billion sparse products, 1 per billion dense ones.
            cost.learn(c, (2 * s + d) as f64 / g as f64, [s, d]);
            let after_fit = cost.sparse_weight();
            cost.learn(c, 1.0, [s, 0]);
            (after_fit, cost.sparse_weight())
        });
        for (fit, kept) in learned {
            assert!((fit - 2.0).abs() < 1e-9, "{fit}");
            assert_eq!(kept, fit);
        }
        let bounded = on_ranks(2, |c| {
            let mut cost = Cost::new(100);
            let [s, d] = [[g, 3 * g], [3 * g, g]][c.rank()];
            cost.learn(c, (1000 * s + d) as f64 / g as f64, [s, d]);
            cost.sparse_weight()
        });
        assert_eq!(bounded, vec![MOST_WEIGHT; 2]);
    }

    /// A column's cost and the split follow the dense threshold; a learned weight moves the
    /// cut off the hub-light block.
    #[test]
    fn columns_under_the_threshold_weigh_their_products_times_the_weight() {
        let mut cost = Cost::new(10);
        assert_eq!(cost.split(&[3, 10, 9, 40]), [12, 50]);
        assert_eq!((cost.of(9), cost.of(10)), (9, 10));
        cost.sparse_weight = 3.0;
        assert_eq!((cost.of(9), cost.of(10), cost.of(0)), (27, 10, 0));
        // Block 0: dense columns of 40 products; block 1: sparse ones of 8. Equal products
        // (160 each) leave them where they are; at 3x a sparse product block 1 costs 480 and
        // gives rank 0 columns of its own.
        let products = [vec![40u64; 4], vec![8u64; 20]];
        let starts = vec![0, 4, 24];
        let got = on_ranks(2, |c| {
            let work: Vec<u64> = products[c.rank()].iter().map(|&p| cost.of(p)).collect();
            let even: Vec<u64> = products[c.rank()].clone();
            (
                new_starts(c, &starts, &even, 1.1),
                new_starts(c, &starts, &work, 1.1),
            )
        });
        for (even, weighed) in got {
            assert_eq!(even, None);
            let weighed = weighed.unwrap();
            // Total cost 160 + 480 = 640: rank 0 keeps its 4 columns and takes 7 of rank
            // 1's (160 + 7·24 = 328, the nearest to half of it).
            assert_eq!(weighed, vec![0, 11, 24]);
        }
    }

    /// Cuts at equal shares of the work: each rank's block (of 4 nodes) and work given.
    #[test]
    fn cuts_fall_at_equal_shares_of_the_work() {
        // 8 nodes of work 10, 1, 1, 1 | 1, 1, 1, 1 (total 17): 2 ranks cut at 8, inside
        // node 0's work and nearer its end: after it.
        let work = [vec![10u64, 1, 1, 1], vec![1, 1, 1, 1]];
        let got = on_ranks(2, |c| cut(c, 4 * c.rank(), &work[c.rank()], &[13, 4], 8));
        assert_eq!(got, vec![vec![0, 1, 8]; 2]);
        // 4 ranks: targets 4, 8 and 12: the first two inside node 0's work (4 nearer its
        // start, 8 nearer its end), the third where node 2 brings the running sum to 12.
        let work4 = [vec![10u64, 1], vec![1, 1], vec![1, 1], vec![1, 1]];
        let got = on_ranks(4, |c| {
            cut(c, 2 * c.rank(), &work4[c.rank()], &[11, 2, 2, 2], 8)
        });
        assert_eq!(got, vec![vec![0, 0, 1, 3, 8]; 4]);
        // Even work: even blocks.
        let even = on_ranks(3, |c| cut(c, 3 * c.rank(), &[5, 5, 5], &[15; 3], 9));
        assert_eq!(even, vec![vec![0, 3, 6, 9]; 3]);
    }

    /// The rows are the same rows, under the balanced starts, for 1 to 5 ranks.
    #[test]
    fn moved_rows_are_the_graphs_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = crate::generate::RmatParams::new(9, 8 << 9);
        p.seed = 5;
        p.undirected = true;
        let el = crate::generate::generate(&p).unwrap();
        let text: String = el.edges.iter().map(|(u, v)| format!("{u} {v}\n")).collect();
        let f = dir.path().join("g.el");
        std::fs::write(&f, text).unwrap();
        let whole = super::super::load_graph::<f32>(&crate::dist::SelfComm, &f, None, 64).unwrap();
        let column_work = |j: usize| -> u64 {
            let (cols, _) = whole.rows.row(j);
            let through: u64 = cols
                .iter()
                .map(|&k| whole.rows.row_len(k as usize) as u64 + 1)
                .sum();
            through + cols.len() as u64 + 1
        };
        let heaviest = (0..whole.nodes()).map(column_work).max().unwrap();
        for ranks in 1..=5 {
            let blocks = on_ranks(ranks, |c| {
                let g = super::super::load_graph::<f32>(c, &f, None, 64).unwrap();
                balance(c, g)
            });
            let starts = blocks[0].starts.clone();
            assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
            assert_eq!(starts.last(), Some(&whole.nodes()));
            let mut works = Vec::new();
            for b in &blocks {
                assert_eq!(b.starts, starts);
                assert_eq!(b.rows.nrows(), starts[b.rank + 1] - starts[b.rank]);
                for i in 0..b.rows.nrows() {
                    assert_eq!(
                        b.rows.row(i),
                        whole.rows.row(b.first() + i),
                        "{ranks} ranks"
                    );
                }
                works.push(b.range().map(column_work).sum::<u64>());
            }
            // A block's work is its share but for the nodes the cuts fall in: at most the
            // heaviest node's work more.
            let share = works.iter().sum::<u64>() / ranks as u64;
            assert!(
                works.iter().all(|&w| w <= share + heaviest),
                "{ranks} ranks: {works:?}, heaviest node {heaviest}"
            );
        }
    }
}
