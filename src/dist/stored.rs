//! The simple graph's row blocks read straight from a `.npz` archive that already stores one:
//! every rank reads its block of rows (or columns: a symmetric pattern's are the same; blocks of
//! about equal entries, cut by every rank alike from the stored offsets) from the mapped file,
//! its bytes of `indptr` and `indices` only, and of `data` where the caller wants the values
//! too ([`crate::io::load_pattern_block`]), the diagonal dropped as the simple graph drops
//! loops.
//! The ranks then decide together whether the rows read are the simple graph's; when they are,
//! each rank's block is its rows as read, with no edge exchange. When they are not (or the
//! archive is no CSR or CSC one, or a block did not read cleanly), the caller takes the general
//! path, which gives the same rows from any archive, or names what is wrong with it.
//!
//! The decision is exact. Every rank must have read its block with every row strictly
//! increasing, and the pieces of each member's CRC must make the member's (one gather of a few
//! words from each rank). Symmetry is then decided in two parts: the entries inside a rank's
//! diagonal block by the rank alone ([`crate::csr::diagonal_block_is_symmetric`]); an entry
//! `(i, j)` between blocks is sent as `(j, i)` to the owner of row `j`, which looks for `i` in
//! row `j`: where `j` is below the block of row `i` and `i + j` is even, or `j` is past it and
//! `i + j` is odd (a pair's parity is its mirror's, so each class is checked by one side, and
//! the lookups are shared between the lower and the higher block instead of all falling to the
//! lower). The pairs a rank receives are distinct (each sender's rows strictly increase), so
//! when every one is found, and there are as many as the rank's entries of the same classes
//! (past its block and even, below it and odd), they are exactly those entries: every entry
//! between blocks has its mirror. The exchange runs in rounds of at most `stage_edges` of a
//! rank's entries between blocks. Where the values are read, each pair carries its entry's
//! value bits and must find them in its mirror, and inside a block each upper entry looks its
//! mirror's value up: the graph's weights are then symmetric too.

use super::input::RowBlock;
use super::owners::{by_owner, RecordSource};
use super::{agree, in_rounds, Blocks, Comm, MAX_MESSAGE};
use crate::error::Result;
use crate::io::npz::{crc_pieces_match, BlockValues, CrcPiece, GroupOffsets, ValueCheck};
use crate::io::{Format, SymmetryCheck};
use crate::mem::SharedSlice;
use rayon::prelude::*;
use std::ops::Range;
use std::path::Path;

/// A rank's block of rows read as stored ([`row_block`]).
pub(crate) struct StoredRows {
    /// The block's rows of the simple graph, without the diagonal.
    pub rows: RowBlock,
    /// Whether the blocks were checked to be the simple graph's (see [`row_block`]).
    pub checked: bool,
    /// Where values were asked for: the block's values (those of `rows`, in order) and which
    /// of its rows store any entry.
    pub values: Option<BlockValues>,
}

