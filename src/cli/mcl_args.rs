//! mcl's spellings on gmcl's command line: a pass over the arguments before clap parses them.
//!
//! mcl users type single-dash long options (`-te 4`, `-scheme 7`, `-overlap split`) and
//! `--abc`. Left to clap, `-overlap` would be read as `-o verlap` and write a file named
//! `verlap`. This pass turns mcl's spellings of the options gmcl shares into gmcl's, refuses
//! mcl's options that gmcl lacks with a hint, and refuses any other single-dash word that is not
//! a cluster of gmcl's short options (so no word is ever read as `-o` plus a file name).

use clap::CommandFactory;
use gmcl::{Error, Result};
use std::ffi::OsString;

/// mcl's options that gmcl has under another name (mcl spelling, gmcl spelling). Each takes a
/// value, passed on unchanged.
const RENAMED: &[(&str, &str)] = &[
    ("-te", "--threads"),
    // Taken with the other pruning options (`Pruning`); here for the hint at `-scheme7`.
    ("-scheme", "--scheme"),
    ("-pct", "--pct"),
    ("-overlap", "--overlap"),
    ("-tf", "--tf"),
    ("-abc-tf", "--abc-tf"),
];

/// The hint for mcl's natural-log stream transform.
const NEG_LOG: &str = "give --abc-tf 'neglog()' (the same for positive weights) or --abc-neg-log10";

/// mcl's options gmcl lacks, with what to do instead.
const MISSING: &[(&str, &str)] = &[
    ("-odir", "write with -o FILE (or to stdout)"),
    ("--d", "write with -o FILE (or to stdout)"),
    ("-aa", "write with -o FILE (or to stdout)"),
    ("-ap", "write with -o FILE (or to stdout)"),
    ("-az", "write with -o FILE (or to stdout)"),
    ("-ax", "write with -o FILE (or to stdout)"),
    (
        "--sif",
        "gmcl reads .abc, .el, .wel, .mtx and SNAP text (--format)",
    ),
    (
        "--etc",
        "gmcl reads .abc, .el, .wel, .mtx and SNAP text (--format)",
    ),
    (
        "--expect-values",
        "gmcl reads .abc, .el, .wel, .mtx and SNAP text (--format)",
    ),
    ("-use-tab", "give the graph with its labels as .abc"),
    ("-p", "give the inverse as -P (mcl's -p 0.0001 is -P 10000)"),
    ("-analyze", "--json reports clm info's measures"),
    ("--analyze", "--json reports clm info's measures"),
    (
        "-sort",
        "clusters are written largest first, as mcl's default revsize",
    ),
    (
        "-discard-loops",
        "loops are always discarded, as mcl's default",
    ),
    (
        "--discard-loops",
        "loops are always discarded, as mcl's default",
    ),
    (
        "-v",
        "--quiet hides every notice; one line per iteration is printed otherwise",
    ),
    (
        "-how-much-ram",
        "the memory guard refuses a graph that cannot fit",
    ),
    ("--abc-neg-log", NEG_LOG),
    ("-abc-neg-log", NEG_LOG),
];

/// mcl's options gmcl lacks with no alternative worth naming: each is refused with a plain
/// "gmcl has no ..." message.
const UNSUPPORTED: &[&str] = &[
    "-icl",
    "-pi",
    "-if",
    "-sparse",
    "-digits",
    "--i3",
    "--write-binary",
    "-write-graph",
    "-write-graphx",
    "-write-expanded",
    "--write-limit",
    "-force-connected",
    "--force-connected",
    "-check-connected",
    "--check-connected",
    "-show-log",
    "--show-log",
    "-annot",
    "--show",
    "-dump",
    "-dump-stem",
    "-dump-interval",
    "-dump-modulo",
    "-warn-factor",
    "-warn-pct",
    "--show-schemes",
    "--jury-charter",
    "-z",
    "-l",
    "-i",
];

/// The short options gmcl knows, from clap's own definition: those that take a value and
/// those that do not (which may be clustered, as `-qh`).
struct Shorts {
    valued: Vec<char>,
    flags: Vec<char>,
    longs: Vec<String>,
    valued_longs: Vec<String>,
    flag_longs: Vec<String>,
}

impl Shorts {
    fn of(cmd: &clap::Command) -> Self {
        let mut s = Shorts {
            valued: Vec::new(),
            flags: vec!['h', 'V'],
            longs: Vec::new(),
            valued_longs: Vec::new(),
            flag_longs: Vec::new(),
        };
        s.collect(cmd);
        // A long option that is a flag somewhere (`cluster --json`) is not taken to carry a
        // value anywhere: the word after it is checked like any other.
        let flag_longs = s.flag_longs.clone();
        s.valued_longs.retain(|l| !flag_longs.contains(l));
        s
    }

