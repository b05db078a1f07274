//! `clm info`'s measures of the clusters across ranks, bitwise the single-process ones: each
//! rank computes the terms of the members it owns ([`crate::mcl::measures`]'s per-member code),
//! every rank gathers them, and the sums run in the single-process order, cluster by cluster,
//! member by member, taking each member's terms from its owner's list.

use super::super::{agree, Comm, MAX_MESSAGE};
use super::GraphBlock;
use crate::error::{Error, Result};
use crate::mcl::measures::{self, ClusterInfo, MemberTerms};
use crate::scalar::Scalar;
use rayon::prelude::*;

/// Words per member's terms: which terms exist, then four values.
const WORDS: usize = 5;

/// `clm info`'s measures of `clusters` (the same on every rank) on the graph every rank holds
/// a block of. Collective: every rank returns the same measures.
pub fn cluster_info<T: Scalar>(
    comm: &dyn Comm,
    graph: &GraphBlock<T>,
    clusters: &[Vec<u32>],
) -> Result<ClusterInfo> {
    let first = graph.first();
    let mine = first..first + graph.rows.nrows();
    let terms = measures::terms_in_order(graph.nodes(), clusters, |v| {
        mine.contains(&(v as usize))
            .then(|| graph.rows.row(v as usize - first))
    });
    let mut words = Vec::with_capacity(terms.len() * WORDS);
    for t in &terms {
        encode(t, &mut words);
    }
    drop(terms);
    let too_large = (words.len() > MAX_MESSAGE).then(|| {
        Error::Invalid(format!(
            "the measures of {} memberships are more than one message carries",
            words.len() / WORDS
        ))
    });
    agree(comm, too_large.map_or(Ok(()), Err))?;
    let (terms, counts) = comm.all_gather_u64(&words);
    drop(words);
    let degrees: Vec<u64> = (0..graph.rows.nrows())
        .into_par_iter()
        .map(|i| measures::degree(graph.rows.row(i).1).to_bits())
        .collect();
    let (degrees, _) = comm.all_gather_u64(&degrees);
    let total: f64 = degrees.iter().map(|&b| f64::from_bits(b)).sum();
    // Each rank's list starts where the previous ones end.
    let mut cursor: Vec<usize> = counts
        .iter()
        .scan(0, |at, &c| {
            let start = *at;
            *at += c;
            Some(start)
        })
        .collect();
    let owner = |v: u32| graph.starts.partition_point(|&s| s <= v as usize) - 1;
    Ok(measures::fold_info(
        graph.nodes(),
        clusters,
        total,
        |_, v| {
            let r = owner(v);
            let t = decode(&terms[cursor[r]..cursor[r] + WORDS]);
            cursor[r] += WORDS;
            t
        },
    ))
}

fn encode(t: &MemberTerms, out: &mut Vec<u64>) {
    let flags = u64::from(t.mass.is_some()) | (u64::from(t.efficiency.is_some()) << 1);
    out.extend_from_slice(&[
        flags,
        t.mass.unwrap_or(0.0).to_bits(),
        t.efficiency.unwrap_or(0.0).to_bits(),
        t.internal.to_bits(),
        t.degree.to_bits(),
    ]);
}

fn decode(w: &[u64]) -> MemberTerms {
    MemberTerms {
        mass: (w[0] & 1 != 0).then(|| f64::from_bits(w[1])),
        efficiency: (w[0] & 2 != 0).then(|| f64::from_bits(w[2])),
        internal: f64::from_bits(w[3]),
        degree: f64::from_bits(w[4]),
    }
}

#[cfg(test)]
mod tests {
    use super::super::load_graph;
    use super::*;
    use crate::dist::threads::ThreadComm;

    /// Bitwise the single-process measures, for clusterings with nodes in several clusters and
    /// in none, on 1 to 4 ranks.
    #[test]
    fn measures_equal_the_single_process_ones() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.wel");
        let mut s = String::new();
        let mut x = 7u64;
        for i in 0..300u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s.push_str(&format!(
                "{} {} {}.3\n",
                (x >> 33) % 61,
                (x >> 11) % 61,
                i % 9
            ));
        }
        std::fs::write(&f, s).unwrap();
        let loaded = crate::io::load(&f, None).unwrap();
        let (g, _) = crate::mcl::graph_from_edges::<f32>(&loaded.edges).unwrap();
        let n = g.nrows() as u32;
        let clusterings: Vec<Vec<Vec<u32>>> = vec![
            vec![(0..n / 2).collect(), (n / 2..n).collect()],
            // Overlap, a node in no cluster, an empty cluster.
            vec![(0..n / 3).rev().collect(), (n / 4..n - 1).collect(), vec![]],
            (0..n).map(|v| vec![v]).collect(),
        ];
        for clusters in &clusterings {
            let want = measures::cluster_info(&g, clusters);
            for p in 1..=4 {
                let group = ThreadComm::group(p);
                let got: Vec<ClusterInfo> = std::thread::scope(|sc| {
                    let hs: Vec<_> = group
                        .iter()
                        .map(|c| {
                            sc.spawn(|| {
                                let gb = load_graph::<f32>(c, &f, None, 64).unwrap();
                                cluster_info(c, &gb, clusters).unwrap()
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                for info in got {
                    assert_eq!(info.efficiency.to_bits(), want.efficiency.to_bits());
                    assert_eq!(info.modularity.to_bits(), want.modularity.to_bits());
                    assert_eq!(info.mass_fraction.to_bits(), want.mass_fraction.to_bits());
                    assert_eq!(info, want, "{p} ranks");
                }
            }
        }
    }
}
