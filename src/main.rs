//! The `gmcl` command line: parses arguments, sets up the process (interrupt handler, thread
//! pool), runs the subcommand's module under `cli/`, and exits with the error's status.

mod cli;

use clap::Parser;
use cli::{Cli, Command, Ui};
use gmcl::Error;

fn main() {
    let cli = Cli::parse();
    let ui = Ui { quiet: cli.quiet };
    // Ctrl-C and SIGTERM set a flag that the long loops check: the run unwinds, temporary output
    // files are removed, and the process exits with status 130 below.
    if let Err(e) = gmcl::interrupt::install() {
        exit_with(&e);
    }
    cli::env::configure();
    if let Some(n) = cli.threads {
        if n == 0 {
            exit_with(&Error::Invalid("--threads must be at least 1".into()));
        }
        let n = capped_threads(n, ui);
        if let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
        {
            exit_with(&Error::Invalid(format!("cannot start {n} threads: {e}")));
        }
    }
    let result = match cli.command {
        Command::Generate(a) => cli::generate::run(a, ui),
        Command::Info(a) => cli::info::run(a),
        Command::Spgemm(a) => cli::spgemm::run(a, ui),
        Command::Bench(a) => cli::bench::run(a, ui),
        Command::Tricount(a) => cli::tricount::run(a, ui),
        Command::Cluster(a) => cli::cluster::run(a, ui),
        Command::Dist(a) => cli::dist::run(a),
    };
    if let Err(e) = result {
        exit_with(&e);
    }
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
