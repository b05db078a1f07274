//! The speedup plot: gMAGNUS's speedup over each cuSPARSE baseline against scale, one panel per
//! A density (and per edge factor of the `sym` suite), failed or wrong baselines marked with a
//! cross at the top of the panel (as in the gMAGNUS paper's figure), the legend at the bottom
//! right where speedups above 1 leave room. SVG only.

use super::{CaseResult, Engine, Report};
use gmcl::error::{Error, Result};
use gmcl::output::AtomicOutput;
use plotters::prelude::*;
use std::path::Path;

/// One line of a panel: speedups by scale, and the scales where the baseline failed or was
/// wrong while gMAGNUS counted.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// "best cuSPARSE", "ALG1", "ALG2", "ALG3".
    pub name: String,
    /// (scale, speedup).
    pub points: Vec<(u32, f64)>,
    /// Scales where this baseline gave no counted result.
    pub failed: Vec<u32>,
}

/// One panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// "A4·B8", "sym ef8".
    pub title: String,
    /// The baselines.
    pub series: Vec<Series>,
    /// Scales where gMAGNUS itself failed or was wrong.
    pub gpu_failed: Vec<u32>,
}

/// The baselines: a name and which cuSPARSE variants it takes the best of.
const BASELINES: [(&str, &str); 4] = [
    ("best cuSPARSE", ""),
    ("ALG1", "ALG1"),
    ("ALG2", "ALG2"),
    ("ALG3", "ALG3"),
];

fn panel_key(c: &CaseResult) -> Option<(u32, u32, String)> {
    match (c.suite.as_str(), c.a_per_row, c.b_per_row, c.edge_factor) {
        ("rmat-paper", Some(a), Some(b), _) => Some((0, a, format!("A{a}·B{b}"))),
        ("sym", _, _, Some(ef)) => Some((1, ef, format!("sym ef{ef}"))),
        _ => None,
    }
}

/// The milliseconds of the best counted cuSPARSE run whose variant starts with `prefix`.
fn baseline_ms(c: &CaseResult, prefix: &str) -> Option<f64> {
    c.cusparse_runs()
        .filter(|r| r.variant.as_deref().unwrap_or("").starts_with(prefix))
        .filter_map(|r| r.counted_ms())
        .min_by(f64::total_cmp)
}

/// The panels of a report: generated cases with both gMAGNUS and cuSPARSE runs (files have no
/// scale and are left out).
pub fn panels(report: &Report) -> Vec<Panel> {
    let mut keys: Vec<(u32, u32, String)> = report.cases.iter().filter_map(panel_key).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for (_, _, title) in keys {
        let cases: Vec<&CaseResult> = report
            .cases
            .iter()
            .filter(|c| {
                panel_key(c).is_some_and(|k| k.2 == title)
                    && c.scale.is_some()
                    && c.run(Engine::Gpu).is_some()
                    && c.cusparse_runs().next().is_some()
            })
            .collect();
        if cases.is_empty() {
            continue;
        }
        let mut panel = Panel {
            title,
            series: Vec::new(),
            gpu_failed: Vec::new(),
        };
        for c in &cases {
            if c.run(Engine::Gpu).and_then(|r| r.counted_ms()).is_none() {
                panel.gpu_failed.extend(c.scale);
            }
        }
        for (name, prefix) in BASELINES {
            let mut s = Series {
                name: name.into(),
                points: Vec::new(),
                failed: Vec::new(),
            };
            for c in &cases {
                let (Some(scale), Some(gpu)) =
                    (c.scale, c.run(Engine::Gpu).and_then(|r| r.counted_ms()))
                else {
                    continue;
                };
                let ran = c
                    .cusparse_runs()
                    .any(|r| r.variant.as_deref().unwrap_or("").starts_with(prefix));
                match baseline_ms(c, prefix) {
                    Some(ms) if gpu > 0.0 => s.points.push((scale, ms / gpu)),
                    None if ran => s.failed.push(scale),
                    _ => {}
                }
            }
            s.points.sort_by_key(|p| p.0);
            panel.series.push(s);
        }
        out.push(panel);
    }
    out
}

const COLORS: [RGBColor; 4] = [
    RGBColor(0, 0, 0),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

fn draw_err(e: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("cannot draw the plot: {e}"))
}

