//! Summary statistics of a loaded graph, as `gmcl info` prints them.

use crate::csr::{BuildOptions, Csr, Duplicates, RowEntries};
use crate::edges::EdgeList;
use crate::error::Result;
use crate::io::StoredMatrix;
use rayon::prelude::*;
use serde::Serialize;

/// What `gmcl info` allocates per vertex (CSR row offsets, degrees in and out, the symmetry
/// check's per-row cursors) and per edge (the CSR's columns, the build's bucket copy).
pub const FOOTPRINT: crate::io::limits::Footprint = crate::io::limits::Footprint {
    command: "info",
    per_vertex: 32,
    per_edge: 32,
};

/// What `gmcl info` reports. Degrees are counted in the undirected simple view of the graph
/// (distinct neighbours, ignoring direction and self loops).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GraphInfo {
    /// Number of vertices (the larger dimension for a rectangular matrix).
    pub vertices: u64,
    /// Number of edge records in the input (for Matrix Market `symmetric` files, the stored
    /// triangle's entries).
    pub edges: u64,
    /// Records with equal endpoints.
    pub self_loops: u64,
    /// Records that repeat an earlier `(u, v)` pair of the expanded matrix.
    pub duplicate_edges: u64,
    /// True when every edge `(u, v)` has its reverse `(v, u)`.
    pub symmetric: bool,
    /// Largest number of distinct neighbours of a vertex.
    pub max_degree: u64,
    /// Mean number of distinct neighbours per vertex.
    pub avg_degree: f64,
}

impl GraphInfo {
    /// Computes the statistics. `symmetric_storage` says the list was expanded from a
    /// Matrix Market `symmetric` file, whose records hold each off-diagonal pair once.
    pub fn of(el: &EdgeList, symmetric_storage: bool) -> Result<GraphInfo> {
        let vertices = el.nrows.max(el.ncols);
        let self_loops = el.edges.par_iter().filter(|(u, v)| u == v).count() as u64;
        // Structure only, on a square vertex set: weights do not matter here.
        let view = EdgeList::square(vertices, el.edges.clone(), None);
        let pattern = |symmetrize: bool| -> Result<Csr<f32>> {
            let opts = BuildOptions {
                symmetrize,
                drop_self_loops: false,
                duplicates: Duplicates::Sum,
            };
            Csr::from_edges(&view, &opts)
        };
        let directed = pattern(false)?;
        let undirected = pattern(true)?;
        // U = D ∪ Dᵀ has as many entries as D exactly when Dᵀ ⊆ D.
        let symmetric = directed.nnz() == undirected.nnz();
        let (max_degree, degree_sum) = degrees(&undirected);
        // A `symmetric` file's records stand for an off-diagonal pair twice in the list, a
        // diagonal entry once; so do its distinct pairs in `directed`.
        let (records, distinct) = if symmetric_storage {
            let loops = (0..directed.nrows())
                .into_par_iter()
                .filter(|&i| directed.row(i).0.binary_search(&(i as u32)).is_ok())
                .count();
            (
                (el.len() as u64 + self_loops) / 2,
                (directed.nnz() + loops) as u64 / 2,
            )
        } else {
            (el.len() as u64, directed.nnz() as u64)
        };
        Ok(GraphInfo {
            vertices: vertices as u64,
            edges: records,
            self_loops,
            duplicate_edges: records - distinct,
            symmetric,
            max_degree,
            avg_degree: if vertices == 0 {
                0.0
            } else {
                degree_sum as f64 / vertices as f64
            },
        })
    }
}

