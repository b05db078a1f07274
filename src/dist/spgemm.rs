//! C = A·B across ranks, on 1D blocks of rows ([`MatrixBlock`]): each rank makes the rows of C
//! of its block of A.
//!
//! Row `i` of C needs the rows `B[k, :]` for the `k` of `A[i, :]`. A rank's rows of A are cut
//! into rounds whose distinct needed rows of B hold at most `stage_entries` entries (a row of A
//! that alone needs more is a round of its own); in each round the needed rows that other ranks
//! own are fetched from them (every rank answering every request of the round), and the round's
//! rows of A are multiplied by the single-process CPU engine against the needed rows only: A's
//! columns are renumbered to the needed rows' positions, which keeps their order, so each entry
//! of C sums the same products in the same order as the single-process run, bitwise.
//!
//! Before the rounds, A's rows move to blocks of equal products where the blocks of equal row
//! counts differ by more than 10% (`mcl::balance::rebalance`, shared with MCL): C's block of a
//! rank is then `MatrixBlock::cut`'s rows, not `blocks`'s.
//!
//! [`send_to_root`] then hands C's blocks to rank 0 in rank order, in pieces of at most
//! `stage_entries` entries and rows, for a writer that streams them: rank 0 never holds more of
//! C than its own block and one piece. (`.npz`, whose arrays come one after another, is written
//! in three such passes, one per array: [`super::npz`].)

use super::matrix::MatrixBlock;
use super::words::{from_words, to_words};
use super::{agree, asked_entries_bound, Comm, MAX_MESSAGE};
use crate::csr::Csr;
use crate::error::Result;
use crate::scalar::Scalar;
use crate::spgemm::cpu::CpuEngine;
use crate::spgemm::{EngineKind, SpgemmOptions};
use rayon::prelude::*;
use std::ops::Range;
use std::time::Instant;

/// The bounds of a distributed product's exchanges.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// At most this many parsed entries a rank sends in one round of the input's redistribution.
    pub stage_edges: usize,
    /// At most this many entries of B's rows a rank gathers for one round of its product (a row
    /// of A needing more is a round alone), and of C's in one piece sent to rank 0.
    pub stage_entries: usize,
    /// The engine of this rank's rows: `Cpu` (the rows bitwise the single-process CPU
    /// product's) or `Gpu` (gMAGNUS on the rank's GPU: the structure exact, the values within
    /// rounding). `Auto` is resolved by the caller ([`products`] gives the rank's work).
    pub engine: EngineKind,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stage_edges: 1 << 24,
            stage_entries: 1 << 24,
            engine: EngineKind::Cpu,
        }
    }
}

/// Figures of a distributed product, the same on every rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Intermediate products `A[i,k]·B[k,j]`, over all ranks.
    pub intermediate_products: u64,
    /// Entries of C, over all ranks.
    pub nnz: u64,
    /// The slowest rank's time for its block (fetching included).
    pub seconds: f64,
    /// Rounds of the row exchange (the most any rank needed).
    pub rounds: u64,
    /// Ranks whose rows the GPU engine made.
    pub gpu_ranks: u64,
    /// Each step's slowest and fastest rank: "balance" (A's rows moved to blocks of equal
    /// work), "prepare" (the rounds' rows of B fetched, the operands made), "multiply" (on the
    /// rank's engine) and, of that, "transfers" (the copies to and from the GPU; 0 on the CPU).
    pub steps: Vec<super::Step>,
}

