//! Loading a file straight into the matrix a command works on. Text formats are parsed into an
//! edge list and built with [`Csr::from_edges`]; a `.npz` archive that stores its matrix by rows
//! or columns is built from those arrays ([`Csr::from_row_entries`]) with no edge list in
//! between, by the same rules, so both give the same matrix for the same entries.

use super::{limits, npz, reader, Format, Labels, Loaded};
use crate::csr::{BuildOptions, Csr, RowEntries};
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use std::path::Path;

/// How a command makes its matrix of a loaded file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatrixOptions {
    /// Symmetrization, self loops and duplicates, as [`Csr::from_edges`] takes them.
    pub build: BuildOptions,
    /// Make the matrix square, `n x n` with `n` the larger side, as a graph's adjacency is.
    pub square: bool,
    /// Ignore the values: every entry weighs one (the graph's pattern). Without it, a weight
    /// the value type cannot hold is an error naming its line.
    pub pattern: bool,
}

/// A file loaded into a matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedMatrix<T> {
    /// The matrix, built as the options said.
    pub matrix: Csr<T>,
    /// What each vertex was called in the file.
    pub labels: Labels,
    /// The format the file was read as.
    pub format: Format,
}

/// Loads a graph file (as [`super::load_for`] does, `-` the standard input) into the matrix
/// `opts` describes; a graph that needs more memory for `footprint` than there is fails before
/// it is built.
pub fn load_matrix<T: Scalar>(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
    opts: &MatrixOptions,
) -> Result<LoadedMatrix<T>> {
    let fits = (!opts.pattern).then_some((super::fits_in::<T> as fn(f64) -> bool, T::NAME));
    let is_npz = format.or_else(|| Format::of_input(path)) == Some(Format::Npz);
    let loaded = if is_npz && !super::is_stdin(path) && !path.is_dir() {
        let source = reader::Source::open(path)?;
        let bytes = source.bytes();
        let read = npz::parse_matrix(bytes, path).and_then(|m| match m {
            npz::Matrix::Rows(rows) => check_rows(&rows, path, footprint, fits).map(|()| Ok(rows)),
            npz::Matrix::Edges(l) => {
                super::check_loaded(&l, bytes, path, footprint, fits).map(|()| Err(l))
            }
        });
        source.unchanged(path)?;
        read?
    } else {
        Err(super::load_checked(path, format, footprint, fits)?)
    };
    let in_file = |e| match e {
        Error::Invalid(message) => Error::Input {
            path: path.to_path_buf(),
            message,
        },
        other => other,
    };
    let text = match loaded {
        Ok(mut rows) => {
            if opts.square {
                let n = rows.nrows.max(rows.ncols);
                rows.ptr.resize(n + 1, rows.cols.len() as u64);
                (rows.nrows, rows.ncols) = (n, n);
            }
            if opts.pattern {
                rows.values = None;
            }
            let m = Csr::from_row_entries(rows, &opts.build).map_err(in_file)?;
            crate::interrupt::check()?;
            return Ok(LoadedMatrix {
                matrix: m,
                labels: Labels::Identity,
                format: Format::Npz,
            });
        }
        Err(l) => l,
    };
    let Loaded {
        mut edges,
        labels,
        format,
        ..
    } = text;
    if opts.square {
        let n = edges.nrows.max(edges.ncols);
        (edges.nrows, edges.ncols) = (n, n);
    }
    if opts.pattern {
        edges.weights = None;
    }
    let matrix = Csr::from_edges(&edges, &opts.build).map_err(in_file)?;
    Ok(LoadedMatrix {
        matrix,
        labels,
        format,
    })
}

/// The checks [`super::load_as`] makes of a loaded file, for a `.npz` archive's rows: memory
/// for the graph, and values the type can hold (when `fits` is given).
fn check_rows(
    rows: &RowEntries,
    path: &Path,
    footprint: &limits::Footprint,
    fits: Option<super::WeightCheck>,
) -> Result<()> {
    if let (Some((fits, name)), Some(values)) = (fits, &rows.values) {
        super::checks::refuse_weights_beyond(values, path, fits, name, |_| None)?;
    }
    limits::check_size(
        Format::Npz,
        (rows.nrows, rows.ncols),
        rows.cols.len(),
        path,
        footprint,
        |_| None,
    )
}
