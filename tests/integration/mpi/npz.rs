//! SciPy `.npz` archives across ranks: each rank reads its share of the rows (CSR), columns (CSC)
//! or entries (COO), and every output equals the single-process run's.

use super::{assert_same_as_single, mpirun, text, untidy_graph, CPU, RANKS, RANKS_TO_8};
use crate::util::{generated, gmcl, s};
use std::path::{Path, PathBuf};

/// The CRC-32 that ZIP stores for a member.
fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A ZIP archive of `members` (name, bytes), as `save_npz` writes one: stored
/// (`compressed=False`) or, with `deflate`, deflated (its default).
fn zip(members: &[(String, Vec<u8>)], deflate: bool) -> Vec<u8> {
    use std::io::Write;
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, raw) in members {
        let (crc, len, at) = (crc32(raw), raw.len() as u32, out.len() as u32);
        let body = if deflate {
            let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            d.write_all(raw).unwrap();
            d.finish().unwrap()
        } else {
            raw.clone()
        };
        let method = if deflate { 8 } else { 0 };
        let common = |v: &mut Vec<u8>| {
            v.extend_from_slice(&[20, 0, 0, 0, method, 0, 0, 0, 0, 0]);
            v.extend_from_slice(&crc.to_le_bytes());
            v.extend_from_slice(&(body.len() as u32).to_le_bytes());
            v.extend_from_slice(&len.to_le_bytes());
            v.extend_from_slice(&(name.len() as u16).to_le_bytes());
            v.extend_from_slice(&[0, 0]);
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&body);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&[20, 0]);
        common(&mut central);
        central.extend_from_slice(&[0; 10]);
        central.extend_from_slice(&at.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let (cd_at, cd_len, n) = (out.len() as u32, central.len() as u32, members.len() as u16);
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd_at.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// A `.npy` member: `descr` elements of `shape` (`None`: a scalar), then `data`.
fn npy(descr: &str, shape: Option<usize>, data: Vec<u8>) -> Vec<u8> {
    let shape = shape.map_or("()".to_string(), |n| format!("({n},)"));
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(&data);
    b
}

/// Integers as a `.npy` member of `width` bytes (4 or 8).
fn ints(v: &[u64], width: usize) -> Vec<u8> {
    let data = v
        .iter()
        .flat_map(|x| x.to_le_bytes()[..width].to_vec())
        .collect();
    npy(if width == 4 { "<i4" } else { "<i8" }, Some(v.len()), data)
}

/// A SciPy archive of `kind` (csr, csc or coo) holding `entries` (row, column, value) of an
/// `n x n` matrix, in their order within each row (CSR) or column (CSC), with `width`-byte
/// indices; `kind` ending in `+z` is deflated.
fn archive(
    dir: &Path,
    name: &str,
    kind: &str,
    n: u64,
    entries: &[(u64, u64, f64)],
    width: usize,
) -> PathBuf {
    let (kind, deflate) = match kind.strip_suffix("+z") {
        Some(k) => (k, true),
        None => (kind, false),
    };
    let data: Vec<u8> = entries.iter().flat_map(|e| e.2.to_le_bytes()).collect();
    let mut members = vec![
        (
            "format".to_string(),
            npy("|S3", None, kind.as_bytes().to_vec()),
        ),
        ("shape".to_string(), ints(&[n, n], 8)),
    ];
    match kind {
        "coo" => {
            let rows: Vec<u64> = entries.iter().map(|e| e.0).collect();
            let cols: Vec<u64> = entries.iter().map(|e| e.1).collect();
            members.push(("row".into(), ints(&rows, width)));
            members.push(("col".into(), ints(&cols, width)));
            members.push(("data".into(), npy("<f8", Some(entries.len()), data)));
        }
        _ => {
            let major = |e: &(u64, u64, f64)| if kind == "csr" { e.0 } else { e.1 };
            let minor: Vec<u64> = entries
                .iter()
                .map(|e| if kind == "csr" { e.1 } else { e.0 })
                .collect();
            let mut ptr = vec![0u64; n as usize + 1];
            for e in entries {
                ptr[major(e) as usize + 1] += 1;
            }
            for i in 0..n as usize {
                ptr[i + 1] += ptr[i];
            }
            members.push(("indices".into(), ints(&minor, width)));
            members.push(("indptr".into(), ints(&ptr, width)));
            members.push(("data".into(), npy("<f8", Some(entries.len()), data)));
        }
    }
    let members: Vec<(String, Vec<u8>)> = members
        .into_iter()
        .map(|(k, v)| (format!("{k}.npy"), v))
        .collect();
    let f = dir.join(name);
    std::fs::write(&f, zip(&members, deflate)).unwrap();
    f
}

/// Entries of a 37 x 37 matrix (no rank count divides 37) with repeated entries (in both
/// directions), self loops and weights, in random order.
fn entries() -> Vec<(u64, u64, f64)> {
    let mut x = 99u64;
    let mut out = Vec::new();
    for i in 0..90u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (u, v) = ((x >> 33) % 37, (x >> 13) % 37);
        out.push((u, v, (i % 11) as f64 * 0.25 + 0.5));
        if i % 7 == 0 {
            out.push((v, u, 1.0));
            out.push((u, u, 3.0));
        }
    }
    out
}

