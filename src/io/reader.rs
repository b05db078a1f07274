//! The one reader under every format: it maps the file, cuts its bytes into chunks at line
//! boundaries, runs a format's chunk parser on every chunk in parallel, and turns the place where
//! a parser stopped into an error that names the file and the line.
//!
//! Chunk parsers are fast and terse: on a line they cannot read they only report where the line
//! starts ([`Stop::Bad`]). The format's line diagnosis (a slow, token-by-token reading of that
//! one line) then says what is wrong with it, and the line number is found by counting the
//! newlines before it. Nothing on the fast path counts lines.

use crate::error::{Error, Result};
use rayon::prelude::*;
use std::io::Read;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::path::Path;

/// The largest vertex id gmcl accepts: `u32::MAX - 1`, so that the vertex count fits a `u32`.
pub(crate) const MAX_ID: u64 = u32::MAX as u64 - 1;

/// Integers being scanned stop growing here: far above any id, and `SATURATE * 10 + 9` cannot
/// overflow a `u64`.
pub(crate) const SATURATE: u64 = 1 << 40;

/// The largest chunk handed to one parser call.
const MAX_CHUNK: usize = 4 << 20;
/// The smallest chunk worth a task of its own.
const MIN_CHUNK: usize = 64 << 10;

/// The bytes of an input file: memory-mapped, or read into memory when the file cannot be mapped
/// (an empty file, a pipe).
pub(crate) enum Source {
    Mapped {
        /// Declared first, so it is dropped before the map.
        guard: Option<super::mapguard::MapGuard>,
        map: memmap2::Mmap,
        file: std::fs::File,
        /// The file's length and modification time when it was mapped.
        stamp: (u64, Option<std::time::SystemTime>),
    },
    Owned(Vec<u8>),
}

impl Source {
    /// Opens and maps `path`; a gzip-compressed file ([`super::is_gzip`]) is decompressed into
    /// memory instead.
    pub(crate) fn open(path: &Path) -> Result<Source> {
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(is_a_directory(path));
        }
        if super::is_gzip(path) {
            let limit = super::limits::memory_bytes();
            return Ok(Source::Owned(super::stream::gunzip(path, limit)?));
        }
        let file = super::stream::open(path)?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(path, "cannot open", e))?;
        if meta.is_dir() {
            return Err(is_a_directory(path));
        }
        // A regular file of size 0 may still have content (`/proc`, `/sys`): it is read like a
        // pipe, which gives an empty file nothing.
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the map is read-only and lives no longer than this `Source`. A file that
            // another process truncates while it is read makes reads past its new end fault:
            // the guard turns that into zeros and a mark, and [`Source::unchanged`] into an
            // error (`io::mapguard`).
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                #[cfg(unix)]
                {
                    // Only a hint: failure changes nothing but speed.
                    let _ = map.advise(memmap2::Advice::Sequential);
                }
                let guard = super::mapguard::MapGuard::register(map.as_ptr(), map.len());
                let stamp = (meta.len(), meta.modified().ok());
                return Ok(Source::Mapped {
                    guard,
                    map,
                    file,
                    stamp,
                });
            }
        }
        let limit = super::limits::memory_bytes();
        Ok(Source::Owned(super::stream::read_all(&file, path, limit)?))
    }

    /// The file's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Source::Mapped { map, .. } => map,
            Source::Owned(v) => v,
        }
    }

    /// Fails when the mapped file changed since it was mapped (truncated under the map, or
    /// rewritten: another length or modification time): what was read is then not the file.
    pub(crate) fn unchanged(&self, path: &Path) -> Result<()> {
        let Source::Mapped {
            guard, file, stamp, ..
        } = self
        else {
            return Ok(());
        };
        let now = file.metadata().map(|m| (m.len(), m.modified().ok())).ok();
        if guard.as_ref().is_some_and(|g| g.faulted()) || now != Some(*stamp) {
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: "the file changed while it was read (truncated or rewritten by \
                          another program); read it again once it is complete"
                    .into(),
            });
        }
        Ok(())
    }
}

/// The error for a directory given as an input file.
pub(crate) fn is_a_directory(path: &Path) -> Error {
    Error::Input {
        path: path.to_path_buf(),
        message: "is a directory, not a graph file".into(),
    }
}

