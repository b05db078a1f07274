//! Labels numbered in the order they first appear, on every thread: each chunk of the file
//! numbers its own labels (hashing each once, keyed, and reading its bytes in file order); the
//! chunks' first appearances, grouped by a few bits of their hash into shards, find the file's
//! first appearances; those, sorted by position, give the final ids. The ids do not depend on
//! the number of threads.

use rayon::prelude::*;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

/// Why a list of label pairs could not be numbered.
#[derive(Debug, PartialEq)]
pub(crate) enum Shortfall {
    /// More distinct labels than ids up to the largest allowed.
    TooMany,
    /// Not enough memory for the working arrays.
    NoMemory,
}

/// Label pairs as ids: `pairs[k]` is the k-th pair's ids, `names[i]` the label with id `i`.
#[derive(Debug, PartialEq)]
pub(crate) struct Numbered<'a> {
    pub pairs: Vec<(u32, u32)>,
    pub names: Vec<&'a [u8]>,
}

/// Groups of labels whose file-wide first appearances are found independently.
const SHARDS: usize = 64;

/// Pairs a chunk holds at least.
const MIN_CHUNK: usize = 1 << 12;

/// A label with its (keyed) hash, so that no table hashes it again.
#[derive(Clone, Copy)]
struct Key<'a> {
    hash: u64,
    label: &'a [u8],
}

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.label == other.label
    }
}

impl Eq for Key<'_> {}

impl Hash for Key<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Passes a [`Key`]'s hash through: it came from a keyed hash already.
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    /// Not used by a [`Key`] (which writes only its hash); folds the bytes in, so that any
    /// other use still hashes.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
}

/// A table of [`Key`]s.
type Table<'a> = HashMap<Key<'a>, u32, BuildHasherDefault<PassHasher>>;

/// The shard of a hash: bits a table does not use to pick a bucket or a tag.
fn shard(hash: u64) -> usize {
    (hash >> 32) as usize & (SHARDS - 1)
}

/// A label's first appearance in a chunk: the label and its place among the occurrences
/// (pair `k`'s labels are occurrences `2k` and `2k + 1`).
struct First<'a> {
    key: Key<'a>,
    at: usize,
}

/// A chunk's own labels: their first appearances by shard, and where each local id's is.
struct ChunkLabels<'a> {
    by_shard: Vec<Vec<First<'a>>>,
    place: Vec<(u32, u32)>,
}

/// Numbers the labels of `pairs` (in file order) by first appearance: the first label seen
/// gets 0, the next new one 1, and so on; at most `max_id + 1` distinct labels. The hash is
/// keyed at random per call (labels come from files gmcl does not control: an unkeyed hash
/// lets chosen labels collide); the ids do not depend on the key.
pub(crate) fn number_pairs<'a>(
    pairs: &[(&'a [u8], &'a [u8])],
    max_id: u64,
) -> Result<Numbered<'a>, Shortfall> {
    let n = pairs.len();
    let chunk = (n / (rayon::current_num_threads() * 2)).max(MIN_CHUNK);
    let state = label_hasher();

    // Each chunk numbers its labels by their first appearance in it.
    let mut ids = zeroed::<(u32, u32)>(n)?;
    let chunks: Vec<ChunkLabels> = ids
        .par_chunks_mut(chunk)
        .zip(pairs.par_chunks(chunk))
        .enumerate()
        .map(|(c, (ids, pairs))| {
            let mut local = Table::default();
            let mut by_shard: Vec<Vec<First>> = (0..SHARDS).map(|_| Vec::new()).collect();
            let mut place = Vec::new();
            let mut number = |at: usize, label: &'a [u8]| {
                let key = Key {
                    hash: state.hash_one(label),
                    label,
                };
                let next = place.len() as u32;
                *local.entry(key).or_insert_with(|| {
                    let s = shard(key.hash);
                    place.push((s as u32, by_shard[s].len() as u32));
                    by_shard[s].push(First { key, at });
                    next
                })
            };
            for (k, (id, &(a, b))) in ids.iter_mut().zip(pairs).enumerate() {
                let at = 2 * (c * chunk + k);
                *id = (number(at, a), number(at + 1, b));
            }
            ChunkLabels { by_shard, place }
        })
        .collect();

    // Each shard walks its labels' chunk-wise first appearances in chunk order: the first of
    // a label is its first in the file. `index[s][c][j]`: the place among shard `s`'s labels
    // of chunk `c`'s `j`-th label in that shard.
    let (firsts, index): (Vec<Vec<usize>>, Vec<Vec<Vec<u32>>>) = (0..SHARDS)
        .into_par_iter()
        .map(|s| {
            let mut seen = Table::default();
            let mut firsts = Vec::new();
            let mut index = Vec::with_capacity(chunks.len());
            for chunk in &chunks {
                let mut of_chunk = Vec::with_capacity(chunk.by_shard[s].len());
                for f in &chunk.by_shard[s] {
                    let next = firsts.len() as u32;
                    of_chunk.push(*seen.entry(f.key).or_insert_with(|| {
                        firsts.push(f.at);
                        next
                    }));
                }
                index.push(of_chunk);
            }
            (firsts, index)
        })
        .unzip();

    // The final ids: the shards' first appearances in file order.
    let distinct: usize = firsts.iter().map(Vec::len).sum();
    if distinct as u64 > max_id.saturating_add(1) {
        return Err(Shortfall::TooMany);
    }
    let mut order: Vec<(usize, u32, u32)> = Vec::new();
    order
        .try_reserve_exact(distinct)
        .map_err(|_| Shortfall::NoMemory)?;
    for (s, f) in firsts.iter().enumerate() {
        order.extend(
            f.iter()
                .enumerate()
                .map(|(i, &at)| (at, s as u32, i as u32)),
        );
    }
    order.par_sort_unstable_by_key(|&(at, _, _)| at);
    let mut final_id: Vec<Vec<u32>> = firsts.iter().map(|f| vec![0; f.len()]).collect();
    for (id, &(_, s, i)) in order.iter().enumerate() {
        final_id[s as usize][i as usize] = id as u32;
    }
    let names = order
        .par_iter()
        .map(|&(at, _, _)| {
            let (a, b) = pairs[at / 2];
            if at % 2 == 0 {
                a
            } else {
                b
            }
        })
        .collect();

    // Each chunk's local ids become the final ones.
    ids.par_chunks_mut(chunk)
        .zip(chunks.par_iter())
        .enumerate()
        .for_each(|(c, (ids, chunk))| {
            let to_final: Vec<u32> = chunk
                .place
                .iter()
                .map(|&(s, j)| {
                    let s = s as usize;
                    final_id[s][index[s][c][j as usize] as usize]
                })
                .collect();
            for id in ids {
                *id = (to_final[id.0 as usize], to_final[id.1 as usize]);
            }
        });
    Ok(Numbered { pairs: ids, names })
}

