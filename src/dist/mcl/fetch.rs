//! The rows of `Mᵀ` (columns of `M`) a rank needs from other ranks to make its columns of `M²`,
//! fetched from their owners in rounds, and the operand `B` of a round's product.
//!
//! [`plan`] cuts the block's rows into consecutive rounds whose needed *remote* rows (the
//! distinct `k` of the round's rows that other ranks own) hold at most a budget of entries;
//! the block's own rows cost nothing, so a round that needs no remote row is the whole block.
//! [`needed`] lists a round's remote `k` and [`fetch_in_pieces`] runs its exchange: they go to
//! their owners, which answer with
//! the rows' lengths, columns and values (three all-to-alls). [`operand`] then lays the block
//! and the fetched rows out as one matrix indexed by global node, the other rows empty: the
//! product of a block row with it is the single-process one (same `k`, in the same order, with
//! the same accumulator size), with no renumbering.

use super::super::{distinct_outside, Comm, MAX_MESSAGE};
use crate::csr::Csr;
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::borrow::Cow;
use std::ops::Range;

/// The most entries one exchange carries to a rank: a value travels as at most two 32-bit
/// words, and a message stays under [`MAX_MESSAGE`] words.
pub const MAX_ROUND_ENTRIES: u64 = (MAX_MESSAGE / 2) as u64;

/// A round plan: the block's rows in consecutive rounds, and the remote entries the largest
/// round fetches (0: the block needs no row of another rank).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The rounds, covering `0..m.nrows()` in order (none for an empty block).
    pub rounds: Vec<Range<usize>>,
    /// Remote entries of the largest round (the shared rows' included).
    pub largest: u64,
    /// When the block is one round (or none), its remote nodes ([`needed`]), found while
    /// planning; `None` when there are several rounds.
    pub needed: Option<Vec<u32>>,
    /// Remote nodes (increasing) fetched once for every round (see [`plan`]); each round
    /// fetches only its other remote rows.
    pub shared: Vec<u32>,
}

/// The block `m` (nodes `mine`) cut into consecutive rounds whose distinct remote needed rows
/// (`lengths`: every row's entries, by node; only remote nodes are read) hold at most `budget`
/// entries; a row whose remote needs alone exceed the budget makes a round of its own (fetched
/// in several exchanges when it needs more than one carries: [`fetch_in_pieces`]).
///
/// With `share`, the rows that would be fetched again round after round are fetched once: on
/// graphs with hubs nearly every column names the hub rows, so rounds of consecutive columns
/// would each fetch them anew (and, when they alone fill the budget, make a round of nearly
/// every column). The remote nodes named by the most rows (at least two) go into
/// [`Plan::shared`] up to half the budget, and the rounds share the rest.
pub fn plan<T: Scalar>(
    m: &Csr<T>,
    mine: Range<usize>,
    lengths: &[u32],
    budget: u64,
    share: bool,
) -> Plan {
    // Most often every remote row a block needs fits one round.
    let needed = needed(m, 0..m.nrows(), mine.start);
    let whole: u64 = needed
        .par_iter()
        .map(|&k| u64::from(lengths[k as usize]))
        .sum();
    if whole <= budget {
        return Plan {
            rounds: (m.nrows() > 0)
                .then_some(0..m.nrows())
                .into_iter()
                .collect(),
            largest: whole,
            needed: Some(needed),
            shared: Vec::new(),
        };
    }
    let alone = rounds_of(m, &mine, lengths, budget, &[]);
    if !share {
        return alone.into_plan(Vec::new(), 0);
    }
    let shared = shared_rows(m, &needed, lengths, budget / 2);
    let held: u64 = shared.iter().map(|&k| u64::from(lengths[k as usize])).sum();
    let with = rounds_of(m, &mine, lengths, (budget - held).max(1), &shared);
    // Sharing copies the shared rows into every round's operand: worth it where it saves a
    // third of the entries fetched (it does not where one column's needs fill a round alone).
    match 3 * (held + with.fetched) <= 2 * alone.fetched {
        true => with.into_plan(shared, held),
        false => alone.into_plan(Vec::new(), 0),
    }
}

/// Rounds of consecutive rows and what they fetch.
struct Rounds {
    rounds: Vec<Range<usize>>,
    /// Remote entries of the largest round.
    largest: u64,
    /// Remote entries of all rounds.
    fetched: u64,
}