/// Computes this rank's block of rows of `C = A·B`, A and B given as every rank's block of rows.
/// Collective: every rank gets its block and the same figures, or the same error.
pub fn multiply<T: Scalar>(
    comm: &dyn Comm,
    a: &MatrixBlock<T>,
    b: &MatrixBlock<T>,
    opts: &Options,
) -> Result<(MatrixBlock<T>, Stats)> {
    let start = Instant::now();
    if a.ncols != b.blocks.n {
        return Err(crate::spgemm::shapes_differ(
            (a.blocks.n, a.ncols),
            (b.blocks.n, b.ncols),
            std::ptr::eq(a, b),
        ));
    }
    let lengths: Vec<u64> = (0..b.rows.nrows())
        .map(|i| b.rows.row_len(i) as u64)
        .collect();
    let (b_len, _) = comm.all_gather_u64(&lengths);
    let clock = Instant::now();
    let balanced = balanced(comm, a, &b_len);
    let balancing = clock.elapsed().as_secs_f64();
    let a = balanced.as_ref().unwrap_or(a);
    let budget = opts.stage_entries.clamp(1, asked_entries_bound(comm, 2)) as u64;
    let plan = plan_rounds(&a.rows, &b_len, budget);
    let mut rounds = [plan.len() as u64];
    comm.max_u64(&mut rounds);
    let cpu = CpuEngine::default();
    let gpu = match opts.engine {
        EngineKind::Gpu => Some(agree(comm, crate::spgemm::gpu::GpuEngine::open())?),
        _ => None,
    };
    let mut parts = Vec::new();
    let mut products = 0u64;
    // This rank's seconds making the rounds' operands, multiplying, and of that copying to
    // and from its GPU.
    let (mut prepare, mut multiplying, mut transfers) = (0.0, 0.0, 0.0);
    // Each needed column's position in its round (`renumbered`'s map, made once).
    let mut positions = vec![0u32; a.ncols];
    for round in 0..rounds[0] as usize {
        let clock = Instant::now();
        let rows = plan.get(round).cloned().unwrap_or(0..0);
        let needed = needed_rows(&a.rows, rows.clone());
        let remote: Vec<u32> = needed
            .iter()
            .copied()
            .filter(|&k| b.owner(k as usize) != b.rank)
            .collect();
        let fetched = fetch_rows(comm, b, &remote);
        let made = gather_needed(b, &needed, &remote, &fetched).and_then(|bn| {
            let an = renumbered(&a.rows, rows, &needed, &mut positions);
            prepare += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let made = match &gpu {
                Some(g) => g
                    .multiply(&an, &bn, &SpgemmOptions::default())
                    .map(|(c, st)| {
                        transfers += (st.seconds - st.device_seconds).max(0.0);
                        (c, st.intermediate_products)
                    }),
                None => cpu.multiply_counted(&an, &bn, &SpgemmOptions::default()),
            };
            multiplying += clock.elapsed().as_secs_f64();
            made
        });
        let (c, p) = agree(comm, made)?;
        products += p;
        if c.nrows() > 0 {
            parts.push(c);
        }
        agree(comm, crate::interrupt::check())?;
    }
    // One round (the usual case) is C's block as made, with no copy.
    let c = match parts.is_empty() {
        true => Csr::empty(a.rows.nrows(), b.ncols),
        false => Csr::stack(parts, b.ncols),
    };
    let mut sums = [products, c.nnz() as u64, u64::from(gpu.is_some())];
    comm.sum_u64(&mut sums);
    let mut seconds = [start.elapsed().as_secs_f64()];
    comm.max_f64(&mut seconds);
    let steps = [
        ("balance", balancing),
        ("prepare", prepare),
        ("multiply", multiplying),
        ("transfers", transfers),
    ];
    let stats = Stats {
        intermediate_products: sums[0],
        nnz: sums[1],
        seconds: seconds[0],
        rounds: rounds[0],
        gpu_ranks: sums[2],
        steps: super::timed_steps(comm, &steps),
    };
    let block = MatrixBlock {
        blocks: a.blocks.clone(),
        ncols: b.ncols,
        rank: a.rank,
        rows: c,
    };
    Ok((block, stats))
}

/// A's blocks differing in work by more than this factor from the mean are cut again.
const BALANCE_SLACK: super::mcl::balance::Slack = super::mcl::balance::Slack {
    ratio: 1.1,
    least: 0,
};

