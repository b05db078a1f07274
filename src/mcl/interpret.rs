//! Reading clusters off the limit of the MCL process, as mcl 22-282 does it.
//!
//! 1. **The DAG.** In each column `j` of the limit, keep the entries at least
//!    `0.999·selfval + 0.001·max` (when the loop value `selfval` is under the column's maximum),
//!    else at least `selfval / 1.01`; make the column stochastic and keep the entries at least
//!    `1 / (n + 1)`, `n` its number of entries. Column `j` holding `i` is an arc `j → i`.
//! 2. **Attractors** are the nodes with a loop in the DAG. Attractors joined by arcs (either way)
//!    form an *attractor system*; each system is a cluster.
//! 3. Every other node joins the clusters of all the attractor systems it reaches in the DAG.
//!    A node reaching none is put, with all such nodes, in one extra cluster (mcl does the same).
//! 4. **Overlap** (a node in several clusters, rare) is kept, cut (the node stays only in the
//!    first of its clusters, clusters ordered largest first) or split off (nodes always found
//!    together in the same clusters become clusters of their own), see [`Overlap`].
//! 5. Clusters are ordered largest first, equal sizes by their smallest differing node; the nodes
//!    of a cluster in increasing order.

use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

/// What to do with nodes that the limit puts in more than one cluster (mcl's `-overlap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overlap {
    /// Leave them in every cluster they were found in.
    Keep,
    /// Leave each in the first (largest) of its clusters only: mcl's default.
    #[default]
    Cut,
    /// Put nodes in overlap into new clusters: two nodes share one when they always occur
    /// together in the overlapping clusters.
    Split,
}

impl Overlap {
    /// "keep", "cut" or "split".
    pub fn name(self) -> &'static str {
        match self {
            Overlap::Keep => "keep",
            Overlap::Cut => "cut",
            Overlap::Split => "split",
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Overlap {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "keep" => Ok(Overlap::Keep),
            "cut" => Ok(Overlap::Cut),
            "split" => Ok(Overlap::Split),
            _ => Err(Error::Invalid(format!(
                "unknown overlap mode '{s}': expected keep, cut or split"
            ))),
        }
    }
}

/// The clusters read off a limit, with what interpretation found on the way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interpretation {
    /// The clusters, largest first, each with its nodes in increasing order.
    pub clusters: Vec<Vec<u32>>,
    /// Number of attractors.
    pub attractors: usize,
    /// Node memberships beyond the first (before overlap was cut or split).
    pub overlap: usize,
    /// Nodes that reached no attractor (gathered in one cluster).
    pub missing: usize,
}

/// Union-find with path halving.
struct Dsu(Vec<u32>);

impl Dsu {
    fn new(n: usize) -> Self {
        Dsu((0..n as u32).collect())
    }
    fn find(&mut self, mut x: u32) -> u32 {
        while self.0[x as usize] != x {
            let p = self.0[self.0[x as usize] as usize];
            self.0[x as usize] = p;
            x = p;
        }
        x
    }
    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.0[hi as usize] = lo;
        }
    }
}

/// Sorts clusters largest first, ties by their node lists (each sorted) compared in order.
pub fn sort_clusters(clusters: &mut [Vec<u32>]) {
    clusters.par_iter_mut().for_each(|c| c.sort_unstable());
    clusters.par_sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
}

/// The DAG of the limit: row `j` of `limit_t` is column `j` of the limit (the limit stored
/// transposed, as the MCL driver keeps it). Returns the arcs of each node, sorted.
fn dag<T: Scalar>(limit_t: &Csr<T>) -> Vec<Vec<u32>> {
    (0..limit_t.nrows())
        .into_par_iter()
        .with_min_len(256)
        .map(|j| {
            let (cols, vals) = limit_t.row(j);
            dag_arcs(cols, vals, j)
        })
        .collect()
}

