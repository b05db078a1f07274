//! MCL across ranks, on 1D blocks of columns of `M` (rows of the transposed matrix `Mᵀ` that
//! [`crate::mcl`] keeps): a rank owns whole columns, so pruning, selection, recovery, inflation
//! and normalisation run per column on their owner, by the single-process code.
//!
//! Each iteration, the owner of column `j` of `M²` makes it from the columns `M[:, k]` for the
//! `k` of `M[:, j]` ([`fetch`]: its own, and remote ones asked for in rounds whose fetched
//! entries stay under `stage_entries`), through [`crate::mcl::expand_prune`] on its rows with
//! their columns renumbered, in the same order, into the fetched rows: every value is summed
//! in the same order of `k` with the same products as in one process, so every matrix, and
//! the clusters, are bitwise the single-process ones for any number of ranks. The chaos is a
//! max-reduction, the figures sums, so every rank takes the same decisions.
//!
//! Interpretation gathers the limit on every rank (in the limit a column keeps its attractors
//! only, about one entry per node) and reads the clusters off it with
//! [`crate::mcl::interpret`].

pub mod fetch;
pub mod graph;
pub mod measures;

pub use graph::{load_graph, GraphBlock};
pub use measures::cluster_info;

use super::{agree, Comm, MAX_MESSAGE};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::mcl::{self, Iteration, IterationProgress, MclParams, MclResult, Observer};
use crate::scalar::Scalar;
use crate::spgemm::EngineKind;
use std::time::Instant;

/// What a distributed run needs besides the communicator, the graph and MCL's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// At most this many parsed edges a rank sends in one round of the input's redistribution.
    pub stage_edges: usize,
    /// At most this many entries of `M` a rank fetches in one round of an iteration (a column
    /// whose `k` alone need more is made in a round of its own).
    pub stage_entries: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stage_edges: 1 << 24,
            stage_entries: 1 << 24,
        }
    }
}

/// Clusters the graph every rank holds a block of ([`load_graph`]) on the CPU engine of each
/// rank. Collective: every rank returns the same result (the clusters included), or the same
/// error. Only the CPU engine runs across ranks: `Gpu` is refused.
pub fn cluster<T: Scalar>(
    comm: &dyn Comm,
    graph: &GraphBlock<T>,
    params: &MclParams,
    opts: &Options,
    observer: &mut dyn Observer,
) -> Result<MclResult> {
    params.validate()?;
    if params.engine == EngineKind::Gpu {
        return Err(Error::EngineUnavailable(
            "the GPU engine does not run MCL across MPI ranks yet: use --engine cpu or auto".into(),
        ));
    }
    let params = &MclParams {
        engine: EngineKind::Cpu,
        ..params.clone()
    };
    let start = Instant::now();
    let m = start_block(graph, params.loop_gain);
    let mut timed = mcl::Timed {
        start,
        setup_seconds: 0.0,
        last_end: 0.0,
        observer,
    };
    let interrupted = || agree(comm, crate::interrupt::check());
    let (m, iterations, converged) = mcl::run_iterations(
        m,
        params,
        &mut timed,
        &interrupted,
        |m, inflation, progress| {
            iterate(comm, &graph.starts, &m, params, inflation, opts, progress)
        },
    )?;
    let (setup_seconds, last_end) = (timed.setup_seconds, timed.last_end);
    let limit = gather(comm, &m)?;
    drop(m);
    let interp = mcl::interpret::interpret(&limit, params.overlap);
    Ok(MclResult {
        clusters: interp.clusters,
        iterations,
        converged,
        attractors: interp.attractors,
        overlap: interp.overlap,
        missing: interp.missing,
        seconds: start.elapsed().as_secs_f64(),
        device_peak_bytes: 0,
        setup_seconds,
        finish_seconds: start.elapsed().as_secs_f64() - last_end.max(setup_seconds),
    })
}

/// The block's rows of the start matrix (transposed), made by the single-process row code.
fn start_block<T: Scalar>(graph: &GraphBlock<T>, loop_gain: f64) -> Csr<T> {
    let g = &graph.rows;
    let mut row_ptr = Vec::with_capacity(g.nrows() + 1);
    let mut cols = Vec::with_capacity(g.nnz() + g.nrows());
    let mut vals = Vec::with_capacity(g.nnz() + g.nrows());
    row_ptr.push(0u64);
    for i in 0..g.nrows() {
        let (c, v) = g.row(i);
        mcl::start_row(c, v, graph.first() + i, loop_gain, &mut cols, &mut vals);
        row_ptr.push(cols.len() as u64);
    }
    Csr::from_parts_unchecked(g.nrows(), g.ncols(), row_ptr, cols, vals)
}

