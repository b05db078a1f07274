//! One part of a `.npz` archive, as one rank of a distributed run reads it: a CSR archive is cut
//! into runs of consecutive rows, a CSC archive into runs of consecutive columns, each run with
//! about an equal share of the entries (found by binary search in `indptr`), and a COO archive
//! into equal runs of entries. A part decodes only its slice of `indptr`, `indices` (or `row` and
//! `col`) and `data`, and checks what the whole-file reader checks of that slice, naming the same
//! positions with the same messages; the parts' entries together are [`super::parse`]'s.

use super::npy::Array;
use super::{array_of, decode_indices, integers, loaded, Archive, Layout};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::io::Loaded;
use rayon::prelude::*;
use std::path::Path;

/// Reads part `part` of `parts` of the sparse matrix in the `.npz` file `bytes`: its entries as
/// an edge list (row, column), the shape the whole archive's (`shape`), the values `None` when
/// every one of the part's is 1. A compressed member is inflated whole (the part keeps only its
/// share of the decoded entries).
pub(crate) fn parse_part(bytes: &[u8], path: &Path, part: usize, parts: usize) -> Result<Loaded> {
    let bad = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    let archive = Archive::open(bytes, path)?;
    let member = |name: &str| archive.member(name);
    let (layout, nrows, ncols) = (archive.layout, archive.nrows, archive.ncols);
    let data_raw = member("data")?;
    let data = array_of(path, "data", &data_raw)?;
    let ((edges, range), entries) = match layout {
        Layout::Csr | Layout::Csc => {
            let (ptr_raw, idx_raw) = (member("indptr")?, member("indices")?);
            let (indptr, indices) = (
                array_of(path, "indptr", &ptr_raw)?,
                array_of(path, "indices", &idx_raw)?,
            );
            let csc = layout == Layout::Csc;
            let (major, minor) = if csc { (ncols, nrows) } else { (nrows, ncols) };
            let got = compressed_part(&indptr, &indices, major, minor, csc, part, parts);
            (got.map_err(bad)?, indices.len)
        }
        Layout::Coo => {
            let (row_raw, col_raw) = (member("row")?, member("col")?);
            let (row, col) = (
                array_of(path, "row", &row_raw)?,
                array_of(path, "col", &col_raw)?,
            );
            let got = coordinate_part(&row, &col, nrows, ncols, part, parts);
            (got.map_err(bad)?, row.len)
        }
    };
    if data.len != entries {
        return Err(bad(format!(
            "array 'data' has {} values for {entries} entries",
            data.len
        )));
    }
    let weights = values_part(&data, range).map_err(bad)?;
    crate::interrupt::check()?;
    Ok(loaded(EdgeList {
        edges,
        nrows,
        ncols,
        weights,
    }))
}

/// A part's entries (row, column) and where they lie in the archive's arrays, or what is wrong.
type PartEntries = std::result::Result<(Vec<(u32, u32)>, std::ops::Range<usize>), String>;

/// Where part `part` of `parts` of a compressed archive's major axis starts: the first offset at
/// which `indptr` reaches the part's equal share of the `entries`. Every part computes every cut
/// the same way, each no lower than the one before, so the parts tile `0..=major` even when
/// `indptr` is damaged (which the parts' own checks then find).
fn cuts(ptr_at: &dyn Fn(usize) -> u64, major: usize, entries: u64, parts: usize) -> Vec<usize> {
    let mut cuts = vec![0usize; parts + 1];
    for p in 1..parts {
        let target = (entries as u128 * p as u128 / parts as u128) as u64;
        let (mut lo, mut hi) = (cuts[p - 1], major);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if ptr_at(mid) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        cuts[p] = lo;
    }
    cuts[parts] = major;
    cuts
}

