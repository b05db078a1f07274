//! Whether a square pattern already is the adjacency of a simple undirected graph (symmetric, no
//! diagonal entry), decided exactly, so that a caller holding such a pattern (a SciPy graph, a
//! `.npz` archive of an undirected graph) can take it as it is instead of transposing and
//! merging it.

use rayon::prelude::*;

/// Whether the square pattern `(ptr, cols)` holds no `(i, i)` and holds `(j, i)` for every
/// `(i, j)`. The pattern must be a valid CSR pattern: `ptr` runs from 0 to `cols.len()` without
/// decreasing, every column is below the row count, and each row strictly increases.
///
/// Each lower entry `(i, j)`, `j < i`, is matched with the next unmatched upper entry of row `j`
/// (a cursor per row), which must be `i`: taken in order of `i`, the lower entries of column `j`
/// meet the upper entries of row `j` in the order they are sorted in, so one pass decides,
/// without searching. The rows `j` are cut into blocks of about equal entries, one per thread,
/// each with its own cursors and a pass over the lower entries of its columns: the blocks share
/// nothing, and the graph is read once in all.
pub fn is_symmetric_without_loops(ptr: &[u64], cols: &[u32]) -> bool {
    diagonal_block_is_symmetric(0, ptr, cols)
}

/// Whether the square pattern `(ptr, cols)` holds `(j, i)` for every `(i, j)`, diagonal entries
/// allowed; the same pattern requirements and the same single pass as
/// [`is_symmetric_without_loops`].
pub fn is_symmetric(ptr: &[u64], cols: &[u32]) -> bool {
    block_is_symmetric(0, ptr, cols, true)
}

/// [`is_symmetric_without_loops`] for the diagonal block of a larger pattern: `(ptr, cols)` are
/// the rows `first..first + k` (offsets from 0, columns global, each row strictly increasing),
/// and only their entries in the columns `first..first + k` count. Whether that `k x k` block
/// holds no `(i, i)` and holds `(j, i)` for each of its `(i, j)`; one rank of a distributed run
/// decides its own block so, the entries leaving the block being checked across ranks.
pub fn diagonal_block_is_symmetric(first: usize, ptr: &[u64], cols: &[u32]) -> bool {
    block_is_symmetric(first, ptr, cols, false)
}

/// [`diagonal_block_is_symmetric`], diagonal entries allowed when `loops`.
fn block_is_symmetric(first: usize, ptr: &[u64], cols: &[u32], loops: bool) -> bool {
    let n = ptr.len() - 1;
    let blocks = rayon::current_num_threads().clamp(1, n.max(1));
    let mut bounds: Vec<usize> = (0..blocks)
        .map(|k| ptr.partition_point(|&p| p < cols.len() as u64 * k as u64 / blocks as u64))
        .map(|j| j.min(n))
        .collect();
    bounds.push(n);
    bounds.dedup();
    bounds
        .par_windows(2)
        .all(|w| columns_are_symmetric(first, ptr, cols, w[0]..w[1], loops))
}

