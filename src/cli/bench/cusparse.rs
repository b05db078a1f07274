//! The cuSPARSE baseline: `cusparseSpGEMM` through cudarc's raw bindings, with ALG1, ALG2 and
//! ALG3 (chunk fractions 0.1, 0.3, 0.5), each product timed end to end as the gMAGNUS paper
//! times its baselines: CUDA events around work estimation through the copy into C, with every
//! buffer and C itself allocated (`cuMemAlloc`) and freed inside the timed region.
//!
//! cuSPARSE's generic SpGEMM takes 32-bit CSR here (`CUSPARSE_INDEX_32I` offsets and columns),
//! so operands or a product past 2^31 entries cannot be expressed; cuSPARSE itself gives up on
//! large products with `CUSPARSE_STATUS_INSUFFICIENT_RESOURCES`. Every such outcome is a
//! [`Failure`] naming the step and the status, for the report, never an error that stops the
//! benchmark.

use super::check::RawCsr;
use cudarc::cusparse::sys as cs;
use cudarc::driver::{result as drv, sys as dsys, CudaStream, DriverError};
use gmcl::csr::Csr;
use gmcl::error::{Error, Result};
use gmcl::gpu::Gpu;
use gmcl::scalar::Scalar;
use std::ffi::c_void;
use std::fmt;
use std::ptr::null_mut;
use std::sync::Arc;

/// A cuSPARSE SpGEMM algorithm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    /// `CUSPARSE_SPGEMM_ALG1`: the whole intermediate product in memory.
    Alg1,
    /// `CUSPARSE_SPGEMM_ALG2`: less memory, deterministic.
    Alg2,
    /// `CUSPARSE_SPGEMM_ALG3`: the intermediate product in chunks of this fraction of it.
    Alg3(f32),
}

/// The algorithms the benchmark runs, in order.
pub const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::Alg1,
    Algorithm::Alg2,
    Algorithm::Alg3(0.1),
    Algorithm::Alg3(0.3),
    Algorithm::Alg3(0.5),
];

impl Algorithm {
    /// "ALG1", "ALG2", "ALG3/0.1".
    pub fn name(self) -> String {
        match self {
            Algorithm::Alg1 => "ALG1".into(),
            Algorithm::Alg2 => "ALG2".into(),
            Algorithm::Alg3(f) => format!("ALG3/{f}"),
        }
    }

    fn sys(self) -> cs::cusparseSpGEMMAlg_t {
        match self {
            Algorithm::Alg1 => cs::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_ALG1,
            Algorithm::Alg2 => cs::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_ALG2,
            Algorithm::Alg3(_) => cs::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_ALG3,
        }
    }
}

/// A product cuSPARSE did not complete: the step and what cuSPARSE or the driver answered.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Failure {
    /// The step ("compute", "allocate C", "upload A", ...).
    pub stage: String,
    /// The status name ("CUSPARSE_STATUS_INSUFFICIENT_RESOURCES (11)", "CUDA_ERROR_OUT_OF_MEMORY").
    pub status: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.status, self.stage)
    }
}

impl Failure {
    /// A failure at `stage` with `status`.
    pub fn new(stage: &str, status: impl Into<String>) -> Self {
        Failure {
            stage: stage.into(),
            status: status.into(),
        }
    }
}

/// "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES (11)".
pub fn status_name(s: cs::cusparseStatus_t) -> String {
    format!("{s:?} ({})", s as u32)
}

fn check(stage: &str, s: cs::cusparseStatus_t) -> std::result::Result<(), Failure> {
    match s {
        cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS => Ok(()),
        other => Err(Failure::new(stage, status_name(other))),
    }
}

fn driver<T>(
    stage: &str,
    r: std::result::Result<T, DriverError>,
) -> std::result::Result<T, Failure> {
    r.map_err(|e| Failure::new(stage, format!("{:?}", e.0)))
}

/// The value type cuSPARSE is told about.
fn data_type<T: Scalar>() -> cs::cudaDataType {
    if std::mem::size_of::<T>() == 4 {
        cs::cudaDataType::CUDA_R_32F
    } else {
        cs::cudaDataType::CUDA_R_64F
    }
}