    fn collect(&mut self, cmd: &clap::Command) {
        for arg in cmd.get_arguments() {
            if let Some(c) = arg.get_short() {
                if arg.get_action().takes_values() {
                    self.valued.push(c);
                } else {
                    self.flags.push(c);
                }
            }
            if let Some(l) = arg.get_long() {
                self.longs.push(l.to_string());
                if arg.get_action().takes_values() {
                    self.valued_longs.push(l.to_string());
                } else {
                    self.flag_longs.push(l.to_string());
                }
            }
        }
        for sub in cmd.get_subcommands() {
            self.collect(sub);
        }
    }
}

/// The arguments (the program name first) with mcl's spellings made gmcl's, or an error (exit
/// status 2) naming an option gmcl cannot take.
pub fn rewrite(args: impl IntoIterator<Item = OsString>) -> Result<Vec<OsString>> {
    rewrite_with(args, &Shorts::of(&super::Cli::command()))
}

/// An option that sets pruning values, in any of its spellings.
#[derive(Clone, Copy)]
enum PruneOption {
    Scheme,
    P,
    S,
    R,
    Pct,
}

/// The pruning options' spellings (mcl's and gmcl's; a short one may have its number
/// attached, a long one `=VALUE`).
const PRUNE_SPELLINGS: &[(&str, PruneOption)] = &[
    ("-scheme", PruneOption::Scheme),
    ("--scheme", PruneOption::Scheme),
    ("-P", PruneOption::P),
    ("--prune", PruneOption::P),
    ("-S", PruneOption::S),
    ("--select", PruneOption::S),
    ("-R", PruneOption::R),
    ("--recover", PruneOption::R),
    ("-pct", PruneOption::Pct),
    ("--pct", PruneOption::Pct),
];

/// The pruning option `s` names, with its value when attached (`-S5`, `--select=5`).
fn prune_option(s: &str) -> Option<(PruneOption, Option<&str>)> {
    PRUNE_SPELLINGS.iter().find_map(|&(name, which)| {
        let rest = s.strip_prefix(name)?;
        if rest.is_empty() {
            return Some((which, None));
        }
        let attached = rest.strip_prefix('=').unwrap_or(rest);
        let short = !name.starts_with("--") && name.len() == 2;
        (rest.starts_with('=') || (short && attached.parse::<f64>().is_ok()))
            .then_some((which, Some(attached)))
    })
}

/// The pruning values as mcl sets them: its options apply in order (`-scheme` sets P, S, R and
/// pct, undoing an earlier `-P`, `-S`, `-R` or `-pct`; `-resource N` sets S and R), and P is 10
/// times the first `-resource` unless a `-scheme` or a `-P` is given anywhere. Repeated options
/// take the last value, as mcl takes them.
#[derive(Default)]
struct Pruning {
    /// The last scheme given.
    scheme: Option<String>,
    /// The values given since it.
    since: Overrides,
    first_resource: Option<u64>,
    any_p: bool,
}

/// Values of P, S, R and pct given after the last scheme.
#[derive(Default)]
struct Overrides {
    p: Option<String>,
    s: Option<String>,
    r: Option<String>,
    pct: Option<String>,
}

impl Pruning {
    fn set(&mut self, which: PruneOption, value: &str) {
        let value = Some(value.to_string());
        match which {
            PruneOption::Scheme => {
                self.scheme = value;
                self.since = Overrides::default();
            }
            PruneOption::P => {
                self.any_p = true;
                self.since.p = value;
            }
            PruneOption::S => self.since.s = value,
            PruneOption::R => self.since.r = value,
            PruneOption::Pct => self.since.pct = value,
        }
    }

    fn resource(&mut self, n: u64) {
        self.since.s = Some(n.to_string());
        self.since.r = Some(n.to_string());
        self.first_resource.get_or_insert(n);
    }

    /// gmcl's options for the values (each at most once).
    fn arguments(mut self) -> Vec<OsString> {
        if let (Some(n), None, false) = (self.first_resource, &self.scheme, self.any_p) {
            self.since.p = Some((10 * n).to_string());
        }
        let mut out = Vec::new();
        let Overrides { p, s, r, pct } = self.since;
        for (name, value) in [
            ("--scheme", self.scheme),
            ("-P", p),
            ("-S", s),
            ("-R", r),
            ("--pct", pct),
        ] {
            if let Some(v) = value {
                out.extend([name.into(), v.into()]);
            }
        }
        out
    }
}

