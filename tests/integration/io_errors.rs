//! What the loaders say about bad input files: every error names the file, and a bad line is
//! named by its number.

use gmcl::io::{load, Format};
use gmcl::Error;
use std::path::{Path, PathBuf};

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// Loads `bytes` saved as `name` and returns the error, checking it names the file.
    fn error(&self, name: &str, bytes: &[u8]) -> Error {
        let p = self.write(name, bytes);
        let e = match load(&p, None) {
            Ok(l) => panic!("{name} loaded: {:?}", l.edges),
            Err(e) => e,
        };
        assert!(
            e.to_string().contains(&p.display().to_string()),
            "error does not name the file: {e}"
        );
        e
    }

    /// The error for a bad line: checks its number and returns the message.
    fn line_error(&self, name: &str, bytes: &[u8], line: u64) -> String {
        match self.error(name, bytes) {
            Error::Parse {
                line: l, message, ..
            } => {
                assert_eq!(l, line, "wrong line for {message}");
                message
            }
            e => panic!("expected a line error, got {e}"),
        }
    }

    /// The error for a whole-file problem.
    fn input_error(&self, name: &str, bytes: &[u8]) -> String {
        match self.error(name, bytes) {
            Error::Input { message, .. } => message,
            e => panic!("expected an input error, got {e}"),
        }
    }
}

fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{text:?} does not contain {part:?}");
}

#[test]
fn missing_file() {
    let f = Files::new();
    let p = f.dir.path().join("nope.el");
    let e = load(&p, None).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    let text = e.to_string();
    assert_contains(&text, &p.display().to_string());
    assert_contains(&text, "cannot open");
}

#[test]
fn a_directory() {
    let f = Files::new();
    let d = f.dir.path().join("graph.el");
    std::fs::create_dir(&d).unwrap();
    let e = load(&d, None).unwrap_err();
    assert!(matches!(e, Error::Input { .. }), "{e:?}");
    assert_contains(&e.to_string(), "is a directory");
    assert_contains(&e.to_string(), &d.display().to_string());
}

