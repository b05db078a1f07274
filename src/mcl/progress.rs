//! What a caller of [`super::cluster`] sees of a run as it goes: every iteration as it ends
//! ([`Observer::iteration`]) and, for a progress bar, how far the running iteration has got
//! ([`IterationProgress`], counters the worker threads advance and any thread may read).

use super::Iteration;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Watches an MCL run. Any `FnMut(&Iteration)` is an observer that sees the iterations only.
pub trait Observer {
    /// Called on the calling thread as each iteration ends.
    fn iteration(&mut self, it: &Iteration);

    /// Counters for the running iteration, when the observer shows them; the workers advance
    /// them while the iteration runs (by default nobody does: no counters).
    fn within(&self) -> Option<&IterationProgress> {
        None
    }
}

impl<F: FnMut(&Iteration)> Observer for F {
    fn iteration(&mut self, it: &Iteration) {
        self(it)
    }
}

/// How far the running iteration has got: columns of `M²` made and pruned, and the work done
/// in the unit the engine knows in advance (intermediate products on the CPU engine, columns
/// on the GPU engine), each against its total. Relaxed atomics: a reader sees a recent state,
/// never a torn one.
#[derive(Debug, Default)]
pub struct IterationProgress {
    iteration: AtomicUsize,
    columns: AtomicU64,
    columns_total: AtomicU64,
    work: AtomicU64,
    work_total: AtomicU64,
}

/// A reading of [`IterationProgress`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressReading {
    /// 1-based number of the running iteration (0 before the first).
    pub iteration: usize,
    /// Columns of `M²` done.
    pub columns: u64,
    /// Columns of `M²` in all (0 until the iteration has counted them).
    pub columns_total: u64,
    /// Work done (see [`IterationProgress`]).
    pub work: u64,
    /// Work in all (0 until the iteration has counted it).
    pub work_total: u64,
}

impl IterationProgress {
    /// The state now.
    pub fn read(&self) -> ProgressReading {
        ProgressReading {
            iteration: self.iteration.load(Relaxed),
            columns: self.columns.load(Relaxed),
            columns_total: self.columns_total.load(Relaxed),
            work: self.work.load(Relaxed),
            work_total: self.work_total.load(Relaxed),
        }
    }

    /// Iteration `index` begins; its totals are not known yet.
    pub(crate) fn begin(&self, index: usize) {
        for c in [
            &self.columns,
            &self.work,
            &self.columns_total,
            &self.work_total,
        ] {
            c.store(0, Relaxed);
        }
        self.iteration.store(index, Relaxed);
    }

    /// The running iteration has `columns` columns and `work` units of work to do.
    pub(crate) fn set_totals(&self, columns: u64, work: u64) {
        self.columns_total.store(columns, Relaxed);
        self.work_total.store(work, Relaxed);
    }

    /// `columns` more columns and `work` more units are done.
    pub(crate) fn advance(&self, columns: u64, work: u64) {
        self.columns.fetch_add(columns, Relaxed);
        self.work.fetch_add(work, Relaxed);
    }
}

/// Counters nobody reads, for runs without an observer of their own.
pub(crate) fn unwatched() -> &'static IterationProgress {
    static NOBODY: IterationProgress = IterationProgress {
        iteration: AtomicUsize::new(0),
        columns: AtomicU64::new(0),
        columns_total: AtomicU64::new(0),
        work: AtomicU64::new(0),
        work_total: AtomicU64::new(0),
    };
    &NOBODY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_restart_with_each_iteration() {
        let p = IterationProgress::default();
        p.begin(1);
        p.set_totals(10, 100);
        p.advance(4, 30);
        p.advance(6, 70);
        assert_eq!(
            p.read(),
            ProgressReading {
                iteration: 1,
                columns: 10,
                columns_total: 10,
                work: 100,
                work_total: 100
            }
        );
        p.begin(2);
        let r = p.read();
        assert_eq!((r.iteration, r.columns, r.work, r.work_total), (2, 0, 0, 0));
    }

    #[test]
    fn a_closure_is_an_observer_without_counters() {
        let mut seen = Vec::new();
        let mut f = |it: &Iteration| seen.push(it.index);
        let o: &mut dyn Observer = &mut f;
        assert!(o.within().is_none());
        o.iteration(&Iteration {
            index: 3,
            ..Default::default()
        });
        assert_eq!(seen, vec![3]);
    }
}
