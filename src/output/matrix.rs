//! Writing a matrix (a product) in the format its output path's extension names.

use super::{standard_stream, AtomicOutput};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::ops::Range;
use std::path::Path;

/// The formats a matrix with values can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixFormat {
    /// Matrix Market `coordinate real general`, 1-based (`.mtx`).
    Mtx,
    /// `u v w` lines, 0-based, as GAP's weighted edge lists (`.wel`).
    Wel,
    /// SciPy's sparse archive, as `save_npz(..., compressed=False)` writes CSR (`.npz`).
    Npz,
}

impl MatrixFormat {
    /// The format `path` asks for: `.mtx`, `.wel` or `.npz` by extension (case-insensitive); Matrix
    /// Market for a path without an extension that is not a regular file (`-`, `/dev/stdout`,
    /// `/dev/null`, a pipe). `.el` is refused (it holds no values), as is any other name, so
    /// that no file gets a format its name does not say.
    pub fn of(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let refuse = |why: &str| {
            Err(Error::Invalid(format!(
                "{}: {why}; name the output .mtx (Matrix Market), .wel (\"u v w\" lines) or \
                 .npz (SciPy)",
                path.display()
            )))
        };
        match ext.as_deref() {
            Some("mtx") => Ok(MatrixFormat::Mtx),
            Some("wel") => Ok(MatrixFormat::Wel),
            Some("npz") => Ok(MatrixFormat::Npz),
            Some("el") => refuse("an .el file holds no values, and the matrix has them"),
            None if standard_stream(path).is_some() || is_special(path) => Ok(MatrixFormat::Mtx),
            _ => refuse("the extension names no format gmcl writes matrices in"),
        }
    }
}

/// Whether `path` exists and is neither a regular file nor a directory (a device, a pipe).
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Writes `m` to `path` in the format [`MatrixFormat::of`] names; the file appears whole or not
/// at all.
pub fn write_matrix<T: Scalar>(path: &Path, m: &Csr<T>) -> Result<()> {
    stage_matrix(path, m)?.commit()
}

/// [`write_matrix`] but for the rename: the output comes back whole and synced, and appears
/// under `path` when the caller commits it.
pub fn stage_matrix<T: Scalar>(path: &Path, m: &Csr<T>) -> Result<AtomicOutput> {
    refuse_non_finite(path, m, 0)?;
    match MatrixFormat::of(path)? {
        MatrixFormat::Mtx => super::stage_mtx(path, m),
        MatrixFormat::Npz => super::stage_npz(path, m),
        MatrixFormat::Wel => {
            let mut out = AtomicOutput::create(path)?;
            write_entries(&mut out, m, 0)?;
            out.synced()
        }
    }
}

/// Fails when a value of `m` (rows from `first_row` of the matrix written to `path`) is infinite
/// or NaN: no reader takes such a value back (gmcl's refuse them), so a product that overflowed
/// its precision is an error naming the entry, before anything is written.
pub fn refuse_non_finite<T: Scalar>(path: &Path, m: &Csr<T>, first_row: usize) -> Result<()> {
    // Chunks whose loop folds without a branch (a pass at memory speed), then the entry.
    const CHUNK: usize = 1 << 16;
    let bad = |v: &T| !v.to_f64().is_finite();
    let Some(chunk) = m
        .values()
        .par_chunks(CHUNK)
        .position_first(|c| c.iter().fold(false, |any, v| any | bad(v)))
    else {
        return Ok(());
    };
    let k = chunk * CHUNK
        + m.values()[chunk * CHUNK..]
            .iter()
            .position(bad)
            .unwrap_or(0);
    let row = m.row_ptr().partition_point(|&p| p <= k as u64) - 1;
    let wider = match T::NAME {
        "f32" => " (f64 holds values up to 1.8e308)",
        _ => "",
    };
    Err(Error::Invalid(format!(
        "{}: the entry at row {}, column {} (counted from 0) is {}: the product overflows {}{}; \
         nothing was written",
        path.display(),
        first_row + row,
        m.col_idx()[k],
        m.values()[k].to_f64(),
        T::NAME,
        wider
    )))
}

