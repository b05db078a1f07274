//! gzip-compressed text input (`.el.gz`, `.wel.gz`, `.txt.gz`, `.mtx.gz`, `.abc.gz`): read as the
//! same graph as the plain file, multi-member files whole, and damaged, cut-off or foreign data
//! refused naming the file (exit 2).

use crate::util::{cmd, fails, gmcl, ok, repo, s};
use flate2::write::GzEncoder;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `bytes` compressed as one gzip member.
fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Writes `rel` of the repository compressed into `dir` as `name`.
fn compressed(dir: &Path, rel: &str, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, gz(&std::fs::read(repo(rel)).unwrap())).unwrap();
    p
}

#[test]
fn compressed_files_are_the_graph_of_their_text() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, name, command) in [
        ("graphs/karate.el", "karate.el.gz", "tricount"),
        ("graphs/karate.mtx", "karate.MTX.GZ", "tricount"),
        ("graphs/lesmis.abc", "lesmis.abc.gz", "cluster"),
        ("tests/golden/planted.el", "planted.txt.gz", "cluster"),
        ("graphs/karate.el", "karate.el.gz", "info"),
    ] {
        let plain = repo(rel);
        let packed = compressed(dir.path(), rel, name);
        let mut want_args = vec![command, s(&plain), "-q"];
        let mut got_args = vec![command, s(&packed), "-q"];
        if name.starts_with("planted.txt") {
            // The text is an edge list; read as SNAP on both sides.
            want_args.extend(["--format", "snap"]);
            got_args.extend(["--format", "snap"]);
        }
        let want = ok(&want_args);
        let got = ok(&got_args);
        if command == "info" {
            // Only the file's name differs.
            let strip = |t: &str| -> Vec<String> {
                t.lines()
                    .filter(|l| !l.starts_with("file"))
                    .map(String::from)
                    .collect()
            };
            assert_eq!(strip(&got), strip(&want), "{name}");
            assert!(got.contains("format          el"), "{got}");
        } else {
            assert_eq!(got, want, "{name}");
        }
    }
    // The weighted edge list, through spgemm's product.
    let wel = dir.path().join("k.wel");
    std::fs::write(&wel, "0 1 2.5\n1 2 0.5\n2 0 1\n").unwrap();
    let wel_gz = dir.path().join("k.wel.gz");
    std::fs::write(&wel_gz, gz(&std::fs::read(&wel).unwrap())).unwrap();
    let product = |input: &Path| ok(&["spgemm", s(input), "--engine", "cpu", "-o", "-", "-q"]);
    assert_eq!(product(&wel_gz), product(&wel));
}

#[test]
fn every_member_of_a_multi_member_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read(repo("graphs/karate.el")).unwrap();
    let half = text.len() / 2;
    let cut = half + text[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut two = gz(&text[..cut]);
    two.extend(gz(&text[cut..]));
    let p = dir.path().join("two.el.gz");
    std::fs::write(&p, two).unwrap();
    assert_eq!(
        ok(&["tricount", s(&p), "-q"]),
        ok(&["tricount", s(&repo("graphs/karate.el")), "-q"])
    );
}

#[test]
fn damaged_cut_off_or_foreign_compressed_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = gz(&std::fs::read(repo("graphs/karate.el")).unwrap());
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    let mut bad_crc = good.clone();
    let crc_at = bad_crc.len() - 8;
    bad_crc[crc_at] ^= 1;
    for (name, bytes, says) in [
        ("flipped.el.gz", flipped, "gzip"),
        ("crc.el.gz", bad_crc, "gzip"),
        ("cut.el.gz", good[..good.len() - 10].to_vec(), "cut off"),
        ("text.el.gz", b"0 1\n1 2\n".to_vec(), "not gzip-compressed"),
        ("empty.el.gz", Vec::new(), "is empty"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let err = fails(&["info", s(&p)]);
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
    }
    // Compressed data under a plain name: a hint, not line errors.
    let p = dir.path().join("packed.el");
    std::fs::write(&p, &good).unwrap();
    let err = fails(&["tricount", s(&p)]);
    assert!(
        err.contains("packed.el") && err.contains("gzip-compressed"),
        "{err}"
    );
    // A bad line inside is named by its line in the decompressed text.
    let p = dir.path().join("badline.el.gz");
    std::fs::write(&p, gz(b"0 1\n1 x\n")).unwrap();
    let err = fails(&["info", s(&p)]);
    assert!(err.contains("badline.el.gz:2:"), "{err}");
}

#[test]
fn decompressed_text_is_bounded_by_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = compressed(dir.path(), "graphs/karate.el", "k.el.gz");
    let out = cmd()
        .args(["info", s(&p)])
        .env("GMCL_MEMORY_LIMIT", "100")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("k.el.gz") && err.contains("decompresses to more than 100 bytes"),
        "{err}"
    );
    assert!(gmcl(&["info", s(&p)]).status.success());
}
