//! Sparse matrix-matrix multiplication: the engine boundary.
//!
//! [`multiply`] computes `C = A·B` (pass the same matrix twice for `A²`) with the engine the
//! caller picks. Every engine gives the same result:
//!
//! - **Structure.** `C` has an entry `(i, j)` exactly when some intermediate product
//!   `A[i,k]·B[k,j]` exists, that is when row `i` of `A` and column `j` of `B` share a stored index
//!   `k`. The structure depends on the stored entries only, never on their values: an entry whose
//!   products cancel to `0.0` is *kept* as an explicit zero (GraphBLAS does the same). With a
//!   mask, only the entries the mask also has are kept.
//! - **Order.** Rows of `C` are sorted by column.
//! - **Values.** Each entry is `0 + p₁ + p₂ + …` where the products `p` come in the order of `k`
//!   in row `i` of `A`. The order never depends on the thread count, so results are bitwise
//!   identical whatever the number of threads.
//!
//! Offsets and product counts are 64-bit: on real graphs both pass 2³¹.

pub mod cpu;
pub(crate) use cpu::prefetch;
pub mod gpu;
pub mod params;
pub mod repeat;

use crate::csr::{Csr, CsrRef};
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::time::Instant;

/// What a product allocates per vertex of its inputs (row offsets of A, B and C, per-row product
/// counts and plans) and per input edge (the CSR's columns and `f64` values, the build's copy);
/// C itself is sized by the product and reserved fallibly.
pub const FOOTPRINT: crate::io::limits::Footprint = crate::io::limits::Footprint {
    command: "spgemm",
    per_vertex: 40,
    per_edge: 32,
};

/// Which engine computes a product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// The multithreaded CPU engine ([`cpu`]).
    Cpu,
    /// The GPU engine (gMAGNUS).
    Gpu,
    /// The GPU engine when a GPU is usable, the CPU engine otherwise.
    #[default]
    Auto,
}

impl EngineKind {
    /// The name used on the command line and in reports: "cpu", "gpu" or "auto".
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Cpu => "cpu",
            EngineKind::Gpu => "gpu",
            EngineKind::Auto => "auto",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(EngineKind::Cpu),
            "gpu" => Ok(EngineKind::Gpu),
            "auto" => Ok(EngineKind::Auto),
            _ => Err(Error::Invalid(format!(
                "unknown engine '{s}': expected cpu, gpu or auto"
            ))),
        }
    }
}

/// The structure of a sparse matrix without its values: what a mask needs.
#[derive(Clone, Copy, Debug)]
pub struct Pattern<'a> {
    nrows: usize,
    ncols: usize,
    row_ptr: &'a [u64],
    col_idx: &'a [u32],
}

impl<'a> Pattern<'a> {
    /// The structure of `m` (its values are ignored; stored zeros count as entries).
    pub fn of<T: Scalar>(m: impl Into<CsrRef<'a, T>>) -> Self {
        let m = m.into();
        Pattern {
            nrows: m.nrows(),
            ncols: m.ncols(),
            row_ptr: m.row_ptr(),
            col_idx: m.col_idx(),
        }
    }
    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }
    /// The sorted columns of row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> &'a [u32] {
        &self.col_idx[self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize]
    }
}

/// What to compute of `C = A·B`.
#[derive(Clone, Debug, Default)]
pub struct SpgemmOptions<'a> {
    /// Keep only the entries `(i, j)` of `C` that this pattern has (for triangle counting: `A`
    /// masked by itself). The mask has the shape of the whole `C` (`A.nrows × B.ncols`), also
    /// when `rows` asks for a batch: rows of the batch are masked by the same rows of the mask.
    pub mask: Option<Pattern<'a>>,
    /// Compute only these rows of `C` (a row batch). The result then has `rows.len()` rows
    /// (its row 0 is row `rows.start` of `C`) and all of `C`'s columns.
    pub rows: Option<Range<usize>>,
    /// How the GPU engine runs the product (the CPU engine ignores it).
    pub gpu: gpu::GpuTuning,
}

/// Figures about one product.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProductStats {
    /// Number of intermediate products `A[i,k]·B[k,j]` of the rows computed (before any mask).
    pub intermediate_products: u64,
    /// Entries in the result.
    pub nnz: u64,
    /// Wall time of the multiplication (both phases, allocation of the result included; on the
    /// GPU also the copies of the operands to the device and of the result back).
    pub seconds: f64,
    /// Of `seconds`, the time of the product itself with operands and result in the engine's
    /// memory: on the GPU, setup through numeric, allocation of C included, transfers excluded
    /// (what the gMAGNUS paper times); on the CPU, equal to `seconds`.
    pub device_seconds: f64,
}

