//! The graph MCL clusters, built across ranks as [`crate::mcl::graph_from_edges`] builds it in
//! one process: only the vertices some edge touches, renumbered in id order; symmetric, the
//! larger weight kept for a pair given twice (either way round), self loops dropped.
//!
//! Each rank reads its part of the file; every edge goes, as a record `(row, column)` and, in a
//! weighted file, its weight, to the owner of its row in blocks of the file's vertex ids (cut
//! at about equal records, [`equal_records`]), both ways round (a self loop goes once, only to
//! mark its vertex as touched); the records are grouped in parallel
//! ([`super::super::owners`]). The owner builds its rows with the
//! single-process CSR build ([`Csr::from_edges`]: loops dropped, the larger of equal columns
//! kept), so every value is bitwise the single-process one. One byte per vertex id tells every
//! rank which ids are touched (a gather of the blocks' flags), from which the compact numbering
//! follows; a rank's nodes are its block's touched ids, so blocks of nodes stay consecutive.
//! A `.npz` archive that already stores the graph (symmetric, weights too) is read as stored
//! first, each rank its block's rows, and no edge crosses ranks ([`stored_block`]).

use super::super::input::RowBlock;
use super::super::labels::LabelShare;
use super::super::owners::{by_owner, RecordSource};
use super::super::stored::{self, StoredRows};
use super::super::{agree, in_rounds, Blocks, Comm, MAX_MESSAGE};
use crate::csr::{BuildOptions, Csr, Duplicates};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::io::{self, Format, SymmetryCheck};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

/// One rank's block of the graph MCL clusters, and what every rank knows of the whole.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphBlock<T> {
    /// This rank.
    pub rank: usize,
    /// The first node of each rank's block, then the node count (ranks + 1 values).
    pub starts: Vec<usize>,
    /// The block's rows of the graph (symmetric, no loops): row `i` is node `first() + i`,
    /// columns are nodes of the whole graph.
    pub rows: Csr<T>,
    /// For each node of the whole graph, its vertex id in the file.
    pub ids: Vec<u32>,
    /// The file's vertex count (largest id + 1).
    pub vertices: usize,
    /// This rank's share of the vertices' names (SNAP ids, `.abc` labels), for the writers.
    pub labels: Option<LabelShare>,
}

impl<T: Scalar> GraphBlock<T> {
    /// The block's first node.
    pub fn first(&self) -> usize {
        self.starts[self.rank]
    }

    /// The block's nodes.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.starts[self.rank]..self.starts[self.rank + 1]
    }

    /// The number of nodes of the whole graph.
    pub fn nodes(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }
}

/// A weighted record: row, column, and the weight's `f64` bits in two words (an unweighted one
/// is the row and the column).
const WEIGHTED: usize = 4;

/// Reads this rank's part of `path` and builds its block of the graph. `stage_edges` bounds the
/// parsed edges a rank sends in one round. Collective: an error on any rank is every rank's.
pub fn load_graph<T: Scalar>(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
) -> Result<GraphBlock<T>> {
    if let Some(block) = stored_block(comm, path, format, stage_edges)? {
        return Ok(block);
    }
    let (loaded, labels) =
        super::super::matrix::read_part_checked::<T>(comm, path, format, stage_edges, |l| {
            check_weights::<T>(&l.edges, &l.labels, path)
        })?;
    let el = loaded.edges;
    let mut shape = [
        el.nrows.max(el.ncols) as u64,
        u64::from(el.weights.is_some()),
    ];
    comm.max_u64(&mut shape);
    let blocks = equal_records(comm, &el, shape[0] as usize);
    let weighted = shape[1] == 1;
    let received = match weighted {
        true => exchange::<WEIGHTED>(comm, &el, &blocks, stage_edges)?,
        false => exchange::<2>(comm, &el, &blocks, stage_edges)?,
    };
    drop(el);
    let record = if weighted { WEIGHTED } else { 2 };
    let (rows, touched) = build_rows::<T>(&blocks, comm.rank(), &received, record);
    drop(received);
    numbered(comm, &blocks, rows, &touched, labels)
}