/// The arcs of node `node` in the DAG (sorted), from its column `(cols, vals)` of the limit:
/// each column is read alone, so ranks holding blocks of columns make their nodes' arcs.
pub(crate) fn dag_arcs<T: Scalar>(cols: &[u32], vals: &[T], node: usize) -> Vec<u32> {
    let selfval = cols
        .binary_search(&(node as u32))
        .map_or(0.0, |k| vals[k].to_f64());
    let maxval = vals.iter().fold(0.0f64, |m, v| m.max(v.to_f64()));
    let bar = if selfval < maxval {
        0.999 * selfval + 0.001 * maxval
    } else {
        selfval / 1.01
    };
    let kept: Vec<(u32, T)> = cols
        .iter()
        .zip(vals)
        .filter(|(_, v)| v.to_f64() >= bar)
        .map(|(&c, &v)| (c, v))
        .collect();
    let sum: f64 = kept.iter().map(|(_, v)| v.to_f64()).sum();
    let floor = 1.0 / (kept.len() as f64 + 1.0);
    kept.iter()
        .filter(|(_, v)| {
            let x = if sum != 0.0 {
                T::from_f64(v.to_f64() / sum).to_f64()
            } else {
                v.to_f64()
            };
            x >= floor
        })
        .map(|&(c, _)| c)
        .collect()
}

/// Reads the clusters off the limit `limit_t` (stored transposed: row `j` is column `j`).
pub fn interpret<T: Scalar>(limit_t: &Csr<T>, overlap: Overlap) -> Interpretation {
    interpret_dag(&dag(limit_t), overlap)
}

/// Reads the clusters off the limit's DAG (`arcs[j]`: node `j`'s arcs, sorted; see
/// [`dag_arcs`]).
pub(crate) fn interpret_dag(arcs: &[Vec<u32>], overlap: Overlap) -> Interpretation {
    let n = arcs.len();
    let is_attr: Vec<bool> = (0..n)
        .into_par_iter()
        .map(|j| arcs[j].binary_search(&(j as u32)).is_ok())
        .collect();
    let attractors = is_attr.iter().filter(|&&a| a).count();

    // Attractor systems: components among attractors, arcs taken both ways.
    let mut dsu = Dsu::new(n);
    for j in 0..n {
        if is_attr[j] {
            for &i in &arcs[j] {
                if is_attr[i as usize] {
                    dsu.union(j as u32, i);
                }
            }
        }
    }
    let mut systems: Vec<Vec<u32>> = Vec::new();
    let mut root_system = vec![u32::MAX; n];
    for (j, &attr) in is_attr.iter().enumerate() {
        if attr {
            let r = dsu.find(j as u32) as usize;
            if root_system[r] == u32::MAX {
                root_system[r] = systems.len() as u32;
                systems.push(Vec::new());
            }
            systems[root_system[r] as usize].push(j as u32);
        }
    }
    sort_clusters(&mut systems);
    let mut system_of = vec![u32::MAX; n];
    for (s, members) in systems.iter().enumerate() {
        for &v in members {
            system_of[v as usize] = s as u32;
        }
    }

    // Every other node: the systems it reaches.
    let reached: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .with_min_len(256)
        .map(|j| {
            if is_attr[j] {
                return vec![system_of[j]];
            }
            let mut seen: HashSet<u32> = HashSet::new();
            let mut stack: Vec<u32> = arcs[j].clone();
            let mut found: Vec<u32> = Vec::new();
            seen.extend(stack.iter().copied());
            while let Some(v) = stack.pop() {
                let s = system_of[v as usize];
                if s != u32::MAX {
                    found.push(s);
                }
                for &w in &arcs[v as usize] {
                    if seen.insert(w) {
                        stack.push(w);
                    }
                }
            }
            found.sort_unstable();
            found.dedup();
            found
        })
        .collect();

    let mut clusters: Vec<Vec<u32>> = vec![Vec::new(); systems.len()];
    let mut missing_nodes = Vec::new();
    let mut memberships = 0usize;
    for (j, ids) in reached.iter().enumerate() {
        if ids.is_empty() {
            missing_nodes.push(j as u32);
        }
        memberships += ids.len();
        for &s in ids {
            clusters[s as usize].push(j as u32);
        }
    }
    let missing = missing_nodes.len();
    if missing > 0 {
        clusters.push(missing_nodes);
    }
    let overlap_count = memberships + missing - n;
    let mut clusters = if overlap_count == 0 {
        clusters
    } else {
        match overlap {
            Overlap::Keep => clusters,
            Overlap::Cut => cut_overlap(&clusters, n),
            Overlap::Split => split_overlap(&clusters, n),
        }
    };
    clusters.retain(|c| !c.is_empty());
    sort_clusters(&mut clusters);
    Interpretation {
        clusters,
        attractors,
        overlap: overlap_count,
        missing,
    }
}

/// Each node stays in the first cluster that holds it.
fn cut_overlap(clusters: &[Vec<u32>], n: usize) -> Vec<Vec<u32>> {
    let mut taken = vec![false; n];
    clusters
        .iter()
        .map(|c| {
            c.iter()
                .copied()
                .filter(|&v| !std::mem::replace(&mut taken[v as usize], true))
                .collect()
        })
        .collect()
}

