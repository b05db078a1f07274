//! SciPy's sparse `.npz` files, as `scipy.sparse.save_npz` writes and `load_npz` reads them: a
//! ZIP archive (stored, or deflated with `compressed=True`) of `.npy` arrays: `format` (`csr`,
//! `csc` or `coo`), `shape` (rows, columns), then `indptr`, `indices` and `data` for CSR and CSC,
//! or `row`, `col` and `data` for COO (`_is_array` marks a sparse array rather than a matrix;
//! both read the same). Integers of any width and sign, floats and booleans are read; what
//! SciPy would refuse or misread (a decreasing `indptr`, an index out of the shape, a NaN) is
//! an error naming the file and the array.
//!
//! Writing gives what `save_npz(..., compressed=False)` gives for a CSR matrix: `int32` indices
//! where every index and offset fits, `int64` otherwise, and `float32` or `float64` values.

mod npy;
mod part;
mod zip;

use super::{Format, Labels, Loaded};
use crate::csr::{Csr, RowEntries};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
pub(crate) use part::parse_part;

use npy::{Array, Dtype};
use rayon::prelude::*;
use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

/// Reads the sparse matrix in the `.npz` file `bytes` as an edge list: entry `(i, j)` with its
/// value for every stored entry (duplicates kept, as SciPy keeps them until it sums them).
pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<Loaded> {
    let edges = match read(bytes, path)? {
        Stored::Rows(r) => EdgeList {
            edges: pairs_of(&r, false),
            nrows: r.nrows,
            ncols: r.ncols,
            weights: r.values,
        },
        Stored::Columns(c) => EdgeList {
            edges: pairs_of(&c, true),
            nrows: c.ncols,
            ncols: c.nrows,
            weights: c.values,
        },
        Stored::Pairs(el) => el,
    };
    crate::interrupt::check()?;
    Ok(loaded(edges))
}

/// The matrix of a `.npz` file, read as it is stored.
pub(crate) enum Matrix {
    /// Entries grouped by row (a CSR or CSC archive), for [`Csr::from_row_entries`].
    Rows(RowEntries),
    /// Entries as coordinates (a COO archive), for [`Csr::from_edges`].
    Edges(Loaded),
}

/// Reads the sparse matrix in the `.npz` file `bytes` without listing its entries as edges when
/// the archive groups them: a CSR archive's arrays are its rows, a CSC archive's are transposed
/// into rows. The entries, values and duplicates are those [`parse`] gives.
pub(crate) fn parse_matrix(bytes: &[u8], path: &Path) -> Result<Matrix> {
    let m = match read(bytes, path)? {
        Stored::Rows(r) => Matrix::Rows(r),
        Stored::Columns(c) => Matrix::Rows(c.transposed()?),
        Stored::Pairs(el) => Matrix::Edges(loaded(el)),
    };
    crate::interrupt::check()?;
    Ok(m)
}

fn loaded(edges: EdgeList) -> Loaded {
    Loaded {
        edges,
        labels: Labels::Identity,
        format: Format::Npz,
        symmetric_storage: false,
    }
}

/// A matrix as an archive stores it, checked.
enum Stored {
    /// CSR: row `i`'s entries are `indices[indptr[i]..indptr[i + 1]]`.
    Rows(RowEntries),
    /// CSC: the entries of the transpose grouped by its rows (the matrix's columns).
    Columns(RowEntries),
    /// COO: the entries as coordinates.
    Pairs(EdgeList),
}

