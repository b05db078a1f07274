//! Vertex numbering across ranks for the formats whose numbering depends on the whole file:
//! SNAP ids (renumbered `0..k` in increasing order) and `.abc` labels (numbered in order of first
//! appearance). Each rank reads its part numbered by the part's own ids or labels
//! ([`crate::io::load_part`]); [`renumber`] gives every part the single-process numbering
//! without any rank holding every id or label:
//!
//! - SNAP: the distinct ids are cut into ranges of values, one per rank (splitters chosen from a
//!   sample of every rank's ids); each rank sorts the ids of its range, and an exclusive prefix
//!   sum of the ranges' sizes gives each range its first id. Each rank learns the ids of its own
//!   from the ranks owning them.
//! - `.abc`: a label's owner is a keyed hash of it modulo the ranks (the key drawn by rank 0, so
//!   that every rank agrees, and keyed so that chosen labels cannot all land on one rank). A
//!   label's position is (the rank whose part holds it, its number in that part): parts follow
//!   the file and a part numbers its labels in order of appearance, so positions order first
//!   appearances as the file does. The owner keeps each label's first position and tells the
//!   rank holding it; each rank numbers its first-appearing labels in order, after those of the
//!   ranks before it (an exclusive prefix sum), and the owners pass each label's id on to every
//!   rank holding the label.
//!
//! Afterwards each rank holds the originals of one range of consecutive ids ([`LabelShare`]),
//! the ranges in rank order; [`LabelShare::gather`] brings them to rank 0 for the writers.

use super::{agree, offsets, Comm, MAX_MESSAGE};
use crate::error::{Error, Result};
use crate::io::{Format, Labels, Loaded};
use std::collections::hash_map::{DefaultHasher, RandomState};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::path::Path;

/// The originals (SNAP ids or `.abc` labels) of the ids `first..first + len` of the whole
/// file's numbering, as one rank holds them after [`renumber`].
#[derive(Clone, Debug, PartialEq)]
pub struct LabelShare {
    /// The first id of the range.
    pub first: usize,
    /// [`Labels::Ids`] or [`Labels::Names`] of the range, from its first id.
    pub labels: Labels,
}

impl LabelShare {
    /// Every rank's share, in rank order, on rank 0 (`None` on the others): the labels of the
    /// whole file, as the single-process run holds them for its writers. Collective.
    pub fn gather(&self, comm: &dyn Comm, stage: usize) -> Result<Option<Labels>> {
        let root = |len: usize| {
            let mut counts = vec![0; comm.size()];
            counts[0] = len;
            counts
        };
        match &self.labels {
            Labels::Ids(ids) => {
                let (all, _) = all_to_all_staged(comm, ids, &root(ids.len()), stage)?;
                Ok((comm.rank() == 0).then_some(Labels::Ids(all)))
            }
            Labels::Names(names) => {
                let mut words = Vec::new();
                for name in names {
                    push_label(&mut words, name.as_bytes());
                }
                let (all, _) = all_to_all_staged(comm, &words, &root(words.len()), stage)?;
                if comm.rank() != 0 {
                    return Ok(None);
                }
                let mut names = Vec::new();
                let mut at = 0;
                while at < all.len() {
                    let (label, next) = read_label(&all, at);
                    names.push(String::from_utf8_lossy(label.as_slice()).into_owned());
                    at = next;
                }
                Ok(Some(Labels::Names(names)))
            }
            other => Ok((comm.rank() == 0).then(|| other.clone())),
        }
    }
}

/// This rank's part of a SNAP or `.abc` file (numbered by its own ids or labels) renumbered as
/// the single-process run numbers the whole file, with its square shape the whole file's vertex
/// count, and this rank's [`LabelShare`]. Parts of other formats come back as they are, with no
/// share. `stage` bounds the elements one rank sends another in one round. Collective (every
/// rank reads the same format).
pub fn renumber(
    comm: &dyn Comm,
    mut loaded: Loaded,
    path: &Path,
    stage: usize,
) -> Result<(Loaded, Option<LabelShare>)> {
    let labels = std::mem::take(&mut loaded.labels);
    let (global, total, share) = match (loaded.format, labels) {
        (Format::Snap, Labels::Ids(ids)) => number_ids(comm, &ids, stage)?,
        (Format::Abc, Labels::Names(names)) => number_labels(comm, names, path, stage)?,
        (_, labels) => {
            loaded.labels = labels;
            return Ok((loaded, None));
        }
    };
    for e in &mut loaded.edges.edges {
        *e = (global[e.0 as usize], global[e.1 as usize]);
    }
    loaded.edges.nrows = total;
    loaded.edges.ncols = total;
    Ok((loaded, Some(share)))
}