impl Rounds {
    /// The plan of these rounds with `shared` (of `held` entries) fetched once.
    fn into_plan(self, shared: Vec<u32>, held: u64) -> Plan {
        Plan {
            rounds: self.rounds,
            largest: self.largest + held,
            needed: None,
            shared,
        }
    }
}

/// The rows of `m` cut into consecutive rounds whose remote needs, other than the nodes
/// `shared` (increasing), hold at most `budget` entries (a row needing more is a round alone).
fn rounds_of<T: Scalar>(
    m: &Csr<T>,
    mine: &Range<usize>,
    lengths: &[u32],
    budget: u64,
    shared: &[u32],
) -> Rounds {
    // The round each remote node was last counted in (1-based; 0: never; u32::MAX: shared).
    let mut seen = vec![0u32; m.ncols()];
    for &k in shared {
        seen[k as usize] = u32::MAX;
    }
    let mut round = 1u32;
    let mut out = Rounds {
        rounds: Vec::new(),
        largest: 0,
        fetched: 0,
    };
    let (mut start, mut acc) = (0usize, 0u64);
    for i in 0..m.nrows() {
        let cols = m.row(i).0;
        let cost = |seen: &[u32], round: u32| -> u64 {
            cols.iter()
                .filter(|k| !mine.contains(&(**k as usize)))
                .filter(|&&k| seen[k as usize] != round && seen[k as usize] != u32::MAX)
                .map(|&k| u64::from(lengths[k as usize]))
                .sum()
        };
        let c = cost(&seen, round);
        if acc > 0 && acc + c > budget {
            out.rounds.push(start..i);
            out.largest = out.largest.max(acc);
            out.fetched += acc;
            start = i;
            acc = 0;
            round += 1;
        }
        acc += cost(&seen, round);
        for &k in cols {
            let k = k as usize;
            if !mine.contains(&k) && seen[k] != u32::MAX {
                seen[k] = round;
            }
        }
    }
    if start < m.nrows() {
        out.rounds.push(start..m.nrows());
        out.largest = out.largest.max(acc);
        out.fetched += acc;
    }
    out
}

/// Of the remote nodes `needed` (increasing), those named by the most rows of `m` (at least
/// two), taken while their rows hold at most `budget` entries; increasing.
fn shared_rows<T: Scalar>(m: &Csr<T>, needed: &[u32], lengths: &[u32], budget: u64) -> Vec<u32> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let uses: Vec<AtomicU32> = (0..m.ncols()).map(|_| AtomicU32::new(0)).collect();
    m.col_idx().par_iter().with_min_len(1 << 14).for_each(|&k| {
        uses[k as usize].fetch_add(1, Relaxed);
    });
    let mut by_use: Vec<(u32, u32)> = needed
        .iter()
        .map(|&k| (uses[k as usize].load(Relaxed), k))
        .filter(|&(u, _)| u >= 2)
        .collect();
    by_use.par_sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut held = 0u64;
    let mut shared: Vec<u32> = by_use
        .into_iter()
        .map(|(_, k)| k)
        .take_while(|&k| {
            held += u64::from(lengths[k as usize]);
            held <= budget
        })
        .collect();
    shared.sort_unstable();
    shared
}

/// The nodes of `a` (increasing) that are not in `b` (increasing).
pub fn without(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut j = 0;
    a.iter()
        .copied()
        .filter(|&v| {
            while j < b.len() && b[j] < v {
                j += 1;
            }
            b.get(j) != Some(&v)
        })
        .collect()
}

