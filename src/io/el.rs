//! Edge lists: `.el` (`u v` per line) and `.wel` (`u v w`). The same parser, in a mode that
//! reads the first two columns and skips the rest of the line, reads SNAP text (see `snap.rs`).
//!
//! Vertex ids are non-negative decimal integers up to 4294967294; the graph has `max id + 1`
//! vertices. Weights are finite numbers in any form Rust's `f64` parser reads.

use super::reader::{
    self, is_space, parse_float, put, scan_uint, skip_spaces, token_end, ChunkResult, Parsed,
    Stats, Stop, MAX_ID,
};
use super::Labels;
use super::{Format, Loaded};
use crate::edges::EdgeList;
use crate::error::Result;
use std::mem::MaybeUninit;
use std::path::Path;

/// Exactly two columns.
pub(crate) const TWO: u8 = 0;
/// Exactly three columns.
pub(crate) const THREE: u8 = 1;
/// Two columns, then anything to the line's end (SNAP's signs, timestamps), which is skipped.
pub(crate) const TWO_AND_ANY: u8 = 2;

/// Reads an `.el` or `.wel` file's bytes.
pub(crate) fn parse(bytes: &[u8], format: Format, path: &Path, chunk: usize) -> Result<Loaded> {
    let weighted = format == Format::Wel;
    let mode = if weighted { THREE } else { TWO };
    let parsed = parse_edges(bytes, mode, chunk)
        .map_err(|s| reader::stop_error(path, bytes, s, |l| diagnose(l, mode)))?;
    Ok(edge_list(parsed, format))
}

/// Reads part `part` of `parts` of an `.el` or `.wel` file's lines ([`reader::part_range`]): the
/// edges on those lines, and a vertex count of the part's largest id + 1. A bad line is named by
/// its number in the whole file.
pub(crate) fn parse_part(
    bytes: &[u8],
    format: Format,
    path: &Path,
    part: usize,
    parts: usize,
) -> Result<Loaded> {
    let weighted = format == Format::Wel;
    let mode = if weighted { THREE } else { TWO };
    let start = reader::skip_leading_comments(bytes, 0);
    let range = reader::part_range(bytes, start, part, parts);
    let mine = &bytes[..range.end];
    let chunk = reader::default_chunk(range.len());
    let parsed = if weighted {
        reader::parse_chunks(mine, range.start, chunk, true, parse_chunk::<THREE>)
    } else {
        reader::parse_chunks(mine, range.start, chunk, false, parse_chunk::<TWO>)
    }
    .map_err(|s| reader::stop_error(path, bytes, s, |l| diagnose(l, mode)))?;
    Ok(edge_list(parsed, format))
}

/// What a parse of `.el`/`.wel` lines loaded: vertex ids are the file's, from 0 to the largest.
fn edge_list(parsed: Parsed<(u32, u32)>, format: Format) -> Loaded {
    let weighted = format == Format::Wel;
    let vertices = parsed.stats.vertices();
    Loaded {
        edges: EdgeList::square(vertices, parsed.items, weighted.then_some(parsed.weights)),
        labels: Labels::Identity,
        format,
        symmetric_storage: false,
    }
}

/// Parses the edges of the whole input in `mode`.
pub(crate) fn parse_edges(
    bytes: &[u8],
    mode: u8,
    chunk: usize,
) -> std::result::Result<Parsed<(u32, u32)>, Stop> {
    parse_edges_from(bytes, reader::skip_leading_comments(bytes, 0), mode, chunk)
}

/// Parses the edges of `bytes[start..]` in `mode` (`start` at a line start; offsets in stops
/// stay those of `bytes`, so lines are named in the whole file).
pub(crate) fn parse_edges_from(
    bytes: &[u8],
    start: usize,
    mode: u8,
    chunk: usize,
) -> std::result::Result<Parsed<(u32, u32)>, Stop> {
    match mode {
        TWO => reader::parse_chunks(bytes, start, chunk, false, parse_chunk::<TWO>),
        THREE => reader::parse_chunks(bytes, start, chunk, true, parse_chunk::<THREE>),
        _ => reader::parse_chunks(bytes, start, chunk, false, parse_chunk::<TWO_AND_ANY>),
    }
}

