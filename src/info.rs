//! Summary statistics of a loaded graph, as `gmcl info` prints them.

use crate::csr::{BuildOptions, Csr, Duplicates};
use crate::edges::EdgeList;
use crate::error::Result;
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
        let degrees: Vec<u64> = (0..vertices)
            .into_par_iter()
            .map(|i| {
                let cols = undirected.row(i).0;
                (cols.len() - cols.binary_search(&(i as u32)).map_or(0, |_| 1)) as u64
            })
            .collect();
        let records = if symmetric_storage {
            (el.len() as u64 + self_loops) / 2
        } else {
            el.len() as u64
        };
        Ok(GraphInfo {
            vertices: vertices as u64,
            edges: records,
            self_loops,
            duplicate_edges: (el.len() - directed.nnz()) as u64,
            symmetric,
            max_degree: degrees.par_iter().copied().max().unwrap_or(0),
            avg_degree: if vertices == 0 {
                0.0
            } else {
                degrees.par_iter().sum::<u64>() as f64 / vertices as f64
            },
        })
    }
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
    }

    #[test]
    fn empty_graph() {
        let i = GraphInfo::of(&EdgeList::default(), false).unwrap();
        assert_eq!((i.vertices, i.edges, i.max_degree), (0, 0, 0));
        assert!(i.symmetric);
    }
}
