// Rows of a CSR matrix moved as they are, for matrices assembled from rows held in several
// places (the ranks of a distributed run).

// Flags every column named by the entries lo..hi of `col` (flags[c] = 1; the rest untouched).
extern "C" __global__ void flag_columns(const u32* col, u64 lo, u64 hi, unsigned char* flags) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 e = lo + (u64)blockIdx.x * blockDim.x + threadIdx.x; e < hi; e += stride) {
        flags[col[e]] = 1;
    }
}

// Row i of the output is row rows[i] of (ptr, col, val), written from out_ptr[i] on (an
// exclusive prefix of the rows' lengths): a warp per row.
template <typename T>
__device__ void gather_rows(const u64* ptr, const u32* col, const T* val, const u32* rows, u64 n,
                            const u64* out_ptr, u32* out_col, T* out_val) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 i = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; i < n; i += warps) {
        const u64 lo = ptr[rows[i]], len = ptr[rows[i] + 1] - lo, to = out_ptr[i];
        for (u64 e = lane; e < len; e += WARP) {
            out_col[to + e] = col[lo + e];
            out_val[to + e] = val[lo + e];
        }
    }
}

#define GMCL_ROWS_KERNELS(T, S)                                                                  \
extern "C" __global__ void gather_rows_##S(const u64* ptr, const u32* col, const T* val,         \
                                           const u32* rows, u64 n, const u64* out_ptr,           \
                                           u32* out_col, T* out_val) {                           \
    gather_rows<T>(ptr, col, val, rows, n, out_ptr, out_col, out_val);                           \
}

GMCL_ROWS_KERNELS(float, f32)
GMCL_ROWS_KERNELS(double, f64)

// Row i of the pattern (ptr, col) written as row rows[i] of the pattern (out_ptr, out_col),
// whose offsets leave it room: a warp per row.
extern "C" __global__ void place_pattern(const u64* ptr, const u32* col, const u32* rows, u64 n,
                                         const u64* out_ptr, u32* out_col) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 i = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; i < n; i += warps) {
        const u64 lo = ptr[i], len = ptr[i + 1] - lo, to = out_ptr[rows[i]];
        for (u64 e = lane; e < len; e += WARP) out_col[to + e] = col[lo + e];
    }
}
