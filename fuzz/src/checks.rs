//! What must hold for any input: parsing never panics, gives the same answer (or the same error)
//! whatever the chunking, and what it gives is consistent; building a CSR matrix from any edges
//! never panics and gives what a plain reference build gives.

use gmcl::io::{parse_bytes, parse_bytes_in_chunks, Format};
use gmcl::{BuildOptions, Csr, Duplicates, EdgeList, Labels};
use std::collections::BTreeMap;
use std::path::Path;

/// Parses `data` in `format`: the first byte picks a chunk size (1 to 256 bytes), the rest is
/// the file. Panics (a crash for the fuzzer) when a property fails.
pub fn parse(data: &[u8], format: Format) {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let chunk = first as usize + 1;
    let path = Path::new("fuzz.in");
    let whole = parse_bytes(bytes, format, path).map_err(|e| e.to_string());
    let chunked = parse_bytes_in_chunks(bytes, format, path, chunk).map_err(|e| e.to_string());
    assert_eq!(
        whole, chunked,
        "the answer depends on the chunking ({chunk} bytes)"
    );
    match whole {
        Ok(l) => {
            let el = &l.edges;
            for &(u, v) in &el.edges {
                assert!(
                    (u as usize) < el.nrows && (v as usize) < el.ncols,
                    "edge ({u}, {v}) outside {} x {}",
                    el.nrows,
                    el.ncols
                );
            }
            if let Some(w) = &el.weights {
                assert_eq!(w.len(), el.edges.len(), "one weight per edge");
                assert!(w.iter().all(|x| x.is_finite()), "weights are finite");
            }
            assert!(el.nrows <= u32::MAX as usize && el.ncols <= u32::MAX as usize);
            match &l.labels {
                Labels::Identity | Labels::OneBased => {}
                Labels::Ids(ids) => assert_eq!(ids.len(), el.nrows),
                Labels::Names(n) => assert_eq!(n.len(), el.nrows),
            }
        }
        Err(e) => {
            assert!(e.starts_with("fuzz.in"), "the error names the file: {e}");
            // The reader's fallback when a format's diagnosis finds nothing wrong with the line
            // its fast path stopped on (the two disagree). The text may quote the input, which
            // may hold the same words: only the message itself counts.
            let rest = e.strip_prefix("fuzz.in:").unwrap_or(&e);
            let message = match rest.split_once(':') {
                Some((line, m)) if line.bytes().all(|c| c.is_ascii_digit()) => m,
                _ => rest,
            }
            .trim_start();
            assert!(
                !message.starts_with("cannot parse this line"),
                "undiagnosed: {e}"
            );
        }
    }
}

/// The CSR builder's input, as the fuzzer makes it.
#[derive(Debug, arbitrary::Arbitrary)]
pub struct BuildInput {
    rows: u32,
    cols: u32,
    edges: Vec<(u32, u32)>,
    weights: Option<Vec<f64>>,
    /// Keep ids as given (some may lie outside the shape) instead of wrapping them into it.
    raw_ids: bool,
    symmetrize: bool,
    drop_self_loops: bool,
    duplicates: u8,
    /// Entries per bucket of the builder, less one (tiny buckets: many on small inputs).
    bucket: u8,
}

