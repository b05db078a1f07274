//! Writing generated edge lists: `.el`, `.wel`, Matrix Market and SciPy's `.npz`, chosen by
//! extension.

use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::output::{write_formatted, AtomicOutput};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::path::Path;

/// The output formats, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// `u v` per line, 0-based.
    El,
    /// `u v w` per line, 0-based.
    Wel,
    /// Matrix Market coordinate, 1-based; `pattern` without weights, `real` with.
    Mtx,
    /// SciPy's sparse archive: the adjacency matrix as CSR.
    Npz,
}

impl Format {
    fn of(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("el") => Ok(Format::El),
            Some("wel") => Ok(Format::Wel),
            Some("mtx") => Ok(Format::Mtx),
            Some("npz") => Ok(Format::Npz),
            _ => Err(Error::Invalid(format!(
                "{}: unsupported output format; the extension must be .el (\"u v\" lines), \
                 .wel (\"u v w\" lines), .mtx (Matrix Market) or .npz (SciPy)",
                path.display()
            ))),
        }
    }
}

/// How the lines of a written edge list are to be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Symmetry {
    /// Each line is one directed edge: Matrix Market `general`.
    #[default]
    General,
    /// Each line is one undirected edge: Matrix Market `symmetric`, written as its lower
    /// triangle (row ≥ column), so readers such as SciPy mirror it. Edge lists (`.el`, `.wel`)
    /// have no such header: their lines are written as the edges are.
    Symmetric,
}

/// Checks, before any work, that a list with (or without) weights can be written to `path`:
/// the extension names a format (`.el`, `.wel`, `.mtx`, `.npz`), and weights go to a format that holds
/// them (`.el` does not: it is refused rather than dropping them).
pub fn check_output(path: &Path, weighted: bool) -> Result<()> {
    if weighted && Format::of(path)? == Format::El {
        return Err(Error::Invalid(format!(
            "{}: an .el file holds no weights; write the weighted graph as .wel (\"u v w\" \
             lines) or .mtx, or leave out the weights",
            path.display()
        )));
    }
    Ok(())
}

