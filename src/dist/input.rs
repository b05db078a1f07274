//! Distributed input: every rank reads only its share of the file's lines
//! ([`crate::io::load_part`]), then the edges travel to the ranks that own their rows, so that
//! each rank ends with the simple undirected adjacency of one block of rows ([`Blocks`]) and no
//! rank ever holds the whole edge list.
//!
//! The exchange runs in rounds of at most `stage_edges` of each rank's parsed edges, so its
//! buffers stay bounded whatever the file's size (and every message stays below MPI's 32-bit
//! counts). The pairs are grouped by owner in parallel, with the result of one pass in order.

use super::labels::LabelShare;
use super::owners::RecordSource;
use super::{in_rounds, Blocks, Comm, MAX_MESSAGE};
use crate::error::Result;
use crate::io::{Format, SymmetryCheck};
use rayon::prelude::*;
use std::path::Path;

/// One rank's block of rows of the simple undirected graph: for each row of
/// `blocks.range(rank)`, its neighbours (global ids, sorted, no self loop, no repeat).
#[derive(Clone, Debug, PartialEq)]
pub struct RowBlock {
    /// How rows are cut among the ranks (`blocks.n` is the graph's vertex count).
    pub blocks: Blocks,
    /// This rank's block.
    pub rank: usize,
    /// Row offsets into `adj`, one more than the block's rows.
    pub ptr: Vec<u64>,
    /// The neighbours of the block's rows, row after row.
    pub adj: Vec<u32>,
    /// This rank's share of the vertices' names (SNAP ids, `.abc` labels), for the writers.
    pub labels: Option<LabelShare>,
}

impl RowBlock {
    /// The block's first row.
    pub fn first(&self) -> usize {
        self.blocks.start(self.rank)
    }

    /// The number of rows in the block.
    pub fn rows(&self) -> usize {
        self.ptr.len() - 1
    }

    /// The neighbours of the block's `i`-th row (global row `first() + i`).
    pub fn row(&self, i: usize) -> &[u32] {
        &self.adj[self.ptr[i] as usize..self.ptr[i + 1] as usize]
    }
}

/// Reads this rank's part of `path` and builds its block of the simple undirected graph (edges
/// made symmetric, self loops, repeats, directions and weights dropped, as
/// [`crate::tricount::SimpleGraph::from_edges`] does). `stage_edges` bounds the parsed edges a
/// rank sends in one round. A CSR or CSC `.npz` archive that already holds a simple graph (rows
/// strictly increasing and symmetric once loops are dropped, decided by the ranks together) is
/// taken as stored, each rank reading only its block ([`super::stored`]); the rows are the same.
/// Collective; an error on any rank is the error of every rank.
pub fn simple_row_block(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
) -> Result<RowBlock> {
    let check = SymmetryCheck::Load;
    Ok(row_block_checked_by(comm, path, format, stage_edges, check)?.0)
}

/// [`simple_row_block`], except that with [`SymmetryCheck::Caller`] an archive's blocks read as
/// stored come without their symmetry check: the second value says whether the blocks are known
/// to be the simple graph's, and where they are not the caller checks them
/// ([`super::stored::is_simple`]) or counts in a way that checks them. Collective.
pub fn row_block_checked_by(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
    check: SymmetryCheck,
) -> Result<(RowBlock, bool)> {
    match super::stored::row_block(comm, path, format, stage_edges, check, None)? {
        Some(read) => Ok((read.rows, read.checked)),
        None => Ok((parsed_row_block(comm, path, format, stage_edges)?, true)),
    }
}