/// The chunk size for an input of `len` bytes: a few chunks per thread, each between 64 KiB and
/// 4 MiB.
pub(crate) fn default_chunk(len: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    (len / (threads * 4)).clamp(MIN_CHUNK, MAX_CHUNK)
}

/// Where and why a chunk parser stopped before the end of its chunk. Offsets are absolute (into
/// the whole file) and point at the start of the line concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The line cannot be read; the format's diagnosis says why.
    Bad(usize),
    /// Memory for this many entries could not be had.
    NoMemory(usize),
    /// An interrupt was requested ([`crate::interrupt`]).
    Interrupted,
}

/// What a chunk parser reports about the chunk it read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Entries written.
    pub count: usize,
    /// The largest vertex id seen (meaningless when `count` is 0).
    pub max_id: u64,
    /// Some line had a weight column.
    pub weighted: bool,
    /// Entries off the diagonal (Matrix Market symmetry).
    pub off_diagonal: usize,
}

impl Stats {
    fn merge(&mut self, o: &Stats) {
        self.count += o.count;
        self.max_id = self.max_id.max(o.max_id);
        self.weighted |= o.weighted;
        self.off_diagonal += o.off_diagonal;
    }

    /// Number of vertices the ids seen call for: largest id + 1, or 0 without entries.
    pub(crate) fn vertices(&self) -> usize {
        if self.count == 0 {
            0
        } else {
            self.max_id as usize + 1
        }
    }
}

/// The entries of a whole file, in file order.
pub(crate) struct Parsed<E> {
    pub items: Vec<E>,
    /// One per item when parsing weighted, else empty.
    pub weights: Vec<f64>,
    pub stats: Stats,
}

/// The signature of a chunk parser: the chunk's bytes (whole lines), the chunk's offset in the
/// file, room for one item per line of the chunk and (when weighted) one weight per line. It
/// writes its items at positions `0..count` in order and returns its [`Stats`].
pub(crate) type ChunkResult = std::result::Result<Stats, Stop>;

/// Splits `bytes[start..]` into chunks of about `chunk` bytes that end just after a newline (or
/// at the end of the input).
pub(crate) fn split_chunks(bytes: &[u8], start: usize, chunk: usize) -> Vec<Range<usize>> {
    let chunk = chunk.max(1);
    let mut out = Vec::with_capacity((bytes.len().saturating_sub(start)) / chunk + 1);
    let mut s = start.min(bytes.len());
    while s < bytes.len() {
        let mut e = s.saturating_add(chunk).min(bytes.len());
        if e < bytes.len() {
            e = match memchr::memchr(b'\n', &bytes[e..]) {
                Some(p) => e + p + 1,
                None => bytes.len(),
            };
        }
        out.push(s..e);
        s = e;
    }
    out
}

/// Part `part` of `parts` of `bytes[start..]`: about an equal share of the bytes, starting and
/// ending at line starts, so that the parts tile `start..len` and every line falls in exactly
/// one part (each process of a distributed run reads only its part).
pub(crate) fn part_range(bytes: &[u8], start: usize, part: usize, parts: usize) -> Range<usize> {
    let len = bytes.len();
    let start = start.min(len);
    let parts = parts.max(1);
    let cut = |p: usize| -> usize {
        if p == 0 {
            return start;
        }
        if p >= parts {
            return len;
        }
        let at = start + ((len - start) as u128 * p as u128 / parts as u128) as usize;
        if at <= start || bytes[at - 1] == b'\n' {
            return at;
        }
        match bytes[at..].iter().position(|&c| c == b'\n') {
            Some(q) => at + q + 1,
            None => len,
        }
    };
    cut(part)..cut(part + 1).max(cut(part))
}

/// An upper bound on the entries a chunk can hold: one per line, and each entry takes at least
/// three bytes ("0 0") plus a newline unless it ends the chunk.
fn entry_bound(chunk: &[u8]) -> usize {
    let newlines = count_newlines(chunk);
    let lines = newlines + usize::from(chunk.last().is_some_and(|&c| c != b'\n'));
    lines.min((chunk.len() + 1) / 4)
}

/// The number of newlines in `b` (memchr counts them with SIMD, whatever the build's
/// optimisation).
fn count_newlines(b: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', b).count()
}