/// The whole file's id of each of this rank's SNAP ids (`local`: sorted, distinct), the number
/// of distinct ids in the file, and this rank's share. Collective.
fn number_ids(
    comm: &dyn Comm,
    local: &[u32],
    stage: usize,
) -> Result<(Vec<u32>, usize, LabelShare)> {
    let size = comm.size();
    let splitters = splitters(comm, local);
    // `local` is sorted: each owner's ids are one run of it.
    let cuts: Vec<usize> = std::iter::once(0)
        .chain(splitters.iter().map(|&s| local.partition_point(|&x| x < s)))
        .chain(std::iter::once(local.len()))
        .collect();
    let counts: Vec<usize> = (0..size).map(|o| cuts[o + 1] - cuts[o]).collect();
    let (asked, asked_counts) = all_to_all_staged(comm, local, &counts, stage)?;
    let mut bucket = asked.clone();
    bucket.sort_unstable();
    bucket.dedup();
    let (first, total) = prefix(comm, bucket.len());
    // Every id asked for is in the bucket.
    let answers: Vec<u32> = asked
        .iter()
        .map(|x| (first + bucket.partition_point(|y| y < x)) as u32)
        .collect();
    drop(asked);
    let (global, _) = all_to_all_staged(comm, &answers, &asked_counts, stage)?;
    Ok((
        global,
        total,
        LabelShare {
            first,
            labels: Labels::Ids(bucket),
        },
    ))
}

/// `size - 1` ids cutting the ids of every rank into about equal ranges of values: owner `o`
/// holds the ids from splitter `o - 1` (included) to splitter `o` (excluded). Collective.
fn splitters(comm: &dyn Comm, local: &[u32]) -> Vec<u32> {
    const SAMPLES: usize = 256;
    let size = comm.size();
    let n = local.len();
    let s = n.min(SAMPLES);
    let sample: Vec<u32> = (0..s).map(|i| local[i * n / s]).collect();
    let (mut all, _) = comm.all_gather_u32(&sample);
    all.sort_unstable();
    (1..size)
        .map(|o| all.get(o * all.len() / size).copied().unwrap_or(u32::MAX))
        .collect()
}

/// The first of `mine` consecutive ids of this rank when every rank numbers its own after the
/// ranks before it, and the total over the ranks. Collective.
fn prefix(comm: &dyn Comm, mine: usize) -> (usize, usize) {
    let (all, _) = comm.all_gather_u64(&[mine as u64]);
    let first = all[..comm.rank()].iter().sum::<u64>() as usize;
    (first, all.iter().sum::<u64>() as usize)
}

