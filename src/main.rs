//! The `gmcl` command line: parses arguments, sets up the process (interrupt handler, thread
//! pool), runs the subcommand's module under `cli/`, and exits with the error's status.

mod cli;

use clap::Parser;
use cli::{Cli, Command, Ui};
use gmcl::Error;

/// Notes failed allocations, so that running out of memory exits cleanly ([`cli::oom`]).
#[global_allocator]
static ALLOCATOR: cli::oom::NotingAllocator = cli::oom::NotingAllocator;

fn main() {
    cli::oom::install();
    let stdout_closed = guard_closed_stdout();
    // mcl's spellings (`-te 4`, `-overlap split`) are made gmcl's before clap sees them.
    let args = match cli::mcl_args::rewrite(std::env::args_os()) {
        Ok(args) => args,
        Err(e) => exit_with(&e),
    };
    let cli = Cli::parse_from(args);
    let ui = Ui { quiet: cli.quiet };
    // Ctrl-C and SIGTERM set a flag that the long loops check: the run unwinds, temporary output
    // files are removed, and the process exits with status 130 below.
    if let Err(e) = gmcl::interrupt::install() {
        exit_with(&e);
    }
    if let Err(e) = cli::env::configure() {
        exit_with(&e);
    }
    if cli.threads == Some(0) {
        exit_with(&Error::Invalid("--threads must be at least 1".into()));
    }
    let threads = cli.threads.map(|n| capped_threads(n, ui));
    // The pool is started here, also without --threads, so that threads the system refuses (a
    // process limit such as `ulimit -u`) are an error now rather than a panic at first use.
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build_global()
    {
        let asked = match threads {
            Some(n) => format!("{n} threads"),
            None => "a thread per core (--threads N starts fewer)".into(),
        };
        exit_with(&Error::Invalid(format!(
            "cannot start the worker threads: {asked}: {e}"
        )));
    }
    let result = match cli.command {
        Command::Generate(a) => cli::generate::run(a, ui),
        Command::Info(a) => cli::info::run(a),
        Command::Spgemm(a) => cli::spgemm::run(a, ui),
        Command::Bench(a) => cli::bench::run(a, ui),
        Command::Tricount(a) => cli::tricount::run(a, ui),
        Command::Cluster(a) => cli::cluster::run(a, ui),
        Command::Dist(a) => cli::dist::run(a),
        Command::Convert(a) => cli::convert::run(a, ui),
    };
    if let Err(e) = result {
        if let Error::Io { path, source, .. } = &e {
            if path.as_os_str() == "<stdout>" && source.kind() == std::io::ErrorKind::BrokenPipe {
                if stdout_closed {
                    exit_with(&Error::Invalid(
                        "stdout is closed: the results had nowhere to go (write them with -o \
                         FILE, or leave stdout open)"
                            .into(),
                    ));
                }
                // The reader of a pipe left (`| head -1`): a normal end, said by the status a
                // process ended by SIGPIPE has, with no message.
                std::process::exit(141);
            }
        }
        exit_with(&e);
    }
}

/// With stdout closed (`>&-`), Rust's runtime opens `/dev/null` on descriptor 1 (read-write,
/// where a shell's `> /dev/null` opens it write-only), and results written there would vanish
/// with exit 0. Descriptor 1 then becomes a pipe nobody reads, so that a write of results fails
/// (reported as a closed stdout, exit 2). Returns whether stdout was closed.
#[cfg(unix)]
fn guard_closed_stdout() -> bool {
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
fn guard_closed_stdout() -> bool {
    false
}

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

/// Prints the error and exits with its status. Called only once every value of the run has
/// been dropped (temporary output files removed).
fn exit_with(e: &Error) -> ! {
    use std::io::Write;
    // Should stderr be closed, the exit status still tells.
    let _ = match e {
        Error::Interrupted => writeln!(std::io::stderr(), "gmcl: interrupted"),
        _ => writeln!(std::io::stderr(), "gmcl: error: {e}"),
    };
    std::process::exit(e.exit_code());
}
