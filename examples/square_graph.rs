//! Using gmcl as a library: load a graph, make it symmetric, square its adjacency matrix on the
//! CPU engine, and read the result.
//!
//! Run with `cargo run --release --example square_graph [graph file]` (default: graphs/karate.el).

use gmcl::spgemm::{self, EngineKind, SpgemmOptions};
use gmcl::{io, BuildOptions, Csr, Duplicates};
use std::path::PathBuf;

fn main() -> gmcl::Result<()> {
    let path = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("graphs/karate.el"));
    let loaded = io::load(&path, None)?;
    let opts = BuildOptions {
        symmetrize: true,
        drop_self_loops: true,
        duplicates: Duplicates::Sum,
    };
    let a: Csr<f64> = Csr::from_edges(&loaded.edges, &opts)?;
    let (a2, stats) = spgemm::multiply(EngineKind::Cpu, &a, &a, &SpgemmOptions::default())?;
    println!(
        "{}: {} vertices, {} entries; A² has {} entries from {} intermediate products ({:.4} s)",
        path.display(),
        a.nrows(),
        a.nnz(),
        a2.nnz(),
        stats.intermediate_products,
        stats.seconds
    );
    // (A²)[i][j] counts the walks of length two from i to j; the diagonal is each degree.
    // Name the pair of distinct vertices with the most common neighbours.
    let mut best = (0.0, 0u32, 0u32);
    for i in 0..a2.nrows() {
        let (cols, vals) = a2.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            if j as usize > i && v > best.0 {
                best = (v, i as u32, j);
            }
        }
    }
    println!(
        "most common neighbours: {} and {} share {}",
        loaded.labels.label(best.1),
        loaded.labels.label(best.2),
        best.0
    );
    Ok(())
}