/// mcl's split: nodes unique to a cluster stay together, and so do the nodes of each non-empty
/// intersection of two clusters; the connected groups this makes are the new clusters.
fn split_overlap(clusters: &[Vec<u32>], n: usize) -> Vec<Vec<u32>> {
    let mut of: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (c, members) in clusters.iter().enumerate() {
        for &v in members {
            of[v as usize].push(c as u32);
        }
    }
    let mut dsu = Dsu::new(n);
    for (c, members) in clusters.iter().enumerate() {
        // Nodes unique to this cluster.
        let mut first_unique: Option<u32> = None;
        // For each other cluster meeting this one, the first node of the intersection.
        let mut first_meet: std::collections::HashMap<u32, u32> = Default::default();
        for &v in members {
            let cs = &of[v as usize];
            if cs.len() == 1 {
                match first_unique {
                    Some(u) => dsu.union(u, v),
                    None => first_unique = Some(v),
                }
            } else {
                for &d in cs {
                    if d as usize != c {
                        let u = *first_meet.entry(d).or_insert(v);
                        dsu.union(u, v);
                    }
                }
            }
        }
    }
    let mut groups: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    for v in 0..n as u32 {
        if !of[v as usize].is_empty() {
            let r = dsu.find(v);
            groups.entry(r).or_default().push(v);
        }
    }
    groups.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit given by its columns: `cols[j]` = the (row, value) entries of column `j`.
    fn limit(cols: &[&[(u32, f64)]]) -> Csr<f64> {
        let n = cols.len();
        let mut d = vec![0.0; n * n];
        for (j, c) in cols.iter().enumerate() {
            for &(i, v) in c.iter() {
                d[j * n + i as usize] = v;
            }
        }
        Csr::from_dense(n, n, &d)
    }

    #[test]
    fn attractors_and_their_basins() {
        // 0 and 1 attract each other (one system); 2 flows to 0; 3 is its own attractor,
        // 4 flows to 3.
        let l = limit(&[
            &[(0, 0.5), (1, 0.5)],
            &[(0, 0.5), (1, 0.5)],
            &[(0, 1.0)],
            &[(3, 1.0)],
            &[(3, 1.0)],
        ]);
        let r = interpret(&l, Overlap::Cut);
        assert_eq!(r.clusters, vec![vec![0, 1, 2], vec![3, 4]]);
        assert_eq!((r.attractors, r.overlap, r.missing), (3, 0, 0));
    }

    #[test]
    fn overlap_modes() {
        // 0 and 3 are attractors; 1 and 2 flow to both, 4 flows to 3 only.
        let l = limit(&[
            &[(0, 1.0)],
            &[(0, 0.5), (3, 0.5)],
            &[(0, 0.5), (3, 0.5)],
            &[(3, 1.0)],
            &[(3, 1.0)],
        ]);
        let keep = interpret(&l, Overlap::Keep);
        assert_eq!(keep.clusters, vec![vec![1, 2, 3, 4], vec![0, 1, 2]]);
        assert_eq!(keep.overlap, 2);
        let cut = interpret(&l, Overlap::Cut);
        // Cut keeps a node in the first cluster in the order of the attractor systems.
        assert_eq!(cut.clusters, vec![vec![0, 1, 2], vec![3, 4]]);
        let split = interpret(&l, Overlap::Split);
        assert_eq!(split.clusters, vec![vec![1, 2], vec![3, 4], vec![0]]);
    }

    #[test]
    fn nodes_reaching_no_attractor_form_one_cluster() {
        // 1 and 2 point at each other, no loops: no attractor reached.
        let l = limit(&[&[(0, 1.0)], &[(2, 1.0)], &[(1, 1.0)]]);
        let r = interpret(&l, Overlap::Cut);
        assert_eq!(r.clusters, vec![vec![1, 2], vec![0]]);
        assert_eq!(r.missing, 2);
    }

    #[test]
    fn ties_are_ordered_by_nodes() {
        let mut c = vec![vec![5, 4], vec![3], vec![1, 2], vec![0]];
        sort_clusters(&mut c);
        assert_eq!(c, vec![vec![1, 2], vec![4, 5], vec![0], vec![3]]);
        assert_eq!("SPLIT".parse::<Overlap>().unwrap(), Overlap::Split);
        assert!("merge".parse::<Overlap>().is_err());
    }
}
