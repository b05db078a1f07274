//! Loading graphs from text files: edge lists (`.el`, `.wel`), SNAP text (`.txt`, `.snap`),
//! Matrix Market (`.mtx`) and mcl's label format (`.abc`).
//!
//! Every format goes through one reader: the file is memory-mapped, its bytes are cut into
//! chunks at line boundaries, and the chunks are parsed in parallel by hand-written byte-level
//! parsers; their edges are gathered in file order, so the result does not depend on the number
//! of threads.
//!
//! Rules shared by all formats:
//!
//! - A line whose first non-blank character is `#` or `%` is a comment (in `.mtx` the first line
//!   is the `%%MatrixMarket` header). Blank and whitespace-only lines are ignored.
//! - Fields are separated by any run of spaces and tabs; leading and trailing blanks, CRLF line
//!   ends and a last line without a newline are fine.
//! - Vertex ids are non-negative decimal integers up to 4294967294.
//! - Weights are finite numbers (`NaN` and infinities are errors).
//! - Matrix Market indices are 1-based in the file and 0-based inside gmcl; writers shift them
//!   back to 1-based for `.mtx` output only.
//!
//! Errors name the file and, for a bad line, its 1-based number ([`Error::Parse`]); whole-file
//! problems (a wrong entry count) are [`Error::Input`]. No input, however malformed, makes the
//! loaders panic.

mod abc;
mod checks;
mod el;
mod intern;
mod labels;
pub mod limits;
mod mapguard;
mod matrix;
mod mtx;
pub mod npz;
mod reader;
mod snap;
mod stream;

use crate::edges::EdgeList;
use crate::error::{Error, Result};
pub use labels::{Labels, TWO_NUMBERINGS};
pub use matrix::{
    load_graph, load_graph_as, load_matrix, load_pattern_block, load_simple_pattern,
    simple_pattern, GraphInput, LoadedMatrix, LoadedPattern, MatrixOptions, SymmetryCheck,
    SIMPLE_GRAPH,
};
pub use mtx::PartFacts;
pub use npz::StoredMatrix;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// An input file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Edge list: `u v` per line (`.el`).
    El,
    /// Weighted edge list: `u v w` per line (`.wel`).
    Wel,
    /// SNAP text: `#` comments, `u v [w]`, ids need not be contiguous (`.txt`, `.snap`).
    Snap,
    /// Matrix Market coordinate format (`.mtx`).
    Mtx,
    /// mcl's label format: `label label [weight]` (`.abc`).
    Abc,
    /// SciPy's sparse matrix archive (`.npz`, `scipy.sparse.save_npz`): binary, read without
    /// parsing text.
    Npz,
}

impl Format {
    /// Every format, in the order they are listed to users.
    pub const ALL: [Format; 6] = [
        Format::El,
        Format::Wel,
        Format::Snap,
        Format::Mtx,
        Format::Abc,
        Format::Npz,
    ];

    /// Whether files of this format are lines of text (all but `.npz`): the checks that read
    /// lines (line numbers in errors, a cut-off last line) apply to them only.
    pub fn is_text(self) -> bool {
        self != Format::Npz
    }

    /// The format's name as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::El => "el",
            Format::Wel => "wel",
            Format::Snap => "snap",
            Format::Mtx => "mtx",
            Format::Abc => "abc",
            Format::Npz => "npz",
        }
    }

    /// The format a file name's extension stands for (case-insensitive): `.el`, `.wel`, `.mtx`,
    /// `.abc`, `.npz`, and `.txt` or `.snap` for SNAP text. `None` for any other extension.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "el" => Some(Format::El),
            "wel" => Some(Format::Wel),
            "txt" | "snap" => Some(Format::Snap),
            "mtx" => Some(Format::Mtx),
            "abc" => Some(Format::Abc),
            "npz" => Some(Format::Npz),
            _ => None,
        }
    }
}

impl Format {
    /// The format of an input file by its name: [`Format::from_path`] of the name without its
    /// `.gz` ending when it has one ([`is_gzip`]: `g.el.gz` is an edge list, read decompressed).
    pub fn of_input(path: &Path) -> Option<Format> {
        if is_gzip(path) {
            Format::from_path(&path.with_extension(""))
        } else {
            Format::from_path(path)
        }
    }
}

