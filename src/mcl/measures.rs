//! How good a clustering is, and how far apart two clusterings are: the measures of mcl's
//! `clm info` and `clm dist` (22-282), computed the way their source computes them.

use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;

/// `clm info`'s measures of a clustering of a graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClusterInfo {
    /// Number of clusters.
    pub clusters: usize,
    /// Number of nodes clustered.
    pub nodes: usize,
    /// Clusters of one node.
    pub singletons: usize,
    /// Size of the largest cluster.
    pub largest: usize,
    /// Size of the smallest cluster (0 without clusters).
    pub smallest: usize,
    /// `clm info`'s `af`: the share of the node pairs that lie inside a cluster,
    /// Σ |C|(|C| - 1) / (n(n - 1)).
    pub area_fraction: f64,
    /// `clm info`'s `eff`: the mean over nodes of the coverage of the node's neighbourhood by
    /// its cluster (van Dongen, CWI report INS-R0012).
    pub efficiency: f64,
    /// `clm info`'s `mod`: Newman's weighted modularity.
    pub modularity: f64,
    /// `clm info`'s `mf`: the mean over nodes of the share of the node's edge weight that stays
    /// inside its cluster.
    pub mass_fraction: f64,
}

/// Computes `clm info`'s measures of `clusters` on `graph` (symmetric, without self loops, as
/// MCL clustered it). As clm info does, efficiency and mass fraction count a loop on every node
/// weighing its largest edge, and modularity counts no loops. With overlapping clusters a node
/// counts once per cluster, as in clm.
pub fn cluster_info<T: Scalar>(graph: &Csr<T>, clusters: &[Vec<u32>]) -> ClusterInfo {
    let n = graph.nrows();
    // Summed in node order, as the terms are below: the same bits on any number of threads.
    let degrees: Vec<f64> = (0..n)
        .into_par_iter()
        .map(|v| degree(graph.row(v).1))
        .collect();
    let total: f64 = degrees.iter().sum();
    let terms = terms_in_order(n, clusters, |v| Some(graph.row(v as usize)));
    let mut next = 0;
    fold_info(n, clusters, total, |_, _| {
        next += 1;
        terms[next - 1]
    })
}

/// The terms ([`member_terms`]) of every member `v` of `clusters` whose row `row(v)` gives
/// (`None`: a node this caller does not hold), cluster by cluster, member by member, on `n`
/// nodes. In parallel where no node is in two clusters (each node's cluster then says who is
/// inside), else one cluster after another, each marking its members first.
pub(crate) fn terms_in_order<'g, T: Scalar>(
    n: usize,
    clusters: &[Vec<u32>],
    row: impl Fn(u32) -> Option<(&'g [u32], &'g [T])> + Sync,
) -> Vec<MemberTerms> {
    let mut cluster_of = vec![u32::MAX; n];
    let mut disjoint = true;
    for (c, members) in clusters.iter().enumerate() {
        for &v in members {
            disjoint &= cluster_of[v as usize] == u32::MAX;
            cluster_of[v as usize] = c as u32;
        }
    }
    if !disjoint {
        return marked_terms(cluster_of, clusters, row);
    }
    // Memberships in order: a large cluster's members are shared among the threads too.
    let memberships: Vec<(u32, u32)> = clusters
        .iter()
        .enumerate()
        .flat_map(|(c, members)| members.iter().map(move |&v| (c as u32, v)))
        .collect();
    memberships
        .par_iter()
        .with_min_len(1 << 10)
        .filter_map(|&(c, v)| {
            let (cols, vals) = row(v)?;
            let size = clusters[c as usize].len();
            Some(member_terms(cols, vals, size, |u| {
                cluster_of[u as usize] == c
            }))
        })
        .collect()
}

