//! The cases of `gmcl bench spgemm`: the gMAGNUS paper's R-MAT products, symmetric squares, and
//! files given, and how each is built.

use gmcl::csr::{BuildOptions, Csr, Duplicates};
use gmcl::error::{Error, Result};
use gmcl::generate::{generate, RmatParams};
use gmcl::scalar::Scalar;
use std::path::PathBuf;

/// A set of generated cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    /// The paper's R-MAT pairs: A with 4, 8, 16, 32 nonzeros per row times B with 8.
    RmatPaper,
    /// A² of a symmetric R-MAT matrix, edge factors 8 and 16.
    Sym,
    /// No generated case (files only).
    None,
}

impl Suite {
    /// "rmat-paper", "sym", "none".
    pub fn name(self) -> &'static str {
        match self {
            Suite::RmatPaper => "rmat-paper",
            Suite::Sym => "sym",
            Suite::None => "none",
        }
    }
}

/// Nonzeros per row of A in the `rmat-paper` suite.
pub const PAPER_A_PER_ROW: [u32; 4] = [4, 8, 16, 32];
/// Nonzeros per row of B in the `rmat-paper` suite.
pub const PAPER_B_PER_ROW: u32 = 8;
/// First scale of the `rmat-paper` suite.
pub const PAPER_MIN_SCALE: u32 = 15;
/// Edge factors of the `sym` suite.
pub const SYM_EDGE_FACTORS: [u32; 2] = [8, 16];
/// First scale of the `sym` suite.
pub const SYM_MIN_SCALE: u32 = 14;
/// Seed of B in every R-MAT pair (A's seed is its nonzeros per row, so pairs differ).
const B_SEED: u64 = 1000;
/// Seed of the symmetric matrices.
const SYM_SEED: u64 = 7;

/// Where a case's operands come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// R-MAT A (`a_per_row × 2^scale` edges) times R-MAT B (`b_per_row × 2^scale`), both
    /// `2^scale` square, values in [0.5, 1.5), duplicates summed.
    RmatPair {
        /// log2 of the size.
        scale: u32,
        /// Edges per row of A.
        a_per_row: u32,
        /// Edges per row of B.
        b_per_row: u32,
    },
    /// A² for one R-MAT matrix with `edge_factor × 2^scale` edges made symmetric (A + Aᵀ).
    Sym {
        /// log2 of the size.
        scale: u32,
        /// Edges per vertex before symmetrising.
        edge_factor: u32,
    },
    /// A² of a matrix file (entries as listed, duplicates summed).
    File(PathBuf),
}

/// One product to benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseSpec {
    /// "s15 A4·B8", "sym s16 ef8", or the file name.
    pub name: String,
    /// The suite ("rmat-paper", "sym", "file").
    pub suite: &'static str,
    /// Where the operands come from.
    pub source: Source,
}

impl CaseSpec {
    /// The scale of a generated case.
    pub fn scale(&self) -> Option<u32> {
        match self.source {
            Source::RmatPair { scale, .. } | Source::Sym { scale, .. } => Some(scale),
            Source::File(_) => None,
        }
    }

    /// The density of a generated case: A's nonzeros per row (rmat-paper) or the edge factor
    /// (sym).
    pub fn density(&self) -> Option<u32> {
        match self.source {
            Source::RmatPair { a_per_row, .. } => Some(a_per_row),
            Source::Sym { edge_factor, .. } => Some(edge_factor),
            Source::File(_) => None,
        }
    }

    /// The R-MAT pair case.
    pub fn rmat_pair(scale: u32, a_per_row: u32, b_per_row: u32) -> Self {
        CaseSpec {
            name: format!("s{scale} A{a_per_row}·B{b_per_row}"),
            suite: Suite::RmatPaper.name(),
            source: Source::RmatPair {
                scale,
                a_per_row,
                b_per_row,
            },
        }
    }