impl GraphInfo {
    /// [`GraphInfo::of`] of a matrix as an archive stores it (by rows or by columns): the same
    /// figures as of the same entries listed as edges, with no edge list made. Every figure is
    /// the same for a matrix and its transpose, so columns are read as they are.
    pub fn of_stored(m: &StoredMatrix) -> Result<GraphInfo> {
        let (nrows, ncols) = m.shape();
        let vertices = nrows.max(ncols);
        let e = &m.entries;
        // The groups made square, structure only.
        let mut ptr = e.ptr.clone();
        ptr.resize(vertices + 1, e.cols.len() as u64);
        if let Some(info) = Self::of_symmetric(e, &ptr) {
            return Ok(info);
        }
        let square = RowEntries {
            nrows: vertices,
            ncols: vertices,
            ptr,
            cols: e.cols.clone(),
            values: None,
        };
        let groups = || (0..e.nrows).into_par_iter().with_min_len(1024);
        let self_loops: u64 = groups()
            .map(|i| group(e, i).iter().filter(|&&j| j as usize == i).count() as u64)
            .sum();
        let distinct: u64 = groups().map(|i| distinct_in(group(e, i))).sum();
        let undirected = Csr::<f32>::from_row_entries(
            square,
            &BuildOptions {
                symmetrize: true,
                drop_self_loops: false,
                duplicates: Duplicates::Sum,
            },
        )?;
        let (max_degree, degree_sum) = degrees(&undirected);
        let records = m.len() as u64;
        Ok(GraphInfo {
            vertices: vertices as u64,
            edges: records,
            self_loops,
            duplicate_edges: records - distinct,
            symmetric: distinct == undirected.nnz() as u64,
            max_degree,
            avg_degree: if vertices == 0 {
                0.0
            } else {
                degree_sum as f64 / vertices as f64
            },
        })
    }
}

impl GraphInfo {
    /// [`GraphInfo::of_stored`] of groups that already are the undirected graph — each strictly
    /// increasing, the pattern symmetric (loops allowed) — from the groups as they are:
    /// `square_ptr` are their offsets over all vertices. `None` for any other pattern. (A
    /// symmetric archive, as `generate --undirected` and SciPy write them, then needs no
    /// symmetrized copy.)
    fn of_symmetric(e: &RowEntries, square_ptr: &[u64]) -> Option<GraphInfo> {
        let vertices = square_ptr.len() - 1;
        let groups = || (0..e.nrows).into_par_iter().with_min_len(1024);
        let increasing = groups().all(|i| group(e, i).windows(2).all(|w| w[0] < w[1]));
        if !increasing || !crate::csr::is_symmetric(square_ptr, &e.cols) {
            return None;
        }
        // Each group's distinct neighbours other than itself.
        let (self_loops, max_degree) = groups()
            .map(|i| {
                let g = group(e, i);
                let looped = g.binary_search(&(i as u32)).is_ok() as u64;
                (looped, g.len() as u64 - looped)
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1)));
        let records = e.cols.len() as u64;
        let degree_sum = records - self_loops;
        Some(GraphInfo {
            vertices: vertices as u64,
            edges: records,
            self_loops,
            duplicate_edges: 0,
            symmetric: true,
            max_degree,
            avg_degree: if vertices == 0 {
                0.0
            } else {
                degree_sum as f64 / vertices as f64
            },
        })
    }
}

/// The entries of group `i`.
fn group(e: &RowEntries, i: usize) -> &[u32] {
    &e.cols[e.ptr[i] as usize..e.ptr[i + 1] as usize]
}

/// How many distinct columns a group holds.
fn distinct_in(cols: &[u32]) -> u64 {
    if cols.windows(2).all(|w| w[0] < w[1]) {
        return cols.len() as u64;
    }
    let mut sorted = cols.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.len() as u64
}

