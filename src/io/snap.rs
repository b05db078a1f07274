//! SNAP text edge lists (`.txt`, `.snap`): `#` comments, `u v` per line, and ids that need not be
//! contiguous. Further columns are skipped, as SNAP's own loader (`TSnap::LoadEdgeList`, which
//! reads columns 0 and 1) skips them: SNAP's signed and temporal networks keep signs and Unix
//! times there, which are no weights. The ids that occur are renumbered `0..k` in increasing
//! order and kept as [`Labels::Ids`].

use super::el::{self, TWO_AND_ANY};
use super::reader;
use super::Labels;
use super::{Format, Loaded};
use crate::edges::EdgeList;
use crate::error::Result;
use rayon::prelude::*;
use std::path::Path;

/// Reads a SNAP file's bytes.
pub(crate) fn parse(bytes: &[u8], path: &Path, chunk: usize) -> Result<Loaded> {
    parse_from(bytes, reader::skip_leading_comments(bytes, 0), path, chunk)
}

/// Reads part `part` of `parts` of a SNAP file's lines ([`reader::part_range`]), as [`parse`]
/// reads a whole file: the part's ids renumbered `0..k` in increasing order and kept as
/// [`Labels::Ids`] (a distributed run turns them into the whole file's numbering). A bad line is
/// named by its number in the whole file.
pub(crate) fn parse_part(bytes: &[u8], path: &Path, part: usize, parts: usize) -> Result<Loaded> {
    let start = reader::skip_leading_comments(bytes, 0);
    let range = reader::part_range(bytes, start, part, parts);
    let chunk = reader::default_chunk(range.len());
    parse_from(&bytes[..range.end], range.start, path, chunk)
}

/// Reads the lines of `bytes[start..]`.
fn parse_from(bytes: &[u8], start: usize, path: &Path, chunk: usize) -> Result<Loaded> {
    let parsed = el::parse_edges_from(bytes, start, TWO_AND_ANY, chunk)
        .map_err(|s| reader::stop_error(path, bytes, s, |l| el::diagnose(l, TWO_AND_ANY)))?;
    let mut edges = EdgeList::square(parsed.stats.vertices(), parsed.items, None);
    let ids = compact(&mut edges);
    Ok(Loaded {
        edges,
        labels: Labels::Ids(ids),
        format: Format::Snap,
        symmetric_storage: false,
    })
}

/// The first data line of SNAP text whose columns past the source and target the loader skips:
/// its 1-based number and its column count, when it has more than two. `head` is the file's
/// start; `whole` says it is the whole file (else a first data line that runs past `head` is
/// not judged).
pub(crate) fn extra_columns(head: &[u8], whole: bool) -> Option<(u64, usize)> {
    let start = reader::skip_leading_comments(head, 0);
    let rest = &head[start..];
    let end = match memchr::memchr(b'\n', rest) {
        Some(e) => e,
        None if whole => rest.len(),
        None => return None,
    };
    let columns = reader::tokens(&rest[..end]).len();
    (columns > 2).then(|| (reader::line_number(head, start), columns))
}

/// Renumbers the ids in use to `0..k` in increasing order and returns the original of each new
/// id. Dense id ranges use [`EdgeList::compact_ids`] (a flag and a new id per possible id);
/// sparse ones (a few edges among ids up to 4e9) sort the ids instead, which needs memory in
/// proportion to the edges, not to the largest id.
pub(crate) fn compact(edges: &mut EdgeList) -> Vec<u32> {
    let n = edges.nrows.max(edges.ncols);
    if n <= 3 * edges.edges.len() + (1 << 24) {
        return edges.compact_ids();
    }
    let mut ids: Vec<u32> = edges
        .edges
        .par_iter()
        .flat_map_iter(|&(u, v)| [u, v])
        .collect();
    ids.par_sort_unstable();
    ids.dedup();
    ids.shrink_to_fit();
    // Every id of an edge is in `ids`, so the search always succeeds (`Ok`).
    let find = |x: u32| ids.binary_search(&x).unwrap_or_else(|i| i) as u32;
    edges
        .edges
        .par_iter_mut()
        .for_each(|e| *e = (find(e.0), find(e.1)));
    edges.nrows = ids.len();
    edges.ncols = ids.len();
    ids
}

