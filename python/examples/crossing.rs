//! The Rust side of `scripts/bench-python.py`: the library's own time for the jobs the Python
//! package's `tricount` and `spgemm` do, on the matrix the script saved as `.npz`, from a CSR
//! matrix already in memory (as the SciPy array is). Built in the Python crate's profile, so it
//! runs the very library build the extension runs:
//!
//! `cargo run --profile dev --manifest-path python/Cargo.toml --example crossing -- A.npz tricount|spgemm REPEAT ENGINE [B.npz]`
//!
//! (`spgemm` multiplies `A·B` when `B.npz` is given, else squares A.)
//!
//! One warm-up, then one JSON line per run on stdout: tricount's `check` (the CSR's
//! invariants, [`gmcl::CsrRef::new`]), `symmetric` (the simple-graph check,
//! [`SimpleGraph::from_symmetric`]), `count` (`Triangles::seconds`) and `total`; spgemm's
//! `product` (`ProductStats::seconds`) and `total`.

use gmcl::io::{self, MatrixOptions};
use gmcl::spgemm::{self, EngineKind, SpgemmOptions};
use gmcl::tricount::{self, SimpleGraph};
use gmcl::{BuildOptions, CsrRef, Error, Result};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("crossing: {e}");
        std::process::exit(e.exit_code());
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, job, repeat, engine, b_path) = match args.as_slice() {
        [p, j, r, e] => (p, j, r, e, None),
        [p, j, r, e, b] => (p, j, r, e, Some(b)),
        _ => {
            return Err(Error::Invalid(
                "usage: crossing A.npz tricount|spgemm REPEAT ENGINE [B.npz]".into(),
            ))
        }
    };
    let repeat: usize = repeat
        .parse()
        .map_err(|_| Error::Invalid(format!("bad repeat count '{repeat}'")))?;
    let engine: EngineKind = engine.parse()?;
    // The matrix as SciPy holds it: its entries as they are, nothing symmetrized or dropped.
    let opts = MatrixOptions {
        build: BuildOptions::default(),
        square: false,
        pattern: false,
    };
    let load = |p: &String| {
        io::load_matrix::<f64>(&PathBuf::from(p), None, &tricount::FOOTPRINT, &opts)
            .map(|l| l.matrix)
    };
    let a = load(path)?;
    let b = b_path.map(load).transpose()?;
    for run in 0..=repeat {
        let start = Instant::now();
        let line = match job.as_str() {
            "tricount" => {
                let v = CsrRef::new(a.nrows(), a.ncols(), a.row_ptr(), a.col_idx(), a.values())?;
                let check = start.elapsed().as_secs_f64();
                let g = SimpleGraph::from_symmetric(v)
                    .ok_or_else(|| Error::Invalid("the matrix is not a simple graph".into()))?;
                let symmetric = start.elapsed().as_secs_f64() - check;
                let t = tricount::count(
                    &g,
                    &tricount::Options {
                        engine,
                        ..Default::default()
                    },
                )?;
                format!(
                    "{{\"triangles\": {}, \"check\": {check}, \"symmetric\": {symmetric}, \"count\": {}, \"total\": {}}}",
                    t.triangles,
                    t.seconds,
                    start.elapsed().as_secs_f64()
                )
            }
            "spgemm" => {
                let b = b.as_ref().unwrap_or(&a);
                let (c, st) = spgemm::multiply(engine, &a, b, &SpgemmOptions::default())?;
                let total = start.elapsed().as_secs_f64();
                drop(c);
                format!(
                    "{{\"nnz\": {}, \"product\": {}, \"total\": {total}}}",
                    st.nnz, st.seconds
                )
            }
            other => return Err(Error::Invalid(format!("unknown job '{other}'"))),
        };
        if run > 0 {
            println!("{line}");
        }
    }
    Ok(())
}