fn rewrite_with(
    args: impl IntoIterator<Item = OsString>,
    shorts: &Shorts,
) -> Result<Vec<OsString>> {
    let args: Vec<OsString> = args.into_iter().collect();
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut iter = args.iter().enumerate();
    // The program name, then the arguments.
    if let Some((_, prog)) = iter.next() {
        out.push(prog.clone());
    }
    let mut value_next = false;
    let mut pruning = Pruning::default();
    while let Some((i, arg)) = iter.next() {
        let Some(s) = arg.to_str() else {
            out.push(arg.clone());
            value_next = false;
            continue;
        };
        if s == "--" {
            out.extend(std::mem::take(&mut pruning).arguments());
            out.extend(args[i..].iter().cloned());
            return Ok(out);
        }
        if value_next {
            // The value of the previous option, whatever it looks like (`-I -1`, `-o -`).
            value_next = false;
            out.push(arg.clone());
            continue;
        }
        if let Some((which, attached)) = prune_option(s) {
            let value = match attached {
                Some(v) => v,
                None => iter
                    .next()
                    .and_then(|(_, v)| v.to_str())
                    .ok_or_else(|| Error::Invalid(format!("{s} needs a number")))?,
            };
            pruning.set(which, value);
            continue;
        }
        if let Some(&(_, gmcl)) = RENAMED.iter().find(|(m, _)| *m == s) {
            out.push(gmcl.into());
            value_next = true;
            continue;
        }
        let name = s.split('=').next().unwrap_or(s);
        match s {
            "-abc-neg-log10" => {
                out.push("--abc-neg-log10".into());
                continue;
            }
            "--abc" => {
                let format_given = args.iter().any(|a| {
                    a.to_str()
                        .is_some_and(|a| a == "--format" || a.starts_with("--format="))
                });
                if format_given {
                    return Err(Error::Invalid(
                        "--abc is mcl's spelling of --format abc: give one of them".into(),
                    ));
                }
                out.extend(["--format".into(), "abc".into()]);
                continue;
            }
            // `gmcl -V` is the version; after a command it can only be mcl's `-V TAG`.
            "-V" if i > 1 => {
                return Err(Error::Invalid(
                    "-V: gmcl has no mcl option -V (mcl's log levels): --quiet hides every \
                     notice; gmcl -V alone prints gmcl's version"
                        .into(),
                ))
            }
            "--version" if i > 1 => {
                return Err(Error::Invalid(
                    "--version is an option of gmcl itself: gmcl --version".into(),
                ))
            }
            // mcl's `-q SPEC` sets log levels (`-q x` silences mcl); gmcl's `-q` takes no value.
            "-q" | "--quiet"
                if args
                    .get(i + 1)
                    .and_then(|a| a.to_str())
                    .is_some_and(|w| is_log_spec(w) && !std::path::Path::new(w).exists()) =>
            {
                return Err(Error::Invalid(format!(
                    "{s} {}: gmcl's {s} takes no value (mcl's -q SPEC sets its log levels): \
                     give {s} alone, which hides every notice",
                    args[i + 1].to_string_lossy()
                )))
            }
            "-resource" => {
                let n = iter.next().and_then(|(_, v)| v.to_str()).ok_or_else(|| {
                    Error::Invalid("-resource needs a number (mcl's -resource N)".into())
                })?;
                let n: u32 = n.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                    Error::Invalid(format!("-resource {n}: expected a whole number from 1"))
                })?;
                pruning.resource(u64::from(n));
                continue;
            }
            _ => {}
        }
        if let Some((m, hint)) = MISSING.iter().find(|(m, _)| *m == name) {
            return Err(Error::Invalid(format!(
                "{s}: gmcl has no mcl option {m}: {hint}"
            )));
        }
        if UNSUPPORTED.contains(&name) {
            return Err(Error::Invalid(format!(
                "{s}: gmcl has no mcl option {name} (see gmcl cluster --help)"
            )));
        }
        if let Some(word) = s
            .strip_prefix('-')
            .filter(|w| !w.is_empty() && !w.starts_with('-') && w.parse::<f64>().is_err())
        {
            value_next = check_short_cluster(s, word, shorts)?;
        } else if s.starts_with("--") && !s.contains('=') {
            // A long option of gmcl that takes a value: its value comes next.
            value_next = shorts.valued_longs.iter().any(|l| *l == s[2..]);
        }
        out.push(arg.clone());
    }
    out.extend(pruning.arguments());
    Ok(out)
}