/// The entries of part `part` of a CSR archive (or of a CSC one when `csc`: entry `(i, j)` from
/// column `j`), checked as [`super::compressed`] checks the whole, and their positions in
/// `indices`.
fn compressed_part(
    indptr: &Array<'_>,
    indices: &Array<'_>,
    major: usize,
    minor: usize,
    csc: bool,
    part: usize,
    parts: usize,
) -> PartEntries {
    integers(indptr, "indptr")?;
    integers(indices, "indices")?;
    if indptr.len != major + 1 {
        return Err(format!(
            "array 'indptr' has {} offsets where the shape needs {}",
            indptr.len,
            major + 1
        ));
    }
    let ptr_at = |i: usize| indptr.int(i).unwrap_or(-1).clamp(-1, u64::MAX as i128 / 2) as u64;
    let total = indices.len as u64;
    if ptr_at(0) != 0 || ptr_at(major) != total {
        return Err(format!(
            "array 'indptr' runs from {} to {} where it must run from 0 to the {} indices",
            indptr.int(0).unwrap_or(0),
            indptr.int(major).unwrap_or(0),
            indices.len
        ));
    }
    let cut = cuts(&ptr_at, major, total, parts);
    let (first, last) = (cut[part], cut[part + 1]);
    let ptr: Vec<u64> = (first..=last).map(ptr_at).collect();
    let decrease = |from: usize, ptr_of: &dyn Fn(usize) -> u64| {
        (from..major).find(|&i| ptr_of(i) > ptr_of(i + 1)).map(|i| {
            format!(
                "array 'indptr' decreases at offset {} ({} then {})",
                i + 1,
                ptr_of(i),
                ptr_of(i + 1)
            )
        })
    };
    if let Some(k) = ptr.windows(2).position(|w| w[0] > w[1]) {
        let i = first + k;
        return Err(format!(
            "array 'indptr' decreases at offset {} ({} then {})",
            i + 1,
            ptr[k],
            ptr[k + 1]
        ));
    }
    let (lo, hi) = (ptr[0], ptr[ptr.len() - 1]);
    if hi > total {
        // The offsets climb past the indices here, so they decrease further on.
        return Err(decrease(last, &ptr_at)
            .unwrap_or_else(|| "array 'indptr' runs past the indices".into()));
    }
    let (lo, hi) = (lo as usize, hi as usize);
    let cols = decode_indices(indices, lo..hi, minor)?;
    let mut edges = Vec::with_capacity(cols.len());
    for (r, w) in ptr.windows(2).enumerate() {
        let i = (first + r) as u32;
        for &c in &cols[(w[0] as usize - lo)..(w[1] as usize - lo)] {
            edges.push(if csc { (c, i) } else { (i, c) });
        }
    }
    Ok((edges, lo..hi))
}