/// [`terms_in_order`] one cluster after another, each marking its members in `mark` (one
/// entry per node) before its members' terms are made.
fn marked_terms<'g, T: Scalar>(
    mut mark: Vec<u32>,
    clusters: &[Vec<u32>],
    row: impl Fn(u32) -> Option<(&'g [u32], &'g [T])>,
) -> Vec<MemberTerms> {
    let mut terms = Vec::new();
    for (c, members) in clusters.iter().enumerate() {
        for &u in members {
            mark[u as usize] = c as u32;
        }
        let inside = |u: u32| mark[u as usize] == c as u32;
        terms.extend(members.iter().filter_map(|&v| {
            let (cols, vals) = row(v)?;
            Some(member_terms(cols, vals, members.len(), inside))
        }));
    }
    terms
}

/// A node's edge weight, summed in column order.
pub(crate) fn degree<T: Scalar>(vals: &[T]) -> f64 {
    vals.iter().map(|w| w.to_f64()).sum()
}

/// What one member of a cluster adds to `clm info`'s sums ([`member_terms`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MemberTerms {
    /// Its share of its weight inside the cluster (none without weight).
    pub mass: Option<f64>,
    /// Its efficiency term (none where undefined).
    pub efficiency: Option<f64>,
    /// Its edge weight inside the cluster, its loop left out.
    pub internal: f64,
    /// Its edge weight ([`degree`]).
    pub degree: f64,
}

/// The terms of the node whose row of the graph is `(cols, vals)`, member of a cluster of
/// `size` nodes; `inside(u)` says whether node `u` is in that cluster too.
pub(crate) fn member_terms<T: Scalar>(
    cols: &[u32],
    vals: &[T],
    size: usize,
    inside: impl Fn(u32) -> bool,
) -> MemberTerms {
    // clm info first gives every node a loop weighing its largest edge (1 if none): the loop
    // lies inside the node's own cluster.
    let lp = vals.iter().fold(0.0f64, |m, w| m.max(w.to_f64()));
    let lp = if lp > 0.0 { lp } else { 1.0 };
    let (mut sum_i, mut sum_o, mut ssq) = (lp, 0.0f64, lp * lp);
    let mut n_out = 0usize;
    for (&u, &w) in cols.iter().zip(vals) {
        let w = w.to_f64();
        ssq += w * w;
        if inside(u) {
            sum_i += w;
        } else {
            sum_o += w;
            n_out += 1;
        }
    }
    let sum = sum_i + sum_o;
    let mut efficiency = None;
    if sum * sum > 0.0 {
        let ctr = ssq / (sum * sum);
        let join = (n_out + size) as f64;
        let div = (sum_i - sum_o) / sum;
        if ctr != 0.0 && join != 0.0 {
            efficiency = Some(1.0 - (size as f64 - div / ctr) / join);
        }
    }
    MemberTerms {
        mass: (sum != 0.0).then(|| sum_i / sum),
        efficiency,
        internal: sum_i - lp,
        degree: degree(vals),
    }
}

/// `clm info`'s measures of `clusters` of `n` nodes whose edge weights sum to `total`, from
/// `term(c, v)`, the terms of node `v` in cluster `c`, asked for cluster by cluster, member by
/// member. Every sum runs in that order, so wherever the terms were computed the measures are
/// the same bits.
pub(crate) fn fold_info(
    n: usize,
    clusters: &[Vec<u32>],
    total: f64,
    mut term: impl FnMut(usize, u32) -> MemberTerms,
) -> ClusterInfo {
    let (mut hits, mut mf, mut eff) = (0usize, 0.0f64, 0.0f64);
    let mut modularity = 0.0;
    for (c, members) in clusters.iter().enumerate() {
        let (mut internal, mut degsum) = (0.0f64, 0.0f64);
        for &v in members {
            let t = term(c, v);
            hits += 1;
            if let Some(m) = t.mass {
                mf += m;
            }
            if let Some(e) = t.efficiency {
                eff += e;
            }
            internal += t.internal;
            degsum += t.degree;
        }
        if total != 0.0 {
            modularity += internal / total - (degsum / total).powi(2);
        }
    }
    let (efficiency, mass_fraction) = if hits > 0 {
        (eff / hits as f64, mf / hits as f64)
    } else {
        (-1.0, -1.0)
    };
    ClusterInfo {
        clusters: clusters.len(),
        nodes: n,
        singletons: clusters.iter().filter(|c| c.len() <= 1).count(),
        largest: clusters.iter().map(Vec::len).max().unwrap_or(0),
        smallest: clusters.iter().map(Vec::len).min().unwrap_or(0),
        area_fraction: if n > 1 {
            clusters
                .iter()
                .map(|c| c.len() as f64 * (c.len() as f64 - 1.0))
                .sum::<f64>()
                / (n as f64 * (n as f64 - 1.0))
        } else {
            0.0
        },
        efficiency,
        modularity,
        mass_fraction,
    }
}

