//! Matrix Market coordinate files (`.mtx`).
//!
//! The first line is the header `%%MatrixMarket matrix coordinate <field> <symmetry>` (words
//! case-insensitive) with field `real`, `integer` or `pattern` and symmetry `general`,
//! `symmetric` or `skew-symmetric`. Comment lines follow, then the size line `rows columns
//! entries`, then exactly `entries` lines `i j [value]` with 1-based indices. Indices become
//! 0-based inside gmcl (writers shift them back to 1-based for `.mtx` output only). A symmetric
//! file stores one triangle: each off-diagonal entry `(i, j, v)` also gives `(j, i, v)`
//! (`(j, i, -v)` when skew-symmetric).

use super::reader::{
    self, is_space, parse_float, put, quote, scan_uint, skip_spaces, token_end, ChunkResult, Stats,
    Stop,
};
use super::Labels;
use super::{Format, Loaded};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::path::Path;

const HEADER_FORM: &str = "'%%MatrixMarket matrix coordinate <real|integer|pattern> \
                           <general|symmetric|skew-symmetric>'";

/// What the header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    field: Field,
    symmetry: Symmetry,
}

/// What an entry's value column holds, as the header's field says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    /// No value column: every value is 1.
    Pattern,
    /// `real` (or `double`): a decimal number.
    Real,
    /// `integer`: an optional sign and digits.
    Integer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
}

/// The matrix shape the entries must fit, for the chunk parser and the diagnosis.
#[derive(Clone, Copy, Debug)]
struct Shape {
    rows: u64,
    cols: u64,
    /// Line number of the size line, for messages.
    size_line: u64,
}

/// The header and size line of a file, and where its entries start.
struct Preamble {
    header: Header,
    shape: Shape,
    declared: u64,
    /// The first byte after the size line.
    entries_at: usize,
}

/// Reads the header, the comments and the size line.
fn preamble(bytes: &[u8], path: &Path) -> Result<Preamble> {
    let at_line = |line: u64, message: String| Error::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let first_end = reader::line_end(bytes, 0);
    let header = parse_header(&bytes[..first_end]).map_err(|m| at_line(1, m))?;

    // Comments, then the size line.
    let at = reader::skip_leading_comments(bytes, (first_end + 1).min(bytes.len()));
    if at >= bytes.len() {
        return Err(Error::Input {
            path: path.to_path_buf(),
            message: "no size line: after the header and comments, a Matrix Market file needs \
                      a line 'rows columns entries'"
                .into(),
        });
    }
    let size_line = reader::line_number(bytes, at);
    let size_end = reader::line_end(bytes, at);
    let (rows, cols, declared) =
        parse_size(&bytes[at..size_end]).map_err(|m| at_line(size_line, m))?;
    if header.symmetry != Symmetry::General && rows != cols {
        return Err(at_line(
            size_line,
            format!("a symmetric matrix must be square, but the size line says {rows} x {cols}"),
        ));
    }
    Ok(Preamble {
        header,
        shape: Shape {
            rows,
            cols,
            size_line,
        },
        declared,
        entries_at: (size_end + 1).min(bytes.len()),
    })
}

/// Parses the entry lines of `bytes[range]` (whole lines; errors name lines of all of `bytes`).
fn parse_entries(
    bytes: &[u8],
    range: std::ops::Range<usize>,
    chunk: usize,
    p: &Preamble,
    path: &Path,
) -> Result<reader::Parsed<(u32, u32)>> {
    let (shape, field) = (p.shape, p.header.field);
    let mine = &bytes[..range.end];
    match field {
        Field::Pattern => reader::parse_chunks(mine, range.start, chunk, false, |b, base, o, w| {
            parse_chunk::<false, false>(b, base, o, w, shape)
        }),
        Field::Real => reader::parse_chunks(mine, range.start, chunk, true, |b, base, o, w| {
            parse_chunk::<true, false>(b, base, o, w, shape)
        }),
        Field::Integer => reader::parse_chunks(mine, range.start, chunk, true, |b, base, o, w| {
            parse_chunk::<true, true>(b, base, o, w, shape)
        }),
    }
    .map_err(|s| reader::stop_error(path, bytes, s, |l| diagnose(l, field, shape)))
}

/// Where the entry lines of a file whose preamble reads start: after the size line.
pub(crate) fn entries_start(bytes: &[u8]) -> usize {
    let first_end = reader::line_end(bytes, 0);
    let at = reader::skip_leading_comments(bytes, (first_end + 1).min(bytes.len()));
    (reader::line_end(bytes, at) + 1).min(bytes.len())
}

