//! The rows of `Mᵀ` (columns of `M`) a rank needs to make its columns of `M²`, fetched from
//! their owners in rounds.
//!
//! [`plan`] cuts the block's rows into consecutive rounds whose needed rows (the distinct `k`
//! of the round's rows, its own included) hold at most a budget of entries, from every row's
//! length (gathered once per iteration); [`fetch`] then runs one round: the remote `k` go to
//! their owners, which answer with the rows' lengths, columns and values (three all-to-alls),
//! and the round's rows come back with their columns renumbered into the fetched rows.

use super::super::{Comm, MAX_MESSAGE};
use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use std::ops::Range;

/// The most entries one round fetches: each value travels as two 32-bit words, and a message
/// stays under [`MAX_MESSAGE`] words.
pub const MAX_ROUND_ENTRIES: u64 = (MAX_MESSAGE / 2) as u64;

/// The block's rows `0..m.nrows()` cut into consecutive rounds whose distinct needed rows
/// (`lengths`: every row's entries, by node) hold at most `budget` entries; a row whose needs
/// alone exceed the budget makes a round of its own, and one over [`MAX_ROUND_ENTRIES`] is an
/// error.
pub fn plan<T: Scalar>(m: &Csr<T>, lengths: &[u32], budget: u64) -> Result<Vec<Range<usize>>> {
    // The round each node was last counted in (1-based; 0: never).
    let mut seen = vec![0u32; lengths.len()];
    let mut round = 1u32;
    let mut out = Vec::new();
    let (mut start, mut acc) = (0usize, 0u64);
    for i in 0..m.nrows() {
        let cols = m.row(i).0;
        let cost = |seen: &[u32], round: u32| -> u64 {
            cols.iter()
                .filter(|&&k| seen[k as usize] != round)
                .map(|&k| u64::from(lengths[k as usize]))
                .sum()
        };
        if acc > 0 && acc + cost(&seen, round) > budget {
            out.push(start..i);
            start = i;
            acc = 0;
            round += 1;
        }
        acc += cost(&seen, round);
        for &k in cols {
            seen[k as usize] = round;
        }
        if acc > MAX_ROUND_ENTRIES {
            return Err(Error::Invalid(format!(
                "column {} of M² needs {acc} entries of M at once, more than one exchange \
                 carries ({MAX_ROUND_ENTRIES}); prune harder or run on one rank",
                i
            )));
        }
    }
    if start < m.nrows() {
        out.push(start..m.nrows());
    }
    Ok(out)
}

/// One round, collective: this rank's rows `rows` of its block `m` (columns renumbered, in
/// the same order, into the rows of the second matrix) and the rows of `Mᵀ` they name, in node
/// order (`starts`: the blocks' first nodes; `lengths`: every row's entries). Every rank
/// answers every other's requests, whether or not it asks for anything. Also returns the bytes
/// this rank received.
pub fn fetch<T: Scalar>(
    comm: &dyn Comm,
    starts: &[usize],
    m: &Csr<T>,
    rows: Range<usize>,
    lengths: &[u32],
) -> (Csr<T>, Csr<T>, u64) {
    let p = comm.size();
    let first = starts[comm.rank()];
    let mine = first..first + m.nrows();
    let owner = |k: usize| starts.partition_point(|&s| s <= k) - 1;
    let lo = m.row_ptr()[rows.start] as usize;
    let hi = m.row_ptr()[rows.end] as usize;
    let mut need: Vec<u32> = m.col_idx()[lo..hi].to_vec();
    need.sort_unstable();
    need.dedup();
    // The remote rows, asked of their owners (in node order, so by owner).
    let mut ask = Vec::new();
    let mut counts = vec![0usize; p];
    for &k in &need {
        if !mine.contains(&(k as usize)) {
            ask.push(k);
            counts[owner(k as usize)] += 1;
        }
    }
    let (asked, asked_counts) = comm.all_to_all_u32(&ask, &counts);
    // The answers: lengths, columns, values (two words each), to each asker in turn.
    let mut lens = Vec::with_capacity(asked.len());
    let (mut cols, mut words) = (Vec::new(), Vec::new());
    let mut entry_counts = vec![0usize; p];
    let mut at = 0;
    for (asker, &c) in asked_counts.iter().enumerate() {
        for &k in &asked[at..at + c] {
            let (rc, rv) = m.row(k as usize - first);
            lens.push(rc.len() as u32);
            cols.extend_from_slice(rc);
            for v in rv {
                let b = v.to_f64().to_bits();
                words.extend_from_slice(&[b as u32, (b >> 32) as u32]);
            }
            entry_counts[asker] += rc.len();
        }
        at += c;
    }
    let (got_lens, _) = comm.all_to_all_u32(&lens, &asked_counts);
    let (got_cols, _) = comm.all_to_all_u32(&cols, &entry_counts);
    let word_counts: Vec<usize> = entry_counts.iter().map(|&c| 2 * c).collect();
    let (got_words, _) = comm.all_to_all_u32(&words, &word_counts);
    drop((lens, cols, words));
    let received = 4 * (asked.len() + got_lens.len() + got_cols.len() + got_words.len()) as u64;
    // The needed rows in node order: this block's from `m`, the others from the answers, which
    // come in the same order.
    let total: usize = need.iter().map(|&k| lengths[k as usize] as usize).sum();
    let mut b_ptr = Vec::with_capacity(need.len() + 1);
    b_ptr.push(0u64);
    let mut b_cols = Vec::with_capacity(total);
    let mut b_vals = Vec::with_capacity(total);
    let (mut r, mut e) = (0usize, 0usize);
    for &k in &need {
        if mine.contains(&(k as usize)) {
            let (rc, rv) = m.row(k as usize - first);
            b_cols.extend_from_slice(rc);
            b_vals.extend_from_slice(rv);
        } else {
            let l = got_lens[r] as usize;
            b_cols.extend_from_slice(&got_cols[e..e + l]);
            b_vals.extend(
                got_words[2 * e..2 * (e + l)].chunks_exact(2).map(|w| {
                    T::from_f64(f64::from_bits(u64::from(w[0]) | (u64::from(w[1]) << 32)))
                }),
            );
            r += 1;
            e += l;
        }
        b_ptr.push(b_cols.len() as u64);
    }
    let b = Csr::from_parts_unchecked(need.len(), m.ncols(), b_ptr, b_cols, b_vals);
    // The round's rows, each `k` renumbered to its place in `need`.
    let a_cols: Vec<u32> = m.col_idx()[lo..hi]
        .iter()
        .map(|&k| need.partition_point(|&x| x < k) as u32)
        .collect();
    let a_vals = m.values()[lo..hi].to_vec();
    let a_ptr: Vec<u64> = m.row_ptr()[rows.start..=rows.end]
        .iter()
        .map(|&x| x - lo as u64)
        .collect();
    let a = Csr::from_parts_unchecked(rows.len(), need.len(), a_ptr, a_cols, a_vals);
    (a, b, received)
}
