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
mod pattern;
pub(crate) mod placed;
mod rows;
mod zip;

use super::{Format, Labels, Loaded};
use crate::csr::{Csr, RowEntries};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
pub(crate) use part::parse_part;
pub(crate) use rows::parse_pattern_block;
pub use rows::{crc_pieces_match, BlockValues, CrcPiece, GroupOffsets, PatternBlock, ValueCheck};

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

/// Reads the sparse matrix in the `.npz` file `bytes` without listing its entries as edges when
/// the archive groups them: a CSR archive's arrays are its rows, a CSC archive's are the rows of
/// the transpose (its columns), left as they are. The entries, values and duplicates are those
/// [`parse`] gives, and the stored entries come in the order of its edges.
pub(crate) fn parse_grouped(bytes: &[u8], path: &Path) -> Result<Grouped> {
    let m = match read(bytes, path)? {
        Stored::Rows(entries) => Grouped::Stored(StoredMatrix {
            entries,
            transposed: false,
        }),
        Stored::Columns(entries) => Grouped::Stored(StoredMatrix {
            entries,
            transposed: true,
        }),
        Stored::Pairs(el) => Grouped::Edges(loaded(el)),
    };
    crate::interrupt::check()?;
    Ok(m)
}

/// Reads the pattern of the sparse matrix in the `.npz` file `bytes` for a caller that needs
/// neither its values nor its diagonal (a simple graph's adjacency): a CSR or CSC archive's
/// stored groups as [`parse_grouped`] gives them but without their entries `(i, i)` and their
/// values (`data` is checked to hold one number per entry; its elements are not read, nor its
/// CRC checked), with whether every group's indices strictly increase. A COO archive gives its
/// entries as [`parse`] does, without their values.
pub(crate) fn parse_pattern(bytes: &[u8], path: &Path) -> Result<Pattern> {
    let bad = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    let archive = Archive::open(bytes, path)?;
    let (nrows, ncols) = (archive.nrows, archive.ncols);
    let csr = match archive.layout {
        Layout::Csr => true,
        Layout::Csc => false,
        Layout::Coo => {
            let (row_raw, col_raw) = (archive.member("row")?, archive.member("col")?);
            let (row, col) = (
                array_of(path, "row", &row_raw)?,
                array_of(path, "col", &col_raw)?,
            );
            let edges = coordinate_pairs(&row, &col, nrows, ncols).map_err(bad)?;
            values_unread(&archive, edges.len())?;
            crate::interrupt::check()?;
            return Ok(Pattern::Edges(loaded(EdgeList {
                nrows,
                ncols,
                edges,
                weights: None,
            })));
        }
    };
    let (major, minor) = if csr { (nrows, ncols) } else { (ncols, nrows) };
    let ptr_raw = archive.member("indptr")?;
    let indptr = array_of(path, "indptr", &ptr_raw)?;
    let (idx, idx_member) = archive.member_unchecked("indices")?;
    let indices = array_of(path, "indices", &idx.bytes)?;
    values_unread(&archive, indices.len)?;
    let ptr = offsets(&indptr, &indices, major).map_err(bad)?;
    let crc = MemberCrc::of(&idx, idx_member);
    let read = pattern::off_diagonal(ptr, &indices, crc.as_ref(), minor).map_err(bad)?;
    crate::interrupt::check()?;
    Ok(Pattern::Stored {
        matrix: StoredMatrix {
            entries: RowEntries {
                nrows: major,
                ncols: minor,
                ptr: read.ptr,
                cols: read.cols,
                values: None,
            },
            transposed: !csr,
        },
        sorted: read.sorted,
    })
}

/// Checks that the archive's `data` holds numbers, one for each of its `entries`, without
/// reading them (nor, when stored, their CRC).
fn values_unread(archive: &Archive<'_>, entries: usize) -> Result<()> {
    let bad = |message: String| Error::Input {
        path: archive.path.to_path_buf(),
        message,
    };
    let (raw, _) = archive.member_unchecked("data")?;
    let data = array_of(archive.path, "data", &raw.bytes)?;
    if !matches!(
        data.dtype,
        Dtype::Float(_) | Dtype::Int(_) | Dtype::Uint(_) | Dtype::Bool
    ) {
        return Err(bad(format!(
            "array 'data' holds {}: values must be numbers",
            data.dtype.descr()
        )));
    }
    if data.len != entries {
        return Err(bad(format!(
            "array 'data' has {} values for {entries} entries",
            data.len
        )));
    }
    Ok(())
}

/// The pattern of a `.npz` file as [`parse_pattern`] reads it.
pub(crate) enum Pattern {
    /// A CSR or CSC archive's entries off the diagonal, grouped as stored, without values.
    Stored {
        /// The entries.
        matrix: StoredMatrix,
        /// Every group's indices strictly increase.
        sorted: bool,
    },
    /// A COO archive's entries as an edge list, without values.
    Edges(Loaded),
}

/// The matrix of a `.npz` file as [`parse_grouped`] reads it.
pub(crate) enum Grouped {
    /// A CSR or CSC archive's entries, grouped as stored.
    Stored(StoredMatrix),
    /// A COO archive's entries as an edge list.
    Edges(Loaded),
}

/// A matrix's entries grouped by row, or by column (the rows of its transpose), as a `.npz`
/// archive stores them: the entries (duplicates included) in stored order, which is the order
/// [`crate::io::load`] lists them as edges in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredMatrix {
    /// The groups: the matrix's rows, or its columns when `transposed`.
    pub entries: RowEntries,
    /// The groups are the matrix's columns (a CSC archive): `entries` holds the transpose.
    pub transposed: bool,
}