/// Whether `w` looks like mcl's log-level spec (`x`, `x9`, `2`, `+mcl`) rather than a file.
fn is_log_spec(w: &str) -> bool {
    let levels = !w.is_empty() && w.len() <= 4 && w.chars().all(|c| c == 'x' || c.is_ascii_digit());
    levels || (w.starts_with('+') && w.len() > 1)
}

/// Checks `-word` (a single dash, not a number) is a cluster of gmcl's short options: flags,
/// optionally ending in one that takes a value, given attached only as a number (`-I1.4`).
/// Returns whether the next argument is that option's value.
fn check_short_cluster(s: &str, word: &str, shorts: &Shorts) -> Result<bool> {
    for (k, c) in word.char_indices() {
        if shorts.flags.contains(&c) {
            continue;
        }
        if shorts.valued.contains(&c) {
            let rest = &word[k + c.len_utf8()..];
            if rest.is_empty() {
                return Ok(true);
            }
            if rest.trim_start_matches('=').parse::<f64>().is_ok() {
                return Ok(false);
            }
        }
        let attached = RENAMED.iter().find_map(|(mcl, _)| {
            let value = word.strip_prefix(&mcl[1..])?;
            value
                .parse::<f64>()
                .is_ok()
                .then(|| format!("{mcl} {value}"))
        });
        let first = word.chars().next().unwrap_or('?');
        // `-I1,4`: a valued option with what looks meant as its value attached.
        let value_like = word[first.len_utf8()..]
            .starts_with(|c: char| c.is_ascii_digit() || matches!(c, '.' | '=' | '-' | '+'));
        let hint = if shorts.longs.iter().any(|l| l == word) {
            format!(": gmcl's long options take two dashes (--{word})")
        } else if let Some(spelled) = attached {
            format!(": give the value as the next word ({spelled}), as mcl takes it")
        } else if shorts.valued.contains(&first) && value_like {
            format!(": not an option of gmcl or an mcl option gmcl knows (gmcl <command> --help lists them; give an attached value as -{first} VALUE)")
        } else {
            ": not an option of gmcl or an mcl option gmcl knows (gmcl <command> --help lists them)"
                .to_string()
        };
        return Err(Error::Invalid(format!("unknown option {s}{hint}")));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &str) -> Result<Vec<String>> {
        let args = std::iter::once("gmcl")
            .chain(args.split(' '))
            .map(OsString::from);
        rewrite(args).map(|v| {
            v.into_iter()
                .skip(1)
                .map(|a| a.into_string().unwrap())
                .collect()
        })
    }

    fn ok(args: &str) -> String {
        run(args).unwrap().join(" ")
    }

    fn err(args: &str) -> String {
        run(args).unwrap_err().to_string()
    }

    #[test]
    fn refusals_hint_only_at_what_was_meant() {
        let e = err("cluster h.abc -te2");
        assert!(e.contains("give the value as the next word (-te 2)"), "{e}");
        let e = err("cluster h.abc -scheme7");
        assert!(e.contains("(-scheme 7)"), "{e}");
        let e = err("cluster h.abc -I1,4");
        assert!(e.contains("give an attached value as -I VALUE"), "{e}");
        for word in ["-t", "-ph", "-xyz"] {
            let e = err(&format!("cluster h.abc {word} 2"));
            assert!(
                e.contains(&format!("unknown option {word}")) && !e.contains("VALUE"),
                "{e}"
            );
        }
    }

    #[test]
    fn mcl_spellings_become_gmcls() {
        assert_eq!(
            ok("cluster g.abc -te 2 -scheme 4 -pct 80 -overlap split -I 1.4 -o -"),
            "cluster g.abc --threads 2 --overlap split -I 1.4 -o - --scheme 4 --pct 80"
        );
        assert_eq!(ok("cluster g.abc --abc"), "cluster g.abc --format abc");
        assert_eq!(
            ok("cluster g.abc -resource 50"),
            "cluster g.abc -P 500 -S 50 -R 50"
        );
        assert_eq!(
            ok("cluster g.abc -P 99 -resource 50"),
            "cluster g.abc -P 99 -S 50 -R 50"
        );
    }

    #[test]
    fn mcls_log_level_after_quiet_is_named() {
        let e = err("cluster g.abc -q x");
        assert!(e.contains("-q x: gmcl's -q takes no value"), "{e}");
        assert!(err("cluster g.abc --quiet +mcl").contains("takes no value"));
        assert!(err("cluster g.abc --version").contains("gmcl --version"));
        // A file after -q is the input.
        assert_eq!(ok("cluster -q g.abc"), "cluster -q g.abc");
    }

    #[test]
    fn pruning_options_apply_in_order_as_in_mcl() {
        // Each case's P S R pct as `mcl -z` shows them (mcl 22-282), the scheme's where not
        // given here.
        for (line, want) in [
            ("-scheme 2 -resource 5", "--scheme 2 -S 5 -R 5"),
            ("-resource 5 -scheme 2", "--scheme 2"),
            ("-resource 5 -P 77", "-P 77 -S 5 -R 5"),
            ("-P 77 -resource 5", "-P 77 -S 5 -R 5"),
            ("-S 9 -resource 5", "-P 50 -S 5 -R 5"),
            ("-resource 5 -S 9", "-P 50 -S 9 -R 5"),
            ("-scheme 2 -S 9", "--scheme 2 -S 9"),
            ("-S 9 -scheme 2", "--scheme 2"),
            ("-P 77 -scheme 2", "--scheme 2"),
            ("-scheme 2 -pct 50", "--scheme 2 --pct 50"),
            ("-resource 5 -resource 8", "-P 50 -S 8 -R 8"),
            ("-resource 8 -resource 5", "-P 80 -S 5 -R 5"),
            ("-resource 5 -scheme 2 -resource 8", "--scheme 2 -S 8 -R 8"),
            ("-P 77 -scheme 2 -resource 5", "--scheme 2 -S 5 -R 5"),
            ("-scheme 2 -scheme 5", "--scheme 5"),
            ("-S5 --select=7 -R 3", "-S 7 -R 3"),
            ("--scheme=3 --prune 10", "--scheme 3 -P 10"),
        ] {
            assert_eq!(
                ok(&format!("cluster g.abc {line}")),
                format!("cluster g.abc {want}"),
                "{line}"
            );
        }
        // Before `--`, which ends the options.
        assert_eq!(ok("cluster -S 5 -- g.abc"), "cluster -S 5 -- g.abc");
        assert!(err("cluster g.abc -S").contains("-S needs a number"));
    }

    #[test]
    fn gmcls_own_spellings_pass_unchanged() {
        // The pruning options go last, once each (see `Pruning`).
        assert_eq!(
            ok("cluster g.el -I 1.4 -c -1 -P 4000 -o out.txt --json r.json"),
            "cluster g.el -I 1.4 -c -1 -o out.txt --json r.json -P 4000"
        );
        assert_eq!(
            ok("cluster g.el -I1.4 -P4000 -q"),
            "cluster g.el -I1.4 -q -P 4000"
        );
        for a in [
            "generate -s 10 -e 4 -a 0.5 -o g.el",
            "cluster g.el -o - --overlap keep",
            "cluster g.el -I -1",
            "cluster g.el -- -overlap",
            "tricount g.el --per-vertex -",
        ] {
            assert_eq!(ok(a), a);
        }
    }

    #[test]
    fn no_word_becomes_a_short_option_with_a_value() {
        assert!(err("cluster g.abc -overlapp split").contains("unknown option -overlapp"));
        assert!(err("cluster g.abc -ofile").contains("unknown option -ofile"));
        assert!(err("cluster g.abc -engine cpu").contains("(--engine)"));
        assert!(err("cluster g.abc -Ix").contains("unknown option -Ix"));
        // `--json` is a flag of cluster (a file of bench's): the word after it is checked.
        assert!(err("cluster g.abc --json -overlapp x").contains("unknown option"));
    }

    #[test]
    fn mcl_options_gmcl_lacks_get_a_hint() {
        assert!(err("cluster g.abc -odir x").contains("-o FILE"));
        assert!(err("cluster g.abc -p 0.001").contains("-P 10000"));
        assert!(err("cluster g.abc --discard-loops=n").contains("always discarded"));
        assert!(err("cluster g.abc -write-graph x").contains("no mcl option -write-graph"));
        assert!(err("cluster g.abc --abc-neg-log").contains("neglog()"));
        assert!(err("cluster g.abc -V all").contains("--quiet"));
        assert!(err("cluster g.abc --abc --format el").contains("give one of them"));
        assert_eq!(ok("-V"), "-V");
    }

    #[test]
    fn mcls_transforms_become_gmcls() {
        assert_eq!(
            ok("cluster g.abc -tf gq(2),mul(3) -abc-tf abs() -abc-neg-log10"),
            "cluster g.abc --tf gq(2),mul(3) --abc-tf abs() --abc-neg-log10"
        );
        assert_eq!(
            ok("cluster g.abc --abc-neg-log10 -I 3"),
            "cluster g.abc --abc-neg-log10 -I 3"
        );
    }
}
