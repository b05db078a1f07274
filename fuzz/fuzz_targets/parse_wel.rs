//! The .wel parser on arbitrary bytes (first byte: chunk size).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gmcl_fuzz::checks::parse(data, gmcl::io::Format::Wel);
});