/// A's rows moved to blocks of equal products (each row's products from `b_len`, every row of
/// B's length), or `None` where the blocks are within [`BALANCE_SLACK`] of it: R-MAT puts its
/// hubs at low ids, and blocks of equal row counts would give the first rank of two most of C.
/// The rows of C do not depend on the rank that makes them. Collective.
fn balanced<T: Scalar>(
    comm: &dyn Comm,
    a: &MatrixBlock<T>,
    b_len: &[u64],
) -> Option<MatrixBlock<T>> {
    let rows = a.rows.nrows();
    let work: Vec<u64> = (0..rows)
        .into_par_iter()
        .map(|i| a.rows.row(i).0.iter().map(|&k| b_len[k as usize]).sum())
        .collect();
    let own: Vec<u32> = (0..rows).map(|i| a.rows.row_len(i) as u32).collect();
    let (lengths, _) = comm.all_gather_u32(&own);
    let starts: Vec<usize> = (0..=comm.size()).map(|p| a.start(p)).collect();
    let moved =
        super::mcl::balance::rebalance(comm, &a.rows, &starts, &work, &lengths, BALANCE_SLACK)?;
    Some(MatrixBlock {
        blocks: super::Blocks::at(moved.starts),
        ncols: a.ncols,
        rank: a.rank,
        rows: moved.rows,
    })
}

/// This rank's intermediate products (the work `auto` weighs for the rank's engine).
/// Collective: every rank learns every row of B's length.
pub fn products<T: Scalar>(comm: &dyn Comm, a: &MatrixBlock<T>, b: &MatrixBlock<T>) -> u64 {
    let lengths: Vec<u64> = (0..b.rows.nrows())
        .map(|i| b.rows.row_len(i) as u64)
        .collect();
    let (b_len, _) = comm.all_gather_u64(&lengths);
    a.rows
        .col_idx()
        .iter()
        .map(|&k| b_len.get(k as usize).copied().unwrap_or(0))
        .sum()
}

/// Consecutive runs of A's rows whose distinct needed rows of B hold at most `budget` entries
/// (`b_len`: every row of B's length); a run holds at least one row.
fn plan_rounds<T: Scalar>(a: &Csr<T>, b_len: &[u64], budget: u64) -> Vec<Range<usize>> {
    // All of B fits: one round, whatever the rows need.
    if b_len.iter().sum::<u64>() <= budget {
        return match a.nrows() {
            0 => Vec::new(),
            rows => std::iter::once(0..rows).collect(),
        };
    }
    // The round that last counted each row of B.
    let mut seen = vec![usize::MAX; b_len.len()];
    let mut out = Vec::new();
    let (mut start, mut cost) = (0usize, 0u64);
    for i in 0..a.nrows() {
        let ks = a.row(i).0;
        let extra: u64 = ks
            .iter()
            .filter(|&&k| seen[k as usize] != out.len())
            .map(|&k| b_len[k as usize])
            .sum();
        if i > start && cost + extra > budget {
            out.push(start..i);
            start = i;
            // Every column of a row is distinct, and none is counted in the new round yet.
            cost = ks.iter().map(|&k| b_len[k as usize]).sum();
        } else {
            cost += extra;
        }
        for &k in ks {
            seen[k as usize] = out.len();
        }
    }
    if start < a.nrows() {
        out.push(start..a.nrows());
    }
    out
}

/// The distinct columns of A's `rows`, sorted: the rows of B they need (marked in a bitmap of
/// the columns by every thread; a round of fewer entries than the bitmap's words sorts them
/// instead, so that many small rounds do not each clear a bitmap of every column).
fn needed_rows<T: Scalar>(a: &Csr<T>, rows: Range<usize>) -> Vec<u32> {
    let ptr = a.row_ptr();
    let cols = &a.col_idx()[ptr[rows.start] as usize..ptr[rows.end] as usize];
    if cols.len() < a.ncols().div_ceil(64) {
        let mut ks = cols.to_vec();
        ks.sort_unstable();
        ks.dedup();
        return ks;
    }
    super::distinct_outside(cols, a.ncols(), 0..0)
}

/// Rows of B fetched from other ranks: offsets, columns, values, in the order asked.
struct Fetched<T> {
    ptr: Vec<u64>,
    cols: Vec<u32>,
    vals: Vec<T>,
}