#[cfg(unix)]
#[test]
fn unreadable_file() {
    use std::os::unix::fs::PermissionsExt;
    let f = Files::new();
    let p = f.write("secret.el", b"0 1\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root (or a process with CAP_DAC_OVERRIDE) reads it anyway: nothing to check then.
    if std::fs::read(&p).is_ok() {
        eprintln!("unreadable_file: running with the right to read any file; skipped");
        return;
    }
    let e = load(&p, None).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert_contains(&e.to_string(), "cannot open");
    assert_contains(&e.to_string(), &p.display().to_string());
}

#[test]
fn unknown_extension_asks_for_format() {
    let f = Files::new();
    let msg = f.input_error("graph.csv", b"0,1\n");
    assert_contains(&msg, "--format");
    let p = f.write("graph2.csv", b"0 1\n");
    assert_eq!(load(&p, Some(Format::El)).unwrap().edges.len(), 1);
}

#[test]
fn empty_and_comment_only_files_are_empty_graphs() {
    let f = Files::new();
    for (name, text) in [
        ("empty.el", &b""[..]),
        ("comments.el", b"# a comment\n% another\n\n   \n"),
        ("empty.wel", b""),
        ("comments.txt", b"# Nodes: 0 Edges: 0\n"),
        ("empty.abc", b"\n"),
    ] {
        let l = load(&f.write(name, text), None).unwrap();
        assert!(l.edges.is_empty(), "{name}");
        assert_eq!(l.edges.nrows, 0, "{name}");
    }
}

#[test]
fn non_numeric_token() {
    let f = Files::new();
    let msg = f.line_error("g.el", b"0 1\n# c\n2 abc\n", 3);
    assert_contains(&msg, "not an integer: 'abc'");
    let msg = f.line_error("g.txt", b"# snap\n1 2\nx 3\n", 3);
    assert_contains(&msg, "not an integer: 'x'");
}

#[test]
fn negative_id() {
    let f = Files::new();
    let msg = f.line_error("g.el", b"0 1\n-4 2\n", 2);
    assert_contains(&msg, "negative vertex id");
}

#[test]
fn id_above_u32_range() {
    let f = Files::new();
    let msg = f.line_error("g.el", b"1 2\r\n3 4294967296\r\n", 2);
    assert_contains(
        &msg,
        "vertex id 4294967296 is above the largest supported id 4294967294",
    );
    let msg = f.line_error("g2.el", b"99999999999999999999999999 1\n", 1);
    assert_contains(&msg, "above the largest supported id");
}

#[test]
fn missing_column() {
    let f = Files::new();
    let msg = f.line_error("g.el", b"0 1\n\n5\n", 3);
    assert_contains(&msg, "expected 2 columns");
    assert_contains(&msg, "found 1");
    let msg = f.line_error("g.wel", b"0 1 1.5\n0 2\n", 2);
    assert_contains(&msg, "expected 3 columns");
    // `.abc` skips a lone label as mcl does, but not as an unended last line (cut off).
    let msg = f.line_error("g.abc", b"a b\nc", 2);
    assert_contains(&msg, "holds one label: it looks cut off");
}

#[test]
fn extra_columns_in_el() {
    let f = Files::new();
    let msg = f.line_error("g.el", b"0 1\n1 2 0.5\n", 2);
    assert_contains(&msg, "expected 2 columns");
    assert_contains(&msg, "found 3");
    assert_contains(&msg, ".wel");
    // `.abc` skips fields after the weight as mcl does; the weight must still be a number.
    let msg = f.line_error("g.abc", b"a b x 2\n", 1);
    assert_contains(&msg, "weight is not a number: 'x'");
}

#[test]
fn weight_nan_and_inf() {
    let f = Files::new();
    let msg = f.line_error("g.wel", b"0 1 1\n1 2 NaN\n", 2);
    assert_contains(&msg, "weight is not a finite number: 'NaN'");
    let msg = f.line_error("h.wel", b"0 1 inf\n", 1);
    assert_contains(&msg, "weight is not a finite number: 'inf'");
    let msg = f.line_error("i.wel", b"0 1 1e999\n", 1);
    assert_contains(&msg, "finite");
    let msg = f.line_error("g.abc", b"a b -infinity\n", 1);
    assert_contains(&msg, "finite");
}

const HEADER: &[u8] = b"%%MatrixMarket matrix coordinate real general\n";

fn mtx(body: &str) -> Vec<u8> {
    let mut v = HEADER.to_vec();
    v.extend_from_slice(body.as_bytes());
    v
}

#[test]
fn mtx_without_header() {
    let f = Files::new();
    let msg = f.line_error("m.mtx", b"2 2 1\n1 1 1.0\n", 1);
    assert_contains(&msg, "missing Matrix Market header");
    let msg = f.line_error("e.mtx", b"", 1);
    assert_contains(&msg, "missing Matrix Market header");
}

#[test]
fn mtx_malformed_header() {
    let f = Files::new();
    let msg = f.line_error("m.mtx", b"%%MatrixMarket matrix coordinate\n1 1 0\n", 1);
    assert_contains(&msg, "malformed Matrix Market header");
    let msg = f.line_error(
        "n.mtx",
        b"%%MatrixMarket matrix coordinate real sideways\n",
        1,
    );
    assert_contains(&msg, "unknown symmetry 'sideways'");
}

#[test]
fn mtx_array_and_complex() {
    let f = Files::new();
    let msg = f.line_error(
        "a.mtx",
        b"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
        1,
    );
    assert_contains(&msg, "gmcl reads only coordinate format");
    let msg = f.line_error(
        "c.mtx",
        b"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
        1,
    );
    assert_contains(&msg, "complex values are not supported");
    let msg = f.line_error(
        "h.mtx",
        b"%%MatrixMarket matrix coordinate complex hermitian\n",
        1,
    );
    assert_contains(&msg, "complex values are not supported");
}

#[test]
fn mtx_wrong_entry_count() {
    let f = Files::new();
    let msg = f.input_error("few.mtx", &mtx("% c\n3 3 3\n1 1 1\n2 2 2\n"));
    assert_contains(&msg, "too few entries");
    assert_contains(&msg, "declares 3");
    assert_contains(&msg, "only 2");
    assert_contains(&msg, "line 3");
    let msg = f.input_error("many.mtx", &mtx("3 3 1\n1 1 1\n2 2 2\n"));
    assert_contains(&msg, "too many entries");
    assert_contains(&msg, "declares 1");
    assert_contains(&msg, "holds 2");
}

#[test]
fn mtx_index_zero_and_beyond_size() {
    let f = Files::new();
    let msg = f.line_error("z.mtx", &mtx("3 3 2\n1 1 1\n1 0 1\n"), 4);
    assert_contains(&msg, "column index 0");
    assert_contains(&msg, "start at 1");
    let msg = f.line_error("b.mtx", &mtx("3 4 2\n1 1 1\n4 1 1\n"), 4);
    assert_contains(&msg, "row index 4 is above the 3 rows declared on line 2");
    let msg = f.line_error("c.mtx", &mtx("3 4 1\n1 5 1\n"), 3);
    assert_contains(&msg, "column index 5 is above the 4 columns");
}

#[test]
fn truncated_last_line() {
    let f = Files::new();
    // A complete last line without a newline is fine.
    let l = load(&f.write("ok.el", b"0 1\n2 3"), None).unwrap();
    assert_eq!(l.edges.edges, vec![(0, 1), (2, 3)]);
    let l = load(&f.write("ok.wel", b"0 1 0.5\r\n2 3 1e-2"), None).unwrap();
    assert_eq!(l.edges.weights, Some(vec![0.5, 0.01]));
    let l = load(
        &f.write("ok.mtx", &mtx("2 2 2\n1 1 1\n2 2 5")),
        Some(Format::Mtx),
    )
    .unwrap();
    assert_eq!(l.edges.len(), 2);
    // A cut-off one is a missing column.
    let msg = f.line_error("cut.el", b"0 1\n2", 2);
    assert_contains(&msg, "expected 2 columns");
    let msg = f.line_error("cut.wel", b"0 1 2\n2 3", 2);
    assert_contains(&msg, "expected 3 columns");
    let msg = f.line_error("cut.mtx", &mtx("2 2 2\n1 1 1\n2 2"), 4);
    assert_contains(&msg, "expected 3 columns");
}

#[test]
fn binary_garbage() {
    let f = Files::new();
    // Deterministic pseudo-random bytes, NULs and invalid UTF-8 included.
    let mut rng = gmcl::generate::rng::SplitMix64::new(4);
    let mut garbage: Vec<u8> = (0..100_000).map(|_| (rng.next_u64() >> 24) as u8).collect();
    garbage[3] = 0;
    for name in ["bin.el", "bin.wel", "bin.txt", "bin.mtx", "bin.abc"] {
        let e = f.error(name, &garbage);
        let text = e.to_string();
        assert!(text.len() < 1000, "overlong message: {text}");
    }
    // A text file with a NUL in a line.
    let msg = f.line_error("nul.el", b"0 1\n1\x002\n", 2);
    assert_contains(&msg, "binary");
    let msg = f.line_error("bad.abc", b"a b\n\xc3\x28 b\n", 2);
    assert_contains(&msg, "not valid UTF-8");
}

#[test]
fn error_line_numbers_in_a_large_file() {
    // Past many chunks: the line number is still exact.
    let f = Files::new();
    let mut text = String::from("# big\n");
    for i in 0..300_000u32 {
        text.push_str(&format!(
            "{i} {}\n",
            i.wrapping_mul(2_654_435_761) % 1_000_000
        ));
    }
    text.push_str("17 -3\n");
    let msg = f.line_error("big.el", text.as_bytes(), 300_002);
    assert_contains(&msg, "negative vertex id: '-3'");
}

#[test]
fn loads_every_format_from_disk() {
    let f = Files::new();
    let l = load(&f.write("g.el", b"0 1\n1 2\n"), None).unwrap();
    assert_eq!((l.format, l.edges.nrows), (Format::El, 3));
    let l = load(&f.write("g.wel", b"0 1 2\n"), None).unwrap();
    assert_eq!(l.edges.weights, Some(vec![2.0]));
    let l = load(&f.write("g.snap", b"# x\n10 20\n"), None).unwrap();
    assert_eq!(l.labels.label(1), "20");
    let l = load(
        &f.write(
            "g.mtx",
            b"%%MatrixMarket matrix coordinate pattern symmetric\n2 2 1\n2 1\n",
        ),
        None,
    )
    .unwrap();
    assert!(l.symmetric_storage);
    assert_eq!(l.edges.edges, vec![(1, 0), (0, 1)]);
    let l = load(&f.write("g.abc", b"x y 3\n"), None).unwrap();
    assert_eq!(l.labels.label(1), "y");
    assert!(Path::new(&f.dir.path().join("g.abc")).exists());
}

#[cfg(target_os = "linux")]
#[test]
fn a_file_truncated_or_rewritten_while_it_is_read_is_an_error_not_a_crash() {
    // Before: SIGBUS (exit 135, no message) when the file shrank under gmcl's memory map.
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.el");
    let mut text = Vec::new();
    for i in 0..3_000_000u32 {
        writeln!(text, "{} {}", i % 1_000_003, i % 999_983).unwrap();
    }
    let mut changed = 0;
    for attempt in 0..60u64 {
        std::fs::write(&path, &text).unwrap();
        let child = crate::util::cmd()
            .args(["info", path.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5 + (attempt * 7) % 120));
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(0).unwrap();
        if attempt % 2 == 1 {
            // `cp other.el g.el`: truncated, then a shorter file written in its place.
            (&f).write_all(b"0 1\n1 2\n").unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), None, "killed by a signal: {err}");
        assert!(matches!(out.status.code(), Some(0 | 2)), "{err}");
        if out.status.code() == Some(2) {
            assert!(
                err.contains("g.el: the file changed while it was read"),
                "{err}"
            );
            changed += 1;
            if changed >= 4 {
                break;
            }
        }
    }
    assert!(changed > 0, "the file was never changed during a read");
}
