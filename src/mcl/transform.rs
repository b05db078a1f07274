//! mcl's weight transforms (`-tf`, `-abc-tf`, `--abc-neg-log10`), as mcl 22-282 applies them.
//!
//! A spec is a comma-separated list of steps `name(value)` or `name()`, applied to each weight
//! in turn: `gq(0.3),mul(2)`. The steps and their arithmetic are mcl's value transforms; a
//! result of 0 removes the edge, and once a threshold step (`gq gt lq lt`) gives 0 the later
//! steps are skipped, as in mcl. mcl's graph transforms (`#knn(5)`, `#arcmax` ...) are refused,
//! and so are results MCL cannot use in gmcl: negative or not finite weights, and the stand-in
//! for infinity mcl gives the logarithm of 0.

use crate::error::{Error, Result};

/// One step of a transform: mcl's value transform and its argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// `gq(x)`: keep weights `>= x`.
    Gq(f64),
    /// `gt(x)`: keep weights `> x`.
    Gt(f64),
    /// `lq(x)`: keep weights `<= x`.
    Lq(f64),
    /// `lt(x)`: keep weights `< x`.
    Lt(f64),
    /// `mul(x)`: multiply by `x`.
    Mul(f64),
    /// `scale(x)`: divide by `x` (0 when `x` is 0).
    Scale(f64),
    /// `add(x)`: add `x`.
    Add(f64),
    /// `abs()`: the absolute value.
    Abs,
    /// `ceil(x)`: at most `x` (mcl's ceil caps, it does not round).
    Ceil(f64),
    /// `floor(x)`: at least `x`.
    Floor(f64),
    /// `pow(x)`: the weight to the power `x`.
    Pow(f64),
    /// `exp(b)`: `b` to the power of the weight (`e` for `exp()` or `exp(0)`).
    Exp(f64),
    /// `log(b)`: the logarithm in base `b` (natural for `log()` or `log(0)`).
    Log(f64),
    /// `neglog(b)`: minus the logarithm in base `b`.
    NegLog(f64),
    /// `acos()`: the arc cosine of the weight clamped to [-1, 1].
    Acos,
    /// `--abc-neg-log10`: minus the base-10 logarithm.
    NegLog10,
}

/// A parsed transform: its steps in order and the text it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Transform {
    /// The steps, applied left to right.
    pub steps: Vec<Step>,
    /// The spec as given (for messages and reports).
    pub spec: String,
}

/// What a transform did to one weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// The edge stays with this weight.
    Weight(f64),
    /// The edge is removed (mcl drops entries that become 0).
    Removed,
}

/// The value transforms gmcl takes, by mcl's names.
const VALUE_TRANSFORMS: &[&str] = &[
    "gq", "gt", "lq", "lt", "mul", "scale", "add", "abs", "ceil", "floor", "pow", "exp", "log",
    "neglog", "acos",
];

/// mcl's value for the logarithm of 0 (`-FLT_MAX`), which gmcl refuses.
const LOG_OF_ZERO: f64 = -(f32::MAX as f64);

