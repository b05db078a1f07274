//! How much memory a run may use, and refusing a graph that cannot fit in it, with a message
//! naming the file and the line that calls for so many vertices, before anything per vertex is
//! allocated.
//!
//! Vertex ids above 4294967294 are refused by the parsers; ids below that still ask for
//! `largest id + 1` vertices (`.el`, `.wel`) or the size line's rows and columns (`.mtx`), and
//! each command then builds arrays per vertex and per edge whose sizes its [`Footprint`] states.
//! A file with one edge `1000000000 0` would otherwise end in an allocation failure (an abort),
//! in swapping or in the kernel's out-of-memory killer.
//!
//! The memory available is the least of: the memory the kernel says it can give without
//! swapping (`MemAvailable`), the address space left under `ulimit -v` (`RLIMIT_AS`), and what
//! the cgroup's limit leaves (v2 `memory.max`, v1 `memory.limit_in_bytes`, the process's cgroup
//! and its ancestors), unless a limit is set for the run ([`set_memory_limit`]).

use super::{reader, Format, Loaded};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Mutex;

/// What a command allocates for a graph, in bytes per vertex and per edge of the input, once
/// the edges are parsed: each algorithm states its own (`info::FOOTPRINT`,
/// `tricount::FOOTPRINT`, `spgemm::FOOTPRINT`, `mcl::FOOTPRINT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// The command, as the message names it.
    pub command: &'static str,
    /// Bytes per vertex (row offsets, degrees, ranks, labels, ...).
    pub per_vertex: u64,
    /// Bytes per edge of the input beyond the parsed edge list itself (CSR columns and values,
    /// copies made while building).
    pub per_edge: u64,
}

impl Footprint {
    /// What every command needs at least: CSR row offsets (8 bytes per vertex) and one more
    /// 8-byte array per vertex; columns (4 bytes) per edge.
    pub const MINIMUM: Footprint = Footprint {
        command: "any command",
        per_vertex: 16,
        per_edge: 4,
    };

    /// The bytes this footprint asks for `vertices` and `edges` (saturating).
    pub fn bytes(&self, vertices: u64, edges: u64) -> u64 {
        vertices
            .saturating_mul(self.per_vertex)
            .saturating_add(edges.saturating_mul(self.per_edge))
    }
}

/// The memory a run may use now, and where that figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Available {
    /// Bytes.
    pub bytes: u64,
    /// What limits it ("available memory", "the address space left under ulimit -v", ...).
    pub source: &'static str,
}

/// What [`set_memory_limit`] set: `None` until it is called, then the limit (`Some(None)`: no
/// limit, which turns the check off).
static LIMIT: Mutex<Option<Option<u64>>> = Mutex::new(None);

/// Replaces what [`available`] reads off the machine for this process: `Some(bytes)`, or `None`
/// for no limit (the command line sets it from `GMCL_MEMORY_LIMIT`).
pub fn set_memory_limit(limit: Option<u64>) {
    *LIMIT.lock().unwrap_or_else(|p| p.into_inner()) = Some(limit);
}

/// The memory gmcl may still use, in bytes: the limit set by [`set_memory_limit`], else the
/// least of what the machine, `ulimit -v` and the cgroup leave, when they can be read.
pub fn memory_bytes() -> Option<u64> {
    available().map(|a| a.bytes)
}

/// [`memory_bytes`] with where the figure comes from.
pub fn available() -> Option<Available> {
    if let Some(limit) = *LIMIT.lock().unwrap_or_else(|p| p.into_inner()) {
        return limit.map(|bytes| Available {
            bytes,
            source: "the memory limit set for this run",
        });
    }
    [
        meminfo_available().map(|b| (b, "the memory available")),
        address_space_left().map(|b| (b, "the address space left under ulimit -v")),
        cgroup_left().map(|b| (b, "what the cgroup's memory limit leaves")),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|&(b, _)| b)
    .map(|(bytes, source)| Available { bytes, source })
}

/// The memory still free for a step that keeps `in_use` bytes of its own alive: a limit set
/// for the run ([`set_memory_limit`]) less `in_use`, else what [`available`] reads off the
/// machine (which already counts them as used).
pub fn memory_left(in_use: u64) -> Option<u64> {
    if let Some(limit) = *LIMIT.lock().unwrap_or_else(|p| p.into_inner()) {
        return limit.map(|l| l.saturating_sub(in_use));
    }
    available().map(|a| a.bytes)
}

/// A size in bytes as people read it: `1.5 GiB`, `12.0 MiB`, `512 bytes`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The error for an allocation of `bytes` for `what` that could not be made: what was needed
/// and what is available.
pub fn out_of_memory(what: &str, bytes: u64) -> Error {
    let have = match available() {
        Some(a) => format!("{} ({})", human(a.bytes), a.source),
        None => "less".into(),
    };
    Error::Invalid(format!(
        "not enough memory for {what}: it needs {} and {have} is available",
        human(bytes)
    ))
}

