//! Setting the process up before a subcommand runs: the worker pool (its size capped, its
//! failure to start an error), and a closed stdout made to fail loudly.

use super::Ui;
use gmcl::{Error, Result};

/// How many threads a pool may have per core: more only adds switching and memory (thousands
/// of threads slowed a small run by a hundredfold).
const THREADS_PER_CORE: usize = 4;

/// `--threads N`, at most [`THREADS_PER_CORE`] times the cores gmcl may use (with a notice).
fn capped_threads(n: usize, ui: Ui) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let cap = cores.saturating_mul(THREADS_PER_CORE);
    if n <= cap {
        return n;
    }
    ui.notice(&format!(
        "--threads {n} is more than {THREADS_PER_CORE} times the {cores} cores here: using {cap}"
    ));
    cap
}

/// The address space a worker thread's stack reserves (Rust's default, which rayon keeps).
const STACK_BYTES: u64 = 2 << 20;

/// The pool rayon starts without a size: `RAYON_NUM_THREADS` when set, else a thread per core.
fn default_pool_size() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |c| c.get()))
}

/// Starts the global worker pool of `threads` threads (`None`: one per core). It is started
/// here, also without --threads, so that threads the system refuses (a process limit such as
/// `ulimit -u`) are an error now rather than a panic at first use. Stacks that cannot fit the
/// address space left under `ulimit -v` are refused before any thread starts: a thread started
/// into an address space with no room left can abort the process in glibc (its first
/// allocation fails) before the pool sees the refusal.
pub fn start_pool(threads: Option<usize>, ui: Ui) -> Result<()> {
    if threads == Some(0) {
        return Err(Error::Invalid("--threads must be at least 1".into()));
    }
    let threads = threads.map(|n| capped_threads(n, ui));
    let size = threads.unwrap_or_else(default_pool_size);
    let asked = match threads {
        Some(n) => format!("{n} threads"),
        None => {
            format!("{size} threads (one per core or RAYON_NUM_THREADS; --threads N starts fewer)")
        }
    };
    let stacks = size as u64 * STACK_BYTES;
    if let Some(left) = gmcl::io::limits::address_space_left().filter(|&l| stacks > l) {
        return Err(Error::Invalid(format!(
            "cannot start the worker threads: {asked}: their stacks take {} of address space, \
             {} is left under ulimit -v",
            gmcl::io::limits::human(stacks),
            gmcl::io::limits::human(left)
        )));
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build_global()
        .map_err(|e| Error::Invalid(format!("cannot start the worker threads: {asked}: {e}")))
}

/// With stdout closed (`>&-`), Rust's runtime opens `/dev/null` on descriptor 1 (read-write,
/// where a shell's `> /dev/null` opens it write-only), and results written there would vanish
/// with exit 0. Descriptor 1 then becomes a pipe nobody reads, so that a write of results fails
/// (reported as a closed stdout, exit 2). Returns whether stdout was closed.
#[cfg(unix)]
pub fn guard_closed_stdout() -> bool {
    // SAFETY: fcntl, fstat, stat, pipe, dup2 and close on descriptors this process owns and on
    // stat buffers it owns.
    unsafe {
        let flags = libc::fcntl(1, libc::F_GETFL);
        if flags != -1 {
            let mut fd_stat: libc::stat = std::mem::zeroed();
            let mut null_stat: libc::stat = std::mem::zeroed();
            let null_in_place_of_closed = flags & libc::O_ACCMODE == libc::O_RDWR
                && libc::fstat(1, &mut fd_stat) == 0
                && libc::stat(c"/dev/null".as_ptr(), &mut null_stat) == 0
                && fd_stat.st_mode & libc::S_IFMT == libc::S_IFCHR
                && fd_stat.st_rdev == null_stat.st_rdev;
            if !null_in_place_of_closed {
                return false;
            }
        }
        let mut fds = [0; 2];
        if libc::pipe(fds.as_mut_ptr()) == 0 {
            libc::close(fds[0]);
            if fds[1] != 1 {
                libc::dup2(fds[1], 1);
                libc::close(fds[1]);
            }
        }
    }
    true
}

#[cfg(not(unix))]
pub fn guard_closed_stdout() -> bool {
    false
}

/// What an error writing results to stdout means: a reader of a pipe that left (`| head -1`) is
/// a normal end, said by the status a process ended by SIGPIPE has (`Ok(141)`, no message);
/// with stdout closed (`stdout_closed`) the results had nowhere to go, an error. Other errors
/// are returned as they are.
pub fn stdout_outcome(e: Error, stdout_closed: bool) -> std::result::Result<i32, Error> {
    if let Error::Io { path, source, .. } = &e {
        if path.as_os_str() == "<stdout>" && source.kind() == std::io::ErrorKind::BrokenPipe {
            if stdout_closed {
                return Err(Error::Invalid(
                    "stdout is closed: the results had nowhere to go (write them with -o FILE, \
                     or leave stdout open)"
                        .into(),
                ));
            }
            return Ok(141);
        }
    }
    Err(e)
}