impl Transform {
    /// Parses mcl's transform language; an error names the part that does not parse.
    pub fn parse(spec: &str) -> Result<Transform> {
        let bad = |part: &str, why: &str| {
            Error::Invalid(format!("transform '{spec}' at '{}': {why}", part.trim()))
        };
        let mut steps = Vec::new();
        if spec.trim().is_empty() {
            return Ok(Transform {
                steps,
                spec: spec.to_string(),
            });
        }
        for part in spec.split(',') {
            let p = part.trim();
            let bare = p.trim_start_matches(['#', '@']);
            let bare = bare.split('(').next().unwrap_or(bare).trim();
            if p.starts_with(['#', '@']) && VALUE_TRANSFORMS.contains(&bare) {
                return Err(bad(
                    part,
                    &format!("mcl 22-282 spells its value transforms without '#': {bare}(value) or {bare}()"),
                ));
            }
            let (name, rest) = p
                .split_once('(')
                .ok_or_else(|| bad(part, "expected name(value) or name()"))?;
            let name = name.trim();
            let arg = rest
                .strip_suffix(')')
                .ok_or_else(|| bad(part, "expected a closing ')'"))?
                .trim();
            if name.starts_with('#') || name.starts_with('@') {
                return Err(bad(
                    part,
                    &format!(
                        "mcl's graph transforms are not supported by gmcl (only value transforms: {})",
                        VALUE_TRANSFORMS.join(" ")
                    ),
                ));
            }
            let value = if arg.is_empty() {
                None
            } else {
                Some(
                    arg.parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| bad(part, "expected a finite number"))?,
                )
            };
            let needs = |v: Option<f64>| v.ok_or_else(|| bad(part, "this transform needs a value"));
            let or_zero = value.unwrap_or(0.0);
            let step = match name {
                "gq" => Step::Gq(needs(value)?),
                "gt" => Step::Gt(needs(value)?),
                "lq" => Step::Lq(needs(value)?),
                "lt" => Step::Lt(needs(value)?),
                "mul" => Step::Mul(needs(value)?),
                "scale" => Step::Scale(needs(value)?),
                "add" => Step::Add(needs(value)?),
                "ceil" => Step::Ceil(needs(value)?),
                "floor" => Step::Floor(needs(value)?),
                "pow" => Step::Pow(needs(value)?),
                "abs" => Step::Abs,
                "acos" => Step::Acos,
                "exp" => Step::Exp(or_zero),
                "log" => Step::Log(or_zero),
                "neglog" => Step::NegLog(or_zero),
                "rand" => return Err(bad(part, "rand() is random: gmcl does not take it")),
                _ => return Err(bad(part, "unknown transform")),
            };
            steps.push(step);
        }
        Ok(Transform {
            steps,
            spec: spec.to_string(),
        })
    }

    /// mcl's `--abc-neg-log10`: minus the base-10 logarithm of each weight.
    pub fn neg_log10() -> Transform {
        Transform {
            steps: vec![Step::NegLog10],
            spec: "--abc-neg-log10".into(),
        }
    }

    /// The transform of one weight, or an error saying why MCL cannot use the result.
    pub fn apply(&self, w: f64) -> Result<Outcome> {
        let mut v = w;
        for step in &self.steps {
            v = match *step {
                Step::Gq(x) => keep(v >= x, v),
                Step::Gt(x) => keep(v > x, v),
                Step::Lq(x) => keep(v <= x, v),
                Step::Lt(x) => keep(v < x, v),
                Step::Mul(x) => v * x,
                Step::Scale(x) => {
                    if x != 0.0 {
                        v / x
                    } else {
                        0.0
                    }
                }
                Step::Add(x) => v + x,
                Step::Abs => v.abs(),
                Step::Ceil(x) => v.min(x),
                Step::Floor(x) => v.max(x),
                Step::Pow(x) => v.powf(x),
                Step::Exp(b) => {
                    if b == 0.0 {
                        v.exp()
                    } else {
                        b.powf(v)
                    }
                }
                Step::Log(b) => log(v, b)?,
                Step::NegLog(b) => -log(v, b)?,
                Step::Acos => v.clamp(-1.0, 1.0).acos(),
                Step::NegLog10 if v <= 0.0 => return Err(stand_in(v)),
                Step::NegLog10 => -log(v, 10.0)?,
            };
            let threshold = matches!(step, Step::Gq(_) | Step::Gt(_) | Step::Lq(_) | Step::Lt(_));
            if threshold && v == 0.0 {
                return Ok(Outcome::Removed);
            }
        }
        // mcl keeps weights as f32: one that rounds to 0 there is gone too.
        if v as f32 == 0.0 {
            return Ok(Outcome::Removed);
        }
        if !v.is_finite() {
            return Err(Error::Invalid(format!(
                "transform '{}' makes weight {w} {v}: MCL needs finite weights",
                self.spec
            )));
        }
        if v as f32 == f32::INFINITY {
            return Err(Error::Invalid(format!(
                "transform '{}' makes weight {w} {v:e}, past 3.4e38: a transform works in mcl's \
                 32-bit weights (whatever --precision), where that weight is infinite",
                self.spec
            )));
        }
        if v < 0.0 {
            return Err(Error::Invalid(format!(
                "transform '{}' makes weight {w} negative ({v}): mcl would keep it (and warn of a negative sum), gmcl's MCL needs weights that are not negative",
                self.spec
            )));
        }
        Ok(Outcome::Weight(v))
    }
}

fn keep(yes: bool, v: f64) -> f64 {
    if yes {
        v
    } else {
        0.0
    }
}

/// mcl's logarithm: in base `b` (natural for 0), 0 for a negative weight or base, and
/// `-FLT_MAX` for 0, which gmcl refuses rather than cluster with a stand-in for infinity.
fn log(v: f64, b: f64) -> Result<f64> {
    if v > 0.0 && b > 0.0 {
        Ok(v.ln() / b.ln())
    } else if v > 0.0 && b == 0.0 {
        Ok(v.ln())
    } else if v == 0.0 {
        Err(stand_in(v))
    } else {
        Ok(0.0)
    }
}