/// Reads and checks the arrays of the `.npz` file `bytes`.
fn read(bytes: &[u8], path: &Path) -> Result<Stored> {
    let bad = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    let members = zip::members(bytes).map_err(bad)?;
    let member = |name: &str| -> Result<Cow<'_, [u8]>> {
        let file = format!("{name}.npy");
        let m = members.iter().find(|m| m.name == file).ok_or_else(|| {
            bad(format!(
                "has no array '{name}': not a SciPy sparse matrix (scipy.sparse.save_npz)"
            ))
        })?;
        zip::read(bytes, m).map_err(bad)
    };
    let format_raw = member("format")?;
    let format = array_of(path, "format", &format_raw)?
        .text()
        .ok_or_else(|| bad("array 'format' is not a string".into()))?;
    let shape_raw = member("shape")?;
    let shape = array_of(path, "shape", &shape_raw)?;
    let (nrows, ncols) = match (shape.len, shape.int(0), shape.int(1)) {
        (2, Some(r), Some(c)) if r >= 0 && c >= 0 => (r, c),
        _ => return Err(bad("array 'shape' is not two sizes".into())),
    };
    // Ids are u32 with u32::MAX reserved, as in the text formats.
    let limit = u32::MAX as i128;
    if nrows > limit || ncols > limit {
        return Err(bad(format!(
            "the matrix is {nrows} x {ncols}: gmcl takes at most {} rows and columns",
            u32::MAX
        )));
    }
    let (nrows, ncols) = (nrows as usize, ncols as usize);
    let data_raw = member("data")?;
    let data = array_of(path, "data", &data_raw)?;
    let check_len = |entries: usize| {
        if data.len != entries {
            return Err(bad(format!(
                "array 'data' has {} values for {entries} entries",
                data.len
            )));
        }
        values(&data).map_err(bad)
    };
    let stored = match format.as_str() {
        "csr" | "csc" => {
            let (ptr_raw, idx_raw) = (member("indptr")?, member("indices")?);
            let (indptr, indices) = (
                array_of(path, "indptr", &ptr_raw)?,
                array_of(path, "indices", &idx_raw)?,
            );
            let csr = format == "csr";
            let (major, minor) = if csr { (nrows, ncols) } else { (ncols, nrows) };
            let (ptr, cols) = compressed(&indptr, &indices, major, minor).map_err(bad)?;
            let values = check_len(cols.len())?;
            let rows = RowEntries {
                nrows: major,
                ncols: minor,
                ptr,
                cols,
                values,
            };
            if csr {
                Stored::Rows(rows)
            } else {
                Stored::Columns(rows)
            }
        }
        "coo" => {
            let (row_raw, col_raw) = (member("row")?, member("col")?);
            let (row, col) = (
                array_of(path, "row", &row_raw)?,
                array_of(path, "col", &col_raw)?,
            );
            let edges = coordinate_pairs(&row, &col, nrows, ncols).map_err(bad)?;
            let weights = check_len(edges.len())?;
            Stored::Pairs(EdgeList {
                nrows,
                ncols,
                edges,
                weights,
            })
        }
        other => {
            return Err(bad(format!(
                "holds a '{other}' matrix: gmcl reads csr, csc and coo (convert it with \
                 .tocsr() before save_npz)"
            )))
        }
    };
    Ok(stored)
}

/// The entries of grouped rows as (row, column) pairs, or (column, row) when `transpose`.
fn pairs_of(r: &RowEntries, transpose: bool) -> Vec<(u32, u32)> {
    let mut pairs = vec![(0u32, 0u32); r.cols.len()];
    // Rows in groups, each writing its own slice of the pairs.
    let mut slices = Vec::new();
    let mut rest = pairs.as_mut_slice();
    let step = r.nrows.div_ceil(rayon::current_num_threads() * 8).max(1);
    let mut first = 0;
    while first < r.nrows {
        let last = (first + step).min(r.nrows);
        let (mine, tail) = rest.split_at_mut((r.ptr[last] - r.ptr[first]) as usize);
        slices.push((first..last, mine));
        rest = tail;
        first = last;
    }
    slices.into_par_iter().for_each(|(rows, out)| {
        let base = r.ptr[rows.start] as usize;
        for i in rows {
            for k in r.ptr[i] as usize..r.ptr[i + 1] as usize {
                let c = r.cols[k];
                out[k - base] = if transpose {
                    (c, i as u32)
                } else {
                    (i as u32, c)
                };
            }
        }
    });
    pairs
}

/// The array in `raw`, the bytes of the member `name`.
fn array_of<'a>(path: &Path, name: &str, raw: &'a [u8]) -> Result<Array<'a>> {
    Array::parse(raw).map_err(|e| Error::Input {
        path: path.to_path_buf(),
        message: format!("array '{name}': {e}"),
    })
}

