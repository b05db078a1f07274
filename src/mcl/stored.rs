//! The graph MCL clusters, built from a `.npz` archive's stored rows or columns with no edge list
//! in between: the same graph [`super::graph_from_edges`] builds from the same entries listed as
//! edges, node for node and bit for bit.

use super::weight_refused;
use crate::csr::{BuildOptions, Csr, Duplicates, RowEntries};
use crate::error::{Error, Result};
use crate::io::StoredMatrix;
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// [`super::graph_from_edges`] of a matrix as an archive stores it: only the vertices some entry
/// touches, renumbered in order; symmetric, the larger weight kept for a pair given twice (either
/// way round), self loops dropped. Returns the graph and, for each of its nodes, its vertex id.
/// A matrix stored by columns is built from its transpose as it is: the symmetric graph of a
/// matrix and of its transpose are the same. The checks and their messages are those of the
/// edge list (the first bad weight in stored order, which is the edge order).
pub fn graph_from_stored<T: Scalar>(m: StoredMatrix) -> Result<(Csr<T>, Vec<u32>)> {
    let (nrows, ncols) = m.shape();
    if nrows != ncols {
        return Err(Error::Invalid(format!(
            "cannot cluster a {nrows} x {ncols} matrix: it is not square"
        )));
    }
    if let Some(w) = &m.entries.values {
        if let Some(k) = w
            .par_iter()
            .position_first(|&x| !(x >= 0.0 && x.is_finite()))
        {
            let (u, v) = m.entry(k);
            return Err(weight_refused((&u.to_string(), &v.to_string()), w[k]));
        }
    }
    let (rows, ids) = compact(m.entries);
    let g = Csr::from_row_entries(
        rows,
        &BuildOptions {
            symmetrize: true,
            drop_self_loops: true,
            duplicates: Duplicates::Max,
        },
    )?;
    Ok((g, ids))
}

/// Renumbers the vertices of square grouped entries that some entry touches (a non-empty group,
/// or a column) to `0..k` in order, as [`crate::EdgeList::compact_ids`] does an edge list's;
/// returns the entries and the original id of each new id.
fn compact(mut rows: RowEntries) -> (RowEntries, Vec<u32>) {
    let n = rows.nrows;
    let used: Vec<AtomicBool> = (0..n)
        .into_par_iter()
        .map(|_| AtomicBool::new(false))
        .collect();
    rows.cols
        .par_iter()
        .for_each(|&j| used[j as usize].store(true, Relaxed));
    let mut new_id = vec![u32::MAX; n];
    let mut original = Vec::new();
    for (i, flag) in used.iter().enumerate() {
        if flag.load(Relaxed) || rows.ptr[i] < rows.ptr[i + 1] {
            new_id[i] = original.len() as u32;
            original.push(i as u32);
        }
    }
    drop(used);
    rows.cols
        .par_iter_mut()
        .for_each(|j| *j = new_id[*j as usize]);
    // A vertex left out has an empty group, so each kept group ends where the next kept one
    // starts.
    let mut ptr: Vec<u64> = original.iter().map(|&i| rows.ptr[i as usize]).collect();
    ptr.push(rows.cols.len() as u64);
    let k = original.len();
    (
        RowEntries {
            nrows: k,
            ncols: k,
            ptr,
            ..rows
        },
        original,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edges::EdgeList;
    use proptest::prelude::*;

    /// The entries as the edge list the archive's reader lists them in.
    fn edges_of(m: &StoredMatrix) -> EdgeList {
        let (nrows, ncols) = m.shape();
        EdgeList {
            nrows,
            ncols,
            edges: (0..m.len()).map(|k| m.entry(k)).collect(),
            weights: m.entries.values.clone(),
        }
    }

    fn stored(
        n: usize,
        groups: &[Vec<(u32, u32)>],
        weighted: bool,
        transposed: bool,
    ) -> StoredMatrix {
        let mut e = RowEntries {
            nrows: n,
            ncols: n,
            ptr: vec![0],
            ..Default::default()
        };
        let mut values = Vec::new();
        for i in 0..n {
            for &(j, w) in groups.get(i).map_or(&[][..], |g| g) {
                e.cols.push(j % n as u32);
                values.push(w as f64 * 0.25);
            }
            e.ptr.push(e.cols.len() as u64);
        }
        e.values = weighted.then_some(values);
        StoredMatrix {
            entries: e,
            transposed,
        }
    }

    #[test]
    fn errors_name_the_edge_as_the_edge_list_does() {
        let mut m = stored(3, &[vec![(1, 2)], vec![], vec![(0, 1)]], true, true);
        m.entries.values = Some(vec![1.0, -2.0]);
        let want = crate::mcl::graph_from_edges::<f32>(&edges_of(&m)).unwrap_err();
        let got = graph_from_stored::<f32>(m).unwrap_err();
        assert_eq!(got.to_string(), want.to_string());
        assert!(got.to_string().contains("edge (0, 2) weighs -2"), "{got}");
        let mut wide = stored(2, &[vec![(1, 1)]], false, false);
        wide.entries.ncols = 3;
        let e = graph_from_stored::<f32>(wide).unwrap_err().to_string();
        assert!(e.contains("cannot cluster a 2 x 3 matrix"), "{e}");
    }

    proptest! {
        #[test]
        fn same_graph_and_ids_as_from_the_edge_list(
            n in 0usize..14,
            groups in proptest::collection::vec(
                proptest::collection::vec((0u32..14, 0u32..6), 0..6), 0..14),
            weighted in any::<bool>(),
            transposed in any::<bool>(),
        ) {
            // Vertices past n/2 have no group: some are touched as columns only, some not at all.
            let groups: Vec<_> = groups.into_iter().take(n / 2 + 1).collect();
            let m = stored(n.max(1), &groups, weighted, transposed);
            let want = crate::mcl::graph_from_edges::<f64>(&edges_of(&m)).unwrap();
            prop_assert_eq!(graph_from_stored::<f64>(m).unwrap(), want);
        }
    }
}
