//! mcl's native clustering format: the clustering as a matrix in mcl's interchange format, one
//! column per cluster listing its nodes' indices, which `clm dist`, `clm info` and mcl's other
//! tools read. Written as mcl 22-282 writes it (its header, the lead width of the column
//! indices, lines wrapped where mcl wraps them), so that files compare byte for byte.

use crate::error::{Error, Result};
use std::path::Path;

/// Appends the clustering `clusters` of nodes `0..nodes` (each cluster's nodes in increasing
/// order) in mcl's native format: a `nodes x clusters` matrix, clusters in the order given.
pub fn write_native(nodes: usize, clusters: &[Vec<u32>], out: &mut Vec<u8>) {
    use std::io::Write;
    // mcl: log10(largest row index + 1) + 2, truncated.
    let lead = decimal_digits(nodes as u64) + 1;
    let _ = write!(
        out,
        "(mclheader\nmcltype matrix\ndimensions {nodes}x{}\n)\n(mclmatrix\nbegin\n",
        clusters.len()
    );
    let mut ib = itoa::Buffer::new();
    for (c, members) in clusters.iter().enumerate() {
        let start = out.len();
        out.extend_from_slice(ib.format(c).as_bytes());
        let mut width = out.len() - start;
        while width + 1 < lead {
            out.push(b' ');
            width += 1;
        }
        for (k, &v) in members.iter().enumerate() {
            out.push(b' ');
            let text = ib.format(v);
            out.extend_from_slice(text.as_bytes());
            width += 1 + text.len();
            // mcl wraps after an entry that takes the line past 70 - lead characters, and
            // indents the next line by lead + 1 spaces.
            if width + lead > 70 && k + 1 < members.len() {
                out.push(b'\n');
                out.extend(std::iter::repeat(b' ').take(lead + 1));
                width = lead + 1;
            }
        }
        out.extend_from_slice(b" $\n");
    }
    out.extend_from_slice(b")\n");
}

/// The number of decimal digits of `n` (1 for 0).
fn decimal_digits(n: u64) -> usize {
    let mut d = 1;
    let mut x = n;
    while x >= 10 {
        x /= 10;
        d += 1;
    }
    d
}

/// Whether `text` is in mcl's native format: its first line that is not blank or a `#`
/// comment starts with `(mclheader`.
pub fn is_native(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("(mclheader"))
}

