//! MCL's CPU half: one iteration with expansion and pruning fused.
//!
//! Each thread makes one column of `M²` (a row of `Mᵀ·Mᵀ`) at a time in its own accumulator
//! ([`PositiveRows`]: a bare value array, since every product is positive; heavy columns are
//! made [`GROUP`] at a time, sharing their reads of `M`, in the order of the row of their largest
//! entry, which puts columns that share more rows together) and prunes and
//! inflates it from there, so the unpruned `M²` is never written out and read back: in the heavy
//! iterations of power-law graphs that is hundreds of millions of entries. The columns and their
//! values are bitwise those the batched path makes (order-free sums), and pruning is the same code
//! ([`super::prune::prune_column`]), so the next matrix equals the batched path's.

use super::{prune, Iteration, IterationProgress, MclParams, Part};
use crate::csr::Csr;
use crate::error::Result;
use crate::scalar::Scalar;
use crate::spgemm::{
    self,
    cpu::rows::{groupable, groups, narrow_columns, PositiveRows, GROUP},
};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Groups of rows per thread: enough for the heavy rows of power-law graphs to balance.
const GROUPS_PER_THREAD: u64 = 64;

/// Whether the fused path applies to `a·b`: every product is positive.
pub(super) fn applies<T: Scalar>(a: &Csr<T>, b: &Csr<T>) -> bool {
    spgemm::cpu::rows::products_are_positive(a.view(), b.view())
}

/// A worker's accumulator and pruning buffers.
type State<T> = (PositiveRows<T>, prune::Scratch<T>);

/// A group's pruned columns and its figures.
struct Done<'a, T> {
    /// The rows of the group, in the order of `part`.
    rows: &'a [u32],
    part: Part<T>,
    expanded: u64,
    /// Thread time making columns of `M²`, and in all.
    expand_seconds: f64,
    seconds: f64,
}