/// The fast path: reads the lines of one chunk. See [`reader::parse_chunks`] for the contract.
pub(crate) fn parse_chunk<const MODE: u8>(
    b: &[u8],
    base: usize,
    out: &mut [MaybeUninit<(u32, u32)>],
    wout: &mut [MaybeUninit<f64>],
) -> ChunkResult {
    let weighted = MODE == THREE;
    let n = b.len();
    let mut i = 0;
    let mut k = 0;
    let mut max = 0u64;
    let mut saw_weight = false;
    while i < n {
        // The common line, `u v` and a newline, in one step.
        if MODE != THREE {
            if let Some((u, v, j)) = reader::scan_pair(b, i) {
                if b.get(j) == Some(&b'\n') {
                    if !put(out, k, (u as u32, v as u32)) || (weighted && !put(wout, k, 1.0)) {
                        return Err(Stop::Bad(base + i));
                    }
                    k += 1;
                    max = max.max(u.max(v));
                    i = j + 1;
                    continue;
                }
            }
        }
        // Any other line, byte by byte.
        let start = i;
        let mut c = b[i];
        if !c.is_ascii_digit() {
            // Leading separators, blank lines, comments, or a bad line.
            while is_space(c) {
                i += 1;
                if i == n {
                    break;
                }
                c = b[i];
            }
            if i == n {
                break;
            }
            if c == b'\n' {
                i += 1;
                continue;
            }
            if c == b'#' || c == b'%' {
                i = reader::next_line(b, i);
                continue;
            }
            if !c.is_ascii_digit() {
                return Err(Stop::Bad(base + start));
            }
        }
        let (u, v, j) = match reader::scan_pair(b, i) {
            Some(p) => p,
            None => {
                let (u, j) = scan_uint(b, i);
                if u > MAX_ID || j == n || !is_space(b[j]) {
                    return Err(Stop::Bad(base + start));
                }
                i = skip_spaces(b, j + 1);
                let (v, j) = scan_uint(b, i);
                if j == i || v > MAX_ID {
                    return Err(Stop::Bad(base + start));
                }
                (u, v, j)
            }
        };
        i = skip_spaces(b, j);
        let mut w = 1.0;
        if MODE == TWO_AND_ANY && i < n && b[i] != b'\n' {
            if i == j {
                return Err(Stop::Bad(base + start));
            }
            // The line's further columns, skipped; `i` then sits on its newline (or the end).
            i = reader::line_end(b, i);
        } else if i < n && b[i] != b'\n' {
            if MODE == TWO || i == j {
                return Err(Stop::Bad(base + start));
            }
            let e = token_end(b, i);
            w = match parse_float(&b[i..e]) {
                Some(x) => x,
                None => return Err(Stop::Bad(base + start)),
            };
            saw_weight = true;
            i = skip_spaces(b, e);
            if i < n && b[i] != b'\n' {
                return Err(Stop::Bad(base + start));
            }
        } else if MODE == THREE {
            return Err(Stop::Bad(base + start));
        }
        i += 1;
        if !put(out, k, (u as u32, v as u32)) || (weighted && !put(wout, k, w)) {
            return Err(Stop::Bad(base + start));
        }
        k += 1;
        max = max.max(u.max(v));
    }
    Ok(Stats {
        count: k,
        max_id: max,
        weighted: saw_weight,
        off_diagonal: 0,
    })
}

/// The slow path: reads one line token by token and says what is wrong with it. Returns
/// `Ok(None)` for a blank or comment line, the edge and its weight (if the line has one)
/// otherwise.
pub(crate) fn parse_line(
    line: &[u8],
    mode: u8,
) -> std::result::Result<Option<(u32, u32, Option<f64>)>, String> {
    if reader::is_blank_or_comment(line) {
        return Ok(None);
    }
    let t = reader::tokens(line);
    let ok = match mode {
        TWO => t.len() == 2,
        THREE => t.len() == 3,
        _ => t.len() >= 2,
    };
    if !ok {
        let found = t.len();
        return Err(match mode {
            TWO if found == 3 => "expected 2 columns (source target), found 3; \
                                  a weighted edge list should be named .wel (or read with \
                                  --format wel)"
                .to_string(),
            THREE => format!("expected 3 columns (source target weight), found {found}"),
            _ => format!("expected 2 columns (source target), found {found}"),
        });
    }
    let u = reader::vertex_token(t[0])?;
    let v = reader::vertex_token(t[1])?;
    let w = match t.get(2) {
        Some(tok) if mode != TWO_AND_ANY => Some(reader::weight_token(tok)?),
        _ => None,
    };
    Ok(Some((u, v, w)))
}

