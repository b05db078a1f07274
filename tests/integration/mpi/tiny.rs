//! More ranks than the graph has vertices: 8 ranks on graphs of a few vertices, and of none,
//! where some ranks own no rows (and read no line of the file); every output is the
//! single-process run's.

use super::{assert_same_as_single, text, CPU};
use crate::util::{gmcl, s};
use std::path::{Path, PathBuf};

/// `body` written to `name` in `dir`.
fn file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, body).unwrap();
    f
}

/// Graphs of fewer than 8 vertices in every input format, with a self loop, a second component
/// and weights.
fn small_graphs(dir: &Path) -> Vec<PathBuf> {
    let wel = file(dir, "tiny.wel", "0 1 0.5\n1 2 2\n2 0 1.25\n2 2 3\n4 3 1\n");
    let npz = dir.join("tiny.npz");
    let o = gmcl(&["convert", s(&wel), s(&npz)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    vec![
        file(dir, "one.el", "0 1\n"),
        file(dir, "tiny.el", "0 1\n1 2\n2 0\n3 4\n"),
        wel,
        file(
            dir,
            "tiny.abc",
            "alpha\tbeta\t1\nbeta\tgamma\t2.5\ngamma\talpha\t1\ndelta\tepsilon\t3\n",
        ),
        file(
            dir,
            "tiny.mtx",
            concat!(
                "%%MatrixMarket matrix coordinate real symmetric\n5 5 4\n",
                "2 1 1.5\n3 2 1\n3 1 2\n5 4 1\n"
            ),
        ),
        npz,
    ]
}

#[test]
fn eight_ranks_on_graphs_of_fewer_vertices_give_the_single_process_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for g in small_graphs(d) {
        let g = s(&g);
        let cases: [(&[&str], &[&str]); 4] = [
            (&["cluster", g, "-o", "@c.txt", "-q"], &[]),
            (&["tricount", g, "--per-vertex", "@pv.tsv", "-q"], &[]),
            (&["spgemm", g, "-o", "@c.mtx", "-q"], CPU),
            (&["spgemm", g, "-o", "@c.npz", "-q"], CPU),
        ];
        for (args, extra) in cases {
            let (_, want) = assert_same_as_single(d, args, extra, &[8], &["16777216"]);
            assert!(!want[0].is_empty(), "{args:?}");
        }
    }
}

/// A file of comments only: no rank has a row, and nothing travels in the exchanges.
#[test]
fn eight_ranks_on_a_graph_of_no_edges_give_the_single_process_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let g = file(d, "none.el", "# no edges\n");
    let g = s(&g);
    let cases: [(&[&str], &[&str]); 4] = [
        (&["cluster", g, "-o", "@c.txt", "-q"], &[]),
        (
            &["cluster", g, "-o", "@c.txt", "-q", "--output-format", "mcl"],
            &[],
        ),
        (&["tricount", g, "--per-vertex", "@pv.tsv", "-q"], &[]),
        (&["spgemm", g, "-o", "@c.npz", "-q"], CPU),
    ];
    for (args, extra) in cases {
        let (count, want) = assert_same_as_single(d, args, extra, &[1, 8], &["16777216"]);
        if args[0] == "tricount" {
            assert_eq!(count.trim(), "0");
        }
        if args.contains(&"mcl") {
            assert!(!want[0].is_empty());
        }
    }
}
