//! Loading a file straight into the matrix a command works on. Text formats are parsed into an
//! edge list and built with [`Csr::from_edges`]; a `.npz` archive that stores its matrix by rows
//! or columns is built from those arrays ([`Csr::from_row_entries`]) with no edge list in
//! between, by the same rules, so both give the same matrix for the same entries. Commands that
//! build their own matrices (`info`, `cluster`) take a CSR or CSC archive's arrays as stored
//! ([`load_graph`]).

use super::npz::StoredMatrix;
use super::{limits, npz, reader, Format, Labels, Loaded};
use crate::csr::{BuildOptions, Csr, Duplicates};
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
    let in_file = in_file(path);
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

/// How the simple undirected graph of a file's entries is made (what triangle counting reads):
/// square, values ignored, symmetric, self loops dropped, repeated edges once.
pub const SIMPLE_GRAPH: MatrixOptions = MatrixOptions {
    build: BuildOptions {
        symmetrize: true,
        drop_self_loops: true,
        duplicates: Duplicates::Max,
    },
    square: true,
    pattern: true,
};

/// A file loaded as the adjacency pattern of its simple undirected graph ([`SIMPLE_GRAPH`]):
/// square, symmetric, each row strictly increasing, no diagonal entry.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedPattern {
    /// `n + 1` row offsets into `col_idx`.
    pub row_ptr: Vec<u64>,
    /// Every vertex's neighbours, row after row.
    pub col_idx: Vec<u32>,
    /// What each vertex was called in the file.
    pub labels: Labels,
    /// The format the file was read as.
    pub format: Format,
    /// Whether the rows are known to be a simple graph's: false only where the caller took the
    /// check ([`SymmetryCheck::Caller`]).
    pub checked: bool,
}

/// Who decides whether a `.npz` archive's stored rows already are a simple graph's
/// ([`load_simple_pattern`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymmetryCheck {
    /// The load, on the host: the pattern returned is the simple graph's.
    Load,
    /// The caller, where it runs the check anyway (on the GPU it uploads the rows to): rows
    /// stored strictly increasing come back as read and unchecked, and where they are not
    /// symmetric the caller makes the simple graph of them with [`simple_pattern`].
    Caller,
}

/// Loads a graph file (as [`load_matrix`] does: `-` the standard input, the same checks of memory
/// for `footprint`, the same errors) into the pattern [`SIMPLE_GRAPH`] makes of it. A CSR or CSC
/// `.npz` archive is read without its values and its diagonal; when its rows are then already a
/// simple graph's (strictly increasing, and symmetric by
/// [`crate::csr::is_symmetric_without_loops`], an exact check of every entry), they are the
/// pattern as read, with no transpose and no merge; with [`SymmetryCheck::Caller`], rows stored
/// strictly increasing come back unchecked. Any other archive is built as [`load_matrix`]
/// builds it, which gives the same pattern.
pub fn load_simple_pattern(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
    check: SymmetryCheck,
) -> Result<LoadedPattern> {
    let is_npz = format.or_else(|| Format::of_input(path)) == Some(Format::Npz);
    if !is_npz || super::is_stdin(path) || path.is_dir() {
        let l = load_matrix::<f32>(path, format, footprint, &SIMPLE_GRAPH)?;
        return Ok(pattern_of(l.matrix, l.labels, l.format));
    }
    let source = reader::Source::open(path)?;
    let bytes = source.bytes();
    let read = npz::parse_pattern(bytes, path).and_then(|p| {
        match &p {
            npz::Pattern::Stored { matrix, .. } => limits::check_size(
                Format::Npz,
                matrix.shape(),
                matrix.len(),
                path,
                footprint,
                |_| None,
            ),
            npz::Pattern::Edges(l) => super::check_loaded(l, bytes, path, footprint, None),
        }
        .map(|()| p)
    });
    source.unchanged(path)?;
    drop(source);
    let (stored, sorted) = match read? {
        npz::Pattern::Stored { matrix, sorted } => (matrix, sorted),
        npz::Pattern::Edges(l) => {
            let mut edges = l.edges;
            let n = edges.nrows.max(edges.ncols);
            (edges.nrows, edges.ncols, edges.weights) = (n, n, None);
            let m = Csr::<f32>::from_edges(&edges, &SIMPLE_GRAPH.build).map_err(in_file(path))?;
            return Ok(pattern_of(m, l.labels, Format::Npz));
        }
    };
    // Square: the groups (rows, or the columns of a CSC archive) padded to the larger side. A
    // symmetric pattern is its own transpose, so a CSC archive's groups are then its rows.
    let StoredMatrix {
        mut entries,
        transposed,
    } = stored;
    let n = entries.nrows.max(entries.ncols);
    entries.ptr.resize(n + 1, entries.cols.len() as u64);
    (entries.nrows, entries.ncols) = (n, n);
    crate::interrupt::check()?;
    let unchecked = sorted && check == SymmetryCheck::Caller;
    if unchecked || sorted && crate::csr::is_symmetric_without_loops(&entries.ptr, &entries.cols) {
        return Ok(LoadedPattern {
            row_ptr: entries.ptr,
            col_idx: entries.cols,
            labels: Labels::Identity,
            format: Format::Npz,
            checked: !unchecked,
        });
    }
    let rows = StoredMatrix {
        entries,
        transposed,
    }
    .into_rows()?;
    let m = Csr::<f32>::from_row_entries(rows, &SIMPLE_GRAPH.build).map_err(in_file(path))?;
    crate::interrupt::check()?;
    Ok(pattern_of(m, Labels::Identity, Format::Npz))
}