/// The entries grouped by row (`by_row`) or column, in their order within the group.
fn grouped(e: &[(u64, u64, f64)], by_row: bool) -> Vec<(u64, u64, f64)> {
    let mut e = e.to_vec();
    e.sort_by_key(|x| if by_row { x.0 } else { x.1 });
    e
}

#[test]
fn npz_archives_across_ranks_equal_the_single_process_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let converted = d.join("converted.npz");
    let o = gmcl(&["convert", s(&untidy_graph(d)), s(&converted)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let generated = generated(
        d.join("generated.npz"),
        &["-s", "7", "-e", "4", "--weights"],
    );
    let e = entries();
    let inputs = [
        converted,
        generated,
        archive(d, "csr64.npz", "csr", 37, &grouped(&e, true), 8),
        archive(d, "csc32.npz", "csc", 37, &grouped(&e, false), 4),
        archive(d, "csc64.npz", "csc", 37, &grouped(&e, false), 8),
        archive(d, "coo32.npz", "coo", 37, &e, 4),
        archive(d, "coo64.npz", "coo", 37, &e, 8),
        archive(d, "csr32z.npz", "csr+z", 37, &grouped(&e, true), 4),
    ];
    for (k, g) in inputs.iter().enumerate() {
        let g = s(g);
        let cases: [&[&str]; 3] = [
            &["cluster", g, "-o", "@c.txt", "-q"],
            &["tricount", g, "--per-vertex", "@pv.tsv", "-q"],
            &[
                "spgemm",
                g,
                g,
                "-o",
                ["@p.mtx", "@p.wel", "@p.npz"][k % 3],
                "-q",
            ],
        ];
        // 8 ranks for an R-MAT archive and for one of 37 rows cut by entries.
        let ranks = if k == 1 || k == 5 { RANKS_TO_8 } else { RANKS };
        for args in cases {
            let extra = if args[0] == "spgemm" { CPU } else { &[] };
            let (_, want) = assert_same_as_single(d, args, extra, ranks, &["16777216", "7"]);
            assert!(
                want[0].iter().filter(|&&b| b == b'\n').count() > 1,
                "{args:?}"
            );
        }
    }
}

#[test]
fn a_bad_index_in_one_ranks_share_stops_every_rank_with_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = grouped(&entries(), true);
    // In the last rows: the last rank's share.
    let at = e.len() - 2;
    e[at].1 = 99;
    let f = archive(dir.path(), "bad.npz", "csr", 37, &e, 4);
    let out = dir.path().join("out.txt");
    for ranks in [1, 3] {
        for args in [
            ["cluster", s(&f), "-o", s(&out)],
            ["tricount", s(&f), "--per-vertex", s(&out)],
        ] {
            let o = mpirun(ranks, &[], &args);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{err}");
            assert_eq!(err.matches("gmcl: error").count(), 1, "{err}");
            let want = format!("bad.npz: array 'indices' holds 99 at position {at}, outside 0..37");
            assert!(err.contains(&want), "{err}");
            if ranks > 1 {
                assert!(err.contains("rank 2 of 3"), "{err}");
            }
            assert!(o.stdout.is_empty());
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert_eq!(left.len(), 1, "{left:?}");
        }
    }
}

/// The entries of a simple undirected graph on 61 vertices (no rank count divides 61), both
/// ways, each row's in increasing order.
fn simple_entries() -> Vec<(u64, u64, f64)> {
    let mut x = 7u64;
    let mut set = std::collections::BTreeSet::new();
    for _ in 0..400 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (u, v) = ((x >> 33) % 61, (x >> 13) % 61);
        if u != v {
            set.insert((u, v));
            set.insert((v, u));
        }
    }
    set.into_iter().map(|(u, v)| (u, v, 1.0)).collect()
}

/// `entries` (a simple graph's, by row) with row 30's first entry moved to a column the row
/// does not name: as many entries as before, one of them without its mirror.
fn moved_entry(entries: &[(u64, u64, f64)]) -> Vec<(u64, u64, f64)> {
    let row: Vec<u64> = entries.iter().filter(|e| e.0 == 30).map(|e| e.1).collect();
    let mut moved = entries.to_vec();
    let k = moved.iter().position(|e| e.0 == 30).unwrap();
    moved[k].1 = (0..61).find(|c| *c != 30 && !row.contains(c)).unwrap();
    moved.sort_by_key(|e| (e.0, e.1));
    moved
}

