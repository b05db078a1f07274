//! The `gmcl` command line: joins the MPI ranks when launched by `mpirun`, parses arguments,
//! sets up the process (allocation failures, interrupt handler, thread pool), runs the
//! subcommand's module under `cli/`, and exits with the error's status.

mod cli;

use cli::world::World;
use cli::{Cli, Command, Ui};
use gmcl::spgemm::EngineKind;
use gmcl::Error;

/// Notes failed allocations, so that running out of memory exits cleanly ([`cli::oom`]).
#[global_allocator]
static ALLOCATOR: cli::oom::NotingAllocator = cli::oom::NotingAllocator;

fn main() {
    cli::oom::install();
    let stdout_closed = cli::process::guard_closed_stdout();
    // mcl's spellings (`-te 4`, `-overlap split`) are made gmcl's before clap sees them. Parsing
    // prints nothing: what it finds wrong is said once MPI has started, below.
    let parsed =
        cli::mcl_args::rewrite(std::env::args_os()).map(<Cli as clap::Parser>::try_parse_from);
    let configured = cli::env::configure();
    // The command's engine and its input files' size, read once.
    let input = match (&parsed, &configured) {
        (Ok(Ok(cli)), Ok(())) => cli.command.engine_and_input_bytes(),
        _ => None,
    };
    // Under an MPI launcher (feature `mpi`) every rank joins first, so that a usage error is
    // printed once, by rank 0, and every rank leaves MPI before it exits.
    let world = match World::start() {
        Ok(w) => w,
        Err(e) => exit_with(&e, true),
    };
    open_gpu_once_mpi_started(input);
    let cli = match parsed {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            if world.reports() {
                let _ = e.print();
            }
            world.finish();
            std::process::exit(e.exit_code());
        }
        Err(e) => {
            let reports = world.reports();
            world.finish();
            exit_with(&e, reports);
        }
    };
    let result = run(cli, &world, configured, input);
    let status = result
        .err()
        .map(|e| match cli::process::stdout_outcome(e, stdout_closed) {
            Ok(status) => status,
            Err(e) => report(&e, world.reports()),
        });
    gmcl::engine::finish_opening_gpu();
    // Leaves MPI (every rank reached here with the same outcome) only once rank 0 has printed
    // the error: a rank that exited first would have mpirun end the job, rank 0's message
    // possibly unprinted.
    world.finish();
    if let Some(status) = status {
        std::process::exit(status);
    }
}

/// Under an MPI launcher, a rank whose command may compute on its GPU starts opening it (the
/// launcher's local rank names which) on a thread as soon as MPI has started, before it reads
/// its share of the input; one process opens it in its command, while the input loads. Not
/// while MPI starts: Open MPI's start adds variables to the environment (`setenv` may move and
/// free glibc's array of them) while the driver, opening the GPU, reads it (`getenv`) on the
/// other thread, which can crash the rank. `input`: the command's engine and input bytes
/// ([`Command::engine_and_input_bytes`]).
fn open_gpu_once_mpi_started(input: Option<(EngineKind, Option<u64>)>) {
    #[cfg(feature = "mpi")]
    if let (true, Some((engine, bytes))) = (cli::env::launched_by_mpi(), input) {
        gmcl::engine::start_opening_gpu(engine, bytes);
    }
    #[cfg(not(feature = "mpi"))]
    let _ = input;
}

/// Sets the process up (`configured`: whether the settings read from the environment applied)
/// and runs the subcommand, whose engine and input bytes are `input`.
fn run(
    cli: Cli,
    world: &World,
    configured: Result<(), Error>,
    input: Option<(EngineKind, Option<u64>)>,
) -> Result<(), Error> {
    let ui = Ui {
        quiet: cli.quiet || !world.reports(),
    };
    // Ctrl-C, SIGTERM and the other ending signals set a flag that the long loops check: the
    // run unwinds, temporary output files are removed, and the process exits with status 130.
    gmcl::interrupt::install()?;
    configured?;
    cli::process::start_pool(cli.threads, ui)?;
    if world.ranks() > 1
        && !matches!(
            cli.command,
            Command::Tricount(_) | Command::Spgemm(_) | Command::Cluster(_)
        )
    {
        return Err(Error::Invalid(format!(
            "only tricount, spgemm and cluster run across MPI ranks yet; run this command \
             without mpirun (or with -n 1), not on {} ranks",
            world.ranks()
        )));
    }
    cli.command.notice_skipped_columns(ui);
    let on_gpus = input.is_some_and(|(engine, bytes)| gmcl::engine::gpu_may_pay(engine, bytes));
    let exchange = match &cli.command {
        Command::Tricount(_) => gmcl::dist::tricount::exchange_for(cli.exchange),
        _ => cli.exchange,
    };
    if let (true, Some((engine, bytes))) = (world.comm().is_some(), input) {
        // Each rank opens its GPU while it reads its share of the input (one process does so
        // in its command).
        let share = bytes.map(|b| b / world.ranks() as u64);
        gmcl::engine::open_gpu_early(engine, share);
    }
    world.with_comm(exchange, on_gpus, ui, |comm| match cli.command {
        Command::Generate(a) => cli::generate::run(a, ui),
        Command::Info(a) => cli::info::run(a),
        Command::Spgemm(a) => cli::spgemm::run(a, ui, comm),
        Command::Bench(a) => cli::bench::run(a, ui),
        Command::Tricount(a) => cli::tricount::run(a, ui, comm, cli.exchange),
        Command::Cluster(a) => cli::cluster::run(a, ui, comm),
        Command::Dist(a) => cli::dist::run(a),
        Command::Convert(a) => cli::convert::run(a, ui),
    })
}

/// Prints the error and exits with its status; see [`report`]. Called only once every value of
/// the run has been dropped (temporary output files removed).
fn exit_with(e: &Error, reports: bool) -> ! {
    std::process::exit(report(e, reports));
}

/// Prints the error when `reports` (the other ranks of a distributed run hold the same error
/// and stay silent) and returns the status to exit with.
fn report(e: &Error, reports: bool) -> i32 {
    use std::io::Write;
    if reports {
        // Should stderr be closed, the exit status still tells.
        let _ = match e {
            Error::Interrupted => writeln!(std::io::stderr(), "gmcl: interrupted"),
            _ => writeln!(std::io::stderr(), "gmcl: error: {e}"),
        };
    }
    e.exit_code()
}
