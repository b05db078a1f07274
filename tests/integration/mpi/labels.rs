//! SNAP ids and `.abc` labels across ranks: every rank reads its part, and the ids and labels
//! are numbered as one process numbers them, so that cluster files, per-vertex counts and
//! products are byte-identical to the single-process run's for P = 1 to 4 and 8; a bad line on
//! a rank other than 0 is reported once, naming the file and line, with no output left.

use super::{assert_same_as_single, mpirun, text, RANKS, RANKS_TO_8};
use crate::util::{generated, gmcl, repo, s};
use std::path::{Path, PathBuf};

/// The edges of an R-MAT graph from `gmcl generate`.
fn rmat_edges(dir: &Path, scale: &str, seed: &str) -> Vec<(u64, u64)> {
    let f = generated(
        dir.join(format!("rmat-{scale}-{seed}.el")),
        &["-s", scale, "-e", "6", "--seed", seed],
    );
    std::fs::read_to_string(&f)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (u, v) = l.split_once(' ').unwrap();
            (u.parse().unwrap(), v.parse().unwrap())
        })
        .collect()
}

/// A scrambled name for vertex `v`: distinct for distinct `v`, not in the order of `v`.
fn scramble(v: u64) -> u64 {
    (v.wrapping_mul(2_654_435_761) ^ 0x5bd1) % 4_000_000_007
}

/// An R-MAT graph as SNAP: a header, ids spread up to 4e9 in no order of value, TABs and
/// spaces, comments among the edges, and a third column on some lines (skipped, as SNAP's loader
/// skips it).
fn snap_graph(dir: &Path) -> PathBuf {
    let f = dir.join("rmat.txt");
    let mut t =
        String::from("# Undirected graph: rmat.txt\n# Nodes: ? Edges: ?\n# FromNodeId\tToNodeId\n");
    for (k, (u, v)) in rmat_edges(dir, "9", "4").into_iter().enumerate() {
        let (a, b) = (scramble(u), scramble(v));
        match k % 7 {
            0 => t.push_str(&format!("{a} {b} {}.25\n", k % 5)),
            3 => t.push_str(&format!("# a comment\n{a}\t{b}\r\n")),
            _ => t.push_str(&format!("{a}\t{b}\n")),
        }
    }
    std::fs::write(&f, t).unwrap();
    f
}

/// An R-MAT graph as `.abc`: labels of 1 to 300 bytes (spaces and non-ASCII in TAB-separated
/// lines), TAB and space lines, repeated edges with other weights, and one label on a line of
/// its own in every twentieth line (a label whose owner hears of it from every rank).
fn abc_graph(dir: &Path) -> PathBuf {
    let f = dir.join("rmat.abc");
    let name = |v: u64| {
        let n = scramble(v);
        match n % 5 {
            0 => format!("p{n}"),
            1 => format!("protein {n} é"),
            2 => format!("{}{n}", "long".repeat((n % 75) as usize)),
            3 => format!("%{n}"),
            _ => format!("{}", n % 10),
        }
    };
    let mut t = String::from("# labels\n");
    for (k, (u, v)) in rmat_edges(dir, "9", "8").into_iter().enumerate() {
        let (a, b) = (name(u), name(v));
        let w = format!("{}.5", k % 9);
        if k % 20 == 0 {
            t.push_str(&format!("hub\t{a}\t{w}\n"));
        }
        if a.contains(' ') || b.contains(' ') {
            t.push_str(&format!("{a}\t{b}\t{w}\n"));
        } else if k % 3 == 0 {
            t.push_str(&format!("{a} {b} {w}\n{b}\t{a}\t0.5\n"));
        } else {
            t.push_str(&format!("{a}\t\t{b}\r\n"));
        }
    }
    std::fs::write(&f, t).unwrap();
    f
}