/// Bytes of a file's start that [`snap_extra_columns`] reads.
const SNAP_HEAD_BYTES: u64 = 1 << 20;

/// Columns a SNAP text input holds past each line's source and target, which the loader skips
/// as SNAP's own loader does (signs, times: no weights), as its first data line shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtraColumns {
    /// The line's number (from 1).
    pub line: u64,
    /// Its columns.
    pub columns: usize,
}

impl ExtraColumns {
    /// What they mean for the file at `path`, for a front end's notice, which then says how to
    /// read a column of weights instead.
    pub fn describe(&self, path: &Path) -> String {
        format!(
            "{}: line {} has {} columns; SNAP text is read as source and target, the further \
             columns skipped as SNAP's own loader skips them",
            path.display(),
            self.line,
            self.columns
        )
    }
}

/// The columns past the source and target of a SNAP text input ([`ExtraColumns`]), so that a
/// front end can say they were not read. Reads the start of the file (decompressed where it is
/// `.gz`). `None` where the input is not read as SNAP text (`format`, else the name), is no
/// regular file (a pipe's bytes would be taken from the loader), cannot be read (the loader
/// then says why), or holds two columns.
pub fn snap_extra_columns(path: &Path, format: Option<Format>) -> Option<ExtraColumns> {
    use std::io::Read;
    if is_stdin(path) || format.or_else(|| Format::of_input(path)) != Some(Format::Snap) {
        return None;
    }
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut head = Vec::new();
    let read = match is_gzip(path) {
        true => flate2::read::MultiGzDecoder::new(file)
            .take(SNAP_HEAD_BYTES)
            .read_to_end(&mut head),
        false => file.take(SNAP_HEAD_BYTES).read_to_end(&mut head),
    };
    read.ok()?;
    let (line, columns) = snap::extra_columns(&head, (head.len() as u64) < SNAP_HEAD_BYTES)?;
    Some(ExtraColumns { line, columns })
}

/// Whether an input path names a gzip-compressed file: its name ends in `.gz` (any case). Such a
/// file is decompressed into memory as it is read (no further than the memory limit), and its
/// format is the one the name before `.gz` says.
pub fn is_gzip(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;

    /// Reads a format name: `el`, `wel`, `snap`, `mtx`, `abc` or `npz` (case-insensitive).
    fn from_str(s: &str) -> Result<Format> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown format '{s}': expected one of el, wel, snap, mtx, abc, npz"
                ))
            })
    }
}

/// A loaded input file.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The edges in file order (a symmetric `.mtx` file's mirrored entries follow the stored
    /// ones), with the shape: `max id + 1` square for `.el`/`.wel`, the number of distinct ids
    /// or labels for SNAP and `.abc`, the size line's `rows x columns` for `.mtx`.
    pub edges: EdgeList,
    /// What each vertex was called in the file.
    pub labels: Labels,
    /// The format the file was read as.
    pub format: Format,
    /// The file is a Matrix Market `symmetric` or `skew-symmetric` matrix (stored as one
    /// triangle; `edges` holds both).
    pub symmetric_storage: bool,
}

/// What errors call the standard input, read when the input path is `-`.
pub const STDIN_NAME: &str = "<stdin>";

/// Whether an input path means the standard input: `-`.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Loads a graph file. Without `format`, the file name's extension decides
/// ([`Format::of_input`]; a name ending in `.gz` is read decompressed, [`is_gzip`]); an unknown
/// extension is an error asking for `--format`. The path
/// `-` is the standard input, which has no name to tell the format by: it needs `format`, and
/// is read into memory (no more than the memory limit, [`limits::memory_bytes`]). A graph
/// whose vertices need more memory than there is, at the least any command needs
/// ([`limits::Footprint::MINIMUM`]), fails here, before anything per vertex is allocated.
pub fn load(path: &Path, format: Option<Format>) -> Result<Loaded> {
    load_checked(path, format, &limits::Footprint::MINIMUM, None)
}

/// [`load`] for a command that will allocate `footprint` for the graph: a graph that needs more
/// memory than there is ([`limits`]) fails here, naming the file and the line.
pub fn load_for(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
) -> Result<Loaded> {
    load_checked(path, format, footprint, None)
}