/// The rows of `a` and `b` (no node in both) as one set of rows in node order, each row
/// copied into its place by the threads.
pub fn merged<T: Scalar>(a: &Fetched<T>, b: Fetched<T>) -> Fetched<T> {
    if a.nodes.is_empty() {
        return b;
    }
    // Each output row's source (`true`: `a`) and index there, in node order.
    let mut from = Vec::with_capacity(a.nodes.len() + b.nodes.len());
    let (mut i, mut j) = (0, 0);
    while i < a.nodes.len() || j < b.nodes.len() {
        let take_a = j == b.nodes.len() || (i < a.nodes.len() && a.nodes[i] < b.nodes[j]);
        match take_a {
            true => from.push((true, i)),
            false => from.push((false, j)),
        }
        *(if take_a { &mut i } else { &mut j }) += 1;
    }
    let src = |(in_a, k): (bool, usize)| if in_a { (a, k) } else { (&b, k) };
    let sizes: Vec<usize> = from
        .iter()
        .map(|&f| {
            let (s, k) = src(f);
            (s.ptr[k + 1] - s.ptr[k]) as usize
        })
        .collect();
    let mut ptr = Vec::with_capacity(from.len() + 1);
    ptr.push(0u64);
    let mut end = 0u64;
    ptr.extend(sizes.iter().map(|&l| {
        end += l as u64;
        end
    }));
    let mut cols = vec![0u32; end as usize];
    let mut vals = vec![T::ZERO; end as usize];
    crate::mem::split_by_lengths(&mut cols, &sizes)
        .into_par_iter()
        .zip(crate::mem::split_by_lengths(&mut vals, &sizes))
        .zip(from.par_iter())
        .with_min_len(64)
        .for_each(|((c, v), &f)| {
            let (s, k) = src(f);
            let span = s.ptr[k] as usize..s.ptr[k + 1] as usize;
            c.copy_from_slice(&s.cols[span.clone()]);
            v.copy_from_slice(&s.vals[span]);
        });
    let nodes = from.iter().map(|&f| src(f).0.nodes[f.1]).collect();
    Fetched {
        nodes,
        ptr,
        cols,
        vals,
        received: b.received,
    }
}

/// The remote rows of one round, in node order.
#[derive(Debug)]
pub struct Fetched<T> {
    /// The nodes, increasing.
    pub nodes: Vec<u32>,
    /// Where each node's entries start in `cols` and `vals` (one more than `nodes`).
    pub ptr: Vec<u64>,
    /// The rows' columns.
    pub cols: Vec<u32>,
    /// The rows' values.
    pub vals: Vec<T>,
    /// The bytes this rank received in the exchange.
    pub received: u64,
}

impl<T> Fetched<T> {
    /// No rows.
    pub fn none() -> Self {
        Fetched {
            nodes: Vec::new(),
            ptr: vec![0],
            cols: Vec::new(),
            vals: Vec::new(),
            received: 0,
        }
    }
}

/// The rows of `Mᵀ` owned by other ranks that the rows `rows` of this rank's block `m` (whose
/// row 0 is node `first`) name: their nodes, increasing (so grouped by owner), none on one
/// rank (whose block names only its own rows).
pub fn needed<T: Scalar>(m: &Csr<T>, rows: Range<usize>, first: usize) -> Vec<u32> {
    let mine = first..first + m.nrows();
    match mine == (0..m.ncols()) {
        true => Vec::new(),
        false => {
            let span = m.row_ptr()[rows.start] as usize..m.row_ptr()[rows.end] as usize;
            distinct_outside(&m.col_idx()[span], m.ncols(), mine)
        }
    }
}

/// The rows of the nodes `ask` (increasing, none of this rank's block `m`; `lengths`: every
/// row's entries, by node) from their owners, in as many exchanges as keep what each rank
/// receives, and what each sends, under [`MAX_ROUND_ENTRIES`] entries (a row alone may be one
/// exchange: no row holds more than a message carries). Collective: every rank takes part in
/// as many exchanges as the rank needing most.
pub fn fetch_in_pieces<T: Scalar>(
    comm: &dyn Comm,
    starts: &[usize],
    m: &Csr<T>,
    ask: &[u32],
    lengths: &[u32],
) -> Fetched<T> {
    fetch_in_pieces_of(comm, starts, m, ask, lengths, MAX_ROUND_ENTRIES, false).into_fetched(ask)
}

/// The operand of a round ([`operand`]) made as the rows arrive: the rows of `ask` fetched as
/// [`fetch_in_pieces`] fetches them, the block `m` (whose row 0 is node `first`) laid in among
/// them where its nodes fall, so that no array is copied again; with the bytes received.
/// Collective.
pub fn fetch_operand<'a, T: Scalar>(
    comm: &dyn Comm,
    starts: &[usize],
    m: &'a Csr<T>,
    ask: &[u32],
    lengths: &[u32],
) -> (Cow<'a, Csr<T>>, u64) {
    let first = starts[comm.rank()];
    if is_whole(m, first, ask) {
        // Every rank takes part in the exchanges all the same.
        let got = fetch_in_pieces_of(comm, starts, m, ask, lengths, MAX_ROUND_ENTRIES, false);
        return (Cow::Borrowed(m), got.received);
    }
    let got = fetch_in_pieces_of(comm, starts, m, ask, lengths, MAX_ROUND_ENTRIES, true);
    let received = got.received;
    (Cow::Owned(got.into_operand(ask, m, first)), received)
}

