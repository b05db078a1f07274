//! The benchmark's outputs: the table printed on stdout and the JSON file.

use super::{CaseResult, Engine, Outcome, Report};
use gmcl::error::{Error, Result};
use gmcl::output::AtomicOutput;
use std::path::Path;

/// "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Milliseconds with three significant digits or more: "0.512", "12.3", "603".
pub fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.3}")
    } else if ms < 100.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.1}")
    }
}

/// GFLOP/s with one decimal.
pub fn fmt_gflops(g: f64) -> String {
    format!("{g:.1}")
}

/// Lays out rows of cells under a header: first column left-aligned, the others right-aligned,
/// widths measured in characters (names hold '·').
pub fn layout(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width = vec![0usize; cols];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&width).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            if i == 0 {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            } else {
                text.push_str("  ");
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header, &mut out);
    let rule: Vec<String> = width.iter().map(|&w| "-".repeat(w)).collect();
    line(&rule, &mut out);
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// The cell of a gmcl engine's time: the median, or what went wrong.
fn engine_cells(case: &CaseResult, engine: Engine) -> [String; 2] {
    match case.run(engine) {
        None => ["-".into(), "-".into()],
        Some(r) => match (&r.outcome, r.median_ms, r.gflops) {
            (Outcome::Failed { .. }, _, _) => ["FAILED".into(), "-".into()],
            (Outcome::Wrong { .. }, _, _) => ["WRONG".into(), "-".into()],
            (_, Some(m), Some(g)) => [fmt_ms(m), fmt_gflops(g)],
            _ => ["-".into(), "-".into()],
        },
    }
}

/// The table: one line per case, then a note per failed or wrong run, then the geometric
/// means.
pub fn table(report: &Report) -> String {
    let has = |e: Engine| report.engines.contains(&e);
    let mut header: Vec<String> = vec!["case".into(), "products".into(), "C.nnz".into()];
    if has(Engine::Gpu) {
        header.extend(["gpu ms".into(), "GFLOP/s".into()]);
    }
    if has(Engine::Cusparse) {
        header.extend(["cuSPARSE ms".into(), "GFLOP/s".into(), "best alg".into()]);
    }
    if has(Engine::Gpu) && has(Engine::Cusparse) {
        header.push("speedup".into());
    }
    if has(Engine::Cpu) {
        header.extend(["cpu ms".into(), "GFLOP/s".into()]);
    }
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for c in &report.cases {
        let mut row = vec![
            c.name.clone(),
            thousands(c.products),
            c.c_nnz.map(thousands).unwrap_or_else(|| "-".into()),
        ];
        if has(Engine::Gpu) {
            row.extend(engine_cells(c, Engine::Gpu));
        }
        if has(Engine::Cusparse) {
            match (c.best_cusparse_ms, &c.best_cusparse) {
                (Some(ms), Some(alg)) => row.extend([
                    fmt_ms(ms),
                    fmt_gflops(gmcl::measure::gflops(c.products, ms / 1e3)),
                    alg.clone(),
                ]),
                _ => {
                    let any_wrong = c
                        .cusparse_runs()
                        .any(|r| matches!(r.outcome, Outcome::Wrong { .. }));
                    let what = if any_wrong { "WRONG" } else { "FAILED" };
                    row.extend([what.into(), "-".into(), "none".into()]);
                }
            }
        }
        if has(Engine::Gpu) && has(Engine::Cusparse) {
            row.push(match c.speedup {
                Some(s) => format!("{s:.2}x"),
                None => "-".into(),
            });
        }
        if has(Engine::Cpu) {
            row.extend(engine_cells(c, Engine::Cpu));
        }
        rows.push(row);
        for r in &c.runs {
            match &r.outcome {
                Outcome::Failed { stage, status } => notes.push(format!(
                    "{}: {} failed: {status} in {stage}",
                    c.name,
                    r.label()
                )),
                Outcome::Wrong { reason } => {
                    notes.push(format!("{}: {} WRONG: {reason}", c.name, r.label()))
                }
                _ => {}
            }
        }
    }
    let mut out = layout(&header, &rows);
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            out.push_str(&n);
            out.push('\n');
        }
    }
    let counted = report.cases.iter().filter(|c| c.speedup.is_some()).count();
    if let Some(g) = report.geomean_speedup {
        out.push_str(&format!(
            "\ngeometric-mean speedup of gpu (gMAGNUS) over the best cuSPARSE algorithm: {g:.2}x over {counted} cases"
        ));
        if let Some(b) = report.geomean_speedup_scale18_up {
            let n = report
                .cases
                .iter()
                .filter(|c| c.speedup.is_some() && c.scale.is_some_and(|s| s >= 18))
                .count();
            out.push_str(&format!("; scale 18 and above: {b:.2}x over {n}"));
        }
        out.push('\n');
    }
    let mut about = vec![format!(
        "{} values, median of {} after one warm-up",
        report.precision, report.repeat
    )];
    if let Some(d) = &report.device {
        about.push(d.clone());
    }
    if let Some(v) = &report.cusparse_version {
        if !v.is_empty() {
            about.push(format!("cuSPARSE {v}"));
        }
    }
    out.push_str(&about.join("; "));
    out.push('\n');
    out
}