/// [`load_for`] for a run whose values have type `T`: a weight that `T` cannot hold (in `f32`,
/// one above about 3.4e38, which would become infinite) is an error naming its line.
pub fn load_as<T: crate::Scalar>(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
) -> Result<Loaded> {
    load_checked(path, format, footprint, Some((fits_in::<T>, T::NAME)))
}

/// A check of the weights for a value type: does a weight fit, and the type's name.
type WeightCheck = (fn(f64) -> bool, &'static str);

fn fits_in<T: crate::Scalar>(w: f64) -> bool {
    T::from_f64(w).to_f64().is_finite()
}

/// [`load`], with the footprint checked and the weights checked by `fits` when given.
fn load_checked(
    path: &Path,
    format: Option<Format>,
    footprint: &limits::Footprint,
    fits: Option<WeightCheck>,
) -> Result<Loaded> {
    if is_stdin(path) {
        return load_stdin(format, footprint, fits);
    }
    // The format is settled before any byte is read (an endless input is not read first), but
    // a directory is called one whatever its name.
    if path.is_dir() {
        return Err(reader::is_a_directory(path));
    }
    let format = match format.or_else(|| Format::of_input(path)) {
        Some(f) => f,
        None => {
            let named = if is_gzip(path) {
                path.with_extension("")
            } else {
                path.to_path_buf()
            };
            let ext = match named.extension() {
                Some(e) => format!("extension '.{}'", e.to_string_lossy()),
                None => "name (it has no extension)".into(),
            };
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: format!(
                    "cannot tell the format from the file {ext}; pass --format with one of \
                     el, wel, snap, mtx, abc, npz"
                ),
            });
        }
    };
    let source = reader::Source::open(path)?;
    let bytes = source.bytes();
    let loaded = parse_with(bytes, format, path, reader::default_chunk(bytes.len()))
        .and_then(|l| check_loaded(&l, bytes, path, footprint, fits).map(|()| l));
    // A file that changed while it was parsed: whatever the parse made of it, that is the error.
    source.unchanged(path)?;
    let loaded = loaded?;
    crate::interrupt::check()?;
    Ok(loaded)
}

/// The checks of a parsed input: weights its value type can hold, and memory for its graph.
fn check_loaded(
    loaded: &Loaded,
    bytes: &[u8],
    path: &Path,
    footprint: &limits::Footprint,
    fits: Option<WeightCheck>,
) -> Result<()> {
    if let Some((fits, name)) = fits {
        checks::refuse_unrepresentable_weights(bytes, loaded, path, fits, name)?;
    }
    limits::check(loaded, bytes, path, footprint)
}

/// The standard input's bytes, read into memory within the memory gmcl may use (errors call it
/// [`STDIN_NAME`]).
pub(crate) fn stdin_bytes() -> Result<Vec<u8>> {
    reader::read_stdin(limits::memory_bytes(), Path::new(STDIN_NAME))
}

/// What errors call `path`: [`STDIN_NAME`] for `-`, else the path.
pub fn shown(path: &Path) -> &Path {
    match is_stdin(path) {
        true => Path::new(STDIN_NAME),
        false => path,
    }
}

/// [`load`] of the standard input.
fn load_stdin(
    format: Option<Format>,
    footprint: &limits::Footprint,
    fits: Option<WeightCheck>,
) -> Result<Loaded> {
    let name = Path::new(STDIN_NAME);
    let Some(format) = format else {
        return Err(Error::Input {
            path: name.to_path_buf(),
            message: "the standard input ('-') has no extension to tell the format by; pass \
                      --format with one of el, wel, snap, mtx, abc, npz"
                .into(),
        });
    };
    let bytes = stdin_bytes()?;
    let loaded = parse_with(&bytes, format, name, reader::default_chunk(bytes.len()))?;
    check_loaded(&loaded, &bytes, name, footprint, fits)?;
    crate::interrupt::check()?;
    Ok(loaded)
}