/// Runs `parse` on the chunks of `bytes[start..]` in parallel and gathers what they wrote, in file
/// order. Returns the first [`Stop`] in file order if any chunk stopped.
pub(crate) fn parse_chunks<'a, E, F>(
    bytes: &'a [u8],
    start: usize,
    chunk: usize,
    weighted: bool,
    parse: F,
) -> std::result::Result<Parsed<E>, Stop>
where
    E: Copy + Send + Sync,
    F: Fn(&'a [u8], usize, &mut [MaybeUninit<E>], &mut [MaybeUninit<f64>]) -> ChunkResult + Sync,
{
    let ranges = split_chunks(bytes, start, chunk);
    let bounds: Vec<usize> = ranges
        .par_iter()
        .map(|r| entry_bound(&bytes[r.clone()]))
        .collect();
    let total: usize = bounds.iter().sum();
    let mut items: Vec<E> = Vec::new();
    items
        .try_reserve_exact(total)
        .map_err(|_| Stop::NoMemory(total))?;
    crate::mem::advise_huge_pages(&mut items);
    let mut weights: Vec<f64> = Vec::new();
    if weighted {
        weights
            .try_reserve_exact(total)
            .map_err(|_| Stop::NoMemory(total))?;
        crate::mem::advise_huge_pages(&mut weights);
    }

    let results: Vec<ChunkResult> = {
        let item_regions =
            crate::mem::split_by_lengths(&mut items.spare_capacity_mut()[..total], &bounds);
        let weight_room = if weighted { total } else { 0 };
        let weight_bounds: Vec<usize> = if weighted {
            bounds.clone()
        } else {
            vec![0; bounds.len()]
        };
        let weight_regions = crate::mem::split_by_lengths(
            &mut weights.spare_capacity_mut()[..weight_room],
            &weight_bounds,
        );
        ranges
            .par_iter()
            .zip(item_regions)
            .zip(weight_regions)
            .with_max_len(1)
            .map(|((r, it), w)| {
                // Checked per chunk, so a long parse stops on the first Ctrl-C.
                if crate::interrupt::requested() {
                    return Err(Stop::Interrupted);
                }
                parse(&bytes[r.clone()], r.start, it, w)
            })
            .collect()
    };
    let mut stats = Stats::default();
    let mut counts = Vec::with_capacity(results.len());
    for (res, &bound) in results.iter().zip(&bounds) {
        match res {
            Err(stop) => return Err(*stop),
            Ok(s) => {
                // A parser never writes more than its room; should one claim to, stop rather
                // than expose memory it did not write.
                if s.count > bound {
                    return Err(Stop::Bad(start));
                }
                counts.push(s.count);
                stats.merge(s);
            }
        }
    }

    // Close the gaps left by blank and comment lines: every chunk's items move to just after the
    // previous chunk's.
    let mut to = 0;
    let mut from = 0;
    for (&c, &bound) in counts.iter().zip(&bounds) {
        if from != to {
            items.spare_capacity_mut().copy_within(from..from + c, to);
            if weighted {
                weights.spare_capacity_mut().copy_within(from..from + c, to);
            }
        }
        to += c;
        from += bound;
    }
    // SAFETY: chunk j wrote positions [from_j, from_j + count_j) of its region (each parser
    // writes items 0..count in order, and count <= bound was checked), and the loop above moved
    // those runs to [to_j, to_j + count_j), which tile [0, to).
    unsafe {
        items.set_len(to);
        if weighted {
            weights.set_len(to);
        }
    }
    if items.capacity() - to > to / 8 + 1024 {
        items.shrink_to_fit();
        weights.shrink_to_fit();
    }
    Ok(Parsed {
        items,
        weights,
        stats,
    })
}

/// Writes `value` at position `k` of a parser's room; false when there is no room (which the
/// bound makes impossible, and which the parser then reports as a bad line rather than panic).
#[inline(always)]
pub(crate) fn put<T>(room: &mut [MaybeUninit<T>], k: usize, value: T) -> bool {
    match room.get_mut(k) {
        Some(slot) => {
            slot.write(value);
            true
        }
        None => false,
    }
}

/// Skips the blank and comment lines at the start of `bytes[start..]`; returns where the first
/// other line starts.
pub(crate) fn skip_leading_comments(bytes: &[u8], mut start: usize) -> usize {
    while start < bytes.len() {
        let end = line_end(bytes, start);
        if !is_blank_or_comment(&bytes[start..end]) {
            break;
        }
        start = (end + 1).min(bytes.len());
        if end == bytes.len() {
            break;
        }
    }
    start
}

/// The 1-based number of the line holding byte `at`.
pub(crate) fn line_number(bytes: &[u8], at: usize) -> u64 {
    let at = at.min(bytes.len());
    count_newlines(&bytes[..at]) as u64 + 1
}

/// The position of the newline ending the line that holds `at`, or the end of the input.
#[inline]
pub(crate) fn line_end(bytes: &[u8], at: usize) -> usize {
    let at = at.min(bytes.len());
    memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |p| at + p)
}