/// [`simple_row_block`] from the file's entries, whatever the file: each rank parses its part,
/// and the edges travel to the ranks owning their rows. Collective.
pub(crate) fn parsed_row_block(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
) -> Result<RowBlock> {
    let (loaded, labels) = super::matrix::read_part::<f64>(comm, path, format, stage_edges)?;
    let mut n = [loaded.edges.nrows.max(loaded.edges.ncols) as u64];
    comm.max_u64(&mut n);
    let blocks = Blocks::even(n[0] as usize, comm.size());
    let edges = loaded.edges.edges;
    // Each edge becomes two directed pairs, of two u32s each.
    let stage = stage_edges.clamp(1, MAX_MESSAGE / 4);
    let mut received: Vec<u32> = Vec::new();
    in_rounds(comm, edges.len(), stage, |r| {
        let (send, counts) = by_owner(&edges[r], &blocks);
        comm.all_to_all_append(&send, &counts, &mut received);
    })?;
    drop(edges);
    Ok(RowBlock {
        labels,
        ..build_rows(blocks, comm.rank(), &received)
    })
}

/// The directed pairs `(u, v)` and `(v, u)` of every edge but self loops, grouped by the owner of
/// their first vertex and flattened (`u, v, u, v, ...`), with the number of u32s for each owner.
fn by_owner(edges: &[(u32, u32)], blocks: &Blocks) -> (Vec<u32>, Vec<usize>) {
    super::owners::by_owner(&BothWays(edges), blocks)
}

/// Every edge but a self loop, as its two directed pairs.
struct BothWays<'a>(&'a [(u32, u32)]);

impl RecordSource<2> for BothWays<'_> {
    fn items(&self) -> usize {
        self.0.len()
    }

    fn records(&self, range: std::ops::Range<usize>, mut out: impl FnMut([u32; 2])) {
        for &(u, v) in &self.0[range] {
            if u != v {
                out([u, v]);
                out([v, u]);
            }
        }
    }
}