/// Device memory allocated with `cuMemAlloc`, freed with `cuMemFree` on drop (or earlier with
/// [`Allocations::free_all`], inside a timed region).
#[derive(Default)]
struct Allocations {
    ptrs: Vec<dsys::CUdeviceptr>,
}

impl Allocations {
    fn alloc(
        &mut self,
        stage: &str,
        bytes: usize,
    ) -> std::result::Result<dsys::CUdeviceptr, Failure> {
        // SAFETY: a plain allocation in the current context; freed by this struct.
        let p = driver(stage, unsafe { drv::malloc_sync(bytes.max(1)) })?;
        self.ptrs.push(p);
        Ok(p)
    }

    fn free(&mut self, stage: &str, p: dsys::CUdeviceptr) -> std::result::Result<(), Failure> {
        self.ptrs.retain(|&q| q != p);
        // SAFETY: `p` came from `alloc` and is freed once (removed from the list above).
        driver(stage, unsafe { drv::free_sync(p) })
    }

    fn free_all(&mut self) -> std::result::Result<(), Failure> {
        let mut first = Ok(());
        for p in std::mem::take(&mut self.ptrs) {
            // SAFETY: as in `free`.
            let r = driver("free buffers", unsafe { drv::free_sync(p) });
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for Allocations {
    fn drop(&mut self) {
        let _ = self.free_all();
    }
}

/// A matrix on the device in 32-bit CSR, as cuSPARSE takes it.
pub struct DeviceCsr {
    rows: i64,
    cols: i64,
    nnz: i64,
    row_ptr: dsys::CUdeviceptr,
    col_idx: dsys::CUdeviceptr,
    values: dsys::CUdeviceptr,
    mem: Allocations,
}

/// SpGEMM descriptors, destroyed on drop.
struct Descriptors {
    mats: Vec<cs::cusparseSpMatDescr_t>,
    spgemm: cs::cusparseSpGEMMDescr_t,
}

impl Descriptors {
    /// A 32-bit zero-based CSR descriptor of `T` values over these device arrays, kept to be
    /// destroyed with the others.
    ///
    /// # Safety
    /// The pointers are device allocations of the sizes the shape and `nnz` describe, or null
    /// where cuSPARSE is to fill them in later; they outlive the descriptor's use.
    unsafe fn csr<T: Scalar>(
        &mut self,
        (rows, cols, nnz): (i64, i64, i64),
        [p, c, v]: [*mut c_void; 3],
    ) -> std::result::Result<cs::cusparseSpMatDescr_t, Failure> {
        let i32i = cs::cusparseIndexType_t::CUSPARSE_INDEX_32I;
        let base = cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO;
        let ty = data_type::<T>();
        let mut m: cs::cusparseSpMatDescr_t = null_mut();
        check(
            "create matrix descriptors",
            cs::cusparseCreateCsr(&mut m, rows, cols, nnz, p, c, v, i32i, i32i, base, ty),
        )?;
        self.mats.push(m);
        Ok(m)
    }

    fn destroy(&mut self) -> std::result::Result<(), Failure> {
        let mut first = Ok(());
        for m in self.mats.drain(..) {
            // SAFETY: created by cusparseCreateCsr and destroyed once (drained).
            let r = check("destroy descriptors", unsafe {
                cs::cusparseDestroySpMat(m.cast_const())
            });
            if first.is_ok() {
                first = r;
            }
        }
        if !self.spgemm.is_null() {
            // SAFETY: created by cusparseSpGEMM_createDescr; nulled after.
            let r = check("destroy descriptors", unsafe {
                cs::cusparseSpGEMM_destroyDescr(self.spgemm)
            });
            self.spgemm = null_mut();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

/// CUDA events, destroyed on drop.
struct Events(dsys::CUevent, dsys::CUevent);

impl Events {
    /// A start and an end event on the current context.
    fn new() -> std::result::Result<Self, Failure> {
        Ok(Events(
            driver(
                "create events",
                drv::event::create(dsys::CUevent_flags::CU_EVENT_DEFAULT),
            )?,
            driver(
                "create events",
                drv::event::create(dsys::CUevent_flags::CU_EVENT_DEFAULT),
            )?,
        ))
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        // SAFETY: created by event::create, destroyed once here.
        unsafe {
            let _ = drv::event::destroy(self.0);
            let _ = drv::event::destroy(self.1);
        }
    }
}

/// One cuSPARSE product: its end-to-end time, C's size, and C when it was asked for.
pub struct Product<T> {
    /// Seconds between the CUDA events (work estimation through the copy into C, every
    /// allocation and free included).
    pub seconds: f64,
    /// Entries of C as cuSPARSE reported them.
    pub nnz: u64,
    /// C copied back, when asked for.
    pub c: Option<RawCsr<T>>,
}

/// cuSPARSE on the process's GPU, with its own stream.
pub struct Cusparse {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    handle: cs::cusparseHandle_t,
    version: String,
}

impl Drop for Cusparse {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once.
        unsafe {
            let _ = cs::cusparseDestroy(self.handle);
        }
    }
}

/// Why cuSPARSE cannot run here, or `None` when its library is present (does not open the GPU).
pub fn library_missing() -> Option<String> {
    // SAFETY: only tries to load the library by its candidate names.
    if unsafe { cs::is_culib_present() } {
        None
    } else {
        Some("no cuSPARSE library (libcusparse.so) on this machine".into())
    }
}

impl Cusparse {
    /// Opens the GPU and a cuSPARSE handle on a stream of its own. Fails with
    /// [`Error::EngineUnavailable`] when there is no GPU or no cuSPARSE library (checked before
    /// any cuSPARSE call: cudarc panics on a missing library).
    pub fn open() -> Result<Self> {
        if let Some(why) = library_missing() {
            return Err(Error::EngineUnavailable(why));
        }
        let gpu = gmcl::gpu::device()?;
        gpu.context()
            .bind_to_thread()
            .map_err(|e| Error::gpu("cuSPARSE: bind the context", e))?;
        let stream = gpu
            .context()
            .new_stream()
            .map_err(|e| Error::gpu("cuSPARSE: create a stream", e))?;
        let mut handle: cs::cusparseHandle_t = null_mut();
        // SAFETY: writes a new handle.
        let s = unsafe { cs::cusparseCreate(&mut handle) };
        if s != cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
            return Err(Error::EngineUnavailable(format!(
                "cusparseCreate failed: {}",
                status_name(s)
            )));
        }
        let mut this = Cusparse {
            gpu,
            stream,
            handle,
            version: String::new(),
        };
        // SAFETY: the handle is valid; the stream belongs to the handle's context.
        let s = unsafe { cs::cusparseSetStream(this.handle, this.stream.cu_stream().cast()) };
        if s != cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
            return Err(Error::gpu("cusparseSetStream", status_name(s)));
        }
        let mut v: std::ffi::c_int = 0;
        // SAFETY: the handle is valid.
        if unsafe { cs::cusparseGetVersion(this.handle, &mut v) }
            == cs::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS
        {
            this.version = format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
        }
        Ok(this)
    }

    /// cuSPARSE's version ("12.6.3"), empty when it did not say.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Copies a matrix to the device as 32-bit CSR (outside any timed region). A matrix with
    /// 2^31 entries or more cannot be expressed: a [`Failure`].
    pub fn upload<T: Scalar>(
        &self,
        what: &str,
        m: &Csr<T>,
    ) -> std::result::Result<DeviceCsr, Failure> {
        let stage = format!("upload {what}");
        let limit = i32::MAX as u64;
        if m.nnz() as u64 > limit || m.nrows() as u64 > limit || m.ncols() as u64 > limit {
            return Err(Failure::new(
                &stage,
                format!(
                    "{} x {} with {} nonzeros does not fit 32-bit CSR (offsets past 2^31)",
                    m.nrows(),
                    m.ncols(),
                    m.nnz()
                ),
            ));
        }
        driver(&stage, self.gpu.context().bind_to_thread())?;
        let ptr32: Vec<i32> = m.row_ptr().iter().map(|&p| p as i32).collect();
        let mut mem = Allocations::default();
        let row_ptr = mem.alloc(&stage, ptr32.len() * 4)?;
        let col_idx = mem.alloc(&stage, m.nnz() * 4)?;
        let values = mem.alloc(&stage, m.nnz() * std::mem::size_of::<T>())?;
        // SAFETY: each destination was allocated above with the source's size in bytes.
        unsafe {
            driver(&stage, drv::memcpy_htod_sync(row_ptr, &ptr32))?;
            if m.nnz() > 0 {
                driver(&stage, drv::memcpy_htod_sync(col_idx, m.col_idx()))?;
                driver(&stage, drv::memcpy_htod_sync(values, m.values()))?;
            }
        }
        driver(&stage, self.gpu.context().synchronize())?;
        Ok(DeviceCsr {
            rows: m.nrows() as i64,
            cols: m.ncols() as i64,
            nnz: m.nnz() as i64,
            row_ptr,
            col_idx,
            values,
            mem,
        })
    }

    /// `C = A·B` with `alg`, timed end to end; C is copied back (after the end event) when
    /// `copy_back`.
    pub fn multiply<T: Scalar>(
        &self,
        a: &DeviceCsr,
        b: &DeviceCsr,
        alg: Algorithm,
        copy_back: bool,
    ) -> std::result::Result<Product<T>, Failure> {
        if a.cols != b.rows {
            return Err(Failure::new(
                "check shapes",
                format!("A has {} columns, B {} rows", a.cols, b.rows),
            ));
        }
        driver("bind the context", self.gpu.context().bind_to_thread())?;
        let events = Events::new()?;
        let stream = self.stream.cu_stream();
        let h = self.handle;
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let ty = data_type::<T>();
        let (alpha, beta) = (T::ONE, T::ZERO);
        let alpha: *const c_void = (&alpha as *const T).cast();
        let beta: *const c_void = (&beta as *const T).cast();
        let algo = alg.sys();
        let mut mem = Allocations::default();
        let mut d = Descriptors {
            mats: Vec::new(),
            spgemm: null_mut(),
        };
        // SAFETY: every pointer handed to cuSPARSE is a live device allocation of the size it
        // describes (operands from `upload`, buffers from `mem`), or null where cuSPARSE asks
        // for a size; descriptors live in `d` until destroyed.
        unsafe {
            driver(
                "record the start event",
                drv::event::record(events.0, stream),
            )?;
            let c_ptr = mem.alloc("allocate C offsets", (a.rows as usize + 1) * 4)?;
            let as_ptr = |p: dsys::CUdeviceptr| p as *mut c_void;
            let operand = |m: &DeviceCsr| (m.rows, m.cols, m.nnz);
            let arrays = |m: &DeviceCsr| [m.row_ptr, m.col_idx, m.values].map(as_ptr);
            let ma = d.csr::<T>(operand(a), arrays(a))?.cast_const();
            let mb = d.csr::<T>(operand(b), arrays(b))?.cast_const();
            let c_arrays = [as_ptr(c_ptr), null_mut(), null_mut()];
            let mc = d.csr::<T>((a.rows, b.cols, 0), c_arrays)?;
            check(
                "create the SpGEMM descriptor",
                cs::cusparseSpGEMM_createDescr(&mut d.spgemm),
            )?;
            let sd = d.spgemm;
            // The four SpGEMM calls share their first eleven arguments; each is made twice, once
            // for a buffer size and once with the buffer.
            let work_estimation = |size: &mut usize, buf: *mut c_void| {
                cs::cusparseSpGEMM_workEstimation(
                    h, op, op, alpha, ma, mb, beta, mc, ty, algo, sd, size, buf,
                )
            };
            let compute = |size: &mut usize, buf: *mut c_void| {
                cs::cusparseSpGEMM_compute(
                    h, op, op, alpha, ma, mb, beta, mc, ty, algo, sd, size, buf,
                )
            };
            let estimate_memory =
                |fraction: f32, size3: &mut usize, buf3: *mut c_void, size2: *mut usize| {
                    cs::cusparseSpGEMM_estimateMemory(
                        h, op, op, alpha, ma, mb, beta, mc, ty, algo, sd, fraction, size3, buf3,
                        size2,
                    )
                };

            let mut size1 = 0usize;
            check(
                "workEstimation (size)",
                work_estimation(&mut size1, null_mut()),
            )?;
            let buf1 = mem.alloc("allocate buffer 1", size1)?;
            check("workEstimation", work_estimation(&mut size1, as_ptr(buf1)))?;
            let mut size2 = 0usize;
            match alg {
                Algorithm::Alg1 => {
                    check("compute (size)", compute(&mut size2, null_mut()))?;
                }
                Algorithm::Alg2 | Algorithm::Alg3(_) => {
                    let fraction = match alg {
                        Algorithm::Alg3(f) => f,
                        // Read by ALG3 only; a value in (0, 1] for ALG2 all the same.
                        _ => 1.0,
                    };
                    let mut products = 0i64;
                    check(
                        "getNumProducts",
                        cs::cusparseSpGEMM_getNumProducts(sd, &mut products),
                    )?;
                    let mut size3 = 0usize;
                    check(
                        "estimateMemory (size)",
                        estimate_memory(fraction, &mut size3, null_mut(), null_mut()),
                    )?;
                    let buf3 = mem.alloc("allocate buffer 3", size3)?;
                    check(
                        "estimateMemory",
                        estimate_memory(fraction, &mut size3, as_ptr(buf3), &mut size2),
                    )?;
                    mem.free("free buffer 3", buf3)?;
                }
            }
            let buf2 = mem.alloc("allocate buffer 2", size2)?;
            check("compute", compute(&mut size2, as_ptr(buf2)))?;
            let (mut rows, mut cols, mut nnz) = (0i64, 0i64, 0i64);
            check(
                "read the size of C",
                cs::cusparseSpMatGetSize(mc.cast_const(), &mut rows, &mut cols, &mut nnz),
            )?;
            if nnz < 0 || nnz > i32::MAX as i64 {
                return Err(Failure::new(
                    "read the size of C",
                    format!("C has {nnz} nonzeros: past what 32-bit offsets hold"),
                ));
            }
            let c_col = mem.alloc("allocate C", nnz as usize * 4)?;
            let c_val = mem.alloc("allocate C", nnz as usize * std::mem::size_of::<T>())?;
            check(
                "set the pointers of C",
                cs::cusparseCsrSetPointers(mc, as_ptr(c_ptr), as_ptr(c_col), as_ptr(c_val)),
            )?;
            check(
                "copy",
                cs::cusparseSpGEMM_copy(h, op, op, alpha, ma, mb, beta, mc, ty, algo, sd),
            )?;
            let c = if copy_back {
                // The copies back happen in the warm-up run only, whose time is not counted.
                let sizes = (a.rows, rows, cols, nnz);
                Some(self.copy_back::<T>(sizes, [c_ptr, c_col, c_val])?)
            } else {
                None
            };
            d.destroy()?;
            mem.free_all()?;
            driver("record the end event", drv::event::record(events.1, stream))?;
            driver("wait for the end event", drv::event::synchronize(events.1))?;
            let ms = driver("read the events", drv::event::elapsed(events.0, events.1))?;
            Ok(Product {
                seconds: ms as f64 / 1e3,
                nnz: nnz as u64,
                c,
            })
        }
    }
}

impl Cusparse {
    /// Copies C back once the product is done: `a_rows + 1` offsets, `nnz` columns and values
    /// from the three device arrays; `rows` and `cols` as cuSPARSE reported them.
    ///
    /// # Safety
    /// The pointers are live device allocations of at least those sizes.
    unsafe fn copy_back<T: Scalar>(
        &self,
        (a_rows, rows, cols, nnz): (i64, i64, i64, i64),
        [c_ptr, c_col, c_val]: [dsys::CUdeviceptr; 3],
    ) -> std::result::Result<RawCsr<T>, Failure> {
        driver("wait for the product", self.stream.synchronize())?;
        let mut p32 = vec![0i32; a_rows as usize + 1];
        let mut col = vec![0u32; nnz as usize];
        let mut val = vec![T::ZERO; nnz as usize];
        driver("copy C back", drv::memcpy_dtoh_sync(&mut p32, c_ptr))?;
        if nnz > 0 {
            driver("copy C back", drv::memcpy_dtoh_sync(&mut col, c_col))?;
            driver("copy C back", drv::memcpy_dtoh_sync(&mut val, c_val))?;
        }
        Ok(RawCsr {
            nrows: rows.max(0) as usize,
            ncols: cols.max(0) as usize,
            // A negative offset becomes huge and fails the check as malformed.
            row_ptr: p32.iter().map(|&x| x as i64 as u64).collect(),
            col_idx: col,
            values: val,
        })
    }
}

impl DeviceCsr {
    /// Frees the matrix now (it is freed on drop otherwise).
    pub fn free(mut self) {
        let _ = self.mem.free_all();
    }
}
