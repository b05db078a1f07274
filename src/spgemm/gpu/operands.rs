//! The operands on the device, shared by every batch of a product: A, B (or A again for a
//! square), the mask, and the products per row the batches are planned from.

use super::GpuEngine;
use crate::csr::CsrRef;
use crate::error::{Error, Result};
use crate::gpu::matrix::DeviceCsr;
use crate::gpu::prims::{exclusive_scan, launch, strided, zeros};
use crate::gpu::transfer::{download, upload};
use crate::scalar::Scalar;
use crate::spgemm::{row_products, Pattern};
use cudarc::driver::{CudaSlice, PushKernelArg};
use std::ops::Range;

/// The device copies of the operands, shared by all batches.
pub(super) struct Operands<T: Scalar> {
    pub(super) a: DeviceCsr<T>,
    /// `None` when B is A (a square is uploaded once).
    pub(super) b: Option<DeviceCsr<T>>,
    pub(super) m_ptr: CudaSlice<u64>,
    pub(super) m_col: CudaSlice<u32>,
    pub(super) has_mask: i32,
    pub(super) k_cols: u64,
    pub(super) c_cols: u64,
    /// Leave the dense rows out of C for the caller ([`DeferredRows`]) when a whole row fits
    /// one window of shared memory.
    pub(super) defer_dense: bool,
}

impl<T: Scalar> Operands<T> {
    pub(super) fn b(&self) -> &DeviceCsr<T> {
        self.b.as_ref().unwrap_or(&self.a)
    }

    /// Pushes A's and B's row offsets and columns, the first arguments of the row kernels'
    /// symbolic phases.
    pub(super) fn push_structure<'a>(&'a self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        l.arg(&self.a.row_ptr)
            .arg(&self.a.col_idx)
            .arg(&self.b().row_ptr)
            .arg(&self.b().col_idx);
    }

    /// Pushes A's and B's row offsets, columns and values, the first arguments of the row
    /// kernels' numeric phases.
    pub(super) fn push_operands<'a>(&'a self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        l.arg(&self.a.row_ptr)
            .arg(&self.a.col_idx)
            .arg(&self.a.values)
            .arg(&self.b().row_ptr)
            .arg(&self.b().col_idx)
            .arg(&self.b().values);
    }
}

impl GpuEngine {
    /// Uploads A, B (unless it is A) and the mask, when the device has room for them.
    pub(super) fn upload_operands<T: Scalar>(
        &self,
        a: CsrRef<'_, T>,
        b: CsrRef<'_, T>,
        mask: Option<&Pattern>,
    ) -> Result<Operands<T>> {
        let s = &self.gpu.main;
        let bytes = |m_nnz: usize, m_rows: usize, val: usize| {
            (m_rows as u64 + 1) * 8 + m_nnz as u64 * (4 + val as u64)
        };
        let val = std::mem::size_of::<T>();
        let need = bytes(a.nnz(), a.nrows(), val)
            + bytes(b.nnz(), b.nrows(), val)
            + mask.map_or(0, |m| bytes(m.nnz(), m.nrows(), 0));
        let (free, _) = self.gpu.memory()?;
        if need > free {
            return Err(Error::gpu(
                "upload the operands",
                format!(
                    "A and B need {:.2} GiB on the GPU but {:.2} GiB is free; use --engine cpu",
                    need as f64 / (1u64 << 30) as f64,
                    free as f64 / (1u64 << 30) as f64
                ),
            ));
        }
        let (m_ptr, m_col, has_mask) = match mask {
            Some(m) => (
                upload(&self.gpu, s, m.row_ptr, "the mask's row offsets")?,
                upload(&self.gpu, s, m.col_idx, "the mask's columns")?,
                1,
            ),
            None => (
                zeros(s, 1, "an empty mask")?,
                zeros(s, 1, "an empty mask")?,
                0,
            ),
        };
        let a_dev = DeviceCsr::upload(&self.gpu, a)?;
        // A square (the same matrix twice) is uploaded once.
        let b_dev = if a.same(&b) {
            None
        } else {
            Some(DeviceCsr::upload(&self.gpu, b)?)
        };
        Ok(Operands {
            a: a_dev,
            b: b_dev,
            m_ptr,
            m_col,
            has_mask,
            k_cols: a.ncols() as u64,
            c_cols: b.ncols() as u64,
            defer_dense: false,
        })
    }