#[test]
fn archives_of_simple_graphs_taken_as_stored_count_and_cluster_as_the_single_process() {
    // Ranks read a CSR or CSC archive that already holds a simple graph as stored (for MCL:
    // one whose values are all 1), and decide so together; the others (one-way entries,
    // unsorted rows, loops weighing 2) go the general path. Both must count and cluster as one
    // process does.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let simple = simple_entries();
    let mut looped = simple.clone();
    looped.extend((0..61).step_by(4).map(|i| (i, i, 2.0)));
    looped.sort_by_key(|e| (e.0, e.1));
    // An entry between the first and the last rows, one way only.
    let mut one_way = simple.clone();
    let k = one_way.iter().position(|e| e.0 > 50 && e.1 < 10).unwrap();
    one_way.remove(k);
    // An entry moved within its row: as many entries both ways, one of them unmirrored.
    let moved = moved_entry(&simple);
    // Columns in decreasing order.
    let mut unsorted = simple.clone();
    unsorted.sort_by_key(|e| (e.1, std::cmp::Reverse(e.0)));
    // By column, for CSC.
    let mut by_column = simple.clone();
    by_column.sort_by_key(|e| (e.1, e.0));
    let undirected = generated(d.join("rmat.npz"), &["-s", "8", "-e", "8", "--undirected"]);
    let inputs = [
        archive(d, "simple32.npz", "csr", 61, &simple, 4),
        archive(d, "simple-csc64z.npz", "csc+z", 61, &by_column, 8),
        archive(d, "looped64.npz", "csr", 61, &looped, 8),
        archive(d, "one-way32.npz", "csr", 61, &one_way, 4),
        archive(d, "moved32.npz", "csr", 61, &moved, 4),
        archive(d, "unsorted-csc32.npz", "csc", 61, &unsorted, 4),
        undirected,
    ];
    for g in &inputs {
        let args = ["tricount", s(g), "--per-vertex", "@pv.tsv", "-q"];
        let (out, want) = assert_same_as_single(d, &args, &[], RANKS, &["16777216", "7"]);
        assert!(!out.trim().is_empty() && !want[0].is_empty(), "{}", s(g));
        let args = ["cluster", s(g), "-o", "@c.txt", "-q"];
        let (_, want) = assert_same_as_single(d, &args, &[], RANKS, &["16777216", "7"]);
        assert!(!want[0].is_empty(), "{}", s(g));
    }
}

/// `--engine gpu` on every rank (ranks sharing one GPU): an archive read as stored is checked on
/// the ranks' GPUs once all of U is summed (a "check" step), and one that is no simple graph's
/// though its entries are as many both ways (an entry moved within its row) is found so there
/// and read again as any other; counts and per-vertex files are the single process's. Without
/// a usable GPU, one message (exit 3).
#[test]
fn archives_checked_on_the_ranks_gpus_count_as_the_single_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let simple = simple_entries();
    let inputs = [
        (archive(d, "simple32.npz", "csr", 61, &simple, 4), true),
        (
            archive(d, "moved32.npz", "csr", 61, &moved_entry(&simple), 4),
            false,
        ),
        (
            generated(d.join("rmat.npz"), &["-s", "8", "-e", "8", "--undirected"]),
            true,
        ),
    ];
    let has_gpu = crate::util::gpu().is_some();
    for (g, stored) in &inputs {
        let (count, per_vertex) = super::single(g, &d.join("single.tsv"));
        for ranks in [1, 2, 3] {
            let what = format!("{} on {ranks} ranks", s(g));
            let pv = d.join(format!("pv-{ranks}.tsv"));
            let args = ["tricount", s(g), "--engine", "gpu", "--per-vertex", s(&pv)];
            let o = mpirun(ranks, &[], &[&args[..], &["--json"]].concat());
            let err = text(&o.stderr);
            if !has_gpu {
                assert_eq!(o.status.code(), Some(3), "{what}: {err}");
                assert!(err.contains("the GPU engine cannot run"), "{what}: {err}");
                continue;
            }
            assert!(o.status.success(), "{what}: {err}");
            let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
            assert_eq!(v["triangles"].to_string(), count.trim(), "{what}");
            assert_eq!(v["method"], "fused", "{what}");
            let names: Vec<_> = (v["steps"].as_array().unwrap().iter())
                .map(|s| s["name"].as_str().unwrap())
                .collect();
            let mut want = vec!["upload", "rank", "orient", "exchange", "lay out", "count"];
            if *stored {
                want.insert(4, "check");
            }
            if v["exchange"] == "nccl" {
                want.insert(1, "join");
            }
            assert_eq!(names, want, "{what}");
            assert_eq!(std::fs::read(&pv).unwrap(), per_vertex, "{what}");
            std::fs::remove_file(&pv).unwrap();
        }
    }
}
