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
mod el;
mod labels;
pub mod limits;
mod mtx;
mod reader;
mod snap;

use crate::edges::EdgeList;
use crate::error::{Error, Result};
pub use labels::Labels;
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
}

impl Format {
    /// Every format, in the order they are listed to users.
    pub const ALL: [Format; 5] = [
        Format::El,
        Format::Wel,
        Format::Snap,
        Format::Mtx,
        Format::Abc,
    ];

    /// The format's name as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::El => "el",
            Format::Wel => "wel",
            Format::Snap => "snap",
            Format::Mtx => "mtx",
            Format::Abc => "abc",
        }
    }

    /// The format a file name's extension stands for (case-insensitive): `.el`, `.wel`, `.mtx`,
    /// `.abc`, and `.txt` or `.snap` for SNAP text. `None` for any other extension.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "el" => Some(Format::El),
            "wel" => Some(Format::Wel),
            "txt" | "snap" => Some(Format::Snap),
            "mtx" => Some(Format::Mtx),
            "abc" => Some(Format::Abc),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;

    /// Reads a format name: `el`, `wel`, `snap`, `mtx` or `abc` (case-insensitive).
    fn from_str(s: &str) -> Result<Format> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown format '{s}': expected one of el, wel, snap, mtx, abc"
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

/// Loads a graph file. Without `format`, the file name's extension decides
/// ([`Format::from_path`]); an unknown extension is an error asking for `--format`. A graph
/// whose vertices need more memory than there is fails here, before anything per vertex is
/// allocated ([`limits`]).
pub fn load(path: &Path, format: Option<Format>) -> Result<Loaded> {
    let source = reader::Source::open(path)?;
    let format = match format.or_else(|| Format::from_path(path)) {
        Some(f) => f,
        None => {
            let ext = match path.extension() {
                Some(e) => format!("extension '.{}'", e.to_string_lossy()),
                None => "name (it has no extension)".into(),
            };
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: format!(
                    "cannot tell the format from the file {ext}; pass --format with one of \
                     el, wel, snap, mtx, abc"
                ),
            });
        }
    };
    let bytes = source.bytes();
    let loaded = parse_with(bytes, format, path, reader::default_chunk(bytes.len()))?;
    limits::check(&loaded, bytes, path)?;
    crate::interrupt::check()?;
    Ok(loaded)
}

/// Loads part `part` of `parts` of a graph file, as one process of a distributed run does: the
/// file is mapped, and only the lines of that part (an equal share of the bytes, cut at line
/// boundaries) are read. The edge list's shape is the part's own (largest id + 1): the caller
/// agrees on the whole graph's with the other parts. Edge lists (`.el`, `.wel`) only: the other
/// formats' ids depend on lines in other parts (SNAP and `.abc` number vertices in order of first
/// appearance, `.mtx` has a header), and are refused naming the format.
pub fn load_part(path: &Path, format: Option<Format>, part: usize, parts: usize) -> Result<Loaded> {
    let format = format.or_else(|| Format::from_path(path));
    match format {
        Some(f @ (Format::El | Format::Wel)) => {
            let source = reader::Source::open(path)?;
            let bytes = source.bytes();
            let loaded = el::parse_part(bytes, f, path, part, parts)?;
            limits::check(&loaded, bytes, path)?;
            crate::interrupt::check()?;
            Ok(loaded)
        }
        Some(f) => Err(Error::Input {
            path: path.to_path_buf(),
            message: format!(
                "the {f} format cannot be read across ranks yet: give an edge list (.el, \
                 .wel), or run without mpirun"
            ),
        }),
        None => load(path, None),
    }
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
    match format {
        Format::El | Format::Wel => el::parse(bytes, format, path, chunk),
        Format::Snap => snap::parse(bytes, path, chunk),
        Format::Mtx => mtx::parse(bytes, path, chunk),
        Format::Abc => abc::parse(bytes, path, chunk),
    }
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
                Format::Mtx => t.push_str(&format!("{} {} {w}\n", a + 1, b + 1)),
                Format::Abc => t.push_str(&format!("n{a} n{b} {w}\n")),
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
            fmt_index in 0usize..5,
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