/// This rank's block of the graph of a `.npz` archive that already stores it (a square CSR or
/// CSC archive of a simple graph but for loops, each entry's mirror of the same value, every
/// value a weight MCL takes: what `gmcl generate --undirected` writes, and SciPy's adjacency of
/// an undirected graph), read as stored with no edge exchange ([`stored::row_block`]): its
/// rows are the single-process ones (a pair's larger weight is either's), and a vertex is
/// touched where its row stores any entry (its loop too; a symmetric pattern's columns name no
/// other). `None`, on every rank, for any other file. Collective.
fn stored_block<T: Scalar>(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
) -> Result<Option<GraphBlock<T>>> {
    // The single-process checks of a weight ([`check_weights`]): where one fails, the general
    // path names it.
    let weight = |w: f64| w >= 0.0 && w.is_finite() && T::from_f64(w).to_f64().is_finite();
    let load = SymmetryCheck::Load;
    let read = stored::row_block(comm, path, format, stage_edges, load, Some(&weight))?;
    let Some(StoredRows {
        rows,
        values: Some(values),
        ..
    }) = read
    else {
        return Ok(None);
    };
    let RowBlock {
        blocks, ptr, adj, ..
    } = rows;
    let len = blocks.range(comm.rank()).len();
    let vals: Vec<T> = values.values.par_iter().map(|&w| T::from_f64(w)).collect();
    let rows = Ok(Csr::from_parts_unchecked(len, blocks.n, ptr, adj, vals));
    numbered(comm, &blocks, rows, &values.stored, None).map(Some)
}

/// The graph block from this rank's `rows` of `blocks` (columns and rows the file's vertex
/// ids, or the error building them) and its rows' `touched` flags: the touched ids renumbered
/// in order on every rank, the untouched rows left out. Collective.
fn numbered<T: Scalar>(
    comm: &dyn Comm,
    blocks: &Blocks,
    rows: Result<Csr<T>>,
    touched: &[u8],
    labels: Option<LabelShare>,
) -> Result<GraphBlock<T>> {
    let rows = agree(comm, rows)?;
    // Every rank learns which ids are touched: one byte per id, gathered in rank order.
    let (flags, _) = comm.all_gather_bytes(touched);
    let mut new_id = vec![u32::MAX; flags.len()];
    let mut ids = Vec::new();
    for (v, &f) in flags.iter().enumerate() {
        if f != 0 {
            new_id[v] = ids.len() as u32;
            ids.push(v as u32);
        }
    }
    let starts: Vec<usize> = (0..=comm.size())
        .map(|p| {
            let s = blocks.start(p);
            flags[..s].iter().filter(|&&f| f != 0).count()
        })
        .collect();
    drop(flags);
    let nodes = ids.len();
    // The block's touched rows (an untouched row is empty), renumbered: the numbering is
    // monotone, so each row stays sorted.
    let (_, _, old_ptr, mut cols, vals) = rows.into_parts();
    let mut row_ptr = vec![0u64];
    row_ptr.extend(
        (0..touched.len())
            .filter(|&i| touched[i] != 0)
            .map(|i| old_ptr[i + 1]),
    );
    cols.par_iter_mut()
        .with_min_len(1 << 14)
        .for_each(|c| *c = new_id[*c as usize]);
    let local = row_ptr.len() - 1;
    Ok(GraphBlock {
        rank: comm.rank(),
        starts,
        rows: Csr::from_parts_unchecked(local, nodes, row_ptr, cols, vals),
        ids,
        vertices: blocks.n,
        labels,
    })
}