/// The distances `clm dist` reports between two partitions `a` and `b` of the same nodes,
/// each split into its two parts (from `a`, and from `b`, to their meet).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Distance {
    /// Number of nodes.
    pub nodes: usize,
    /// Clusters of `a`.
    pub clusters_a: usize,
    /// Clusters of `b`.
    pub clusters_b: usize,
    /// Split/join distance: `a_to_meet + b_to_meet`.
    pub split_join: u64,
    /// Nodes to move to turn `a` into the meet: `n − Σ_{A∈a} max_B |A∩B|`.
    pub split_join_a: u64,
    /// The same from `b`.
    pub split_join_b: u64,
    /// Variation of information in nats: `H(b|a) + H(a|b)`.
    pub variation_of_information: f64,
    /// `H(b|a)`: the part from `a` to the meet.
    pub vi_a: f64,
    /// `H(a|b)`.
    pub vi_b: f64,
    /// Hubert and Arabie's adjusted Rand index (1 for identical partitions).
    pub adjusted_rand: f64,
}

/// Compares two partitions of the nodes `0..n` (every node in exactly one cluster of each).
pub fn distance(a: &[Vec<u32>], b: &[Vec<u32>], n: usize) -> Result<Distance> {
    let cluster_of = |p: &[Vec<u32>], which: &str| -> Result<Vec<u32>> {
        let mut of = vec![u32::MAX; n];
        for (c, members) in p.iter().enumerate() {
            for &v in members {
                let slot = of.get_mut(v as usize).ok_or_else(|| {
                    Error::Invalid(format!("node {v} of clustering {which} is out of range"))
                })?;
                if *slot != u32::MAX {
                    return Err(Error::Invalid(format!(
                        "node {v} is in two clusters of clustering {which}: not a partition"
                    )));
                }
                *slot = c as u32;
            }
        }
        if let Some(v) = of.iter().position(|&c| c == u32::MAX) {
            return Err(Error::Invalid(format!(
                "node {v} is in no cluster of clustering {which}"
            )));
        }
        Ok(of)
    };
    let of_a = cluster_of(a, "a")?;
    let of_b = cluster_of(b, "b")?;
    let mut meet: HashMap<(u32, u32), u64> = HashMap::new();
    for v in 0..n {
        *meet.entry((of_a[v], of_b[v])).or_default() += 1;
    }
    let mut best_a = vec![0u64; a.len()];
    let mut best_b = vec![0u64; b.len()];
    let (mut h_ab, mut pairs) = (0.0f64, 0.0f64);
    for (&(i, j), &m) in &meet {
        best_a[i as usize] = best_a[i as usize].max(m);
        best_b[j as usize] = best_b[j as usize].max(m);
        h_ab -= m as f64 * (m as f64).ln();
        pairs += choose2(m);
    }
    let nn = n as u64;
    let split_join_a = nn - best_a.iter().sum::<u64>();
    let split_join_b = nn - best_b.iter().sum::<u64>();
    // Entropies from counts: H(X) = ln n − Σ c ln c / n.
    let nf = n as f64;
    let ent = |sizes: &mut dyn Iterator<Item = usize>| -> f64 {
        sizes.map(|s| s as f64 * (s as f64).ln()).sum::<f64>()
    };
    let sa = ent(&mut a.iter().map(Vec::len));
    let sb = ent(&mut b.iter().map(Vec::len));
    let (vi_a, vi_b) = if n > 0 {
        // H(b|a) = H(a,b) − H(a) = (Σ_a s ln s − Σ m ln m) / n.
        (((sa + h_ab) / nf).max(0.0), ((sb + h_ab) / nf).max(0.0))
    } else {
        (0.0, 0.0)
    };
    let pa: f64 = a.iter().map(|c| choose2(c.len() as u64)).sum();
    let pb: f64 = b.iter().map(|c| choose2(c.len() as u64)).sum();
    let expected = if n > 1 { pa * pb / choose2(nn) } else { 0.0 };
    let max = (pa + pb) / 2.0;
    let adjusted_rand = if max - expected != 0.0 {
        (pairs - expected) / (max - expected)
    } else {
        1.0
    };
    Ok(Distance {
        nodes: n,
        clusters_a: a.len(),
        clusters_b: b.len(),
        split_join: split_join_a + split_join_b,
        split_join_a,
        split_join_b,
        variation_of_information: vi_a + vi_b,
        vi_a,
        vi_b,
        adjusted_rand,
    })
}