/// One iteration on every rank's block `m` of `Mᵀ` (`starts`: the blocks' first nodes): the
/// block's columns of `M²` made in rounds of fetched rows, pruned and inflated. Returns the
/// block of the next matrix and the iteration's figures over all ranks. Collective.
fn iterate<T: Scalar>(
    comm: &dyn Comm,
    starts: &[usize],
    m: &Csr<T>,
    params: &MclParams,
    inflation: f64,
    opts: &Options,
    progress: &IterationProgress,
) -> Result<(Csr<T>, Iteration)> {
    let t0 = Instant::now();
    let first = starts[comm.rank()];
    let mine: Vec<u32> = (0..m.nrows()).map(|i| m.row(i).0.len() as u32).collect();
    let (lengths, _) = comm.all_gather_u32(&mine);
    let mut received = 4 * (lengths.len() - mine.len()) as u64;
    drop(mine);
    let budget = (opts.stage_entries as u64).clamp(1, fetch::MAX_ROUND_ENTRIES);
    let rounds = agree(comm, fetch::plan(m, &lengths, budget))?;
    let mut count = [rounds.len() as u64];
    comm.max_u64(&mut count);
    let mut it = Iteration::default();
    let mut row_ptr = vec![0u64];
    let (mut cols, mut vals): (Vec<u32>, Vec<T>) = (Vec::new(), Vec::new());
    let empty = m.nrows()..m.nrows();
    for round in 0..count[0] as usize {
        let rows = rounds.get(round).cloned().unwrap_or(empty.clone());
        let (a, b, bytes) = fetch::fetch(comm, starts, m, rows.clone(), &lengths);
        received += bytes;
        let made = if rows.is_empty() {
            Ok(None)
        } else {
            mcl::expand_prune(&a, &b, first + rows.start, params, inflation, progress).map(Some)
        };
        drop((a, b));
        if let Some((part, figures)) = agree(comm, made)? {
            let at = cols.len() as u64;
            row_ptr.extend(part.row_ptr()[1..].iter().map(|&p| at + p));
            cols.extend_from_slice(part.col_idx());
            vals.extend_from_slice(part.values());
            it.chaos = it.chaos.max(figures.chaos);
            it.expanded += figures.expanded;
            it.products += figures.products;
            it.batches += figures.batches;
            it.fused += figures.fused;
            it.expand_seconds += figures.expand_seconds;
        }
    }
    let mut chaos = [it.chaos];
    comm.max_f64(&mut chaos);
    it.chaos = chaos[0];
    it.kept = cols.len() as u64;
    let mut sums = [
        it.expanded,
        it.kept,
        it.products,
        it.batches as u64,
        it.fused,
        received,
    ];
    comm.sum_u64(&mut sums);
    it.exchanged_bytes = sums[5];
    [it.expanded, it.kept, it.products] = [sums[0], sums[1], sums[2]];
    it.batches = sums[3] as usize;
    it.fused = sums[4];
    it.seconds = t0.elapsed().as_secs_f64();
    let next = Csr::from_parts_unchecked(m.nrows(), m.ncols(), row_ptr, cols, vals);
    Ok((next, it))
}