/// One MCL iteration's columns `a·b` (see [`super::expand_prune`]: row `i` of `a` is node
/// `first + i`), whose products must all be positive ([`applies`]).
pub(super) fn iterate<T: Scalar>(
    a: &Csr<T>,
    b: &Csr<T>,
    first: usize,
    params: &MclParams,
    inflation: f64,
    progress: &IterationProgress,
) -> Result<(Csr<T>, Iteration)> {
    let start = Instant::now();
    let n = a.nrows();
    let per_row = spgemm::intermediate_products_per_row(a, b)?;
    let total: u64 = per_row.iter().sum();
    progress.set_totals(n as u64, total);
    let threads = rayon::current_num_threads().max(1) as u64;
    let target = (total + n as u64)
        .div_ceil(threads * GROUPS_PER_THREAD)
        .max(1);
    let cutoff = T::from_f64(params.prune.cutoff());
    let (av, bv) = (a.view(), b.view());
    let narrow = narrow_columns(bv);
    // Groupable rows (dense, products rounded) ordered by the column of their largest value
    // (rows heading for the same attractor share more k, so their groups read fewer rows of
    // M), then the others.
    let ncols = b.ncols();
    // The keys are made once: a sort calls its key function per comparison.
    let mut keys: Vec<(bool, u32, u32)> = (0..n as u32)
        .into_par_iter()
        .map(|i| {
            if groupable(per_row[i as usize], ncols) {
                (false, largest_at(a, i as usize), i)
            } else {
                (true, 0, i)
            }
        })
        .collect();
    keys.par_sort_unstable();
    let order: Vec<u32> = keys.into_iter().map(|k| k.2).collect();
    let ordered: Vec<u64> = order.iter().map(|&i| per_row[i as usize]).collect();
    // One accumulator per worker thread, made once (`map_init` would make one per split of
    // the work, each paged in afresh).
    let states: Vec<Mutex<Option<State<T>>>> = (0..rayon::current_num_threads().max(1))
        .map(|_| Mutex::new(None))
        .collect();
    // The pruned columns are kept in the groups' parts and then copied into the next matrix:
    // twice its size at the end. Past what the memory left holds, the iteration stops.
    let entry = super::entry_bytes::<T>();
    let room = super::room_for_next(a);
    let kept_limit = room.map_or(u64::MAX, |r| r / (2 * entry));
    let kept_so_far = AtomicU64::new(0);
    let done: Vec<Result<Done<'_, T>>> = groups(&ordered, target)
        .into_par_iter()
        .with_max_len(1)
        .map(|g| {
            let slot = rayon::current_thread_index().unwrap_or(0) % states.len();
            // Uncontended: a worker runs one group at a time, and nothing below waits on
            // other rayon work.
            let mut state = states[slot].lock().unwrap_or_else(|e| e.into_inner());
            let (rows, scratch) =
                state.get_or_insert_with(|| (PositiveRows::new(ncols), prune::Scratch::default()));
            crate::interrupt::check()?;
            let t0 = Instant::now();
            let mut d = Done {
                rows: &order[g.clone()],
                part: Part::with_rows(g.len()),
                expanded: 0,
                expand_seconds: 0.0,
                seconds: 0.0,
            };
            let mut prune = |d: &mut Done<'_, T>, i: usize, cols: &[u32], vals: &[T]| {
                d.expanded += cols.len() as u64;
                let node = (first + i) as u32;
                let before = d.part.vals.len();
                d.part
                    .push_column(cols, vals, node, &params.prune, cutoff, inflation, scratch);
                let added = (d.part.vals.len() - before) as u64;
                let kept = kept_so_far.fetch_add(added, Ordering::Relaxed) + added;
                match room {
                    Some(room) if kept > kept_limit => Err(super::next_matrix_too_large(
                        kept,
                        kept.saturating_mul(2 * entry),
                        room,
                    )),
                    _ => Ok(()),
                }
            };
            // Runs of groupable rows are made GROUP at a time.
            let mut run: Vec<(usize, u64)> = Vec::with_capacity(GROUP);
            let mut at = 0;
            let mine = d.rows;
            while at < mine.len() {
                run.clear();
                while at < mine.len() && run.len() < GROUP {
                    let i = mine[at] as usize;
                    if !groupable(per_row[i], ncols) {
                        break;
                    }
                    run.push((i, per_row[i]));
                    at += 1;
                }
                if run.is_empty() {
                    let i = mine[at] as usize;
                    let t = Instant::now();
                    let (cols, vals) = rows.row(av, bv, i, per_row[i]);
                    d.expand_seconds += t.elapsed().as_secs_f64();
                    prune(&mut d, i, cols, vals)?;
                    at += 1;
                    continue;
                }
                let t = Instant::now();
                rows.rows_together(av, bv, narrow.as_deref(), &run);
                d.expand_seconds += t.elapsed().as_secs_f64();
                for (q, &(r, _)) in run.iter().enumerate() {
                    let t = Instant::now();
                    let (cols, vals) = rows.take(av, bv, q);
                    d.expand_seconds += t.elapsed().as_secs_f64();
                    prune(&mut d, r, cols, vals)?;
                }
            }
            d.seconds = t0.elapsed().as_secs_f64();
            let work = mine.iter().map(|&i| per_row[i as usize]).sum();
            progress.advance(mine.len() as u64, work);
            Ok(d)
        })
        .collect();
    let mut it = Iteration {
        products: total,
        batches: 1,
        fused: n as u64,
        ..Default::default()
    };
    // Assembly: each group's columns go back to their rows.
    let mut lens = vec![0u64; n];
    let mut parts = Vec::with_capacity(done.len());
    let (mut expand_thread, mut all_thread) = (0f64, 0f64);
    for d in done {
        let d = d?;
        it.expanded += d.expanded;
        it.chaos = it.chaos.max(d.part.chaos);
        expand_thread += d.expand_seconds;
        all_thread += d.seconds;
        for (&r, &l) in d.rows.iter().zip(&d.part.lens) {
            lens[r as usize] = l as u64;
        }
        parts.push((d.rows, d.part));
    }
    let mut row_ptr: Vec<u64> = Vec::with_capacity(n + 1);
    row_ptr.push(0);
    let mut kept = 0u64;
    for &l in &lens {
        kept += l;
        row_ptr.push(kept);
    }
    drop(lens);
    let mut cols: Vec<u32> = crate::mem::try_filled(kept as usize, 0, "MCL's next matrix")?;
    let mut vals: Vec<T> = crate::mem::try_filled(kept as usize, T::ZERO, "MCL's next matrix")?;
    for (rows, p) in parts {
        let mut from = 0usize;
        for (&r, &l) in rows.iter().zip(&p.lens) {
            let (l, to) = (l as usize, row_ptr[r as usize] as usize);
            cols[to..to + l].copy_from_slice(&p.cols[from..from + l]);
            vals[to..to + l].copy_from_slice(&p.vals[from..from + l]);
            from += l;
        }
    }
    it.kept = kept;
    it.seconds = start.elapsed().as_secs_f64();
    // Expansion and pruning interleave: the wall time is shared out as the threads' time was.
    if all_thread > 0.0 {
        it.expand_seconds = it.seconds * expand_thread / all_thread;
    }
    let next = Csr::from_parts_unchecked(n, ncols, row_ptr, cols, vals);
    Ok((next, it))
}