impl StoredMatrix {
    /// The matrix's rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        let (r, c) = (self.entries.nrows, self.entries.ncols);
        if self.transposed {
            (c, r)
        } else {
            (r, c)
        }
    }

    /// Number of stored entries.
    pub fn len(&self) -> usize {
        self.entries.cols.len()
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.cols.is_empty()
    }

    /// The matrix's `(row, column)` of stored entry `k` (`k < len()`).
    pub fn entry(&self, k: usize) -> (u32, u32) {
        let ptr = &self.entries.ptr;
        // The group holding entry k: the last one starting at or before it.
        let group = ptr.partition_point(|&p| p <= k as u64).saturating_sub(1) as u32;
        let minor = self.entries.cols[k];
        if self.transposed {
            (minor, group)
        } else {
            (group, minor)
        }
    }

    /// The entries grouped by the matrix's rows: as stored, or transposed from columns.
    pub fn into_rows(self) -> Result<RowEntries> {
        if self.transposed {
            self.entries.transposed()
        } else {
            Ok(self.entries)
        }
    }
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

/// An archive's members, with its `format` and `shape` read and checked: what every reader of
/// a `.npz` starts from.
struct Archive<'a> {
    bytes: &'a [u8],
    path: &'a Path,
    members: Vec<zip::Member>,
    /// How the entries are stored (`format`; others are refused on opening).
    layout: Layout,
    nrows: usize,
    ncols: usize,
}

/// The layouts of `save_npz` that gmcl reads (its array `format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Csr,
    Csc,
    Coo,
}

impl<'a> Archive<'a> {
    /// Lists the members of the `.npz` file `bytes` and reads its format and shape.
    fn open(bytes: &'a [u8], path: &'a Path) -> Result<Self> {
        let bad = |message: String| Error::Input {
            path: path.to_path_buf(),
            message,
        };
        let members = zip::members(bytes).map_err(bad)?;
        let mut archive = Archive {
            bytes,
            path,
            members,
            layout: Layout::Csr,
            nrows: 0,
            ncols: 0,
        };
        let format_raw = archive.member("format")?;
        let format = array_of(path, "format", &format_raw)?
            .text()
            .ok_or_else(|| bad("array 'format' is not a string".into()))?;
        // The layout before any array: BSR's and DIA's `data` has more than one dimension.
        archive.layout = match format.as_str() {
            "csr" => Layout::Csr,
            "csc" => Layout::Csc,
            "coo" => Layout::Coo,
            other => {
                return Err(bad(format!(
                    "holds a '{other}' matrix: gmcl reads csr, csc and coo (convert it with \
                     .tocsr() before save_npz)"
                )))
            }
        };
        let shape_raw = archive.member("shape")?;
        let shape = array_of(path, "shape", &shape_raw)?;
        if shape.len != 2 {
            return Err(bad(format!(
                "array 'shape' is {} long, not 2: gmcl reads two-dimensional matrices (a \
                 SciPy sparse array of other dimensions is not a graph)",
                shape.len
            )));
        }
        let (nrows, ncols) = match (shape.int(0), shape.int(1)) {
            (Some(r), Some(c)) if r >= 0 && c >= 0 => (r, c),
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
        (archive.nrows, archive.ncols) = (nrows as usize, ncols as usize);
        Ok(archive)
    }

    /// The bytes of the array `name` (inflated when the member is compressed).
    fn member(&self, name: &str) -> Result<Cow<'a, [u8]>> {
        let bad = |message: String| Error::Input {
            path: self.path.to_path_buf(),
            message,
        };
        let file = format!("{name}.npy");
        let m = self
            .members
            .iter()
            .find(|m| m.name == file)
            .ok_or_else(|| {
                bad(format!(
                    "has no array '{name}': not a SciPy sparse matrix (scipy.sparse.save_npz)"
                ))
            })?;
        zip::read(self.bytes, m).map_err(bad)
    }

    /// The member `name` as [`Archive::member`] finds it, its CRC left to the caller when it is
    /// stored (with the member, for the error).
    fn member_unchecked(&self, name: &str) -> Result<(zip::Body<'a>, &zip::Member)> {
        let file = format!("{name}.npy");
        let m = self
            .members
            .iter()
            .find(|m| m.name == file)
            .ok_or_else(|| Error::Input {
                path: self.path.to_path_buf(),
                message: format!(
                    "has no array '{name}': not a SciPy sparse matrix (scipy.sparse.save_npz)"
                ),
            })?;
        let body = zip::read_unchecked(self.bytes, m).map_err(|message| Error::Input {
            path: self.path.to_path_buf(),
            message,
        })?;
        Ok((body, m))
    }
}