/// The block's rows from the directed pairs it received (flattened), each row sorted with
/// repeats removed. Counting and placing the pairs stay one pass each in order: placing them
/// in parallel measured slower on 2 cores, with atomic cursors (the hubs' rows shared between
/// cores) and with one process's bucketed CSR build (more passes); see docs/performance.md.
fn build_rows(blocks: Blocks, rank: usize, pairs: &[u32]) -> RowBlock {
    let first = blocks.start(rank);
    let rows = blocks.range(rank).len();
    let mut len = vec![0u64; rows + 1];
    for p in pairs.chunks_exact(2) {
        len[p[0] as usize - first + 1] += 1;
    }
    for i in 0..rows {
        len[i + 1] += len[i];
    }
    let mut cursor = len.clone();
    let mut adj = vec![0u32; pairs.len() / 2];
    for p in pairs.chunks_exact(2) {
        let r = p[0] as usize - first;
        adj[cursor[r] as usize] = p[1];
        cursor[r] += 1;
    }
    // Sort and deduplicate each row in place, then close the gaps.
    let lens: Vec<usize> = (0..rows).map(|i| (len[i + 1] - len[i]) as usize).collect();
    let kept: Vec<usize> = crate::mem::split_by_lengths(&mut adj, &lens)
        .into_par_iter()
        .with_min_len(256)
        .map(|row| {
            row.sort_unstable();
            let mut k = 0;
            for i in 0..row.len() {
                if i == 0 || row[i] != row[k - 1] {
                    row[k] = row[i];
                    k += 1;
                }
            }
            k
        })
        .collect();
    let mut ptr = vec![0u64; rows + 1];
    let mut to = 0usize;
    for i in 0..rows {
        let from = len[i] as usize;
        adj.copy_within(from..from + kept[i], to);
        to += kept[i];
        ptr[i + 1] = to as u64;
    }
    adj.truncate(to);
    adj.shrink_to_fit();
    RowBlock {
        blocks,
        rank,
        ptr,
        adj,
        labels: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::SelfComm;
    use crate::io::Labels;

    #[test]
    fn one_rank_block_is_the_simple_graph() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.el");
        std::fs::write(&f, "# c\n0 1\n1 0\n2 2\n1 3\n0 1\n3 0\n").unwrap();
        for stage in [1, 2, 100] {
            let b = simple_row_block(&SelfComm, &f, None, stage).unwrap();
            assert_eq!(b.blocks, Blocks::even(4, 1));
            let rows: Vec<&[u32]> = (0..b.rows()).map(|i| b.row(i)).collect();
            assert_eq!(rows, vec![&[1, 3][..], &[0, 3], &[], &[0, 1]]);
        }
    }

    #[test]
    fn pairs_go_to_the_owners_of_their_rows() {
        let blocks = Blocks::even(5, 2);
        let (send, counts) = by_owner(&[(0, 4), (1, 1), (2, 3)], &blocks);
        assert_eq!(counts, vec![4, 4]);
        assert_eq!(send, vec![0, 4, 2, 3, 4, 0, 3, 2]);
        let b = build_rows(blocks, 1, &[4, 0, 3, 2, 4, 0]);
        assert_eq!(b.first(), 3);
        assert_eq!((b.row(0), b.row(1)), (&[2][..], &[0][..]));
    }

    #[test]
    fn rows_are_built_alike_on_any_number_of_threads() {
        let mut rng = crate::generate::rng::SplitMix64::new(5);
        let blocks = Blocks::even(3000, 3);
        let rows = blocks.range(1);
        // Pairs of the middle block, with repeats and a hub row.
        let mut pairs = Vec::new();
        for k in 0..200_000u64 {
            let r = rng.next_u64();
            let a = if k % 5 == 0 {
                rows.start
            } else {
                rows.start + (r % rows.len() as u64) as usize
            };
            pairs.extend([a as u32, ((r >> 32) % 3000) as u32]);
        }
        let mut want = vec![std::collections::BTreeSet::new(); rows.len()];
        for p in pairs.chunks_exact(2) {
            want[p[0] as usize - rows.start].insert(p[1]);
        }
        for threads in [1, 2, 5] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let b = pool.install(|| build_rows(blocks.clone(), 1, &pairs));
            assert_eq!(b.rows(), rows.len());
            for (i, w) in want.iter().enumerate() {
                assert!(b.row(i).iter().eq(w.iter()), "row {i}, {threads} threads");
            }
            assert_eq!(b.adj.len(), want.iter().map(|w| w.len()).sum::<usize>());
        }
    }

    #[test]
    fn bad_lines_and_formats_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.el");
        std::fs::write(&f, "0 1\n1 x\n").unwrap();
        let e = simple_row_block(&SelfComm, &f, None, 8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.el:2:"), "{e}");
        let g = dir.path().join("g.npz");
        std::fs::write(&g, "PK").unwrap();
        let e = simple_row_block(&SelfComm, &g, None, 8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.npz") && e.contains("not a ZIP"), "{e}");
        // A SciPy archive is read as its entries, made symmetric, the loop dropped.
        let m = crate::csr::Csr::<f64>::from_parts(
            3,
            3,
            vec![0, 2, 3, 3],
            vec![1, 2, 1],
            vec![1.0, 2.0, 3.0],
        )
        .unwrap();
        std::fs::write(&g, crate::io::npz::write(Vec::new(), &m).unwrap()).unwrap();
        let b = simple_row_block(&SelfComm, &g, None, 8).unwrap();
        assert_eq!(b.blocks, Blocks::even(3, 1));
        assert_eq!(
            (b.row(0), b.row(1), b.row(2)),
            (&[1, 2][..], &[0][..], &[0][..])
        );
        // Labels are read, and the block keeps its share of them.
        let h = dir.path().join("g.abc");
        std::fs::write(&h, "a\tb\n").unwrap();
        let b = simple_row_block(&SelfComm, &h, None, 8).unwrap();
        assert_eq!((b.row(0), b.row(1)), (&[1][..], &[0][..]));
        let names = Labels::Names(vec!["a".into(), "b".into()]);
        assert_eq!(b.labels.map(|s| s.labels), Some(names));
    }
}
