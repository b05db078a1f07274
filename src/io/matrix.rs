//! Loading a file straight into the matrix a command works on. Text formats are parsed into an
//! edge list and built with [`Csr::from_edges`]; a `.npz` archive that stores its matrix by rows
//! or columns is built from those arrays ([`Csr::from_row_entries`]) with no edge list in
//! between, by the same rules, so both give the same matrix for the same entries. Commands that
//! build their own matrices (`info`, `cluster`) take a CSR or CSC archive's arrays as stored
//! ([`load_graph`]).

use super::npz::StoredMatrix;
use super::{limits, npz, reader, Format, Labels, Loaded};
use crate::csr::{BuildOptions, Csr};
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

/// A graph file loaded for a command that builds its own matrices of it: a `.npz` archive that
/// groups its entries by row or column as those groups ([`StoredMatrix`]), with no edge list in
/// between; any other file (a COO archive too) as its edge list.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphInput {
    /// A CSR or CSC archive's entries, as stored.
    Stored(StoredMatrix),
    /// The edges of any other input.
    Edges(Loaded),
}

impl GraphInput {
    /// The format the file was read as.
    pub fn format(&self) -> Format {
        match self {
            GraphInput::Stored(_) => Format::Npz,
            GraphInput::Edges(l) => l.format,
        }
    }
}

/// Loads a graph file as [`super::load_for`] does (`-` the standard input; the same checks of
/// memory for `footprint` and the same errors), a CSR or CSC `.npz` archive as its stored arrays.
pub fn load_graph(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
) -> Result<GraphInput> {
    load_grouped(path, format, footprint, None)
}

/// [`load_graph`] for a run whose values have type `T`, as [`super::load_as`]: a weight `T`
/// cannot hold is an error.
pub fn load_graph_as<T: Scalar>(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
) -> Result<GraphInput> {
    load_grouped(
        path,
        format,
        footprint,
        Some((super::fits_in::<T> as fn(f64) -> bool, T::NAME)),
    )
}

/// [`load_graph`], the weights checked by `fits` when given.
fn load_grouped(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
    fits: Option<super::WeightCheck>,
) -> Result<GraphInput> {
    let is_npz = format.or_else(|| Format::of_input(path)) == Some(Format::Npz);
    if !is_npz || super::is_stdin(path) || path.is_dir() {
        return Ok(GraphInput::Edges(super::load_checked(
            path, format, footprint, fits,
        )?));
    }
    let source = reader::Source::open(path)?;
    let bytes = source.bytes();
    let read = npz::parse_grouped(bytes, path).and_then(|m| match m {
        npz::Grouped::Stored(m) => {
            check_stored(&m, path, footprint, fits).map(|()| GraphInput::Stored(m))
        }
        npz::Grouped::Edges(l) => {
            super::check_loaded(&l, bytes, path, footprint, fits).map(|()| GraphInput::Edges(l))
        }
    });
    source.unchanged(path)?;
    let read = read?;
    crate::interrupt::check()?;
    Ok(read)
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
    let loaded = load_grouped(path, format, footprint, fits)?;
    let in_file = |e| match e {
        Error::Invalid(message) => Error::Input {
            path: path.to_path_buf(),
            message,
        },
        other => other,
    };
    let text = match loaded {
        GraphInput::Stored(stored) => {
            let mut rows = stored.into_rows()?;
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
        GraphInput::Edges(l) => l,
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

/// The checks [`super::load_as`] makes of a loaded file, for a `.npz` archive's stored entries:
/// memory for the graph, and values the type can hold (when `fits` is given; the first in
/// stored order, which is the edge order, is named).
fn check_stored(
    m: &StoredMatrix,
    path: &Path,
    footprint: &limits::Footprint,
    fits: Option<super::WeightCheck>,
) -> Result<()> {
    if let (Some((fits, name)), Some(values)) = (fits, &m.entries.values) {
        super::checks::refuse_weights_beyond(values, path, fits, name, |_| None)?;
    }
    limits::check_size(Format::Npz, m.shape(), m.len(), path, footprint, |_| None)
}
