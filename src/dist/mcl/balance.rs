//! Blocks of equal work: the rows of `Mᵀ` move between ranks so that each rank's block of
//! columns costs about the same to expand.
//!
//! Blocks of equal node counts are far from equal work on power-law graphs, whose hubs sit
//! together (R-MAT puts them at low ids): the first rank of two would make most of every `M²`.
//! Each iteration cuts the blocks again by its own products ([`rebalance`], from the row lengths
//! every rank gathers anyway) where the heaviest block strays from the mean ([`Slack`]): the
//! first by each column's share of the first expansion, `Σ (deg(k) + 1)` over its `k` (its
//! neighbours and itself, the loop added; where the blocks stay on the GPUs, by its estimated
//! entries instead: [`super::expanded`]), the later ones as the work moves while the matrix
//! fills and then empties. Blocks are cut where the running sum of the work crosses each
//! multiple of the total over the ranks. The clusters do not depend on the cut (every column
//! is made by the same code from the same rows), only the time does.

use super::super::Comm;
use super::fetch;
use crate::csr::Csr;
use crate::scalar::Scalar;

/// When blocks are cut again: where the heaviest block's work exceeds the mean by more than
/// `ratio` times the mean and by more than `least` (a move costs more than evening out a
/// small excess saves).
#[derive(Clone, Copy, Debug)]
pub struct Slack {
    /// The heaviest block's work over the mean, above which the blocks are cut again.
    pub ratio: f64,
    /// The excess of the heaviest block over the mean below which they are not.
    pub least: u64,
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
/// node's row length), or `None` when the heaviest block is within `slack` of the mean (every
/// rank takes the same decision). Collective.
pub fn rebalance<T: Scalar>(
    comm: &dyn Comm,
    rows: &Csr<T>,
    starts: &[usize],
    work: &[u64],
    lengths: &[u32],
    slack: Slack,
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
/// per row of its block), or `None` when the heaviest block is within `slack` of the mean or
/// the cut stays where it is (every rank takes the same decision). Collective.
pub fn new_starts(
    comm: &dyn Comm,
    starts: &[usize],
    work: &[u64],
    slack: Slack,
) -> Option<Vec<usize>> {
    let n = *starts.last()?;
    let (totals, _) = comm.all_gather_u64(&[work.iter().sum()]);
    let all: u64 = totals.iter().sum();
    let heaviest = totals.iter().copied().max().unwrap_or(0) as f64;
    let mean = all as f64 / comm.size() as f64;
    if heaviest <= slack.ratio * mean || heaviest - mean <= slack.least as f64 {
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
        let even = Slack {
            ratio: 1.0,
            least: 0,
        };
        match rebalance(comm, &graph.rows, &graph.starts, &work, &degree, even) {
            Some(moved) => GraphBlock {
                starts: moved.starts,
                rows: moved.rows,
                ..graph
            },
            None => graph,
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
