//! The ranks of a distributed run: with the `mpi` feature, a process started by an MPI launcher
//! joins the world communicator; otherwise (and in the default build) there is one process and
//! no communicator. Only rank 0 prints results, notices and errors.

use gmcl::dist::Comm;
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