/// Writes the report as JSON (atomically).
pub fn write_json(path: &Path, report: &Report) -> Result<()> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| Error::Invalid(format!("cannot format JSON: {e}")))?;
    let mut out = AtomicOutput::create(path)?;
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.commit()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::{CaseResult, Engine, EngineRun, Outcome, Report};
    use super::*;

    fn run(engine: Engine, variant: Option<&str>, outcome: Outcome, ms: Option<f64>) -> EngineRun {
        EngineRun {
            engine,
            variant: variant.map(Into::into),
            outcome,
            c_nnz: Some(100),
            times_ms: ms.into_iter().collect(),
            median_ms: ms,
            gflops: ms.map(|m| gmcl::measure::gflops(1_000_000, m / 1e3)),
            wall_median_ms: None,
        }
    }

    /// A report of two R-MAT cases: cuSPARSE's ALG1 failing on the second, ALG2 wrong.
    pub(crate) fn sample() -> Report {
        let mut cases = Vec::new();
        for (scale, gpu_ms) in [(15u32, 0.5), (18, 1.0)] {
            let mut c = CaseResult {
                name: format!("s{scale} A4·B8"),
                suite: "rmat-paper".into(),
                scale: Some(scale),
                a_per_row: Some(4),
                b_per_row: Some(8),
                edge_factor: None,
                file: None,
                rows: 1 << scale,
                cols: 1 << scale,
                a_nnz: 10,
                b_nnz: 20,
                products: 1_000_000,
                c_nnz: Some(100),
                runs: vec![run(Engine::Gpu, None, Outcome::Reference, Some(gpu_ms))],
                best_cusparse: None,
                best_cusparse_ms: None,
                speedup: None,
            };
            let alg1 = if scale == 18 {
                Outcome::Failed {
                    stage: "compute".into(),
                    status: "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES (11)".into(),
                }
            } else {
                Outcome::Ok
            };
            let t1 = alg1.counts().then_some(2.0);
            c.runs.push(run(Engine::Cusparse, Some("ALG1"), alg1, t1));
            c.runs.push(run(
                Engine::Cusparse,
                Some("ALG2"),
                Outcome::Wrong {
                    reason: "differs from the gpu result: empty C: 0 of 100 nonzeros".into(),
                },
                None,
            ));
            c.runs.push(run(
                Engine::Cusparse,
                Some("ALG3/0.1"),
                Outcome::Ok,
                Some(4.0),
            ));
            c.summarise();
            cases.push(c);
        }
        let mut r = Report::new("f32", 5, vec![Engine::Gpu, Engine::Cusparse], 1e-4);
        r.device = Some("NVIDIA H200 (sm_90, 132 SMs, 48 KiB shared per block)".into());
        r.cases = cases;
        r.summarise();
        r
    }

    #[test]
    fn numbers_format() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(25_255_464), "25,255,464");
        assert_eq!(fmt_ms(0.51234), "0.512");
        assert_eq!(fmt_ms(12.345), "12.35");
        assert_eq!(fmt_ms(602.94), "602.9");
    }

    #[test]
    fn speedups_and_geomeans() {
        let r = sample();
        assert_eq!(r.cases[0].best_cusparse.as_deref(), Some("ALG1"));
        assert_eq!(r.cases[0].speedup, Some(4.0));
        assert_eq!(r.cases[1].best_cusparse.as_deref(), Some("ALG3/0.1"));
        assert_eq!(r.cases[1].speedup, Some(4.0));
        assert!((r.geomean_speedup.unwrap() - 4.0).abs() < 1e-12);
        assert!((r.geomean_speedup_scale18_up.unwrap() - 4.0).abs() < 1e-12);
    }

    #[test]
    fn table_text() {
        let t = table(&sample());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("case "), "{t}");
        for h in [
            "products",
            "C.nnz",
            "gpu ms",
            "cuSPARSE ms",
            "best alg",
            "speedup",
        ] {
            assert!(lines[0].contains(h), "{h}: {t}");
        }
        assert!(!lines[0].contains("cpu ms"));
        assert!(lines[1].starts_with("---"));
        assert!(
            lines[2].starts_with("s15 A4·B8") && lines[2].ends_with("4.00x"),
            "{t}"
        );
        assert!(
            lines[2].contains("1,000,000") && lines[2].contains("ALG1"),
            "{t}"
        );
        assert!(lines[3].contains("ALG3/0.1"), "{t}");
        // Columns line up: every row as wide as the header, counted in characters.
        let w = lines[0].chars().count();
        assert_eq!(lines[2].chars().count(), w, "{t}");
        assert!(t.contains(
            "s18 A4·B8: cuSPARSE ALG1 failed: CUSPARSE_STATUS_INSUFFICIENT_RESOURCES (11) in compute"
        ));
        assert!(t.contains("s15 A4·B8: cuSPARSE ALG2 WRONG: differs from the gpu result: empty C"));
        assert!(t.contains(
            "best cuSPARSE algorithm: 4.00x over 2 cases; scale 18 and above: 4.00x over 1"
        ));
        assert!(t.contains("f32 values, median of 5 after one warm-up; NVIDIA H200"));
    }

    #[test]
    fn table_marks_all_failed_cusparse() {
        let mut r = sample();
        for run in r.cases[1].runs.iter_mut().skip(1) {
            run.outcome = Outcome::Failed {
                stage: "compute".into(),
                status: "X".into(),
            };
        }
        r.cases[1].summarise();
        r.summarise();
        let t = table(&r);
        let row = t.lines().find(|l| l.starts_with("s18")).unwrap();
        assert!(row.contains("FAILED") && row.contains("none"), "{t}");
        assert!(row.trim_end().ends_with('-'), "{t}");
        assert!(t.contains("over 1 cases"), "{t}");
    }

    #[test]
    fn json_has_every_figure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_json(&p, &sample()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["precision"], "f32");
        assert_eq!(v["engines"], serde_json::json!(["gpu", "cusparse"]));
        let c = &v["cases"][1];
        assert_eq!(c["name"], "s18 A4·B8");
        assert_eq!(c["products"], 1_000_000);
        assert_eq!(c["speedup"], 4.0);
        let alg1 = &c["runs"][1];
        assert_eq!(alg1["engine"], "cusparse");
        assert_eq!(alg1["variant"], "ALG1");
        assert_eq!(alg1["outcome"]["kind"], "failed");
        assert_eq!(
            alg1["outcome"]["status"],
            "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES (11)"
        );
        assert_eq!(c["runs"][2]["outcome"]["kind"], "wrong");
        assert_eq!(c["runs"][0]["times_ms"], serde_json::json!([1.0]));
        assert_eq!(v["geomean_speedup"], 4.0);
    }
}