/// The single-process checks of a part's weights: finite and not negative (the message of
/// [`crate::mcl::graph_from_edges`]), and within the value type's range; a loop's weight is
/// never used (MCL replaces every loop). Edges are named by the file's ids or labels.
fn check_weights<T: Scalar>(
    el: &crate::edges::EdgeList,
    labels: &io::Labels,
    path: &Path,
) -> Result<()> {
    let Some(w) = &el.weights else {
        return Ok(());
    };
    let bad = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    let edge = |i: usize| el.edges[i].0 != el.edges[i].1;
    if let Some(i) = (0..w.len()).position(|i| edge(i) && !(w[i] >= 0.0 && w[i].is_finite())) {
        let (u, v) = (labels.label(el.edges[i].0), labels.label(el.edges[i].1));
        return Err(bad(format!(
            "edge ({u}, {v}) weighs {}: MCL needs weights that are finite and not negative",
            w[i]
        )));
    }
    if let Some(i) = (0..w.len()).position(|i| edge(i) && !T::from_f64(w[i]).to_f64().is_finite()) {
        let (u, v) = (labels.label(el.edges[i].0), labels.label(el.edges[i].1));
        return Err(bad(format!(
            "edge ({u}, {v}): weight {:e} does not fit the value type {} (it would become \
             infinite and change the answer); run with --precision f64",
            w[i],
            T::NAME
        )));
    }
    Ok(())
}

/// Buckets of consecutive vertex ids in which [`equal_records`] counts the records (a bucket's
/// ids go to one block).
const BUCKETS: usize = 1 << 16;

/// The file's `n` vertex ids cut into blocks of about equal records, one block a rank (each
/// edge makes a record for each end, a loop one): R-MAT's hubs at low ids would give the first
/// of two blocks of equal ids most of the records, and with them most of the exchange and of
/// the rows to build. Counted by buckets of consecutive ids on every rank and summed; a block
/// ends after the bucket whose running sum reaches its share. The clusters do not depend on the
/// cut. Collective.
fn equal_records(comm: &dyn Comm, el: &EdgeList, n: usize) -> Blocks {
    let parts = comm.size();
    if parts == 1 || n == 0 {
        return Blocks::even(n, parts);
    }
    let width = n.div_ceil(BUCKETS);
    let buckets = n.div_ceil(width);
    let chunk = el
        .edges
        .len()
        .div_ceil(4 * rayon::current_num_threads())
        .max(1 << 16);
    let mut counts = el
        .edges
        .par_chunks(chunk)
        .map(|edges| {
            let mut c = vec![0u64; buckets];
            for &(u, v) in edges {
                c[u as usize / width] += 1;
                if u != v {
                    c[v as usize / width] += 1;
                }
            }
            c
        })
        .reduce(
            || vec![0u64; buckets],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    comm.sum_u64(&mut counts);
    Blocks::at(cut_at_shares(&counts, width, n, parts))
}

/// The first ids of `parts` blocks (then `n`) over buckets of `width` ids holding `counts`
/// records: block `q` starts after the bucket whose running sum reaches `q / parts` of the
/// records (at `n` where none is left).
fn cut_at_shares(counts: &[u64], width: usize, n: usize, parts: usize) -> Vec<usize> {
    let total: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    let mut cut = vec![n; parts + 1];
    cut[0] = 0;
    if total == 0 {
        return cut;
    }
    let (mut run, mut q) = (0u128, 1);
    for (b, &c) in counts.iter().enumerate() {
        run += u128::from(c);
        while q < parts && run * parts as u128 >= total * q as u128 {
            cut[q] = ((b + 1) * width).min(n);
            q += 1;
        }
    }
    cut
}

/// This rank's records from every rank's edges `el` (records of `W` words: [`WEIGHTED`] or 2),
/// sent in rounds of at most `stage_edges` edges a rank. Collective.
fn exchange<const W: usize>(
    comm: &dyn Comm,
    el: &EdgeList,
    blocks: &Blocks,
    stage_edges: usize,
) -> Result<Vec<u32>> {
    // Each edge is at most two records.
    let stage = stage_edges.clamp(1, MAX_MESSAGE / (2 * W));
    let mut received: Vec<u32> = Vec::new();
    in_rounds(comm, el.edges.len(), stage, |r| {
        let source = Records {
            edges: &el.edges[r.clone()],
            weights: el.weights.as_ref().map(|w| &w[r]),
        };
        let (send, counts) = by_owner::<W>(&source, blocks);
        comm.all_to_all_append(&send, &counts, &mut received);
    })?;
    Ok(received)
}

/// Edges as the records their rows' owners take: `(u, v)` and `(v, u)`, or `(u, u)` once, each
/// followed by the edge's weight bits (1 when `weights` is `None`) in a record of
/// [`WEIGHTED`] words.
struct Records<'a> {
    edges: &'a [(u32, u32)],
    weights: Option<&'a [f64]>,
}

