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
    let cli = Cli::parse();
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
    // The pool is started here, also without --threads, so that threads the system refuses (a
    // process limit such as `ulimit -u`) are an error now rather than a panic at first use.
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(cli.threads.unwrap_or(0))
        .build_global()
    {
        let asked = match cli.threads {
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
        exit_with(&e);
    }
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
