//! The ranks of a distributed run: with the `mpi` feature, a process started by an MPI launcher
//! joins the world communicator; otherwise (and in the default build) there is one process and
//! no communicator. Only rank 0 prints results, notices and errors.

use super::Ui;
use gmcl::dist::{Comm, Exchange};
use gmcl::Result;

/// This process's place among the ranks of the run.
pub struct World {
    #[cfg(feature = "mpi")]
    comm: Option<gmcl::dist::MpiComm>,
}

impl World {
    /// Joins the MPI world when an MPI launcher started this process (feature `mpi`).
    pub fn start() -> Result<World> {
        #[cfg(feature = "mpi")]
        {
            let comm = if super::env::launched_by_mpi() {
                Some(gmcl::dist::MpiComm::init()?)
            } else {
                None
            };
            Ok(World { comm })
        }
        #[cfg(not(feature = "mpi"))]
        Ok(World {})
    }

    /// The communicator of a run across ranks (an MPI launch of any size, one rank included).
    pub fn comm(&self) -> Option<&dyn Comm> {
        #[cfg(feature = "mpi")]
        {
            self.comm.as_ref().map(|c| c as &dyn Comm)
        }
        #[cfg(not(feature = "mpi"))]
        None
    }

    /// Runs `f` with the run's communicator (`None`: one process): across several ranks whose
    /// command may run on their GPUs (`on_gpus`), with the rows exchanged between the GPUs as
    /// `exchange` asks ([`gmcl::dist::nccl::open`]), else MPI's.
    pub fn with_comm<R>(
        &self,
        exchange: Exchange,
        on_gpus: bool,
        ui: Ui,
        f: impl FnOnce(Option<&dyn Comm>) -> Result<R>,
    ) -> Result<R> {
        #[cfg(feature = "mpi")]
        if let Some(mpi) = self.comm.as_ref().filter(|c| c.size() > 1) {
            if !on_gpus && exchange == Exchange::Nccl {
                return Err(gmcl::Error::Invalid(
                    "--exchange nccl moves rows between the ranks' GPUs: it needs --engine gpu \
                     (or auto with an input worth a GPU)"
                        .into(),
                ));
            }
            if on_gpus {
                let min_words = super::env::nccl_min_words();
                let notice = |m: &str| ui.notice(m);
                let nccl = gmcl::dist::nccl::open(mpi, exchange, min_words, &notice)?;
                let comm: &dyn Comm = match &nccl {
                    Some(n) => n,
                    None => mpi,
                };
                let done = f(Some(comm));
                // The process ends once the command returns.
                if let Some(n) = nccl {
                    n.end_with_process();
                }
                return done;
            }
        }
        let _ = (exchange, on_gpus, ui);
        f(self.comm())
    }

    /// The number of ranks (1 without a launcher).
    pub fn ranks(&self) -> usize {
        self.comm().map_or(1, |c| c.size())
    }

    /// Leaves MPI (every rank must call it, with nothing more to say to the others).
    pub fn finish(self) {
        #[cfg(feature = "mpi")]
        drop(self.comm);
    }

    /// Whether this process prints: rank 0, or the one process.
    pub fn reports(&self) -> bool {
        self.comm().map_or(true, |c| c.rank() == 0)
    }
}