/// Checks that an integer array holds indices: an integer type.
fn integers(a: &Array<'_>, name: &str) -> std::result::Result<(), String> {
    match a.dtype {
        Dtype::Int(_) | Dtype::Uint(_) => Ok(()),
        other => Err(format!(
            "array '{name}' holds {} where indices are integers",
            other.descr()
        )),
    }
}

/// The offsets and indices of a compressed (CSR, or CSC read as its transpose) matrix, checked:
/// `indptr` starts at 0, never decreases and ends at the number of indices, and every index is
/// under `minor`.
fn compressed(
    indptr: &Array<'_>,
    indices: &Array<'_>,
    major: usize,
    minor: usize,
) -> std::result::Result<(Vec<u64>, Vec<u32>), String> {
    integers(indptr, "indptr")?;
    integers(indices, "indices")?;
    if indptr.len != major + 1 {
        return Err(format!(
            "array 'indptr' has {} offsets where the shape needs {}",
            indptr.len,
            major + 1
        ));
    }
    let ptr: Vec<u64> = (0..indptr.len)
        .into_par_iter()
        .map(|i| indptr.int(i).unwrap_or(-1).clamp(-1, u64::MAX as i128 / 2) as u64)
        .collect();
    if ptr[0] != 0 || ptr[major] != indices.len as u64 {
        return Err(format!(
            "array 'indptr' runs from {} to {} where it must run from 0 to the {} indices",
            indptr.int(0).unwrap_or(0),
            indptr.int(major).unwrap_or(0),
            indices.len
        ));
    }
    if let Some(i) = (0..major)
        .into_par_iter()
        .find_first(|&i| ptr[i] > ptr[i + 1])
    {
        return Err(format!(
            "array 'indptr' decreases at offset {} ({} then {})",
            i + 1,
            ptr[i],
            ptr[i + 1]
        ));
    }
    // The indices in parts, each decoded straight from the (mapped) member; the first bad one
    // in file order is the error.
    const PART: usize = 1 << 16;
    let mut cols = vec![0u32; indices.len];
    cols.par_chunks_mut(PART)
        .enumerate()
        .map(|(p, out)| {
            let start = p * PART;
            indices.for_each_int(start..start + out.len(), |k, j| {
                if j < 0 || j >= minor as i64 {
                    return Err(format!(
                        "array 'indices' holds {j} at position {k}, outside 0..{minor}"
                    ));
                }
                out[k - start] = j as u32;
                Ok(())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .collect::<std::result::Result<(), String>>()?;
    Ok((ptr, cols))
}

/// The entries of a COO matrix, checked against the shape.
fn coordinate_pairs(
    row: &Array<'_>,
    col: &Array<'_>,
    nrows: usize,
    ncols: usize,
) -> std::result::Result<Vec<(u32, u32)>, String> {
    integers(row, "row")?;
    integers(col, "col")?;
    if row.len != col.len {
        return Err(format!(
            "arrays 'row' and 'col' have {} and {} entries",
            row.len, col.len
        ));
    }
    (0..row.len)
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
        .collect()
}

/// The values as `f64` (`None` when every one is 1: the matrix is its pattern); NaN and
/// infinities are refused as in the text formats.
fn values(data: &Array<'_>) -> std::result::Result<Option<Vec<f64>>, String> {
    if !matches!(
        data.dtype,
        Dtype::Float(_) | Dtype::Int(_) | Dtype::Uint(_) | Dtype::Bool
    ) {
        return Err(format!(
            "array 'data' holds {}: values must be numbers",
            data.dtype.descr()
        ));
    }
    // Decoded in parts, each part noting its first value that is not finite and whether all
    // its values are one: one pass over the member.
    const PART: usize = 1 << 16;
    let mut v = vec![0f64; data.len];
    let parts: Vec<(Option<usize>, bool)> = v
        .par_chunks_mut(PART)
        .enumerate()
        .map(|(p, out)| {
            let start = p * PART;
            match data.dtype {
                Dtype::Float(8) => {
                    let bytes = &data.data[start * 8..(start + out.len()) * 8];
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        *o = f64::from_le_bytes(b);
                    }
                }
                Dtype::Float(4) => {
                    let bytes = &data.data[start * 4..(start + out.len()) * 4];
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                        let mut b = [0u8; 4];
                        b.copy_from_slice(c);
                        *o = f32::from_le_bytes(b) as f64;
                    }
                }
                _ => {
                    for (k, o) in out.iter_mut().enumerate() {
                        *o = data.float(start + k).unwrap_or(f64::NAN);
                    }
                }
            }
            let bad = out.iter().position(|w| !w.is_finite()).map(|k| start + k);
            (bad, out.iter().all(|&w| w == 1.0))
        })
        .collect();
    if let Some(k) = parts.iter().find_map(|p| p.0) {
        return Err(format!(
            "array 'data' holds {} at position {k}: values must be finite",
            v[k]
        ));
    }
    Ok((!parts.iter().all(|p| p.1)).then_some(v))
}

/// Bytes of a `.npy` member: its header and `len` elements of `dtype`.
fn npy_size(dtype: Dtype, len: usize) -> (Vec<u8>, u64) {
    let h = npy::header(dtype, Some(len));
    let size = h.len() as u64 + (len * dtype.size()) as u64;
    (h, size)
}

/// Writes the elements `f(0..len)` as little-endian bytes of `width`, in blocks.
fn put_ints(
    out: &mut dyn Write,
    len: usize,
    width: usize,
    f: impl Fn(usize) -> u64 + Sync,
) -> std::io::Result<()> {
    const BLOCK: usize = 1 << 20;
    let mut buf = Vec::with_capacity(BLOCK * width);
    for start in (0..len).step_by(BLOCK) {
        buf.clear();
        for i in start..(start + BLOCK).min(len) {
            buf.extend_from_slice(&f(i).to_le_bytes()[..width]);
        }
        out.write_all(&buf)?;
    }
    Ok(())
}

/// Writes `m` to `out` as `scipy.sparse.save_npz(..., compressed=False)` writes a CSR matrix.
pub fn write<T: Scalar, W: Write>(out: W, m: &Csr<T>) -> std::io::Result<W> {
    // SciPy's rule (get_index_dtype): int32 when every index and offset fits.
    let fits32 = (m.nnz() as u64) <= i32::MAX as u64 && (m.ncols() as u64) <= i32::MAX as u64;
    let (index, width) = if fits32 {
        (Dtype::Int(4), 4)
    } else {
        (Dtype::Int(8), 8)
    };
    let value = Dtype::Float(std::mem::size_of::<T>());
    let mut z = zip::Writer::new(out);

    let (h, size) = npy_size(index, m.nnz());
    z.member("indices.npy", size, |o| {
        o.write_all(&h)?;
        let cols = m.col_idx();
        put_ints(o, cols.len(), width, |i| cols[i] as u64)
    })?;
    let (h, size) = npy_size(index, m.nrows() + 1);
    z.member("indptr.npy", size, |o| {
        o.write_all(&h)?;
        let ptr = m.row_ptr();
        put_ints(o, ptr.len(), width, |i| ptr[i])
    })?;
    let h = npy::header(Dtype::Bytes(3), None);
    z.member("format.npy", h.len() as u64 + 3, |o| {
        o.write_all(&h)?;
        o.write_all(b"csr")
    })?;
    let (h, size) = npy_size(Dtype::Int(8), 2);
    z.member("shape.npy", size, |o| {
        o.write_all(&h)?;
        o.write_all(&(m.nrows() as u64).to_le_bytes())?;
        o.write_all(&(m.ncols() as u64).to_le_bytes())
    })?;
    let (h, size) = npy_size(value, m.nnz());
    z.member("data.npy", size, |o| {
        o.write_all(&h)?;
        let vals = m.values();
        const BLOCK: usize = 1 << 20;
        let mut buf = Vec::with_capacity(BLOCK * value.size());
        for block in vals.chunks(BLOCK) {
            buf.clear();
            for &v in block {
                if value.size() == 4 {
                    buf.extend_from_slice(&(v.to_f64() as f32).to_le_bytes());
                } else {
                    buf.extend_from_slice(&v.to_f64().to_le_bytes());
                }
            }
            o.write_all(&buf)?;
        }
        Ok(())
    })?;
    z.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(bytes: &[u8]) -> Result<Loaded> {
        parse(bytes, Path::new("m.npz"))
    }

    fn small() -> Csr<f64> {
        // 3 x 4: row 0 {1: 2.5, 3: -1}, row 1 empty, row 2 {0: 4}.
        Csr::from_parts(3, 4, vec![0, 2, 2, 3], vec![1, 3, 0], vec![2.5, -1.0, 4.0]).unwrap()
    }

    #[test]
    fn a_written_matrix_reads_back_as_its_entries() {
        let bytes = write(Vec::new(), &small()).unwrap();
        let l = loaded(&bytes).unwrap();
        assert_eq!((l.edges.nrows, l.edges.ncols), (3, 4));
        assert_eq!(l.edges.edges, vec![(0, 1), (0, 3), (2, 0)]);
        assert_eq!(l.edges.weights, Some(vec![2.5, -1.0, 4.0]));
        assert_eq!(l.format, Format::Npz);
        let f32s = Csr::<f32>::from_parts(1, 1, vec![0, 1], vec![0], vec![0.1]).unwrap();
        let l = loaded(&write(Vec::new(), &f32s).unwrap()).unwrap();
        assert_eq!(l.edges.weights, Some(vec![0.1f32 as f64]));
    }

    /// A `.npy` array of integers of `dtype`.
    fn ints(dtype: Dtype, v: &[i64]) -> Vec<u8> {
        let mut b = npy::header(dtype, Some(v.len()));
        for &x in v {
            b.extend_from_slice(&x.to_le_bytes()[..dtype.size()]);
        }
        b
    }

    fn pairs(ptr: &[i64], idx: &[i64]) -> std::result::Result<Vec<(u32, u32)>, String> {
        let (p, i) = (ints(Dtype::Int(8), ptr), ints(Dtype::Uint(2), idx));
        let major = ptr.len() - 1;
        let (ptr, cols) = compressed(&Array::parse(&p)?, &Array::parse(&i)?, major, 4)?;
        let rows = RowEntries {
            nrows: major,
            ncols: 4,
            ptr,
            cols,
            values: None,
        };
        Ok(pairs_of(&rows, false))
    }

    #[test]
    fn offsets_and_indices_are_checked() {
        assert_eq!(
            pairs(&[0, 2, 2, 3], &[1, 3, 0]).unwrap(),
            [(0, 1), (0, 3), (2, 0)]
        );
        let e = pairs(&[0, 2, 1, 3], &[1, 3, 0]).unwrap_err();
        assert!(e.contains("'indptr' decreases at offset 2"), "{e}");
        let e = pairs(&[0, 2, 2, 2], &[1, 3, 0]).unwrap_err();
        assert!(e.contains("'indptr' runs from 0 to 2"), "{e}");
        let e = pairs(&[0, 2, 2, 3], &[1, 4, 0]).unwrap_err();
        assert!(e.contains("'indices' holds 4 at position 1"), "{e}");
        let e = pairs(&[-1, 2, 2, 3], &[1, 3, 0]).unwrap_err();
        assert!(e.contains("'indptr' runs from -1"), "{e}");
    }

    #[test]
    fn damaged_files_are_errors_naming_the_file() {
        let good = write(Vec::new(), &small()).unwrap();
        let mut bad = good.clone();
        let at = find_npy(&bad, "indices.npy") + 4;
        bad[at] ^= 1;
        let e = loaded(&bad).unwrap_err().to_string();
        assert!(
            e.contains("m.npz") && e.contains("indices.npy fails its CRC"),
            "{e}"
        );
        let e = loaded(b"0 1\n").unwrap_err().to_string();
        assert!(e.contains("not a ZIP"), "{e}");
        for cut in 0..good.len() {
            assert!(loaded(&good[..cut]).is_err());
        }
    }

    /// Where the elements of the member `name` start in an archive written by [`write`].
    fn find_npy(z: &[u8], name: &str) -> usize {
        let at = z
            .windows(name.len())
            .position(|w| w == name.as_bytes())
            .unwrap();
        let data = at + name.len();
        let hlen = u16::from_le_bytes([z[data + 8], z[data + 9]]) as usize;
        data + 10 + hlen
    }
}