#[cfg(test)]
mod tests {
    use super::super::parse_bytes;
    use super::*;

    #[test]
    fn extra_columns_are_found_on_the_first_data_line() {
        let t = b"# Directed graph\n# FromNodeId\tToNodeId\tSign\n\n30\t1\t-1\n2 3 1\n";
        assert_eq!(extra_columns(t, true), Some((4, 3)));
        assert_eq!(extra_columns(b"1 2\n3 4 5\n", true), None);
        assert_eq!(extra_columns(b"1 2 \t \r\n", true), None);
        assert_eq!(extra_columns(b"% c\n1 2 3 4", true), Some((2, 4)));
        // A first data line cut by the end of what was read is not judged.
        assert_eq!(extra_columns(b"# c\n1 2 3", false), None);
        assert_eq!(extra_columns(b"# only comments\n", true), None);
        assert_eq!(extra_columns(b"", true), None);
    }

    fn snap(text: &str) -> Loaded {
        parse_bytes(text.as_bytes(), Format::Snap, Path::new("g.txt")).unwrap()
    }

    #[test]
    fn compacts_ids_and_keeps_the_originals() {
        let l = snap(
            "# Directed graph (each unordered pair of nodes is saved once): g.txt\n\
             # Nodes: 3 Edges: 3\n# FromNodeId\tToNodeId\n1000\t7\n7\t42\n42\t1000\n",
        );
        assert_eq!(l.edges.edges, vec![(2, 0), (0, 1), (1, 2)]);
        assert_eq!(l.edges.nrows, 3);
        assert_eq!(l.labels, Labels::Ids(vec![7, 42, 1000]));
        assert_eq!(l.labels.label(2), "1000");
        assert_eq!(l.edges.weights, None);
        assert_eq!(l.format, Format::Snap);
    }

    #[test]
    fn sparse_huge_ids_compact_by_sorting() {
        let l = snap("4294967294 3\n3 4000000000\n");
        assert_eq!(l.edges.edges, vec![(2, 0), (0, 1)]);
        assert_eq!(l.labels, Labels::Ids(vec![3, 4000000000, 4294967294]));
        // Both compactions agree.
        let mut a = EdgeList::square(50, vec![(9, 3), (3, 40), (40, 40)], None);
        let mut b = a.clone();
        assert_eq!(compact(&mut a), b.compact_ids());
        assert_eq!(a, b);
    }

    #[test]
    fn further_columns_are_skipped_as_snap_skips_them() {
        // A signed network's signs, a temporal one's Unix times, anything: no weights.
        let l = snap("# FromNodeId ToNodeId Sign\n1 2\n2 3 -1\r\n3 1\t1217567877 x nan\n4 1 \n");
        assert_eq!(l.edges.edges, vec![(0, 1), (1, 2), (2, 0), (3, 0)]);
        assert_eq!(l.edges.weights, None);
        let e = |t: &[u8]| {
            parse_bytes(t, Format::Snap, Path::new("g.txt"))
                .unwrap_err()
                .to_string()
        };
        assert!(e(b"1 2\n1 x 3\n").starts_with("g.txt:2: not an integer: 'x'"));
        assert!(e(b"1 2\n3\n").starts_with("g.txt:2: expected 2 columns"));
        assert!(e(b"1 2x 3\n").starts_with("g.txt:1: not an integer: '2x'"));
    }

    #[test]
    fn empty_snap_file() {
        let l = snap("# nothing\n");
        assert!(l.edges.is_empty());
        assert_eq!(l.labels, Labels::Ids(vec![]));
    }
}
