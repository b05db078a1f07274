//! `--json`'s `"wall_s"`: every command's report says where its wall time went.

use crate::util::{json, repo, s};

/// Checks a report's `wall_s`: every step present and not negative, the steps within the total,
/// the device's parts within the computation.
fn check_wall(report: &serde_json::Value, what: &str) {
    let w = &report["wall_s"];
    let get = |k: &str| {
        let v = w[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{what}: wall_s.{k} missing in {report}"));
        assert!(v >= 0.0, "{what}: wall_s.{k} = {v}");
        v
    };
    let (load, compute, write, total) = (get("load"), get("compute"), get("write"), get("total"));
    assert!(total > 0.0, "{what}: {w}");
    assert!(load + compute + write <= total, "{what}: {w}");
    let device_parts: f64 = ["upload", "device", "download"]
        .iter()
        .filter_map(|k| w.get(k).and_then(|v| v.as_f64()))
        .inspect(|&v| assert!(v >= 0.0, "{what}: {w}"))
        .sum();
    assert!(device_parts <= compute, "{what}: {w}");
}

#[test]
fn every_json_report_has_its_wall_time_breakdown() {
    let dir = tempfile::tempdir().unwrap();
    let karate = repo("graphs/karate.el");
    let k = s(&karate);
    let out = |name: &str| dir.path().join(name);
    let (c, counts, clusters) = (out("c.mtx"), out("counts.tsv"), out("k.clusters"));
    let reports = [
        ("info", json(&["info", k, "--json"])),
        (
            "tricount",
            json(&[
                "tricount",
                k,
                "--engine",
                "cpu",
                "--per-vertex",
                s(&counts),
                "--json",
            ]),
        ),
        (
            "spgemm",
            json(&["spgemm", k, "--engine", "cpu", "-o", s(&c), "--json", "-q"]),
        ),
        (
            "cluster",
            json(&[
                "cluster",
                k,
                "--engine",
                "cpu",
                "-o",
                s(&clusters),
                "--json",
                "-q",
            ]),
        ),
    ];
    for (what, r) in &reports {
        check_wall(r, what);
    }
    // The steps are timed, not left at zero: loading is the first of them for every command.
    assert!(reports
        .iter()
        .all(|(_, r)| r["wall_s"]["load"].as_f64() > Some(0.0)));
    let d = json(&["dist", s(&clusters), s(&clusters), "--json"]);
    check_wall(&d, "dist");
    // generate has nothing to load: its steps are making the graph and writing it.
    let g = out("g.el");
    let r = json(&[
        "generate",
        "-s",
        "8",
        "-e",
        "4",
        "-o",
        s(&g),
        "--json",
        "-q",
    ]);
    check_wall(&r, "generate");
    assert_eq!(
        (r["vertices"].as_u64(), r["edges"].as_u64()),
        (Some(256), Some(1024))
    );
    assert_eq!(r["format"], "el");
    assert!(r["wall_s"]["write"].as_f64() > Some(0.0), "{r}");
    // convert loads and writes; building the CSR of an .npz is its computation.
    let npz = out("k.npz");
    let r = json(&["convert", k, s(&npz), "--json", "-q"]);
    check_wall(&r, "convert");
    assert_eq!(
        (r["rows"].as_u64(), r["entries"].as_u64()),
        (Some(34), Some(78))
    );
    assert_eq!(
        (&r["input_format"], &r["output_format"]),
        (&"el".into(), &"npz".into())
    );
    assert!(r["wall_s"]["load"].as_f64() > Some(0.0), "{r}");
}