    /// The symmetric-square case.
    pub fn sym(scale: u32, edge_factor: u32) -> Self {
        CaseSpec {
            name: format!("sym s{scale} ef{edge_factor}"),
            suite: Suite::Sym.name(),
            source: Source::Sym { scale, edge_factor },
        }
    }

    /// A² of a file.
    pub fn file(path: PathBuf) -> Self {
        CaseSpec {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
            suite: "file",
            source: Source::File(path),
        }
    }
}

/// The cases of a suite up to `max_scale`, grouped by density then scale.
pub fn suite_cases(suite: Suite, max_scale: u32) -> Vec<CaseSpec> {
    match suite {
        Suite::RmatPaper => PAPER_A_PER_ROW
            .iter()
            .flat_map(|&a| {
                (PAPER_MIN_SCALE..=max_scale)
                    .map(move |s| CaseSpec::rmat_pair(s, a, PAPER_B_PER_ROW))
            })
            .collect(),
        Suite::Sym => SYM_EDGE_FACTORS
            .iter()
            .flat_map(|&ef| (SYM_MIN_SCALE..=max_scale).map(move |s| CaseSpec::sym(s, ef)))
            .collect(),
        Suite::None => Vec::new(),
    }
}

/// The largest scale worth running when none is given, from the device memory: the R-MAT
/// products roughly triple per scale, and a product, its reference copy and cuSPARSE's buffers
/// must fit. Without a GPU (the CPU engine only), 15.
pub fn default_max_scale(device_memory: Option<u64>) -> u32 {
    const GIB: u64 = 1 << 30;
    match device_memory {
        None => 15,
        Some(m) if m >= 120 * GIB => 19,
        Some(m) if m >= 60 * GIB => 18,
        Some(m) if m >= 30 * GIB => 17,
        Some(m) if m >= 12 * GIB => 16,
        Some(_) => 15,
    }
}

fn rmat<T: Scalar>(scale: u32, per_row: u32, seed: u64, symmetrize: bool) -> Result<Csr<T>> {
    if scale > 31 {
        return Err(Error::Invalid(format!(
            "scale {scale} is too large (at most 31)"
        )));
    }
    let mut p = RmatParams::new(scale, (per_row as u64) << scale);
    p.weights = true;
    p.seed = seed;
    let el = generate(&p)?;
    Csr::from_edges(
        &el,
        &BuildOptions {
            symmetrize,
            drop_self_loops: false,
            duplicates: Duplicates::Sum,
        },
    )
}

/// Builds the operands of a case: A, and B when it is not A itself.
pub fn build_case<T: Scalar>(spec: &CaseSpec) -> Result<(Csr<T>, Option<Csr<T>>)> {
    match &spec.source {
        Source::RmatPair {
            scale,
            a_per_row,
            b_per_row,
        } => {
            let a = rmat(*scale, *a_per_row, *a_per_row as u64, false)?;
            let b = rmat(*scale, *b_per_row, B_SEED + *b_per_row as u64, false)?;
            Ok((a, Some(b)))
        }
        Source::Sym { scale, edge_factor } => {
            Ok((rmat(*scale, *edge_factor, SYM_SEED, true)?, None))
        }
        Source::File(path) => {
            let loaded = gmcl::io::load_as::<T>(path, None, &gmcl::spgemm::FOOTPRINT)?;
            let a: Csr<T> = Csr::from_edges(
                &loaded.edges,
                &BuildOptions {
                    symmetrize: false,
                    drop_self_loops: false,
                    duplicates: Duplicates::Sum,
                },
            )
            .map_err(|e| match e {
                Error::Invalid(message) => Error::Input {
                    path: path.clone(),
                    message,
                },
                other => other,
            })?;
            if a.nrows() != a.ncols() {
                return Err(Error::Input {
                    path: path.clone(),
                    message: format!(
                        "the benchmark squares each file, but this matrix is {} x {}",
                        a.nrows(),
                        a.ncols()
                    ),
                });
            }
            Ok((a, None))
        }
    }
}