/// This rank's block of the simple graph of `path`, read as stored when the file is a CSR or CSC
/// `.npz` archive that already holds a simple graph (see the module's comment); `None`, on
/// every rank, when it does not. With [`SymmetryCheck::Caller`], blocks whose rows strictly
/// increase come back without the symmetry check, which is then the caller's ([`is_simple`]);
/// [`StoredRows::checked`] says whether the blocks were checked. With `values`, the archive is
/// taken only where it is square and every value passes `values` (the diagonal ones too), the
/// values are read with the rows (`data`'s CRC checked too), and [`SymmetryCheck::Load`]'s
/// check also wants each entry's mirror to hold the same value, bit for bit: a weighted graph
/// stored as MCL clusters it. Collective.
pub(crate) fn row_block(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage_edges: usize,
    check: SymmetryCheck,
    values: Option<&ValueCheck<'_>>,
) -> Result<Option<StoredRows>> {
    if format.or_else(|| Format::of_input(path)) != Some(Format::Npz) {
        return Ok(None);
    }
    let (rank, parts) = (comm.rank(), comm.size());
    let chosen = std::cell::OnceCell::new();
    let read = crate::io::load_pattern_block(
        path,
        format,
        (rank, parts),
        &|groups| {
            chosen
                .get_or_init(|| equal_entries(groups, parts))
                .range(rank)
        },
        values,
    );
    agree(comm, crate::interrupt::check())?;
    let mine = match &read {
        Some(b) => {
            let [p, i] = b.crcs;
            let d = b.values.as_ref().map_or(CrcPiece::default(), |v| v.crc);
            let taken = match &b.values {
                Some(v) => v.valid && b.shape.0 == b.shape.1,
                None => values.is_none(),
            };
            [
                u64::from(taken),
                u64::from(b.sorted),
                b.n as u64,
                u64::from(p.crc),
                p.len,
                u64::from(i.crc),
                i.len,
                u64::from(d.crc),
                d.len,
            ]
        }
        None => [0; WORDS],
    };
    let (all, _) = comm.all_gather_u64(&mine);
    let Some(block) = read else {
        return Ok(None);
    };
    let facts: Vec<&[u64]> = all.chunks_exact(WORDS).collect();
    let agreed = facts
        .iter()
        .all(|f| f[0] == 1 && f[1] == 1 && f[2] == mine[2]);
    let crcs_match = |want: Option<u32>, at: usize| {
        let pieces: Vec<CrcPiece> = facts
            .iter()
            .map(|f| CrcPiece {
                crc: f[at] as u32,
                len: f[at + 1],
                want,
            })
            .collect();
        crc_pieces_match(&pieces)
    };
    let data_want = block.values.as_ref().and_then(|v| v.crc.want);
    let checked = agreed
        && crcs_match(block.crcs[0].want, 3)
        && crcs_match(block.crcs[1].want, 5)
        && crcs_match(data_want, 7);
    // Every rank has every rank's facts: they all decide alike.
    if !checked {
        return Ok(None);
    }
    let blocks = chosen
        .into_inner()
        .unwrap_or_else(|| Blocks::even(block.n, parts));
    let rows = RowBlock {
        blocks,
        rank,
        ptr: block.ptr,
        adj: block.cols,
        labels: None,
    };
    let values = block.values;
    if check == SymmetryCheck::Caller {
        return Ok(Some(StoredRows {
            rows,
            checked: false,
            values,
        }));
    }
    let weights = values.as_ref().map(|v| &v.values[..]);
    let simple = mirrored(comm, &rows, weights, stage_edges)?;
    Ok(simple.then_some(StoredRows {
        rows,
        checked: true,
        values,
    }))
}

/// Whether the ranks' blocks of rows (each row strictly increasing, no diagonal entry) are a
/// simple graph's: each diagonal block symmetric, and each entry between blocks mirrored (see
/// the module's comment). Collective.
pub(crate) fn is_simple(comm: &dyn Comm, rows: &RowBlock, stage_edges: usize) -> Result<bool> {
    mirrored(comm, rows, None, stage_edges)
}

/// [`is_simple`], and where the blocks' `values` are given (those of this rank's entries, in
/// order), whether each entry's mirror holds the same value, bit for bit. Collective.
fn mirrored(
    comm: &dyn Comm,
    rows: &RowBlock,
    values: Option<&[f64]>,
    stage_edges: usize,
) -> Result<bool> {
    let first = rows.first();
    let entries = (&rows.ptr[..], &rows.adj[..]);
    let inside = crate::csr::diagonal_block_is_symmetric(first, entries.0, entries.1)
        && values.map_or(true, |v| inside_values_mirrored(first, entries, v));
    if !all_ranks(comm, inside) {
        return Ok(false);
    }
    let (blocks, stage) = (&rows.blocks, stage_edges);
    let across = match values {
        None => mirrored_across::<2>(comm, blocks, first, entries, None, stage)?,
        Some(v) => mirrored_across::<4>(comm, blocks, first, entries, Some(v), stage)?,
    };
    Ok(all_ranks(comm, across))
}

/// Whether each entry `(i, j)` of the diagonal block of the rows `first..` (a symmetric pattern,
/// rows strictly increasing) holds the value of its mirror `(j, i)`, bit for bit.
fn inside_values_mirrored(first: usize, (ptr, cols): (&[u64], &[u32]), values: &[f64]) -> bool {
    let rows = ptr.len() - 1;
    let end = first + rows;
    (0..rows).into_par_iter().with_min_len(1 << 10).all(|k| {
        let i = (first + k) as u32;
        let (lo, hi) = (ptr[k] as usize, ptr[k + 1] as usize);
        // Each pair once, from its upper entry.
        (lo..hi)
            .filter(|&x| cols[x] > i && (cols[x] as usize) < end)
            .all(|x| {
                let kj = cols[x] as usize - first;
                let (jlo, jhi) = (ptr[kj] as usize, ptr[kj + 1] as usize);
                cols[jlo..jhi]
                    .binary_search(&i)
                    .is_ok_and(|y| values[jlo + y].to_bits() == values[x].to_bits())
            })
    })
}