/// The refusal of a logarithm mcl makes its stand-in for infinity.
fn stand_in(v: f64) -> Error {
    Error::Invalid(format!(
        "the logarithm of weight {v} is mcl's stand-in for infinity ({LOG_OF_ZERO:e}): gmcl does not cluster with it (drop the edge first, e.g. with gt(0))"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(spec: &str) -> Vec<Step> {
        Transform::parse(spec).unwrap().steps
    }

    fn err(spec: &str) -> String {
        Transform::parse(spec).unwrap_err().to_string()
    }

    fn out(spec: &str, w: f64) -> Outcome {
        Transform::parse(spec).unwrap().apply(w).unwrap()
    }

    #[test]
    fn parses_mcls_value_transforms() {
        assert_eq!(steps("gq(0.3),mul(2)"), vec![Step::Gq(0.3), Step::Mul(2.0)]);
        assert_eq!(
            steps(" log(10) , neglog() ,abs( ),exp()"),
            vec![
                Step::Log(10.0),
                Step::NegLog(0.0),
                Step::Abs,
                Step::Exp(0.0)
            ]
        );
        assert_eq!(
            steps("ceil(5),floor(1e-3)"),
            vec![Step::Ceil(5.0), Step::Floor(1e-3)]
        );
        assert!(steps("  ").is_empty());
    }

    #[test]
    fn bad_specs_name_the_part() {
        assert!(err("gq(0.3),foo(2)").contains("at 'foo(2)': unknown transform"));
        assert!(err("#log").contains("at '#log': mcl 22-282 spells"));
        assert!(err("#neglog(10)").contains("neglog(value)"));
        assert!(err("#knn(5)").contains("graph transforms"));
        assert!(err("ceil()").contains("at 'ceil()': this transform needs a value"));
        assert!(err("gq(x)").contains("at 'gq(x)': expected a finite number"));
        assert!(err("gq(1").contains("closing"));
        assert!(err("gq(1),").contains("at '': expected"));
        assert!(err("rand(0.5)").contains("random"));
    }

    #[test]
    fn steps_compute_as_mcl() {
        assert_eq!(out("gq(1)", 1.0), Outcome::Weight(1.0));
        assert_eq!(out("gt(1)", 1.0), Outcome::Removed);
        assert_eq!(out("lq(5)", 10.0), Outcome::Removed);
        assert_eq!(out("lt(5)", 4.0), Outcome::Weight(4.0));
        assert_eq!(out("gq(0.3),mul(2)", 0.5), Outcome::Weight(1.0));
        assert_eq!(out("ceil(5)", 10.0), Outcome::Weight(5.0));
        assert_eq!(out("floor(2)", 0.5), Outcome::Weight(2.0));
        assert_eq!(out("pow(2)", 3.0), Outcome::Weight(9.0));
        assert_eq!(out("exp(2)", 3.0), Outcome::Weight(8.0));
        assert_eq!(out("scale(4)", 2.0), Outcome::Weight(0.5));
        assert_eq!(out("abs()", -3.0), Outcome::Weight(3.0));
        assert_eq!(out("abs()", 0.0), Outcome::Removed);
        let Outcome::Weight(v) = out("log(10)", 1000.0) else {
            panic!()
        };
        assert!((v - 3.0).abs() < 1e-12);
        let Outcome::Weight(v) = out("neglog(10)", 0.001) else {
            panic!()
        };
        assert!((v - 3.0).abs() < 1e-12);
        // A negative weight's log is 0 in mcl: the edge goes.
        assert_eq!(out("log(10)", -2.0), Outcome::Removed);
        assert_eq!(out("log(-2)", 8.0), Outcome::Removed);
        // Only a threshold's 0 ends the steps: mul(0) then add(1) gives 1.
        assert_eq!(out("mul(0),add(1)", 5.0), Outcome::Weight(1.0));
        assert_eq!(out("gq(9),add(1)", 5.0), Outcome::Removed);
    }

    #[test]
    fn results_mcl_cannot_use_in_gmcl_are_refused() {
        let t = Transform::parse("add(-2)").unwrap();
        assert!(t.apply(1.0).unwrap_err().to_string().contains("negative"));
        let t = Transform::parse("log(10)").unwrap();
        assert!(t.apply(0.0).unwrap_err().to_string().contains("stand-in"));
        let t = Transform::neg_log10();
        assert!(t.apply(0.0).unwrap_err().to_string().contains("stand-in"));
        assert!(t.apply(-1.0).unwrap_err().to_string().contains("stand-in"));
        let Ok(Outcome::Weight(v)) = t.apply(0.01) else {
            panic!()
        };
        assert!((v - 2.0).abs() < 1e-12);
        let t = Transform::parse("exp()").unwrap();
        assert!(t.apply(1000.0).unwrap_err().to_string().contains("finite"));
        // Finite in f64, infinite in mcl's f32: named so, the number readable.
        let t = Transform::parse("mul(1e40)").unwrap();
        let e = t.apply(1.0).unwrap_err().to_string();
        assert!(e.contains("makes weight 1 1e40, past 3.4e38"), "{e}");
    }
}
