//! Whole-file checks that keep a parse from giving a quietly wrong answer: a Matrix Market file
//! read as another format, a last line cut off mid-write, and values the run's value type cannot
//! hold. Each names the file and the line.
//!
//! They run after a parse that succeeded (or, for the banner, before it), on the file's bytes,
//! so the chunk parsers' fast path is unchanged.

use super::{abc, reader, Format, Loaded};
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::path::Path;

fn at_line(path: &Path, line: u64, message: String) -> Error {
    Error::in_file(path, Some(line), message)
}

/// Refuses a file that starts with a Matrix Market banner when it is read as another format:
/// its size line would be read as an edge.
pub(super) fn refuse_foreign_banner(bytes: &[u8], format: Format, path: &Path) -> Result<()> {
    const BANNER: &[u8] = b"%%MatrixMarket";
    let first = reader::line_at(bytes, 0).trim_ascii_start();
    if format == Format::Mtx
        || first.len() < BANNER.len()
        || !first[..BANNER.len()].eq_ignore_ascii_case(BANNER)
    {
        return Ok(());
    }
    Err(at_line(
        path,
        1,
        format!(
            "this is a Matrix Market file (it starts with %%MatrixMarket) being read as {format}, \
             which would read its size line as an edge; read it as Matrix Market (--format mtx, \
             or a .mtx name)"
        ),
    ))
}

/// Refuses gzip-compressed data read as text (a compressed file whose name does not end in
/// `.gz`, or a compressed standard input): its bytes would only make confusing line errors.
pub(super) fn refuse_compressed_text(bytes: &[u8], format: Format, path: &Path) -> Result<()> {
    if !format.is_text() || !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(());
    }
    Err(Error::in_file(
        path,
        None,
        format!(
            "is gzip-compressed data being read as {format} text; name the file with a .gz \
             ending (g.{format}.gz) to have it decompressed, or decompress it first (zcat)"
        ),
    ))
}

/// Refuses a last line that has no newline and looks cut off: it ends in a blank, or (in `.abc`,
/// where the weight is optional per line) it lacks the weight that the entry line before it
/// has. A complete last line without a newline is fine.
pub(super) fn refuse_cut_last_line(bytes: &[u8], loaded: &Loaded, path: &Path) -> Result<()> {
    if !loaded.format.is_text() {
        return Ok(());
    }
    let Some(&last) = bytes.last() else {
        return Ok(());
    };
    if last == b'\n' {
        return Ok(());
    }
    let start = bytes.iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    let line = &bytes[start..];
    let abc = loaded.format == Format::Abc;
    if abc && abc::is_lone_label(line) {
        // mcl skips a lone label; as the last line, unended, it is an edge cut off.
        return Err(at_line(
            path,
            reader::line_number(bytes, start),
            "the last line has no newline and holds one label: it looks cut off (a file still \
             being written, or truncated); complete it or remove it"
                .into(),
        ));
    }
    if !is_entry_line(line, loaded.format) {
        return Ok(());
    }
    let cut = |why: &str| {
        Err(at_line(
            path,
            reader::line_number(bytes, start),
            format!(
                "the last line has no newline and {why}: it looks cut off (a file still being \
                 written, or truncated); complete it or remove it"
            ),
        ))
    };
    if last == b' ' || last == b'\t' {
        return cut("ends in a blank");
    }
    // In `.abc` the weight is optional per line: a missing one is a cut only where the entry
    // line before has one.
    if abc && loaded.edges.weights.is_some() && abc::entry_lacks_weight(line) {
        let before = previous_entry_line(bytes, start, loaded.format);
        if before.is_some_and(|b| !abc::entry_lacks_weight(b)) {
            return cut("has no weight, unlike the line before it");
        }
    }
    Ok(())
}

/// The last entry line that ends before `start` (a line start).
fn previous_entry_line(bytes: &[u8], start: usize, format: Format) -> Option<&[u8]> {
    let mut end = start.checked_sub(1)?;
    loop {
        let begin = bytes[..end]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1);
        let line = &bytes[begin..end];
        if is_entry_line(line, format) {
            return Some(line);
        }
        end = begin.checked_sub(1)?;
    }
}

/// The 1-based line of the `k`-th entry (0-based, in file order) of a file that parsed as
/// `format`. Only on error paths: a plain scan.
pub(super) fn line_of_entry(bytes: &[u8], format: Format, k: usize) -> Option<u64> {
    if !format.is_text() {
        return None;
    }
    let mut at = 0;
    // A Matrix Market file's size line is the first line that is not a comment.
    let mut to_skip = usize::from(format == Format::Mtx);
    let mut seen = 0;
    while at < bytes.len() {
        let line = reader::line_at(bytes, at);
        if is_entry_line(line, format) {
            if to_skip > 0 {
                to_skip -= 1;
            } else if seen == k {
                return Some(reader::line_number(bytes, at));
            } else {
                seen += 1;
            }
        }
        at = reader::next_line(bytes, at);
    }
    None
}

/// True for a line the format reads as an entry (or, in Matrix Market, as the size line).
fn is_entry_line(line: &[u8], format: Format) -> bool {
    match format {
        Format::Abc => abc::is_entry_line(line),
        _ => !reader::is_blank_or_comment(line),
    }
}

/// Refuses a weight that is finite as read but does not survive the conversion `to_value`
/// (a weight above `f32`'s range becomes infinite in `f32`). `type_name` names the type.
pub(super) fn refuse_unrepresentable_weights(
    bytes: &[u8],
    loaded: &Loaded,
    path: &Path,
    fits: impl Fn(f64) -> bool + Sync,
    type_name: &str,
) -> Result<()> {
    let Some(weights) = &loaded.edges.weights else {
        return Ok(());
    };
    refuse_weights_beyond(weights, path, fits, type_name, |k| {
        line_of_entry(bytes, loaded.format, k)
    })
}

/// [`refuse_unrepresentable_weights`] over the weights of the entries in file order; `line_of`
/// gives the line of entry `k` (`None` for a binary file).
pub(super) fn refuse_weights_beyond(
    weights: &[f64],
    path: &Path,
    fits: impl Fn(f64) -> bool + Sync,
    type_name: &str,
    line_of: impl FnOnce(usize) -> Option<u64>,
) -> Result<()> {
    let Some(k) = weights.par_iter().position_first(|&w| !fits(w)) else {
        return Ok(());
    };
    let message = format!(
        "weight {:e} does not fit the value type {type_name} (it would become infinite and change \
         the answer); run with --precision f64",
        weights[k]
    );
    Err(Error::in_file(path, line_of(k), message))
}