/// `MemAvailable` of `/proc/meminfo`.
fn meminfo_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `RLIMIT_AS` less the address space the process already holds (`VmSize`); `None` without a
/// limit.
pub fn address_space_left() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let used = status_kib(&status, "VmSize:")
        .unwrap_or(0)
        .saturating_mul(1024);
    // rlim_t is narrower than u64 on some targets.
    #[allow(clippy::unnecessary_cast)]
    let limit = lim.rlim_cur as u64;
    Some(limit.saturating_sub(used))
}

fn status_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The least room any cgroup of the process (its own and its ancestors) leaves under its memory
/// limit: the limit less the usage, not counting the inactive file cache the kernel reclaims.
fn cgroup_left() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut least: Option<u64> = None;
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (root, limit, usage, inactive) = if controllers.is_empty() {
            (
                "/sys/fs/cgroup",
                "memory.max",
                "memory.current",
                "inactive_file",
            )
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            )
        } else {
            continue;
        };
        // The process's own cgroup and its ancestors, where this mount shows them.
        let mut dir = Some(Path::new(path));
        while let Some(d) = dir {
            let at = Path::new(root).join(d.strip_prefix("/").unwrap_or(d));
            if let Some(left) = cgroup_dir_left(&at, limit, usage, inactive) {
                least = Some(least.map_or(left, |l| l.min(left)));
            }
            dir = d.parent();
        }
    }
    least
}

fn cgroup_dir_left(dir: &Path, limit: &str, usage: &str, inactive: &str) -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    // "max" (v2) and a huge figure (v1, no limit) both mean no limit.
    let limit: u64 = read(limit)?.trim().parse().ok()?;
    if limit >= 1 << 60 {
        return None;
    }
    let used: u64 = read(usage).and_then(|u| u.trim().parse().ok()).unwrap_or(0);
    let cache = read("memory.stat")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(inactive)?.strip_prefix(' ')?.parse().ok())
        })
        .unwrap_or(0);
    Some(limit.saturating_sub(used.saturating_sub(cache)))
}

/// Fails when the graph `loaded` needs more memory for `footprint` than there is.
pub(crate) fn check(
    loaded: &Loaded,
    bytes: &[u8],
    path: &Path,
    footprint: &Footprint,
) -> Result<()> {
    let el = &loaded.edges;
    check_size(
        loaded.format,
        (el.nrows, el.ncols),
        el.len(),
        path,
        footprint,
        |n| line_of(loaded, bytes, n),
    )
}

/// [`check`] of a graph of `shape` (rows, columns) and `entries` entries in `format`; `line_of(n)`
/// finds the line that calls for `n` vertices (`None` in a binary file).
pub(crate) fn check_size(
    format: Format,
    shape: (usize, usize),
    entries: usize,
    path: &Path,
    footprint: &Footprint,
    line_of: impl FnOnce(u64) -> Option<u64>,
) -> Result<()> {
    let (nrows, ncols) = shape;
    let n = nrows.max(ncols) as u64;
    let Some(memory) = available() else {
        return Ok(());
    };
    let need = footprint.bytes(n, entries as u64);
    if need <= memory.bytes {
        return Ok(());
    }
    let why = match format {
        Format::El | Format::Wel => format!(
            "vertex id {} asks for {n} vertices (ids run from 0 to the largest)",
            n.saturating_sub(1)
        ),
        Format::Mtx => format!("the size line asks for {nrows} x {ncols} vertices"),
        Format::Snap | Format::Abc => format!("the file has {n} distinct vertices"),
        Format::Npz => format!("the matrix is {nrows} x {ncols}"),
    };
    let message = format!(
        "{why} and {} edges: {} needs {} for them ({} bytes per vertex, {} per edge), more \
         than the {} available ({}){}",
        entries,
        footprint.command,
        human(need),
        footprint.per_vertex,
        footprint.per_edge,
        human(memory.bytes),
        memory.source,
        match format {
            Format::El | Format::Wel =>
                "; sparse ids can be renumbered by reading the file as SNAP text (--format snap)",
            _ => "",
        }
    );
    // The vertices are what the line names; when the edges alone are too many, no line is.
    let vertices_too_many = footprint.bytes(n, 0) > memory.bytes;
    let line = if vertices_too_many { line_of(n) } else { None };
    Err(Error::in_file(path, line, message))
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
                    .any(|tok| reader::uint_token(tok, "").ok() == Some(n.wrapping_sub(1))),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }

    #[test]
    fn a_footprint_counts_vertices_and_edges_and_saturates() {
        let f = Footprint {
            command: "t",
            per_vertex: 10,
            per_edge: 3,
        };
        assert_eq!(f.bytes(5, 2), 56);
        assert_eq!(f.bytes(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn a_cgroup_directory_leaves_its_limit_less_what_is_not_reclaimable() {
        let dir = tempfile::tempdir().unwrap();
        let w = |f: &str, s: &str| std::fs::write(dir.path().join(f), s).unwrap();
        w("memory.max", "1000\n");
        w("memory.current", "700\n");
        w(
            "memory.stat",
            "anon 400\ninactive_file 300\nactive_file 0\n",
        );
        let left = cgroup_dir_left(dir.path(), "memory.max", "memory.current", "inactive_file");
        assert_eq!(left, Some(600));
        w("memory.max", "max\n");
        let left = cgroup_dir_left(dir.path(), "memory.max", "memory.current", "inactive_file");
        assert_eq!(left, None);
    }
}
