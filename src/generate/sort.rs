//! Edges split into buckets by the high bits of their source id, input order kept within each
//! bucket: a parallel, stable counting sort with per-chunk histograms, so nothing depends on the
//! thread count. Each bucket is then handled in cache: a hash set finds first occurrences for
//! `no_duplicates`, a sort orders the bucket for sorted output.
//!
//! Fresh memory is slow to touch (the kernel clears every page, and a virtual machine's host may
//! fault it in too), so the passes reuse the arrays they are given where they can.

use super::rng::GOLDEN;
use super::stream::Batch;
use crate::mem::SharedSlice;
use rayon::prelude::*;
use std::ops::Range;

/// The key of an edge: sorting keys sorts edges by (source, target).
#[inline]
pub(crate) fn key(u: u32, v: u32) -> u64 {
    ((u as u64) << 32) | v as u64
}

#[inline]
fn unkey(k: u64) -> (u32, u32) {
    ((k >> 32) as u32, k as u32)
}

/// Most bucket bits.
const MAX_BUCKET_BITS: u32 = 14;
/// Aimed-for edges per bucket (log2): a bucket's work then stays in cache.
const BUCKET_ITEMS_BITS: u32 = 13;

/// One item per edge, grouped into buckets by the edge's source (`key >> shift`), each bucket
/// in input order.
struct Partition<T> {
    shift: u32,
    /// Edges per chunk of the counting sort.
    chunk: usize,
    /// `offsets[c * nb + b]`: where chunk `c`'s first edge of bucket `b` went.
    offsets: Vec<usize>,
    /// Where each bucket starts, and the end.
    starts: Vec<usize>,
    items: Vec<T>,
}

impl<T: Copy + Send + Sync> Partition<T> {
    /// Splits `edges` (ids below `2^k`); `item(i, edge)` is what is stored for edge `i`.
    fn new(edges: &[(u32, u32)], k: u32, item: impl Fn(usize, (u32, u32)) -> T + Sync) -> Self {
        let len = edges.len();
        let lb = bucket_bits(len, k);
        let shift = 32 + k - lb;
        let nb = 1usize << lb;

        // Fixed-size chunks (at most 256 of them): each counts its edges per bucket, then
        // writes them at its own offsets within each bucket.
        let chunk = len.div_ceil(256).max(1 << 16);
        let nchunks = len.div_ceil(chunk);
        let mut offsets = vec![0usize; nchunks * nb];
        offsets
            .par_chunks_mut(nb)
            .zip(edges.par_chunks(chunk))
            .for_each(|(h, es)| {
                for &(u, _) in es {
                    h[bucket_of(u, shift)] += 1;
                }
            });
        let mut starts = Vec::with_capacity(nb + 1);
        let mut acc = 0usize;
        for b in 0..nb {
            starts.push(acc);
            for c in 0..nchunks {
                let x = offsets[c * nb + b];
                offsets[c * nb + b] = acc;
                acc += x;
            }
        }
        starts.push(acc);

        let mut items: Vec<T> = Vec::with_capacity(len);
        {
            let out = SharedSlice::new(&mut items.spare_capacity_mut()[..len]);
            offsets
                .par_chunks(nb)
                .zip(edges.par_chunks(chunk))
                .enumerate()
                .for_each(|(c, (at, es))| {
                    let mut at = at.to_vec();
                    for (i, &e) in es.iter().enumerate() {
                        let slot = &mut at[bucket_of(e.0, shift)];
                        // SAFETY: each (chunk, bucket) owns the slots from its offset up to the
                        // next one's, and visits each once.
                        unsafe { out.write(*slot, item(c * chunk + i, e)) };
                        *slot += 1;
                    }
                });
        }
        // SAFETY: the offsets tile `0..len` and every edge was written once.
        unsafe { items.set_len(len) };
        Partition {
            shift,
            chunk,
            offsets,
            starts,
            items,
        }
    }

    /// Contiguous runs of buckets holding about equal numbers of items, a few per thread.
    /// They only divide the work: no result depends on them.
    fn groups(&self) -> Vec<Range<usize>> {
        let starts = &self.starts;
        let nb = starts.len() - 1;
        let total = starts[nb] as u128;
        let parts = (rayon::current_num_threads() * 8).max(1);
        let mut out = Vec::with_capacity(parts);
        let mut b0 = 0;
        for g in 1..=parts {
            let b1 = if g == parts {
                nb
            } else {
                let target = (total * g as u128 / parts as u128) as usize;
                starts.partition_point(|&s| s < target).clamp(b0, nb)
            };
            if b1 > b0 {
                out.push(b0..b1);
                b0 = b1;
            }
        }
        out
    }

