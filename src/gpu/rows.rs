//! Device matrices made of rows from several places (the blocks of a distributed run): room
//! for a matrix laid out by the host, rows gathered into it or into a buffer to send, a copy of
//! some rows, and which columns some rows name. Nothing here knows where the rows go.

use super::matrix::DeviceCsr;
use super::prims::{check, launch, strided, uninit, zeros};
use super::transfer::{download, upload};
use super::Gpu;
use crate::error::Result;
use crate::scalar::Scalar;
use cudarc::driver::{CudaSlice, CudaViewMut, PushKernelArg};
use std::ops::Range;

impl<T: Scalar> DeviceCsr<T> {
    /// Copies the row offsets to the host.
    pub(crate) fn row_offsets(&self, gpu: &Gpu) -> Result<Vec<u64>> {
        let s = &gpu.main;
        download(
            gpu,
            s,
            &self.row_ptr,
            self.nrows + 1,
            "a matrix's row offsets",
        )
    }

    /// A matrix of `ncols` columns with the row offsets `row_ptr` (from 0) and room for its
    /// entries, not yet written (poisoned with `poison`): for callers that fill it from several
    /// places.
    pub(crate) fn with_offsets(
        gpu: &Gpu,
        ncols: usize,
        row_ptr: &[u64],
        poison: bool,
    ) -> Result<Self> {
        let s = &gpu.main;
        let nnz = row_ptr.last().copied().unwrap_or(0);
        Ok(DeviceCsr {
            nrows: row_ptr.len().saturating_sub(1),
            ncols,
            nnz,
            row_ptr: upload(gpu, s, row_ptr, "a matrix's row offsets")?,
            col_idx: uninit(s, nnz as usize, poison, "a matrix's columns")?,
            values: uninit(s, nnz as usize, poison, "a matrix's values")?,
        })
    }

    /// Copies the entries `entries` (positions in the arrays) into `dst`'s arrays from `to` on.
    pub(crate) fn copy_entries_into(
        &self,
        gpu: &Gpu,
        entries: Range<usize>,
        dst: &mut DeviceCsr<T>,
        to: usize,
    ) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let s = &gpu.main;
        let there = to..to + entries.len();
        check(
            "copy a matrix's columns",
            s.memcpy_dtod(
                &self.col_idx.slice(entries.clone()),
                &mut dst.col_idx.slice_mut(there.clone()),
            ),
        )?;
        check(
            "copy a matrix's values",
            s.memcpy_dtod(
                &self.values.slice(entries),
                &mut dst.values.slice_mut(there),
            ),
        )
    }

    /// Rows `rows` as a matrix of their own; `entries` is where they lie in the arrays (the
    /// caller's copy of the row offsets says).
    pub(crate) fn row_slice(
        &self,
        gpu: &Gpu,
        rows: Range<usize>,
        entries: Range<u64>,
    ) -> Result<Self> {
        let s = &gpu.main;
        let nnz = entries.end - entries.start;
        let mut part = DeviceCsr {
            nrows: rows.len(),
            ncols: self.ncols,
            nnz,
            row_ptr: zeros::<u64>(s, rows.len() + 1, "a matrix's row offsets")?,
            col_idx: uninit(s, nnz as usize, false, "a matrix's columns")?,
            values: uninit(s, nnz as usize, false, "a matrix's values")?,
        };
        // Offsets less the entries before the rows (u64 arithmetic wraps on the device too).
        let n = rows.len() as u64 + 1;
        let shift = entries.start.wrapping_neg();
        let src = self.row_ptr.slice(rows.start..rows.end + 1);
        launch(gpu, s, "add_offset_u64", strided(gpu, n, 256), |l| {
            l.arg(&src).arg(&n).arg(&shift).arg(&mut part.row_ptr);
        })?;
        let span = entries.start as usize..entries.end as usize;
        self.copy_entries_into(gpu, span, &mut part, 0)?;
        Ok(part)
    }

    /// The rows `rows` (indices into this matrix) one after another, `at` their offsets
    /// (`rows.len() + 1` values from 0): their columns and values, in new buffers (poisoned
    /// before they are written with `poison`).
    pub(crate) fn gather_rows(
        &self,
        gpu: &Gpu,
        rows: &[u32],
        at: &[u64],
        poison: bool,
    ) -> Result<(CudaSlice<u32>, CudaSlice<T>)> {
        let s = &gpu.main;
        let nnz = at.last().copied().unwrap_or(0) as usize;
        let mut cols = uninit::<u32>(s, nnz, poison, "the rows to send")?;
        let mut vals = uninit::<T>(s, nnz, poison, "the rows' values to send")?;
        self.gather_rows_into(
            gpu,
            rows,
            at,
            &mut cols.slice_mut(..),
            &mut vals.slice_mut(..),
        )?;
        Ok((cols, vals))
    }

    /// [`Self::gather_rows`] into `cols` and `vals` (which hold at least the rows' entries).
    pub(crate) fn gather_rows_into(
        &self,
        gpu: &Gpu,
        rows: &[u32],
        at: &[u64],
        cols: &mut CudaViewMut<'_, u32>,
        vals: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let s = &gpu.main;
        let n = rows.len() as u64;
        let d_rows = upload(gpu, s, rows, "the rows to gather")?;
        let d_at = upload(gpu, s, at, "where the gathered rows go")?;
        let name = format!("gather_rows_{}", T::NAME);
        launch(gpu, s, &name, strided(gpu, n * 32, 256), |l| {
            l.arg(&self.row_ptr)
                .arg(&self.col_idx)
                .arg(&self.values)
                .arg(&d_rows)
                .arg(&n)
                .arg(&d_at)
                .arg(cols)
                .arg(vals);
        })
    }

    /// Which columns the entries `entries` (positions in the arrays) name: a byte per column,
    /// 1 where named.
    pub(crate) fn columns_named(&self, gpu: &Gpu, entries: Range<u64>) -> Result<Vec<u8>> {
        let s = &gpu.main;
        let mut flags = zeros::<u8>(s, self.ncols, "the columns named")?;
        if !entries.is_empty() {
            let (lo, hi) = (entries.start, entries.end);
            launch(gpu, s, "flag_columns", strided(gpu, hi - lo, 256), |l| {
                l.arg(&self.col_idx).arg(&lo).arg(&hi).arg(&mut flags);
            })?;
        }
        download(gpu, s, &flags, self.ncols, "the columns named")
    }
}
