//! The checks the fuzz targets run, shared with `tests/integration/fuzz_regressions.rs` (which
//! includes `checks.rs` by path, so that the regression tests need neither nightly nor
//! libFuzzer).

pub mod checks;
