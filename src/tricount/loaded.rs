//! A graph file loaded for counting, its rows' symmetry checked where the count runs: a `.npz`
//! archive that stores a simple graph's rows is checked on the GPU after the upload the fused
//! count makes anyway, instead of on the host before it (whose random reads of the rows take
//! longer than the count on large graphs).

use super::{gpu, plan, Method, Options, SimpleGraph, Triangles, FOOTPRINT};
use crate::error::{Error, Result};
use crate::io::{Format, Labels, LoadedPattern, SymmetryCheck};
use crate::spgemm::EngineKind;
use std::borrow::Cow;
use std::path::Path;
use std::time::Instant;

/// A graph file's simple graph, or rows that are one if they are symmetric and have not been
/// checked yet; [`LoadedGraph::count`] checks them before its first count.
pub struct LoadedGraph {
    rows: Rows,
    labels: Labels,
}

enum Rows {
    Simple(SimpleGraph<'static>),
    /// Rows strictly increasing with no diagonal entry, not yet known symmetric.
    Unchecked(LoadedPattern),
    /// Neither: making the simple graph of unchecked rows failed.
    Lost,
}

impl LoadedGraph {
    /// Loads the graph of a graph file as [`SimpleGraph::load`] does, except that with
    /// [`SymmetryCheck::Caller`] the rows of a `.npz` archive that stores them strictly
    /// increasing are taken unchecked, for the count to check.
    pub fn load(path: &Path, format: Option<Format>, check: SymmetryCheck) -> Result<LoadedGraph> {
        let mut l = crate::io::load_simple_pattern(path, format, &FOOTPRINT, check)?;
        let labels = std::mem::replace(&mut l.labels, Labels::Identity);
        let rows = match l.checked {
            true => Rows::Simple(simple(l)),
            false => Rows::Unchecked(l),
        };
        Ok(LoadedGraph { rows, labels })
    }

    /// What each vertex was called in the file.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Number of vertices (isolated ones included).
    pub fn vertices(&self) -> usize {
        match &self.rows {
            Rows::Simple(g) => g.vertices(),
            Rows::Unchecked(p) => p.row_ptr.len() - 1,
            Rows::Lost => 0,
        }
    }

    /// Number of undirected edges: the simple graph's, or, before the rows are checked, half the
    /// entries (what the simple graph has if they are symmetric).
    pub fn edges(&self) -> u64 {
        match &self.rows {
            Rows::Simple(g) => g.edges(),
            Rows::Unchecked(p) => p.col_idx.len() as u64 / 2,
            Rows::Lost => 0,
        }
    }

    /// The simple graph, once known ([`Self::count`] makes it known).
    pub fn graph(&self) -> Option<&SimpleGraph<'static>> {
        match &self.rows {
            Rows::Simple(g) => Some(g),
            Rows::Unchecked(_) | Rows::Lost => None,
        }
    }

    /// Counts the triangles as [`super::count`] does. Rows not yet checked are checked first:
    /// by the fused count on the GPU after its upload (the count then stands where they are
    /// symmetric), else on the host; where they are not symmetric, the simple graph is made of
    /// them on the host (as the load would have made it) and counted.
    pub fn count(&mut self, opts: &Options) -> Result<Triangles> {
        let start = Instant::now();
        if let Rows::Unchecked(p) = &self.rows {
            let (engine, method) = plan(p.col_idx.len() as u64 / 2, opts);
            if (engine, method) == (EngineKind::Gpu, Method::Fused) {
                let (ptr, cols) = (&p.row_ptr, &p.col_idx);
                if let Some(t) = gpu::count_fused_rows(ptr, cols, true, opts, engine, start)? {
                    self.settle(true)?;
                    return Ok(t);
                }
                self.settle(false)?;
            } else {
                let symmetric = crate::csr::is_symmetric_without_loops(&p.row_ptr, &p.col_idx);
                self.settle(symmetric)?;
            }
        }
        match &self.rows {
            Rows::Simple(g) => super::count(g, opts),
            _ => Err(Error::Invalid(
                "the graph was lost to an earlier error while it was made simple".into(),
            )),
        }
    }