/// Loads part `part` of `parts` of a graph file, as one process of a distributed run does: the
/// file is mapped, and only the lines of that part (an equal share of the bytes, cut at line
/// boundaries) are read. The edge list's shape is the part's own (largest id + 1): the caller
/// agrees on the whole graph's with the other parts. SNAP and `.abc` parts come numbered by
/// their own ids and labels (the part's [`Labels`]): their numbering in the whole file depends
/// on the other parts, and `crate::dist::labels` makes it. `.mtx` is read by [`load_part_as`].
/// A `.npz` part is its share of the archive's rows (CSR), columns (CSC) or entries (COO), with
/// the archive's shape ([`npz::parse_part`]). The whole-file checks of
/// [`load`] that concern a part are made by it: a Matrix Market banner read as an edge list, and
/// (by the last part) a cut-off last line.
pub fn load_part(path: &Path, format: Option<Format>, part: usize, parts: usize) -> Result<Loaded> {
    load_part_checked(path, format, part, parts, None)
}

/// [`load_part`] for a run whose values have type `T` (a weight of the part that `T` cannot hold
/// is an error naming its line in the whole file, as [`load_as`] does), reading Matrix Market
/// files too: every part reads the header and size line, then its share of the entry lines. The
/// checks that need every part (the entry count, one triangle in a symmetric file) are left to
/// [`check_parts`], with the [`PartFacts`] returned beside the part.
pub fn load_part_as<T: crate::Scalar>(
    path: &Path,
    format: Option<Format>,
    part: usize,
    parts: usize,
) -> Result<(Loaded, PartFacts)> {
    let fits: WeightCheck = (fits_in::<T>, T::NAME);
    if format.or_else(|| Format::of_input(path)) != Some(Format::Mtx) {
        let loaded = load_part_checked(path, format, part, parts, Some(fits))?;
        let facts = PartFacts {
            entries: loaded.edges.len() as u64,
            ..Default::default()
        };
        return Ok((loaded, facts));
    }
    let source = reader::Source::open(path)?;
    let bytes = source.bytes();
    let loaded = mtx::parse_part(bytes, path, part, parts).and_then(|(l, facts)| {
        check_part(&l, bytes, path, part, parts, Some(fits)).map(|()| (l, facts))
    });
    source.unchanged(path)?;
    let loaded = loaded?;
    crate::interrupt::check()?;
    Ok(loaded)
}

/// The checks of a file read in parts by [`load_part_as`] that need every part: given every
/// part's facts, in part order, the same answer for every part.
pub fn check_parts(path: &Path, format: Option<Format>, facts: &[PartFacts]) -> Result<()> {
    match format.or_else(|| Format::of_input(path)) {
        Some(Format::Mtx) => mtx::check_parts(path, facts),
        _ => Ok(()),
    }
}

/// [`load_part`], with the part's weights checked by `fits` when given.
fn load_part_checked(
    path: &Path,
    format: Option<Format>,
    part: usize,
    parts: usize,
    fits: Option<WeightCheck>,
) -> Result<Loaded> {
    let format = format.or_else(|| Format::of_input(path));
    match format {
        Some(f @ (Format::El | Format::Wel)) => {
            let source = reader::Source::open(path)?;
            let bytes = source.bytes();
            let loaded = checks::refuse_foreign_banner(bytes, f, path)
                .and_then(|()| el::parse_part(bytes, f, path, part, parts))
                .and_then(|l| check_part(&l, bytes, path, part, parts, fits).map(|()| l));
            source.unchanged(path)?;
            let loaded = loaded?;
            crate::interrupt::check()?;
            Ok(loaded)
        }
        Some(f @ (Format::Snap | Format::Abc)) => {
            let source = reader::Source::open(path)?;
            let bytes = source.bytes();
            let loaded = checks::refuse_compressed_text(bytes, f, path)
                .and_then(|()| checks::refuse_foreign_banner(bytes, f, path))
                .and_then(|()| match f {
                    Format::Snap => snap::parse_part(bytes, path, part, parts),
                    _ => abc::parse_part(bytes, path, part, parts),
                })
                .and_then(|l| check_part(&l, bytes, path, part, parts, fits).map(|()| l));
            source.unchanged(path)?;
            let loaded = loaded?;
            crate::interrupt::check()?;
            Ok(loaded)
        }
        Some(Format::Npz) => {
            let source = reader::Source::open(path)?;
            let loaded = npz::parse_part(source.bytes(), path, part, parts)
                .and_then(|l| check_npz_part(&l, path, fits).map(|()| l));
            source.unchanged(path)?;
            let loaded = loaded?;
            crate::interrupt::check()?;
            Ok(loaded)
        }
        Some(f) => Err(Error::Input {
            path: path.to_path_buf(),
            message: format!(
                "the {f} format cannot be read across ranks yet: give an edge list (.el, \
                 .wel, SNAP .txt), labels (.abc), Matrix Market (.mtx) or SciPy .npz, or run \
                 without mpirun"
            ),
        }),
        None => load(path, None),
    }
}