/// Writes `el` as its adjacency matrix in SciPy's `.npz` (CSR, `float64` values: the weights, or
/// 1): the matrix SciPy reads from the `.mtx` of the same list, so an undirected edge `(u, v)`
/// is the two entries `(u, v)` and `(v, u)` (a loop one), and repeated entries are summed.
fn stage_npz(path: &Path, el: &EdgeList, symmetry: Symmetry) -> Result<AtomicOutput> {
    use crate::csr::{BuildOptions, Csr, Duplicates};
    let opts = BuildOptions {
        symmetrize: false,
        drop_self_loops: false,
        duplicates: Duplicates::Sum,
    };
    let m = if symmetry == Symmetry::Symmetric {
        let mirrored: Vec<usize> = (0..el.edges.len())
            .filter(|&k| el.edges[k].0 != el.edges[k].1)
            .collect();
        let mut both = el.clone();
        both.edges
            .extend(mirrored.iter().map(|&k| (el.edges[k].1, el.edges[k].0)));
        if let Some(w) = &mut both.weights {
            let extra: Vec<f64> = mirrored.iter().map(|&k| w[k]).collect();
            w.extend(extra);
        }
        Csr::<f64>::from_edges(&both, &opts)?
    } else {
        Csr::<f64>::from_edges(el, &opts)?
    };
    crate::output::stage_npz(path, &m)
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// 10^0 to 10^19.
const POW10: [u64; 20] = {
    let mut p = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// Writes `x` in decimal at the start of `out` (at least 20 bytes); returns its length.
#[inline(always)]
fn put_dec(out: &mut [MaybeUninit<u8>], mut x: u64) -> usize {
    // floor(log2(x)) * log10(2) is floor(log10(x)) or one less.
    let guess = (((63 - (x | 1).leading_zeros()) * 1233) >> 12) as usize;
    let n = guess + 1 + (x >= POW10[guess + 1]) as usize;
    let out = &mut out[..n];
    let mut i = n;
    while x >= 100 {
        let r = (x % 100) as usize * 2;
        x /= 100;
        i -= 2;
        out[i].write(PAIRS[r]);
        out[i + 1].write(PAIRS[r + 1]);
    }
    if x >= 10 {
        let r = x as usize * 2;
        out[0].write(PAIRS[r]);
        out[1].write(PAIRS[r + 1]);
    } else {
        out[0].write(b'0' + x as u8);
    }
    n
}

/// Appends `u v` (each plus `base`) and then `tail`, the end of the line (at most 8 bytes).
#[inline(always)]
fn push_pair(buf: &mut Vec<u8>, u: u32, v: u32, base: u64, tail: &[u8]) {
    buf.reserve(64);
    let len = buf.len();
    let spare = &mut buf.spare_capacity_mut()[..64];
    let mut n = put_dec(spare, u as u64 + base);
    spare[n].write(b' ');
    n += 1;
    n += put_dec(&mut spare[n..], v as u64 + base);
    for (d, &t) in spare[n..n + tail.len()].iter_mut().zip(tail) {
        d.write(t);
    }
    n += tail.len();
    // SAFETY: the first `n` spare bytes were just written.
    unsafe { buf.set_len(len + n) };
}

/// Appends a weight: the shortest text that reads back as the same `f64` (a weight that is
/// also an `f32` must not be written as the `f32`'s shortest text: `1234567.875` would come back
/// as `1234567.9`).
#[inline]
fn push_weight(buf: &mut Vec<u8>, w: f64) {
    buf.extend_from_slice(ryu::Buffer::new().format(w).as_bytes());
}

/// Edges per chunk when weights travel with them.
const CHUNK: usize = 1 << 22;

/// Writes `el` to `path` in the format its extension names, one directed edge per line
/// ([`write_edges_as`] with [`Symmetry::General`]).
pub fn write_edges(path: &Path, el: &EdgeList, progress: &dyn Fn(u64)) -> Result<()> {
    write_edges_as(path, el, Symmetry::General, progress)
}

/// Writes `el` to `path` in the format its extension names: `.el` (`u v` lines; a weighted list
/// is refused, see [`check_output`]), `.wel` (`u v w` lines, weight 1 when the list has none) or
/// `.mtx` (Matrix Market `coordinate pattern`, or `real` when weighted, 1-based, size line
/// `n n M`; `general`, or for [`Symmetry::Symmetric`] `symmetric` with each edge in the lower
/// triangle). The file appears whole or not at all. `progress` receives the number of edges
/// written so far.
pub fn write_edges_as(
    path: &Path,
    el: &EdgeList,
    symmetry: Symmetry,
    progress: &dyn Fn(u64),
) -> Result<()> {
    stage_edges_as(path, el, symmetry, progress)?.commit()
}

/// [`write_edges_as`] but for the rename: the output comes back whole and synced, and appears
/// under `path` when the caller commits it.
pub fn stage_edges_as(
    path: &Path,
    el: &EdgeList,
    symmetry: Symmetry,
    progress: &dyn Fn(u64),
) -> Result<AtomicOutput> {
    check_output(path, el.weights.is_some())?;
    let format = Format::of(path)?;
    if let Some(w) = &el.weights {
        if w.len() != el.edges.len() {
            return Err(Error::Invalid(format!(
                "{}: {} edges but {} weights",
                path.display(),
                el.edges.len(),
                w.len()
            )));
        }
    }
    if format == Format::Npz {
        return stage_npz(path, el, symmetry);
    }
    let lower = format == Format::Mtx && symmetry == Symmetry::Symmetric;
    if lower && el.nrows != el.ncols {
        return Err(Error::Invalid(format!(
            "{}: a {} x {} matrix cannot be written as symmetric",
            path.display(),
            el.nrows,
            el.ncols
        )));
    }
    let mut out = AtomicOutput::create(path)?;
    let one_based = format == Format::Mtx;
    let weighted = match format {
        Format::El => false,
        Format::Wel => true,
        Format::Mtx | Format::Npz => el.weights.is_some(),
    };
    if format == Format::Mtx {
        let header = format!(
            "%%MatrixMarket matrix coordinate {} {}\n% generated by gmcl {}\n{} {} {}\n",
            if weighted { "real" } else { "pattern" },
            if lower { "symmetric" } else { "general" },
            env!("CARGO_PKG_VERSION"),
            el.nrows,
            el.ncols,
            el.edges.len()
        );
        out.write_all(header.as_bytes())?;
    }
    let base = one_based as u64;
    // The lower triangle: row ≥ column.
    let order = |u: u32, v: u32| if lower { (u.max(v), u.min(v)) } else { (u, v) };
    let mut done = 0u64;
    let mut tick = |k: usize| {
        done += k as u64;
        progress(done);
    };
    progress(0);
    match (&el.weights, weighted) {
        (_, false) => write_formatted(
            &mut out,
            &el.edges,
            |&(u, v), buf| {
                let (u, v) = order(u, v);
                push_pair(buf, u, v, base, b"\n")
            },
            &mut tick,
        )?,
        (None, true) => write_formatted(
            &mut out,
            &el.edges,
            |&(u, v), buf| {
                let (u, v) = order(u, v);
                push_pair(buf, u, v, base, b" 1\n")
            },
            &mut tick,
        )?,
        (Some(ws), true) => {
            let mut items: Vec<(u32, u32, f64)> = Vec::new();
            for (edges, ws) in el.edges.chunks(CHUNK).zip(ws.chunks(CHUNK)) {
                items.clear();
                items.par_extend(
                    edges
                        .par_iter()
                        .zip(ws.par_iter())
                        .map(|(&(u, v), &w)| (u, v, w)),
                );
                write_formatted(
                    &mut out,
                    &items,
                    |&(u, v, w), buf| {
                        let (u, v) = order(u, v);
                        push_pair(buf, u, v, base, b" ");
                        push_weight(buf, w);
                        buf.push(b'\n');
                    },
                    &mut tick,
                )?;
            }
        }
    }
    out.synced()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_lines() {
        let mut buf = Vec::new();
        for (u, v) in [
            (0u32, 9u32),
            (10, 99),
            (100, 12345),
            (u32::MAX, 1_000_000_000),
        ] {
            push_pair(&mut buf, u, v, 0, b"\n");
            push_pair(&mut buf, u, v, 1, b" 1\n");
        }
        let text = String::from_utf8(buf).unwrap();
        let mut expect = String::new();
        for (u, v) in [
            (0u64, 9u64),
            (10, 99),
            (100, 12345),
            (u32::MAX as u64, 1_000_000_000),
        ] {
            expect += &format!("{u} {v}\n{} {} 1\n", u + 1, v + 1);
        }
        assert_eq!(text, expect);
        let mut buf = Vec::new();
        let xs: Vec<u32> = (0..2000u32)
            .chain((1..10).map(|d| 10u32.pow(d) - 1))
            .chain((1..10).map(|d| 10u32.pow(d)))
            .chain([u32::MAX - 1, u32::MAX])
            .collect();
        for &x in &xs {
            push_pair(&mut buf, x, x, 1, b"\n");
        }
        let text = String::from_utf8(buf).unwrap();
        for (line, &x) in text.lines().zip(&xs) {
            let y = x as u64 + 1;
            assert_eq!(line, format!("{y} {y}"));
        }
    }

    #[test]
    fn weights_read_back_as_the_same_f64() {
        let mut ws = vec![
            1234567.875,
            9007199254740992.0,
            1.0000001192092896,
            3.4028234663852886e38,
            0.5 + 1.0 / (1u64 << 23) as f64,
            -0.0,
            f64::MIN_POSITIVE,
            f64::MAX,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = f64::from_bits(x);
            if w.is_finite() {
                ws.push(w);
                ws.push(w as f32 as f64);
            }
        }
        for w in ws {
            let mut buf = Vec::new();
            push_weight(&mut buf, w);
            let text = std::str::from_utf8(&buf).unwrap();
            let back: f64 = text.parse().unwrap();
            assert_eq!(back.to_bits(), w.to_bits(), "{w:e}: {text}");
        }
    }
}
