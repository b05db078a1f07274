//! The graph MCL clusters, built across ranks as [`crate::mcl::graph_from_edges`] builds it in
//! one process: only the vertices some edge touches, renumbered in id order; symmetric, the
//! larger weight kept for a pair given twice (either way round), self loops dropped.
//!
//! Each rank reads its part of the file; every edge goes, as a record `(row, column, weight)`,
//! to the owner of its row in blocks of the file's vertex ids, both ways round (a self loop goes
//! once, only to mark its vertex as touched). The owner sorts each row as the CSR build does
//! (by column, ties by value) and keeps the larger of equal columns in that order, so every
//! value is bitwise the single-process one. One byte per vertex id tells every rank which ids
//! are touched (a gather of the blocks' flags), from which the compact numbering follows; a
//! rank's nodes are its block's touched ids, so blocks of nodes stay consecutive.

use super::super::labels::LabelShare;
use super::super::{agree, Blocks, Comm, MAX_MESSAGE};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::io::{self, Format};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::path::Path;

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

/// A record: row, column, and the weight's `f64` bits in two words.
const RECORD: usize = 4;

/// Reads this rank's part of `path` and builds its block of the graph. `stage_edges` bounds the
/// parsed edges a rank sends in one round. Collective: an error on any rank is every rank's.
pub fn load_graph<T: Scalar>(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
) -> Result<GraphBlock<T>> {
    let (loaded, labels) =
        super::super::matrix::read_part_checked::<T>(comm, path, format, stage_edges, |l| {
            check_weights::<T>(&l.edges, &l.labels, path)
        })?;
    let el = loaded.edges;
    let mut n = [el.nrows.max(el.ncols) as u64];
    comm.max_u64(&mut n);
    let blocks = Blocks {
        n: n[0] as usize,
        parts: comm.size(),
    };
    // Each edge is at most two records.
    let stage = stage_edges.clamp(1, MAX_MESSAGE / (2 * RECORD));
    let mut rounds = [el.edges.len().div_ceil(stage) as u64];
    comm.max_u64(&mut rounds);
    let mut received: Vec<u32> = Vec::new();
    for round in 0..rounds[0] as usize {
        let lo = (round * stage).min(el.edges.len());
        let hi = (lo + stage).min(el.edges.len());
        let weights = el.weights.as_ref().map(|w| &w[lo..hi]);
        let (send, counts) = records_by_owner(&el.edges[lo..hi], weights, &blocks);
        let (got, _) = comm.all_to_all_u32(&send, &counts);
        received.extend_from_slice(&got);
        agree(comm, crate::interrupt::check())?;
    }
    drop(el);
    let (rows, touched) = build_rows::<T>(&blocks, comm.rank(), &received);
    drop(received);
    // Every rank learns which ids are touched: one byte per id, gathered in rank order.
    let (flags, _) = comm.all_gather_bytes(&touched);
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
    // The block's touched rows, renumbered (in the same order: the numbering is monotone).
    let mut row_ptr = vec![0u64];
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if touched[i] == 0 {
            continue;
        }
        for &(c, v) in row {
            cols.push(new_id[c as usize]);
            vals.push(v);
        }
        row_ptr.push(cols.len() as u64);
    }
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
/// [`crate::mcl::graph_from_edges`]), and within the value type's range.
/// Edges are named by the file's ids or labels.
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
    if let Some(i) = w.iter().position(|&x| !(x >= 0.0 && x.is_finite())) {
        let (u, v) = (labels.label(el.edges[i].0), labels.label(el.edges[i].1));
        return Err(bad(format!(
            "edge ({u}, {v}) weighs {}: MCL needs weights that are finite and not negative",
            w[i]
        )));
    }
    if let Some(i) = w.iter().position(|&x| !T::from_f64(x).to_f64().is_finite()) {
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

/// The records of `edges` (weights 1 when `None`) grouped by the owner of their row and
/// flattened, with the number of u32s for each owner: `(u, v)` and `(v, u)`, or `(u, u)` once.
fn records_by_owner(
    edges: &[(u32, u32)],
    weights: Option<&[f64]>,
    blocks: &Blocks,
) -> (Vec<u32>, Vec<usize>) {
    let mut counts = vec![0usize; blocks.parts];
    for &(u, v) in edges {
        counts[blocks.owner(u as usize)] += RECORD;
        if u != v {
            counts[blocks.owner(v as usize)] += RECORD;
        }
    }
    let mut at: Vec<usize> = counts
        .iter()
        .scan(0, |s, &c| {
            let start = *s;
            *s += c;
            Some(start)
        })
        .collect();
    let mut send = vec![0u32; counts.iter().sum()];
    for (k, &(u, v)) in edges.iter().enumerate() {
        let bits = weights.map_or(1.0, |w| w[k]).to_bits();
        let mut put = |a: u32, b: u32| {
            let o = blocks.owner(a as usize);
            send[at[o]..at[o] + RECORD].copy_from_slice(&[a, b, bits as u32, (bits >> 32) as u32]);
            at[o] += RECORD;
        };
        put(u, v);
        if u != v {
            put(v, u);
        }
    }
    (send, counts)
}

/// The block's rows from the records it received: each row's entries sorted by column (ties by
/// value) and equal columns combined by the larger value in that order, self loops dropped;
/// and one flag byte per row of the block, set when some record named it.
#[allow(clippy::type_complexity)]
fn build_rows<T: Scalar>(
    blocks: &Blocks,
    rank: usize,
    records: &[u32],
) -> (Vec<Vec<(u32, T)>>, Vec<u8>) {
    let first = blocks.start(rank);
    let len = blocks.range(rank).len();
    let mut touched = vec![0u8; len];
    let mut rows: Vec<Vec<(u32, T)>> = vec![Vec::new(); len];
    for r in records.chunks_exact(RECORD) {
        let (u, v) = (r[0], r[1]);
        let i = u as usize - first;
        touched[i] = 1;
        if u != v {
            let w = f64::from_bits(u64::from(r[2]) | (u64::from(r[3]) << 32));
            rows[i].push((v, T::from_f64(w)));
        }
    }
    rows.par_iter_mut().with_min_len(256).for_each(|row| {
        row.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.total_cmp(&b.1)));
        let mut w = 0;
        for r in 1..row.len() {
            if row[r].0 == row[w].0 {
                row[w].1 = row[w].1.max_of(row[r].1);
            } else {
                w += 1;
                row[w] = row[r];
            }
        }
        row.truncate((w + 1).min(row.len()));
    });
    (rows, touched)
}