/// The checks of a parsed `.npz` part, as [`load_as`] makes them of the whole archive: values its
/// value type can hold, memory for its entries (the archive is binary: no line to name).
fn check_npz_part(loaded: &Loaded, path: &Path, fits: Option<WeightCheck>) -> Result<()> {
    if let (Some((fits, name)), Some(weights)) = (fits, &loaded.edges.weights) {
        checks::refuse_weights_beyond(weights, path, fits, name, |_| None)?;
    }
    let el = &loaded.edges;
    limits::check_size(
        Format::Npz,
        (el.nrows, el.ncols),
        el.len(),
        path,
        &limits::Footprint::MINIMUM,
        |_| None,
    )
}

/// The checks of a parsed part: the last line not cut off (last part), weights its value type
/// can hold (named by their line in the whole file), memory for its edges.
fn check_part(
    loaded: &Loaded,
    bytes: &[u8],
    path: &Path,
    part: usize,
    parts: usize,
    fits: Option<WeightCheck>,
) -> Result<()> {
    if part + 1 == parts {
        // A part without weights may end a weighted SNAP or `.abc` file: as weighted, the
        // check asks the entry line before the last (in whichever part), as for the whole file.
        let weighted = Loaded {
            edges: crate::edges::EdgeList {
                weights: Some(Vec::new()),
                ..Default::default()
            },
            format: loaded.format,
            labels: Labels::Identity,
            symmetric_storage: false,
        };
        checks::refuse_cut_last_line(bytes, &weighted, path)?;
    }
    if let Some((fits, name)) = fits {
        let start = match loaded.format {
            Format::Mtx => mtx::entries_start(bytes),
            // `%` starts a label in `.abc`: its parts start at the first byte.
            Format::Abc => 0,
            _ => reader::skip_leading_comments(bytes, 0),
        };
        let range = reader::part_range(bytes, start, part, parts);
        let part_format = match loaded.format {
            // The part holds entry lines only (no size line to skip).
            Format::Mtx => Format::El,
            f => f,
        };
        let stored = Loaded {
            edges: crate::edges::EdgeList {
                weights: loaded.edges.weights.clone(),
                ..Default::default()
            },
            format: part_format,
            labels: Labels::Identity,
            symmetric_storage: false,
        };
        checks::refuse_unrepresentable_weights(&bytes[range.clone()], &stored, path, fits, name)
            .map_err(|e| match e {
                Error::Parse {
                    path,
                    line,
                    message,
                } => Error::Parse {
                    path,
                    line: line + reader::line_number(bytes, range.start) - 1,
                    message,
                },
                other => other,
            })?;
    }
    limits::check(loaded, bytes, path, &limits::Footprint::MINIMUM)
}

/// Parses the bytes of a file in `format`, as [`load`] does; `path_for_errors` is the name errors
/// give.
pub fn parse_bytes(bytes: &[u8], format: Format, path_for_errors: &Path) -> Result<Loaded> {
    parse_with(
        bytes,
        format,
        path_for_errors,
        reader::default_chunk(bytes.len()),
    )
}

/// [`parse_bytes`] with the input cut into chunks of about `chunk` bytes (at least 1), as a large
/// file is cut for the threads. The answer (or the error) does not depend on `chunk`; fuzzing and
/// tests use tiny chunks to cross chunk boundaries on small inputs.
pub fn parse_bytes_in_chunks(
    bytes: &[u8],
    format: Format,
    path_for_errors: &Path,
    chunk: usize,
) -> Result<Loaded> {
    parse_with(bytes, format, path_for_errors, chunk.max(1))
}

