//! Refusing a graph whose per-vertex arrays cannot fit in memory, with a message naming the file
//! and the line that calls for so many vertices, before anything per vertex is allocated.
//!
//! Vertex ids above 4294967294 are refused by the parsers; ids below that still ask for
//! `largest id + 1` vertices (`.el`, `.wel`) or the size line's rows and columns (`.mtx`), and
//! every command then builds arrays of at least [`BYTES_PER_VERTEX`] bytes per vertex (CSR row
//! offsets and a degree or a rank). A file with one edge `4294967294 0` would otherwise end in an
//! allocation failure (an abort) or in swapping.

use super::{reader, Format, Loaded};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Mutex;

/// The least memory any command needs per vertex: CSR row offsets (8 bytes) and one more 8-byte
/// array (degrees, ranks or labels).
pub const BYTES_PER_VERTEX: u64 = 16;

/// What [`set_memory_limit`] set: `None` until it is called, then the limit (`Some(None)`: no
/// limit, which turns the check off).
static LIMIT: Mutex<Option<Option<u64>>> = Mutex::new(None);

/// Replaces what [`memory_bytes`] reads off the machine for this process: `Some(bytes)`, or
/// `None` for no limit (the command line sets it from `GMCL_MEMORY_LIMIT`, for tests).
pub fn set_memory_limit(limit: Option<u64>) {
    *LIMIT.lock().unwrap_or_else(|p| p.into_inner()) = Some(limit);
}

/// The memory gmcl may use, in bytes: the limit set by [`set_memory_limit`], else the smaller of
/// the machine's physical memory and the cgroup's limit, when they can be read.
pub fn memory_bytes() -> Option<u64> {
    if let Some(limit) = *LIMIT.lock().unwrap_or_else(|p| p.into_inner()) {
        return limit;
    }
    let physical = physical_memory();
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match (physical, cgroup) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Fails when the vertices `loaded` calls for need more memory than there is.
pub(crate) fn check(loaded: &Loaded, bytes: &[u8], path: &Path) -> Result<()> {
    let el = &loaded.edges;
    let n = el.nrows.max(el.ncols) as u64;
    let Some(memory) = memory_bytes() else {
        return Ok(());
    };
    let need = n.saturating_mul(BYTES_PER_VERTEX);
    if need <= memory {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let why = match loaded.format {
        Format::El | Format::Wel => format!(
            "vertex id {} asks for {n} vertices (ids run from 0 to the largest)",
            n - 1
        ),
        Format::Mtx => format!(
            "the size line asks for {} x {} vertices",
            el.nrows, el.ncols
        ),
        Format::Snap | Format::Abc => format!("the file has {n} distinct vertices"),
        Format::Npz => format!("the matrix is {} x {}", el.nrows, el.ncols),
    };
    let message = format!(
        "{why}: their arrays alone need {:.1} GiB ({BYTES_PER_VERTEX} bytes per vertex), more \
         than the {:.1} GiB of memory here{}",
        gib(need),
        gib(memory),
        match loaded.format {
            Format::El | Format::Wel =>
                "; sparse ids can be renumbered by reading the file as \
                                         SNAP text (--format snap)",
            _ => "",
        }
    );
    Err(match line_of(loaded, bytes, n) {
        Some(line) => Error::Parse {
            path: path.to_path_buf(),
            line,
            message,
        },
        None => Error::Input {
            path: path.to_path_buf(),
            message,
        },
    })
}

/// The line that calls for `n` vertices: the first edge with id `n - 1` (edge lists) or the
/// size line (Matrix Market). Only on the error path: a plain scan.
fn line_of(loaded: &Loaded, bytes: &[u8], n: u64) -> Option<u64> {
    let mut at = 0;
    let mut seen_header = false;
    while at < bytes.len() {
        let line = reader::line_at(bytes, at);
        if !reader::is_blank_or_comment(line) {
            let t = reader::tokens(line);
            let hit = match loaded.format {
                Format::El | Format::Wel => t
                    .iter()
                    .take(2)
                    .any(|tok| reader::uint_token(tok, "").ok() == Some(n - 1)),
                Format::Mtx => seen_header,
                _ => return None,
            };
            if hit {
                return Some(reader::line_number(bytes, at));
            }
        }
        // The Matrix Market header starts with '%', a comment to the scan above.
        seen_header = seen_header || (loaded.format == Format::Mtx && at == 0);
        at = reader::next_line(bytes, at);
    }
    None
}