/// Reads a Matrix Market file's bytes.
pub(crate) fn parse(bytes: &[u8], path: &Path, chunk: usize) -> Result<Loaded> {
    let p = preamble(bytes, path)?;
    let (header, declared, size_line) = (p.header, p.declared, p.shape.size_line);
    let (rows, cols) = (p.shape.rows, p.shape.cols);
    let weighted = header.field != Field::Pattern;
    let parsed = parse_entries(bytes, p.entries_at..bytes.len(), chunk, &p, path)?;

    count_error(path, declared, size_line, parsed.stats.count as u64)?;

    let mut edges = parsed.items;
    let mut weights = parsed.weights;
    if header.symmetry != Symmetry::General {
        refuse_both_triangles(&edges, bytes, path)?;
        let sign = if header.symmetry == Symmetry::Skew {
            -1.0
        } else {
            1.0
        };
        let extra = parsed.stats.off_diagonal;
        let total = edges.len() + extra;
        let no_memory = |_| Error::Input {
            path: path.to_path_buf(),
            message: format!("not enough memory to hold {total} entries"),
        };
        edges.try_reserve_exact(extra).map_err(no_memory)?;
        if weighted {
            weights.try_reserve_exact(extra).map_err(no_memory)?;
        }
        let mirrored: Vec<(u32, u32)> = edges
            .par_iter()
            .filter(|&&(i, j)| i != j)
            .map(|&(i, j)| (j, i))
            .collect();
        edges.extend_from_slice(&mirrored);
        drop(mirrored);
        if weighted {
            let n = weights.len();
            let mirrored: Vec<f64> = edges[..n]
                .par_iter()
                .zip(&weights[..n])
                .filter(|(&(i, j), _)| i != j)
                .map(|(_, &w)| sign * w)
                .collect();
            weights.extend_from_slice(&mirrored);
        }
    }
    Ok(Loaded {
        edges: EdgeList {
            nrows: rows as usize,
            ncols: cols as usize,
            edges,
            weights: weighted.then_some(weights),
        },
        labels: Labels::OneBased,
        format: Format::Mtx,
        symmetric_storage: header.symmetry != Symmetry::General,
    })
}

/// What one part of a Matrix Market file tells the whole file's checks (the entry count against
/// the size line's, and one triangle only in a symmetric file), as words a communicator carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartFacts {
    /// Entries the part's lines hold (before mirroring).
    pub entries: u64,
    /// The size line's entry count, and the size line's number.
    pub declared: u64,
    /// The size line's number.
    pub size_line: u64,
    /// Symmetric files only: the part's first off-diagonal entry, first entry below and first
    /// above the diagonal, as `[line, i, j]` (line 0: none).
    pub sides: [[u64; 3]; 3],
}

impl PartFacts {
    /// The number of words [`PartFacts::to_words`] makes.
    pub const WORDS: usize = 12;

    /// The facts as words.
    pub fn to_words(&self) -> Vec<u64> {
        let mut w = vec![self.entries, self.declared, self.size_line];
        w.extend(self.sides.iter().flatten());
        w
    }

    /// The facts [`PartFacts::to_words`] made these words of (`WORDS` of them).
    pub fn from_words(w: &[u64]) -> PartFacts {
        let at = |k: usize| w.get(k).copied().unwrap_or(0);
        let side = |s: usize| [at(3 + 3 * s), at(4 + 3 * s), at(5 + 3 * s)];
        PartFacts {
            entries: at(0),
            declared: at(1),
            size_line: at(2),
            sides: [side(0), side(1), side(2)],
        }
    }
}