/// One round of the row exchange: this rank asks for the rows `asked` (sorted ids of other
/// ranks' blocks of B) and answers the others' requests from its block. Collective.
fn fetch_rows<T: Scalar>(comm: &dyn Comm, b: &MatrixBlock<T>, asked: &[u32]) -> Fetched<T> {
    let parts = b.blocks.parts;
    let first = b.first();
    // Sorted ids are grouped by owner already: blocks are consecutive.
    let mut ask_counts = vec![0usize; parts];
    for &k in asked {
        ask_counts[b.owner(k as usize)] += 1;
    }
    let (requests, req_counts) = comm.all_to_all_u32(asked, &ask_counts);
    let row = |k: u32| b.rows.row(k as usize - first);
    let lengths: Vec<u32> = requests.iter().map(|&k| row(k).0.len() as u32).collect();
    let (got_lengths, _) = comm.all_to_all_u32(&lengths, &req_counts);
    let mut entry_counts = vec![0usize; parts];
    let mut cols = Vec::new();
    let mut words = Vec::new();
    let mut at = 0;
    for (r, &n) in req_counts.iter().enumerate() {
        for &k in &requests[at..at + n] {
            let (c, v) = row(k);
            cols.extend_from_slice(c);
            words.extend(to_words(v));
            entry_counts[r] += c.len();
        }
        at += n;
    }
    let (got_cols, _) = comm.all_to_all_u32(&cols, &entry_counts);
    let word_counts: Vec<usize> = entry_counts.iter().map(|&c| T::WORDS * c).collect();
    let (got_words, _) = comm.all_to_all_u32(&words, &word_counts);
    let mut ptr = Vec::with_capacity(asked.len() + 1);
    ptr.push(0u64);
    for &l in &got_lengths {
        ptr.push(ptr[ptr.len() - 1] + u64::from(l));
    }
    Fetched {
        ptr,
        cols: got_cols,
        vals: from_words(&got_words),
    }
}

/// The rows `needed` of B, stacked in that order: this rank's own from its block, the others
/// (`remote`, a sorted subsequence of `needed`) from `fetched`.
fn gather_needed<T: Scalar>(
    b: &MatrixBlock<T>,
    needed: &[u32],
    remote: &[u32],
    fetched: &Fetched<T>,
) -> Result<Csr<T>> {
    let first = b.first();
    let (mut ptr, mut cols, mut vals) = (vec![0u64], Vec::new(), Vec::new());
    let mut r = 0;
    for &k in needed {
        let (c, v) = if remote.get(r) == Some(&k) {
            let span = fetched.ptr[r] as usize..fetched.ptr[r + 1] as usize;
            r += 1;
            (&fetched.cols[span.clone()], &fetched.vals[span])
        } else {
            b.rows.row(k as usize - first)
        };
        cols.extend_from_slice(c);
        vals.extend_from_slice(v);
        ptr.push(cols.len() as u64);
    }
    Csr::from_parts(needed.len(), b.ncols, ptr, cols, vals)
}

/// A's `rows`, their columns renumbered to positions in `needed` (sorted, holding every column
/// of those rows): the order of each row's columns, and so of its products, is kept. `at` (one
/// slot per column of A, kept across rounds: only the needed columns' slots are written, and
/// only they are read) takes each needed column's position, looked up by every thread.
fn renumbered<T: Scalar>(a: &Csr<T>, rows: Range<usize>, needed: &[u32], at: &mut [u32]) -> Csr<T> {
    let ptr = a.row_ptr();
    let span = ptr[rows.start] as usize..ptr[rows.end] as usize;
    {
        let out = crate::mem::SharedSlice::new_init(at);
        needed.par_iter().enumerate().for_each(|(i, &k)| {
            // SAFETY: the needed columns are distinct: each place is written once.
            unsafe { out.write(k as usize, i as u32) }
        });
    }
    let cols = a.col_idx()[span.clone()]
        .par_iter()
        .with_min_len(1 << 14)
        .map(|&k| at[k as usize])
        .collect();
    let values = a.values()[span.clone()]
        .par_iter()
        .with_min_len(1 << 14)
        .copied()
        .collect();
    Csr::from_parts_unchecked(
        rows.len(),
        needed.len(),
        ptr[rows.start..=rows.end]
            .par_iter()
            .map(|&p| p - span.start as u64)
            .collect(),
        cols,
        values,
    )
}