/// The whole file's id of each of this rank's `.abc` labels (`names`: in order of first
/// appearance in the part), the number of distinct labels in the file, and this rank's share.
/// Collective; more labels than ids is an error naming `path`.
fn number_labels(
    comm: &dyn Comm,
    names: Vec<String>,
    path: &Path,
    stage: usize,
) -> Result<(Vec<u32>, usize, LabelShare)> {
    let size = comm.size();
    let owner = owner_of_labels(comm);
    // Each label to its owner, as (its number in the part, the label), grouped by owner.
    let owners: Vec<usize> = names.iter().map(|n| owner(n.as_bytes())).collect();
    let mut sent: Vec<Vec<u32>> = vec![Vec::new(); size];
    let mut records: Vec<Vec<u32>> = vec![Vec::new(); size];
    for (i, name) in names.iter().enumerate() {
        sent[owners[i]].push(i as u32);
        records[owners[i]].push(i as u32);
        push_label(&mut records[owners[i]], name.as_bytes());
    }
    let (words, counts) = flatten(records);
    let (got, got_counts) = all_to_all_staged(comm, &words, &counts, stage)?;
    drop(words);
    let mut owned = Owned::default();
    let mut from: Vec<usize> = Vec::with_capacity(size);
    let mut at = 0;
    for (rank, &len) in got_counts.iter().enumerate() {
        let end = at + len;
        let before = owned.records.len();
        while at < end {
            let i = got[at];
            let (label, next) = read_label(&got, at + 1);
            owned.add(label, (rank as u32, i));
            at = next;
        }
        from.push(owned.records.len() - before);
        // One source at a time on every rank: a collective check of the interrupt flag.
        agree(comm, crate::interrupt::check())?;
    }
    drop(got);
    // Each rank learns which of its labels appear first there.
    let firsts: Vec<u32> = owned
        .records
        .iter()
        .zip(&owned.positions)
        .map(|(&r, &p)| u32::from(owned.first[r as usize] == p))
        .collect();
    let (is_first, _) = all_to_all_staged(comm, &firsts, &from, stage)?;
    let order: Vec<u32> = sent.concat();
    let mut first_here = vec![false; names.len()];
    for (k, &f) in is_first.iter().enumerate() {
        first_here[order[k] as usize] = f == 1;
    }
    let mine = first_here.iter().filter(|&&f| f).count();
    let (first, total) = prefix(comm, mine);
    if total as u64 > u32::MAX as u64 {
        return Err(Error::Input {
            path: path.to_path_buf(),
            message: format!("more than {} distinct labels", u32::MAX),
        });
    }
    // The ids of this rank's first appearances, to their owners; the owners answer every rank
    // with the id of each label it holds.
    let mut next = first as u32;
    let mut local_id = vec![u32::MAX; names.len()];
    for (i, &f) in first_here.iter().enumerate() {
        if f {
            local_id[i] = next;
            next += 1;
        }
    }
    let tell: Vec<u32> = order.iter().map(|&i| local_id[i as usize]).collect();
    let (told, _) = all_to_all_staged(comm, &tell, &counts_of(&sent), stage)?;
    let mut id_of = vec![u32::MAX; owned.first.len()];
    for (k, &id) in told.iter().enumerate() {
        if id != u32::MAX {
            id_of[owned.records[k] as usize] = id;
        }
    }
    let answers: Vec<u32> = owned.records.iter().map(|&r| id_of[r as usize]).collect();
    drop(owned);
    let (ids, _) = all_to_all_staged(comm, &answers, &from, stage)?;
    let mut global = vec![0u32; names.len()];
    for (k, &id) in ids.iter().enumerate() {
        global[order[k] as usize] = id;
    }
    let kept: Vec<String> = names
        .into_iter()
        .zip(&first_here)
        .filter_map(|(n, &f)| f.then_some(n))
        .collect();
    Ok((
        global,
        total,
        LabelShare {
            first,
            labels: Labels::Names(kept),
        },
    ))
}

/// The labels a rank owns, and the records it received: for each record (in the order
/// received), the label's index among the owned ones and its position.
#[derive(Default)]
struct Owned {
    /// Label to its index in `first`; std's per-process key (labels are the file's, and only
    /// this rank's map sees this key).
    index: HashMap<Vec<u8>, u32, RandomState>,
    /// Each owned label's first position: (rank, number in that rank's part).
    first: Vec<(u32, u32)>,
    /// Each record's label index.
    records: Vec<u32>,
    /// Each record's position: (rank, number in that rank's part).
    positions: Vec<(u32, u32)>,
}

impl Owned {
    /// Records the label seen at `position`; records arrive in file order of their positions,
    /// so the first record of a label is its first position.
    fn add(&mut self, label: Vec<u8>, position: (u32, u32)) {
        let next = self.first.len() as u32;
        let index = *self.index.entry(label).or_insert(next);
        if index == next {
            self.first.push(position);
        }
        self.records.push(index);
        self.positions.push(position);
    }
}

/// The owner of a label: a hash keyed by rank 0's random key, modulo the ranks. Collective (the
/// key travels).
fn owner_of_labels(comm: &dyn Comm) -> impl Fn(&[u8]) -> usize {
    let mut key = RandomState::new().hash_one(0u64).to_le_bytes().to_vec();
    comm.broadcast_bytes(0, &mut key);
    let key = key
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes);
    let size = comm.size() as u64;
    move |label: &[u8]| {
        // The same hasher (fixed SipHash keys) on every rank; the drawn key mixed in first.
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        label.hash(&mut h);
        (h.finish() % size) as usize
    }
}

/// Appends a label as its length in bytes and its bytes packed four to a word.
fn push_label(words: &mut Vec<u32>, label: &[u8]) {
    words.push(label.len() as u32);
    for c in label.chunks(4) {
        let mut b = [0u8; 4];
        b[..c.len()].copy_from_slice(c);
        words.push(u32::from_le_bytes(b));
    }
}

/// The label written by [`push_label`] at `words[at..]`, and where the next word starts.
fn read_label(words: &[u32], at: usize) -> (Vec<u8>, usize) {
    let len = words[at] as usize;
    let end = at + 1 + len.div_ceil(4);
    let mut label: Vec<u8> = words[at + 1..end]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    label.truncate(len);
    (label, end)
}