/// The whole matrix from every rank's block of rows, on every rank. Collective.
fn gather<T: Scalar>(comm: &dyn Comm, m: &Csr<T>) -> Result<Csr<T>> {
    let too_large = (m.nnz() > MAX_MESSAGE).then(|| {
        Error::Invalid(format!(
            "the limit's block holds {} entries, more than one message carries ({MAX_MESSAGE}); \
             the process has not converged far enough to interpret across ranks (raise -L)",
            m.nnz()
        ))
    });
    agree(comm, too_large.map_or(Ok(()), Err))?;
    let lens: Vec<u32> = (0..m.nrows()).map(|i| m.row(i).0.len() as u32).collect();
    let (lens, _) = comm.all_gather_u32(&lens);
    let (cols, _) = comm.all_gather_u32(m.col_idx());
    let bits: Vec<u64> = m.values().iter().map(|v| v.to_f64().to_bits()).collect();
    let (bits, _) = comm.all_gather_u64(&bits);
    let mut row_ptr = Vec::with_capacity(lens.len() + 1);
    row_ptr.push(0u64);
    let mut at = 0u64;
    for l in lens {
        at += u64::from(l);
        row_ptr.push(at);
    }
    let vals = bits
        .into_iter()
        .map(|b| T::from_f64(f64::from_bits(b)))
        .collect();
    let n = m.ncols();
    Ok(Csr::from_parts_unchecked(n, n, row_ptr, cols, vals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::ThreadComm;
    use crate::mcl::{Overlap, PruneParams};
    use std::path::Path;

    /// `f` on each rank of a group of `p` threads; the results in rank order.
    fn on_ranks<R: Send>(p: usize, f: impl Fn(&ThreadComm) -> R + Sync) -> Vec<R> {
        let group = ThreadComm::group(p);
        std::thread::scope(|s| {
            let handles: Vec<_> = group.iter().map(|c| s.spawn(|| f(c))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// An R-MAT graph as an edge list file, with ids no edge touches left in.
    fn rmat_file(dir: &Path, scale: u32, edge_factor: u64, seed: u64) -> std::path::PathBuf {
        let mut p = crate::generate::RmatParams::new(scale, edge_factor << scale);
        p.seed = seed;
        p.undirected = true;
        let el = crate::generate::generate(&p).unwrap();
        let mut s = String::new();
        for &(u, v) in &el.edges {
            // Ids times 3 leave gaps that the compaction removes.
            s.push_str(&format!("{} {}\n", 3 * u, 3 * v));
        }
        let f = dir.join(format!("rmat{scale}-{seed}.el"));
        std::fs::write(&f, s).unwrap();
        f
    }

    /// Repeats both ways with different weights, zero weights, self loops, an id touched only
    /// by a self loop, and equal weights given as -0 and 0.
    fn untidy_file(dir: &Path) -> std::path::PathBuf {
        let mut s = String::from("# untidy\n");
        let mut x = 99u64;
        for i in 0..600u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (u, v) = ((x >> 33) % 83, (x >> 13) % 83);
            s.push_str(&format!("{u} {v} {}.25\n", i % 5));
            if i % 7 == 0 {
                s.push_str(&format!("{v} {u} 3\n{u} {u} 2\n"));
            }
        }
        s.push_str("90 90 1\n91 92 -0\n92 91 0\n");
        let f = dir.join("untidy.wel");
        std::fs::write(&f, s).unwrap();
        f
    }

    fn single(path: &Path, params: &MclParams) -> (Csr<f32>, Vec<u32>, MclResult) {
        let loaded = crate::io::load(path, None).unwrap();
        let (g, ids) = crate::mcl::graph_from_edges::<f32>(&loaded.edges).unwrap();
        let r = crate::mcl::cluster(&g, params, &mut |_| {}).unwrap();
        (g, ids, r)
    }

    fn cpu() -> MclParams {
        MclParams {
            engine: EngineKind::Cpu,
            ..Default::default()
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every rank's block of every iteration's matrix is bitwise the single-process matrix's
    /// rows, with the same figures, for 1 to 4 ranks and rounds of a few rows.
    #[test]
    fn every_iteration_equals_the_single_process_one() {
        let dir = tempfile::tempdir().unwrap();
        let tight = MclParams {
            prune: PruneParams {
                prune: 1000,
                select: 20,
                recover: 30,
                pct: 90,
            },
            inflation: 1.4,
            ..cpu()
        };
        let unfused = MclParams {
            fused: false,
            batch_entries: Some(300),
            ..cpu()
        };
        let cases = [
            (rmat_file(dir.path(), 9, 8, 3), cpu()),
            (rmat_file(dir.path(), 8, 16, 4), tight),
            (untidy_file(dir.path()), unfused),
        ];
        for (path, params) in &cases {
            let (g, _, _) = single(path, params);
            let mut whole = vec![crate::mcl::start_matrix(&g, params.loop_gain)];
            let mut figures = Vec::new();
            for _ in 0..8 {
                let last = whole.last().unwrap();
                let (next, it) = crate::mcl::iterate(last, params, params.inflation).unwrap();
                whole.push(next);
                figures.push(it);
            }
            for p in 1..=4 {
                for stage in [7, 1 << 24] {
                    let opts = Options {
                        stage_edges: 50,
                        stage_entries: stage,
                    };
                    on_ranks(p, |c| {
                        let gb = load_graph::<f32>(c, path, None, opts.stage_edges).unwrap();
                        let first = gb.first();
                        let mut m = start_block(&gb, params.loop_gain);
                        let progress = crate::mcl::progress::unwatched();
                        for (t, want) in whole.iter().enumerate() {
                            assert_eq!(m.nrows(), gb.starts[c.rank() + 1] - first);
                            for i in 0..m.nrows() {
                                let (wc, wv) = want.row(first + i);
                                let (gc, gv) = m.row(i);
                                assert_eq!((gc, bits(gv)), (wc, bits(wv)), "{p} ranks, {t}");
                            }
                            let Some(f) = figures.get(t) else { break };
                            let (next, it) = iterate(
                                c,
                                &gb.starts,
                                &m,
                                params,
                                params.inflation,
                                &opts,
                                progress,
                            )
                            .unwrap();
                            assert_eq!(
                                (it.chaos.to_bits(), it.expanded, it.kept, it.products),
                                (f.chaos.to_bits(), f.expanded, f.kept, f.products)
                            );
                            // Rows are exchanged exactly when there are other ranks.
                            assert_eq!(it.exchanged_bytes > 0, p > 1);
                            m = next;
                        }
                    });
                }
            }
        }
    }

    /// The clusters of 1 to 4 ranks are the single-process ones, in every overlap mode.
    #[test]
    fn clusters_equal_the_single_process_ones() {
        let dir = tempfile::tempdir().unwrap();
        let graphs = [rmat_file(dir.path(), 9, 8, 7), untidy_file(dir.path())];
        let opts = Options {
            stage_edges: 100,
            stage_entries: 3000,
        };
        for path in &graphs {
            for (overlap, ranks) in [
                (Overlap::Cut, 1..=4),
                (Overlap::Keep, 3..=3),
                (Overlap::Split, 2..=2),
            ] {
                let params = MclParams {
                    overlap,
                    inflation: 1.6,
                    ..cpu()
                };
                let (_, ids, want) = single(path, &params);
                assert!(want.clusters.len() > 1);
                for p in ranks {
                    let got = on_ranks(p, |c| {
                        let gb = load_graph::<f32>(c, path, None, opts.stage_edges).unwrap();
                        let r = cluster(c, &gb, &params, &opts, &mut |_: &Iteration| {}).unwrap();
                        (gb.ids, r)
                    });
                    for (g_ids, r) in got {
                        assert_eq!(g_ids, ids);
                        assert_eq!(r.clusters, want.clusters, "{p} ranks");
                        assert_eq!(
                            (
                                r.iterations,
                                r.converged,
                                r.attractors,
                                r.overlap,
                                r.missing
                            ),
                            (
                                want.iterations,
                                want.converged,
                                want.attractors,
                                want.overlap,
                                want.missing
                            )
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_bad_weight_or_the_gpu_is_refused_on_every_rank() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.wel");
        let mut s = "0 1 1\n".repeat(40);
        s.push_str("1 2 -3\n");
        std::fs::write(&f, s).unwrap();
        for r in on_ranks(3, |c| load_graph::<f32>(c, &f, None, 8).map(|_| ())) {
            let e = r.unwrap_err().to_string();
            assert!(e.starts_with("rank 2 of 3: "), "{e}");
            assert!(
                e.contains("g.wel") && e.contains("edge (1, 2) weighs -3"),
                "{e}"
            );
        }
        let big = dir.path().join("big.wel");
        std::fs::write(&big, "0 1 1e39\n").unwrap();
        let e = load_graph::<f32>(&crate::dist::SelfComm, &big, None, 8).unwrap_err();
        assert!(
            e.to_string().contains("does not fit the value type f32"),
            "{e}"
        );
        assert!(load_graph::<f64>(&crate::dist::SelfComm, &big, None, 8).is_ok());
        let ok = dir.path().join("ok.el");
        std::fs::write(&ok, "0 1\n").unwrap();
        let gb = load_graph::<f32>(&crate::dist::SelfComm, &ok, None, 8).unwrap();
        let gpu = MclParams {
            engine: EngineKind::Gpu,
            ..Default::default()
        };
        let e = cluster(
            &crate::dist::SelfComm,
            &gb,
            &gpu,
            &Options::default(),
            &mut |_: &Iteration| {},
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 3);
    }
}