/// [`fetch_in_pieces`], each exchange sending and receiving at most `most_entries` entries a
/// rank (a row alone may be more); with `with_block`, this rank's block `m` is laid into the
/// received columns and words where its nodes fall among the asked ones.
fn fetch_in_pieces_of<T: Scalar>(
    comm: &dyn Comm,
    starts: &[usize],
    m: &Csr<T>,
    ask: &[u32],
    lengths: &[u32],
    most_entries: u64,
    with_block: bool,
) -> Received {
    // An owner answers every other rank in the same exchange: each asks for at most its share.
    let most_entries = (most_entries / comm.size().saturating_sub(1).max(1) as u64).max(1);
    // The asked nodes before the block: a piece ends there, so the block goes in between two.
    let first = starts[comm.rank()];
    let split = ask.partition_point(|&k| (k as usize) < first);
    let mut pieces: Vec<Range<usize>> = Vec::new();
    let mut size = u64::MAX;
    for (i, &v) in ask.iter().enumerate() {
        let len = u64::from(lengths[v as usize]);
        match pieces.last_mut() {
            Some(p) if size.saturating_add(len) <= most_entries && (i != split || !with_block) => {
                p.end = i + 1
            }
            _ => {
                pieces.push(i..i + 1);
                size = 0;
            }
        }
        size += len;
    }
    let mut most = [pieces.len() as u64];
    comm.max_u64(&mut most);
    // Every piece's answer lands in arrays sized for all of them: no regrowth, no copy.
    let entries: usize = ask.iter().map(|&v| lengths[v as usize] as usize).sum();
    let room = entries + if with_block { m.nnz() } else { 0 };
    let mut got = Received {
        lens: Vec::with_capacity(ask.len()),
        cols: Vec::with_capacity(room),
        words: Vec::with_capacity(T::WORDS * room),
        received: 0,
    };
    let mut laid = !with_block;
    for piece in 0..most[0] as usize {
        let range = pieces.get(piece);
        if !laid && range.map_or(true, |r| r.start >= split) {
            got.lay_block(m);
            laid = true;
        }
        let nodes = range.map_or(&[][..], |r| &ask[r.clone()]);
        fetch_nodes_into(comm, starts, m, nodes, &mut got);
    }
    if !laid {
        got.lay_block(m);
    }
    got
}

/// What a rank received for the nodes it asked for, piece after piece: each row's length, the
/// rows' columns, and their values as words.
struct Received {
    lens: Vec<u32>,
    cols: Vec<u32>,
    words: Vec<u32>,
    received: u64,
}

impl Received {
    /// The rows of `nodes` (the nodes asked for, in order).
    fn into_fetched<T: Scalar>(self, nodes: &[u32]) -> Fetched<T> {
        let mut ptr = Vec::with_capacity(self.lens.len() + 1);
        ptr.push(0u64);
        let mut end = 0u64;
        for &l in &self.lens {
            end += u64::from(l);
            ptr.push(end);
        }
        Fetched {
            nodes: nodes.to_vec(),
            ptr,
            cols: self.cols,
            vals: crate::dist::words::into_values(self.words),
            received: self.received,
        }
    }

    /// Appends the block `m`'s columns and values (as words), each array copied by the threads.
    fn lay_block<T: Scalar>(&mut self, m: &Csr<T>) {
        append_par(&mut self.cols, m.nnz(), |at, out| {
            out.copy_from_slice(&m.col_idx()[at..at + out.len()])
        });
        let w = T::WORDS;
        append_par(&mut self.words, w * m.nnz(), |at, out| {
            crate::dist::words::put_words(out, &m.values()[at / w..(at + out.len()) / w])
        });
    }