/// The text of the line starting at `at`, without its newline.
pub(crate) fn line_at(bytes: &[u8], at: usize) -> &[u8] {
    let at = at.min(bytes.len());
    &bytes[at..line_end(bytes, at)]
}

/// Turns a parser's stop into the error the user sees; `diagnose` says what is wrong with a line.
pub(crate) fn stop_error(
    path: &Path,
    bytes: &[u8],
    stop: Stop,
    diagnose: impl Fn(&[u8]) -> Option<String>,
) -> Error {
    match stop {
        Stop::Bad(at) => {
            let line = line_at(bytes, at);
            let mut message = diagnose(line).unwrap_or_else(|| "cannot parse this line".into());
            if line.contains(&0) || std::str::from_utf8(line).is_err() {
                message.push_str(" (the file looks binary: gmcl reads text files)");
            }
            Error::Parse {
                path: path.to_path_buf(),
                line: line_number(bytes, at),
                message,
            }
        }
        Stop::NoMemory(n) => Error::Input {
            path: path.to_path_buf(),
            message: format!("not enough memory to hold up to {n} entries"),
        },
        Stop::Interrupted => Error::Interrupted,
    }
}

// ---------------------------------------------------------------------------------------------
// Bytes and tokens.

/// Field separators: space, tab, and carriage return (so CRLF line ends need no special case).
#[inline(always)]
pub(crate) fn is_space(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\r'
}

/// The first position at or after `i` that is not a separator.
#[inline(always)]
pub(crate) fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_space(b[i]) {
        i += 1;
    }
    i
}

/// The end of the token starting at `i`: the next separator or newline.
#[inline(always)]
pub(crate) fn token_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && !is_space(b[i]) && b[i] != b'\n' {
        i += 1;
    }
    i
}

/// The position just after the newline ending the line that holds `i` (or the end).
#[inline]
pub(crate) fn next_line(b: &[u8], i: usize) -> usize {
    let e = line_end(b, i);
    (e + 1).min(b.len())
}

/// From the line start `i`, skips blank and comment (`#`, `%`) lines. Returns the start of the
/// next line with content and the position of its first non-blank byte, or `None` at the end.
#[inline]
pub(crate) fn next_content_line(b: &[u8], mut i: usize) -> Option<(usize, usize)> {
    loop {
        let start = i;
        i = skip_spaces(b, i);
        match b.get(i)? {
            b'\n' => i += 1,
            b'#' | b'%' => i = next_line(b, i),
            _ => return Some((start, i)),
        }
    }
}