/// [`diagonal_block_is_symmetric`] for the rows and columns `first + js`: no diagonal entry in
/// those rows (unless `loops`), and their upper entries inside the block are exactly the lower
/// entries of those columns.
fn columns_are_symmetric(
    first: usize,
    ptr: &[u64],
    cols: &[u32],
    js: std::ops::Range<usize>,
    loops: bool,
) -> bool {
    let n = ptr.len() - 1;
    let end = first + n;
    let row = |i: usize| &cols[ptr[i] as usize..ptr[i + 1] as usize];
    // The first entry right of the diagonal in each row (a diagonal entry fails at once unless
    // `loops`), and the end of the row's entries inside the block.
    let mut cursor = Vec::with_capacity(js.len());
    let mut stop = Vec::with_capacity(js.len());
    for j in js.clone() {
        let (r, g) = (row(j), first + j);
        let mut split = r.partition_point(|&c| (c as usize) < g);
        if r.get(split).is_some_and(|&c| c as usize == g) {
            if !loops {
                return false;
            }
            split += 1;
        }
        cursor.push(ptr[j] as usize + split);
        let inside = match r.last() {
            Some(&c) if c as usize >= end => r.partition_point(|&c| (c as usize) < end),
            _ => r.len(),
        };
        stop.push(ptr[j] as usize + inside);
    }
    let lowest = first + js.start;
    for i in js.start + 1..n {
        let r = row(i);
        let from = if lowest == 0 {
            0
        } else {
            r.partition_point(|&c| (c as usize) < lowest)
        };
        let below = first + js.end.min(i);
        for &c in r[from..].iter().take_while(|&&c| (c as usize) < below) {
            let k = c as usize - lowest;
            let at = &mut cursor[k];
            if *at >= stop[k] || cols[*at] as usize != first + i {
                return false;
            }
            *at += 1;
        }
    }
    cursor == stop
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The rows of `n` vertices holding `entries` (each row sorted, no repeats).
    pub(in crate::csr) fn pattern(
        n: usize,
        entries: &BTreeSet<(u32, u32)>,
    ) -> (Vec<u64>, Vec<u32>) {
        let mut ptr = vec![0u64; n + 1];
        for &(i, _) in entries {
            ptr[i as usize + 1] += 1;
        }
        for i in 0..n {
            ptr[i + 1] += ptr[i];
        }
        (ptr, entries.iter().map(|e| e.1).collect())
    }

    /// The definition, checked entry by entry.
    fn reference(entries: &BTreeSet<(u32, u32)>) -> bool {
        entries
            .iter()
            .all(|&(i, j)| i != j && entries.contains(&(j, i)))
    }

    #[test]
    fn the_check_decides_alike_on_any_number_of_threads() {
        let g = crate::csr::Csr::<f32>::from_edges(
            &crate::generate::generate(&crate::generate::RmatParams {
                undirected: true,
                seed: 4,
                no_self_loops: true,
                ..crate::generate::RmatParams::new(12, 8 << 12)
            })
            .unwrap(),
            &crate::csr::BuildOptions {
                symmetrize: true,
                drop_self_loops: true,
                duplicates: crate::csr::Duplicates::Max,
            },
        )
        .unwrap();
        let (ptr, cols) = (g.row_ptr(), g.col_idx());
        // One entry moved to the next column (when that keeps the row sorted) breaks symmetry
        // wherever it lies: first rows, last rows, the hubs, on each task boundary.
        let mut broken = Vec::new();
        for k in (0..cols.len() - 1).step_by(997) {
            if cols[k] + 1 < cols[k + 1] {
                let mut c = cols.to_vec();
                c[k] += 1;
                broken.push(c);
            }
        }
        assert!(broken.len() > 20);
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                assert!(is_symmetric_without_loops(ptr, cols));
                for c in &broken {
                    assert!(!is_symmetric_without_loops(ptr, c), "{threads} threads");
                }
                assert!(is_symmetric_without_loops(&[0], &[]));
                assert!(is_symmetric_without_loops(&[0, 0, 0], &[]));
            });
        }
    }

    #[test]
    fn loops_one_way_entries_and_stand_ins_are_refused() {
        let check = |n: usize, e: &[(u32, u32)]| {
            let (ptr, cols) = pattern(n, &e.iter().copied().collect());
            is_symmetric_without_loops(&ptr, &cols)
        };
        assert!(check(3, &[(0, 1), (1, 0), (1, 2), (2, 1)]));
        assert!(!check(2, &[(0, 1)]));
        assert!(!check(2, &[(1, 0)]));
        assert!(!check(2, &[(0, 0), (0, 1), (1, 0)]));
        assert!(!check(2, &[(0, 1), (1, 0), (1, 1)]));
        // Every row's count matches a symmetric one's, yet (1, 0) is missing and (1, 2) stands
        // in its place.
        assert!(!check(3, &[(0, 1), (0, 2), (1, 2), (2, 0), (2, 1)]));
    }

    proptest! {
        #[test]
        fn a_diagonal_block_decides_as_the_definition_on_its_block(
            n in 1usize..12,
            raw in proptest::collection::vec((0u32..12, 0u32..12), 0..60),
            cut in (0usize..12, 0usize..12),
            mirror in any::<bool>(),
        ) {
            let mut entries: BTreeSet<(u32, u32)> =
                raw.iter().map(|&(i, j)| (i % n as u32, j % n as u32)).collect();
            if mirror {
                let swapped: Vec<_> = entries.iter().map(|&(i, j)| (j, i)).collect();
                entries.extend(swapped);
                entries.retain(|&(i, j)| i != j || raw.len() % 3 == 0);
            }
            let (a, b) = (cut.0 % (n + 1), cut.1 % (n + 1));
            let (first, end) = (a.min(b), a.max(b));
            // The rows `first..end` of the whole pattern, every column kept.
            let rows: BTreeSet<(u32, u32)> = entries
                .iter()
                .filter(|e| (first..end).contains(&(e.0 as usize)))
                .map(|&(i, j)| (i - first as u32, j))
                .collect();
            let (ptr, cols) = pattern(end - first, &rows);
            let inside: BTreeSet<(u32, u32)> = entries
                .iter()
                .copied()
                .filter(|e| [e.0, e.1].iter().all(|&v| (first..end).contains(&(v as usize))))
                .collect();
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got = pool.install(|| diagonal_block_is_symmetric(first, &ptr, &cols));
                prop_assert_eq!(got, reference(&inside));
            }
        }

        #[test]
        fn decides_as_the_definition(
            n in 1usize..10,
            raw in proptest::collection::vec((0u32..10, 0u32..10), 0..40),
            mirror in any::<bool>(),
        ) {
            let mut entries: BTreeSet<(u32, u32)> =
                raw.iter().map(|&(i, j)| (i % n as u32, j % n as u32)).collect();
            if mirror {
                // Mostly symmetric inputs, so both answers are tried often.
                let swapped: Vec<_> = entries.iter().map(|&(i, j)| (j, i)).collect();
                entries.extend(swapped);
                entries.retain(|&(i, j)| i != j || raw.len() % 3 == 0);
            }
            let (ptr, cols) = pattern(n, &entries);
            prop_assert_eq!(is_symmetric_without_loops(&ptr, &cols), reference(&entries));
            // With loops allowed: symmetric exactly when the pattern less its diagonal is.
            let off: BTreeSet<(u32, u32)> = entries.iter().copied().filter(|e| e.0 != e.1).collect();
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                prop_assert_eq!(pool.install(|| is_symmetric(&ptr, &cols)), reference(&off));
            }
        }
    }

    #[test]
    fn loops_are_allowed_where_asked() {
        let check = |n: usize, e: &[(u32, u32)]| {
            let (ptr, cols) = pattern(n, &e.iter().copied().collect());
            (
                is_symmetric(&ptr, &cols),
                is_symmetric_without_loops(&ptr, &cols),
            )
        };
        assert_eq!(check(2, &[(0, 0), (0, 1), (1, 0)]), (true, false));
        assert_eq!(check(2, &[(0, 0), (1, 1)]), (true, false));
        assert_eq!(check(2, &[(0, 0), (0, 1)]), (false, false));
        assert_eq!(check(3, &[(0, 1), (1, 0), (1, 1), (1, 2)]), (false, false));
        assert_eq!(check(3, &[(0, 1), (1, 0), (2, 2)]), (true, false));
    }
}
