//! mcl's weight transforms (`-tf`, `-abc-tf`, `--abc-neg-log10`), as mcl 22-282 applies them.
//!
//! A spec is a comma-separated list of steps `name(value)` or `name()`, applied to each weight
//! in turn: `gq(0.3),mul(2)`. The steps and their arithmetic are mcl's value transforms; a
//! result of 0 removes the edge, and once a threshold step (`gq gt lq lt`) gives 0 the later
//! steps are skipped, as in mcl. mcl's graph transforms (`#knn(5)`, `#arcmax` ...) are refused,
//! and so are results MCL cannot use in gmcl: negative or not finite weights.
//!
//! The arithmetic is mcl's to the bit (src/impala/ivp.c `mclpUnary`, pval.c): a step's
//! argument is kept as a `float`, each step takes the weight as a `float` and computes in
//! `double`, and the result is stored as a `float`, so `0.7` (a float) times 3 is `2.1` as a
//! float and passes `gq(2.1)`. `--abc-neg-log10` works on the weight as read, in `double`
//! (`-log(w) / log(10)`, mcl's stream reader), before the other steps. The logarithm of 0 is
//! mcl's stand-in for infinity (`-FLT_MAX`, and `FLT_MAX / log(10)` for `--abc-neg-log10`),
//! which a later `ceil` can cap, as BLAST e-values of 0 are.

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

/// mcl's value for the logarithm of 0: `-FLT_MAX`.
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
            let (arg, after) = rest
                .split_once(')')
                .ok_or_else(|| bad(part, "expected a closing ')'"))?;
            if !after.trim().is_empty() {
                return Err(bad(
                    part,
                    &format!(
                        "'{}' follows the ')': steps are separated by ','",
                        after.trim()
                    ),
                ));
            }
            let arg = arg.trim();
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
            // mcl keeps the argument as a float.
            if value.is_some_and(|v| (v as f32).is_infinite()) {
                return Err(bad(
                    part,
                    "the value is past 3.4e38, the largest of mcl's 32-bit values",
                ));
            }
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
            // The weight and the argument as mcl holds them: floats.
            let x = v as f32 as f64;
            let arg = |a: f64| a as f32 as f64;
            v = match *step {
                Step::Gq(a) => keep(x >= arg(a), x),
                Step::Gt(a) => keep(x > arg(a), x),
                Step::Lq(a) => keep(x <= arg(a), x),
                Step::Lt(a) => keep(x < arg(a), x),
                Step::Mul(a) => x * arg(a),
                Step::Scale(a) => {
                    if arg(a) != 0.0 {
                        x / arg(a)
                    } else {
                        0.0
                    }
                }
                Step::Add(a) => x + arg(a),
                Step::Abs => x.abs(),
                Step::Ceil(a) => x.min(arg(a)),
                Step::Floor(a) => x.max(arg(a)),
                Step::Pow(a) => x.powf(arg(a)),
                Step::Exp(b) => {
                    if arg(b) == 0.0 {
                        x.exp()
                    } else {
                        arg(b).powf(x)
                    }
                }
                Step::Log(b) => log(x, arg(b)),
                Step::NegLog(b) => -log(x, arg(b)),
                Step::Acos => x.clamp(-1.0, 1.0).acos(),
                // On the weight as read, in double: mcl's stream reader.
                Step::NegLog10 if v > 0.0 => -v.ln() / 10f64.ln(),
                Step::NegLog10 => f32::MAX as f64 / 10f64.ln(),
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
/// `-FLT_MAX` (mcl's stand-in for minus infinity) for 0.
fn log(v: f64, b: f64) -> f64 {
    if v > 0.0 && b > 0.0 {
        v.ln() / b.ln()
    } else if v > 0.0 && b == 0.0 {
        v.ln()
    } else if v == 0.0 {
        LOG_OF_ZERO
    } else {
        0.0
    }
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
        let e = err("gq(2);mul(3)");
        assert!(
            e.contains("at 'gq(2);mul(3)': ';mul(3)' follows the ')': steps are separated by ','"),
            "{e}"
        );
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
        // The weight as a float: 0.001f32 is 0.0010000000475.
        let Outcome::Weight(v) = out("neglog(10)", 0.001) else {
            panic!()
        };
        assert_eq!(v, -(0.001f32 as f64).ln() / (10f64).ln());
        // A negative weight's log is 0 in mcl: the edge goes.
        assert_eq!(out("log(10)", -2.0), Outcome::Removed);
        assert_eq!(out("log(-2)", 8.0), Outcome::Removed);
        // Only a threshold's 0 ends the steps: mul(0) then add(1) gives 1.
        assert_eq!(out("mul(0),add(1)", 5.0), Outcome::Weight(1.0));
        assert_eq!(out("gq(9),add(1)", 5.0), Outcome::Removed);
    }

    #[test]
    fn arithmetic_is_mcls_floats() {
        // 0.7 as a float, times 3 in double, stored as a float: 2.1 as a float, which passes
        // gq(2.1) (its argument a float too); in double throughout it would not.
        assert_eq!(out("mul(3),gq(2.1)", 0.7), Outcome::Weight(2.1f32 as f64));
        assert_eq!(out("mul(3),lt(2.1)", 0.7), Outcome::Removed);
        // --abc-neg-log10 on the weight as read, in double, then as a float: 1e-3 gives 3.
        let t = Transform::parse("gq(3)").unwrap();
        let mut both = Transform::neg_log10();
        both.steps.extend(t.steps);
        assert_eq!(both.apply(1e-3).unwrap(), Outcome::Weight(3.0));
        // An e-value of 0 is mcl's stand-in, FLT_MAX / log(10), which ceil(200) caps.
        let Ok(Outcome::Weight(v)) = Transform::neg_log10().apply(0.0) else {
            panic!()
        };
        assert_eq!(v, f32::MAX as f64 / 10f64.ln());
        let mut capped = Transform::neg_log10();
        capped.steps.push(Step::Ceil(200.0));
        assert_eq!(capped.apply(0.0).unwrap(), Outcome::Weight(200.0));
    }

    #[test]
    fn results_mcl_cannot_use_in_gmcl_are_refused() {
        let t = Transform::parse("add(-2)").unwrap();
        assert!(t.apply(1.0).unwrap_err().to_string().contains("negative"));
        // mcl's log of 0 is -FLT_MAX: a negative weight.
        let t = Transform::parse("log(10)").unwrap();
        assert!(t.apply(0.0).unwrap_err().to_string().contains("negative"));
        let t = Transform::neg_log10();
        let Ok(Outcome::Weight(v)) = t.apply(0.01) else {
            panic!()
        };
        assert!((v - 2.0).abs() < 1e-12);
        let t = Transform::parse("exp()").unwrap();
        assert!(t.apply(1000.0).unwrap_err().to_string().contains("finite"));
        // A result finite in f64, infinite in mcl's f32: named so, the number readable.
        let t = Transform::parse("mul(1e30)").unwrap();
        let e = t.apply(1e20).unwrap_err().to_string();
        assert!(
            e.contains("makes weight 100000000000000000000 1.0000000"),
            "{e}"
        );
        assert!(e.contains("past 3.4e38"), "{e}");
        // An argument past a float's range is refused as it is read.
        assert!(err("mul(1e40)").contains("at 'mul(1e40)': the value is past 3.4e38"));
    }
}
