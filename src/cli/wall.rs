//! Where a command's wall-clock time went: the `"wall_s"` object of every `--json` report.

use std::time::Instant;

/// The wall-clock seconds of a command's steps. `load`, `compute` and `write` follow one another
/// and sum to at most `total` (the rest is starting up, choosing the engine and the report);
/// `upload`, `device` and `download` are parts of `compute`, present when the GPU engine ran and
/// the engine separates them.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Wall {
    /// Reading the input and building the command's matrix or graph.
    pub load: f64,
    /// Copying the input to the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload: Option<f64>,
    /// Work on the device with the data there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<f64>,
    /// Copying the result back to the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download: Option<f64>,
    /// The command's computation (on either engine).
    pub compute: f64,
    /// Writing output files (0 when the result goes only to stdout).
    pub write: f64,
    /// From the command's start to its report.
    pub total: f64,
}

/// Times a command's steps one after another from its start.
pub struct Stopwatch {
    start: Instant,
    last: Instant,
}

impl Stopwatch {
    /// Starts timing now.
    pub fn start() -> Self {
        Self::since(Instant::now())
    }

    /// Timing from `start`, the command's start.
    pub fn since(start: Instant) -> Self {
        Stopwatch { start, last: start }
    }

    /// Seconds since the previous lap (or the start).
    pub fn lap(&mut self) -> f64 {
        let now = Instant::now();
        let s = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        s
    }

    /// The wall of a command whose steps were `load`, `compute` and `write` (seconds), with its
    /// total.
    pub fn finish_steps(&self, load: f64, compute: f64, write: f64) -> Wall {
        self.finish(Wall {
            load,
            compute,
            write,
            ..Default::default()
        })
    }

    /// `wall` with its total: the seconds from the start until now.
    pub fn finish(&self, wall: Wall) -> Wall {
        Wall {
            total: self.start.elapsed().as_secs_f64(),
            ..wall
        }
    }
}

/// A report with `"wall_s"` added to its fields.
#[derive(serde::Serialize)]
pub struct Timed<'a, S: serde::Serialize> {
    #[serde(flatten)]
    report: &'a S,
    wall_s: Wall,
}

/// `report` with its wall-time breakdown, for [`super::ui::report_json`].
pub fn timed<S: serde::Serialize>(report: &S, wall_s: Wall) -> Timed<'_, S> {
    Timed { report, wall_s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_follow_one_another_within_the_total() {
        let mut sw = Stopwatch::start();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let load = sw.lap();
        let compute = sw.lap();
        let w = sw.finish(Wall {
            load,
            compute,
            ..Default::default()
        });
        assert!(load >= 0.002 && compute >= 0.0);
        assert!(w.load + w.compute + w.write <= w.total);
        let json = serde_json::to_value(timed(&serde_json::json!({"x": 1}), w)).unwrap();
        assert_eq!(json["x"], 1);
        assert!(json["wall_s"]["total"].as_f64().unwrap() >= 0.002);
        assert!(json["wall_s"].get("device").is_none());
    }
}