/// A matrix written as its rows come, in order, for a writer that never holds the whole matrix
/// (a product made across ranks): the shape and entry count are known first, then
/// [`RowWriter::rows`] takes consecutive pieces of rows. `.mtx` and `.wel` only: SciPy's `.npz`
/// stores all columns before all values, so a piece cannot be written as it comes.
pub struct RowWriter {
    out: AtomicOutput,
    base: u64,
    next_row: usize,
}

impl RowWriter {
    /// Starts writing a `nrows x ncols` matrix of `nnz` entries into `out`, in `format` (what
    /// [`MatrixFormat::of`] names for the output's path); `.npz` is refused.
    pub fn start(
        mut out: AtomicOutput,
        format: MatrixFormat,
        nrows: usize,
        ncols: usize,
        nnz: u64,
    ) -> Result<Self> {
        let base = match format {
            MatrixFormat::Mtx => {
                out.write_all(super::mtx_header(nrows, ncols, nnz).as_bytes())?;
                1
            }
            MatrixFormat::Wel => 0,
            MatrixFormat::Npz => {
                return Err(Error::Invalid(format!(
                    "{}: an .npz archive is not written piece by piece (SciPy's layout puts \
                     every column index before any value, so the rows would have to come \
                     three times); write .mtx or .wel",
                    out.path().display()
                )))
            }
        };
        Ok(RowWriter {
            out,
            base,
            next_row: 0,
        })
    }

    /// Writes the rows of `m` as rows `first_row..` of the matrix; pieces come in order. Values
    /// must be finite: the ranks holding the rows check them first ([`refuse_non_finite`]), so
    /// the writer does not scan them again.
    pub fn rows<T: Scalar>(&mut self, first_row: usize, m: &Csr<T>) -> Result<()> {
        if first_row != self.next_row {
            return Err(Error::Invalid(format!(
                "{}: rows from {first_row} came where row {} was due",
                self.out.path().display(),
                self.next_row
            )));
        }
        write_rows(&mut self.out, m, first_row as u64, self.base)?;
        self.next_row += m.nrows();
        Ok(())
    }

    /// The file, whole and synced, for the caller to commit.
    pub fn finish(self) -> Result<AtomicOutput> {
        self.out.synced()
    }
}

/// Writes `m`'s entries as `row col value` lines, row by row, indices plus `base`.
pub(super) fn write_entries<T: Scalar>(
    out: &mut AtomicOutput,
    m: &Csr<T>,
    base: u64,
) -> Result<()> {
    write_rows(out, m, 0, base)
}

/// [`write_entries`] of rows that are rows `first_row..` of a larger matrix.
fn write_rows<T: Scalar>(
    out: &mut AtomicOutput,
    m: &Csr<T>,
    first_row: u64,
    base: u64,
) -> Result<()> {
    write_rows_in_blocks(out, m, first_row, base, BLOCK_ENTRIES)
}

/// Entries in a block of rows that one task formats: text of a few megabytes, so a block is
/// worth a task and a group of them in flight stays small whatever the rows' lengths.
const BLOCK_ENTRIES: u64 = 1 << 18;

/// [`write_rows`] in blocks of consecutive rows of about `block_entries` entries each, a few per
/// thread formatted in parallel at a time and written in order (the next group is formatted while
/// one is written): the bytes do not depend on the blocks or the thread count.
fn write_rows_in_blocks<T: Scalar>(
    out: &mut AtomicOutput,
    m: &Csr<T>,
    first_row: u64,
    base: u64,
    block_entries: u64,
) -> Result<()> {
    let ptr = m.row_ptr();
    let blocks = row_blocks(ptr, block_entries);
    let per_group = 2 * rayon::current_num_threads().max(1);
    let groups: Vec<&[Range<usize>]> = blocks.chunks(per_group).collect();
    let block_text = |rows: &Range<usize>| {
        let entries = (ptr[rows.end] - ptr[rows.start]) as usize;
        let mut buf = Vec::with_capacity(entries * 24);
        let mut ib = itoa::Buffer::new();
        for i in rows.clone() {
            let (cols, vals) = m.row(i);
            if cols.is_empty() {
                continue;
            }
            let row_text = ib.format(i as u64 + first_row + base).to_owned();
            for (&c, &v) in cols.iter().zip(vals) {
                buf.extend_from_slice(row_text.as_bytes());
                buf.push(b' ');
                buf.extend_from_slice(ib.format(c as u64 + base).as_bytes());
                buf.push(b' ');
                v.write_to(&mut buf);
                buf.push(b'\n');
            }
        }
        buf
    };
    super::write_in_order(
        out,
        groups.len(),
        |g| groups[g].par_iter().map(block_text).collect(),
        |_| {},
    )
}

