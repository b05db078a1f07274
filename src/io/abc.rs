//! mcl's label format (`.abc`), read as mcl reads it (`docs/abc-format.md`): a line with a TAB
//! is `label<TAB>label[<TAB>weight]`, its labels any UTF-8 text but TABs and NUL bytes (spaces,
//! `#` and `%` included); a line without a TAB is split on spaces. A line whose first non-blank
//! byte is `#` is a comment; `%` starts a label. A missing weight is 1. Vertices are numbered in
//! the order their labels first appear in the file, whatever the number of threads.

use super::intern::{self, Shortfall};
use super::reader::{self, put, ChunkResult, Stats, Stop};
use super::Labels;
use super::{Format, Loaded};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::path::Path;

/// Reads an `.abc` file's bytes.
pub(crate) fn parse(bytes: &[u8], path: &Path, chunk: usize) -> Result<Loaded> {
    parse_from(bytes, 0, path, chunk)
}

/// Reads part `part` of `parts` of an `.abc` file's lines ([`reader::part_range`]), as
/// [`parse`] reads a whole file: the part's labels numbered in order of first appearance in the
/// part (a distributed run turns them into the whole file's numbering). A bad line is named by
/// its number in the whole file.
pub(crate) fn parse_part(bytes: &[u8], path: &Path, part: usize, parts: usize) -> Result<Loaded> {
    let range = reader::part_range(bytes, 0, part, parts);
    let chunk = reader::default_chunk(range.len());
    parse_from(&bytes[..range.end], range.start, path, chunk)
}

/// Reads the lines of `bytes[start..]` (`start` at a line start).
fn parse_from(bytes: &[u8], start: usize, path: &Path, chunk: usize) -> Result<Loaded> {
    // No skipping of leading comment lines by the reader's rules: `%` starts a label here.
    let parsed = reader::parse_chunks(bytes, start, chunk, true, parse_chunk)
        .map_err(|s| reader::stop_error(path, bytes, s, diagnose))?;

    // Number the labels in file order: each new label gets the next id.
    let pairs = parsed.items;
    crate::interrupt::check()?;
    let numbered = intern::number_pairs(&pairs, reader::MAX_ID).map_err(|e| Error::Input {
        path: path.to_path_buf(),
        message: match e {
            Shortfall::TooMany => format!("more than {} distinct labels", reader::MAX_ID + 1),
            Shortfall::NoMemory => format!(
                "not enough memory to number the labels of {} edges",
                pairs.len()
            ),
        },
    })?;
    crate::interrupt::check()?;
    // The chunk parser checked that every label is UTF-8, so nothing is replaced here.
    let names: Vec<String> = numbered
        .names
        .par_iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let edges = numbered.pairs;
    drop(pairs);
    let weights = parsed.stats.weighted.then_some(parsed.weights);
    Ok(Loaded {
        edges: EdgeList::square(names.len(), edges, weights),
        labels: Labels::Names(names),
        format: Format::Abc,
        symmetric_storage: false,
    })
}

/// Reads one chunk's lines into label pairs and weights; a line that cannot be read stops the
/// chunk (its message comes from [`parse_line`] again).
fn parse_chunk<'a>(
    b: &'a [u8],
    base: usize,
    out: &mut [MaybeUninit<(&'a [u8], &'a [u8])>],
    wout: &mut [MaybeUninit<f64>],
) -> ChunkResult {
    let mut k = 0;
    let mut saw_weight = false;
    let mut start = 0;
    while start < b.len() {
        let end = reader::line_end(b, start);
        let bad = Stop::Bad(base + start);
        match parse_line(&b[start..end]) {
            Ok(None) => {}
            Ok(Some((a, second, w))) => {
                saw_weight |= w.is_some();
                if !put(out, k, (a, second)) || !put(wout, k, w.unwrap_or(1.0)) {
                    return Err(bad);
                }
                k += 1;
            }
            Err(_) => return Err(bad),
        }
        start = end + 1;
    }
    Ok(Stats {
        count: k,
        max_id: 0,
        weighted: saw_weight,
        off_diagonal: 0,
    })
}

/// A label line: two labels and the weight, if given.
type LabelLine<'a> = (&'a [u8], &'a [u8], Option<f64>);