    /// Runs `f(state, bucket, items, out)` on every bucket, in parallel over runs of buckets,
    /// where `out` is the bucket's part of `outs` (laid out like the items); returns what each
    /// run's `fold` made of its per-run state, in bucket order.
    fn for_each_bucket<O: Send, S: Send>(
        &mut self,
        outs: &mut [O],
        init: impl Fn() -> S + Sync,
        f: impl Fn(&mut S, usize, &mut [T], &mut [O]) + Sync,
    ) -> Vec<S> {
        let groups = self.groups();
        let starts = &self.starts;
        let mut parts = Vec::with_capacity(groups.len());
        let (mut items, mut outs) = (&mut self.items[..], outs);
        for r in groups {
            let n = starts[r.end] - starts[r.start];
            let (i, irest) = std::mem::take(&mut items).split_at_mut(n);
            let on = n.min(outs.len());
            let (o, orest) = std::mem::take(&mut outs).split_at_mut(on);
            parts.push((r, i, o));
            items = irest;
            outs = orest;
        }
        parts
            .into_par_iter()
            .with_max_len(1)
            .map(|(r, items, outs)| {
                let mut state = init();
                let base = starts[r.start];
                for b in r {
                    let (s, e) = (starts[b] - base, starts[b + 1] - base);
                    let o = if outs.is_empty() {
                        &mut [][..]
                    } else {
                        &mut outs[s..e]
                    };
                    f(&mut state, b, &mut items[s..e], o);
                }
                state
            })
            .collect()
    }
}

/// Bucket bits for `len` edges over `k`-bit ids.
fn bucket_bits(len: usize, k: u32) -> u32 {
    let len_bits = usize::BITS - len.leading_zeros();
    k.min(len_bits.saturating_sub(BUCKET_ITEMS_BITS))
        .min(MAX_BUCKET_BITS)
}

/// What a bucket stores of an edge's key: the bits below the bucket number, in 32 bits when
/// they fit.
trait Local: Copy + Send + Sync + PartialEq {
    /// The value that marks an empty hash slot.
    const EMPTY: Self;
    fn pack(x: u64) -> Self;
    fn unpack(self) -> u64;
}

impl Local for u32 {
    const EMPTY: Self = u32::MAX;
    #[inline(always)]
    fn pack(x: u64) -> Self {
        x as u32
    }
    #[inline(always)]
    fn unpack(self) -> u64 {
        self as u64
    }
}

impl Local for u64 {
    const EMPTY: Self = u64::MAX;
    #[inline(always)]
    fn pack(x: u64) -> Self {
        x
    }
    #[inline(always)]
    fn unpack(self) -> u64 {
        self
    }
}

#[inline]
fn bucket_of(u: u32, shift: u32) -> usize {
    ((u as u64) << 32).checked_shr(shift).unwrap_or(0) as usize
}

/// An open-addressing set of keys, reused from bucket to bucket.
struct KeySet<L> {
    slots: Vec<L>,
    bits: u32,
    /// [`Local::EMPTY`] marks empty slots, so that key is kept aside.
    has_empty: bool,
}

impl<L: Local> KeySet<L> {
    fn new() -> Self {
        KeySet {
            slots: Vec::new(),
            bits: 0,
            has_empty: false,
        }
    }

    fn reset(&mut self, n: usize) {
        let bits = (usize::BITS - (2 * n.max(8) - 1).leading_zeros()).max(4);
        self.bits = bits;
        self.slots.clear();
        self.slots.resize(1 << bits, L::EMPTY);
        self.has_empty = false;
    }

    /// Adds `k`; true when it was not there.
    #[inline]
    fn insert(&mut self, k: L) -> bool {
        if k == L::EMPTY {
            return !std::mem::replace(&mut self.has_empty, true);
        }
        let mask = self.slots.len() - 1;
        let mut i = (k.unpack().wrapping_mul(GOLDEN) >> (64 - self.bits)) as usize;
        loop {
            let s = self.slots[i];
            if s == k {
                return false;
            }
            if s == L::EMPTY {
                self.slots[i] = k;
                return true;
            }
            i = (i + 1) & mask;
        }
    }
}

/// Keeps, in order, the first occurrence of every edge of `batch` whose key is not in the
/// sorted `seen`, at most `take` of them; returns how many such edges the batch had in all.
pub(crate) fn keep_first_new(batch: &mut Batch, k: u32, seen: &[u64], take: u64) -> u64 {
    let lb = bucket_bits(batch.edges.len(), k);
    if 2 * k - lb <= 32 {
        keep_first_new_as::<u32>(batch, k, seen, take)
    } else {
        keep_first_new_as::<u64>(batch, k, seen, take)
    }
}