/// Reads the decimal digits at `b[i..]`; returns their value (saturating far above any id) and
/// where they end. No digits gives `(0, i)`.
#[inline(always)]
pub(crate) fn scan_uint(b: &[u8], mut i: usize) -> (u64, usize) {
    let mut v = 0u64;
    while i < b.len() {
        let d = b[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = (v * 10 + d as u64).min(SATURATE);
        i += 1;
    }
    (v, i)
}

/// The eight bytes at `b[i..i + 8]` as a little-endian word, if there are eight.
#[inline(always)]
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    let w: [u8; 8] = b.get(i..i.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

/// How many of a word's bytes, from the first (lowest), are ASCII digits: 0 to 8.
#[inline(always)]
fn digit_run(w: u64) -> u32 {
    const LO: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const HI: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const SEVEN: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    // A byte of `other` is zero exactly when the byte is '0'..='9': high nibble 3, and low
    // nibble + 6 below 16. No sum carries into the next byte.
    let other = ((w & HI) ^ 0x3030_3030_3030_3030) | (((w & LO) + 0x0606_0606_0606_0606) & HI);
    let flags = (((other & SEVEN) + SEVEN) | other) & 0x8080_8080_8080_8080;
    flags.trailing_zeros() / 8
}

/// The value of the first `len` (1 to 8) bytes of `w`, which are ASCII digits.
#[inline(always)]
fn digits_value(w: u64, len: u32) -> u64 {
    // Move the digits to the top of the word, so zero bytes (leading zeros) come first, then
    // combine digit pairs, quadruples and octets (as simdjson does).
    let v = w << (8 * (8 - len));
    let v = ((v & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561)) >> 8;
    let v = ((v & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601)) >> 16;
    ((v & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001)) >> 32
}

/// The common shape of an edge line, read eight bytes at a time: 1 to 7 digits, one
/// separator, 1 to 7 digits. Returns both numbers and the end of the second, or `None` when the
/// line has another shape (or the chunk ends within 16 bytes), for the byte-by-byte path to read.
#[inline(always)]
pub(crate) fn scan_pair(b: &[u8], i: usize) -> Option<(u64, u64, usize)> {
    let w = word_at(b, i)?;
    let lu = digit_run(w);
    if lu == 0 || lu == 8 || !is_space(*b.get(i + lu as usize)?) {
        return None;
    }
    let s = i + lu as usize + 1;
    let w2 = word_at(b, s)?;
    let lv = digit_run(w2);
    if lv == 0 || lv == 8 {
        return None;
    }
    Some((digits_value(w, lu), digits_value(w2, lv), s + lv as usize))
}

/// A finite floating-point number, or `None`.
#[inline]
pub(crate) fn parse_float(tok: &[u8]) -> Option<f64> {
    if let Some(x) = short_decimal(tok) {
        return Some(x);
    }
    let x: f64 = std::str::from_utf8(tok).ok()?.parse().ok()?;
    x.is_finite().then_some(x)
}

/// The common weight, a plain decimal (`3`, `0.25`, `-1.5`: an optional `-`, digits, at most
/// one `.` between digits) of at most 15 digits, read without the general parser: its digits
/// as an integer below 2^53 divided by a power of ten up to 10^15, both exact in an `f64`, so
/// the one rounding of the division gives the correctly rounded value, as `str::parse` does
/// (Clinger's fast path). `None` for any other token, which the general parser then reads.
#[inline]
fn short_decimal(tok: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (negative, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut mantissa = 0u64;
    let mut count = 0usize;
    let mut point = None;
    for (k, &c) in digits.iter().enumerate() {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + (c - b'0') as u64;
                count += 1;
            }
            b'.' if point.is_none() && k > 0 && k + 1 < digits.len() => point = Some(k),
            _ => return None,
        }
    }
    if count > 15 {
        return None;
    }
    let scale = point.map_or(0, |k| digits.len() - k - 1);
    let x = mantissa as f64 / POW10[scale];
    Some(if negative { -x } else { x })
}

/// The whitespace-separated tokens of a line (the slow path).
pub(crate) fn tokens(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&c| is_space(c) || c == b'\n')
        .filter(|t| !t.is_empty())
        .collect()
}

/// True for a line that is empty, all separators, or starts (after separators) with `#` or `%`.
pub(crate) fn is_blank_or_comment(line: &[u8]) -> bool {
    match line.iter().find(|&&c| !is_space(c)) {
        None | Some(b'\n') => true,
        Some(&c) => c == b'#' || c == b'%',
    }
}

/// A token as shown in a message: quoted, escaped when not printable ASCII, cut at 40 bytes.
pub(crate) fn quote(tok: &[u8]) -> String {
    format!("'{}'", shown(tok))
}

/// A token escaped and cut at 40 bytes, without quotes.
pub(crate) fn shown(tok: &[u8]) -> String {
    const MAX: usize = 40;
    if tok.len() > MAX {
        format!("{}...", tok[..MAX].escape_ascii())
    } else {
        tok.escape_ascii().to_string()
    }
}

/// What a token that should be a non-negative integer is: its value (saturated), or why not.
/// `what` names the field in messages ("vertex id", "row index").
pub(crate) fn uint_token(tok: &[u8], what: &str) -> std::result::Result<u64, String> {
    let all_digits = |t: &[u8]| !t.is_empty() && t.iter().all(u8::is_ascii_digit);
    if let Some(rest) = tok.strip_prefix(b"-") {
        if all_digits(rest) {
            return Err(format!("negative {what}: {}", quote(tok)));
        }
    }
    if !all_digits(tok) {
        return Err(format!(
            "not an integer: {} (expected a {what})",
            quote(tok)
        ));
    }
    let (v, _) = scan_uint(tok, 0);
    Ok(v)
}