/// Reads part `part` of `parts` of a Matrix Market file: the header and size line (every part
/// reads them), then the part's share of the entry lines, checked and mirrored as [`parse`]
/// does; the checks that need every part are left to [`check_parts`], with the part's facts.
pub(crate) fn parse_part(
    bytes: &[u8],
    path: &Path,
    part: usize,
    parts: usize,
) -> Result<(Loaded, PartFacts)> {
    let p = preamble(bytes, path)?;
    let range = reader::part_range(bytes, p.entries_at, part, parts);
    let parsed = parse_entries(
        bytes,
        range.clone(),
        reader::default_chunk(range.len()),
        &p,
        path,
    )?;
    let line = |k: usize| {
        super::checks::line_of_entry(&bytes[range.start..], Format::El, k)
            .map(|l| l + reader::line_number(bytes, range.start) - 1)
    };
    let weighted = p.header.field != Field::Pattern;
    let (mut edges, mut weights) = (parsed.items, parsed.weights);
    let mut facts = PartFacts {
        entries: edges.len() as u64,
        declared: p.declared,
        size_line: p.shape.size_line,
        sides: [[0; 3]; 3],
    };
    if p.header.symmetry != Symmetry::General {
        let found = |f: &dyn Fn(&(u32, u32)) -> bool| {
            edges.iter().position(f).map_or([0; 3], |k| {
                let (i, j) = edges[k];
                [line(k).unwrap_or(0), u64::from(i), u64::from(j)]
            })
        };
        facts.sides = [
            found(&|e| e.0 != e.1),
            found(&|e| e.0 > e.1),
            found(&|e| e.0 < e.1),
        ];
        let sign = if p.header.symmetry == Symmetry::Skew {
            -1.0
        } else {
            1.0
        };
        let n = edges.len();
        for k in 0..n {
            let (i, j) = edges[k];
            if i != j {
                edges.push((j, i));
                if weighted {
                    weights.push(sign * weights[k]);
                }
            }
        }
    }
    let loaded = Loaded {
        edges: EdgeList {
            nrows: p.shape.rows as usize,
            ncols: p.shape.cols as usize,
            edges,
            weights: weighted.then_some(weights),
        },
        labels: Labels::OneBased,
        format: Format::Mtx,
        symmetric_storage: p.header.symmetry != Symmetry::General,
    };
    Ok((loaded, facts))
}

/// The checks of a whole file read in parts, from every part's facts (in part order): the entry
/// count the size line declares, and entries on one side of the diagonal only in a symmetric
/// file. The same answer on every part.
pub(crate) fn check_parts(path: &Path, facts: &[PartFacts]) -> Result<()> {
    let Some(first) = facts.first() else {
        return Ok(());
    };
    let found: u64 = facts.iter().map(|f| f.entries).sum();
    count_error(path, first.declared, first.size_line, found)?;
    let Some(off) = facts.iter().map(|f| f.sides[0]).find(|s| s[0] != 0) else {
        return Ok(());
    };
    // Below (i > j) is side 1, above side 2: the other side of the first off-diagonal entry.
    let other = if off[1] > off[2] { 2 } else { 1 };
    let Some(k) = facts.iter().map(|f| f.sides[other]).find(|s| s[0] != 0) else {
        return Ok(());
    };
    let entry = |s: [u64; 3]| (s[1] as u32, s[2] as u32);
    let message = both_triangles_message(entry(k), entry(off), off[0]);
    Err(Error::in_file(path, Some(k[0]), message))
}

/// An error when the entries found are not the count the size line declares.
fn count_error(path: &Path, declared: u64, size_line: u64, found: u64) -> Result<()> {
    if found == declared {
        return Ok(());
    }
    let (what, verb) = if found < declared {
        ("too few", "holds only")
    } else {
        ("too many", "holds")
    };
    Err(Error::Input {
        path: path.to_path_buf(),
        message: format!(
            "{what} entries: the size line (line {size_line}) declares {declared}, \
             but the file {verb} {found}"
        ),
    })
}

/// Refuses a symmetric file with off-diagonal entries on both sides of the diagonal: it stores
/// one triangle and each entry stands for its mirror too, so a file listing both would count
/// each value twice (SciPy's `mmread` sums them so).
fn refuse_both_triangles(edges: &[(u32, u32)], bytes: &[u8], path: &Path) -> Result<()> {
    let side = |&(i, j): &(u32, u32)| i.cmp(&j);
    let Some(first) = edges.iter().position(|e| e.0 != e.1) else {
        return Ok(());
    };
    let s = side(&edges[first]);
    let Some(k) = edges
        .par_iter()
        .position_first(|e| e.0 != e.1 && side(e) != s)
    else {
        return Ok(());
    };
    let line = super::checks::line_of_entry(bytes, Format::Mtx, first).unwrap_or(0);
    let message = both_triangles_message(edges[k], edges[first], line);
    Err(entry_error(bytes, path, k, message))
}

