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

/// Writes `m`'s entries as `row col value` lines, row by row, indices plus `base`.
pub(super) fn write_entries<T: Scalar>(
    out: &mut AtomicOutput,
    m: &Csr<T>,
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
            let row_text = ib.format(i as u64 + base).to_owned();
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