/// The groups cut into `parts` blocks of about equal entries (R-MAT's hubs at low ids would
/// give the first of two blocks of equal rows 3/4 of them): block `p` starts at the first group
/// whose offset reaches `p / parts` of the entries, and the last ends at `n`. Every rank cuts
/// the same offsets alike.
fn equal_entries(groups: &GroupOffsets<'_>, parts: usize) -> Blocks {
    let total = u128::from(groups.offset(groups.stored));
    let mut cut = vec![0; parts + 1];
    for p in 1..parts {
        let want = (total * p as u128 / parts as u128) as u64;
        let (mut lo, mut hi) = (0, groups.stored);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if groups.offset(mid) < want {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // Offsets that decrease (a file the block's read then refuses) still cut in order.
        cut[p] = lo.max(cut[p - 1]);
    }
    cut[parts] = groups.n;
    Blocks::at(cut)
}

/// The words each rank gives of its block: read (with values: square, every value passing
/// the check), sorted, the side `n`, then the CRC and length of its pieces of `indptr`,
/// `indices` and (with values) `data`.
const WORDS: usize = 9;

/// Whether `mine` holds on every rank. Collective.
fn all_ranks(comm: &dyn Comm, mine: bool) -> bool {
    let mut failed = [u64::from(!mine)];
    comm.sum_u64(&mut failed);
    failed[0] == 0
}

/// Whether the entries between this rank's rows (`first..`, offsets and columns as given, rows
/// strictly increasing on every rank) and other blocks are mirrored: this rank sends each of its
/// entries below its block with `i + j` even, and past it with `i + j` odd, to the owner of that
/// row, and finds each entry it receives in its own rows, as many as its entries of the other
/// two classes (see the module's comment). Records of `W` words: 2 (the pair), or 4 with the
/// entry's value from `values`, which its mirror must hold, bit for bit. Collective.
fn mirrored_across<const W: usize>(
    comm: &dyn Comm,
    blocks: &Blocks,
    first: usize,
    (ptr, cols): (&[u64], &[u32]),
    values: Option<&[f64]>,
    stage_edges: usize,
) -> Result<bool> {
    let rows = ptr.len() - 1;
    let end = first + rows;
    let row = |k: usize| &cols[ptr[k] as usize..ptr[k + 1] as usize];
    // Each row's entries below the block are its first ones, those past it its last ones.
    let outside: Vec<(u32, u32, u64)> = (0..rows)
        .into_par_iter()
        .map(|k| {
            let r = row(k);
            let below = r.partition_point(|&c| (c as usize) < first);
            let past = r.len() - r.partition_point(|&c| (c as usize) < end);
            // The entries a mirror of which this rank is sent: past and even, below and odd.
            let i = (first + k) as u32;
            let odd = |&c: &u32| (c ^ i) & 1 == 1;
            let expected = r[..below].iter().filter(|c| odd(c)).count()
                + r[r.len() - past..].iter().filter(|c| !odd(c)).count();
            (below as u32, past as u32, expected as u64)
        })
        .collect();
    let expected: u64 = outside.par_iter().map(|o| o.2).sum();
    let mut at = Vec::with_capacity(rows + 1);
    at.push(0u64);
    for (k, &(below, past, _)) in outside.iter().enumerate() {
        at.push(at[k] + u64::from(below) + u64::from(past));
    }
    let runs: Vec<(u32, u32)> = outside.into_iter().map(|(b, p, _)| (b, p)).collect();
    let total = at[rows];
    let stage = stage_edges.clamp(1, MAX_MESSAGE / W);
    let (mut found, mut received) = (true, 0u64);
    in_rounds(comm, total as usize, stage, |r| {
        let source = Outside {
            first,
            ptr,
            cols,
            values,
            at: &at,
            runs: &runs,
            from: r.start as u64,
            items: r.len(),
        };
        let (send, counts) = by_owner::<W>(&source, blocks);
        let (got, _) = comm.all_to_all_u32(&send, &counts);
        drop(send);
        received += (got.len() / W) as u64;
        found = found && all_found::<W>(first, (ptr, cols, values), &got, BUCKET);
    })?;
    Ok(found && received == expected)
}

/// Entries of a bucket of rows in [`all_found`]: their columns fit in cache.
const BUCKET: u64 = 1 << 15;

/// Whether each record `(j, i)` of `W` words in `records` (flattened) has `j` among the rows
/// `first..` (offsets, columns and, for records of 4 words, values as given) and `i` in row `j`,
/// holding the value whose bits are the record's last two words. The records are first put in
/// buckets of consecutive rows of about `bucket` entries (a counting sort, chunks of records in
/// parallel), so that each bucket's lookups stay in rows that fit in cache: looked up in the
/// order received, nearly every step of every search missed the cache.
fn all_found<const W: usize>(
    first: usize,
    (ptr, cols, values): (&[u64], &[u32], Option<&[f64]>),
    records: &[u32],
    bucket: u64,
) -> bool {
    let rows = ptr.len() - 1;
    let mut bounds: Vec<usize> = (0..ptr[rows].div_ceil(bucket).max(1))
        .map(|k| ptr.partition_point(|&p| p < k * bucket).min(rows))
        .collect();
    bounds.push(rows);
    bounds.dedup();
    let buckets = bounds.len() - 1;
    let bucket_of = |k: usize| bounds.partition_point(|&b| b <= k) - 1;
    let local = |j: u32| (j as usize).checked_sub(first).filter(|&k| k < rows);
    let chunk = W
        * (records.len() / W)
            .div_ceil(rayon::current_num_threads() * 4)
            .max(1 << 12);
    let counts: Option<Vec<Vec<usize>>> = records
        .par_chunks(chunk)
        .map(|c| {
            let mut count = vec![0usize; buckets];
            for p in c.chunks_exact(W) {
                count[bucket_of(local(p[0])?)] += 1;
            }
            Some(count)
        })
        .collect();
    let Some(counts) = counts else {
        return false;
    };
    // Where each bucket starts, then where each chunk's pairs of each bucket start in it.
    let mut begin = vec![0usize; buckets + 1];
    for b in 0..buckets {
        begin[b + 1] = begin[b] + counts.iter().map(|c| c[b]).sum::<usize>();
    }
    let starts = super::chunk_starts(&counts, &begin[..buckets]);
    let mut sorted: Vec<[u32; W]> = vec![[0; W]; records.len() / W];
    {
        let out = SharedSlice::new_init(&mut sorted);
        records
            .par_chunks(chunk)
            .zip(starts)
            .for_each(|(c, mut at)| {
                for p in c.chunks_exact(W) {
                    let b = local(p[0]).map_or(0, bucket_of);
                    let mut record = [0; W];
                    record.copy_from_slice(p);
                    // SAFETY: the chunk's places in each bucket, counted above, are its alone.
                    unsafe { out.write(at[b], record) };
                    at[b] += 1;
                }
            });
    }
    (0..buckets).into_par_iter().all(|b| {
        sorted[begin[b]..begin[b + 1]].iter().all(|r| {
            let (k, i) = (r[0] as usize - first, r[1]);
            let start = ptr[k] as usize;
            let found = cols[start..ptr[k + 1] as usize].binary_search(&i);
            match (found, values) {
                (Ok(x), Some(v)) if W == 4 => {
                    v[start + x].to_bits() == u64::from(r[2]) | (u64::from(r[3]) << 32)
                }
                (found, _) => found.is_ok(),
            }
        })
    })
}

/// The entries outside the block, numbered row after row (`at[k]` is the number of row `k`'s
/// first; `runs[k]`: how many of its first entries are below the block and of its last past
/// it), from number `from` on: entry `(i, j)` makes the pair `(j, i)` where it is below the
/// block and `i + j` is even, or past it and `i + j` is odd, and nothing otherwise; in records
/// of 4 words, followed by the bits of the entry's value in `values`.
struct Outside<'a> {
    first: usize,
    ptr: &'a [u64],
    cols: &'a [u32],
    values: Option<&'a [f64]>,
    at: &'a [u64],
    runs: &'a [(u32, u32)],
    from: u64,
    items: usize,
}

