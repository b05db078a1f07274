//! Edge lists: what the loaders and the generator produce and the CSR builder consumes.

use rayon::prelude::*;

/// A list of directed edges `(row, col)` with optional weights, and the matrix shape they live in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EdgeList {
    /// Number of rows (source vertices).
    pub nrows: usize,
    /// Number of columns (target vertices); equal to `nrows` for a graph.
    pub ncols: usize,
    /// The edges, in file order.
    pub edges: Vec<(u32, u32)>,
    /// One weight per edge, or `None` when every edge weighs 1.
    pub weights: Option<Vec<f64>>,
}

impl EdgeList {
    /// An edge list over an `n × n` vertex set.
    pub fn square(n: usize, edges: Vec<(u32, u32)>, weights: Option<Vec<f64>>) -> Self {
        EdgeList {
            nrows: n,
            ncols: n,
            edges,
            weights,
        }
    }

    /// Number of edges.
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    /// True when there are no edges.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// The weight of edge `i` (1 when unweighted).
    #[inline]
    pub fn weight(&self, i: usize) -> f64 {
        self.weights.as_ref().map_or(1.0, |w| w[i])
    }

    /// Renumbers the vertices that occur in some edge to `0..k`, keeping their order, and
    /// returns the original id of each new id. Rows and columns share one numbering, so the
    /// list must be square. Vertices with no edge disappear.
    pub fn compact_ids(&mut self) -> Vec<u32> {
        let n = self.nrows.max(self.ncols);
        let used: Vec<std::sync::atomic::AtomicBool> = (0..n)
            .into_par_iter()
            .map(|_| std::sync::atomic::AtomicBool::new(false))
            .collect();
        self.edges.par_iter().for_each(|&(u, v)| {
            use std::sync::atomic::Ordering::Relaxed;
            used[u as usize].store(true, Relaxed);
            used[v as usize].store(true, Relaxed);
        });
        let mut new_id = vec![u32::MAX; n];
        let mut original = Vec::new();
        for (id, flag) in used.iter().enumerate() {
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                new_id[id] = original.len() as u32;
                original.push(id as u32);
            }
        }
        self.edges.par_iter_mut().for_each(|e| {
            *e = (new_id[e.0 as usize], new_id[e.1 as usize]);
        });
        self.nrows = original.len();
        self.ncols = original.len();
        original
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_order_and_maps_back() {
        let mut el = EdgeList::square(100, vec![(90, 7), (7, 42), (42, 42)], None);
        let orig = el.compact_ids();
        assert_eq!(orig, vec![7, 42, 90]);
        assert_eq!(el.edges, vec![(2, 0), (0, 1), (1, 1)]);
        assert_eq!(el.nrows, 3);
    }

    #[test]
    fn compact_of_empty_is_empty() {
        let mut el = EdgeList::square(5, vec![], None);
        assert!(el.compact_ids().is_empty());
        assert_eq!(el.nrows, 0);
    }
}