    /// The operand ([`operand`]) of the block `m` (row 0 is node `first`), laid in by
    /// [`Received::lay_block`], and the rows of `nodes` around it.
    fn into_operand<T: Scalar>(self, nodes: &[u32], m: &Csr<T>, first: usize) -> Csr<T> {
        let n = m.ncols();
        let row_ptr = operand_offsets(m, first, nodes, |i| u64::from(self.lens[i]));
        let vals = crate::dist::words::into_values(self.words);
        Csr::from_parts_unchecked(n, n, row_ptr, self.cols, vals)
    }
}

/// Appends `n` items to `out`, written by the threads: `fill(at, part)` fills the part that
/// starts `at` items into the new ones (parts of whole multiples of 2 items, so that a value's
/// two words stay together).
fn append_par<E: Copy + Send + Sync>(
    out: &mut Vec<E>,
    n: usize,
    fill: impl Fn(usize, &mut [E]) + Sync,
) {
    const PART: usize = 1 << 18;
    let base = out.len();
    out.reserve(n);
    let spare = crate::mem::SharedSlice::new(&mut out.spare_capacity_mut()[..n]);
    (0..n.div_ceil(PART)).into_par_iter().for_each(|p| {
        let (s, e) = (p * PART, ((p + 1) * PART).min(n));
        // SAFETY: each part is written by one thread only, and nothing reads it meanwhile.
        fill(s, unsafe { spare.slice_mut(s, e) });
    });
    // SAFETY: the parts cover the n new items, each written by `fill`.
    unsafe { out.set_len(base + n) };
}

/// The rows of the nodes `ask` (increasing, none of this rank's block `m`) from their owners
/// (`starts`: the blocks' first nodes), appended to `got`. Collective: every rank answers every
/// other's requests, whether or not it asks for anything.
fn fetch_nodes_into<T: Scalar>(
    comm: &dyn Comm,
    starts: &[usize],
    m: &Csr<T>,
    ask: &[u32],
    got: &mut Received,
) {
    let p = comm.size();
    let first = starts[comm.rank()];
    let owner = |k: usize| starts.partition_point(|&s| s <= k) - 1;
    let mut counts = vec![0usize; p];
    for &k in ask {
        counts[owner(k as usize)] += 1;
    }
    let (asked, asked_counts) = comm.all_to_all_u32(ask, &counts);
    // The answers: lengths, columns, values (`T::WORDS` words each), to each asker in turn,
    // each row copied into its place by the threads.
    let lens: Vec<u32> = asked
        .par_iter()
        .map(|&k| m.row_len(k as usize - first) as u32)
        .collect();
    let sizes: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
    let mut entry_counts = vec![0usize; p];
    let mut at = 0;
    for (asker, &c) in asked_counts.iter().enumerate() {
        entry_counts[asker] = sizes[at..at + c].iter().sum();
        at += c;
    }
    let total: usize = entry_counts.iter().sum();
    let mut cols = vec![0u32; total];
    let mut words = vec![0u32; T::WORDS * total];
    let widths: Vec<usize> = sizes.iter().map(|&l| T::WORDS * l).collect();
    crate::mem::split_by_lengths(&mut cols, &sizes)
        .into_par_iter()
        .zip(crate::mem::split_by_lengths(&mut words, &widths))
        .zip(asked.par_iter())
        .with_min_len(64)
        .for_each(|((c, w), &k)| {
            let (rc, rv) = m.row(k as usize - first);
            c.copy_from_slice(rc);
            crate::dist::words::put_words(w, rv);
        });
    drop(asked);
    let before = got.lens.len() + got.cols.len() + got.words.len();
    comm.all_to_all_append(&lens, &asked_counts, &mut got.lens);
    comm.all_to_all_append(&cols, &entry_counts, &mut got.cols);
    let word_counts: Vec<usize> = entry_counts.iter().map(|&c| T::WORDS * c).collect();
    comm.all_to_all_append(&words, &word_counts, &mut got.words);
    let after = got.lens.len() + got.cols.len() + got.words.len();
    got.received += 4 * (ask.len() + after - before) as u64;
}