/// The entries of part `part` of a COO archive (an equal run of them), checked against the
/// shape as [`super::coordinate_pairs`] checks the whole, and their positions.
fn coordinate_part(
    row: &Array<'_>,
    col: &Array<'_>,
    nrows: usize,
    ncols: usize,
    part: usize,
    parts: usize,
) -> PartEntries {
    integers(row, "row")?;
    integers(col, "col")?;
    if row.len != col.len {
        return Err(format!(
            "arrays 'row' and 'col' have {} and {} entries",
            row.len, col.len
        ));
    }
    let share = |p: usize| (row.len as u128 * p as u128 / parts as u128) as usize;
    let range = share(part)..share(part + 1);
    let edges = range
        .clone()
        .into_par_iter()
        .map(|k| {
            let (i, j) = (row.int(k).unwrap_or(-1), col.int(k).unwrap_or(-1));
            if i < 0 || i >= nrows as i128 || j < 0 || j >= ncols as i128 {
                return Err(format!(
                    "entry {k} is ({i}, {j}), outside the {nrows} x {ncols} shape"
                ));
            }
            Ok((i as u32, j as u32))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok((edges, range))
}

/// The values at positions `range` of `data` as `f64`, checked as [`super::values`] checks the
/// whole (`None` when every one is 1).
fn values_part(
    data: &Array<'_>,
    range: std::ops::Range<usize>,
) -> std::result::Result<Option<Vec<f64>>, String> {
    use super::npy::Dtype;
    if !matches!(
        data.dtype,
        Dtype::Float(_) | Dtype::Int(_) | Dtype::Uint(_) | Dtype::Bool
    ) {
        return Err(format!(
            "array 'data' holds {}: values must be numbers",
            data.dtype.descr()
        ));
    }
    let v: Vec<f64> = range
        .clone()
        .into_par_iter()
        .map(|k| data.float(k).unwrap_or(f64::NAN))
        .collect();
    if let Some(k) = v.iter().position(|w| !w.is_finite()) {
        return Err(format!(
            "array 'data' holds {} at position {}: values must be finite",
            v[k],
            range.start + k
        ));
    }
    Ok((!v.iter().all(|&w| w == 1.0)).then_some(v))
}

#[cfg(test)]
mod tests {
    use super::super::{npy, parse, write, zip};
    use super::*;
    use crate::csr::Csr;
    use npy::Dtype;

    /// A `.npy` array of integers of `dtype`.
    fn ints(dtype: Dtype, v: &[i64]) -> Vec<u8> {
        let mut b = npy::header(dtype, Some(v.len()));
        for &x in v {
            b.extend_from_slice(&x.to_le_bytes()[..dtype.size()]);
        }
        b
    }

    /// A `.npy` array of `f64`s.
    fn floats(v: &[f64]) -> Vec<u8> {
        let mut b = npy::header(Dtype::Float(8), Some(v.len()));
        for &x in v {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b
    }

    /// An uncompressed archive of the named `.npy` members.
    fn archive(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut z = zip::Writer::new(Vec::new());
        for (name, body) in members {
            z.member(&format!("{name}.npy"), body.len() as u64, |o| {
                o.write_all(body)
            })
            .unwrap();
        }
        z.finish().unwrap()
    }

    fn text(s: &str) -> Vec<u8> {
        let mut b = npy::header(Dtype::Bytes(s.len()), None);
        b.extend_from_slice(s.as_bytes());
        b
    }

    /// A 5 x 4 matrix stored as `kind` (csr, csc or coo) with `index` integers: repeated
    /// entries, an empty row, a self loop, weights.
    fn stored(kind: &str, index: Dtype) -> Vec<u8> {
        // Entries by row: (0,1) 2, (0,1) 3, (0,3) 1, (2,2) 5, (3,0) 1, (4,1) -1.
        let shape = ("shape", ints(Dtype::Int(8), &[5, 4]));
        let (a, b, data) = match kind {
            "csr" => (
                ("indptr", ints(index, &[0, 3, 3, 4, 5, 6])),
                ("indices", ints(index, &[1, 1, 3, 2, 0, 1])),
                floats(&[2.0, 3.0, 1.0, 5.0, 1.0, -1.0]),
            ),
            "csc" => (
                ("indptr", ints(index, &[0, 1, 4, 5, 6])),
                ("indices", ints(index, &[3, 0, 0, 4, 2, 0])),
                floats(&[1.0, 2.0, 3.0, -1.0, 5.0, 1.0]),
            ),
            _ => (
                ("row", ints(index, &[4, 0, 2, 0, 3, 0])),
                ("col", ints(index, &[1, 1, 2, 3, 0, 1])),
                floats(&[-1.0, 2.0, 5.0, 1.0, 1.0, 3.0]),
            ),
        };
        archive(&[("format", text(kind)), shape, a, b, ("data", data)])
    }

    #[test]
    fn shapes_of_other_dimensions_and_other_layouts_are_named() {
        // SciPy's 1-D sparse arrays (shape (4,)), a shape of strings, and the two layouts
        // save_npz writes that gmcl does not read (their `data` has more dimensions).
        let entries = [
            ("indptr", ints(Dtype::Int(4), &[0, 1])),
            ("indices", ints(Dtype::Int(4), &[1])),
            ("data", floats(&[1.5])),
        ];
        let cases = [
            ("csr", ints(Dtype::Int(8), &[4]), "'shape' is 1 long, not 2"),
            ("csr", ints(Dtype::Int(8), &[]), "'shape' is 0 long, not 2"),
            ("csr", text("ab"), "'shape' is 1 long, not 2"),
            ("csr", text("abcdefghijklmnop"), "'shape' is 1 long, not 2"),
            ("bsr", ints(Dtype::Int(8), &[2, 2]), "holds a 'bsr' matrix"),
            ("dia", ints(Dtype::Int(8), &[2, 2]), "holds a 'dia' matrix"),
        ];
        for (kind, shape, says) in cases {
            let mut members = vec![("format", text(kind)), ("shape", shape)];
            members.extend(entries.iter().cloned());
            let bytes = archive(&members);
            let whole = parse(&bytes, Path::new("m.npz")).unwrap_err().to_string();
            let part = parse_part(&bytes, Path::new("m.npz"), 0, 2)
                .unwrap_err()
                .to_string();
            for e in [whole, part] {
                assert!(e.contains("m.npz") && e.contains(says), "{kind}: {e}");
            }
        }
        let two_strings = {
            let mut b = npy::header(Dtype::Unicode(4), Some(2));
            b.extend_from_slice(&[0u8; 32]);
            b
        };
        let mut members = vec![("format", text("csr")), ("shape", two_strings)];
        members.extend(entries.iter().cloned());
        let e = parse(&archive(&members), Path::new("m.npz")).unwrap_err();
        assert!(e.to_string().contains("'shape' is not two sizes"), "{e}");
    }

    /// Entries with their weights.
    type Weighted = Vec<((u32, u32), f64)>;

    /// The entries of every part, in part order, with their weights, and the parts' shape.
    fn all_parts(bytes: &[u8], parts: usize) -> (Weighted, (usize, usize)) {
        let mut got = Vec::new();
        let mut shape = (0, 0);
        for p in 0..parts {
            let l = parse_part(bytes, Path::new("m.npz"), p, parts).unwrap();
            shape = (l.edges.nrows, l.edges.ncols);
            for k in 0..l.edges.len() {
                got.push((l.edges.edges[k], l.edges.weight(k)));
            }
        }
        (got, shape)
    }

    #[test]
    fn the_parts_together_are_the_whole_file() {
        for kind in ["csr", "csc", "coo"] {
            for index in [Dtype::Int(4), Dtype::Int(8), Dtype::Uint(2)] {
                let bytes = stored(kind, index);
                let whole = parse(&bytes, Path::new("m.npz")).unwrap();
                let mut want: Vec<_> = (0..whole.edges.len())
                    .map(|k| (whole.edges.edges[k], whole.edges.weight(k)))
                    .collect();
                want.sort_by(|a, b| a.partial_cmp(b).unwrap());
                for parts in 1..=7 {
                    let (mut got, shape) = all_parts(&bytes, parts);
                    assert_eq!(shape, (5, 4), "{kind} {parts}");
                    got.sort_by(|a, b| a.partial_cmp(b).unwrap());
                    assert_eq!(got, want, "{kind} {index:?} in {parts} parts");
                }
            }
        }
    }

    #[test]
    fn a_written_matrix_splits_by_entries_and_unit_parts_have_no_weights() {
        // Row 0 holds most entries: the cut falls by entries, not rows.
        let mut ptr = vec![0u64];
        let mut cols = Vec::new();
        for r in 0..10u64 {
            let n = if r == 0 { 40 } else { 1 };
            cols.extend((0..n).map(|c| c as u32));
            ptr.push(cols.len() as u64);
        }
        let vals: Vec<f64> = (0..cols.len())
            .map(|k| if k < 40 { 1.0 } else { 2.0 })
            .collect();
        let m = Csr::from_parts(10, 40, ptr, cols, vals).unwrap();
        let bytes = write(Vec::new(), &m).unwrap();
        let p0 = parse_part(&bytes, Path::new("m.npz"), 0, 2).unwrap();
        let p1 = parse_part(&bytes, Path::new("m.npz"), 1, 2).unwrap();
        assert_eq!((p0.edges.len(), p1.edges.len()), (40, 9));
        assert_eq!(p0.edges.weights, None);
        assert_eq!(p1.edges.weights, Some(vec![2.0; 9]));
        assert_eq!(p1.edges.edges[0], (1, 0));
    }

    #[test]
    fn a_bad_slice_is_named_by_its_position_in_the_whole_file() {
        let bytes = archive(&[
            ("format", text("csr")),
            ("shape", ints(Dtype::Int(8), &[4, 4])),
            ("indptr", ints(Dtype::Int(4), &[0, 1, 2, 3, 4])),
            ("indices", ints(Dtype::Int(4), &[0, 1, 2, 9])),
            ("data", floats(&[1.0, 1.0, 1.0, 1.0])),
        ]);
        let err = |p: usize, parts: usize| {
            parse_part(&bytes, Path::new("m.npz"), p, parts)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(err(0, 2), None);
        let e = err(1, 2).unwrap();
        assert!(
            e.contains("m.npz") && e.contains("'indices' holds 9 at position 3, outside 0..4"),
            "{e}"
        );
        // A decrease after this part's rows that lifts its offsets past the indices.
        let bytes = archive(&[
            ("format", text("csr")),
            ("shape", ints(Dtype::Int(8), &[4, 4])),
            ("indptr", ints(Dtype::Int(4), &[0, 1, 9, 2, 4])),
            ("indices", ints(Dtype::Int(4), &[0, 1, 2, 3])),
            ("data", floats(&[1.0, 1.0, 1.0, 1.0])),
        ]);
        for parts in 1..=4 {
            for p in 0..parts {
                if let Err(e) = parse_part(&bytes, Path::new("m.npz"), p, parts) {
                    assert!(e.to_string().contains("decreases at offset 3"), "{e}");
                }
            }
            assert!((0..parts).any(|p| parse_part(&bytes, Path::new("m.npz"), p, parts).is_err()));
        }
        let coo = archive(&[
            ("format", text("coo")),
            ("shape", ints(Dtype::Int(8), &[2, 2])),
            ("row", ints(Dtype::Int(8), &[0, 1, 1])),
            ("col", ints(Dtype::Int(8), &[0, 1, 2])),
            ("data", floats(&[1.0, f64::NAN, 1.0])),
        ]);
        let e = parse_part(&coo, Path::new("m.npz"), 2, 3)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("entry 2 is (1, 2), outside the 2 x 2 shape"),
            "{e}"
        );
        let e = parse_part(&coo, Path::new("m.npz"), 1, 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'data' holds NaN at position 1"), "{e}");
    }
}