/// [`parse_bytes`] with a chosen chunk size (tests use tiny ones to cross chunk boundaries).
fn parse_with(bytes: &[u8], format: Format, path: &Path, chunk: usize) -> Result<Loaded> {
    checks::refuse_compressed_text(bytes, format, path)?;
    checks::refuse_foreign_banner(bytes, format, path)?;
    let loaded = match format {
        Format::El | Format::Wel => el::parse(bytes, format, path, chunk),
        Format::Snap => snap::parse(bytes, path, chunk),
        Format::Mtx => mtx::parse(bytes, path, chunk),
        Format::Abc => abc::parse(bytes, path, chunk),
        Format::Npz => npz::parse(bytes, path),
    }?;
    checks::refuse_cut_last_line(bytes, &loaded, path)?;
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn format_names_and_extensions() {
        for f in Format::ALL {
            assert_eq!(f.to_string().parse::<Format>().unwrap(), f);
        }
        assert_eq!("MTX".parse::<Format>().unwrap(), Format::Mtx);
        let e = "csv".parse::<Format>().unwrap_err().to_string();
        assert!(
            e.contains("unknown format 'csv'") && e.contains("el, wel"),
            "{e}"
        );
        let p = |s: &str| Format::from_path(Path::new(s));
        assert_eq!(p("a/b.el"), Some(Format::El));
        assert_eq!(p("b.WEL"), Some(Format::Wel));
        assert_eq!(p("b.txt"), Some(Format::Snap));
        assert_eq!(p("b.snap"), Some(Format::Snap));
        assert_eq!(p("b.mtx"), Some(Format::Mtx));
        assert_eq!(p("b.abc"), Some(Format::Abc));
        assert_eq!(p("b.csv"), None);
        assert_eq!(p("b"), None);
        assert_eq!(p("b.el.gz"), None);
        let input = |s: &str| Format::of_input(Path::new(s));
        assert_eq!(input("a/b.el.gz"), Some(Format::El));
        assert_eq!(input("b.MTX.GZ"), Some(Format::Mtx));
        assert_eq!(input("b.txt.gz"), Some(Format::Snap));
        assert_eq!(input("b.wel"), Some(Format::Wel));
        assert_eq!(input("b.gz"), None);
        assert_eq!(input("b.csv.gz"), None);
    }

    #[test]
    fn load_picks_the_format_from_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.el");
        std::fs::write(&f, "0 1\n1 2\n").unwrap();
        let l = load(&f, None).unwrap();
        assert_eq!(l.edges.edges, vec![(0, 1), (1, 2)]);
        assert_eq!(l.format, Format::El);
        let l = load(&f, Some(Format::Snap)).unwrap();
        assert_eq!(l.format, Format::Snap);
        let g = dir.path().join("g.data");
        std::fs::write(&g, "0 1\n").unwrap();
        let e = load(&g, None).unwrap_err().to_string();
        assert!(e.contains("g.data") && e.contains("--format"), "{e}");
        assert_eq!(load(&g, Some(Format::El)).unwrap().edges.len(), 1);
    }

    fn error_of(text: &str, f: Format) -> String {
        parse_bytes(text.as_bytes(), f, Path::new("g"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_matrix_market_file_read_as_another_format_is_refused() {
        let m = "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n";
        for f in [Format::El, Format::Wel, Format::Snap, Format::Abc] {
            let e = error_of(m, f);
            assert!(e.starts_with("g:1: this is a Matrix Market file"), "{e}");
            assert!(e.contains(&format!("being read as {f}")), "{e}");
        }
        assert_eq!(
            parse_bytes(m.as_bytes(), Format::Mtx, Path::new("g"))
                .unwrap()
                .edges
                .len(),
            1
        );
        // Another comment first is no banner.
        assert!(parse_bytes(b"% x\n%%MatrixMarket\n0 1\n", Format::El, Path::new("g")).is_ok());
    }

    #[test]
    fn a_part_makes_the_checks_of_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.wel");
        let banner = "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 1\n";
        std::fs::write(&f, banner).unwrap();
        for part in 0..2 {
            let e = load_part(&f, None, part, 2).unwrap_err().to_string();
            assert!(e.contains("m.wel:1: this is a Matrix Market file"), "{e}");
        }
        std::fs::write(&f, "0 1 2\n1 2 3 ").unwrap();
        let e = load_part(&f, None, 1, 2).unwrap_err().to_string();
        assert!(e.contains("m.wel:2: the last line has no newline"), "{e}");
        assert!(load_part(&f, None, 0, 2).is_ok());
        // A last part of one unweighted line, cut off, after a weighted line in another part
        // (`.abc`; SNAP has no weights: its further columns are skipped).
        let g = dir.path().join("g.abc");
        std::fs::write(&g, "a b 0.5\nc d").unwrap();
        let want = load(&g, None).unwrap_err().to_string();
        assert!(want.contains(":2: the last line has no newline"), "{want}");
        assert_eq!(load_part(&g, None, 1, 2).unwrap_err().to_string(), want);
        assert!(load_part(&g, None, 0, 2).is_ok());
        // Unweighted throughout, the same line is whole.
        std::fs::write(&g, "a b\nc d").unwrap();
        assert!(load(&g, None).is_ok() && load_part(&g, None, 1, 2).is_ok());
        let snap = dir.path().join("g.txt");
        std::fs::write(&snap, "1 2 0.5\n3 4").unwrap();
        assert!(load(&snap, None).is_ok() && load_part(&snap, None, 1, 2).is_ok());
    }

    #[test]
    fn a_cut_off_last_line_is_refused() {
        let cut = "it looks cut off";
        for (text, f, line) in [
            ("0 1\n2 3 ", Format::El, 2),
            ("0 1\n2 3\t", Format::Snap, 2),
            ("a b 2\nc d", Format::Abc, 2),
            ("a\tb\t2\nc\td\t", Format::Abc, 2),
            ("0 1 1.5\n2 3 1 ", Format::Wel, 2),
            (
                "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2 ",
                Format::Mtx,
                3,
            ),
        ] {
            let e = error_of(text, f);
            assert!(
                e.starts_with(&format!("g:{line}: the last line has no newline")),
                "{e}"
            );
            assert!(e.contains(cut), "{e}");
            // With its newline, the same line is complete.
            let whole = format!("{text}\n");
            assert!(
                parse_bytes(whole.as_bytes(), f, Path::new("g")).is_ok(),
                "{whole:?}"
            );
        }
        // Complete last lines without a newline, and trailing comments or blanks, are fine.
        for (text, f) in [
            ("0 1\n2 3", Format::El),
            ("0 1 2\n2 3 1", Format::Snap),
            ("0 1\n2 3", Format::Snap),
            ("a b 2\nc d 1", Format::Abc),
            ("0 1\n# c ", Format::El),
            ("0 1\n  ", Format::El),
            // A file that mixes weighted and unweighted lines.
            ("a b\nc d 2\ne f\ng h", Format::Abc),
            ("0 1\n2 3 2\n4 5\n6 7", Format::Snap),
            ("0 1 2\n\n2 3", Format::Snap),
        ] {
            assert!(
                parse_bytes(text.as_bytes(), f, Path::new("g")).is_ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn weights_beyond_f32_are_refused_for_f32_runs() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.wel");
        std::fs::write(&f, "0 1 1\n# c\n1 2 1e39\n2 3 -1e39\n").unwrap();
        let e = load_as::<f32>(&f, None, &limits::Footprint::MINIMUM)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("g.wel:3: weight 1e39 does not fit the value type f32"),
            "{e}"
        );
        assert!(e.contains("--precision f64"), "{e}");
        assert_eq!(
            load_as::<f64>(&f, None, &limits::Footprint::MINIMUM)
                .unwrap()
                .edges
                .len(),
            3
        );
        assert_eq!(load(&f, None).unwrap().edges.len(), 3);
        let g = dir.path().join("g.mtx");
        std::fs::write(
            &g,
            "%%MatrixMarket matrix coordinate real symmetric\n%\n3 3 2\n2 1 3e38\n3 1 -4e38\n",
        )
        .unwrap();
        let e = load_as::<f32>(&g, None, &limits::Footprint::MINIMUM)
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.mtx:5: weight -4e38"), "{e}");
        let a = dir.path().join("g.abc");
        std::fs::write(&a, "# c\n%x y\tz 1\t2\nq\tr\t1e300\n").unwrap();
        let e = load_as::<f32>(&a, None, &limits::Footprint::MINIMUM)
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.abc:3: weight 1e300"), "{e}");
    }

    /// Parsing with tiny chunks gives the same answer (or the same error) as in one piece.
    fn same_with_any_chunking(
        bytes: &[u8],
        f: Format,
        chunk: usize,
    ) -> std::result::Result<(), TestCaseError> {
        let p = Path::new("fuzz");
        let whole = parse_with(bytes, f, p, 1 << 30).map_err(|e| e.to_string());
        let chunked = parse_with(bytes, f, p, chunk).map_err(|e| e.to_string());
        prop_assert_eq!(&whole, &chunked);
        if let Err(e) = whole {
            prop_assert!(!e.contains("cannot parse this line"), "undiagnosed: {}", e);
        }
        Ok(())
    }

    fn valid_text(f: Format, n: usize, seed: u64) -> Vec<u8> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let mut next = move || rng.next_u64() % 50;
        if f == Format::Npz {
            let edges: Vec<(u32, u32)> = (0..n).map(|_| (next() as u32, next() as u32)).collect();
            let el = EdgeList::square(50, edges, None);
            let m = crate::csr::Csr::<f64>::from_edges(&el, &Default::default()).unwrap();
            return npz::write(Vec::new(), &m).unwrap();
        }
        let mut t = String::new();
        match f {
            Format::Mtx => t.push_str(&format!(
                "%%MatrixMarket matrix coordinate real symmetric\n% c\n50 50 {n}\n"
            )),
            _ => t.push_str("# comment\n"),
        }
        for _ in 0..n {
            let (a, b, w) = (next(), next(), next());
            match f {
                Format::El | Format::Snap => t.push_str(&format!("{a} {b}\n")),
                Format::Wel => t.push_str(&format!("{a}\t{b}\t{w}.5\n")),
                // The file is symmetric: one triangle.
                Format::Mtx => t.push_str(&format!("{} {} {w}\n", a.max(b) + 1, a.min(b) + 1)),
                Format::Abc => t.push_str(&format!("n{a} n{b} {w}\n")),
                Format::Npz => unreachable!("written above"),
            }
        }
        t.into_bytes()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            chunk in 1usize..64,
        ) {
            for f in Format::ALL {
                same_with_any_chunking(&bytes, f, chunk)?;
            }
        }

        #[test]
        fn random_text_never_panics(
            bytes in proptest::collection::vec(
                proptest::sample::select(b"0123456789 \t\r\n\n-#%.eE+abcnif\x00\xff".to_vec()),
                0..300,
            ),
            chunk in 1usize..64,
        ) {
            for f in Format::ALL {
                same_with_any_chunking(&bytes, f, chunk)?;
            }
            let mut mtx = b"%%MatrixMarket matrix coordinate real general\n9 9 3\n".to_vec();
            mtx.extend_from_slice(&bytes);
            same_with_any_chunking(&mtx, Format::Mtx, chunk)?;
        }

        #[test]
        fn mutated_valid_files_never_panic(
            fmt_index in 0usize..Format::ALL.len(),
            n in 0usize..40,
            seed in any::<u64>(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
            chunk in 1usize..64,
        ) {
            let f = Format::ALL[fmt_index];
            let mut bytes = valid_text(f, n, seed);
            for (at, byte, kind) in edits {
                let at = at % (bytes.len() + 1);
                match kind {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => {}
                }
            }
            same_with_any_chunking(&bytes, f, chunk)?;
        }

        #[test]
        fn valid_files_parse(fmt_index in 0usize..5, n in 0usize..40, seed in any::<u64>()) {
            let f = Format::ALL[fmt_index];
            let bytes = valid_text(f, n, seed);
            let l = parse_bytes(&bytes, f, Path::new("v")).unwrap();
            let expected = if f == Format::Mtx {
                n + l.edges.edges[..n].iter().filter(|e| e.0 != e.1).count()
            } else {
                n
            };
            prop_assert_eq!(l.edges.len(), expected);
        }
    }
}
