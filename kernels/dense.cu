// Dense rows: rows of C whose intermediate products are at least as many as C has columns (the
// expansions of MCL on power-law graphs: millions of products per row landing on most columns).
// Row by row (Gustavson) into a dense accumulator in shared memory, a window of `width` columns
// at a time, one block per row: B's entries are read once and nothing goes through global
// memory but C itself, where the outer product would write and multisplit every product.
// Presence is one bit per column (a sum may be 0 and still be an entry). The block's warps take
// A's entries in turn; the lanes of a warp walk B's row within the window.

#define DENSE_ROW_THREADS 1024
// B entries a lane loads before using them: one block fills a multiprocessor, so its 32 warps
// must keep several loads each in flight to cover the memory latency (H100, MCL at s16: 2 loads
// 0.99 s, 4 loads 0.89 s, 8 loads 0.80 s in all).
#ifndef DENSE_UNROLL
#define DENSE_UNROLL 8
#endif

// The first entry of B's row k at column >= c (b_ptr[k + 1] when none); a binary search, skipped
// for the first window.
__device__ __forceinline__ u64 window_start(const u64* b_ptr, const u32* b_col, u32 k, u64 c) {
    u64 lo = b_ptr[k], hi = b_ptr[k + 1];
    if (c == 0) return lo;
    while (lo < hi) {
        u64 mid = lo + ((hi - lo) >> 1);
        if (b_col[mid] < c) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Calls visit(at, value) for each entry of B's row k whose column lies in the window [c0, c1),
// `at` being the column's place in the window (value 0 unless VALUES). The warp's lanes share the
// row, each keeping DENSE_UNROLL loads in flight; columns are sorted, so the first one past the
// window ends the lane's walk.
template <typename T, bool VALUES, typename Visit>
__device__ __forceinline__ void window_entries(const u64* b_ptr, const u32* b_col, const T* b_val,
                                               u32 k, u64 c0, u64 c1, u32 lane, Visit visit) {
    const u64 end = b_ptr[k + 1];
    bool inside = true;
    for (u64 j = window_start(b_ptr, b_col, k, c0) + lane; inside && j < end;
         j += DENSE_UNROLL * WARP) {
        u32 c[DENSE_UNROLL];
        T v[DENSE_UNROLL];
        #pragma unroll
        for (u32 u = 0; u < DENSE_UNROLL; ++u) {
            const bool in = j + u * WARP < end;
            c[u] = in ? b_col[j + u * WARP] : 0xffffffffu;
            v[u] = VALUES && in ? b_val[j + u * WARP] : (T)0;
        }
        #pragma unroll
        for (u32 u = 0; u < DENSE_UNROLL; ++u) {
            if (c[u] >= c1) {
                inside = false;
                break;
            }
            visit(c[u] - (u32)c0, v[u]);
        }
    }
}

// Counts the entries of each listed row of C = A·B (c_nnz[r] for batch row r = rows[i]); the
// window is `width` columns (a multiple of 32), its bits in dynamic shared memory.
extern "C" __global__ void __launch_bounds__(DENSE_ROW_THREADS)
dense_rows_symbolic(const u64* a_ptr, const u32* a_col, const u64* b_ptr, const u32* b_col,
                    u64 row0, const u32* rows, u64 ncols, u32 width, u64* c_nnz) {
    extern __shared__ __align__(16) unsigned char smem_sym[];
    u32* bits = (u32*)smem_sym;
    __shared__ double tmp[WARP];
    const u32 r = rows[blockIdx.x];
    const u64 a0 = a_ptr[row0 + r], a1 = a_ptr[row0 + r + 1];
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    u64 count = 0;
    for (u64 c0 = 0; c0 < ncols; c0 += width) {
        const u64 c1 = c0 + width < ncols ? c0 + width : ncols;
        const u32 words = (u32)((c1 - c0 + 31) / 32);
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0;
        __syncthreads();
        for (u64 e = a0 + warp; e < a1; e += nwarps) {
            window_entries<float, false>(b_ptr, b_col, (const float*)0, a_col[e], c0, c1, lane,
                                         [&](u32 at, float) {
                                             atomicOr(&bits[at >> 5], 1u << (at & 31));
                                         });
        }
        __syncthreads();
        u64 mine = 0;
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) mine += __popc(bits[w]);
        // Counts are far below 2^53, so a double sum is exact.
        count += (u64)block_reduce_f64((double)mine, tmp, false);
    }
    if (threadIdx.x == 0) c_nnz[r] = count;
}

// Computes each listed row of C into its place c_ptr[r] (offsets of the batch's rows), columns
// in order; the window holds `width` values of T and their presence bits.
template <typename T>
__device__ void dense_rows_numeric(const u64* a_ptr, const u32* a_col, const T* a_val,
                                   const u64* b_ptr, const u32* b_col, const T* b_val, u64 row0,
                                   const u32* rows, u64 ncols, u32 width, const u64* c_ptr,
                                   u32* c_col, T* c_val, unsigned char* smem) {
    T* acc = (T*)smem;
    u32* bits = (u32*)(acc + width);
    __shared__ u64 tmp[WARP];
    __shared__ u64 total;
    const u32 r = rows[blockIdx.x];
    const u64 a0 = a_ptr[row0 + r], a1 = a_ptr[row0 + r + 1];
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    u64 out = c_ptr[r];
    for (u64 c0 = 0; c0 < ncols; c0 += width) {
        const u64 c1 = c0 + width < ncols ? c0 + width : ncols;
        const u32 span = (u32)(c1 - c0);
        const u32 words = (span + 31) / 32;
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0;
        for (u32 c = threadIdx.x; c < span; c += blockDim.x) acc[c] = (T)0;
        __syncthreads();
        for (u64 e = a0 + warp; e < a1; e += nwarps) {
            const T av = a_val[e];
            window_entries<T, true>(b_ptr, b_col, b_val, a_col[e], c0, c1, lane,
                                    [&](u32 at, T bv) {
                                        atomicAdd(&acc[at], av * bv);
                                        atomicOr(&bits[at >> 5], 1u << (at & 31));
                                    });
        }
        __syncthreads();
        // Ordered write: each thread takes a word; a block scan of the words' counts places them.
        for (u32 w0 = 0; w0 < words; w0 += blockDim.x) {
            const u32 w = w0 + threadIdx.x;
            u32 word = w < words ? bits[w] : 0;
            const u64 at = block_exclusive_scan_u64(__popc(word), tmp, &total);
            const u64 here = total;
            u64 o = out + at;
            while (word) {
                const u32 b = __ffs(word) - 1;
                word &= word - 1;
                const u32 c = w * 32 + b;
                c_col[o] = (u32)c0 + c;
                c_val[o] = acc[c];
                ++o;
            }
            out += here;
        }
        __syncthreads();
    }
}

#define GMCL_DENSE_ROW_KERNELS(T, S)                                                             \
extern "C" __global__ void __launch_bounds__(DENSE_ROW_THREADS)                                  \
dense_rows_numeric_##S(const u64* a_ptr, const u32* a_col, const T* a_val, const u64* b_ptr,     \
                       const u32* b_col, const T* b_val, u64 row0, const u32* rows, u64 ncols,   \
                       u32 width, const u64* c_ptr, u32* c_col, T* c_val) {                      \
    extern __shared__ __align__(16) unsigned char smem_dense_##S[];                              \
    dense_rows_numeric<T>(a_ptr, a_col, a_val, b_ptr, b_col, b_val, row0, rows, ncols, width,    \
                          c_ptr, c_col, c_val, smem_dense_##S);                                  \
}

GMCL_DENSE_ROW_KERNELS(float, f32)
GMCL_DENSE_ROW_KERNELS(double, f64)