/// The second operand of a round: `Mᵀ`'s rows by global node (`m.ncols()` rows), the block `m`
/// (whose row 0 is node `first`) and the fetched rows in place, every other row empty. When
/// nothing was fetched and the block is the whole matrix (one rank), that is `m` itself. The
/// fetched rows' arrays become the operand's (grown around the block), so they are not held
/// twice.
pub fn operand<T: Scalar>(m: &Csr<T>, first: usize, got: Fetched<T>) -> Cow<'_, Csr<T>> {
    let n = m.ncols();
    if is_whole(m, first, &got.nodes) {
        return Cow::Borrowed(m);
    }
    let row_ptr = operand_offsets(m, first, &got.nodes, |i| got.ptr[i + 1] - got.ptr[i]);
    // The fetched rows before the block, then the block, then the fetched rows after it.
    let split = got.nodes.partition_point(|&k| (k as usize) < first);
    let at = got.ptr[split] as usize;
    let cols = around(&got.cols, at, m.col_idx());
    let vals = around(&got.vals, at, m.values());
    Cow::Owned(Csr::from_parts_unchecked(n, n, row_ptr, cols, vals))
}

/// Whether the block `m` (row 0 is node `first`) with nothing fetched (`nodes` empty) is the
/// whole operand already: every node's row, in order.
fn is_whole<T: Scalar>(m: &Csr<T>, first: usize, nodes: &[u32]) -> bool {
    nodes.is_empty() && first == 0 && m.nrows() == m.ncols()
}

/// The row offsets of an operand: `Mᵀ`'s rows by global node, the block `m` (row 0 is node
/// `first`) at its nodes, the fetched `nodes` (increasing) at theirs with `len(i)` entries for
/// the `i`-th, every other row empty.
fn operand_offsets<T: Scalar>(
    m: &Csr<T>,
    first: usize,
    nodes: &[u32],
    len: impl Fn(usize) -> u64,
) -> Vec<u64> {
    let (n, end) = (m.ncols(), first + m.nrows());
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u64);
    let (mut total, mut next) = (0u64, 0usize);
    for k in 0..n {
        if (first..end).contains(&k) {
            total += m.row_len(k - first) as u64;
        } else if nodes.get(next) == Some(&(k as u32)) {
            total += len(next);
            next += 1;
        }
        row_ptr.push(total);
    }
    row_ptr
}

/// `v` with `middle` put in at `at`, copied in parallel into an array of the final size.
pub(super) fn around<E: Copy + Default + Send + Sync>(v: &[E], at: usize, middle: &[E]) -> Vec<E> {
    let mut out = vec![E::default(); v.len() + middle.len()];
    let (head, rest) = out.split_at_mut(at);
    let (mid, tail) = rest.split_at_mut(middle.len());
    crate::mem::par_copy(head, &v[..at]);
    crate::mem::par_copy(mid, middle);
    crate::mem::par_copy(tail, &v[at..]);
    out
}