/// Hands every rank's block of C to rank 0 in rank order, in pieces of at most `stage_entries`
/// entries and rows (a longer row is a piece alone): rank 0 calls `sink(first_row, piece)` for
/// each, its own block first, with the piece's first global row. Once `sink` fails, rank 0 calls
/// it no more but takes part in the rest of the exchange, and returns that error (the other ranks
/// return `Ok`: the caller ends the writing in [`agree`]). Collective.
pub fn send_to_root<T: Scalar>(
    comm: &dyn Comm,
    c: &MatrixBlock<T>,
    stage_entries: usize,
    mut sink: impl FnMut(usize, &Csr<T>) -> Result<()>,
) -> Result<()> {
    let budget = stage_entries.clamp(1, MAX_MESSAGE / 2) as u64;
    let pieces = cut_pieces(&c.rows, budget);
    let (counts, _) = comm.all_gather_u64(&[pieces.len() as u64]);
    let root = comm.rank() == 0;
    let mut written: Result<()> = if root { sink(0, &c.rows) } else { Ok(()) };
    for (sender, &n) in counts.iter().enumerate().skip(1) {
        for p in 0..n as usize {
            // The sender gives its piece `p`; every other rank sends nothing.
            let rows = match comm.rank() == sender {
                true => pieces.get(p).cloned().unwrap_or(0..0),
                false => 0..0,
            };
            let piece = send_piece(comm, &c.rows, rows);
            if let (true, Ok(()), Some((offset, piece))) = (root, &written, piece) {
                written = sink(c.start(sender) + offset, &piece);
            }
            agree(comm, crate::interrupt::check())?;
        }
    }
    written
}

/// Consecutive runs of `m`'s rows holding at most `budget` entries and `budget` rows (at least
/// one row each): a run of empty rows is cut too, as each row's length travels.
pub(super) fn cut_pieces<T: Scalar>(m: &Csr<T>, budget: u64) -> Vec<Range<usize>> {
    let ptr = m.row_ptr();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..m.nrows() {
        if i > start && (ptr[i + 1] - ptr[start] > budget || (i + 1 - start) as u64 > budget) {
            out.push(start..i);
            start = i;
        }
    }
    if start < m.nrows() {
        out.push(start..m.nrows());
    }
    out
}