impl ProductStats {
    /// Floating-point operations: one multiply and one add per intermediate product.
    pub fn flops(&self) -> u64 {
        2 * self.intermediate_products
    }
    /// Billions of floating-point operations per second (0 when no time was measured).
    pub fn gflops(&self) -> f64 {
        crate::measure::gflops(self.intermediate_products, self.seconds)
    }
}

/// The error of `A·B` whose shapes do not fit: `same` when B is A itself (a square asked of a
/// matrix that is not square).
pub(crate) fn shapes_differ(a: (usize, usize), b: (usize, usize), same: bool) -> Error {
    Error::Invalid(match same {
        true => format!(
            "cannot square A: A·A needs a square matrix, and A is {} x {} (give B for A·B)",
            a.0, a.1
        ),
        false => format!(
            "cannot multiply: A is {} x {} but B is {} x {} (A's columns must equal B's rows)",
            a.0, a.1, b.0, b.1
        ),
    })
}

/// Checks that `A·B` can be formed with these options; returns the rows of `A` to compute.
pub(crate) fn check_operands<T: Scalar>(
    a: CsrRef<'_, T>,
    b: CsrRef<'_, T>,
    opts: &SpgemmOptions,
) -> Result<Range<usize>> {
    if a.ncols() != b.nrows() {
        let same = std::ptr::eq(a.row_ptr().as_ptr(), b.row_ptr().as_ptr());
        return Err(shapes_differ(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            same,
        ));
    }
    let rows = opts.rows.clone().unwrap_or(0..a.nrows());
    if rows.start > rows.end || rows.end > a.nrows() {
        return Err(Error::Invalid(format!(
            "row batch {}..{} is not within the {} rows of A",
            rows.start,
            rows.end,
            a.nrows()
        )));
    }
    if let Some(m) = &opts.mask {
        if m.nrows() != a.nrows() || m.ncols() != b.ncols() {
            return Err(Error::Invalid(format!(
                "the mask is {} x {} but the product A·B is {} x {}",
                m.nrows(),
                m.ncols(),
                a.nrows(),
                b.ncols()
            )));
        }
    }
    Ok(rows)
}

/// The number of intermediate products of each row of `A·B`: for row `i`, the sum over the
/// columns `k` of row `i` of `A` of the length of row `k` of `B`.
pub fn intermediate_products_per_row<'x, T: Scalar>(
    a: impl Into<CsrRef<'x, T>>,
    b: impl Into<CsrRef<'x, T>>,
) -> Result<Vec<u64>> {
    let (a, b) = (a.into(), b.into());
    check_operands(a, b, &SpgemmOptions::default())?;
    Ok((0..a.nrows())
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| row_products(a, b, i))
        .collect())
}

/// The total number of intermediate products of `A·B` (half its flop count).
pub fn intermediate_products<'x, T: Scalar>(
    a: impl Into<CsrRef<'x, T>>,
    b: impl Into<CsrRef<'x, T>>,
) -> Result<u64> {
    let (a, b) = (a.into(), b.into());
    check_operands(a, b, &SpgemmOptions::default())?;
    Ok((0..a.nrows())
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| row_products(a, b, i))
        .sum())
}

/// Intermediate products of row `i` (shapes already checked).
#[inline]
pub(crate) fn row_products<T: Scalar>(a: CsrRef<'_, T>, b: CsrRef<'_, T>, i: usize) -> u64 {
    let bp = b.row_ptr();
    a.row(i)
        .0
        .iter()
        .map(|&k| bp[k as usize + 1] - bp[k as usize])
        .sum()
}

/// The engine that `kind` runs on this machine: `Auto` becomes `Gpu` when a GPU is usable and
/// `Cpu` otherwise, with the reason the GPU is not usable (for a notice). `Cpu` and `Gpu` stay
/// as asked (a `Gpu` without a GPU then fails when it runs, saying why).
pub fn resolve(kind: EngineKind) -> (EngineKind, Option<String>) {
    match kind {
        EngineKind::Auto => match crate::gpu::unavailable_reason() {
            None => (EngineKind::Gpu, None),
            Some(why) => (EngineKind::Cpu, Some(why)),
        },
        other => (other, None),
    }
}