/// The first operand of a round: the block's rows `rows` (columns kept global), `m` itself
/// when the round is the whole block.
pub fn round_rows<T: Scalar>(m: &Csr<T>, rows: Range<usize>) -> Cow<'_, Csr<T>> {
    if rows == (0..m.nrows()) {
        return Cow::Borrowed(m);
    }
    let lo = m.row_ptr()[rows.start];
    let hi = m.row_ptr()[rows.end] as usize;
    let row_ptr = m.row_ptr()[rows.start..=rows.end]
        .iter()
        .map(|&x| x - lo)
        .collect();
    let (cols, vals) = (
        m.col_idx()[lo as usize..hi].to_vec(),
        m.values()[lo as usize..hi].to_vec(),
    );
    Cow::Owned(Csr::from_parts_unchecked(
        rows.len(),
        m.ncols(),
        row_ptr,
        cols,
        vals,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows 2..5 of a 6-node `Mᵀ` (node `k`'s row: `k+1` entries, columns `0..=k`, values `k`).
    fn block() -> (Csr<f32>, Vec<u32>) {
        let lengths: Vec<u32> = (1..=6).collect();
        let mut ptr = vec![0u64];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for k in 2..5u32 {
            cols.extend(0..=k);
            vals.extend(std::iter::repeat(k as f32).take(k as usize + 1));
            ptr.push(cols.len() as u64);
        }
        (Csr::from_parts(3, 6, ptr, cols, vals).unwrap(), lengths)
    }

    #[test]
    fn rounds_count_remote_entries_only() {
        let (m, lengths) = block();
        // Remote needs: row 0 (node 2) names 0, 1 (1 + 2 entries); rows 1 and 2 add none but
        // 0, 1 again, and own nodes cost nothing.
        let p = plan(&m, 2..5, &lengths, 3, false);
        assert_eq!(p.rounds, std::iter::once(0..3).collect::<Vec<_>>());
        assert_eq!(p.largest, 3);
        // A budget under one row's needs: every row a round of its own.
        let p = plan(&m, 2..5, &lengths, 2, false);
        assert_eq!(p.rounds, vec![0..1, 1..2, 2..3]);
        // The whole matrix on one rank: nothing remote, one round, no lengths read.
        let whole = Csr::from_parts(2, 2, vec![0, 2, 4], vec![0, 1, 0, 1], vec![0.5f32; 4]);
        let p = plan(&whole.unwrap(), 0..2, &[], 1, false);
        assert_eq!(p.rounds, std::iter::once(0..2).collect::<Vec<_>>());
        assert_eq!(p.largest, 0);
    }

    #[test]
    fn rows_every_round_needs_are_fetched_once() {
        // Nodes 0..7 remote, 7..19 this rank's; node 0 is a hub of 4 entries named by every
        // row, each pair of rows also names one remote node of 2 entries (rows 0-1: node 1,
        // 2-3: node 2, ...).
        let mut lengths = vec![4u32, 2, 2, 2, 2, 2, 2];
        lengths.extend([1; 12]);
        let mut ptr = vec![0u64];
        let mut cols = Vec::new();
        for i in 0..12u32 {
            cols.extend([0, 1 + i / 2, 7 + i]);
            ptr.push(cols.len() as u64);
        }
        let vals = vec![0.5f32; cols.len()];
        let m = Csr::from_parts(12, 19, ptr, cols, vals).unwrap();
        // Every round of four rows fetches the hub again: 3 x 8 entries.
        let p = plan(&m, 7..19, &lengths, 8, false);
        assert_eq!(p.rounds, vec![0..4, 4..8, 8..12]);
        assert!(p.shared.is_empty());
        // Shared, the hub (4 entries, half the budget of 8) is fetched once and each round its
        // other 4: 4 + 3 x 4 entries, two thirds of 24.
        let p = plan(&m, 7..19, &lengths, 8, true);
        assert_eq!(p.shared, vec![0]);
        assert_eq!(p.rounds, vec![0..4, 4..8, 8..12]);
        assert_eq!(p.largest, 4 + 4);
        // Saving less than a third, nothing is shared: with a budget of 10, two rounds of six
        // rows fetch 2 x 10 alone, 4 + 2 x 6 with the hub shared.
        let p = plan(&m, 7..19, &lengths, 10, true);
        assert!(p.shared.is_empty(), "{p:?}");
        // Within the budget: one round, nothing shared.
        let p = plan(&m, 7..19, &lengths, 16, true);
        assert_eq!((p.rounds.len(), p.shared.len()), (1, 0));
        assert_eq!(without(&[1, 3, 5, 7], &[0, 3, 7, 9]), vec![1, 5]);
    }

    #[test]
    fn shared_rows_merge_with_a_rounds_rows_in_node_order() {
        let a = Fetched {
            nodes: vec![1, 6],
            ptr: vec![0, 2, 3],
            cols: vec![7, 8, 9],
            vals: vec![1.0f32, 2.0, 3.0],
            received: 10,
        };
        let b = Fetched {
            nodes: vec![0, 4, 9],
            ptr: vec![0, 1, 1, 2],
            cols: vec![5, 6],
            vals: vec![4.0f32, 5.0],
            received: 20,
        };
        let m = merged(&a, b);
        assert_eq!(m.nodes, vec![0, 1, 4, 6, 9]);
        assert_eq!(m.ptr, vec![0, 1, 3, 3, 4, 5]);
        assert_eq!(m.cols, vec![5, 7, 8, 9, 6]);
        assert_eq!(m.vals, vec![4.0, 1.0, 2.0, 3.0, 5.0]);
        assert_eq!(m.received, 20);
    }

    /// Rows fetched in pieces of a few entries are the rows fetched in one exchange, however
    /// many exchanges each rank needs, and no rank sends more than the bound in one (every
    /// other rank asks the same owner at once).
    #[test]
    fn pieces_fetch_the_same_rows() {
        let n = 12usize;
        let starts = [0usize, 5, 5, 12];
        let group = crate::dist::threads::ThreadComm::group(3);
        let lengths: Vec<u32> = (0..n as u32).map(|v| v % 4).collect();
        std::thread::scope(|s| {
            for c in &group {
                let lengths = &lengths;
                s.spawn(move || {
                    let mine = starts[c.rank()]..starts[c.rank() + 1];
                    let mut ptr = vec![0u64];
                    let (mut cols, mut vals) = (Vec::new(), Vec::new());
                    for v in mine.clone() {
                        for j in 0..lengths[v] {
                            cols.push(j * 3);
                            vals.push((v * 10 + j as usize) as f64);
                        }
                        ptr.push(cols.len() as u64);
                    }
                    let m = Csr::from_parts(mine.len(), n, ptr, cols, vals).unwrap();
                    let ask: Vec<u32> = (0..n as u32)
                        .filter(|v| !mine.contains(&(*v as usize)))
                        .collect();
                    let pieces = |most, with_block| {
                        fetch_in_pieces_of(c, &starts, &m, &ask, lengths, most, with_block)
                    };
                    let one: Fetched<f64> = pieces(u64::MAX, false).into_fetched(&ask);
                    for most in [1, 2, 5, 6, 9] {
                        // The block laid in as the rows arrive: the operand made afterwards.
                        let laid = pieces(most, true).into_operand(&ask, &m, mine.start);
                        let after = pieces(most, false).into_fetched(&ask);
                        let want = operand(&m, mine.start, after);
                        assert_eq!(laid, *want, "pieces of {most}");
                        c.take_largest_send();
                        let got: Fetched<f64> = pieces(most, false).into_fetched(&ask);
                        // Values go as two words each; rows are at most 3 entries, so from
                        // 6 entries (3 an asker) every exchange keeps to the bound.
                        if most >= 6 {
                            assert!(c.take_largest_send() <= 2 * most as usize);
                        }
                        assert_eq!(
                            (&got.nodes, &got.ptr, &got.cols, &got.vals),
                            (&one.nodes, &one.ptr, &one.cols, &one.vals)
                        );
                        assert!(got.received >= one.received);
                    }
                    assert_eq!(one.nodes, ask);
                    for (i, &v) in one.nodes.iter().enumerate() {
                        assert_eq!(one.ptr[i + 1] - one.ptr[i], u64::from(lengths[v as usize]));
                        let first = one.vals.get(one.ptr[i] as usize);
                        assert!(lengths[v as usize] == 0 || first == Some(&(v as f64 * 10.0)));
                    }
                });
            }
        });
    }

    #[test]
    fn the_operand_holds_the_block_and_the_fetched_rows_at_their_nodes() {
        let (m, _) = block();
        let got = Fetched {
            nodes: vec![0, 5],
            ptr: vec![0, 1, 3],
            cols: vec![4, 1, 3],
            vals: vec![7.0, 8.0, 9.0],
            received: 0,
        };
        let b = operand(&m, 2, got);
        assert_eq!((b.nrows(), b.ncols()), (6, 6));
        assert_eq!(b.row(0), (&[4u32][..], &[7.0f32][..]));
        assert_eq!(b.row(1).0.len(), 0);
        for k in 2..5 {
            assert_eq!(b.row(k), m.row(k - 2));
        }
        assert_eq!(b.row(5), (&[1u32, 3][..], &[8.0f32, 9.0][..]));
        // One rank: the block itself, not a copy.
        let whole = Csr::from_parts(2, 2, vec![0, 1, 2], vec![1, 0], vec![1.0f32; 2]).unwrap();
        assert!(matches!(
            operand(&whole, 0, Fetched::none()),
            Cow::Borrowed(_)
        ));
        assert!(matches!(round_rows(&m, 0..3), Cow::Borrowed(_)));
        assert_eq!(around(&[1, 2, 5], 2, &[3, 4]), [1, 2, 3, 4, 5]);
        assert_eq!(around(&[5], 0, &[3, 4]), [3, 4, 5]);
        assert_eq!(around(&[1, 2], 2, &[3]), [1, 2, 3]);
        let r = round_rows(&m, 1..3);
        assert_eq!((r.nrows(), r.ncols()), (2, 6));
        assert_eq!((r.row(0), r.row(1)), (m.row(1), m.row(2)));
    }
}