/// Draws the plot as SVG text.
pub fn svg(report: &Report) -> Result<String> {
    let panels = panels(report);
    let cols = panels.len().clamp(1, 2);
    let rows = panels.len().div_ceil(2).max(1);
    let (w, h) = (560 * cols as u32, 60 + 380 * rows as u32);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut title = format!("gMAGNUS speedup over cuSPARSE, {}", report.precision);
        if let Some(d) = &report.device {
            title = format!("{title}, {}", d.split(" (").next().unwrap_or(d));
        }
        let body = root.titled(&title, ("sans-serif", 18)).map_err(draw_err)?;
        if panels.is_empty() {
            body.draw(&Text::new(
                "no speedup to plot: needs the gpu and cusparse engines on generated cases",
                (20, 40),
                ("sans-serif", 16),
            ))
            .map_err(draw_err)?;
        }
        let scales: Vec<u32> = panels
            .iter()
            .flat_map(|p| {
                p.series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|q| q.0).chain(s.failed.iter().copied()))
                    .chain(p.gpu_failed.iter().copied())
            })
            .collect();
        let lo = scales.iter().copied().min().unwrap_or(15) as f64 - 0.5;
        let hi = scales.iter().copied().max().unwrap_or(15) as f64 + 0.5;
        let areas = body.split_evenly((rows, cols));
        for (area, panel) in areas.iter().zip(&panels) {
            let top = panel
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .fold(1.0f64, f64::max);
            let ymax = (top * 1.3).max(2.0);
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(48)
                .build_cartesian_2d(lo..hi, 0.0..ymax)
                .map_err(draw_err)?;
            let int_label = |x: &f64| {
                if (x - x.round()).abs() < 1e-6 {
                    format!("{}", x.round() as i64)
                } else {
                    String::new()
                }
            };
            chart
                .configure_mesh()
                .x_desc("scale (log2 of rows)")
                .y_desc("speedup of gMAGNUS")
                .x_labels(((hi - lo) as usize + 1).max(2))
                .x_label_formatter(&int_label)
                .draw()
                .map_err(draw_err)?;
            chart
                .draw_series(LineSeries::new(
                    [(lo, 1.0), (hi, 1.0)],
                    RGBColor(160, 160, 160),
                ))
                .map_err(draw_err)?;
            for (i, s) in panel.series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x as f64, y)).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(draw_err)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(draw_err)?;
                let y = ymax * (0.95 - 0.05 * i as f64);
                chart
                    .draw_series(
                        s.failed
                            .iter()
                            .map(|&x| Cross::new((x as f64, y), 6, color.stroke_width(2))),
                    )
                    .map_err(draw_err)?;
            }
            chart
                .draw_series(std::iter::empty::<Cross<(f64, f64), i32>>())
                .map_err(draw_err)?
                .label("failed or wrong")
                .legend(|(x, y)| Cross::new((x + 9, y), 5, BLACK.stroke_width(2)));
            if !panel.gpu_failed.is_empty() {
                chart
                    .draw_series(panel.gpu_failed.iter().map(|&x| {
                        Text::new("gMAGNUS failed", (x as f64, ymax * 0.5), ("sans-serif", 12))
                    }))
                    .map_err(draw_err)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .border_style(BLACK)
                .background_style(WHITE.mix(0.85))
                .draw()
                .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(text)
}

/// Writes the plot (atomically).
pub fn write_svg(path: &Path, report: &Report) -> Result<()> {
    let text = svg(report)?;
    let mut out = AtomicOutput::create(path)?;
    out.write_all(text.as_bytes())?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::sample;
    use super::*;

    #[test]
    fn panels_hold_speedups_and_failures() {
        let p = panels(&sample());
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].title, "A4·B8");
        let names: Vec<&str> = p[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["best cuSPARSE", "ALG1", "ALG2", "ALG3"]);
        let best = &p[0].series[0];
        assert_eq!(best.points, vec![(15, 4.0), (18, 4.0)]);
        let alg1 = &p[0].series[1];
        assert_eq!(alg1.points, vec![(15, 4.0)]);
        assert_eq!(alg1.failed, vec![18]);
        // ALG2 was wrong at both scales: marked, never plotted as a speedup.
        assert!(p[0].series[2].points.is_empty());
        assert_eq!(p[0].series[2].failed, vec![15, 18]);
        assert_eq!(p[0].series[3].points, vec![(15, 8.0), (18, 4.0)]);
        assert!(p[0].gpu_failed.is_empty());
    }

    #[test]
    fn svg_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        write_svg(&path, &sample()).unwrap();
        if let Ok(keep) = std::env::var("GMCL_PLOT_SAMPLE") {
            std::fs::copy(&path, keep).unwrap();
        }
        let t = std::fs::read_to_string(&path).unwrap();
        assert!(t.starts_with("<svg"), "{}", &t[..t.len().min(200)]);
        assert!(t.trim_end().ends_with("</svg>"));
        for s in [
            "A4·B8",
            "best cuSPARSE",
            "ALG3",
            "speedup of gMAGNUS",
            "NVIDIA H200",
        ] {
            assert!(t.contains(s), "{s} missing");
        }
        // Crosses are drawn as two lines each: the failures are there.
        assert!(t.matches("<polyline").count() + t.matches("<line").count() > 4);
    }

    #[test]
    fn empty_plot_says_why() {
        let mut r = sample();
        r.cases.clear();
        let t = svg(&r).unwrap();
        assert!(t.contains("no speedup to plot"));
    }
}