/// Consecutive ranges of rows covering all of them, each holding at least `entries` entries
/// (ending at the first row that reaches them) but the last; a row longer than that is a range of
/// its own.
fn row_blocks(ptr: &[u64], entries: u64) -> Vec<Range<usize>> {
    let nrows = ptr.len().saturating_sub(1);
    let entries = entries.max(1);
    let mut blocks = Vec::new();
    let mut start = 0;
    while start < nrows {
        let target = ptr[start].saturating_add(entries);
        // The first row end at or past the target.
        let end = (start + 1 + ptr[start + 1..].partition_point(|&p| p < target)).min(nrows);
        blocks.push(start..end);
        start = end;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_by_extension() {
        assert_eq!(
            MatrixFormat::of(Path::new("c.MTX")).unwrap(),
            MatrixFormat::Mtx
        );
        assert_eq!(
            MatrixFormat::of(Path::new("c.wel")).unwrap(),
            MatrixFormat::Wel
        );
        assert_eq!(MatrixFormat::of(Path::new("-")).unwrap(), MatrixFormat::Mtx);
        assert_eq!(
            MatrixFormat::of(Path::new("/dev/null")).unwrap(),
            MatrixFormat::Mtx
        );
        for bad in ["c.el", "c.txt", "c", "c.mtx.gz"] {
            let e = MatrixFormat::of(Path::new(bad)).unwrap_err().to_string();
            assert!(e.starts_with(bad) && e.contains(".wel"), "{e}");
        }
    }

    #[test]
    fn rows_written_piece_by_piece_are_the_whole_matrix_s_file() {
        let dir = tempfile::tempdir().unwrap();
        let m = Csr::from_dense(3, 2, &[1.5f64, 0.0, 0.0, 0.0, 2.0, -3.25]);
        let top = Csr::from_dense(1, 2, &[1.5f64, 0.0]);
        let rest = Csr::from_dense(2, 2, &[0.0f64, 0.0, 2.0, -3.25]);
        for name in ["c.mtx", "c.wel"] {
            let whole = dir.path().join(format!("whole-{name}"));
            write_matrix(&whole, &m).unwrap();
            let p = dir.path().join(name);
            let format = MatrixFormat::of(&p).unwrap();
            let mut w =
                RowWriter::start(AtomicOutput::create(&p).unwrap(), format, 3, 2, 3).unwrap();
            w.rows(0, &top).unwrap();
            // A piece out of order is refused, not written.
            let e = w.rows(0, &rest).unwrap_err().to_string();
            assert!(e.contains("rows from 0 came where row 1 was due"), "{e}");
            w.rows(1, &rest).unwrap();
            w.finish().unwrap().commit().unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&whole).unwrap());
        }
        let npz = dir.path().join("c.npz");
        let e = RowWriter::start(
            AtomicOutput::create(&npz).unwrap(),
            MatrixFormat::Npz,
            3,
            2,
            3,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("not written piece by piece"), "{e}");
    }

    /// The lines of `m`'s entries written one at a time on one thread, as the writer wrote them
    /// before it formatted blocks in parallel.
    fn sequential_text<T: Scalar>(m: &Csr<T>, first_row: u64, base: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..m.nrows() {
            let (cols, vals) = m.row(i);
            for (&c, &v) in cols.iter().zip(vals) {
                out.extend_from_slice(
                    format!("{} {} ", i as u64 + first_row + base, c as u64 + base).as_bytes(),
                );
                v.write_to(&mut out);
                out.push(b'\n');
            }
        }
        out
    }

    /// A random matrix whose rows are empty, short or long, with values that use every bit of
    /// their type.
    fn random<T: Scalar>(nrows: usize, seed: u64) -> Csr<T> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let mut edges = Vec::new();
        let mut weights = Vec::new();
        for i in 0..nrows as u32 {
            let len = match rng.next_u64() % 4 {
                0 => 0,
                1 => 1,
                2 => rng.next_u64() % 8,
                _ => rng.next_u64() % 300,
            };
            for _ in 0..len {
                let bits = rng.next_u64();
                let w = if std::mem::size_of::<T>() == 4 {
                    f32::from_bits(bits as u32) as f64
                } else {
                    f64::from_bits(bits)
                };
                edges.push((i, (rng.next_u64() % 5000) as u32));
                weights.push(if w.is_finite() { w } else { -0.0 });
            }
        }
        let el = crate::edges::EdgeList {
            nrows,
            ncols: 5000,
            edges,
            weights: Some(weights),
        };
        Csr::from_edges(&el, &Default::default()).unwrap()
    }

    #[test]
    fn blocks_written_in_parallel_give_the_sequential_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.mtx");
        let read = |m: &dyn Fn(&mut AtomicOutput) -> Result<()>| {
            let mut out = AtomicOutput::create(&p).unwrap();
            m(&mut out).unwrap();
            out.commit().unwrap();
            std::fs::read(&p).unwrap()
        };
        for (k, nrows) in [0usize, 1, 7, 900].into_iter().enumerate() {
            let a = random::<f64>(nrows, k as u64);
            let b = random::<f32>(nrows, k as u64 + 50);
            for entries in [1, 3, 100, 1 << 18] {
                for (first, base) in [(0, 0), (0, 1), (12345, 1)] {
                    let got = read(&|o| write_rows_in_blocks(o, &a, first, base, entries));
                    assert_eq!(got, sequential_text(&a, first, base), "{nrows} {entries}");
                    let got = read(&|o| write_rows_in_blocks(o, &b, first, base, entries));
                    assert_eq!(got, sequential_text(&b, first, base), "{nrows} {entries}");
                }
            }
        }
    }

    #[test]
    fn row_blocks_tile_the_rows() {
        let ptr = [0u64, 0, 5, 5, 6, 20, 21, 21];
        for entries in [1, 2, 5, 6, 100] {
            let b = row_blocks(&ptr, entries);
            assert_eq!(b.first().map(|r| r.start), Some(0));
            assert_eq!(b.last().map(|r| r.end), Some(7));
            for w in b.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(
                    ptr[w[0].end] - ptr[w[0].start] >= entries,
                    "{entries} {b:?}"
                );
            }
        }
        assert_eq!(row_blocks(&ptr, 5), vec![0..2, 2..5, 5..7]);
        assert!(row_blocks(&[0], 4).is_empty());
    }

    #[test]
    fn the_first_non_finite_entry_is_named_in_any_chunk() {
        // Rows of 3 entries, 300,000 in all: chunks of 2^16 values cut rows anywhere.
        let n = 100_000usize;
        let ptr: Vec<u64> = (0..=n as u64).map(|i| 3 * i).collect();
        let cols: Vec<u32> = (0..n).flat_map(|_| [0u32, 5, 9]).collect();
        let p = Path::new("c.mtx");
        for (at, bad) in [
            (0usize, f32::INFINITY),
            (65_537, f32::NAN),
            (299_999, -f32::INFINITY),
        ] {
            let mut vals = vec![1.5f32; 3 * n];
            vals[at] = bad;
            vals[(at + 70_000).min(3 * n - 1)] = f32::INFINITY;
            let m = Csr::from_parts(n, 10, ptr.clone(), cols.clone(), vals).unwrap();
            let e = refuse_non_finite(p, &m, 7).unwrap_err().to_string();
            let want = format!(
                "row {}, column {} (counted from 0)",
                7 + at / 3,
                [0, 5, 9][at % 3]
            );
            assert!(e.contains(&want) && e.contains("overflows f32"), "{e}");
        }
        let fine = Csr::from_parts(n, 10, ptr, cols, vec![1.5f32; 3 * n]).unwrap();
        assert!(refuse_non_finite(p, &fine, 0).is_ok());
    }

    #[test]
    fn wel_lines_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.wel");
        let m = Csr::from_dense(2, 3, &[0.0f64, 1.5, 0.0, 2.0, 0.0, 3.0]);
        write_matrix(&p, &m).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "0 1 1.5\n1 0 2\n1 2 3\n"
        );
        assert!(write_matrix(&dir.path().join("c.el"), &m).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