fn keep_first_new_as<L: Local>(batch: &mut Batch, k: u32, seen: &[u64], take: u64) -> u64 {
    // Keys within a bucket: the source's bits below the bucket number, then the target's.
    let low_mask = (1u64 << (k - bucket_bits(batch.edges.len(), k))) - 1;
    let local = move |u: u32, v: u32| (((u as u64) & low_mask) << k) | v as u64;
    let mut part = Partition::new(&batch.edges, k, |_, (u, v)| L::pack(local(u, v)));
    let shift = part.shift;
    // A flag per item, laid out like the items: 1 for the first occurrence of a new edge.
    let mut flags = vec![0u8; batch.edges.len()];
    let found: u64 = part
        .for_each_bucket(
            &mut flags,
            || (KeySet::<L>::new(), 0u64),
            |(set, found), b, items, flags| {
                let lo = ((b as u128) << shift).min(u64::MAX as u128) as u64;
                let hi = ((b as u128 + 1) << shift).min(u64::MAX as u128 + 1);
                let s0 = seen.partition_point(|&s| s < lo);
                let s1 = seen.partition_point(|&s| (s as u128) < hi);
                set.reset(items.len() + (s1 - s0));
                for &s in &seen[s0..s1] {
                    let (u, v) = unkey(s);
                    set.insert(L::pack(local(u, v)));
                }
                // Items are in stream order, so a key's first insertion is its first occurrence.
                for (&it, f) in items.iter().zip(flags.iter_mut()) {
                    let new = set.insert(it);
                    *found += new as u64;
                    *f = new as u8;
                }
            },
        )
        .into_iter()
        .map(|(_, f)| f)
        .sum();
    let (chunk, nb) = (part.chunk, part.starts.len() - 1);
    let offsets = std::mem::take(&mut part.offsets);
    drop(part);

    // Replay the counting sort chunk by chunk to find each edge's item, compacting each chunk's
    // kept edges to its front; then close the gaps between chunks.
    let (offsets, flags) = (&offsets, &flags);
    let keep_chunk = |c: usize, es: &mut [(u32, u32)], ws: Option<&mut [f64]>| {
        let mut at = offsets[c * nb..(c + 1) * nb].to_vec();
        let mut w = 0;
        let mut ws = ws;
        for i in 0..es.len() {
            let e = es[i];
            let slot = &mut at[bucket_of(e.0, shift)];
            if flags[*slot] != 0 {
                es[w] = e;
                if let Some(ws) = ws.as_deref_mut() {
                    ws[w] = ws[i];
                }
                w += 1;
            }
            *slot += 1;
        }
        w
    };
    let kept: Vec<usize> = match &mut batch.weights {
        None => batch
            .edges
            .par_chunks_mut(chunk)
            .enumerate()
            .map(|(c, es)| keep_chunk(c, es, None))
            .collect(),
        Some(w) => batch
            .edges
            .par_chunks_mut(chunk)
            .zip(w.par_chunks_mut(chunk))
            .enumerate()
            .map(|(c, (es, ws))| keep_chunk(c, es, Some(ws)))
            .collect(),
    };
    let mut len = 0usize;
    let take = take.min(found) as usize;
    for (c, &n) in kept.iter().enumerate() {
        let n = n.min(take - len);
        if c * chunk != len {
            batch.edges.copy_within(c * chunk..c * chunk + n, len);
            if let Some(w) = &mut batch.weights {
                w.copy_within(c * chunk..c * chunk + n, len);
            }
        }
        len += n;
    }
    batch.edges.truncate(len);
    if let Some(w) = &mut batch.weights {
        w.truncate(len);
    }
    found
}