/// Computes `C = A·B` (or the rows and entries `opts` asks for) with the chosen engine.
///
/// `Gpu` runs gMAGNUS ([`gpu::GpuEngine`]) and fails with [`Error::EngineUnavailable`] where no
/// GPU is usable; `Auto` runs the GPU engine when a GPU is usable and the CPU engine otherwise
/// (see [`resolve`]). Mismatched shapes, a bad row batch or a mask of the wrong shape fail with
/// [`Error::Invalid`].
pub fn multiply<'x, T: Scalar>(
    engine: EngineKind,
    a: impl Into<CsrRef<'x, T>>,
    b: impl Into<CsrRef<'x, T>>,
    opts: &SpgemmOptions,
) -> Result<(Csr<T>, ProductStats)> {
    match resolve(engine).0 {
        EngineKind::Gpu | EngineKind::Auto => gpu::GpuEngine::open()?
            .with_tuning(opts.gpu.clone())
            .multiply(a, b, opts),
        EngineKind::Cpu => {
            let start = Instant::now();
            let (c, products) = cpu::CpuEngine::default().multiply_counted(a, b, opts)?;
            let stats = ProductStats {
                intermediate_products: products,
                nnz: c.nnz() as u64,
                seconds: start.elapsed().as_secs_f64(),
                device_seconds: start.elapsed().as_secs_f64(),
            };
            Ok((c, stats))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(r: usize, c: usize, d: &[f64]) -> Csr<f64> {
        Csr::from_dense(r, c, d)
    }

    #[test]
    fn engine_names_round_trip() {
        for e in [EngineKind::Cpu, EngineKind::Gpu, EngineKind::Auto] {
            assert_eq!(e.to_string().parse::<EngineKind>().unwrap(), e);
        }
        assert_eq!(" CPU ".parse::<EngineKind>().unwrap(), EngineKind::Cpu);
        let err = "tpu".parse::<EngineKind>().unwrap_err().to_string();
        assert!(err.contains("unknown engine 'tpu'"), "{err}");
    }

    #[test]
    fn mismatched_shapes_are_refused() {
        let a = Csr::<f64>::empty(3, 4);
        let b = Csr::<f64>::empty(5, 2);
        let err = multiply(EngineKind::Cpu, &a, &b, &SpgemmOptions::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "cannot multiply: A is 3 x 4 but B is 5 x 2 (A's columns must equal B's rows)"
        );
        assert!(intermediate_products(&a, &b).is_err());
        assert!(intermediate_products_per_row(&a, &b).is_err());
        // A square asked of a matrix that is not square is named so.
        let err = multiply(EngineKind::Cpu, &a, &a, &SpgemmOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot square A: A·A needs a square matrix, and A is 3 x 4"));
    }

    #[test]
    fn gpu_runs_or_says_why_and_auto_always_runs() {
        let a = m(2, 2, &[1.0, 2.0, 0.0, 3.0]);
        match crate::gpu::unavailable_reason() {
            Some(_) => {
                let e = multiply(EngineKind::Gpu, &a, &a, &SpgemmOptions::default()).unwrap_err();
                assert!(matches!(e, Error::EngineUnavailable(_)));
                assert_eq!(e.exit_code(), 3);
                assert_eq!(resolve(EngineKind::Auto).0, EngineKind::Cpu);
            }
            None => {
                let (c, _) = multiply(EngineKind::Gpu, &a, &a, &SpgemmOptions::default()).unwrap();
                assert_eq!(c.to_dense(), vec![1.0, 8.0, 0.0, 9.0]);
                assert_eq!(resolve(EngineKind::Auto).0, EngineKind::Gpu);
            }
        }
        let (c, st) = multiply(EngineKind::Auto, &a, &a, &SpgemmOptions::default()).unwrap();
        assert_eq!(c.to_dense(), vec![1.0, 8.0, 0.0, 9.0]);
        assert_eq!(st.intermediate_products, 4);
        assert_eq!(st.nnz, 3);
        assert_eq!(st.flops(), 8);
    }

    #[test]
    fn product_counts() {
        let a = m(3, 2, &[1.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        let b = m(2, 3, &[1.0, 1.0, 1.0, 0.0, 1.0, 0.0]);
        assert_eq!(
            intermediate_products_per_row(&a, &b).unwrap(),
            vec![4, 0, 1]
        );
        assert_eq!(intermediate_products(&a, &b).unwrap(), 5);
    }

    #[test]
    fn bad_batches_and_masks_are_refused() {
        let a = m(2, 2, &[1.0, 2.0, 0.0, 3.0]);
        let opts = SpgemmOptions {
            rows: Some(1..3),
            ..Default::default()
        };
        assert!(multiply(EngineKind::Cpu, &a, &a, &opts).is_err());
        let wrong = Csr::<f64>::empty(2, 3);
        let opts = SpgemmOptions {
            mask: Some(Pattern::of(&wrong)),
            ..Default::default()
        };
        let err = multiply(EngineKind::Cpu, &a, &a, &opts)
            .unwrap_err()
            .to_string();
        assert!(err.contains("mask is 2 x 3"), "{err}");
    }
}