/// Block `part` of `parts` of the pattern [`load_simple_pattern`] reads from a CSR or CSC
/// `.npz` archive, for one rank of a distributed run: the groups `rows_of(groups)` of the
/// `n x n` pattern (chosen from its side and stored offsets), with whether they strictly
/// increase and this block's pieces of the members' CRCs ([`npz::PatternBlock`]); with `values`,
/// its values too, each checked by `values` ([`npz::BlockValues`]). Only this block's bytes of the
/// arrays are read. Whether the archive is a simple graph's is for the ranks to decide together.
/// `None` when the file is no such archive or the block does not read cleanly: the caller then
/// reads it as any other file, which says what is wrong.
pub fn load_pattern_block(
    path: &Path,
    format: Option<Format>,
    (part, parts): (usize, usize),
    rows_of: &dyn Fn(&npz::GroupOffsets<'_>) -> std::ops::Range<usize>,
    values: Option<&npz::ValueCheck<'_>>,
) -> Option<npz::PatternBlock> {
    let is_npz = format.or_else(|| Format::of_input(path)) == Some(Format::Npz);
    if !is_npz || super::is_stdin(path) || path.is_dir() {
        return None;
    }
    let source = reader::Source::open(path).ok()?;
    let block = npz::parse_pattern_block(source.bytes(), path, (part, parts), rows_of, values);
    source.unchanged(path).ok()?;
    block
}

/// The simple graph's pattern of rows [`load_simple_pattern`] returned unchecked, which the
/// caller found not symmetric: the rows with their mirrors added, as the load would have built
/// them. (A CSC archive's groups are taken as rows: a pattern and its transpose have the same
/// simple graph.) Patterns already checked come back as they are.
pub fn simple_pattern(p: LoadedPattern) -> Result<LoadedPattern> {
    if p.checked {
        return Ok(p);
    }
    let n = p.row_ptr.len() - 1;
    let rows = crate::csr::RowEntries {
        nrows: n,
        ncols: n,
        ptr: p.row_ptr,
        cols: p.col_idx,
        values: None,
    };
    let m = Csr::<f32>::from_row_entries(rows, &SIMPLE_GRAPH.build)?;
    crate::interrupt::check()?;
    Ok(pattern_of(m, p.labels, p.format))
}

/// The pattern of a matrix built by [`SIMPLE_GRAPH`] (its values dropped).
fn pattern_of(m: Csr<f32>, labels: Labels, format: Format) -> LoadedPattern {
    let (_, _, row_ptr, col_idx, _) = m.into_parts();
    LoadedPattern {
        row_ptr,
        col_idx,
        labels,
        format,
        checked: true,
    }
}

/// A build's complaint about a file's entries as an error naming the file.
fn in_file(path: &Path) -> impl Fn(Error) -> Error + '_ {
    move |e| match e {
        Error::Invalid(message) => Error::Input {
            path: path.to_path_buf(),
            message,
        },
        other => other,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edges::EdgeList;

    /// The simple graph of an archive's entries, whether they already are one but for their
    /// loops (taken as read), or hold one-way entries and repeats (built): the pattern the edge
    /// build makes of the same entries.
    #[test]
    fn an_archive_is_read_as_the_simple_graph_of_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let el = crate::generate::generate(&crate::generate::RmatParams {
            seed: 9,
            ..crate::generate::RmatParams::new(10, 8 << 10)
        })
        .unwrap();
        let n = el.nrows;
        let mirrored: Vec<(u32, u32)> = el.edges.iter().map(|&(u, v)| (v, u)).collect();
        let loops: Vec<(u32, u32)> = (0..n as u32).step_by(7).map(|v| (v, v)).collect();
        let both: Vec<(u32, u32)> = [&el.edges[..], &mirrored, &loops].concat();
        let one_way: Vec<(u32, u32)> = [&el.edges[..], &loops].concat();
        let sum = BuildOptions::default();
        for (k, entries) in [both, one_way].into_iter().enumerate() {
            let edges = EdgeList::square(n, entries, None);
            let stored = Csr::<f64>::from_edges(&edges, &sum).unwrap();
            let path = dir.path().join(format!("g{k}.npz"));
            std::fs::write(&path, npz::write(Vec::new(), &stored).unwrap()).unwrap();
            let want = Csr::<f32>::from_edges(&edges, &SIMPLE_GRAPH.build).unwrap();
            let foot = &crate::tricount::FOOTPRINT;
            let got = load_simple_pattern(&path, None, foot, SymmetryCheck::Load).unwrap();
            assert!(got.checked);
            // Left to the caller, the rows come as read (loops dropped), and the simple graph
            // is made of them where they are not one.
            let rows = load_simple_pattern(&path, None, foot, SymmetryCheck::Caller).unwrap();
            assert!(!rows.checked);
            assert_eq!(
                crate::csr::is_symmetric_without_loops(&rows.row_ptr, &rows.col_idx),
                k == 0
            );
            for got in [got, simple_pattern(rows).unwrap()] {
                assert_eq!(got.row_ptr, want.row_ptr(), "{k}");
                assert_eq!(got.col_idx, want.col_idx(), "{k}");
                assert_eq!((got.labels, got.format), (Labels::Identity, Format::Npz));
                assert!(got.checked);
            }
        }
    }
}
