//! A CSR matrix kept in device memory (the host container is [`Csr`]): what the GPU engine
//! hands out when a caller keeps its products on the device, and what device-resident MCL
//! iterates on.

use super::prims::{check, launch, strided, zeros};
use super::transfer::{download, download_append, upload};
use super::Gpu;
use crate::csr::{Csr, CsrRef};
use crate::error::Result;
use crate::scalar::Scalar;
use cudarc::driver::{CudaSlice, PushKernelArg};

/// The arrays of a CSR matrix on the host, filled a row batch at a time
/// ([`DeviceCsr::append_to`]).
pub(crate) struct HostRows<T> {
    pub(crate) row_ptr: Vec<u64>,
    pub(crate) col_idx: Vec<u32>,
    pub(crate) values: Vec<T>,
}

impl<T> HostRows<T> {
    /// No rows yet: room for `nrows` rows' offsets.
    pub(crate) fn new(nrows: usize) -> Result<Self> {
        let mut row_ptr = crate::mem::try_with_capacity(nrows + 1, "a matrix's row offsets")?;
        row_ptr.push(0);
        Ok(HostRows {
            row_ptr,
            col_idx: Vec::new(),
            values: Vec::new(),
        })
    }
}

/// A CSR matrix in device memory: u64 row offsets (`nrows + 1`, the first 0), u32 columns and
/// values of type `T`. Buffers hold at least one element, so an empty matrix is valid too.
pub struct DeviceCsr<T: Scalar> {
    pub(crate) nrows: usize,
    pub(crate) ncols: usize,
    pub(crate) nnz: u64,
    pub(crate) row_ptr: CudaSlice<u64>,
    pub(crate) col_idx: CudaSlice<u32>,
    pub(crate) values: CudaSlice<T>,
}

impl<T: Scalar> DeviceCsr<T> {
    /// Copies `m` to the device.
    pub fn upload<'a>(gpu: &Gpu, m: impl Into<CsrRef<'a, T>>) -> Result<Self> {
        let (m, s) = (m.into(), &gpu.main);
        Ok(DeviceCsr {
            nrows: m.nrows(),
            ncols: m.ncols(),
            nnz: m.nnz() as u64,
            row_ptr: upload(gpu, s, m.row_ptr(), "a matrix's row offsets")?,
            col_idx: upload(gpu, s, m.col_idx(), "a matrix's columns")?,
            values: upload(gpu, s, m.values(), "a matrix's values")?,
        })
    }

    /// Copies the matrix to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<Csr<T>> {
        let s = &gpu.main;
        let n = self.nnz as usize;
        let row_ptr = download(
            gpu,
            s,
            &self.row_ptr,
            self.nrows + 1,
            "a matrix's row offsets",
        )?;
        let col_idx = download(gpu, s, &self.col_idx, n, "a matrix's columns")?;
        let values = download(gpu, s, &self.values, n, "a matrix's values")?;
        Ok(Csr::from_parts_unchecked(
            self.nrows, self.ncols, row_ptr, col_idx, values,
        ))
    }

    /// Copies the matrix to the host as rows appended to `rows` (CSR arrays whose `row_ptr`
    /// holds at least the leading 0): a product made in row batches lands in its final arrays
    /// with no second copy.
    pub(crate) fn append_to(&self, gpu: &Gpu, rows: &mut HostRows<T>) -> Result<()> {
        let s = &gpu.main;
        let n = self.nnz as usize;
        let ptr = download(
            gpu,
            s,
            &self.row_ptr,
            self.nrows + 1,
            "a matrix's row offsets",
        )?;
        let base = rows.col_idx.len() as u64;
        download_append(
            gpu,
            s,
            &self.col_idx,
            n,
            "a matrix's columns",
            &mut rows.col_idx,
        )?;
        download_append(
            gpu,
            s,
            &self.values,
            n,
            "a matrix's values",
            &mut rows.values,
        )?;
        rows.row_ptr.extend(ptr[1..].iter().map(|&x| x + base));
        Ok(())
    }

    /// Rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Stored entries.
    pub fn nnz(&self) -> u64 {
        self.nnz
    }

    /// Stacks `parts` (each `ncols` wide) into one matrix, in order, on the device.
    pub fn stack(gpu: &Gpu, mut parts: Vec<DeviceCsr<T>>, ncols: usize) -> Result<Self> {
        if parts.len() == 1 {
            if let Some(p) = parts.pop() {
                return Ok(p);
            }
        }
        let s = &gpu.main;
        let nrows: usize = parts.iter().map(|p| p.nrows).sum();
        let nnz: u64 = parts.iter().map(|p| p.nnz).sum();
        let mut row_ptr = zeros::<u64>(s, nrows + 1, "the stacked row offsets")?;
        let mut col_idx =
            gpu.alloc_or_release(|| zeros::<u32>(s, nnz as usize, "the stacked columns"))?;
        // The columns first, each part's freed once copied, so that the stacked values take
        // the room they leave: the parts and both stacked arrays are never all held at once.
        let (mut row, mut at) = (0usize, 0u64);
        let mut part_values = Vec::with_capacity(parts.len());
        for p in parts {
            if p.nrows > 0 {
                // Offsets 1..=nrows of the part, shifted by the entries before it.
                let n = p.nrows as u64;
                let src = p.row_ptr.slice(1..);
                let mut dst = row_ptr.slice_mut(row + 1..row + 1 + p.nrows);
                launch(gpu, s, "add_offset_u64", strided(gpu, n, 256), |l| {
                    l.arg(&src).arg(&n).arg(&at).arg(&mut dst);
                })?;
            }
            if p.nnz > 0 {
                let r = at as usize..(at + p.nnz) as usize;
                check(
                    "stack a matrix's columns",
                    s.memcpy_dtod(
                        &p.col_idx.slice(..r.len()),
                        &mut col_idx.slice_mut(r.clone()),
                    ),
                )?;
                part_values.push((p.values, r));
            }
            row += p.nrows;
            at += p.nnz;
        }
        let mut values =
            gpu.alloc_or_release(|| zeros::<T>(s, nnz as usize, "the stacked values"))?;
        for (v, r) in part_values {
            check(
                "stack a matrix's values",
                s.memcpy_dtod(&v.slice(..r.len()), &mut values.slice_mut(r)),
            )?;
        }
        Ok(DeviceCsr {
            nrows,
            ncols,
            nnz,
            row_ptr,
            col_idx,
            values,
        })
    }
}
