//! Writing a matrix (a product) in the format its output path's extension names.

use super::{standard_stream, write_formatted, AtomicOutput};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
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
    match MatrixFormat::of(path)? {
        MatrixFormat::Mtx => super::write_mtx(path, m),
        MatrixFormat::Npz => super::write_npz(path, m),
        MatrixFormat::Wel => {
            let mut out = AtomicOutput::create(path)?;
            write_entries(&mut out, m, 0)?;
            out.commit()
        }
    }
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
    /// Starts writing a `nrows x ncols` matrix of `nnz` entries into `out`, in the format its
    /// path names ([`MatrixFormat::of`]); `.npz` is refused.
    pub fn start(mut out: AtomicOutput, nrows: usize, ncols: usize, nnz: u64) -> Result<Self> {
        let base = match MatrixFormat::of(out.path())? {
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

    /// Writes the rows of `m` as rows `first_row..` of the matrix; pieces come in order.
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

    /// Puts the file in place.
    pub fn commit(self) -> Result<()> {
        self.out.commit()
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
    // Rows are grouped so each group holds many entries.
    let rows: Vec<u32> = (0..m.nrows() as u32).collect();
    write_formatted(
        out,
        &rows,
        |&i, buf| {
            let (cols, vals) = m.row(i as usize);
            let mut ib = itoa::Buffer::new();
            let row_text = ib.format(i as u64 + first_row + base).to_owned();
            for (&c, &v) in cols.iter().zip(vals) {
                buf.extend_from_slice(row_text.as_bytes());
                buf.push(b' ');
                buf.extend_from_slice(ib.format(c as u64 + base).as_bytes());
                buf.push(b' ');
                v.write_to(buf);
                buf.push(b'\n');
            }
        },
        |_| {},
    )
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
            let mut w = RowWriter::start(AtomicOutput::create(&p).unwrap(), 3, 2, 3).unwrap();
            w.rows(0, &top).unwrap();
            // A piece out of order is refused, not written.
            let e = w.rows(0, &rest).unwrap_err().to_string();
            assert!(e.contains("rows from 0 came where row 1 was due"), "{e}");
            w.rows(1, &rest).unwrap();
            w.commit().unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&whole).unwrap());
        }
        let npz = dir.path().join("c.npz");
        let e = RowWriter::start(AtomicOutput::create(&npz).unwrap(), 3, 2, 3)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not written piece by piece"), "{e}");
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
