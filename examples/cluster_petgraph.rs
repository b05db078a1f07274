//! Using gmcl as a library: Markov clustering of a graph built with petgraph.
//!
//! The graph is a petgraph `UnGraph` whose nodes are people's names and whose edges weigh how
//! often two people meet: three close groups, joined by a few weak acquaintances. Its edges are
//! turned into gmcl's [`EdgeList`] (petgraph's node indices are the vertex ids), MCL runs with
//! mcl's defaults ([`MclParams::default`]: inflation 2, scheme 6), and each cluster is printed
//! by the names on its nodes, largest cluster first.
//!
//! Run with `cargo run --example cluster_petgraph`. `cargo test` runs this file's test, which
//! checks that the three groups come out as the three clusters.

use gmcl::mcl::{self, MclParams};
use gmcl::EdgeList;
use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;

/// The three groups of the example, and the weak edges between them.
const GROUPS: [&[&str]; 3] = [
    &["alice", "bob", "carol", "dave", "erin"],
    &["frank", "grace", "heidi", "ivan", "judy", "mallory"],
    &["niaj", "olivia", "peggy", "rupert", "sybil"],
];
const BRIDGES: [(&str, &str, f64); 3] = [
    ("erin", "frank", 0.5),
    ("judy", "niaj", 0.5),
    ("alice", "peggy", 0.25),
];

/// The example graph: every pair within a group meets often (weights 1 to 3), the bridges
/// rarely.
fn example_graph() -> UnGraph<&'static str, f64> {
    let mut g = UnGraph::new_undirected();
    let mut index = std::collections::HashMap::new();
    for group in GROUPS {
        let nodes: Vec<NodeIndex> = group
            .iter()
            .map(|&name| {
                let ix = g.add_node(name);
                index.insert(name, ix);
                ix
            })
            .collect();
        for (i, &a) in nodes.iter().enumerate() {
            for (j, &b) in nodes.iter().enumerate().skip(i + 1) {
                g.add_edge(a, b, 1.0 + ((i + j) % 3) as f64);
            }
        }
    }
    for (a, b, w) in BRIDGES {
        g.add_edge(index[a], index[b], w);
    }
    g
}

/// The edges of a petgraph graph as gmcl's edge list: vertex ids are petgraph's node indices,
/// each undirected edge is listed once (MCL makes the graph symmetric itself).
fn to_edge_list<N>(g: &UnGraph<N, f64>) -> EdgeList {
    let mut edges = Vec::with_capacity(g.edge_count());
    let mut weights = Vec::with_capacity(g.edge_count());
    for e in g.edge_references() {
        edges.push((e.source().index() as u32, e.target().index() as u32));
        weights.push(*e.weight());
    }
    EdgeList::square(g.node_count(), edges, Some(weights))
}

/// Clusters `g` with MCL and returns each cluster as the node indices of `g`, largest first.
/// Nodes without edges are left out (MCL never sees them).
fn cluster_graph<N>(g: &UnGraph<N, f64>, params: &MclParams) -> gmcl::Result<Vec<Vec<NodeIndex>>> {
    // `ids[k]` is the vertex id (here petgraph's node index) of MCL's node k.
    let (graph, ids) = mcl::graph_from_edges::<f32>(&to_edge_list(g))?;
    let result = mcl::cluster(&graph, params, &mut |_| {})?;
    Ok(result
        .clusters
        .iter()
        .map(|c| {
            c.iter()
                .map(|&k| NodeIndex::new(ids[k as usize] as usize))
                .collect()
        })
        .collect())
}

fn main() -> gmcl::Result<()> {
    let g = example_graph();
    println!(
        "{} people, {} acquaintances",
        g.node_count(),
        g.edge_count()
    );
    for (i, cluster) in cluster_graph(&g, &MclParams::default())?.iter().enumerate() {
        let names: Vec<&str> = cluster.iter().map(|&ix| g[ix]).collect();
        println!("cluster {}: {}", i + 1, names.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_are_the_clusters() {
        let g = example_graph();
        let clusters = cluster_graph(&g, &MclParams::default()).unwrap();
        let names: Vec<Vec<&str>> = clusters
            .iter()
            .map(|c| c.iter().map(|&ix| g[ix]).collect())
            .collect();
        // Largest first; within a cluster, nodes in increasing index (insertion) order.
        let expected: Vec<Vec<&str>> =
            vec![GROUPS[1].to_vec(), GROUPS[0].to_vec(), GROUPS[2].to_vec()];
        assert_eq!(names, expected);
    }

    #[test]
    fn isolated_nodes_are_left_out() {
        let mut g = example_graph();
        g.add_node("trent");
        let clusters = cluster_graph(&g, &MclParams::default()).unwrap();
        assert_eq!(clusters.iter().map(Vec::len).sum::<usize>(), 16);
    }
}