    /// Takes unchecked rows found `symmetric` (or not) as the simple graph (or makes it of them).
    fn settle(&mut self, symmetric: bool) -> Result<()> {
        if let Rows::Unchecked(mut p) = std::mem::replace(&mut self.rows, Rows::Lost) {
            p.checked = symmetric;
            self.rows = Rows::Simple(simple(crate::io::simple_pattern(p)?));
        }
        Ok(())
    }
}

/// The simple graph of a checked pattern.
fn simple(p: LoadedPattern) -> SimpleGraph<'static> {
    SimpleGraph {
        row_ptr: Cow::Owned(p.row_ptr),
        col_idx: Cow::Owned(p.col_idx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::Csr;
    use crate::edges::EdgeList;

    /// R-MAT entries as an archive: with their mirrors (a simple graph's rows but for loops),
    /// or one way only (which the count must make symmetric).
    fn archives(dir: &Path) -> Vec<(std::path::PathBuf, SimpleGraph<'static>)> {
        let el = crate::generate::generate(&crate::generate::RmatParams {
            seed: 5,
            ..crate::generate::RmatParams::new(10, 8 << 10)
        })
        .unwrap();
        let n = el.nrows;
        let mirrored: Vec<(u32, u32)> = el.edges.iter().map(|&(u, v)| (v, u)).collect();
        let loops: Vec<(u32, u32)> = (0..n as u32).step_by(5).map(|v| (v, v)).collect();
        let both = [&el.edges[..], &mirrored, &loops].concat();
        let one_way = [&el.edges[..], &loops].concat();
        [both, one_way]
            .into_iter()
            .enumerate()
            .map(|(k, entries)| {
                let edges = EdgeList::square(n, entries, None);
                let stored = Csr::<f64>::from_edges(&edges, &Default::default()).unwrap();
                let path = dir.join(format!("g{k}.npz"));
                let bytes = crate::io::npz::write(Vec::new(), &stored).unwrap();
                std::fs::write(&path, bytes).unwrap();
                (path, SimpleGraph::from_edges(edges).unwrap())
            })
            .collect()
    }

    #[test]
    fn unchecked_rows_count_as_the_simple_graph_on_every_engine() {
        let dir = tempfile::tempdir().unwrap();
        let mut engines = vec![EngineKind::Cpu];
        if crate::gpu::for_tests().is_some() {
            engines.push(EngineKind::Gpu);
        }
        for (k, (path, want_graph)) in archives(dir.path()).into_iter().enumerate() {
            let opts = Options {
                per_vertex: true,
                ..Default::default()
            };
            let want = super::super::count(&want_graph, &opts).unwrap();
            assert!(want.triangles > 0);
            for engine in &engines {
                for check in [SymmetryCheck::Load, SymmetryCheck::Caller] {
                    let what = format!("archive {k}, {engine:?}, {check:?}");
                    let mut g = LoadedGraph::load(&path, None, check).unwrap();
                    assert_eq!(
                        g.graph().is_none(),
                        check == SymmetryCheck::Caller,
                        "{what}"
                    );
                    assert_eq!(g.vertices(), want_graph.vertices(), "{what}");
                    let opts = Options {
                        engine: *engine,
                        ..opts
                    };
                    for again in [false, true] {
                        let t = g.count(&opts).unwrap();
                        assert_eq!(t.triangles, want.triangles, "{what}");
                        assert_eq!(t.per_vertex, want.per_vertex, "{what}");
                        // The GPU checks the rows once, where they turn out symmetric.
                        let checked_on_gpu = *engine == EngineKind::Gpu
                            && check == SymmetryCheck::Caller
                            && k == 0
                            && !again;
                        assert_eq!(t.check_seconds > 0.0, checked_on_gpu, "{what}");
                        assert_eq!(g.graph(), Some(&want_graph), "{what}");
                        assert_eq!(g.edges(), want_graph.edges(), "{what}");
                    }
                }
            }
        }
    }
}