impl<const W: usize> RecordSource<W> for Records<'_> {
    fn items(&self) -> usize {
        self.edges.len()
    }

    fn records(&self, range: std::ops::Range<usize>, mut out: impl FnMut([u32; W])) {
        for k in range {
            let (u, v) = self.edges[k];
            let bits = self.weights.map_or(1.0, |w| w[k]).to_bits();
            let mut record = [0u32; W];
            let mut put = |a: u32, b: u32| {
                record[0] = a;
                record[1] = b;
                if W == WEIGHTED {
                    record[2] = bits as u32;
                    record[3] = (bits >> 32) as u32;
                }
                out(record);
            };
            put(u, v);
            if u != v {
                put(v, u);
            }
        }
    }
}

/// The block's rows from the records it received (of `record` words each), built as the single
/// process builds the graph: each row sorted by column, equal columns combined by the larger
/// value, self loops dropped; and one flag byte per row of the block, set when some record named
/// it. The columns are the file's vertex ids.
fn build_rows<T: Scalar>(
    blocks: &Blocks,
    rank: usize,
    records: &[u32],
    record: usize,
) -> (Result<Csr<T>>, Vec<u8>) {
    let first = blocks.start(rank) as u32;
    let len = blocks.range(rank).len();
    let touched: Vec<AtomicU8> = (0..len).map(|_| AtomicU8::new(0)).collect();
    // Rows numbered within the block: a loop is dropped here, where row and column are both
    // the file's ids.
    let kept = records
        .par_chunks_exact(record)
        .with_min_len(1 << 14)
        .filter(|r| {
            // Written once: a hub's flag stored by every thread would bounce between cores.
            let flag = &touched[(r[0] - first) as usize];
            if flag.load(Ordering::Relaxed) == 0 {
                flag.store(1, Ordering::Relaxed);
            }
            r[0] != r[1]
        });
    let (edges, weights) = match record == WEIGHTED {
        true => {
            let (edges, weights) = kept
                .map(|r| {
                    let w = f64::from_bits(u64::from(r[2]) | (u64::from(r[3]) << 32));
                    ((r[0] - first, r[1]), w)
                })
                .unzip();
            (edges, Some(weights))
        }
        false => (kept.map(|r| (r[0] - first, r[1])).collect(), None),
    };
    let el = EdgeList {
        nrows: len,
        ncols: blocks.n,
        edges,
        weights,
    };
    let rows = Csr::from_edges(
        &el,
        &BuildOptions {
            symmetrize: false,
            drop_self_loops: false,
            duplicates: Duplicates::Max,
        },
    );
    (
        rows,
        touched.into_iter().map(AtomicU8::into_inner).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::on_ranks;
    use crate::generate::rng::SplitMix64;

    #[test]
    fn blocks_end_where_the_running_records_reach_their_share() {
        // Buckets of 4 ids over 14 ids: a hub bucket first.
        assert_eq!(cut_at_shares(&[6, 1, 1, 2], 4, 14, 2), vec![0, 4, 14]);
        assert_eq!(cut_at_shares(&[1, 1, 1, 1], 4, 14, 2), vec![0, 8, 14]);
        assert_eq!(
            cut_at_shares(&[1, 1, 1, 1], 4, 14, 4),
            vec![0, 4, 8, 12, 14]
        );
        // More ranks than buckets with records: the last blocks are empty, ending at n.
        assert_eq!(cut_at_shares(&[9, 0, 0], 4, 10, 3), vec![0, 4, 4, 10]);
        assert_eq!(cut_at_shares(&[0, 0], 4, 6, 2), vec![0, 6, 6]);
    }

    /// Checks every rank's block of `path` against the single-process graph of the file, on 1
    /// to 3 ranks, and that the archive is read as stored exactly when `as_stored`.
    fn blocks_match_one_process(path: &Path, as_stored: bool) {
        let whole = crate::io::load(path, None).unwrap().edges;
        let (g, ids) = crate::mcl::graph_from_edges::<f32>(&whole).unwrap();
        for ranks in [1, 2, 3] {
            let what = format!("{} on {ranks} ranks", path.display());
            let got = on_ranks(ranks, |c| {
                let stored = stored_block::<f32>(c, path, None, 64).unwrap();
                (stored, load_graph::<f32>(c, path, None, 64).unwrap())
            });
            for (stored, b) in got {
                assert_eq!(stored.is_some(), as_stored, "{what}");
                if let Some(s) = stored {
                    assert_eq!(s, b, "{what}");
                }
                assert_eq!(b.ids, ids, "{what}");
                assert_eq!(b.nodes(), g.nrows(), "{what}");
                for (i, node) in b.range().enumerate() {
                    assert_eq!(b.rows.row(i), g.row(node), "{what}: node {node}");
                }
            }
        }
    }

    /// A `.npz` archive of a simple graph with loops, each entry's mirror of the same weight, is
    /// read as stored, and gives the single-process rows, its loop-only vertices kept and
    /// untouched ones left out; one whose pairs weigh differently either way round, or whose
    /// pattern is not symmetric, takes the general path and gives them too.
    #[test]
    fn archives_of_symmetric_graphs_are_read_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let mut el = crate::generate::generate(&crate::generate::RmatParams {
            undirected: true,
            seed: 5,
            ..crate::generate::RmatParams::new(9, 4 << 9)
        })
        .unwrap();
        let touched: std::collections::HashSet<u32> =
            el.edges.iter().flat_map(|&(u, v)| [u, v]).collect();
        let untouched: Vec<u32> = (0..512).filter(|v| !touched.contains(v)).collect();
        assert!(untouched.len() > 4, "some vertices untouched");
        // Loops, two on vertices no edge touches; the last vertex left untouched.
        el.edges.extend([
            (3, 3),
            (untouched[0], untouched[0]),
            (untouched[2], untouched[2]),
        ]);
        let build = BuildOptions {
            symmetrize: true,
            drop_self_loops: false,
            duplicates: Duplicates::Max,
        };
        let ones = Csr::<f64>::from_edges(&el, &build).unwrap();
        let write = |name: &str, m: &Csr<f64>| {
            let path = dir.path().join(name);
            let f = std::fs::File::create(&path).unwrap();
            crate::io::npz::write(std::io::BufWriter::new(f), m).unwrap();
            path
        };
        blocks_match_one_process(&write("ones.npz", &ones), true);
        let (n, _, ptr, cols, _) = ones.into_parts();
        let row = |i: usize| &cols[ptr[i] as usize..ptr[i + 1] as usize];
        // Weights other than 1, the same either way round.
        let weighted: Vec<f64> = (0..n)
            .flat_map(|i| {
                row(i)
                    .iter()
                    .map(move |&j| 1.0 + (i as u32 ^ j) as f64 / 4.0)
            })
            .collect();
        let m = Csr::from_parts_unchecked(n, n, ptr.clone(), cols.clone(), weighted);
        blocks_match_one_process(&write("weighted.npz", &m), true);
        // A pair's two weights differ: the larger is both's.
        let lopsided: Vec<f64> = (0..n)
            .flat_map(|i| {
                row(i)
                    .iter()
                    .map(move |&j| 1.0 + (i as u32 % 7 + j % 3) as f64)
            })
            .collect();
        let m = Csr::from_parts_unchecked(n, n, ptr.clone(), cols.clone(), lopsided);
        blocks_match_one_process(&write("lopsided.npz", &m), false);
        // One pair alone weighs differently either way round: the pair farthest apart, between
        // the first and the last block on 2 and 3 ranks.
        let mut one_pair: Vec<f64> = vec![2.0; cols.len()];
        let far = |i: usize| row(i).last().map_or(0, |&j| (j as usize).saturating_sub(i));
        let hub = (0..n).max_by_key(|&i| far(i)).unwrap();
        one_pair[ptr[hub + 1] as usize - 1] = 3.0;
        let m = Csr::from_parts_unchecked(n, n, ptr.clone(), cols.clone(), one_pair);
        blocks_match_one_process(&write("one-pair.npz", &m), false);
        // One entry's mirror missing.
        let mut entries: Vec<(u32, u32)> = (0..n)
            .flat_map(|i| row(i).iter().map(move |&j| (i as u32, j)))
            .collect();
        let k = entries.iter().position(|&(i, j)| i != j).unwrap();
        entries.remove(k);
        let one_way = EdgeList {
            nrows: n,
            ncols: n,
            edges: entries,
            weights: None,
        };
        let no_mirror = BuildOptions {
            symmetrize: false,
            ..build
        };
        let asym = Csr::<f64>::from_edges(&one_way, &no_mirror).unwrap();
        blocks_match_one_process(&write("one-way.npz", &asym), false);
    }

    /// Every rank's rows are the single-process graph's rows of its nodes, bit for bit, on any
    /// number of ranks and rounds: loops (dropped, their vertices kept), edges given twice either
    /// way round (the larger weight kept), hubs.
    #[test]
    fn blocks_hold_the_single_process_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = SplitMix64::new(7);
        let (mut el, mut wel) = (String::new(), String::new());
        for _ in 0..3000 {
            let r = rng.next_u64();
            // Low ids more often: hubs, and rows on every rank.
            let u = (r % 400) as u32 >> ((r >> 40) % 4);
            let v = ((r >> 16) % 400) as u32;
            let w = ((r >> 32) % 1000) as f64 / 7.0;
            el.push_str(&format!("{u} {v}\n"));
            wel.push_str(&format!("{u} {v} {w}\n"));
            if r % 5 == 0 {
                el.push_str(&format!("{v} {u}\n{u} {u}\n"));
                wel.push_str(&format!("{v} {u} {}\n", w + 1.0));
            }
        }
        for (name, text) in [("g.el", el), ("g.wel", wel)] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let whole = crate::io::load(&path, None).unwrap().edges;
            let (g, ids) = crate::mcl::graph_from_edges::<f32>(&whole).unwrap();
            for ranks in [1, 2, 3] {
                for stage in [1 << 20, 97] {
                    for b in on_ranks(ranks, |c| load_graph::<f32>(c, &path, None, stage).unwrap())
                    {
                        assert_eq!(b.ids, ids, "{name} on {ranks} ranks");
                        assert_eq!(b.nodes(), g.nrows());
                        for (i, node) in b.range().enumerate() {
                            assert_eq!(
                                b.rows.row(i),
                                g.row(node),
                                "{name}, {ranks} ranks, rounds of {stage}: node {node}"
                            );
                        }
                    }
                }
            }
        }
    }
}