/// Reads and checks the arrays of the `.npz` file `bytes`.
fn read(bytes: &[u8], path: &Path) -> Result<Stored> {
    let bad = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    let archive = Archive::open(bytes, path)?;
    let member = |name: &str| archive.member(name);
    let (layout, nrows, ncols) = (archive.layout, archive.nrows, archive.ncols);
    // The large members' CRCs are checked by the passes that decode them.
    let (data_body, data_member) = archive.member_unchecked("data")?;
    let data = array_checked(&archive, "data", &data_body.bytes)?;
    let data_crc = MemberCrc::of(&data_body, data_member);
    let check_len = |entries: usize| {
        if data.len != entries {
            return Err(bad(format!(
                "array 'data' has {} values for {entries} entries",
                data.len
            )));
        }
        values(&data, data_crc.as_ref()).map_err(bad)
    };
    let stored = match layout {
        Layout::Csr | Layout::Csc => {
            let ptr_raw = member("indptr")?;
            let (idx_body, idx_member) = archive.member_unchecked("indices")?;
            let (indptr, indices) = (
                array_of(path, "indptr", &ptr_raw)?,
                array_checked(&archive, "indices", &idx_body.bytes)?,
            );
            let idx_crc = MemberCrc::of(&idx_body, idx_member);
            let csr = layout == Layout::Csr;
            let (major, minor) = if csr { (nrows, ncols) } else { (ncols, nrows) };
            let (ptr, cols) =
                compressed(&indptr, &indices, major, minor, idx_crc.as_ref()).map_err(bad)?;
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
        Layout::Coo => {
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

/// [`array_of`] for a member whose CRC is still to check: where its header does not parse, the
/// member's CRC failure is the error when it fails (the header was damaged).
fn array_checked<'a>(archive: &Archive<'_>, name: &str, raw: &'a [u8]) -> Result<Array<'a>> {
    array_of(archive.path, name, raw).map_err(|e| archive.member(name).err().unwrap_or(e))
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
    crc: Option<&MemberCrc<'_>>,
) -> std::result::Result<(Vec<u64>, Vec<u32>), String> {
    let ptr = offsets(indptr, indices, major)?;
    let cols = decode_indices_checked(indices, 0..indices.len, minor, crc)?;
    Ok((ptr, cols))
}

/// Elements per part of an array decoded by the threads: a part's bytes stay in cache from its
/// CRC to its decoding.
const PART: usize = 1 << 16;

/// The CRC a stored member's bytes must have, checked by the pass that decodes its array from
/// the CRCs of the array's parts (so the bytes are read once).
pub(super) struct MemberCrc<'a> {
    member: &'a zip::Member,
    body: &'a [u8],
    want: u32,
}

impl<'a> MemberCrc<'a> {
    /// The check `body` (of `member`) still needs; `None` when it needs none (an inflated
    /// member, checked as it was inflated).
    fn of(body: &'a zip::Body<'_>, member: &'a zip::Member) -> Option<Self> {
        body.crc.map(|want| MemberCrc {
            member,
            body: &body.bytes,
            want,
        })
    }

    /// Checks the member from the CRCs of consecutive parts covering all of `array`'s elements
    /// (a slice of the member's bytes): the header before them and anything after are added
    /// around the parts'.
    pub(super) fn check<'h>(
        &self,
        array: &Array<'_>,
        parts: impl IntoIterator<Item = &'h crc32fast::Hasher>,
    ) -> std::result::Result<(), String> {
        let start = array.data.as_ptr() as usize - self.body.as_ptr() as usize;
        let end = start + array.data.len();
        let mut all = crc32fast::Hasher::new();
        all.update(&self.body[..start]);
        for c in parts {
            all.combine(c);
        }
        all.update(&self.body[end..]);
        if all.finalize() != self.want {
            return Err(zip::crc_failure(self.member));
        }
        Ok(())
    }
}

/// The CRC of one part's `bytes`, or an empty one when no check needs it.
fn part_crc(check: bool, bytes: &[u8]) -> crc32fast::Hasher {
    let mut h = crc32fast::Hasher::new();
    if check {
        h.update(bytes);
    }
    h
}

/// The offsets `indptr` of a compressed matrix of `major` rows (or columns), checked: they
/// start at 0, never decrease and end at the number of `indices`, both arrays of integers.
fn offsets(
    indptr: &Array<'_>,
    indices: &Array<'_>,
    major: usize,
) -> std::result::Result<Vec<u64>, String> {
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
    Ok(ptr)
}

/// The entries `range` of the array `indices`, each checked to be a column (or row) below
/// `minor`; decoded in parts straight from the (mapped) member, the first bad one in file order
/// the error.
fn decode_indices(
    indices: &Array<'_>,
    range: std::ops::Range<usize>,
    minor: usize,
) -> std::result::Result<Vec<u32>, String> {
    decode_indices_checked(indices, range, minor, None)
}

/// [`decode_indices`], checking the member's CRC `crc` (when given, `range` being the whole
/// array) in the same pass; a damaged member is that error before any bad index.
fn decode_indices_checked(
    indices: &Array<'_>,
    range: std::ops::Range<usize>,
    minor: usize,
    crc: Option<&MemberCrc<'_>>,
) -> std::result::Result<Vec<u32>, String> {
    debug_assert!(crc.is_none() || range == (0..indices.len));
    let width = indices.dtype.size();
    let mut cols = vec![0u32; range.len()];
    let parts: Vec<_> = cols
        .par_chunks_mut(PART)
        .enumerate()
        .map(|(p, out)| {
            // The new memory's pages mapped in one call rather than a fault each.
            crate::mem::prefault(out);
            let start = range.start + p * PART;
            let bytes = &indices.data[start * width..(start + out.len()) * width];
            let h = part_crc(crc.is_some(), bytes);
            if indices_below(indices, start, out, minor) {
                return (h, Ok(()));
            }
            // Some index is out of range: the element by element walk names the first.
            let walked = indices.for_each_int(start..start + out.len(), |k, j| {
                if j < 0 || j >= minor as i64 {
                    return Err(outside(indices, k, j, minor));
                }
                out[k - start] = j as u32;
                Ok(())
            });
            (h, walked)
        })
        .collect();
    if let Some(c) = crc {
        c.check(indices, parts.iter().map(|(h, _)| h))?;
    }
    parts.into_iter().try_for_each(|(_, r)| r)?;
    Ok(cols)
}

/// The error for element `k` of `indices`, read as `j` (`-1` where it passed `i64`), outside
/// `0..minor`: it names the element's own value.
pub(super) fn outside(indices: &Array<'_>, k: usize, j: i64, minor: usize) -> String {
    let held = indices.int(k).unwrap_or(j as i128);
    format!("array 'indices' holds {held} at position {k}, outside 0..{minor}")
}

/// Decodes the 32-bit indices from element `start` on into `out` and tells whether every one is
/// under `minor` (a loop the compiler vectorises: a copy and a running maximum); `false` for
/// other element types, and where some index is not under `minor` (`out` is then unspecified).
fn indices_below(indices: &Array<'_>, start: usize, out: &mut [u32], minor: usize) -> bool {
    let signed = match indices.dtype {
        Dtype::Int(4) => true,
        Dtype::Uint(4) => false,
        _ => return false,
    };
    let bytes = &indices.data[start * 4..(start + out.len()) * 4];
    let mut most = 0u32;
    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        let v = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        most = most.max(v);
        *o = v;
    }
    // A negative i32 reads as 2^31 or more: past any minor a signed array allows.
    let bound = if signed { minor.min(1 << 31) } else { minor };
    (most as usize) < bound
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
/// infinities are refused as in the text formats. With `crc`, the member is checked in the same
/// pass (a damaged member is that error before any bad value).
fn values(
    data: &Array<'_>,
    crc: Option<&MemberCrc<'_>>,
) -> std::result::Result<Option<Vec<f64>>, String> {
    if !matches!(
        data.dtype,
        Dtype::Float(_) | Dtype::Int(_) | Dtype::Uint(_) | Dtype::Bool
    ) {
        return Err(format!(
            "array 'data' holds {}: values must be numbers",
            data.dtype.descr()
        ));
    }
    // An unweighted matrix saved by SciPy holds ones, which its first part tells: then the
    // member is read for ones alone, and no array of values is made to be dropped.
    if !all_ones(data, 0..PART.min(data.len)) {
        return decoded(data, crc).map(Some);
    }
    let width = data.dtype.size();
    let scanned: Vec<_> = (0..data.len.div_ceil(PART))
        .into_par_iter()
        .map(|p| {
            let range = p * PART..((p + 1) * PART).min(data.len);
            let bytes = &data.data[range.start * width..range.end * width];
            (part_crc(crc.is_some(), bytes), all_ones(data, range))
        })
        .collect();
    if let Some(c) = crc {
        c.check(data, scanned.iter().map(|(h, _)| h))?;
    }
    if scanned.iter().all(|&(_, ones)| ones) {
        return Ok(None);
    }
    // Checked above.
    decoded(data, None).map(Some)
}

/// The values of `data` as `f64`, decoded in parts by the threads (the member checked against
/// `crc` in the same pass), each part noting its first value that is not finite.
fn decoded(data: &Array<'_>, crc: Option<&MemberCrc<'_>>) -> std::result::Result<Vec<f64>, String> {
    let width = data.dtype.size();
    let mut v = vec![0f64; data.len];
    let parts: Vec<_> = v
        .par_chunks_mut(PART)
        .enumerate()
        .map(|(p, out)| {
            crate::mem::prefault(out);
            let start = p * PART;
            let bytes = &data.data[start * width..(start + out.len()) * width];
            let h = part_crc(crc.is_some(), bytes);
            match data.dtype {
                Dtype::Float(8) => {
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        *o = f64::from_le_bytes(b);
                    }
                }
                Dtype::Float(4) => {
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
            (
                h,
                out.iter().position(|w| !w.is_finite()).map(|k| start + k),
            )
        })
        .collect();
    if let Some(c) = crc {
        c.check(data, parts.iter().map(|(h, _)| h))?;
    }
    if let Some(k) = parts.iter().find_map(|&(_, k)| k) {
        return Err(format!(
            "array 'data' holds {} at position {k}: values must be finite",
            v[k]
        ));
    }
    Ok(v)
}

/// Whether every value in `range` of the numeric array `data` is 1.
fn all_ones(data: &Array<'_>, range: std::ops::Range<usize>) -> bool {
    // The values xor-ed with one's bits and or-ed together (a loop the compiler vectorises):
    // zero where every value is one.
    macro_rules! ones {
        ($n:literal, $bits:ty, $one:expr) => {
            data.data[range.start * $n..range.end * $n]
                .chunks_exact($n)
                .fold(0, |acc, c| {
                    let mut b = [0u8; $n];
                    b.copy_from_slice(c);
                    acc | (<$bits>::from_le_bytes(b) ^ $one.to_bits())
                })
                == 0
        };
    }
    match data.dtype {
        Dtype::Float(8) => ones!(8, u64, 1f64),
        Dtype::Float(4) => ones!(4, u32, 1f32),
        _ => range.into_iter().all(|i| data.float(i) == Some(1.0)),
    }
}

/// Bytes of a `.npy` member: its header and `len` elements of `dtype`.
#[cfg(test)]
fn npy_size(dtype: Dtype, len: usize) -> (Vec<u8>, u64) {
    let h = npy::header(dtype, Some(len));
    let size = h.len() as u64 + (len * dtype.size()) as u64;
    (h, size)
}

/// Writes the elements `f(0..len)` as little-endian bytes of `width`, in blocks converted in
/// parallel and written in order.
fn put_ints(
    out: &mut dyn Write,
    len: usize,
    width: usize,
    f: impl Fn(usize) -> u64 + Sync,
) -> std::io::Result<()> {
    put_blocks(out, len, width, |i, o| {
        o.copy_from_slice(&f(i).to_le_bytes()[..width])
    })
}

/// Writes `len` elements of `width` bytes, element `i` made by `put(i, its bytes)`, in blocks
/// converted in parallel and written in order.
fn put_blocks(
    out: &mut dyn Write,
    len: usize,
    width: usize,
    put: impl Fn(usize, &mut [u8]) + Sync,
) -> std::io::Result<()> {
    const BLOCK: usize = 1 << 20;
    let mut buf = vec![0u8; BLOCK.min(len) * width];
    for start in (0..len).step_by(BLOCK) {
        let end = (start + BLOCK).min(len);
        let bytes = &mut buf[..(end - start) * width];
        bytes
            .par_chunks_mut(width << 14)
            .enumerate()
            .for_each(|(p, part)| {
                let first = start + (p << 14);
                for (k, o) in part.chunks_exact_mut(width).enumerate() {
                    put(first + k, o);
                }
            });
        out.write_all(bytes)?;
    }
    Ok(())
}

/// Bytes of an index and an offset in the archive of a matrix of `nnz` entries and `ncols`
/// columns: SciPy's rule (`get_index_dtype`), 4 (`int32`) where every index and offset fits,
/// else 8.
fn index_width(nnz: u64, ncols: usize) -> usize {
    match nnz <= i32::MAX as u64 && (ncols as u64) <= i32::MAX as u64 {
        true => 4,
        false => 8,
    }
}

/// The bytes of `v` in memory, which on a little-endian machine are the little-endian bytes
/// `.npy` arrays of the same type hold.
fn raw_bytes<E: Copy>(v: &[E]) -> &[u8] {
    // SAFETY: any initialised memory can be read as bytes; the length is the slice's size.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Writes the column indices as `.npy` elements of `width` bytes: their memory as it is where
/// the widths agree (one large write), converted otherwise.
fn put_cols(out: &mut dyn Write, cols: &[u32], width: usize) -> std::io::Result<()> {
    #[cfg(target_endian = "little")]
    if width == 4 {
        return out.write_all(raw_bytes(cols));
    }
    put_ints(out, cols.len(), width, |i| cols[i] as u64)
}

/// Writes the values as `.npy` floats of their own width: their memory as it is (one large
/// write) on a little-endian machine, converted otherwise.
fn put_values<T: Scalar>(out: &mut dyn Write, vals: &[T]) -> std::io::Result<()> {
    #[cfg(target_endian = "little")]
    {
        out.write_all(raw_bytes(vals))
    }
    #[cfg(not(target_endian = "little"))]
    put_values_converted(out, vals)
}

/// [`put_values`] element by element, whatever the machine's byte order.
#[cfg_attr(target_endian = "little", allow(dead_code))]
fn put_values_converted<T: Scalar>(out: &mut dyn Write, vals: &[T]) -> std::io::Result<()> {
    let width = std::mem::size_of::<T>();
    put_blocks(out, vals.len(), width, |i, o| {
        let v = vals[i].to_f64();
        if width == 4 {
            o.copy_from_slice(&(v as f32).to_le_bytes());
        } else {
            o.copy_from_slice(&v.to_le_bytes());
        }
    })
}

/// Writes `m` to `out` as `scipy.sparse.save_npz(..., compressed=False)` writes a CSR matrix.
/// The large arrays go out in large writes (the indices and values as they lie in memory where
/// the types agree), their CRCs made in parallel.
pub fn write<T: Scalar, W: Write>(out: W, m: &Csr<T>) -> std::io::Result<W> {
    write_in_passes::<T, W>(out, m.nrows(), m.ncols(), m.nnz() as u64, |array, w| {
        w.put(match array {
            CsrArray::Indices => CsrPiece::Indices(m.col_idx()),
            CsrArray::Indptr => CsrPiece::Indptr(m.row_ptr()),
            CsrArray::Data => CsrPiece::Data(m.values()),
        })
    })
}

/// The arrays of a CSR archive that hold the entries, in the order the archive stores them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsrArray {
    /// The column of every entry, row by row.
    Indices,
    /// The row offsets.
    Indptr,
    /// The value of every entry, row by row.
    Data,
}

impl CsrArray {
    /// The array's name in the archive (its member's, without `.npy`).
    pub fn name(self) -> &'static str {
        match self {
            CsrArray::Indices => "indices",
            CsrArray::Indptr => "indptr",
            CsrArray::Data => "data",
        }
    }
}

/// A piece of one of [`CsrArray`]'s arrays, for pieces of consecutive rows that come in order.
#[derive(Clone, Copy, Debug)]
pub enum CsrPiece<'a, T> {
    /// The rows' columns.
    Indices(&'a [u32]),
    /// The rows' own offsets (`ptr[0]` the first row's start, `ptr[k + 1]` row `k`'s end).
    Indptr(&'a [u64]),
    /// The rows' values.
    Data(&'a [T]),
}

/// One array of the archive being written by [`write_in_passes`], piece by piece.
pub struct ArrayWriter<'w, T> {
    out: &'w mut dyn Write,
    array: CsrArray,
    /// Bytes of an index and an offset.
    width: usize,
    /// Entries before the next piece's rows (the `indptr` pass).
    end: u64,
    values: std::marker::PhantomData<T>,
}

impl<T: Scalar> ArrayWriter<'_, T> {
    /// Writes the next piece of the array; a piece of another array is refused.
    pub fn put(&mut self, piece: CsrPiece<'_, T>) -> std::io::Result<()> {
        match (self.array, piece) {
            (CsrArray::Indices, CsrPiece::Indices(cols)) => put_cols(self.out, cols, self.width),
            (CsrArray::Indptr, CsrPiece::Indptr(ptr)) => {
                let (base, first) = (self.end, ptr.first().copied().unwrap_or(0));
                let len = ptr.len().saturating_sub(1);
                put_ints(self.out, len, self.width, |i| base + ptr[i + 1] - first)?;
                self.end = base + ptr.last().map_or(0, |&p| p - first);
                Ok(())
            }
            (CsrArray::Data, CsrPiece::Data(vals)) => put_values(self.out, vals),
            (array, _) => Err(std::io::Error::other(format!(
                "a piece of another array came while '{}' was being written",
                array.name()
            ))),
        }
    }
}

/// Writes what [`write`] writes for an `nrows x ncols` matrix of `nnz` entries that is never
/// whole in one place: `fill(array, writer)` is called once for each of [`CsrArray`]'s arrays,
/// in that order, and hands the writer the array's pieces for consecutive rows, in order. An
/// array whose pieces add up to another size than the shape and `nnz` give is an error.
pub fn write_in_passes<T: Scalar, W: Write>(
    out: W,
    nrows: usize,
    ncols: usize,
    nnz: u64,
    mut fill: impl FnMut(CsrArray, &mut ArrayWriter<'_, T>) -> std::io::Result<()>,
) -> std::io::Result<W> {
    let layout = placed::CsrLayout::new::<T>(nrows, ncols, nnz);
    let width = layout.index_width();
    let mut z = zip::Writer::new(out);
    for (name, size, prefix, array) in layout.members() {
        z.member(name, size, |o| {
            o.write_all(prefix)?;
            let Some(array) = array else { return Ok(()) };
            let mut w = ArrayWriter {
                out: o,
                array,
                width,
                end: 0,
                values: std::marker::PhantomData,
            };
            fill(array, &mut w)
        })?;
    }
    z.finish()
}

/// Archives for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) mod testing {
    use super::npy::{header, Dtype};
    use super::zip;

    /// A stored SciPy archive of a compressed matrix: `kind` "csr" or "csc", its `groups`
    /// (rows, or columns; each a list of indices, in stored order) of a `shape` matrix, indices
    /// and offsets of 8 bytes when `wide` (else 4), every value 1.
    pub(crate) fn compressed(
        kind: &str,
        shape: (usize, usize),
        groups: &[Vec<u32>],
        wide: bool,
    ) -> Vec<u8> {
        let index = if wide { Dtype::Int(8) } else { Dtype::Int(4) };
        let ints = |v: &[u64], dtype: Dtype| {
            let mut b = header(dtype, Some(v.len()));
            for &x in v {
                b.extend_from_slice(&x.to_le_bytes()[..dtype.size()]);
            }
            b
        };
        let mut ptr = vec![0u64];
        let mut idx = Vec::new();
        for g in groups {
            idx.extend(g.iter().map(|&c| u64::from(c)));
            ptr.push(idx.len() as u64);
        }
        let mut format = header(Dtype::Bytes(3), None);
        format.extend_from_slice(kind.as_bytes());
        let mut data = header(Dtype::Float(8), Some(idx.len()));
        for _ in 0..idx.len() {
            data.extend_from_slice(&1f64.to_le_bytes());
        }
        let members = [
            ("format.npy", format),
            (
                "shape.npy",
                ints(&[shape.0 as u64, shape.1 as u64], Dtype::Int(8)),
            ),
            ("indices.npy", ints(&idx, index)),
            ("indptr.npy", ints(&ptr, index)),
            ("data.npy", data),
        ];
        let mut z = zip::Writer::new(Vec::new());
        for (name, bytes) in &members {
            z.member(name, bytes.len() as u64, |o| o.write_all(bytes))
                .unwrap();
        }
        z.finish().unwrap()
    }
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

    /// Writes `m` by [`write_in_passes`], each array in pieces of the rows between `cuts`
    /// (each piece's offsets a slice of `m`'s, so they start where the piece starts).
    fn in_pieces(m: &Csr<f64>, nnz: u64, cuts: &[usize]) -> std::io::Result<Vec<u8>> {
        write_in_passes::<f64, _>(Vec::new(), m.nrows(), m.ncols(), nnz, |array, w| {
            for c in cuts.windows(2) {
                let ptr = &m.row_ptr()[c[0]..=c[1]];
                let span = ptr[0] as usize..ptr[ptr.len() - 1] as usize;
                w.put(match array {
                    CsrArray::Indices => CsrPiece::Indices(&m.col_idx()[span]),
                    CsrArray::Indptr => CsrPiece::Indptr(ptr),
                    CsrArray::Data => CsrPiece::Data(&m.values()[span]),
                })?;
            }
            Ok(())
        })
    }

    #[test]
    fn an_archive_written_in_pieces_is_the_whole_matrix_s() {
        // 6 x 4: rows 0, 2, 4 and 5 empty.
        let m = Csr::from_parts(
            6,
            4,
            vec![0, 0, 2, 2, 3, 3, 3],
            vec![1, 3, 0],
            vec![2.5, -1.0, 4.0],
        )
        .unwrap();
        let whole = write(Vec::new(), &m).unwrap();
        let cuts: [&[usize]; 5] = [
            &[0, 6],
            &[0, 1, 2, 3, 4, 5, 6],
            &[0, 2, 6],
            &[0, 0, 3, 3, 6, 6],
            &[0, 1, 4],
        ];
        for c in &cuts[..4] {
            assert_eq!(in_pieces(&m, 3, c).unwrap(), whole, "{c:?}");
        }
        // Pieces that leave out rows 4 and 5 (entries all there) fall short of the shape.
        let e = in_pieces(&m, 3, cuts[4]).unwrap_err().to_string();
        assert!(e.contains("member indptr.npy"), "{e}");
        let e = in_pieces(&m, 4, cuts[0]).unwrap_err().to_string();
        assert!(e.contains("member indices.npy"), "{e}");
        let e = write_in_passes::<f64, _>(Vec::new(), 6, 4, 3, |_, w| {
            w.put(CsrPiece::Indices(&[0, 1, 2]))
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("while 'indptr' was being written"), "{e}");
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
        let (ptr, cols) = compressed(&Array::parse(&p)?, &Array::parse(&i)?, major, 4, None)?;
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
    fn indices_decode_by_the_fast_path_or_name_the_first_bad_one() {
        // `v` stored as `dtype` (of `n` bytes), its elements `range` decoded against `minor`.
        let decode =
            |v: &[i64], dtype: Dtype, n: usize, range: std::ops::Range<usize>, minor: usize| {
                let bytes: Vec<u8> = v
                    .iter()
                    .flat_map(|x| x.to_le_bytes()[..n].to_vec())
                    .collect();
                let a = Array {
                    dtype,
                    len: v.len(),
                    data: &bytes,
                };
                decode_indices(&a, range, minor)
            };
        // Over two parts of 2^16, the bad index (if any) in the second.
        let mut v: Vec<i64> = (0..70_000).map(|k| k % 1000).collect();
        for (dtype, n) in [(Dtype::Int(4), 4), (Dtype::Uint(4), 4), (Dtype::Int(8), 8)] {
            let want: Vec<u32> = v.iter().map(|&x| x as u32).collect();
            assert_eq!(decode(&v, dtype, n, 0..v.len(), 1000).unwrap(), want);
            assert_eq!(decode(&v, dtype, n, 5..9, 1000).unwrap(), want[5..9]);
            let e = decode(&v, dtype, n, 0..v.len(), 999).unwrap_err();
            assert!(
                e.contains("holds 999 at position 999, outside 0..999"),
                "{e}"
            );
        }
        v[68_000] = -1;
        // Unsigned, the same bytes read as 2^32 - 1: past any shape.
        let cases = [
            (Dtype::Int(4), 4, "holds -1 at position 68000"),
            (Dtype::Int(8), 8, "holds -1 at position 68000"),
            (Dtype::Uint(4), 4, "holds 4294967295 at position 68000"),
            (
                Dtype::Uint(8),
                8,
                "holds 18446744073709551615 at position 68000",
            ),
        ];
        for (dtype, n, message) in cases {
            let e = decode(&v, dtype, n, 0..v.len(), 1000).unwrap_err();
            assert!(e.contains(message), "{e}");
        }
    }

    #[test]
    fn values_of_ones_are_the_pattern_and_others_are_read() {
        // The values of `v` stored as floats of `n` bytes.
        let read = |v: &[f64], n: usize| {
            let bytes: Vec<u8> = match n {
                8 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                _ => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
            };
            let a = Array {
                dtype: Dtype::Float(n),
                len: v.len(),
                data: &bytes,
            };
            values(&a, None)
        };
        let mut v = vec![1.0f64; 140_000];
        for n in [4, 8] {
            assert_eq!(read(&v, n).unwrap(), None);
        }
        // One value other than one, in the last part: every value read.
        v[139_999] = 0.5;
        for n in [4, 8] {
            assert_eq!(read(&v, n).unwrap().as_deref(), Some(&v[..]));
        }
        // A NaN is refused.
        v[139_999] = f64::NAN;
        let e = read(&v, 8).unwrap_err();
        assert!(e.contains("at position 139999"), "{e}");
        // Integer ones are the pattern too, by the element-wise path.
        let ones = [1u8; 10];
        let a = Array {
            dtype: Dtype::Uint(1),
            len: 10,
            data: &ones,
        };
        assert_eq!(values(&a, None).unwrap(), None);
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

    /// The writer as it was before its arrays went out in large writes: element by element,
    /// one block at a time, on one thread. [`write`] must give the same bytes.
    fn sequential_write<T: Scalar>(m: &Csr<T>) -> Vec<u8> {
        fn ints(o: &mut dyn Write, v: &[u64], width: usize) -> std::io::Result<()> {
            for x in v {
                o.write_all(&x.to_le_bytes()[..width])?;
            }
            Ok(())
        }
        let fits32 = (m.nnz() as u64) <= i32::MAX as u64 && (m.ncols() as u64) <= i32::MAX as u64;
        let (index, width) = if fits32 {
            (Dtype::Int(4), 4)
        } else {
            (Dtype::Int(8), 8)
        };
        let value = Dtype::Float(std::mem::size_of::<T>());
        let mut z = zip::Writer::new(Vec::new());
        let (h, size) = npy_size(index, m.nnz());
        z.member("indices.npy", size, |o| {
            o.write_all(&h)?;
            let cols: Vec<u64> = m.col_idx().iter().map(|&c| c as u64).collect();
            ints(o, &cols, width)
        })
        .unwrap();
        let (h, size) = npy_size(index, m.nrows() + 1);
        z.member("indptr.npy", size, |o| {
            o.write_all(&h)?;
            ints(o, m.row_ptr(), width)
        })
        .unwrap();
        let h = npy::header(Dtype::Bytes(3), None);
        z.member("format.npy", h.len() as u64 + 3, |o| {
            o.write_all(&h)?;
            o.write_all(b"csr")
        })
        .unwrap();
        let (h, size) = npy_size(Dtype::Int(8), 2);
        z.member("shape.npy", size, |o| {
            o.write_all(&h)?;
            ints(o, &[m.nrows() as u64, m.ncols() as u64], 8)
        })
        .unwrap();
        let (h, size) = npy_size(value, m.nnz());
        z.member("data.npy", size, |o| {
            o.write_all(&h)?;
            for &v in m.values() {
                if value.size() == 4 {
                    o.write_all(&(v.to_f64() as f32).to_le_bytes())?;
                } else {
                    o.write_all(&v.to_f64().to_le_bytes())?;
                }
            }
            Ok(())
        })
        .unwrap();
        z.finish().unwrap()
    }

    /// A random `nrows x ncols` matrix of about `nnz` entries whose values use every bit of
    /// their type (finite, of any sign and exponent).
    fn random<T: Scalar>(nrows: usize, ncols: usize, nnz: usize, seed: u64) -> Csr<T> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let mut edges = Vec::new();
        let mut weights = Vec::new();
        while edges.len() < nnz {
            let bits = rng.next_u64();
            let w = if std::mem::size_of::<T>() == 4 {
                f32::from_bits(bits as u32) as f64
            } else {
                f64::from_bits(bits)
            };
            if w.is_finite() {
                let i = (rng.next_u64() % nrows as u64) as u32;
                let j = (rng.next_u64() % ncols as u64) as u32;
                edges.push((i, j));
                weights.push(w);
            }
        }
        let el = EdgeList {
            nrows,
            ncols,
            edges,
            weights: Some(weights),
        };
        let keep = crate::csr::BuildOptions {
            duplicates: crate::csr::Duplicates::Keep,
            ..Default::default()
        };
        Csr::from_edges(&el, &keep).unwrap()
    }

    #[test]
    fn large_writes_give_the_bytes_of_the_sequential_writer() {
        // Sizes around the conversion blocks (2^20 elements, parts of 2^14), and a matrix
        // whose column count needs 64-bit indices.
        for (k, &(nrows, ncols, nnz)) in [
            (1, 1, 0),
            (3, 4, 5),
            (5000, 300, 70_000),
            ((1 << 20) + 3, 17, (1 << 20) + 5),
            (4, 3_000_000_000, 9),
        ]
        .iter()
        .enumerate()
        {
            let a = random::<f64>(nrows, ncols, nnz, k as u64);
            assert_eq!(write(Vec::new(), &a).unwrap(), sequential_write(&a), "{k}");
            let b = random::<f32>(nrows, ncols, nnz, k as u64 + 100);
            assert_eq!(write(Vec::new(), &b).unwrap(), sequential_write(&b), "{k}");
            let mut conv = Vec::new();
            put_values_converted(&mut conv, b.values()).unwrap();
            let mut raw = Vec::new();
            put_values(&mut raw, b.values()).unwrap();
            assert_eq!(conv, raw);
        }
        let wide = random::<f64>(4, 3_000_000_000, 9, 7);
        let l = loaded(&write(Vec::new(), &wide).unwrap()).unwrap();
        assert_eq!(l.edges.ncols, 3_000_000_000);
        assert_eq!(l.edges.weights.as_deref(), Some(wide.values()));
    }

    #[test]
    fn a_damaged_byte_anywhere_in_a_large_member_is_its_crc_failure() {
        // Several parts' worth of entries, with values and with ones; bits flipped in the first
        // part, a middle one and the last element of each array, and in its header: each is the
        // member's CRC failure, never a value read as a weight or an index read as bad.
        let weighted = random::<f64>(2000, 3000, 3 * PART + 17, 11);
        let mut ones = weighted.clone();
        ones.values_mut().fill(1.0);
        let nnz = weighted.nnz();
        for m in [&weighted, &ones] {
            let good = write(Vec::new(), m).unwrap();
            let l = loaded(&good).unwrap();
            let want = (!std::ptr::eq(m, &ones)).then(|| m.values().to_vec());
            assert_eq!(l.edges.weights, want);
            for (name, width, bit) in [("indices.npy", 4, 30), ("data.npy", 8, 3)] {
                let start = find_npy(&good, name);
                for (at, bit) in [
                    (start + 5 * width, bit),
                    (start + (PART + PART / 2) * width, bit),
                    (start + (nnz - 1) * width, bit),
                    (start - 3, 0),
                ] {
                    let mut bad = good.clone();
                    bad[at + bit / 8] ^= 1 << (bit % 8);
                    let e = loaded(&bad).unwrap_err().to_string();
                    assert!(e.contains(&format!("{name} fails its CRC")), "{at}: {e}");
                }
                // The header's magic, which no longer parses.
                let mut bad = good.clone();
                let magic = good.windows(name.len()).position(|w| w == name.as_bytes());
                bad[magic.unwrap() + name.len()] ^= 1;
                let e = loaded(&bad).unwrap_err().to_string();
                assert!(e.contains(&format!("{name} fails its CRC")), "magic: {e}");
            }
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