/// The column of the largest value of row `i` (the first of equal ones; 0 for an empty row).
fn largest_at<T: Scalar>(m: &Csr<T>, i: usize) -> u32 {
    let (cols, vals) = m.row(i);
    let mut best = 0;
    for (t, v) in vals.iter().enumerate() {
        if *v > vals[best] {
            best = t;
        }
    }
    cols.get(best).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::tests::cpu_params;
    use super::super::{cluster, graph_from_edges, iterate as iterate_any, start_matrix};
    use super::*;
    use crate::edges::EdgeList;
    use crate::generate;

    /// An R-MAT graph, as `gmcl generate --undirected` makes it.
    fn rmat(scale: u32, edge_factor: u64, seed: u64) -> EdgeList {
        let mut p = generate::RmatParams::new(scale, edge_factor << scale);
        p.seed = seed;
        p.undirected = true;
        generate::generate(&p).unwrap()
    }

    /// Every iteration of the fused path gives bitwise the batched path's matrix and figures.
    fn same_iterations<T: Scalar>(el: &EdgeList, inflation: f64, prune: prune::PruneParams) {
        let (g, _) = graph_from_edges::<T>(el).unwrap();
        let batched = MclParams {
            fused: false,
            batch_entries: Some(1 << 12),
            inflation,
            prune,
            ..cpu_params()
        };
        let fused = MclParams {
            fused: true,
            ..batched.clone()
        };
        let mut m = start_matrix(&g, 1.0);
        for _ in 0..30 {
            assert!(applies(&m, &m));
            let (a, ia) = iterate_any(&m, &batched, inflation).unwrap();
            let (b, ib) = iterate_any(&m, &fused, inflation).unwrap();
            assert_eq!(a.row_ptr(), b.row_ptr());
            assert_eq!(a.col_idx(), b.col_idx());
            let bits = |m: &Csr<T>| {
                m.values()
                    .iter()
                    .map(|v| v.to_f64().to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&a), bits(&b));
            assert_eq!(
                (ia.chaos.to_bits(), ia.expanded, ia.kept, ia.products),
                (ib.chaos.to_bits(), ib.expanded, ib.kept, ib.products)
            );
            if ia.chaos < 1e-4 {
                break;
            }
            m = a;
        }
    }

    #[test]
    fn fused_iterations_equal_the_batched_ones() {
        let el = rmat(10, 8, 5);
        same_iterations::<f32>(&el, 2.0, prune::PruneParams::default());
        same_iterations::<f64>(&el, 2.0, prune::PruneParams::default());
        // Small S and R make selection and recovery happen in most columns.
        let tight = prune::PruneParams {
            prune: 1000,
            select: 20,
            recover: 30,
            pct: 90,
        };
        same_iterations::<f32>(&el, 1.4, tight);
        same_iterations::<f32>(&rmat(9, 16, 2), 3.0, prune::PruneParams::scheme(1).unwrap());
    }

    #[test]
    fn fused_clustering_equals_the_batched_one() {
        let (g, _) = graph_from_edges::<f32>(&rmat(11, 8, 9)).unwrap();
        let fused = cluster(&g, &cpu_params(), &mut |_| {}).unwrap();
        let batched = MclParams {
            fused: false,
            ..cpu_params()
        };
        let b = cluster(&g, &batched, &mut |_| {}).unwrap();
        assert_eq!(fused.clusters, b.clusters);
        assert_eq!(fused.iterations, b.iterations);
    }

    #[test]
    fn underflowing_values_take_the_batched_path() {
        let el = EdgeList::square(3, vec![(0, 1), (1, 2)], Some(vec![1.0, 1e-30]));
        let (g, _) = graph_from_edges::<f32>(&el).unwrap();
        let m = start_matrix(&g, 1.0);
        assert!(!applies(&m, &m));
        let r = cluster(&g, &cpu_params(), &mut |_| {}).unwrap();
        assert!(r.converged);
    }
}
