//! The CSR builder on arbitrary edges, shapes and options, against a reference build.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: gmcl_fuzz::checks::BuildInput| {
    gmcl_fuzz::checks::build(input);
});