/// Reads one line (without its newline) as mcl does; `None` for a blank or comment line.
/// C's `isspace` in the "C" locale, which mcl skips after a TAB.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// A line's fields as mcl splits it: up to three, and how many there are; `None` for a blank
/// or comment line, and for one mcl skips whole (its first label empty).
fn split_fields<'a>(line: &'a [u8]) -> Option<(usize, [&'a [u8]; 3])> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.iter().find(|&&c| c != b' ' && c != b'\t') {
        None | Some(b'#') => return None,
        Some(_) => {}
    }
    let tabbed = line.contains(&b'\t');
    let mut fields = [&line[..0]; 3];
    let mut count = 0;
    let mut take = |f: &'a [u8]| {
        if count < 3 {
            fields[count] = f;
        }
        count += 1;
    };
    if tabbed {
        if line[0] == b'\t' {
            return None;
        }
        // As in mcl: after a TAB, blanks (TABs too) are skipped, so runs of TABs separate as
        // one and a field of blanks is none; the first label and every label's end keep theirs.
        let mut split = line.split(|&c| c == b'\t');
        let first = split.next().into_iter();
        let rest = split.map(|f| {
            let blanks = f.iter().take_while(|&&c| is_c_space(c)).count();
            &f[blanks..]
        });
        first
            .chain(rest)
            .filter(|f| !f.is_empty())
            .for_each(&mut take);
    } else {
        line.split(|&c| c == b' ')
            .filter(|f| !f.is_empty())
            .for_each(&mut take);
    }
    Some((count, fields))
}

fn parse_line(line: &[u8]) -> std::result::Result<Option<LabelLine<'_>>, String> {
    // As in mcl: a lone label makes no edge (and no node), and fields after the weight are
    // skipped.
    let Some((count, fields)) = split_fields(line).filter(|&(count, _)| count >= 2) else {
        return Ok(None);
    };
    for label in &fields[..2] {
        if std::str::from_utf8(label).is_err() {
            return Err(format!(
                "label is not valid UTF-8: {}",
                reader::quote(label)
            ));
        }
        if label.contains(&0) {
            return Err(format!(
                "label contains a NUL byte: {}",
                reader::quote(label)
            ));
        }
    }
    let w = match count {
        2 => None,
        _ => Some(reader::weight_token(fields[2].trim_ascii())?),
    };
    Ok(Some((fields[0], fields[1], w)))
}

fn diagnose(line: &[u8]) -> Option<String> {
    parse_line(line).err()
}

/// True when `line` (without its newline) is read as an edge.
pub(super) fn is_entry_line(line: &[u8]) -> bool {
    matches!(parse_line(line), Ok(Some(_)))
}

/// True when `line` is an edge without a weight column.
pub(super) fn entry_lacks_weight(line: &[u8]) -> bool {
    matches!(parse_line(line), Ok(Some((_, _, None))))
}

/// True when `line` holds one label and nothing else (mcl makes no edge of it): as a file's last
/// line without a newline, an edge cut off after its first label.
pub(super) fn is_lone_label(line: &[u8]) -> bool {
    split_fields(line).is_some_and(|(count, _)| count == 1)
}

#[cfg(test)]
mod tests {
    use super::super::{parse_bytes, parse_with};
    use super::*;
    use proptest::prelude::*;

    fn abc(text: &[u8]) -> Result<Loaded> {
        parse_bytes(text, Format::Abc, Path::new("l.abc"))
    }

    #[test]
    fn labels_in_order_of_first_appearance() {
        let l =
            abc("# comment\ncat dog 2.5\r\ndog\tmouse\n\n  cat  cat 1e-3 \nélan cat\n".as_bytes())
                .unwrap();
        assert_eq!(
            l.labels,
            Labels::Names(vec![
                "cat".into(),
                "dog".into(),
                "mouse".into(),
                "élan".into()
            ])
        );
        assert_eq!(l.edges.edges, vec![(0, 1), (1, 2), (0, 0), (3, 0)]);
        assert_eq!(l.edges.weights, Some(vec![2.5, 1.0, 1e-3, 1.0]));
        assert_eq!(l.edges.nrows, 4);
        assert_eq!(l.format, Format::Abc);
        assert_eq!(l.labels.label(3), "élan");
    }

    #[test]
    fn unweighted_labels_have_no_weights() {
        let l = abc(b"a b\nb c\n").unwrap();
        assert_eq!(l.edges.weights, None);
        assert_eq!(l.edges.edges, vec![(0, 1), (1, 2)]);
        let l = abc(b"").unwrap();
        assert!(l.edges.is_empty());
        assert_eq!(l.labels, Labels::Names(vec![]));
    }

    #[test]
    fn bad_lines() {
        let e = |t: &[u8]| abc(t).unwrap_err().to_string();
        assert!(e(b"a b inf\n").contains("weight is not a finite number: 'inf'"));
        assert!(e(b"a b x\n").contains("weight is not a number: 'x'"));
        let bad = e(b"a b\n\xff\xfe b\n");
        assert!(
            bad.starts_with("l.abc:2: label is not valid UTF-8: '\\xff\\xfe'"),
            "{bad}"
        );
        assert!(e(b"a \x00\n").contains("NUL"));
    }