/// Per-rank lists concatenated, with their lengths.
fn flatten(lists: Vec<Vec<u32>>) -> (Vec<u32>, Vec<usize>) {
    let counts = counts_of(&lists);
    (lists.concat(), counts)
}

fn counts_of(lists: &[Vec<u32>]) -> Vec<usize> {
    lists.iter().map(Vec::len).collect()
}

/// [`Comm::all_to_all_u32`] in rounds of at most `stage` elements from one rank to another, so
/// that no message passes MPI's 32-bit counts however much travels; what each rank sent comes
/// whole, in rank order. Collective; an interrupt on any rank stops every rank.
pub(crate) fn all_to_all_staged(
    comm: &dyn Comm,
    send: &[u32],
    counts: &[usize],
    stage: usize,
) -> Result<(Vec<u32>, Vec<usize>)> {
    let stage = stage.clamp(1, MAX_MESSAGE);
    let size = comm.size();
    let starts = offsets(counts);
    let mut rounds = [counts.iter().map(|c| c.div_ceil(stage)).max().unwrap_or(0) as u64];
    comm.max_u64(&mut rounds);
    let mut got: Vec<Vec<u32>> = vec![Vec::new(); size];
    for round in 0..rounds[0] as usize {
        let mut buf = Vec::new();
        let mut sizes = vec![0; size];
        for (to, &count) in counts.iter().enumerate() {
            let lo = (round * stage).min(count);
            let hi = (lo + stage).min(count);
            buf.extend_from_slice(&send[starts[to] + lo..starts[to] + hi]);
            sizes[to] = hi - lo;
        }
        let (recv, recv_counts) = comm.all_to_all_u32(&buf, &sizes);
        let mut at = 0;
        for (from, &n) in recv_counts.iter().enumerate() {
            got[from].extend_from_slice(&recv[at..at + n]);
            at += n;
        }
        agree(comm, crate::interrupt::check())?;
    }
    Ok(flatten(got))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::ThreadComm;
    use crate::io;

    /// Every rank's part of `f` renumbered, and the labels gathered on rank 0, `ranks` threads
    /// standing for the ranks.
    fn renumbered(ranks: usize, f: &Path, stage: usize) -> Vec<Result<(Loaded, Option<Labels>)>> {
        let group = ThreadComm::group(ranks);
        std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        let part = agree(c, io::load_part(f, None, c.rank(), c.size()))?;
                        let (l, share) = renumber(c, part, f, stage)?;
                        let all = share.expect("a share").gather(c, stage)?;
                        Ok((l, all))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Asserts that every rank count numbers `f` as one process does: the parts' edges, in
    /// rank order, are the file's, and rank 0 gathers the file's labels.
    fn numbered_as_one_process(f: &Path) {
        let want = io::load(f, None).unwrap();
        for ranks in 1..=5 {
            for stage in [1, 3, 1 << 20] {
                let what = format!("{ranks} ranks, stage {stage}");
                let got: Vec<(Loaded, Option<Labels>)> = renumbered(ranks, f, stage)
                    .into_iter()
                    .map(|r| r.unwrap())
                    .collect();
                let edges: Vec<(u32, u32)> = got
                    .iter()
                    .flat_map(|(l, _)| l.edges.edges.iter().copied())
                    .collect();
                assert_eq!(edges, want.edges.edges, "{what}");
                for (rank, (l, labels)) in got.iter().enumerate() {
                    assert_eq!(l.edges.nrows, want.edges.nrows, "{what}");
                    assert_eq!(l.edges.ncols, want.edges.ncols, "{what}");
                    match rank {
                        0 => assert_eq!(labels.as_ref(), Some(&want.labels), "{what}"),
                        _ => assert_eq!(labels, &None, "{what}"),
                    }
                }
            }
        }
    }

    #[test]
    fn snap_ids_are_numbered_in_increasing_order_across_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.txt");
        let mut rng = crate::generate::rng::SplitMix64::new(7);
        let mut text = String::from("# Directed graph\n# FromNodeId\tToNodeId\n");
        for k in 0..300 {
            // Ids spread over the whole range, and a dense cluster of small ones.
            let big = |r: u64| r % 4_000_000_000;
            let (u, v) = match k % 3 {
                0 => (big(rng.next_u64()), rng.next_u64() % 40),
                _ => (rng.next_u64() % 40, rng.next_u64() % 60),
            };
            text.push_str(&format!("{u}\t{v}\n"));
            if k % 50 == 0 {
                text.push_str(&format!("# a comment\n{v} {u}\n{u} {u}\n"));
            }
        }
        std::fs::write(&f, &text).unwrap();
        numbered_as_one_process(&f);
        // Weighted on some lines only (the others weigh 1).
        let g = dir.path().join("w.snap");
        std::fs::write(&g, text.replace("\t3\n", "\t3 0.25\n") + "5 6 2.5\n").unwrap();
        numbered_as_one_process(&g);
    }

    #[test]
    fn abc_labels_are_numbered_in_order_of_first_appearance_across_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("l.abc");
        let mut rng = crate::generate::rng::SplitMix64::new(11);
        let mut text = String::from("% first\tcat 2\n");
        for k in 0..300 {
            let (a, b) = (rng.next_u64() % 70, rng.next_u64() % (5 + k));
            match k % 4 {
                // Labels with spaces, `#`, `%` and non-ASCII bytes, TAB-separated.
                0 => text.push_str(&format!("node {a}\t#é{b}\t{k}.5\n")),
                1 => text.push_str(&format!("n{a} %{b}\n")),
                2 => text.push_str(&format!("  # comment\nn{a}\t\tnode {b} \r\n")),
                _ => text.push_str(&format!("n{a} n{a} 1e-3\nn{a} n{a}\n")),
            }
        }
        std::fs::write(&f, &text).unwrap();
        numbered_as_one_process(&f);
        // One label appearing first on the last line, and a file of one line.
        let g = dir.path().join("one.abc");
        std::fs::write(&g, "a b\n").unwrap();
        numbered_as_one_process(&g);
        let e = dir.path().join("empty.abc");
        std::fs::write(&e, "# nothing\n").unwrap();
        numbered_as_one_process(&e);
    }

    /// Each rank's owner of each of 64 labels, in one run of 4 threads as ranks.
    fn owners_in_one_run() -> Vec<Vec<usize>> {
        let group = ThreadComm::group(4);
        std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        let owner = owner_of_labels(c);
                        (0..64)
                            .map(|i| owner(format!("label {i}").as_bytes()))
                            .collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn owners_agree_within_a_run_and_follow_the_drawn_key() {
        let a = owners_in_one_run();
        let b = owners_in_one_run();
        // Every rank computes the same owners.
        assert!(a.iter().all(|o| *o == a[0]) && b.iter().all(|o| *o == b[0]));
        // Every rank owns some labels; another run's key sends them elsewhere (all 64 the same
        // by chance: 4^-64).
        assert!((0..4).all(|r| a[0].contains(&r)), "{:?}", a[0]);
        assert_ne!(a[0], b[0]);
    }

    #[test]
    fn labels_travel_whole_in_words() {
        let mut words = Vec::new();
        for l in ["", "a", "abcd", "abcde", "é€"] {
            push_label(&mut words, l.as_bytes());
        }
        let mut at = 0;
        let mut back = Vec::new();
        while at < words.len() {
            let (l, next) = read_label(&words, at);
            back.push(String::from_utf8(l).unwrap());
            at = next;
        }
        assert_eq!(back, ["", "a", "abcd", "abcde", "é€"]);
    }

    #[test]
    fn staged_exchange_is_the_whole_exchange() {
        for ranks in 1..=4 {
            let group = ThreadComm::group(ranks);
            let got: Vec<(Vec<u32>, Vec<usize>)> = std::thread::scope(|s| {
                let hs: Vec<_> = group
                    .iter()
                    .map(|c| {
                        s.spawn(move || {
                            // Rank r sends `to + 1` words to rank `to`, each `100 * r + to`.
                            let r = c.rank() as u32;
                            let counts: Vec<usize> = (1..=c.size()).collect();
                            let send: Vec<u32> = (0..c.size() as u32)
                                .flat_map(|to| {
                                    std::iter::repeat(100 * r + to).take(to as usize + 1)
                                })
                                .collect();
                            all_to_all_staged(c, &send, &counts, 2).unwrap()
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (me, (words, counts)) in got.iter().enumerate() {
                assert_eq!(counts, &vec![me + 1; ranks]);
                let want: Vec<u32> = (0..ranks as u32)
                    .flat_map(|from| std::iter::repeat(100 * from + me as u32).take(me + 1))
                    .collect();
                assert_eq!(words, &want);
            }
        }
    }
}