/// The message for a bad line, as [`reader::stop_error`] wants it.
pub(crate) fn diagnose(line: &[u8], mode: u8) -> Option<String> {
    parse_line(line, mode).err()
}

#[cfg(test)]
mod tests {
    use super::super::{parse_bytes, parse_with, Format};
    use super::*;
    use proptest::prelude::*;

    fn el(text: &str) -> Loaded {
        parse_bytes(text.as_bytes(), Format::El, Path::new("t.el")).unwrap()
    }

    fn err(text: &[u8], f: Format) -> String {
        parse_bytes(text, f, Path::new("t.el"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn reads_plain_edges() {
        let l = el("0 1\n1 2\n5 0\n");
        assert_eq!(l.edges.edges, vec![(0, 1), (1, 2), (5, 0)]);
        assert_eq!(l.edges.nrows, 6);
        assert_eq!(l.edges.ncols, 6);
        assert_eq!(l.edges.weights, None);
        assert_eq!(l.labels, Labels::Identity);
        assert_eq!(l.format, Format::El);
        assert!(!l.symmetric_storage);
    }

    #[test]
    fn comments_blank_lines_crlf_tabs_and_no_final_newline() {
        let text = "# header\n% also a comment\n\n  \t\n 3\t\t4 \r\n\r\n  # indented comment\n\
                    0007 0\n   \n1 1";
        let l = el(text);
        assert_eq!(l.edges.edges, vec![(3, 4), (7, 0), (1, 1)]);
        assert_eq!(l.edges.nrows, 8);
    }

    #[test]
    fn empty_and_comment_only_inputs_have_no_vertices() {
        for text in ["", "\n\n", "# only\n# comments", "   "] {
            let l = el(text);
            assert!(l.edges.is_empty());
            assert_eq!(l.edges.nrows, 0);
        }
    }

    #[test]
    fn largest_id_is_accepted() {
        let l = el("4294967294 0\n");
        assert_eq!(l.edges.nrows, u32::MAX as usize);
        assert!(err(b"4294967295 0\n", Format::El)
            .contains("vertex id 4294967295 is above the largest supported id 4294967294"));
    }

    #[test]
    fn reads_weighted_edges() {
        let l = parse_bytes(
            b"0 1 2.5\n1\t2\t-3e2\r\n# c\n2 0 7",
            Format::Wel,
            Path::new("t.wel"),
        )
        .unwrap();
        assert_eq!(l.edges.edges, vec![(0, 1), (1, 2), (2, 0)]);
        assert_eq!(l.edges.weights, Some(vec![2.5, -300.0, 7.0]));
        assert_eq!(l.format, Format::Wel);
        let empty = parse_bytes(b"", Format::Wel, Path::new("t.wel")).unwrap();
        assert_eq!(empty.edges.weights, Some(vec![]));
    }

    #[test]
    fn bad_lines_name_the_line() {
        let e = err(b"0 1\n1 2 3\n", Format::El);
        assert!(e.starts_with("t.el:2: expected 2 columns"), "{e}");
        assert!(e.contains(".wel"), "{e}");
        assert!(err(b"0 1\n\n7\n", Format::El).starts_with("t.el:3: expected 2 columns"));
        assert!(err(b"0 -1\n", Format::El).contains("negative vertex id: '-1'"));
        assert!(err(b"0 x\n", Format::El).contains("not an integer: 'x'"));
        assert!(err(b"0 1.0\n", Format::El).contains("not an integer: '1.0'"));
        assert!(err(b"0 1\n", Format::Wel).contains("t.el:1: expected 3 columns"));
        assert!(err(b"0 1 nan\n", Format::Wel).contains("'nan'"));
        assert!(err(b"0 1 -inf\n", Format::Wel).contains("finite"));
        assert!(err(b"0 1 x\n", Format::Wel).contains("weight is not a number: 'x'"));
        let bin = err(b"0 1\n\x00\xff\xfe 1\n", Format::El);
        assert!(
            bin.starts_with("t.el:2:") && bin.contains("binary"),
            "{bin}"
        );
    }

    #[test]
    fn first_error_in_file_order_whatever_the_chunking() {
        let mut text = String::new();
        for i in 0..1000 {
            text.push_str(&format!("{i} {}\n", i + 1));
        }
        text.push_str("1 x\n");
        for i in 0..1000 {
            text.push_str(&format!("{i} -{i}\n"));
        }
        for chunk in [1, 7, 64, 1 << 20] {
            let e = parse_with(text.as_bytes(), Format::El, Path::new("t.el"), chunk)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("t.el:1001: not an integer: 'x'"), "{e}");
        }
    }

    fn write_edges(edges: &[(u32, u32)], weights: Option<&[f64]>, seps: &[u8]) -> Vec<u8> {
        let mut out = b"# written by a test\n".to_vec();
        for (k, &(u, v)) in edges.iter().enumerate() {
            let sep = seps[k % seps.len()];
            let sep = [b" ".as_slice(), b"\t", b"  ", b" \t "][sep as usize % 4];
            out.extend_from_slice(u.to_string().as_bytes());
            out.extend_from_slice(sep);
            out.extend_from_slice(v.to_string().as_bytes());
            if let Some(w) = weights {
                out.extend_from_slice(sep);
                out.extend_from_slice(ryu::Buffer::new().format(w[k]).as_bytes());
            }
            out.extend_from_slice(if k % 3 == 0 { b"\r\n" } else { b"\n" });
            if k % 17 == 5 {
                out.extend_from_slice(b"# a comment in the middle\n\n");
            }
        }
        out
    }

    proptest! {
        #[test]
        fn el_round_trips(
            edges in proptest::collection::vec((0u32..5000, 0u32..5000), 0..300),
            seps in proptest::collection::vec(0u8..4, 1..8),
            chunk in 1usize..200,
        ) {
            let text = write_edges(&edges, None, &seps);
            let l = parse_with(&text, Format::El, Path::new("p.el"), chunk).unwrap();
            let n = edges.iter().map(|&(u, v)| u.max(v) as usize + 1).max().unwrap_or(0);
            prop_assert_eq!(&l.edges.edges, &edges);
            prop_assert_eq!(l.edges.nrows, n);
            prop_assert_eq!(l.edges.weights, None);
        }

        #[test]
        fn wel_round_trips(
            edges in proptest::collection::vec((0u32..u32::MAX, 0u32..100), 0..200),
            seed in proptest::collection::vec(-1e300f64..1e300, 1..50),
            seps in proptest::collection::vec(0u8..4, 1..8),
            chunk in 1usize..200,
        ) {
            let weights: Vec<f64> = (0..edges.len()).map(|k| seed[k % seed.len()]).collect();
            let text = write_edges(&edges, Some(&weights), &seps);
            let l = parse_with(&text, Format::Wel, Path::new("p.wel"), chunk).unwrap();
            prop_assert_eq!(&l.edges.edges, &edges);
            prop_assert_eq!(l.edges.weights, Some(weights));
        }

        /// The fast chunk parser and the slow line parser agree on every line.
        #[test]
        fn fast_and_slow_paths_agree(
            line in proptest::collection::vec(
                proptest::sample::select(b"0123456789 \t\r-#%.eE+nai fx\x00\xff".to_vec()),
                0..24,
            ),
            mode in prop_oneof![Just(TWO), Just(THREE), Just(TWO_AND_ANY)],
        ) {
            let slow = parse_line(&line, mode);
            let mut out = vec![MaybeUninit::uninit(); 2];
            let mut wout = vec![MaybeUninit::uninit(); 2];
            let fast = match mode {
                TWO => parse_chunk::<TWO>(&line, 0, &mut out, &mut wout),
                THREE => parse_chunk::<THREE>(&line, 0, &mut out, &mut wout),
                _ => parse_chunk::<TWO_AND_ANY>(&line, 0, &mut out, &mut wout),
            };
            match (&slow, fast) {
                (Ok(None), Ok(s)) => prop_assert_eq!(s.count, 0),
                (Ok(Some((u, v, w))), Ok(s)) => {
                    prop_assert_eq!(s.count, 1);
                    // SAFETY: the parser wrote one item.
                    let (fu, fv) = unsafe { out[0].assume_init() };
                    prop_assert_eq!((fu, fv), (*u, *v));
                    if mode != TWO && mode != TWO_AND_ANY {
                        let fw = unsafe { wout[0].assume_init() };
                        prop_assert_eq!(fw, w.unwrap_or(1.0));
                    }
                }
                (Err(_), Err(Stop::Bad(0))) => {}
                (s, f) => prop_assert!(false, "slow {:?} fast {:?} on {:?}", s, f, line),
            }
        }
    }
}