    #[test]
    fn tab_separated_lines_are_read_as_mcl_reads_them() {
        let l = abc(b"a\tnode 1\n% c\ta\t2\n  # comment\ta\n a\tb \r\nx\t\ty\t\n#\tz\n").unwrap();
        let names = |l: &Loaded| match &l.labels {
            Labels::Names(n) => n.clone(),
            other => panic!("{other:?}"),
        };
        // Spaces, `%` and `#` inside TAB-separated labels are part of them; runs of TABs and a
        // trailing TAB separate as one; `#` after blanks starts a comment.
        assert_eq!(names(&l), ["a", "node 1", "% c", " a", "b ", "x", "y"]);
        assert_eq!(l.edges.edges, vec![(0, 1), (2, 0), (3, 4), (5, 6)]);
        assert_eq!(l.edges.weights, Some(vec![1.0, 2.0, 1.0, 1.0]));
        // After a TAB blanks are skipped (TABs, spaces, \v, \f): a field of blanks is none, a
        // label's leading blanks go; the first label keeps its own, and every label its end.
        let l = abc(b"a\t b\t2\na\t \t2\n \tc\t3\nd \t\x0b\x0c e f \t 4\n").unwrap();
        assert_eq!(names(&l), ["a", "b", "2", " ", "c", "d ", "e f "]);
        assert_eq!(l.edges.edges, vec![(0, 1), (0, 2), (3, 4), (5, 6)]);
        assert_eq!(l.edges.weights, Some(vec![2.0, 1.0, 3.0, 4.0]));
        // Without a TAB a line is split on spaces, as before.
        let l = abc(b"a node 1\n").unwrap();
        assert_eq!(names(&l), ["a", "node"]);
        assert_eq!(l.edges.weights, Some(vec![1.0]));
    }

    #[test]
    fn lines_mcl_makes_no_edge_of_and_fields_after_the_weight_are_skipped() {
        // mcl 22-282: a lone label is no edge and no node, a line beginning with a TAB is
        // skipped, and fields after the third are ignored (the weight is the third).
        let l = abc(b"a b 2 7\nc\nd e\n\tq\tr\nf\tg\t3\t9\t9\nonly\t\nx\t \t\n").unwrap();
        let Labels::Names(names) = &l.labels else {
            panic!("{:?}", l.labels)
        };
        assert_eq!(names, &["a", "b", "d", "e", "f", "g"]);
        assert_eq!(l.edges.edges, vec![(0, 1), (2, 3), (4, 5)]);
        assert_eq!(l.edges.weights, Some(vec![2.0, 1.0, 3.0]));
        // A weight that is not a number stays an error (mcl would read a prefix, or 1).
        let e = |t: &[u8]| abc(t).unwrap_err().to_string();
        assert!(e(b"a\tb\tx\n").contains("weight is not a number: 'x'"));
        assert!(e(b"a b 2.5x 1\n").contains("weight is not a number: '2.5x'"));
    }

    proptest! {
        #[test]
        fn interning_does_not_depend_on_chunking(
            pairs in proptest::collection::vec((0u8..30, 0u8..30), 0..200),
            chunk in 1usize..300,
        ) {
            let mut text = String::new();
            for (a, b) in &pairs {
                text.push_str(&format!("v{a} w{b}\n"));
            }
            let x = parse_with(text.as_bytes(), Format::Abc, Path::new("l.abc"), chunk).unwrap();
            let y = parse_bytes(text.as_bytes(), Format::Abc, Path::new("l.abc")).unwrap();
            prop_assert_eq!(&x.edges, &y.edges);
            prop_assert_eq!(&x.labels, &y.labels);
            // Labels map back to the text.
            for (k, (a, b)) in pairs.iter().enumerate() {
                let (u, v) = x.edges.edges[k];
                prop_assert_eq!(x.labels.label(u), format!("v{a}"));
                prop_assert_eq!(x.labels.label(v), format!("w{b}"));
            }
        }

        #[test]
        fn fast_and_slow_paths_agree(
            line in proptest::collection::vec(
                proptest::sample::select(b"ab1. \t\r#%-ni\x00\xff\xc3\xa9".to_vec()),
                0..16,
            ),
        ) {
            let slow = parse_line(&line);
            let mut out = vec![MaybeUninit::uninit(); 2];
            let mut wout = vec![MaybeUninit::uninit(); 2];
            let fast = parse_chunk(&line, 0, &mut out, &mut wout);
            match (&slow, fast) {
                (Ok(None), Ok(s)) => prop_assert_eq!(s.count, 0),
                (Ok(Some((a, b, w))), Ok(s)) => {
                    prop_assert_eq!(s.count, 1);
                    // SAFETY: the parser wrote one pair and one weight.
                    let (fa, fb) = unsafe { out[0].assume_init() };
                    prop_assert_eq!((fa, fb), (*a, *b));
                    prop_assert_eq!(unsafe { wout[0].assume_init() }, w.unwrap_or(1.0));
                }
                (Err(_), Err(Stop::Bad(0))) => {}
                (s, f) => prop_assert!(false, "slow {:?} fast {:?} on {:?}", s, f, line),
            }
        }
    }
}