impl<const W: usize> RecordSource<W> for Outside<'_> {
    fn items(&self) -> usize {
        self.items
    }

    fn records(&self, range: Range<usize>, mut out: impl FnMut([u32; W])) {
        let (lo, hi) = (self.from + range.start as u64, self.from + range.end as u64);
        if lo >= hi {
            return;
        }
        // The row holding entry `lo`: the last one numbered from at or before it.
        let mut k = self.at.partition_point(|&x| x <= lo) - 1;
        let mut pos = lo;
        while pos < hi {
            while self.at[k + 1] <= pos {
                k += 1;
            }
            let (start, end) = (self.ptr[k] as usize, self.ptr[k + 1] as usize);
            let (below, past) = (self.runs[k].0 as usize, self.runs[k].1 as usize);
            let (from, to) = (
                (pos - self.at[k]) as usize,
                (hi.min(self.at[k + 1]) - self.at[k]) as usize,
            );
            let i = (self.first + k) as u32;
            // Numbers 0..below are the row's first entries, below..below + past its last.
            for x in from..to {
                let (at, sent) = match x < below {
                    true => (start + x, 0),
                    false => (end - past + (x - below), 1),
                };
                let j = self.cols[at];
                if (i ^ j) & 1 == sent {
                    let mut record = [0; W];
                    record[0] = j;
                    record[1] = i;
                    if let (4, Some(v)) = (W, self.values) {
                        let bits = v[at].to_bits();
                        record[2] = bits as u32;
                        record[3] = (bits >> 32) as u32;
                    }
                    out(record);
                }
            }
            pos = self.at[k] + to as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::input::{parsed_row_block, simple_row_block};
    use crate::dist::threads::on_ranks;
    use crate::dist::SelfComm;
    use crate::io::npz::testing::compressed;

    /// The cut of groups of the given lengths, `n` groups in all (those past the lengths empty).
    fn cut_of(lengths: &[u64], n: usize, parts: usize) -> Vec<usize> {
        let offsets: Vec<u64> = std::iter::once(0)
            .chain(lengths.iter().scan(0, |at, &l| {
                *at += l;
                Some(*at)
            }))
            .collect();
        let at = |g: usize| offsets[g];
        let blocks = equal_entries(&GroupOffsets::new(n, lengths.len(), &at), parts);
        (0..=parts).map(|p| blocks.start(p)).collect()
    }

    #[test]
    fn blocks_hold_about_equal_entries() {
        // A hub first: it alone is half the entries.
        assert_eq!(
            cut_of(&[10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 11, 2),
            [0, 1, 11]
        );
        assert_eq!(cut_of(&[4, 4, 4, 4], 4, 4), [0, 1, 2, 3, 4]);
        assert_eq!(
            cut_of(&[4, 4, 4, 4], 6, 2),
            [0, 2, 6],
            "empty groups to the last block"
        );
        // More blocks than groups, and no entries: empty blocks, in order.
        assert_eq!(cut_of(&[3, 3], 2, 4), [0, 1, 1, 2, 2]);
        assert_eq!(cut_of(&[0, 0, 0], 3, 3), [0, 0, 0, 3]);
        let blocks = Blocks::at(cut_of(&[10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 11, 2));
        assert_eq!(
            (blocks.owner(0), blocks.owner(1), blocks.owner(10)),
            (0, 1, 1)
        );
    }

    /// The rows of a simple undirected R-MAT graph of 2^9 vertices.
    fn simple_rows() -> Vec<Vec<u32>> {
        let g = crate::csr::Csr::<f32>::from_edges(
            &crate::generate::generate(&crate::generate::RmatParams {
                undirected: true,
                seed: 9,
                no_self_loops: true,
                ..crate::generate::RmatParams::new(9, 8 << 9)
            })
            .unwrap(),
            &crate::io::SIMPLE_GRAPH.build,
        )
        .unwrap();
        (0..g.nrows()).map(|i| g.row(i).0.to_vec()).collect()
    }

    /// An archive to write: its name, shape, groups, kind (csr or csc), and whether the ranks
    /// take it as stored.
    type Case = (String, (usize, usize), Vec<Vec<u32>>, &'static str, bool);

    /// Archives of the simple graph and of what differs from it in one way or another, each
    /// with whether the ranks take it as stored.
    fn inputs(dir: &Path) -> Vec<(String, std::path::PathBuf, bool)> {
        let rows = simple_rows();
        let n = rows.len();
        let mut cases: Vec<Case> = Vec::new();
        let mut add = |name: &str, shape, groups, kind, taken| {
            cases.push((name.to_string(), shape, groups, kind, taken));
        };
        add("symmetric", (n, n), rows.clone(), "csr", true);
        add("csc", (n, n), rows.clone(), "csc", true);
        add("wider", (n, n + 5), rows.clone(), "csr", true);
        let mut looped = rows.clone();
        for (i, r) in looped.iter_mut().enumerate().step_by(3) {
            let at = r.partition_point(|&c| (c as usize) < i);
            r.insert(at, i as u32);
        }
        add("looped", (n, n), looped, "csr", true);
        // An entry between the halves, one way only: without its lower copy, then without its
        // upper one, for `i + j` even and odd (each class is checked by one side); and an entry
        // inside the first quarter, one way only.
        for parity in [0, 1] {
            let (i, j) = (n / 2..n)
                .flat_map(|i| rows[i].iter().map(move |&j| (i, j as usize)))
                .find(|&(i, j)| j < n / 2 && (i + j) % 2 == parity)
                .unwrap();
            let mut lower = rows.clone();
            lower[i].retain(|&c| c as usize != j);
            add(&format!("no-lower-{parity}"), (n, n), lower, "csr", false);
            let mut upper = rows.clone();
            upper[j].retain(|&c| c as usize != i);
            add(&format!("no-upper-{parity}"), (n, n), upper, "csr", false);
        }
        let k = rows[0].iter().position(|&c| (c as usize) < n / 4).unwrap();
        let mut inside = rows.clone();
        inside[0].remove(k);
        add("no-inside", (n, n), inside, "csr", false);
        // An entry of the last quarter's rows moved to another column of the first quarter,
        // which its row lacks: the counts stay, on every rank, but the mirror does not.
        let (r, at) = (3 * n / 4..n)
            .flat_map(|r| (0..rows[r].len()).map(move |at| (r, at)))
            .find(|&(r, at)| {
                let row = &rows[r];
                let next = row.get(at + 1).map_or(n as u32, |&c| c);
                row[at] + 1 < next && (row[at] as usize + 1) < n / 4
            })
            .unwrap();
        let mut moved = rows.clone();
        moved[r][at] += 1;
        add("stand-in", (n, n), moved, "csr", false);
        let mut unsorted = rows.clone();
        let long = unsorted.iter().position(|r| r.len() > 2).unwrap();
        unsorted[long].swap(0, 1);
        add("unsorted", (n, n), unsorted, "csr", false);
        let mut repeated = rows.clone();
        let c = repeated[long][0];
        repeated[long].insert(0, c);
        add("repeated", (n, n), repeated, "csc", false);
        cases
            .into_iter()
            .enumerate()
            .map(|(k, (name, shape, groups, kind, taken))| {
                let f = dir.join(format!("{name}.npz"));
                std::fs::write(&f, compressed(kind, shape, &groups, k % 2 == 1)).unwrap();
                (name, f, taken)
            })
            .collect()
    }

    /// [`row_block`] of `f` for the simple graph: the rows and whether they were checked.
    fn read(
        c: &dyn Comm,
        f: &Path,
        stage: usize,
        check: SymmetryCheck,
    ) -> Option<(RowBlock, bool)> {
        let read = row_block(c, f, None, stage, check, None).unwrap()?;
        assert!(read.values.is_none());
        Some((read.rows, read.checked))
    }

    #[test]
    fn archives_taken_as_stored_give_the_rows_the_general_path_gives() {
        let dir = tempfile::tempdir().unwrap();
        for (name, f, taken) in inputs(dir.path()) {
            let load = SymmetryCheck::Load;
            let one = read(&SelfComm, &f, 1 << 20, load);
            assert_eq!(one.is_some(), taken, "{name} on one rank");
            for ranks in 1..=4 {
                for stage in [3, 1 << 20] {
                    let what = format!("{name} on {ranks} ranks, stage {stage}");
                    let got = on_ranks(ranks, |c| {
                        let stored = read(c, &f, stage, load);
                        // Left to the caller, the check decides what the load's decided.
                        let caller = SymmetryCheck::Caller;
                        if let Some((rows, checked)) = read(c, &f, stage, caller) {
                            assert!(!checked);
                            assert_eq!(is_simple(c, &rows, stage).unwrap(), taken, "{name}");
                            if let Some((s, _)) = &stored {
                                assert_eq!(s, &rows, "{name}");
                            }
                        }
                        let block = simple_row_block(c, &f, None, stage).unwrap();
                        let parsed = parsed_row_block(c, &f, None, stage).unwrap();
                        (
                            stored.map(|(s, checked)| {
                                assert!(checked);
                                s
                            }),
                            block,
                            parsed,
                        )
                    });
                    // The stored blocks hold about equal entries, the parsed ones equal rows:
                    // the same rows, cut elsewhere.
                    let whole = |blocks: Vec<&RowBlock>| -> Vec<Vec<u32>> {
                        blocks
                            .into_iter()
                            .flat_map(|b| (0..b.rows()).map(|i| b.row(i).to_vec()))
                            .collect()
                    };
                    let parsed = whole(got.iter().map(|g| &g.2).collect());
                    assert_eq!(parsed.len(), got[0].2.blocks.n, "{what}");
                    assert_eq!(whole(got.iter().map(|g| &g.1).collect()), parsed, "{what}");
                    for (stored, block, _) in &got {
                        assert_eq!(stored.is_some(), taken, "{what}");
                        if let Some(s) = stored {
                            assert_eq!(s, block, "{what}");
                        }
                    }
                    if taken {
                        let stored = got.iter().map(|g| g.0.as_ref().unwrap()).collect();
                        assert_eq!(whole(stored), parsed, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn pairs_are_found_in_their_rows_whatever_the_buckets() {
        let rows = simple_rows();
        let (first, end) = (100, 400);
        let mut ptr = vec![0u64];
        let mut cols = Vec::new();
        for r in &rows[first..end] {
            cols.extend_from_slice(r);
            ptr.push(cols.len() as u64);
        }
        // Every entry of the block as a pair, in an order of its own.
        let mut pairs: Vec<u32> = Vec::new();
        for (k, r) in rows[first..end].iter().enumerate().rev() {
            for &i in r {
                pairs.extend([(first + k) as u32, i]);
            }
        }
        let lacking = (first..end)
            .flat_map(|j| (0..rows.len() as u32).map(move |i| (j, i)))
            .find(|&(j, i)| rows[j].binary_search(&i).is_err())
            .unwrap();
        for bucket in [1, 7, 300, 1 << 15] {
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let found = |p: &[u32]| {
                    pool.install(|| all_found::<2>(first, (&ptr, &cols, None), p, bucket))
                };
                assert!(found(&pairs), "bucket {bucket}");
                assert!(found(&[]));
                for at in [0, pairs.len() / 2, pairs.len()] {
                    let mut more = pairs.clone();
                    more.splice(at..at, [lacking.0 as u32, lacking.1]);
                    assert!(!found(&more), "bucket {bucket}, at {at}");
                    // A row outside the block.
                    let mut outside = pairs.clone();
                    outside.splice(at..at, [end as u32, rows[end][0]]);
                    assert!(!found(&outside), "bucket {bucket}, at {at}");
                }
            }
        }
    }

    #[test]
    fn a_member_failing_its_crc_is_left_to_the_general_path_which_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = compressed("csr", (512, 512), &simple_rows(), false);
        let name = b"indices.npy";
        let at = bytes.windows(name.len()).rposition(|w| w == name).unwrap() - 30;
        bytes[at] ^= 1;
        let f = dir.path().join("bad.npz");
        std::fs::write(&f, bytes).unwrap();
        for ranks in [1, 3] {
            let got = on_ranks(ranks, |c| {
                let stored = read(c, &f, 8, SymmetryCheck::Caller);
                let e = simple_row_block(c, &f, None, 8).unwrap_err().to_string();
                (stored, e)
            });
            for (stored, e) in got {
                assert!(stored.is_none());
                assert!(e.contains("bad.npz") && e.contains("fails its CRC"), "{e}");
            }
        }
    }
}