/// The labels' hash: std's SipHash, keyed at random (a new key each call).
fn label_hasher() -> RandomState {
    RandomState::new()
}

/// `len` default values, or [`Shortfall::NoMemory`].
fn zeroed<T: Clone + Default>(len: usize) -> Result<Vec<T>, Shortfall> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Shortfall::NoMemory)?;
    v.resize(len, T::default());
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The sequential reference: one table, pairs in order.
    fn reference<'a>(pairs: &[(&'a [u8], &'a [u8])]) -> Numbered<'a> {
        let mut ids: HashMap<&[u8], u32> = HashMap::new();
        let mut names = Vec::new();
        let mut id = |l: &'a [u8]| {
            *ids.entry(l).or_insert_with(|| {
                names.push(l);
                names.len() as u32 - 1
            })
        };
        let pairs = pairs.iter().map(|&(a, b)| (id(a), id(b))).collect();
        Numbered { pairs, names }
    }

    /// Labels of 16 bytes that differ only in bytes 12 to 15, as in a hash-flooding attack on
    /// an unkeyed multiplicative hash.
    fn colliding_labels(n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let mut l = b"node-label-x".to_vec();
                l.extend([1, 26, 676, 17576].map(|d| b'a' + (i / d % 26) as u8));
                l
            })
            .collect()
    }

    #[test]
    fn the_label_hash_is_keyed_and_spreads_colliding_labels() {
        let (one, other) = (label_hasher(), label_hasher());
        let label: &[u8] = b"a label";
        // Keyed: two calls hash one label differently (an unkeyed hash cannot).
        assert_ne!(one.hash_one(label), other.hash_one(label));
        // Labels that an unkeyed multiplicative hash sends to one bucket spread over the low
        // bits that pick a bucket (4096 labels into 4096 buckets fill about 2600), the top
        // bits that tag it and the shards.
        let hashes: Vec<u64> = colliding_labels(4096)
            .iter()
            .map(|l| one.hash_one(&l[..]))
            .collect();
        let spread = |f: &dyn Fn(u64) -> u64| {
            let set: std::collections::HashSet<u64> = hashes.iter().map(|&h| f(h)).collect();
            set.len()
        };
        assert!(spread(&|h| h & 4095) > 2000);
        assert_eq!(spread(&|h| h >> 57), 128);
        assert_eq!(spread(&|h| shard(h) as u64), SHARDS);
    }

    #[test]
    fn first_appearance_across_chunks_and_shards() {
        // Enough pairs for several chunks on any thread count, labels reappearing far apart.
        let labels: Vec<String> = (0..5000)
            .map(|i| format!("label {}", i * 7919 % 5003))
            .collect();
        let pairs: Vec<(&[u8], &[u8])> = (0..3 * MIN_CHUNK)
            .map(|k| {
                let a = &labels[k * 31 % labels.len()];
                let b = &labels[(k * k + 3) % labels.len()];
                (a.as_bytes(), b.as_bytes())
            })
            .collect();
        let want = reference(&pairs);
        for threads in [1, 2, 5] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got = pool
                .install(|| number_pairs(&pairs, u64::from(u32::MAX)))
                .unwrap();
            assert!(got == want, "{threads} threads");
        }
        assert_eq!(want.names[0], b"label 0");
    }

    #[test]
    fn too_many_labels_and_none() {
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"a", b"b"), (b"b", b"c")];
        assert_eq!(number_pairs(&pairs, 1), Err(Shortfall::TooMany));
        let three = number_pairs(&pairs, 2).unwrap();
        assert_eq!(three.pairs, [(0, 1), (1, 2)]);
        let none = number_pairs(&[], 0).unwrap();
        assert!(none.pairs.is_empty() && none.names.is_empty());
    }

    proptest! {
        #[test]
        fn equals_the_sequential_numbering(
            pairs in proptest::collection::vec((0u16..400, 0u16..400), 0..3000),
        ) {
            let text: Vec<(String, String)> =
                pairs.iter().map(|(a, b)| (format!("v{a}"), format!("{b}"))).collect();
            let pairs: Vec<(&[u8], &[u8])> =
                text.iter().map(|(a, b)| (a.as_bytes(), b.as_bytes())).collect();
            prop_assert!(number_pairs(&pairs, u64::from(u32::MAX)).unwrap() == reference(&pairs));
        }
    }
}