/// What is wrong with entry `e` of a symmetric file, on the other side of the diagonal than the
/// first off-diagonal entry `first`, on line `first_line`.
fn both_triangles_message(e: (u32, u32), first: (u32, u32), first_line: u64) -> String {
    let name = |(i, j): (u32, u32)| if i > j { "below" } else { "above" };
    let shown = |(i, j): (u32, u32)| format!("({}, {})", i as u64 + 1, j as u64 + 1);
    format!(
        "entry {} is {} the diagonal, but line {first_line}'s entry {} is {} it: a symmetric \
         file stores one triangle (each entry stands for its mirror too), so listing both would \
         count each value twice; keep one triangle, or declare the matrix 'general'",
        shown(e),
        name(e),
        shown(first),
        name(first),
    )
}

/// An error about the `k`-th entry, naming its line.
fn entry_error(bytes: &[u8], path: &Path, k: usize, message: String) -> Error {
    Error::in_file(
        path,
        super::checks::line_of_entry(bytes, Format::Mtx, k),
        message,
    )
}

/// Reads the header line.
fn parse_header(line: &[u8]) -> std::result::Result<Header, String> {
    let t = reader::tokens(line);
    if !t
        .first()
        .is_some_and(|b| b.eq_ignore_ascii_case(b"%%MatrixMarket"))
    {
        return Err(format!(
            "missing Matrix Market header: the first line must be {HEADER_FORM}"
        ));
    }
    if t.len() != 5 {
        return Err(format!(
            "malformed Matrix Market header {}: expected {HEADER_FORM}",
            quote(line.trim_ascii())
        ));
    }
    let word = |w: &[u8]| w.to_ascii_lowercase();
    let (object, format, field, symmetry) = (word(t[1]), word(t[2]), word(t[3]), word(t[4]));
    if object != b"matrix" {
        return Err(format!(
            "malformed Matrix Market header: gmcl reads only matrices, not {}",
            quote(t[1])
        ));
    }
    match &format[..] {
        b"coordinate" => {}
        b"array" => {
            return Err("gmcl reads only coordinate format (sparse entries), \
                        not array format (a dense matrix)"
                .into())
        }
        _ => {
            return Err(format!(
                "malformed Matrix Market header: unknown format {}; gmcl reads only coordinate \
                 format",
                quote(t[2])
            ))
        }
    }
    let field = match &field[..] {
        b"real" | b"double" => Field::Real,
        b"integer" => Field::Integer,
        b"pattern" => Field::Pattern,
        b"complex" => {
            return Err("complex values are not supported (field 'complex'); \
                        gmcl reads real, integer or pattern matrices"
                .into())
        }
        _ => {
            return Err(format!(
                "malformed Matrix Market header: unknown field {}; expected real, integer or \
                 pattern",
                quote(t[3])
            ))
        }
    };
    let symmetry = match &symmetry[..] {
        b"general" => Symmetry::General,
        b"symmetric" => Symmetry::Symmetric,
        b"skew-symmetric" => Symmetry::Skew,
        b"hermitian" => {
            return Err("hermitian matrices hold complex values: \
                        complex values are not supported"
                .into())
        }
        _ => {
            return Err(format!(
                "malformed Matrix Market header: unknown symmetry {}; expected general, \
                 symmetric or skew-symmetric",
                quote(t[4])
            ))
        }
    };
    if field == Field::Pattern && symmetry == Symmetry::Skew {
        return Err(
            "a pattern matrix cannot be skew-symmetric (it has no values to negate)".into(),
        );
    }
    Ok(Header { field, symmetry })
}

/// Reads the size line `rows columns entries`.
fn parse_size(line: &[u8]) -> std::result::Result<(u64, u64, u64), String> {
    let t = reader::tokens(line);
    if t.len() != 3 {
        return Err(format!(
            "the size line must hold 3 integers (rows columns entries), found {} columns",
            t.len()
        ));
    }
    let rows = reader::uint_token(t[0], "row count")?;
    let cols = reader::uint_token(t[1], "column count")?;
    let nnz = reader::uint_token(t[2], "entry count")?;
    // Counts stop growing where the scan saturates: name such a count by its own digits.
    if nnz >= reader::SATURATE {
        return Err(format!(
            "{} entries is more than gmcl reads (below 2^40)",
            reader::shown(t[2])
        ));
    }
    let limit = u32::MAX as u64;
    for (v, tok, what) in [(rows, t[0], "rows"), (cols, t[1], "columns")] {
        if v > limit {
            return Err(format!(
                "{} {what} is above the largest supported {limit}",
                reader::shown(tok)
            ));
        }
    }
    Ok((rows, cols, nnz))
}

