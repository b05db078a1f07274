// Typed entry points: each templated kernel body instantiated for f32 and f64 values, with the
// value type's name as suffix (the Rust side asks for `<kernel>_f32` or `<kernel>_f64`); the
// kernels that sum products also with MCL's order-free sums, as `<kernel>_f32q` / `_f64q`.

// The kernels that sum products, for one way of summing (SUM: PlainSum or QuantaSum) under the
// suffix S.
#define GMCL_SUMMING_KERNELS(T, SUM, S)                                                          \
extern "C" __global__ void __launch_bounds__(1024)                                               \
hash_rows_numeric_##S(const u64* a_ptr, const u32* a_col, const T* a_val, const u64* b_ptr,      \
                      const u32* b_col, const T* b_val, u64 row0, const u32* rows, u32 table,     \
                      const u64* m_ptr, const u32* m_col, int has_mask, const u64* prod,          \
                      u64 exact_below, const u64* c_ptr, u32* c_col, T* c_val) {                  \
    extern __shared__ __align__(16) unsigned char smem_##S[];                                     \
    hash_rows_numeric<T, SUM<T> >(a_ptr, a_col, a_val, b_ptr, b_col, b_val, row0, rows, table,   \
                                  m_ptr, m_col, has_mask, prod, exact_below, c_ptr, c_col, c_val, \
                                  smem_##S);                                                      \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(1024)                                               \
hash_segs_numeric_##S(const u64* s_ptr, const u32* s_col, const SUM<T>::Heavy* s_val,           \
                      const u32* segs,                                                            \
                      const u32* s_h, const u32* s_base, u32 table, u32 width_shift, u32 nchunks, \
                      const u32* heavy_rows, u64 row0, const u64* m_ptr, const u32* m_col,        \
                      int has_mask, const u64* gs, const u64* c_ptr, u32* c_col, T* c_val) {      \
    extern __shared__ __align__(16) unsigned char smem_##S[];                                     \
    hash_segs_numeric<T, SUM<T> >(s_ptr, s_col, s_val, segs, s_h, s_base, table, width_shift,    \
                                  nchunks, heavy_rows, row0, m_ptr, m_col, has_mask, gs, c_ptr,   \
                                  c_col, c_val, smem_##S);                                        \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(1024)                                               \
dense_segs_numeric_##S(const u64* s_ptr, const u32* s_col, const SUM<T>::Heavy* s_val,          \
                       const u32* segs,                                                           \
                       const u32* s_h, const u32* s_base, u32 width, u32 width_shift,             \
                       u32 nchunks, const u32* heavy_rows, u64 row0, const u64* m_ptr,            \
                       const u32* m_col, int has_mask, const u64* gs, const u64* c_ptr,           \
                       u32* c_col, T* c_val) {                                                    \
    extern __shared__ __align__(16) unsigned char smem_##S[];                                     \
    dense_segs_numeric<T, SUM<T> >(s_ptr, s_col, s_val, segs, s_h, s_base, width, width_shift,   \
                                   nchunks, heavy_rows, row0, m_ptr, m_col, has_mask, gs, c_ptr,  \
                                   c_col, c_val, smem_##S);                                       \
}

// The outer product writes each heavy row's products as SUM makes them (SUM<T>::Heavy).
#define GMCL_OUTER_PRODUCT_KERNEL(T, SUM, S)                                                     \
extern "C" __global__ void __launch_bounds__(1024)                                               \
outer_product_##S(const u64* at_ptr, const u32* at_row, const T* at_val, const u32* slice_k,     \
                  const u64* slice_off, u64 nslices, const u32* group_first,                      \
                  const u32* group_last, const u64* b_ptr, const u32* b_col, const T* b_val,      \
                  u64* cursor, u32* out_col, SUM<T>::Heavy* out_val, u64 group_elems,             \
                  u64 total) {                                                                    \
    extern __shared__ __align__(16) unsigned char smem_##S[];                                     \
    outer_product<T, SUM<T> >(at_ptr, at_row, at_val, slice_k, slice_off, nslices, group_first,  \
                              group_last, b_ptr, b_col, b_val, cursor, out_col, out_val,          \
                              group_elems, total, smem_##S);                                      \
}

GMCL_OUTER_PRODUCT_KERNEL(float, PlainSum, f32)
GMCL_OUTER_PRODUCT_KERNEL(double, PlainSum, f64)
GMCL_OUTER_PRODUCT_KERNEL(float, QuantaSum, f32q)
GMCL_OUTER_PRODUCT_KERNEL(double, QuantaSum, f64q)

GMCL_SUMMING_KERNELS(float, PlainSum, f32)
GMCL_SUMMING_KERNELS(double, PlainSum, f64)
GMCL_SUMMING_KERNELS(float, QuantaSum, f32q)
GMCL_SUMMING_KERNELS(double, QuantaSum, f64q)

#define GMCL_TYPED_KERNELS(T, S, MS)                                                                 \
extern "C" __global__ void                                                                        \
csc_scatter_##S(const u64* a_ptr, const u32* a_col, const T* a_val, const u32* heavy_rows,       \
                u64 nheavy, u64 row0, const u64* b_ptr, const u64* prod, u64 exact_below,         \
                const u64* flag_scan, const u64* at_ptr, u32* fill, u32* at_row, T* at_val) {     \
    csc_scatter<T>(a_ptr, a_col, a_val, heavy_rows, nheavy, row0, b_ptr, prod, exact_below,      \
                   flag_scan, at_ptr, fill, at_row, at_val);                                      \
}                                                                                                 \
extern "C" __global__ void __launch_bounds__(SPLIT_THREADS, 4)                                   \
multisplit_##S(const u64* in_ptr, u64 nrows, const u32* in_col, const T* in_val, u32 nchunks,    \
               u32 shift, u64 group_elems, u32 max_rows, const u32* group_row, const u32* pos,    \
               u64* cursor, u32* out_col, T* out_val) {                                           \
    extern __shared__ __align__(16) unsigned char smem_##S[];                                     \
    multisplit<T, MS>(in_ptr, nrows, in_col, in_val, nchunks, shift, group_elems, max_rows,          \
                  group_row, pos, cursor, out_col, out_val, smem_##S);                            \
}

GMCL_TYPED_KERNELS(float, f32, MS_PER_THREAD_F32)
GMCL_TYPED_KERNELS(double, f64, MS_PER_THREAD_F64)