/// The largest and the sum of the vertices' degrees in the undirected pattern `u`: distinct
/// neighbours, the vertex itself not counted.
fn degrees(u: &Csr<f32>) -> (u64, u64) {
    (0..u.nrows())
        .into_par_iter()
        .map(|i| {
            let cols = u.row(i).0;
            (cols.len() - cols.binary_search(&(i as u32)).map_or(0, |_| 1)) as u64
        })
        .fold(|| (0, 0), |(m, s), d| (m.max(d), s + d))
        .reduce(|| (0, 0), |a, b| (a.0.max(b.0), a.1 + b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_loops_duplicates_and_symmetry() {
        let el = EdgeList::square(4, vec![(0, 1), (1, 0), (0, 1), (2, 2), (2, 3)], None);
        let i = GraphInfo::of(&el, false).unwrap();
        assert_eq!(i.vertices, 4);
        assert_eq!(i.edges, 5);
        assert_eq!(i.self_loops, 1);
        assert_eq!(i.duplicate_edges, 1);
        assert!(!i.symmetric);
        assert_eq!(i.max_degree, 1);
        assert_eq!(i.avg_degree, 1.0);
        let sym = EdgeList::square(2, vec![(0, 1), (1, 0)], None);
        assert!(GraphInfo::of(&sym, false).unwrap().symmetric);
        // A `symmetric` file's records {1,2} twice, {1,3}, {2,2} twice, expanded: 2 repeats.
        let stored = EdgeList::square(
            3,
            vec![
                (1, 0),
                (1, 0),
                (2, 0),
                (1, 1),
                (1, 1),
                (0, 1),
                (0, 1),
                (0, 2),
            ],
            None,
        );
        let i = GraphInfo::of(&stored, true).unwrap();
        assert_eq!((i.edges, i.self_loops, i.duplicate_edges), (5, 2, 2));
    }

    proptest::proptest! {
        #[test]
        fn stored_entries_give_the_figures_of_their_edges(
            nrows in 1usize..10,
            ncols in 1usize..10,
            groups in proptest::collection::vec(proptest::collection::vec(0u32..10, 0..6), 0..10),
            transposed in proptest::bool::ANY,
        ) {
            let mut e = RowEntries { nrows, ncols, ptr: vec![0], ..Default::default() };
            for i in 0..nrows {
                for &j in groups.get(i).map_or(&[][..], |g| g) {
                    e.cols.push(j % ncols as u32);
                }
                e.ptr.push(e.cols.len() as u64);
            }
            let m = StoredMatrix { entries: e, transposed };
            let (r, c) = m.shape();
            let el = EdgeList { nrows: r, ncols: c, edges: (0..m.len()).map(|k| m.entry(k)).collect(), weights: None };
            proptest::prop_assert_eq!(GraphInfo::of_stored(&m).unwrap(), GraphInfo::of(&el, false).unwrap());
        }
    }

    proptest::proptest! {
        #[test]
        fn symmetric_stored_groups_give_the_figures_of_their_edges(
            n in 1usize..12,
            raw in proptest::collection::vec((0u32..12, 0u32..12), 0..50),
            loops in proptest::bool::ANY,
            transposed in proptest::bool::ANY,
            broken in proptest::option::of(0usize..50),
        ) {
            // A symmetric pattern (with its loops or without), or one entry of it dropped.
            let mut pairs = std::collections::BTreeSet::new();
            for &(i, j) in &raw {
                let (i, j) = (i % n as u32, j % n as u32);
                if i != j || loops {
                    pairs.insert((i, j));
                    pairs.insert((j, i));
                }
            }
            if let Some(k) = broken.filter(|_| !pairs.is_empty()) {
                let gone = *pairs.iter().nth(k % pairs.len()).unwrap();
                pairs.remove(&gone);
            }
            let mut e = RowEntries { nrows: n, ncols: n, ptr: vec![0; n + 1], ..Default::default() };
            for &(i, j) in &pairs {
                e.ptr[i as usize + 1] += 1;
                e.cols.push(j);
            }
            for i in 0..n {
                e.ptr[i + 1] += e.ptr[i];
            }
            let m = StoredMatrix { entries: e, transposed };
            let el = EdgeList { nrows: n, ncols: n, edges: (0..m.len()).map(|k| m.entry(k)).collect(), weights: None };
            let want = GraphInfo::of(&el, false).unwrap();
            proptest::prop_assert_eq!(GraphInfo::of_stored(&m).unwrap(), want.clone());
            proptest::prop_assert_eq!(
                GraphInfo::of_symmetric(&m.entries, &m.entries.ptr).is_some(),
                want.symmetric
            );
        }
    }

    #[test]
    fn empty_graph() {
        let i = GraphInfo::of(&EdgeList::default(), false).unwrap();
        assert_eq!((i.vertices, i.edges, i.max_degree), (0, 0, 0));
        assert!(i.symmetric);
    }
}
