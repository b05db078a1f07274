//! Setup of a batch (paper Alg. 3, lines 1-5): each row's intermediate products and their
//! prefix (Ĉ's row offsets), then the rows sorted into bins: hash tables by size, the heavy rows
//! (outer product) and the dense rows (dense-row accumulator).

use super::batch::Batch;
use super::operands::Operands;
use super::plan::{hash_bins, table_limits};
use super::GpuEngine;
use crate::error::Result;
use crate::gpu::prims::zeros;
use crate::gpu::profile::Profile;
use crate::scalar::Scalar;
use crate::spgemm::params::MagnusParams;
use cudarc::driver::CudaSlice;
use std::ops::Range;

impl GpuEngine {
    /// Counts and bins the rows of the batch `rows` on the main stream; `counted`, where given,
    /// holds the rows' products already (a prefix from 0 of at least `rows.len() + 1` values).
    pub(super) fn setup<T: Scalar>(
        &self,
        ops: &Operands<T>,
        p: &MagnusParams,
        rows: &Range<usize>,
        counted: Option<CudaSlice<u64>>,
        prof: &mut Profile,
    ) -> Result<Batch> {
        let g = &*self.gpu;
        let main = &g.main;
        let n = rows.len() as u64;
        let row0 = rows.start as u64;
        // Products per row and their prefix (Ĉ.rowPtr of the whole batch).
        let prod = match counted {
            Some(prod) => {
                debug_assert!(
                    prod.len() > n as usize,
                    "a prefix of every row of the batch"
                );
                prod
            }
            None => self.products_prefix(ops, row0, n)?,
        };
        // The hash bins of C's rows (all of them for the heavy rows' chunks).
        let all_bins = hash_bins(p.tau);
        let bins = self.row_bins(ops, p);
        // Rows past the hash tables: the outer product, or the dense-row bin (past dense_from).
        let mut limits = table_limits(&bins);
        // Then the dense rows: all in one bin, or the small ones and then the large ones.
        let mut dense = self.dense_rows(ops, p);
        if let Some(d) = &mut dense {
            self.split_dense::<T>(d, ops.c_cols)?;
            limits.push(d.from - 1);
            if d.small.is_some() {
                limits.push(d.small_top);
            }
        }
        let row_lists = self.bin_items(main, &prod, 0, n, &limits)?;
        let nheavy = row_lists.counts[bins.len()];
        let deferred = dense.as_ref().is_some_and(|d| d.deferred);
        let row_nnz = zeros::<u64>(main, n as usize + 1, "row sizes of C")?;
        prof.mark("setup: products, bins")?;
        Ok(Batch {
            row0,
            n,
            prod,
            bins,
            all_bins,
            row_lists,
            dense,
            nheavy,
            deferred,
            row_nnz,
        })
    }
}