/// Reads a clustering written one cluster per line, labels separated by TABs, exactly as
/// `gmcl cluster` and mcl write them: a label may hold spaces (and any other character but a
/// TAB). Blank lines are skipped; an empty label (a TAB at an end of a line, or two in a row) is
/// an error naming the line. A file in mcl's native format ([`super::native`]) is read too, its
/// nodes labelled by their indices. `-` is the standard input.
pub fn read_clusters(path: &Path) -> Result<Vec<Vec<String>>> {
    parse_clusters(&read_text(path)?, crate::io::shown(path))
}

/// The text of a clustering file, read once (a pipe can be read only once); `-` is the
/// standard input.
pub fn read_text(path: &Path) -> Result<String> {
    let text = match crate::io::is_stdin(path) {
        true => crate::io::stdin_bytes()?,
        false => std::fs::read(path).map_err(|e| Error::io(path, "cannot read", e))?,
    };
    String::from_utf8(text).map_err(|_| Error::Input {
        path: crate::io::shown(path).to_path_buf(),
        message: "not UTF-8 text".into(),
    })
}

/// [`read_clusters`] of a file's text already read.
pub fn parse_clusters(text: &str, path: &Path) -> Result<Vec<Vec<String>>> {
    if super::native::is_native(text) {
        let (_, clusters) = super::native::read_native(text, path)?;
        return Ok(clusters
            .into_iter()
            .map(|c| c.into_iter().map(|v| v.to_string()).collect())
            .collect());
    }
    let mut clusters = Vec::new();
    for (k, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let labels: Vec<String> = line.split('\t').map(str::to_owned).collect();
        if labels.iter().any(String::is_empty) {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line: k as u64 + 1,
                message: "an empty label (a TAB at an end of the line, or two in a row): labels \
                          are separated by single TABs, as gmcl cluster and mcl write them"
                    .into(),
            });
        }
        clusters.push(labels);
    }
    Ok(clusters)
}

/// A hint for a label that one clustering has and the other lacks, when the label holds a
/// blank: the files may separate labels by spaces, where clusterings separate them by TABs.
fn separator_hint(label: &str) -> &'static str {
    if label.contains([' ', '\u{a0}']) {
        " (labels are separated by TABs, as gmcl cluster and mcl write them; this one holds a \
         space)"
    } else {
        ""
    }
}