/// One piece to rank 0: the one sending rank gives its `rows` of `m`; rank 0 gets the
/// piece's first row (within the sender's block) and its rows. Collective.
fn send_piece<T: Scalar>(
    comm: &dyn Comm,
    m: &Csr<T>,
    rows: Range<usize>,
) -> Option<(usize, Csr<T>)> {
    let to_root = |n: usize| {
        let mut counts = vec![0usize; comm.size()];
        counts[0] = n;
        counts
    };
    let ptr = m.row_ptr();
    let span = ptr[rows.start] as usize..ptr[rows.end] as usize;
    // The sender's head: the piece's first row, then its rows' lengths; the others send nothing.
    let mut head = Vec::new();
    if !rows.is_empty() {
        head.push(rows.start as u32);
        head.extend(rows.clone().map(|i| m.row_len(i) as u32));
    }
    let (head, _) = comm.all_to_all_u32(&head, &to_root(head.len()));
    let (cols, _) = comm.all_to_all_u32(&m.col_idx()[span.clone()], &to_root(span.len()));
    let words = to_words(&m.values()[span]);
    let (words, _) = comm.all_to_all_u32(&words, &to_root(words.len()));
    if comm.rank() != 0 {
        return None;
    }
    let (&first, lengths) = head.split_first()?;
    let mut ptr = vec![0u64];
    for &l in lengths {
        ptr.push(ptr[ptr.len() - 1] + u64::from(l));
    }
    let vals = from_words(&words);
    let piece = Csr::from_parts_unchecked(lengths.len(), m.ncols(), ptr, cols, vals);
    Some((first as usize, piece))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::ThreadComm;
    use crate::generate::rng::SplitMix64;

    /// A random `r x c` matrix with values whose sums depend on their order.
    fn random(r: usize, c: usize, per_row: usize, seed: u64) -> Csr<f64> {
        let mut rng = SplitMix64::new(seed);
        let mut edges = Vec::new();
        let mut weights = Vec::new();
        for i in 0..r {
            // Uneven rows: some empty, some long.
            for _ in 0..(rng.next_u64() as usize % (2 * per_row + 1)) {
                edges.push((i as u32, (rng.next_u64() % c as u64) as u32));
                weights.push((rng.next_u64() % 100_000) as f64 / 7.0 - 5e3);
            }
        }
        let el = crate::EdgeList {
            nrows: r,
            ncols: c,
            edges,
            weights: Some(weights),
        };
        Csr::from_edges(&el, &Default::default()).unwrap()
    }

    /// `A·B` on `ranks` threads standing for ranks: rank 0's stack of what it was sent, the
    /// figures of every rank, and the rows each sent piece started at.
    fn on_ranks(
        ranks: usize,
        a: &Csr<f64>,
        b: &Csr<f64>,
        stage: usize,
    ) -> (Csr<f64>, Vec<Stats>, Vec<usize>) {
        let opts = Options {
            stage_edges: stage,
            stage_entries: stage,
            ..Default::default()
        };
        let group = ThreadComm::group(ranks);
        let results: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|comm| {
                    s.spawn(move || {
                        let (ab, bb) = (
                            MatrixBlock::of_whole(comm, a),
                            MatrixBlock::of_whole(comm, b),
                        );
                        let (c, stats) = multiply(comm, &ab, &bb, &opts).unwrap();
                        let mut pieces = Vec::new();
                        send_to_root(comm, &c, stage, |first, m| {
                            pieces.push((first, m.clone()));
                            Ok(())
                        })
                        .unwrap();
                        (stats, pieces)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let (mut ptr, mut cols, mut vals, mut firsts) = (vec![0u64], vec![], vec![], vec![]);
        for (first, m) in &results[0].1 {
            assert_eq!(*first, ptr.len() - 1, "pieces come in row order");
            firsts.push(*first);
            for i in 0..m.nrows() {
                cols.extend_from_slice(m.row(i).0);
                vals.extend_from_slice(m.row(i).1);
                ptr.push(cols.len() as u64);
            }
        }
        for (_, pieces) in &results[1..] {
            assert!(pieces.is_empty(), "only rank 0 is sent C");
        }
        let c = Csr::from_parts(a.nrows(), b.ncols(), ptr, cols, vals).unwrap();
        (c, results.into_iter().map(|r| r.0).collect(), firsts)
    }

    fn bits(m: &Csr<f64>) -> Vec<u64> {
        m.values().iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn products_on_1_to_4_ranks_are_the_single_process_ones_bitwise() {
        let a = random(37, 23, 6, 1);
        let b = random(23, 51, 9, 2);
        let sq = random(41, 41, 8, 3);
        for (a, b) in [(&a, &b), (&sq, &sq)] {
            let (want, products) = CpuEngine::default()
                .multiply_counted(a, b, &SpgemmOptions::default())
                .unwrap();
            assert!(want.nnz() > 100);
            for ranks in 1..=4 {
                for stage in [1, 40, 1 << 20] {
                    let (got, stats, firsts) = on_ranks(ranks, a, b, stage);
                    let what = format!("{ranks} ranks, stage {stage}");
                    assert_eq!(got.row_ptr(), want.row_ptr(), "{what}");
                    assert_eq!(got.col_idx(), want.col_idx(), "{what}");
                    assert_eq!(bits(&got), bits(&want), "{what}");
                    for s in &stats {
                        assert_eq!(s.intermediate_products, products, "{what}");
                        assert_eq!(s.nnz, want.nnz() as u64, "{what}");
                        assert_eq!(s.rounds, stats[0].rounds);
                    }
                    // Small stages make many rounds and pieces.
                    if stage == 1 {
                        assert!(stats[0].rounds > 5, "{what}");
                        assert!(ranks == 1 || firsts.len() > ranks, "{what}");
                    } else if stage == 1 << 20 {
                        assert_eq!(stats[0].rounds, 1, "{what}");
                        assert_eq!(firsts.len(), ranks, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn needed_rows_are_the_sorted_distinct_columns_of_small_and_large_rounds() {
        // 1000 columns: a round of fewer than 16 entries sorts, a larger one marks a bitmap.
        let a = random(40, 1000, 5, 7);
        for rows in [0..1, 0..3, 0..40, 10..30] {
            let ptr = a.row_ptr();
            let mut want = a.col_idx()[ptr[rows.start] as usize..ptr[rows.end] as usize].to_vec();
            want.sort_unstable();
            want.dedup();
            assert_eq!(needed_rows(&a, rows.clone()), want, "{rows:?}");
        }
    }

    #[test]
    fn a_front_heavy_matrix_is_cut_at_equal_products() {
        // Rows 0..4 name every column, the other 60 one column each: equal row counts would
        // give the first rank nearly all of C.
        let (n, m) = (64, 32);
        let mut dense = vec![0.0; n * m];
        for i in 0..n {
            for j in 0..m {
                if i < 4 || j == i % m {
                    dense[i * m + j] = (i * m + j + 1) as f64;
                }
            }
        }
        let a = Csr::from_dense(n, m, &dense);
        let b = random(m, 40, 6, 5);
        let (want, _) = CpuEngine::default()
            .multiply_counted(&a, &b, &SpgemmOptions::default())
            .unwrap();
        for ranks in 2..=3 {
            let (got, _, firsts) = on_ranks(ranks, &a, &b, 1 << 20);
            assert_eq!(got.row_ptr(), want.row_ptr(), "{ranks} ranks");
            assert_eq!(got.col_idx(), want.col_idx(), "{ranks} ranks");
            assert_eq!(bits(&got), bits(&want), "{ranks} ranks");
            assert_eq!(firsts.len(), ranks);
            assert!(
                firsts[1] <= 4,
                "rank 1 starts among the heavy rows: {firsts:?}"
            );
        }
    }

    #[test]
    fn mismatched_shapes_are_refused_on_every_rank() {
        let a = random(5, 4, 2, 1);
        let b = random(5, 4, 2, 2);
        for comm in ThreadComm::group(1) {
            let e = multiply(
                &comm,
                &MatrixBlock::of_whole(&comm, &a),
                &MatrixBlock::of_whole(&comm, &b),
                &Options::default(),
            )
            .unwrap_err()
            .to_string();
            assert_eq!(
                e,
                "cannot multiply: A is 5 x 4 but B is 5 x 4 (A's columns must equal B's rows)"
            );
        }
    }

    #[test]
    fn rounds_hold_the_budget_unless_one_row_needs_more() {
        let a = Csr::from_dense(3, 3, &[1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        // Rows of B of 2, 3 and 4 entries.
        assert_eq!(plan_rounds(&a, &[2, 3, 4], 5), vec![0..1, 1..2, 2..3]);
        // Rows needed again in the same round count once.
        assert_eq!(plan_rounds(&a, &[2, 3, 4], 9), vec![0..3]);
        assert_eq!(plan_rounds(&a, &[2, 3, 4], 8), vec![0..1, 1..2, 2..3]);
        assert_eq!(plan_rounds(&a, &[2, 3, 4], 100), vec![0..3]);
        assert_eq!(plan_rounds(&a, &[2, 3, 4], 1), vec![0..1, 1..2, 2..3]);
        assert_eq!(cut_pieces(&a, 2), vec![0..1, 1..2, 2..3]);
        assert_eq!(cut_pieces(&a, 4), vec![0..2, 2..3]);
    }

    #[test]
    fn a_failing_writer_is_rank_0_s_error_after_every_piece_is_sent() {
        let a = random(30, 30, 5, 4);
        let group = ThreadComm::group(3);
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|comm| {
                    let a = &a;
                    s.spawn(move || {
                        let ab = MatrixBlock::of_whole(comm, a);
                        let (c, _) = multiply(comm, &ab, &ab, &Options::default()).unwrap();
                        let mut calls = 0;
                        let r = send_to_root(comm, &c, 10, |_, _| {
                            calls += 1;
                            Err(crate::Error::Invalid(format!("disk full at call {calls}")))
                        });
                        assert!(calls <= 1);
                        // Every rank can still meet the others.
                        agree(comm, r)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            let e = r.unwrap_err().to_string();
            assert_eq!(e, "rank 0 of 3: disk full at call 1");
        }
    }
}
