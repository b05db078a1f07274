//! gmcl: Markov clustering and triangle counting on large power-law graphs.
//!
//! The library loads edge lists ([`io`]), builds CSR matrices ([`csr`]), generates R-MAT graphs
//! ([`generate`]), multiplies sparse matrices ([`spgemm`]) on the CPU or, through [`gpu`], on an
//! NVIDIA GPU, counts triangles ([`tricount`]) and clusters graphs with MCL ([`mcl`]).

#![warn(missing_docs)]

pub mod csr;
pub mod dist;
pub mod edges;
pub mod engine;
pub mod error;
pub mod generate;
pub mod gpu;
pub mod info;
pub mod interrupt;
pub mod io;
pub mod mcl;
pub mod measure;
mod mem;
pub mod output;
pub mod quantized;
pub mod scalar;
pub mod settings;
pub mod spgemm;
pub mod tempfiles;
pub mod tricount;

pub use csr::{BuildOptions, Csr, CsrRef, Duplicates};
pub use edges::EdgeList;
pub use error::{Error, Result};
pub use io::Labels;
pub use scalar::Scalar;