/// Compares two clusterings given by labels ([`read_clusters`]); both must cover the same
/// labels, each once. `names` name the two clusterings in errors.
pub fn distance_by_label(
    a: &[Vec<String>],
    b: &[Vec<String>],
    names: (&str, &str),
) -> Result<Distance> {
    fn to_ids<'a>(p: &'a [Vec<String>], ids: &mut HashMap<&'a str, u32>) -> Vec<Vec<u32>> {
        p.iter()
            .map(|c| {
                c.iter()
                    .map(|l| {
                        let next = ids.len() as u32;
                        *ids.entry(l.as_str()).or_insert(next)
                    })
                    .collect()
            })
            .collect()
    }
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let ia = to_ids(a, &mut ids);
    let n_a = ids.len();
    let ib = to_ids(b, &mut ids);
    let n = ids.len();
    if n > n_a {
        let extra = b.iter().flatten().find(|l| ids[l.as_str()] as usize >= n_a);
        let extra = extra.map_or("", |s| s.as_str());
        return Err(Error::Invalid(format!(
            "{} has nodes that {} lacks (such as '{extra}'): both must cluster the same nodes{}",
            names.1,
            names.0,
            separator_hint(extra)
        )));
    }
    let check = |p: &[Vec<u32>], name: &str| -> Result<()> {
        let mut seen = vec![false; n];
        for &v in p.iter().flatten() {
            if std::mem::replace(&mut seen[v as usize], true) {
                let label = ids.iter().find(|(_, &i)| i == v).map_or("", |(l, _)| *l);
                return Err(Error::Invalid(format!(
                    "'{label}' is in more than one cluster of {name}: not a partition"
                )));
            }
        }
        if let Some(v) = seen.iter().position(|&s| !s) {
            let label = ids
                .iter()
                .find(|(_, &i)| i as usize == v)
                .map_or("", |(l, _)| *l);
            return Err(Error::Invalid(format!(
                "{name} lacks '{label}', which the other clustering has: both must cluster the \
                 same nodes{}",
                separator_hint(label)
            )));
        }
        Ok(())
    };
    check(&ia, names.0)?;
    check(&ib, names.1)?;
    distance(&ia, &ib, n)
}