#[test]
fn snap_and_abc_on_1_to_8_ranks_give_the_single_process_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snap_graph(dir.path());
    let abc = abc_graph(dir.path());
    let lesmis = repo("graphs/lesmis.abc");
    for g in [&snap, &abc, &lesmis] {
        let g = s(g);
        // Default stages, and stages of a few entries (many rounds of every exchange).
        let both = ["16777216", "3"];
        let (_, clusters) = assert_same_as_single(
            dir.path(),
            &["cluster", g, "-o", "@c.txt", "-q"],
            &[],
            RANKS_TO_8,
            &both,
        );
        assert!(
            clusters[0].iter().filter(|&&b| b == b'\n').count() > 1,
            "{g}"
        );
        assert_same_as_single(
            dir.path(),
            &[
                "cluster",
                g,
                "-o",
                "@c.txt",
                "-q",
                "-I",
                "3",
                "--output-format",
                "mcl",
            ],
            &[],
            RANKS,
            &["5"],
        );
        let (count, per_vertex) = assert_same_as_single(
            dir.path(),
            &["tricount", g, "--per-vertex", "@pv.tsv", "-q"],
            &[],
            RANKS_TO_8,
            &both,
        );
        assert_ne!(count.trim(), "0", "{g}");
        assert!(per_vertex[0].len() > 200, "{g}");
        let (_, product) = assert_same_as_single(
            dir.path(),
            &["spgemm", g, "-o", "@c.mtx", "-q"],
            &["--engine", "cpu"],
            RANKS_TO_8,
            &["7"],
        );
        assert!(product[0].len() > 400, "{g}");
    }
}

/// A file of 400 good lines, then a bad one and a good one: the bad line is in the last rank's
/// part.
fn with_bad_line(dir: &Path, name: &str, line: impl Fn(usize) -> String, bad: &str) -> PathBuf {
    let f = dir.join(name);
    let mut t: String = (0..400).map(|i| line(i) + "\n").collect();
    t.push_str(bad);
    t.push('\n');
    t.push_str(&line(7));
    t.push('\n');
    std::fs::write(&f, t).unwrap();
    f
}

#[test]
fn a_bad_line_on_a_later_rank_is_named_once_with_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let snap = with_bad_line(
        dir.path(),
        "bad.txt",
        |i| format!("{} {}", i * 1000, (i * 7 + 1) % 400),
        "3",
    );
    let abc = with_bad_line(
        dir.path(),
        "bad.abc",
        |i| format!("n{i}\tn{}\t1", (i * 7 + 1) % 400),
        "a\tb\tx",
    );
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("out.txt");
    let pv = out_dir.path().join("pv.tsv");
    let c = out_dir.path().join("c.mtx");
    for f in [&snap, &abc] {
        let single = gmcl(&["cluster", s(f), "-o", s(&out)]);
        assert_eq!(single.status.code(), Some(2));
        let want = text(&single.stderr);
        let want = want
            .trim()
            .strip_prefix("gmcl: error: ")
            .unwrap()
            .to_string();
        // SNAP's line lacks a column; `.abc`'s weight is no number.
        assert!(
            want.contains(":401: expected 2") || want.contains(":401: weight is not a number"),
            "{want}"
        );
        for ranks in 2..=3 {
            for args in [
                vec!["cluster", s(f), "-o", s(&out)],
                vec!["tricount", s(f), "--per-vertex", s(&pv)],
                vec!["spgemm", s(f), "-o", s(&c)],
            ] {
                let o = mpirun(ranks, &[], &args);
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
                assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
                let named = format!("rank {} of {ranks}: {want}", ranks - 1);
                assert!(err.contains(&named), "{args:?}: {err}");
                assert!(o.stdout.is_empty());
                let left: Vec<_> = std::fs::read_dir(out_dir.path()).unwrap().collect();
                assert!(left.is_empty(), "{left:?}");
            }
        }
    }
}

#[test]
fn a_product_of_two_label_files_is_refused_as_in_one_process() {
    let lesmis = repo("graphs/lesmis.abc");
    let karate = repo("graphs/karate.el");
    let args = ["spgemm", s(&karate), s(&lesmis)];
    let single = gmcl(&args);
    assert_eq!(single.status.code(), Some(2));
    assert!(text(&single.stderr).contains("A·B of two files needs numeric ids"));
    let o = mpirun(2, &[], &args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
    assert!(err.contains("A·B of two files needs numeric ids"), "{err}");
}