/// Reads a clustering in mcl's native format (as mcl and `clm` write it, values after `:`
/// ignored): the number of nodes (the matrix's rows) and each cluster's nodes, in the file's
/// order, empty clusters left out. Only canonical domains (`0..rows`, `0..columns`) are read.
/// `path` names the file in errors.
pub fn read_native(text: &str, path: &Path) -> Result<(usize, Vec<Vec<u32>>)> {
    let err = |line: usize, message: String| Error::Parse {
        path: path.to_path_buf(),
        line: line as u64,
        message,
    };
    // Tokens with their 1-based line numbers; `#` starts a comment to the end of the line.
    let mut tokens = text.lines().enumerate().flat_map(|(k, l)| {
        let l = l.split('#').next().unwrap_or("");
        l.split_whitespace().map(move |t| (k + 1, t))
    });
    let last_line = text.lines().count().max(1);
    let mut next = |what: &str| {
        tokens
            .next()
            .ok_or_else(|| err(last_line, format!("the file ends before {what}")))
    };
    let (line, t) = next("(mclheader")?;
    if t != "(mclheader" {
        return Err(err(line, format!("expected (mclheader, found '{t}'")));
    }
    let mut dims: Option<(usize, usize)> = None;
    loop {
        let (line, t) = next("the header's end ')'")?;
        match t {
            ")" => break,
            "dimensions" => {
                let (line, d) = next("the dimensions")?;
                let parsed = d
                    .split_once('x')
                    .and_then(|(r, c)| Some((r.parse().ok()?, c.parse().ok()?)));
                dims =
                    Some(parsed.ok_or_else(|| {
                        err(line, format!("dimensions '{d}' are not ROWSxCOLUMNS"))
                    })?);
            }
            "mcltype" => {
                let (line, v) = next("the matrix type")?;
                if v != "matrix" {
                    return Err(err(
                        line,
                        format!("mcltype '{v}': a clustering is a matrix"),
                    ));
                }
            }
            _ => {}
        }
        let _ = line;
    }
    let (rows, cols) = dims.ok_or_else(|| err(1, "the header has no dimensions line".into()))?;
    let (line, t) = next("(mclmatrix")?;
    if t != "(mclmatrix" {
        return Err(err(
            line,
            format!(
                "expected (mclmatrix, found '{t}' (domains other than 0..N-1 are not read: \
                 write the clustering with canonical domains)"
            ),
        ));
    }
    let (line, t) = next("begin")?;
    if t != "begin" {
        return Err(err(line, format!("expected begin, found '{t}'")));
    }
    let index = |line: usize, t: &str, bound: usize, what: &str| -> Result<u32> {
        let (i, value) = t.split_once(':').unwrap_or((t, "0"));
        if value.parse::<f64>().is_err() {
            return Err(err(line, format!("the value in '{t}' is not a number")));
        }
        match i.parse::<u64>() {
            Ok(i) if (i as usize) < bound && i <= u32::MAX as u64 => Ok(i as u32),
            Ok(i) => Err(err(
                line,
                format!("{what} {i} lies outside the {rows}x{cols} matrix"),
            )),
            Err(_) => Err(err(line, format!("expected a {what}, found '{t}'"))),
        }
    };
    let mut clusters = Vec::new();
    let mut seen = vec![false; cols];
    loop {
        let (line, t) = next("the matrix's end ')'")?;
        if t == ")" {
            break;
        }
        let c = index(line, t, cols, "cluster index")? as usize;
        if std::mem::replace(&mut seen[c], true) {
            return Err(err(
                line,
                format!("cluster {c} is listed twice (mcl would merge the two): list each once"),
            ));
        }
        let mut members = Vec::new();
        loop {
            let (line, t) = next("the end of a cluster '$'")?;
            if t == "$" {
                break;
            }
            members.push(index(line, t, rows, "node index")?);
        }
        if !members.is_empty() {
            clusters.push(members);
        }
    }
    if let Some((line, t)) = tokens.next() {
        return Err(err(
            line,
            format!("'{t}' after the matrix's end: a clustering file holds one matrix"),
        ));
    }
    Ok((rows, clusters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_mcl_writes_it() {
        // mcl 22-282 on the karate club at -I 1.2: one cluster of all 34 nodes, wrapped.
        let all: Vec<u32> = (0..34).collect();
        let mut out = Vec::new();
        write_native(34, std::slice::from_ref(&all), &mut out);
        let want = "(mclheader\nmcltype matrix\ndimensions 34x1\n)\n(mclmatrix\nbegin\n\
                    0  0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25\n     \
                    26 27 28 29 30 31 32 33 $\n)\n";
        assert_eq!(String::from_utf8(out.clone()).unwrap(), want);
        let text = String::from_utf8(out).unwrap();
        assert!(is_native(&format!("# cline: mcl\n{text}")));
        assert_eq!(read_native(&text, Path::new("k")).unwrap(), (34, vec![all]));
        assert_eq!(decimal_digits(0), 1);
        assert_eq!(decimal_digits(1900), 4);
    }

    #[test]
    fn read_values_comments_and_errors() {
        let text = "# made by hand\n(mclheader\nmcltype matrix\ndimensions 4x2\n)\n(mclmatrix\n\
                    begin\n0 1:1 3 $ # two\n1 0 2:0.5 $\n)\n";
        assert_eq!(
            read_native(text, Path::new("c")).unwrap(),
            (4, vec![vec![1, 3], vec![0, 2]])
        );
        assert!(!is_native("a\tb\n"));
        // A cluster listed twice (mcl merges them; clm dist counts one), a value that is not a
        // number, and a second matrix are errors naming their line.
        for (bad, why) in [
            (
                text.replace("1 0 2:0.5 $", "0 0 2 $"),
                "c:9: cluster 0 is listed twice",
            ),
            (
                text.replace("2:0.5", "2:abc"),
                "c:9: the value in '2:abc' is not a number",
            ),
            (
                format!("{text}(mclmatrix\n"),
                "c:11: '(mclmatrix' after the matrix's end",
            ),
        ] {
            let e = read_native(&bad, Path::new("c")).unwrap_err().to_string();
            assert!(e.starts_with(why), "{e}");
        }
        let bad = text.replace("2:0.5", "9");
        let e = read_native(&bad, Path::new("c")).unwrap_err().to_string();
        assert!(e.starts_with("c:9:") && e.contains("node index 9"), "{e}");
        let cut = &text[..text.len() - 8];
        assert!(read_native(cut, Path::new("c")).is_err());
    }
}
