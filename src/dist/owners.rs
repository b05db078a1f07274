//! Records (directed pairs, or pairs with a weight) grouped by the rank that owns their first
//! vertex, made in parallel: what an exchange of edges across ranks sends. The input is cut into
//! chunks; each chunk counts its records per owner, and then writes them at its own places, so
//! each owner's records come in the order the input makes them, as one pass in order gives them.

use super::Blocks;
use crate::mem::SharedSlice;
use rayon::prelude::*;
use std::ops::Range;

/// Numbered items that make records of `W` words whose first word is a vertex (a directed pair
/// `[a, b]`, or a pair and its weight's bits), the same records every time they are asked.
pub(crate) trait RecordSource<const W: usize>: Sync {
    /// The number of items.
    fn items(&self) -> usize;
    /// Calls `out(record)` for each record the items `range` make, in order.
    fn records(&self, range: Range<usize>, out: impl FnMut([u32; W]));
}

/// The records of `source`, grouped by the owner of their first word's vertex in `blocks` and
/// flattened, in the order the items make them within each owner, with the number of u32s for
/// each owner.
pub(crate) fn by_owner<const W: usize>(
    source: &impl RecordSource<W>,
    blocks: &Blocks,
) -> (Vec<u32>, Vec<usize>) {
    let parts = blocks.parts;
    let items = source.items();
    let chunk = items
        .div_ceil(rayon::current_num_threads() * 8)
        .max(1 << 12);
    let chunks: Vec<Range<usize>> = (0..items)
        .step_by(chunk)
        .map(|s| s..(s + chunk).min(items))
        .collect();
    let counts: Vec<Vec<usize>> = chunks
        .par_iter()
        .map(|r| {
            let mut c = vec![0usize; parts];
            source.records(r.clone(), |x| c[blocks.owner(x[0] as usize)] += W);
            c
        })
        .collect();
    let mut totals = vec![0usize; parts];
    for c in &counts {
        for (t, &x) in totals.iter_mut().zip(c) {
            *t += x;
        }
    }
    // Where each chunk's pairs for each owner start: after the owners before, and after the
    // chunks before within the owner.
    let starts = super::chunk_starts(&counts, &super::offsets(&totals));
    let len: usize = totals.iter().sum();
    let mut send: Vec<u32> = Vec::with_capacity(len);
    let out = SharedSlice::new(&mut send.spare_capacity_mut()[..len]);
    chunks
        .into_par_iter()
        .zip(starts)
        .zip(counts)
        .for_each(|((r, mut at), count)| {
            let ends: Vec<usize> = at.iter().zip(&count).map(|(s, c)| s + c).collect();
            source.records(r, |x| {
                let o = blocks.owner(x[0] as usize);
                // A source that made more records than it counted would write into another
                // chunk's places.
                assert!(
                    at[o] < ends[o],
                    "a record source changed between its passes"
                );
                for (k, &w) in x.iter().enumerate() {
                    // SAFETY: the places `starts..ends` of each owner are this chunk's alone.
                    unsafe { out.write(at[o] + k, w) };
                }
                at[o] += W;
            });
            assert!(at == ends, "a record source changed between its passes");
        });
    // SAFETY: every chunk wrote all its places (checked above), and the places cover `0..len`.
    unsafe { send.set_len(len) };
    (send, totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every edge but a loop, both ways.
    struct Both<'a>(&'a [(u32, u32)]);

    impl RecordSource<2> for Both<'_> {
        fn items(&self) -> usize {
            self.0.len()
        }
        fn records(&self, range: Range<usize>, mut out: impl FnMut([u32; 2])) {
            for &(u, v) in &self.0[range] {
                if u != v {
                    out([u, v]);
                    out([v, u]);
                }
            }
        }
    }

    #[test]
    fn pairs_are_grouped_in_input_order_on_any_number_of_threads() {
        let mut rng = crate::generate::rng::SplitMix64::new(3);
        let n = 1000u32;
        let edges: Vec<(u32, u32)> = (0..50_000)
            .map(|_| {
                let r = rng.next_u64();
                ((r % n as u64) as u32, ((r >> 32) % n as u64) as u32)
            })
            .collect();
        for parts in [1, 2, 3, 7] {
            let blocks = Blocks::even(n as usize, parts);
            // One pass in order.
            let mut want = vec![Vec::new(); parts];
            for &(u, v) in &edges {
                if u != v {
                    want[blocks.owner(u as usize)].extend([u, v]);
                    want[blocks.owner(v as usize)].extend([v, u]);
                }
            }
            let counts: Vec<usize> = want.iter().map(Vec::len).collect();
            let want: Vec<u32> = want.concat();
            for threads in [1, 2, 5] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let got = pool.install(|| by_owner(&Both(&edges), &blocks));
                assert_eq!(got, (want.clone(), counts.clone()), "{parts} {threads}");
            }
        }
        let none = by_owner(&Both(&[]), &Blocks::even(0, 2));
        assert_eq!(none, (vec![], vec![0, 0]));
    }
}
