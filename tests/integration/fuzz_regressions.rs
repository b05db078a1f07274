//! Replays every input a fuzz target (`fuzz/`, cargo-fuzz on nightly) crashed on, through the
//! same checks the targets run (`fuzz/src/checks.rs`, included here by path), on stable.
//! `tests/fuzz-regressions/TARGET/NAME` holds the input exactly as libFuzzer saved it.

#[path = "../../fuzz/src/checks.rs"]
#[allow(dead_code)]
mod checks;

use gmcl::io::Format;
use std::path::Path;

/// Runs the check of `target` on `bytes`; panics as the fuzz target would.
fn replay(target: &str, bytes: &[u8]) {
    let format = match target {
        "parse_el" => Format::El,
        "parse_wel" => Format::Wel,
        "parse_snap" => Format::Snap,
        "parse_mtx" => Format::Mtx,
        "parse_abc" => Format::Abc,
        "csr_build" => {
            // As libfuzzer-sys decodes a typed input; inputs it cannot decode are skipped.
            let u = arbitrary::Unstructured::new(bytes);
            if let Ok(input) = <checks::BuildInput as arbitrary::Arbitrary>::arbitrary_take_rest(u)
            {
                checks::build(input);
            }
            return;
        }
        other => panic!("tests/fuzz-regressions/{other}: no such fuzz target"),
    };
    checks::parse(bytes, format);
}

#[test]
fn every_saved_fuzz_input_passes() {
    let root = Path::new("tests/fuzz-regressions");
    let mut failures = Vec::new();
    let mut replayed = 0;
    for target in std::fs::read_dir(root).expect("tests/fuzz-regressions exists") {
        let target = target.unwrap();
        if !target.path().is_dir() {
            continue;
        }
        let name = target.file_name().to_string_lossy().into_owned();
        for input in std::fs::read_dir(target.path()).unwrap() {
            let path = input.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            replayed += 1;
            if std::panic::catch_unwind(|| replay(&name, &bytes)).is_err() {
                failures.push(path.display().to_string());
            }
        }
    }
    assert!(
        replayed > 0,
        "no saved fuzz inputs found under {}",
        root.display()
    );
    assert!(failures.is_empty(), "failing inputs: {failures:?}");
}
