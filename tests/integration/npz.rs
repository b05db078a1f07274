//! SciPy's sparse `.npz` files: matrices SciPy wrote (tests/golden/README.md) read as the same
//! matrix as their Matrix Market twin by every command, and what gmcl writes read back.

use crate::util::{gmcl, repo};
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs gmcl, which must succeed; returns stdout.
fn ok(args: &[&str]) -> String {
    let out = gmcl(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

const SCIPY: [&str; 5] = [
    "karate_csr.npz",
    "karate_csr_compressed.npz",
    "karate_csc.npz",
    "karate_coo.npz",
    "karate_f32_int64.npz",
];

#[test]
fn scipys_files_are_the_same_matrix_as_their_matrix_market_twin() {
    let dir = tempfile::tempdir().unwrap();
    let twin = repo("tests/golden/karate_weighted.mtx");
    let square = |input: &Path, out: &Path| {
        ok(&[
            "spgemm",
            s(input),
            "--engine",
            "cpu",
            "--precision",
            "f64",
            "-o",
            s(out),
            "-q",
        ]);
        std::fs::read(out).unwrap()
    };
    let want = square(&twin, &dir.path().join("want.mtx"));
    let clusters = ok(&["cluster", s(&twin), "--engine", "cpu", "-q"]);
    let triangles = ok(&["tricount", s(&twin), "--engine", "cpu", "-q"]);
    assert_eq!(triangles.trim(), "45");
    for name in SCIPY {
        let input = repo(&format!("tests/golden/{name}"));
        assert_eq!(square(&input, &dir.path().join("c.mtx")), want, "{name}");
        let c = ok(&["cluster", s(&input), "--engine", "cpu", "-q"]);
        assert_eq!(c, clusters, "{name}");
        let t = ok(&["tricount", s(&input), "--engine", "cpu", "-q"]);
        assert_eq!(t, triangles, "{name}");
    }
}

#[test]
fn what_gmcl_writes_reads_back_as_the_same_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let twin = repo("tests/golden/karate_weighted.mtx");
    let (c_npz, c_mtx) = (dir.path().join("c.npz"), dir.path().join("c.mtx"));
    for precision in ["f32", "f64"] {
        for out in [&c_npz, &c_mtx] {
            ok(&[
                "spgemm",
                s(&twin),
                "--precision",
                precision,
                "--engine",
                "cpu",
                "-o",
                s(out),
                "-q",
            ]);
        }
        assert_eq!(&std::fs::read(&c_npz).unwrap()[..4], b"PK\x03\x04");
        // C read back from each file and squared again: the same bytes.
        let again = |input: &Path, out: &str| {
            let out = dir.path().join(out);
            ok(&[
                "spgemm",
                s(input),
                "--precision",
                precision,
                "--engine",
                "cpu",
                "-o",
                s(&out),
                "-q",
            ]);
            std::fs::read(out).unwrap()
        };
        assert_eq!(
            again(&c_npz, "a.mtx"),
            again(&c_mtx, "b.mtx"),
            "{precision}"
        );
    }
    let info = ok(&["info", s(&c_npz)]);
    assert!(info.contains("npz"), "{info}");
}

#[test]
fn damaged_or_foreign_npz_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(repo("tests/golden/karate_csr.npz")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 3] = [
        ("text.npz", b"0 1\n1 2\n".to_vec(), "not a ZIP"),
        ("cut.npz", good[..good.len() / 2].to_vec(), "ZIP"),
        (
            "flipped.npz",
            {
                let mut b = good.clone();
                b[200] ^= 0x40;
                b
            },
            "CRC",
        ),
    ];
    for (name, bytes, says) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = gmcl(&["tricount", s(&p)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