    /// The prefix of the intermediate products of A·B's rows (`n + 1` values from 0), counted on
    /// the device: a copy on the host (to plan the batches) and the device's own (for the first
    /// batch).
    pub(super) fn device_products<T: Scalar>(
        &self,
        ops: &Operands<T>,
    ) -> Result<(Vec<u64>, CudaSlice<u64>)> {
        let g = &*self.gpu;
        let n = ops.a.nrows as u64;
        let prod = self.products_prefix(ops, 0, n)?;
        let host = download(g, &g.main, &prod, n as usize + 1, "products per row")?;
        Ok((host, prod))
    }

    /// The intermediate products of each row of `a` times a matrix whose rows hold
    /// `b_lengths` entries (its columns never read).
    pub fn products_per_row<T: Scalar>(
        &self,
        a: &DeviceCsr<T>,
        b_lengths: &[u32],
    ) -> Result<Vec<u64>> {
        let g = &*self.gpu;
        let s = &g.main;
        let n = a.nrows as u64;
        let mut b_ptr = Vec::with_capacity(b_lengths.len() + 1);
        b_ptr.push(0u64);
        let mut run = 0u64;
        b_ptr.extend(b_lengths.iter().map(|&l| {
            run += u64::from(l);
            run
        }));
        let b_ptr = upload(g, s, &b_ptr, "the row offsets products are counted with")?;
        let mut prod = zeros::<u64>(s, n as usize, "products per row")?;
        if n > 0 {
            launch(g, s, "row_products", strided(g, n, 256), |l| {
                l.arg(&a.row_ptr)
                    .arg(&a.col_idx)
                    .arg(&b_ptr)
                    .arg(&0u64)
                    .arg(&n)
                    .arg(&mut prod);
            })?;
        }
        download(g, s, &prod, n as usize, "products per row")
    }

    /// On the main stream: the prefix of the intermediate products of rows `row0..row0 + n`
    /// (`n + 1` values from 0; Ĉ's row offsets).
    pub(super) fn products_prefix<T: Scalar>(
        &self,
        ops: &Operands<T>,
        row0: u64,
        n: u64,
    ) -> Result<CudaSlice<u64>> {
        let g = &*self.gpu;
        let s = &g.main;
        let mut prod = zeros::<u64>(s, n as usize + 1, "products per row")?;
        if n > 0 {
            launch(g, s, "row_products", strided(g, n, 256), |l| {
                l.arg(&ops.a.row_ptr)
                    .arg(&ops.a.col_idx)
                    .arg(&ops.b().row_ptr)
                    .arg(&row0)
                    .arg(&n)
                    .arg(&mut prod);
            })?;
            exclusive_scan(g, s, &mut prod, n + 1, "products per row")?;
        }
        Ok(prod)
    }
}

/// Refuses products wider than the kernels' column indices allow.
pub(super) fn check_columns(ncols: usize) -> Result<()> {
    if ncols >= u32::MAX as usize / 2 {
        return Err(Error::Invalid(format!(
            "the GPU engine handles products of up to 2^31 columns; B has {ncols}"
        )));
    }
    Ok(())
}

/// The products per row of the rows asked for, as a prefix (host side, to plan batches).
pub(super) fn host_products<T: Scalar>(
    a: CsrRef<'_, T>,
    b: CsrRef<'_, T>,
    rows: &Range<usize>,
) -> Vec<u64> {
    let mut out = Vec::with_capacity(rows.len() + 1);
    out.push(0u64);
    let mut run = 0;
    for r in rows.clone() {
        run += row_products(a, b, r);
        out.push(run);
    }
    out
}