/// The largest integer value gmcl reads: every integer up to 2^53 is an `f64`, exactly.
const MAX_INTEGER: u64 = 1 << 53;

/// A value of the field `integer`: an optional sign and decimal digits (and a point followed by
/// zeros only), at most 2^53 in size; `None` otherwise. SciPy reads the field into an `int64`
/// up to the first character that is not a digit, so `1.5` and `1e3` are 1 there: refused
/// here rather than read as something else than the file says.
fn integer_value(tok: &[u8]) -> Option<f64> {
    let (negative, digits) = integer_digits(tok)?;
    let mut m = 0u64;
    for &d in digits {
        m = m.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if m > MAX_INTEGER {
        return None;
    }
    // `-0` is 0, as the integer SciPy reads.
    Some(if negative {
        -(m as f64) + 0.0
    } else {
        m as f64
    })
}

/// The sign (`true`: negative) and digits of `tok` when it is written as an integer: an
/// optional sign, decimal digits, and at most a point followed by zeros.
fn integer_digits(tok: &[u8]) -> Option<(bool, &[u8])> {
    let (negative, rest) = match tok.first() {
        Some(b'-') => (true, &tok[1..]),
        Some(b'+') => (false, &tok[1..]),
        _ => (false, tok),
    };
    let digits = rest.iter().take_while(|d| d.is_ascii_digit()).count();
    let zeros = match &rest[digits..] {
        [] => true,
        [b'.', z @ ..] => z.iter().all(|&c| c == b'0'),
        _ => false,
    };
    (digits > 0 && zeros).then(|| (negative, &rest[..digits]))
}

/// Why `tok` is not a value of the field `integer` ([`integer_value`]).
fn integer_error(tok: &[u8]) -> String {
    if integer_digits(tok).is_some() {
        format!(
            "value {} is larger than 2^53 in size, where gmcl's f64 values stop holding every \
             integer exactly",
            quote(tok)
        )
    } else {
        format!(
            "value {} is not an integer, but the header declares the field 'integer'; declare \
             it 'real' for fractions and exponents (SciPy would read the digits before the \
             first other character)",
            quote(tok)
        )
    }
}

/// The fast path for entry lines; `VALUED` when each line has a value column, `INTEGER` when
/// that value is of the field `integer`.
fn parse_chunk<const VALUED: bool, const INTEGER: bool>(
    b: &[u8],
    base: usize,
    out: &mut [MaybeUninit<(u32, u32)>],
    wout: &mut [MaybeUninit<f64>],
    shape: Shape,
) -> ChunkResult {
    let n = b.len();
    let mut i = 0;
    let mut k = 0;
    let mut off_diagonal = 0;
    while let Some((start, first)) = reader::next_content_line(b, i) {
        let bad = Stop::Bad(base + start);
        i = first;
        // The common `row col` shape eight bytes at a time, else digit by digit.
        let (r, col, j) = match reader::scan_pair(b, i) {
            Some(p) => p,
            None => {
                let (r, j) = scan_uint(b, i);
                if j == i || j == n || !is_space(b[j]) {
                    return Err(bad);
                }
                i = skip_spaces(b, j + 1);
                let (col, j) = scan_uint(b, i);
                if j == i {
                    return Err(bad);
                }
                (r, col, j)
            }
        };
        if r == 0 || r > shape.rows || col == 0 || col > shape.cols {
            return Err(bad);
        }
        i = skip_spaces(b, j);
        let mut w = 1.0;
        if VALUED {
            if i == j || i == n || b[i] == b'\n' {
                return Err(bad);
            }
            let e = token_end(b, i);
            let value = if INTEGER {
                integer_value(&b[i..e])
            } else {
                parse_float(&b[i..e])
            };
            w = match value {
                Some(x) => x,
                None => return Err(bad),
            };
            i = skip_spaces(b, e);
        }
        if i < n && b[i] != b'\n' {
            return Err(bad);
        }
        i += 1;
        let (r, col) = ((r - 1) as u32, (col - 1) as u32);
        if !put(out, k, (r, col)) || (VALUED && !put(wout, k, w)) {
            return Err(bad);
        }
        k += 1;
        off_diagonal += usize::from(r != col);
    }
    Ok(Stats {
        count: k,
        max_id: 0,
        weighted: VALUED,
        off_diagonal,
    })
}

/// The slow path for an entry line: the entry (0-based) and value, or what is wrong.
fn parse_line(
    line: &[u8],
    field: Field,
    shape: Shape,
) -> std::result::Result<Option<(u32, u32, f64)>, String> {
    let pattern = field == Field::Pattern;
    if reader::is_blank_or_comment(line) {
        return Ok(None);
    }
    let t = reader::tokens(line);
    let want = if pattern { 2 } else { 3 };
    if t.len() != want {
        return Err(if pattern {
            format!(
                "expected 2 columns (row column) in a pattern matrix, found {}",
                t.len()
            )
        } else {
            format!("expected 3 columns (row column value), found {}", t.len())
        });
    }
    let index = |tok: &[u8], what: &str, plural: &str, max: u64| {
        let v = reader::uint_token(tok, &format!("{what} index"))?;
        if v == 0 {
            Err(format!(
                "{what} index 0 is out of range: Matrix Market indices start at 1"
            ))
        } else if v > max {
            Err(format!(
                "{what} index {} is above the {max} {plural} declared on line {}",
                reader::shown(tok),
                shape.size_line
            ))
        } else {
            Ok((v - 1) as u32)
        }
    };
    let r = index(t[0], "row", "rows", shape.rows)?;
    let c = index(t[1], "column", "columns", shape.cols)?;
    let w = match field {
        Field::Pattern => 1.0,
        Field::Real => reader::weight_token(t[2]).map_err(|m| m.replacen("weight", "value", 1))?,
        Field::Integer => integer_value(t[2]).ok_or_else(|| integer_error(t[2]))?,
    };
    Ok(Some((r, c, w)))
}

fn diagnose(line: &[u8], field: Field, shape: Shape) -> Option<String> {
    parse_line(line, field, shape).err()
}

#[cfg(test)]
mod tests {
    use super::super::{parse_bytes, parse_with};
    use super::*;
    use proptest::prelude::*;

    fn mtx(text: &str) -> Result<Loaded> {
        parse_bytes(text.as_bytes(), Format::Mtx, Path::new("m.mtx"))
    }

    fn err(text: &str) -> String {
        mtx(text).unwrap_err().to_string()
    }

    #[test]
    fn general_real() {
        let l = mtx(
            "%%MatrixMarket matrix coordinate real general\n% a comment\n%\n\
                     2 3 3\n1 1 1.5\n2 3 -2\n1 2 1e3\n",
        )
        .unwrap();
        assert_eq!(l.edges.edges, vec![(0, 0), (1, 2), (0, 1)]);
        assert_eq!(l.edges.weights, Some(vec![1.5, -2.0, 1000.0]));
        assert_eq!((l.edges.nrows, l.edges.ncols), (2, 3));
        assert!(!l.symmetric_storage);
        assert_eq!(l.labels, Labels::OneBased);
        assert_eq!(l.format, Format::Mtx);
    }

    #[test]
    fn symmetric_pattern_with_crlf_and_case() {
        let l = mtx(
            "%%matrixmarket MATRIX Coordinate Pattern Symmetric\r\n\r\n3 3 3\r\n\
                     2 1\r\n3 3\r\n3\t1\r\n",
        )
        .unwrap();
        assert_eq!(l.edges.edges, vec![(1, 0), (2, 2), (2, 0), (0, 1), (0, 2)]);
        assert_eq!(l.edges.weights, None);
        assert!(l.symmetric_storage);
    }

    #[test]
    fn integer_and_skew_symmetric() {
        let l =
            mtx("%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 4\n").unwrap();
        assert_eq!(l.edges.edges, vec![(1, 0), (0, 1)]);
        assert_eq!(l.edges.weights, Some(vec![4.0, -4.0]));
        assert!(l.symmetric_storage);
        let l = mtx("%%MatrixMarket matrix coordinate integer symmetric\n2 2 2\n2 1 4\n1 1 7\n")
            .unwrap();
        assert_eq!(l.edges.edges, vec![(1, 0), (0, 0), (0, 1)]);
        assert_eq!(l.edges.weights, Some(vec![4.0, 7.0, 4.0]));
    }

    #[test]
    fn empty_matrix_and_trailing_blank_lines() {
        let l = mtx("%%MatrixMarket matrix coordinate real general\n4 5 0\n\n\n").unwrap();
        assert!(l.edges.is_empty());
        assert_eq!((l.edges.nrows, l.edges.ncols), (4, 5));
        let l = mtx("%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1").unwrap();
        assert_eq!(l.edges.edges, vec![(0, 0)]);
    }

    #[test]
    fn header_errors() {
        assert!(err("").starts_with("m.mtx:1: missing Matrix Market header"));
        assert!(err("1 1 1\n1 1 1\n").starts_with("m.mtx:1: missing Matrix Market header"));
        assert!(err("%%MatrixMarket matrix coordinate real\n1 1 0\n")
            .starts_with("m.mtx:1: malformed Matrix Market header"));
        assert!(err("%%MatrixMarket matrix array real general\n2 2\n")
            .contains("m.mtx:1: gmcl reads only coordinate format"));
        assert!(err("%%MatrixMarket matrix coordinate complex general\n")
            .contains("m.mtx:1: complex values are not supported"));
        assert!(err("%%MatrixMarket matrix coordinate real hermitian\n")
            .contains("complex values are not supported"));
        assert!(err("%%MatrixMarket vector coordinate real general\n").contains("only matrices"));
        assert!(
            err("%%MatrixMarket matrix coordinate real general\n% only comments\n")
                .contains("no size line")
        );
        assert!(
            err("%%MatrixMarket matrix coordinate real general\n%\n2 2\n")
                .starts_with("m.mtx:3: the size line must hold 3 integers")
        );
        assert!(
            err("%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n")
                .contains("must be square")
        );
        assert!(
            err("%%MatrixMarket matrix coordinate real general\n5000000000 1 0\n")
                .contains("above the largest supported")
        );
    }

    #[test]
    fn entry_errors() {
        let h = "%%MatrixMarket matrix coordinate real general\n2 2 2\n";
        let e = err("%%MatrixMarket matrix coordinate real general\n2 2 99999999999999\n1 1 1\n");
        assert!(
            e.contains("m.mtx:2: 99999999999999 entries is more than gmcl reads"),
            "{e}"
        );
        let e = err(&format!("{h}1 1 1\n"));
        assert!(
            e.contains(
                "too few entries: the size line (line 2) declares 2, but the file holds only 1"
            ),
            "{e}"
        );
        let e = err(&format!("{h}1 1 1\n2 2 2\n1 2 3\n"));
        assert!(
            e.contains("too many entries") && e.contains("declares 2") && e.contains("holds 3"),
            "{e}"
        );
        assert!(
            err(&format!("{h}1 1 1\n0 2 1\n")).starts_with("m.mtx:4: row index 0 is out of range")
        );
        let e = err(&format!("{h}1 3 1\n"));
        assert!(
            e.starts_with("m.mtx:3: column index 3 is above the 2 columns declared on line 2"),
            "{e}"
        );
        assert!(err(&format!("{h}1 1\n")).starts_with("m.mtx:3: expected 3 columns"));
        assert!(err(&format!("{h}1 1 nan\n")).contains("value is not a finite number"));
        assert!(err(&format!("{h}1 -1 2\n")).contains("negative column index"));
        let p = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n";
        assert!(err(&format!("{p}1 1 1\n")).starts_with("m.mtx:3: expected 2 columns"));
    }

    #[test]
    fn symmetric_files_keep_to_one_triangle() {
        let h = "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n";
        // Either triangle alone is read (the upper one mirrored like the lower).
        let l = mtx(&format!("{h}1 2 5\n3 3 1\n1 3 2\n")).unwrap();
        assert_eq!(l.edges.edges, vec![(0, 1), (2, 2), (0, 2), (1, 0), (2, 0)]);
        let e = err(&format!("{h}2 1 5\n1 2 5\n3 3 1\n"));
        assert!(
            e.starts_with("m.mtx:4: entry (1, 2) is above the diagonal, but line 3's entry (2, 1) is below it"),
            "{e}"
        );
        let p = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n";
        assert!(err(&format!("{p}3 3\n% c\n1 3\n\n3 2\n")).starts_with("m.mtx:7: entry (3, 2)"));
    }

    #[test]
    fn integer_values_have_no_fraction() {
        let h = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n";
        let l = mtx(&format!("{h}1 1 3\n2 1 -2.0\n")).unwrap();
        assert_eq!(l.edges.weights, Some(vec![3.0, -2.0]));
        let e = err(&format!("{h}1 1 3\n% c\n1 2 1.5\n"));
        assert!(
            e.starts_with(
                "m.mtx:5: value '1.5' is not an integer, but the header declares the field 'integer'"
            ),
            "{e}"
        );
        // SciPy reads these as 1 and 2: refused rather than read as 1000 and 25.
        for v in ["1e3", "2.5e1", "1.0e0", "0x10", "1.", "-", "+", ".5"] {
            let text = format!("{h}1 1 3\n2 1 {v}\n");
            if v == "1." {
                assert_eq!(mtx(&text).unwrap().edges.weights, Some(vec![3.0, 1.0]));
                continue;
            }
            let e = err(&text);
            assert!(
                e.starts_with("m.mtx:4: value") && e.contains("is not an integer"),
                "{v}: {e}"
            );
        }
        // Every integer up to 2^53 in size is exact; larger ones are refused, not rounded.
        let l = mtx(&format!("{h}1 1 9007199254740992\n2 1 -9007199254740992\n")).unwrap();
        assert_eq!(
            l.edges.weights,
            Some(vec![9007199254740992.0, -9007199254740992.0])
        );
        for v in [
            "9007199254740993",
            "-9223372036854775808",
            "99999999999999999999",
        ] {
            let e = err(&format!("{h}1 1 3\n2 1 {v}\n"));
            assert!(
                e.starts_with("m.mtx:4: value") && e.contains("larger than 2^53"),
                "{v}: {e}"
            );
        }
        let l = mtx(&format!("{h}1 1 -0\n2 1 +7\n")).unwrap();
        assert_eq!(l.edges.weights.unwrap()[0].to_bits(), 0.0f64.to_bits());
        let r = "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.5\n";
        assert!(mtx(r).is_ok());
    }

    proptest! {
        /// The fast chunk parser and the slow line parser agree on every line.
        #[test]
        fn fast_and_slow_paths_agree(
            line in proptest::collection::vec(
                proptest::sample::select(b"0123 \t\r-#%.e+nif\x00".to_vec()),
                0..16,
            ),
            field in proptest::sample::select(vec![Field::Pattern, Field::Real, Field::Integer]),
        ) {
            let shape = Shape { rows: 12, cols: 3, size_line: 2 };
            let pattern = field == Field::Pattern;
            let slow = parse_line(&line, field, shape);
            let mut out = vec![MaybeUninit::uninit(); 2];
            let mut wout = vec![MaybeUninit::uninit(); 2];
            let fast = match field {
                Field::Pattern => parse_chunk::<false, false>(&line, 0, &mut out, &mut wout, shape),
                Field::Real => parse_chunk::<true, false>(&line, 0, &mut out, &mut wout, shape),
                Field::Integer => parse_chunk::<true, true>(&line, 0, &mut out, &mut wout, shape),
            };
            match (&slow, fast) {
                (Ok(None), Ok(s)) => prop_assert_eq!(s.count, 0),
                (Ok(Some((r, c, w))), Ok(s)) => {
                    prop_assert_eq!(s.count, 1);
                    // SAFETY: the parser wrote one item (and one value when valued).
                    prop_assert_eq!(unsafe { out[0].assume_init() }, (*r, *c));
                    if !pattern {
                        prop_assert_eq!(unsafe { wout[0].assume_init() }, *w);
                    }
                }
                (Err(_), Err(Stop::Bad(0))) => {}
                (s, f) => prop_assert!(false, "slow {:?} fast {:?} on {:?}", s, f, line),
            }
        }

        #[test]
        fn chunking_does_not_matter(
            entries in proptest::collection::vec((1u32..20, 1u32..20, -5i32..5), 0..60),
            chunk in 1usize..100,
            sym in any::<bool>(),
        ) {
            let mut text = format!(
                "%%MatrixMarket matrix coordinate integer {}\n% c\n20 20 {}\n",
                if sym { "symmetric" } else { "general" },
                entries.len()
            );
            for &(i, j, v) in &entries {
                // A symmetric file keeps to one triangle.
                let (i, j) = if sym { (i.max(j), i.min(j)) } else { (i, j) };
                text.push_str(&format!("{i} {j} {v}\n"));
            }
            let a = parse_with(text.as_bytes(), Format::Mtx, Path::new("m.mtx"), chunk).unwrap();
            let b = parse_bytes(text.as_bytes(), Format::Mtx, Path::new("m.mtx")).unwrap();
            prop_assert_eq!(&a.edges, &b.edges);
            let off = entries.iter().filter(|e| e.0 != e.1).count();
            prop_assert_eq!(a.edges.len(), entries.len() + if sym { off } else { 0 });
        }
    }
}