/// Builds a CSR matrix from `input` and compares it with a reference build (a sorted map).
pub fn build(input: BuildInput) {
    // Shapes up to 4096 (each run touches every row a few times; large shapes are slow to
    // fuzz and add no branches).
    let limit = 1 << 12;
    let nrows = (input.rows >> 1) as usize % limit;
    let ncols = if input.symmetrize && input.rows & 1 == 0 {
        nrows
    } else {
        input.cols as usize % limit
    };
    let edges: Vec<(u32, u32)> = input
        .edges
        .iter()
        .map(|&(u, v)| {
            if input.raw_ids || nrows == 0 || ncols == 0 {
                (u, v)
            } else {
                (u % nrows as u32, v % ncols as u32)
            }
        })
        .collect();
    let weights = input.weights.map(|w| {
        (0..edges.len())
            .map(|k| {
                let x = w.get(k % w.len().max(1)).copied().unwrap_or(1.0);
                // Finite sums: no cell can overflow to infinities of both signs (NaN).
                if x.abs() <= 1e300 {
                    x
                } else {
                    1.0
                }
            })
            .collect::<Vec<f64>>()
    });
    let duplicates = match input.duplicates % 3 {
        0 => Duplicates::Sum,
        1 => Duplicates::Max,
        _ => Duplicates::Keep,
    };
    let opts = BuildOptions {
        symmetrize: input.symmetrize,
        drop_self_loops: input.drop_self_loops,
        duplicates,
    };
    let el = EdgeList {
        nrows,
        ncols,
        edges,
        weights,
    };
    let built = Csr::<f64>::from_edges_in_buckets(&el, &opts, input.bucket as usize + 1);
    let outside = el
        .edges
        .iter()
        .any(|&(u, v)| u as usize >= nrows || v as usize >= ncols);
    if outside || (opts.symmetrize && nrows != ncols) {
        let e = built.expect_err("a bad shape or an entry outside it is refused");
        assert!(!e.to_string().is_empty());
        return;
    }
    let c = built.expect("a valid edge list builds");
    // Buckets change nothing.
    assert_eq!(Csr::<f64>::from_edges(&el, &opts).expect("builds"), c);
    // Every invariant: checked by the checking constructor, or (when repeated columns are kept,
    // which it refuses) here.
    assert_eq!((c.nrows(), c.ncols()), (nrows, ncols));
    if duplicates == Duplicates::Keep {
        let ptr = c.row_ptr();
        assert_eq!((ptr[0], ptr[nrows]), (0, c.nnz() as u64));
        for i in 0..nrows {
            assert!(ptr[i] <= ptr[i + 1]);
            let (cols, _) = c.row(i);
            assert!(cols.windows(2).all(|w| w[0] <= w[1]), "row {i} sorted");
            assert!(
                cols.iter().all(|&j| (j as usize) < ncols),
                "row {i} in range"
            );
        }
    } else {
        let (r, k, ptr, idx, val) = c.clone().into_parts();
        let again = Csr::from_parts(r, k, ptr, idx, val).expect("the built matrix is valid");
        assert_eq!(again, c);
    }

    // The reference: every entry (and its mirror), values of a cell sorted, then combined.
    let mut cells: BTreeMap<(u32, u32), Vec<f64>> = BTreeMap::new();
    for (k, &(u, v)) in el.edges.iter().enumerate() {
        if opts.drop_self_loops && u == v {
            continue;
        }
        let w = el.weights.as_ref().map_or(1.0, |w| w[k]);
        cells.entry((u, v)).or_default().push(w);
        if opts.symmetrize {
            cells.entry((v, u)).or_default().push(w);
        }
    }
    let mut want: Vec<(u32, u32, f64)> = Vec::new();
    for ((u, v), mut ws) in cells {
        ws.sort_by(f64::total_cmp);
        match duplicates {
            Duplicates::Keep => want.extend(ws.iter().map(|&w| (u, v, w))),
            Duplicates::Max => want.push((u, v, ws.iter().copied().fold(f64::MIN, f64::max))),
            Duplicates::Sum => want.push((u, v, ws[1..].iter().fold(ws[0], |a, &b| a + b))),
        }
    }
    let mut got: Vec<(u32, u32, f64)> = Vec::with_capacity(c.nnz());
    for i in 0..c.nrows() {
        let (cols, vals) = c.row(i);
        got.extend(cols.iter().zip(vals).map(|(&j, &w)| (i as u32, j, w)));
    }
    if duplicates == Duplicates::Keep {
        // Repeated cells may come in any order of values.
        let key = |a: &(u32, u32, f64), b: &(u32, u32, f64)| {
            (a.0, a.1).cmp(&(b.0, b.1)).then(a.2.total_cmp(&b.2))
        };
        got.sort_by(key);
        want.sort_by(key);
    }
    assert_eq!(got.len(), want.len(), "entry count");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.0, g.1), (w.0, w.1), "entry position");
        assert!(
            g.2 == w.2 || (g.2 - w.2).abs() <= 1e-12 * w.2.abs().max(1.0),
            "value at ({}, {}): {} against {}",
            g.0,
            g.1,
            g.2,
            w.2
        );
    }
}