fn choose2(m: u64) -> f64 {
    m as f64 * (m as f64 - 1.0) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_matches_clm_dist_on_karate() {
        // mcl's karate clusterings at -I 2 and -I 3, nodes renumbered 0..34 (clm dist gave
        // d=4 d1=4 d2=0; vi 0.354 0.354 0.000; arand 0.77453).
        let i2 = vec![
            vec![
                2, 8, 9, 14, 15, 18, 20, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
            ],
            vec![0, 1, 3, 4, 5, 6, 7, 10, 11, 12, 13, 16, 17, 19, 21],
        ];
        let i3 = vec![
            vec![0, 1, 3, 4, 5, 6, 7, 10, 11, 12, 13, 16, 17, 19, 21],
            vec![2, 8, 9, 14, 15, 18, 20, 22, 23, 26, 28, 29, 30, 32, 33],
            vec![24, 25, 31],
            vec![27],
        ];
        let d = distance(&i2, &i3, 34).unwrap();
        assert_eq!((d.split_join, d.split_join_a, d.split_join_b), (4, 4, 0));
        assert!((d.vi_a - 0.354).abs() < 5e-4, "{d:?}");
        assert!(d.vi_b.abs() < 1e-12);
        assert!((d.adjusted_rand - 0.77453).abs() < 5e-6, "{d:?}");
        let same = distance(&i2, &i2, 34).unwrap();
        assert_eq!(same.split_join, 0);
        assert!(same.variation_of_information.abs() < 1e-12);
        assert!((same.adjusted_rand - 1.0).abs() < 1e-12);
    }

    #[test]
    fn labelled_clusterings() {
        let l = |v: &[&[&str]]| -> Vec<Vec<String>> {
            v.iter()
                .map(|c| c.iter().map(|s| s.to_string()).collect())
                .collect()
        };
        let a = l(&[&["x", "y"], &["z"]]);
        let b = l(&[&["z", "y"], &["x"]]);
        let d = distance_by_label(&a, &b, ("a", "b")).unwrap();
        assert_eq!((d.nodes, d.split_join), (3, 2));
        let e = distance_by_label(&a, &l(&[&["x", "y"]]), ("a", "b")).unwrap_err();
        assert!(e.to_string().contains("b lacks 'z'"), "{e}");
        let e = distance_by_label(&a, &l(&[&["x", "y", "z", "w"]]), ("a", "b")).unwrap_err();
        assert!(e.to_string().contains("such as 'w'"), "{e}");
        let e = distance_by_label(&l(&[&["x", "x"]]), &l(&[&["x"]]), ("a", "b")).unwrap_err();
        assert!(e.to_string().contains("more than one cluster of a"), "{e}");
    }

    #[test]
    fn bad_partitions_are_refused() {
        assert!(distance(&[vec![0, 1]], &[vec![0], vec![0, 1]], 2).is_err());
        assert!(distance(&[vec![0]], &[vec![0, 1]], 2).is_err());
        assert!(distance(&[vec![0, 5]], &[vec![0, 1]], 2).is_err());
    }

    /// Clusters no node shares take the parallel path: the terms, node for node, bit for bit,
    /// of the one that marks each cluster's members, on any number of threads, with nodes in
    /// no cluster and empty clusters; and only a caller's own nodes' terms.
    #[test]
    fn terms_in_parallel_are_the_marked_ones() {
        let el = crate::generate::generate(&crate::generate::RmatParams {
            undirected: true,
            weights: true,
            seed: 3,
            ..crate::generate::RmatParams::new(10, 8 << 10)
        })
        .unwrap();
        let (g, _) = crate::mcl::graph_from_edges::<f32>(&el).unwrap();
        let n = g.nrows() as u32;
        let bits = |t: &[MemberTerms]| -> Vec<[u64; 4]> {
            t.iter()
                .map(|t| {
                    let m = t.mass.map_or(u64::MAX, f64::to_bits);
                    let e = t.efficiency.map_or(u64::MAX, f64::to_bits);
                    [m, e, t.internal.to_bits(), t.degree.to_bits()]
                })
                .collect()
        };
        let clusterings: Vec<Vec<Vec<u32>>> = vec![
            (0..n).map(|v| vec![v]).collect(),
            vec![
                (0..n).rev().step_by(2).collect(),
                vec![],
                (1..n - 9).step_by(2).collect(),
            ],
            (0..n)
                .collect::<Vec<u32>>()
                .chunks(37)
                .map(<[u32]>::to_vec)
                .collect(),
        ];
        for clusters in &clusterings {
            let all = |v: u32| Some(g.row(v as usize));
            let want = marked_terms(vec![u32::MAX; n as usize], clusters, all);
            let ours = |v: u32| (v % 3 == 0).then(|| g.row(v as usize));
            let want_ours = marked_terms(vec![u32::MAX; n as usize], clusters, ours);
            assert!(want_ours.len() < want.len() && !want_ours.is_empty());
            for threads in [1, 4] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let got = pool.install(|| terms_in_order(n as usize, clusters, all));
                assert_eq!(bits(&got), bits(&want), "{threads} threads");
                let got = pool.install(|| terms_in_order(n as usize, clusters, ours));
                assert_eq!(bits(&got), bits(&want_ours), "{threads} threads");
            }
        }
    }

    #[test]
    fn info_of_two_triangles() {
        // Two triangles joined by the edge 2-3, clustered as the triangles.
        let mut d = vec![0.0f64; 36];
        for &(u, v) in &[(0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5), (2, 3)] {
            d[u * 6 + v] = 1.0;
            d[v * 6 + u] = 1.0;
        }
        let g = Csr::from_dense(6, 6, &d);
        let info = cluster_info(&g, &[vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(
            (info.clusters, info.nodes, info.singletons, info.largest),
            (2, 6, 0, 3)
        );
        // With their loops (weight 1), nodes 0,1,4,5 keep all their weight inside; 2 and 3
        // keep 3 of 4.
        assert!((info.mass_fraction - (4.0 + 1.5) / 6.0).abs() < 1e-12);
        // Modularity: E = 14; each cluster: 6/14 − (7/14)².
        assert!((info.modularity - 2.0 * (6.0 / 14.0 - 0.25)).abs() < 1e-12);
        assert!(info.efficiency > 0.0 && info.efficiency <= 1.0);
    }
}