/// Merges two sorted, disjoint key lists.
pub(crate) fn merge(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Sorts the edges of `batch` by (source, target), keeping stream order among equal edges,
/// weights moving with their edges.
pub(crate) fn sort_batch(batch: &mut Batch, k: u32) {
    match &mut batch.weights {
        None => {
            let mut part = Partition::new(&batch.edges, k, |_, (u, v)| key(u, v));
            part.for_each_bucket(
                &mut batch.edges,
                || (),
                |_, _, keys, out| {
                    keys.sort_unstable();
                    for (o, &kk) in out.iter_mut().zip(keys.iter()) {
                        *o = unkey(kk);
                    }
                },
            );
        }
        Some(ws) => {
            let ws_ref = &ws[..];
            let mut part = Partition::new(&batch.edges, k, |i, (u, v)| (key(u, v), ws_ref[i]));
            part.for_each_bucket(
                &mut batch.edges,
                || (),
                |_, _, items, out| {
                    // Stable: equal edges stay in stream order.
                    items.sort_by_key(|x| x.0);
                    for (o, &(kk, _)) in out.iter_mut().zip(items.iter()) {
                        *o = unkey(kk);
                    }
                },
            );
            for (w, &(_, x)) in ws.iter_mut().zip(part.items.iter()) {
                *w = x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_edges(k: u32, n: usize, seed: u64) -> Vec<(u32, u32)> {
        let m = 1u64.checked_shl(k).map_or(u64::MAX, |x| x - 1) as u32;
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = super::super::rng::mix64(x);
                (
                    (x as u32) & m & 0xF000_00FF,
                    ((x >> 32) as u32) & m & 0x8000_000F,
                )
            })
            .collect()
    }

    #[test]
    fn sorts_by_edge_then_stream_order() {
        for k in [0u32, 1, 3, 7, 31, 32] {
            for n in [0, 1, 5000, 200_000] {
                let edges = random_edges(k, n, k as u64 + 7);
                let weights: Vec<f64> = (0..edges.len()).map(|i| i as f64).collect();
                let mut b = Batch {
                    edges: edges.clone(),
                    weights: Some(weights),
                };
                sort_batch(&mut b, k);
                let mut expect: Vec<((u32, u32), f64)> = edges
                    .iter()
                    .enumerate()
                    .map(|(i, &e)| (e, i as f64))
                    .collect();
                expect.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
                let (ee, ew): (Vec<_>, Vec<_>) = expect.into_iter().unzip();
                assert!(b.edges == ee, "k {k} n {n}");
                assert!(b.weights == Some(ew), "k {k} n {n}");
                let mut plain = Batch {
                    edges: edges.clone(),
                    weights: None,
                };
                sort_batch(&mut plain, k);
                assert!(plain.edges == ee, "k {k} n {n}");
            }
        }
    }

    #[test]
    fn keeps_first_new_occurrences() {
        let edges = vec![(3, 1), (0, 2), (3, 1), (1, 1), (0, 2), (2, 0), (1, 1)];
        let seen = vec![key(2, 0)];
        let mut b = Batch {
            weights: Some((0..edges.len()).map(|i| i as f64).collect()),
            edges,
        };
        assert_eq!(keep_first_new(&mut b, 2, &seen, 10), 3);
        assert_eq!(b.edges, [(3, 1), (0, 2), (1, 1)]);
        assert_eq!(b.weights, Some(vec![0.0, 1.0, 3.0]));
        assert_eq!(
            merge(&seen, &[key(0, 2), key(1, 1), key(3, 1)]),
            vec![key(0, 2), key(1, 1), key(2, 0), key(3, 1)]
        );
    }

    #[test]
    fn keeps_first_new_occurrences_at_scale() {
        for k in [5u32, 20, 32] {
            for take in [usize::MAX, 1000] {
                let edges = random_edges(k, 300_000, 3);
                let seen_edges = random_edges(k, 100_000, 4);
                let mut seen: Vec<u64> = seen_edges.iter().map(|&(u, v)| key(u, v)).collect();
                seen.sort_unstable();
                seen.dedup();
                let mut set: std::collections::HashSet<u64> = seen.iter().copied().collect();
                let expect: Vec<(u32, u32)> = edges
                    .iter()
                    .copied()
                    .filter(|&(u, v)| set.insert(key(u, v)))
                    .collect();
                let mut b = Batch {
                    edges,
                    weights: None,
                };
                let found = keep_first_new(&mut b, k, &seen, take as u64);
                assert_eq!(found as usize, expect.len());
                assert!(b.edges[..] == expect[..take.min(expect.len())], "k {k}");
            }
        }
    }

    #[test]
    fn key_set_handles_the_largest_key() {
        let mut s = KeySet::<u64>::new();
        s.reset(3);
        assert!(s.insert(u64::MAX) && !s.insert(u64::MAX));
        assert!(s.insert(0) && !s.insert(0) && s.insert(5));
        let mut s = KeySet::<u32>::new();
        s.reset(1000);
        assert!(s.insert(u32::MAX) && !s.insert(u32::MAX));
        for x in 0..1000u32 {
            assert!(s.insert(x * 7) && !s.insert(x * 7));
        }
    }
}