/// A vertex id of an edge list, checked against [`MAX_ID`].
pub(crate) fn vertex_token(tok: &[u8]) -> std::result::Result<u32, String> {
    let v = uint_token(tok, "vertex id")?;
    if v > MAX_ID {
        return Err(format!(
            "vertex id {} is above the largest supported id {MAX_ID}",
            shown(tok)
        ));
    }
    Ok(v as u32)
}

/// A weight: any finite number.
pub(crate) fn weight_token(tok: &[u8]) -> std::result::Result<f64, String> {
    match std::str::from_utf8(tok).ok().map(str::parse::<f64>) {
        Some(Ok(x)) if x.is_finite() => Ok(x),
        Some(Ok(_)) => Err(format!("weight is not a finite number: {}", quote(tok))),
        _ => Err(format!("weight is not a number: {}", quote(tok))),
    }
}

/// Reads the standard input into memory, refusing more than `limit` bytes (the memory gmcl
/// may use, when known) before holding them; `name` is what errors call it.
pub(crate) fn read_stdin(limit: Option<u64>, name: &Path) -> Result<Vec<u8>> {
    const STEP: usize = 1 << 20;
    let mut input = std::io::stdin().lock();
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        crate::interrupt::check()?;
        if bytes.try_reserve(STEP).is_err() {
            return Err(Error::Input {
                path: name.to_path_buf(),
                message: format!(
                    "memory for more than {} bytes of input could not be had",
                    bytes.len()
                ),
            });
        }
        let read = (&mut input)
            .take(STEP as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(name, "cannot read", e))?;
        if read == 0 {
            return Ok(bytes);
        }
        if let Some(limit) = limit.filter(|&l| bytes.len() as u64 > l) {
            return Err(Error::Input {
                path: name.to_path_buf(),
                message: format!(
                    "holds more than the {limit} bytes of memory gmcl may use \
                     (GMCL_MEMORY_LIMIT, else the machine's or the cgroup's): it is read \
                     into memory; give a file instead"
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn short_decimals_read_as_the_general_parser_reads_them(
            sign in any::<bool>(),
            int in proptest::collection::vec(0u8..10, 1..12),
            frac in proptest::option::of(proptest::collection::vec(0u8..10, 0..12)),
        ) {
            let mut t = String::new();
            if sign {
                t.push('-');
            }
            t.extend(int.iter().map(|d| char::from(b'0' + d)));
            if let Some(f) = &frac {
                t.push('.');
                t.extend(f.iter().map(|d| char::from(b'0' + d)));
            }
            let want = t.parse::<f64>().ok();
            let got = parse_float(t.as_bytes());
            prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{}", t);
        }
    }

    #[test]
    fn short_decimal_takes_only_plain_decimals() {
        for t in ["0.1", "1", "-2.5", "123456789012345", "0.00000000000001"] {
            let got = short_decimal(t.as_bytes());
            assert_eq!(got, t.parse::<f64>().ok(), "{t}");
        }
        for t in [
            "",
            "-",
            ".5",
            "5.",
            "1e3",
            "+1",
            "1.2.3",
            "1234567890123456",
            "0.000000000000001",
            "nan",
            "0x1",
        ] {
            assert_eq!(short_decimal(t.as_bytes()), None, "{t}");
        }
        assert_eq!(parse_float(b".5"), Some(0.5));
        assert_eq!(parse_float(b"1e3"), Some(1000.0));
        assert_eq!(parse_float(b"inf"), None);
    }

    #[test]
    fn chunks_end_at_newlines_and_cover_everything() {
        let text = b"1 2\n3 4\n55 66\n7 8";
        for size in 1..20 {
            let ch = split_chunks(text, 0, size);
            assert_eq!(ch.first().unwrap().start, 0);
            assert_eq!(ch.last().unwrap().end, text.len());
            for w in ch.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert_eq!(text[w[0].end - 1], b'\n');
            }
        }
        assert!(split_chunks(b"", 0, 4).is_empty());
        assert!(split_chunks(b"abc", 3, 4).is_empty());
    }

    #[test]
    fn parts_tile_the_lines() {
        let text = b"# c\n1 2\n3 4\n55 66\n7 8\n9 10";
        for parts in 1..12 {
            let ranges: Vec<_> = (0..parts).map(|p| part_range(text, 4, p, parts)).collect();
            assert_eq!(ranges[0].start, 4);
            assert_eq!(ranges[parts - 1].end, text.len());
            for w in ranges.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            for r in &ranges {
                assert!(r.start == 4 || r.start == text.len() || text[r.start - 1] == b'\n');
            }
        }
        assert_eq!(part_range(b"", 0, 0, 3), 0..0);
    }

    #[test]
    fn bounds_and_numbers() {
        assert_eq!(entry_bound(b"1 2\n3 4\n"), 2);
        assert_eq!(entry_bound(b"1 2\n3 4"), 2);
        assert_eq!(entry_bound(b"\n\n\n\n\n\n\n\n"), 2);
        assert_eq!(entry_bound(b"1 2"), 1);
        assert_eq!(scan_uint(b"0042x", 0), (42, 4));
        assert_eq!(scan_uint(b"x", 0), (0, 0));
        assert_eq!(scan_uint(b"99999999999999999999999999", 0).0, SATURATE);
        assert_eq!(line_number(b"a\nb\nc", 4), 3);
        assert_eq!(line_at(b"a\nbb\r\nc", 2), b"bb\r");
        assert_eq!(skip_leading_comments(b"# x\n\n  % y\n1 2\n", 0), 11);
        assert_eq!(skip_leading_comments(b"# x", 0), 3);
    }

    #[test]
    fn word_at_a_time_digits() {
        let cases: &[&[u8]] = &[
            b"0 1\n....",
            b"1234567 7654321\n",
            b"12\t0003\r\n......",
            b"42 9x......",
            b"12345678 1.......",
            b"1  2\n...........",
            b"1 2",
            b"x1 2............",
        ];
        for &c in cases {
            let slow = {
                let (u, j) = scan_uint(c, 0);
                let ok = j > 0 && j < 8 && j < c.len() && is_space(c[j]);
                let (v, k) = if ok { scan_uint(c, j + 1) } else { (0, 0) };
                (ok && k > j + 1 && k - j - 1 < 8 && j + 9 <= c.len()).then_some((u, v, k))
            };
            assert_eq!(scan_pair(c, 0), slow, "{:?}", String::from_utf8_lossy(c));
        }
        for len in 1..=8u32 {
            let text = b"98765432";
            let w = u64::from_le_bytes(*text);
            assert_eq!(digit_run(w), 8);
            let want: u64 = std::str::from_utf8(&text[..len as usize])
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(digits_value(w, len), want);
        }
        assert_eq!(digit_run(u64::from_le_bytes(*b"12:45678")), 2);
        assert_eq!(digit_run(u64::from_le_bytes(*b"/2345678")), 0);
        assert_eq!(count_newlines(&[b'\n'; 200]), 200);
        assert_eq!(count_newlines(b"a\nb\n"), 2);
    }

    #[test]
    fn token_messages() {
        assert_eq!(
            vertex_token(b"4294967295").unwrap_err(),
            "vertex id 4294967295 is above the largest supported id 4294967294"
        );
        assert_eq!(vertex_token(b"4294967294").unwrap(), u32::MAX - 1);
        assert!(vertex_token(b"-3")
            .unwrap_err()
            .contains("negative vertex id"));
        assert!(vertex_token(b"x1")
            .unwrap_err()
            .contains("not an integer: 'x1'"));
        assert!(vertex_token(b"\x00\xff")
            .unwrap_err()
            .contains("'\\x00\\xff'"));
        assert_eq!(quote(&[b'a'; 50]), format!("'{}...'", "a".repeat(40)));
        assert!(weight_token(b"NaN").unwrap_err().contains("finite"));
        assert!(weight_token(b"inf").unwrap_err().contains("finite"));
        assert!(weight_token(b"1e999").unwrap_err().contains("finite"));
        assert!(weight_token(b"x").unwrap_err().contains("not a number"));
        assert_eq!(weight_token(b"-2.5e1").unwrap(), -25.0);
        assert_eq!(tokens(b" a\tb  c\r"), vec![&b"a"[..], b"b", b"c"]);
        assert!(is_blank_or_comment(b"  \t\r"));
        assert!(is_blank_or_comment(b" # c"));
        assert!(!is_blank_or_comment(b"1 2"));
    }
}
