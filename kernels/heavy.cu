// Heavy rows (paper sections III-B and III-C): the masked CSR->CSC conversion of A's heavy rows,
// the statically load-balanced outer product into Ĉ (Alg. 4), and one level of the hierarchical
// multisplit (Alg. 5): histogram, partition of chunks into heavy-first order, multisplit.

// ---- Masked CSR->CSC of A's heavy rows. A slice is a column k of Ã (the heavy rows' entries
// in column k) paired with row k of B; columns with no entry or an empty B row get no slice.
// B̃ is B's rows by reference (slice_k), not a copy. ----

// A warp per heavy row: col_cnt[k] += entries of heavy rows in column k.
extern "C" __global__ void heavy_col_counts(const u64* a_ptr, const u32* a_col,
                                            const u32* heavy_rows, u64 nheavy, u64 row0,
                                            u32* col_cnt) {
    const u64 warp = (blockIdx.x * (u64)blockDim.x + threadIdx.x) / WARP;
    const u64 nwarps = (u64)gridDim.x * blockDim.x / WARP;
    const u32 lane = threadIdx.x % WARP;
    for (u64 h = warp; h < nheavy; h += nwarps) {
        const u64 grow = row0 + heavy_rows[h];
        for (u64 e = a_ptr[grow] + lane; e < a_ptr[grow + 1]; e += WARP) atomicAdd(&col_cnt[a_col[e]], 1u);
    }
}

// flag[k] = 1 when column k makes a slice (flag has k_cols + 1 slots; the last is 0).
extern "C" __global__ void slice_flags(const u32* col_cnt, const u64* b_ptr, u64 k_cols, u64* flag) {
    for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; k <= k_cols;
         k += (u64)gridDim.x * blockDim.x) {
        flag[k] = k < k_cols && col_cnt[k] > 0 && b_ptr[k + 1] > b_ptr[k] ? 1 : 0;
    }
}

// For each slice s (column k): slice_k[s] = k, a_cnt[s] = Ã entries, sizes[s] = products.
extern "C" __global__ void slice_build(const u32* col_cnt, const u64* b_ptr, const u64* flag_scan,
                                       u64 k_cols, u32* slice_k, u64* a_cnt, u64* sizes) {
    for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; k < k_cols;
         k += (u64)gridDim.x * blockDim.x) {
        if (flag_scan[k + 1] > flag_scan[k]) {
            const u64 s = flag_scan[k];
            slice_k[s] = (u32)k;
            a_cnt[s] = col_cnt[k];
            sizes[s] = (u64)col_cnt[k] * (b_ptr[k + 1] - b_ptr[k]);
        }
    }
}

// The top bit of an entry of Ã's rows (a heavy index, below 2^31): the row makes its products
// exactly (makes_exact).
#define EXACT_ROW 0x80000000u

// A warp per heavy row h: its entries go to their slice's column of Ã (heavy index, with
// EXACT_ROW where the row's products, prod[r + 1] - prod[r], make it exact; value).
template <typename T>
__device__ void csc_scatter(const u64* a_ptr, const u32* a_col, const T* a_val,
                            const u32* heavy_rows, u64 nheavy, u64 row0, const u64* b_ptr,
                            const u64* prod, u64 exact_below, const u64* flag_scan,
                            const u64* at_ptr, u32* fill, u32* at_row, T* at_val) {
    const u64 warp = (blockIdx.x * (u64)blockDim.x + threadIdx.x) / WARP;
    const u64 nwarps = (u64)gridDim.x * blockDim.x / WARP;
    const u32 lane = threadIdx.x % WARP;
    for (u64 h = warp; h < nheavy; h += nwarps) {
        const u32 r = heavy_rows[h];
        const u64 grow = row0 + r;
        const u32 tag = makes_exact(prod[r + 1] - prod[r], exact_below) ? EXACT_ROW : 0u;
        for (u64 e = a_ptr[grow] + lane; e < a_ptr[grow + 1]; e += WARP) {
            const u32 k = a_col[e];
            if (b_ptr[k + 1] == b_ptr[k]) continue;
            const u64 s = flag_scan[k];
            const u64 pos = at_ptr[s] + atomicAdd(&fill[s], 1u);
            at_row[pos] = (u32)h | tag;
            at_val[pos] = a_val[e];
        }
    }
}

// ---- The outer product (Alg. 4). The flattened index space lists, slice by slice, each entry
// of Ã's column times each entry of B's row; block g takes [g*G, (g+1)*G). An Ã entry e of
// slice s covers [slice_off[s] + (e - at_ptr[s]) * blen, +blen). Each block first claims, per Ã
// entry it touches, room in its Ĉ row (atomically advancing cursor[h], which starts at Ĉ.rowPtr),
// then writes its products there: consecutive threads read consecutive B entries and write
// consecutive Ĉ entries. ----

__device__ __forceinline__ u64 b_len(const u64* b_ptr, const u32* slice_k, u64 s) {
    const u32 k = slice_k[s];
    return b_ptr[k + 1] - b_ptr[k];
}

// Products as S makes the heavy rows' ones (S::heavy, exact for rows tagged EXACT_ROW).
template <typename T, typename S>
__device__ void outer_product(const u64* at_ptr, const u32* at_row, const T* at_val,
                              const u32* slice_k, const u64* slice_off, u64 nslices,
                              const u32* group_first, const u32* group_last,
                              const u64* b_ptr, const u32* b_col, const T* b_val, u64* cursor,
                              u32* out_col, typename S::Heavy* out_val, u64 group_elems,
                              u64 total, unsigned char* smem) {
    u64* off_local = (u64*)smem;
    const u64 g0 = (u64)blockIdx.x * group_elems;
    const u64 g1 = min(g0 + group_elems, total);
    if (g0 >= g1) return;
    // The Ã entries this block touches: [e_first, e_last].
    const u64 s_first = group_first[blockIdx.x];
    const u64 s_last = group_last[blockIdx.x];
    const u64 e_first = at_ptr[s_first] + (g0 - slice_off[s_first]) / b_len(b_ptr, slice_k, s_first);
    const u64 e_last = at_ptr[s_last] + (g1 - 1 - slice_off[s_last]) / b_len(b_ptr, slice_k, s_last);
    // Step 2: claim room in Ĉ for each touched Ã entry.
    u64 s = s_first;
    for (u64 e = e_first + threadIdx.x; e <= e_last; e += blockDim.x) {
        while (e >= at_ptr[s + 1]) ++s;
        const u64 bl = b_len(b_ptr, slice_k, s);
        const u64 start = slice_off[s] + (e - at_ptr[s]) * bl;
        const u64 lo = max(start, g0), hi = min(start + bl, g1);
        off_local[e - e_first] = atomicAdd(&cursor[at_row[e] & ~EXACT_ROW], hi - lo);
    }
    __syncthreads();
    // Step 3: write the products. Each thread keeps its current slice in registers and divides
    // in 32 bits when the numbers allow (64-bit division is slow on the GPU).
    s = s_first;
    u64 s_lo = slice_off[s], s_hi = slice_off[s + 1];
    u32 k = slice_k[s];
    u64 b0 = b_ptr[k], bl = b_ptr[k + 1] - b0, a0 = at_ptr[s];
    for (u64 i = g0 + threadIdx.x; i < g1; i += blockDim.x) {
        while (i >= s_hi) {
            ++s;
            s_lo = s_hi;
            s_hi = slice_off[s + 1];
            k = slice_k[s];
            b0 = b_ptr[k];
            bl = b_ptr[k + 1] - b0;
            a0 = at_ptr[s];
        }
        const u64 local = i - s_lo;
        u64 ea, eb;
        if ((local >> 32) == 0 && (bl >> 32) == 0) {
            const u32 q = (u32)local / (u32)bl;
            ea = q;
            eb = (u32)local - q * (u32)bl;
        } else {
            ea = local / bl;
            eb = local - ea * bl;
        }
        const u64 e = a0 + ea;
        const u64 start = s_lo + ea * bl;
        const u64 first_excess = start < g0 ? g0 - start : 0;
        const u64 dest = off_local[e - e_first] + eb - first_excess;
        const u64 bj = b0 + eb;
        out_col[dest] = b_col[bj];
        out_val[dest] = S::heavy(at_val[e], b_val[bj], (at_row[e] & EXACT_ROW) != 0);
    }
}

// ---- One multisplit level (Alg. 5). Input: rows [0, nrows) of Ĉ (each longer than τ), columns
// local to a range of width 2^(shift + log2 nchunks); each row splits into nchunks chunks of
// 2^shift columns. Blocks take G consecutive elements, which span at most `max_rows` rows. ----

// Histogram: counts[row * nchunks + chunk] += elements, through warp-private shared histograms.
// Elements one thread of the histogram kernel holds in registers: a block of T threads takes at
// most MS_PER_THREAD * T elements. The multisplit holds values too, so it takes a per-type count
// (MS_PER_THREAD_F32 / _F64) to keep its registers within 4 blocks of 256 threads per SM.
#define MS_PER_THREAD 16
#define MS_PER_THREAD_F32 12
#define MS_PER_THREAD_F64 8
// Threads of the histogram and multisplit blocks (8 warps, the paper's n_subGroups).
#define SPLIT_THREADS 256

extern "C" __global__ void __launch_bounds__(SPLIT_THREADS)
multisplit_histogram(const u64* in_ptr, u64 nrows, const u32* in_col, u32 nchunks, u32 shift,
                     u64 group_elems, u32 max_rows, const u32* group_row, u64* counts) {
    extern __shared__ u32 hist[];  // [warps][max_rows * nchunks]
    const u64 total = in_ptr[nrows];
    const u64 g0 = (u64)blockIdx.x * group_elems;
    const u64 g1 = min(g0 + group_elems, total);
    if (g0 >= g1) return;
    const u32 nwarps = blockDim.x / WARP, warp = threadIdx.x / WARP;
    const u32 local = max_rows * nchunks;
    for (u32 j = threadIdx.x; j < local * nwarps; j += blockDim.x) hist[j] = 0;
    const u64 r0 = group_row[blockIdx.x];
    u32 chunk[MS_PER_THREAD];
    u64 r = r0;
    u64 row_end = in_ptr[r0 + 1];  // the end of row r (rows change rarely: they exceed τ)
    #pragma unroll
    for (int j = 0; j < MS_PER_THREAD; ++j) {
        const u64 i = g0 + threadIdx.x + (u64)j * blockDim.x;
        chunk[j] = EMPTY_KEY;
        if (i < g1) {
            while (i >= row_end) row_end = in_ptr[++r + 1];
            chunk[j] = (u32)(r - r0) * nchunks + (in_col[i] >> shift);
        }
    }
    __syncthreads();
    #pragma unroll
    for (int j = 0; j < MS_PER_THREAD; ++j) {
        if (chunk[j] != EMPTY_KEY) warp_count(&hist[warp * local + chunk[j]], chunk[j]);
    }
    __syncthreads();
    for (u32 c = threadIdx.x; c < local; c += blockDim.x) {
        u64 sum = 0;
        for (u32 w = 0; w < nwarps; ++w) sum += hist[w * local + c];
        const u64 row = r0 + c / nchunks;
        if (sum > 0 && row < nrows) atomicAdd(&counts[row * nchunks + c % nchunks], sum);
    }
}

// flags[i] = 1 for chunks that go on to the next level (more than tau elements, not the last
// level); flags has n + 1 slots, the last 0.
extern "C" __global__ void chunk_flags(const u64* counts, u64 n, u64 tau, int last, u64* flags) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i <= n;
         i += (u64)gridDim.x * blockDim.x) {
        flags[i] = i < n && !last && counts[i] > tau ? 1 : 0;
    }
}

// Stable partition of the chunks, heavy first: chunk i goes to position pos[i]; its size, heavy
// row and first column follow it. out_counts has n + 1 slots (last 0) for the scan into Ĉ_reord's
// row pointer.
extern "C" __global__ void chunk_place(const u64* counts, const u64* flag_scan, u64 n,
                                       u32 nchunks, u32 shift, const u32* in_h,
                                       const u32* in_base, u32* pos, u64* out_counts, u32* out_h,
                                       u32* out_base) {
    const u64 nheavy = flag_scan[n];
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i <= n;
         i += (u64)gridDim.x * blockDim.x) {
        if (i == n) { out_counts[n] = 0; continue; }
        const bool heavy = flag_scan[i + 1] > flag_scan[i];
        const u64 p = heavy ? flag_scan[i] : nheavy + i - flag_scan[i];
        const u64 row = i / nchunks;
        pos[i] = (u32)p;
        out_counts[p] = counts[i];
        out_h[p] = in_h[row];
        out_base[p] = in_base[row] + ((u32)(i % nchunks) << shift);
    }
}

template <typename T, int PER_THREAD>
__device__ void multisplit(const u64* in_ptr, u64 nrows, const u32* in_col, const T* in_val,
                           u32 nchunks, u32 shift, u64 group_elems, u32 max_rows,
                           const u32* group_row, const u32* pos, u64* cursor, u32* out_col,
                           T* out_val, unsigned char* smem) {
    const u32 nwarps = blockDim.x / WARP, warp = threadIdx.x / WARP;
    const u32 local = max_rows * nchunks;
    u64* offs_global = (u64*)smem;                                  // [local]
    u32* hist = (u32*)(offs_global + local);                        // [nwarps][local]
    u32* offs_local = hist + (u64)nwarps * local;                   // [local + 1]
    u32* col_buf = offs_local + local + 1;                          // [group_elems]
    T* val_buf = (T*)(((u64)(col_buf + group_elems) + sizeof(T) - 1) / sizeof(T) * sizeof(T));
    __shared__ u64 tmp[WARP];
    __shared__ u64 total_sh;
    const u64 total = in_ptr[nrows];
    const u64 g0 = (u64)blockIdx.x * group_elems;
    const u64 g1 = min(g0 + group_elems, total);
    if (g0 >= g1) return;
    for (u32 j = threadIdx.x; j < local * nwarps; j += blockDim.x) hist[j] = 0;
    const u64 r0 = group_row[blockIdx.x];
    // Load the block's elements into registers (all loads in flight at once), then count them
    // in the warp's histogram.
    u32 col[PER_THREAD], chunk[PER_THREAD];
    T val[PER_THREAD];
    u64 r = r0;
    #pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
        const u64 i = g0 + threadIdx.x + (u64)j * blockDim.x;
        chunk[j] = EMPTY_KEY;
        if (i < g1) {
            while (i >= in_ptr[r + 1]) ++r;
            col[j] = in_col[i];
            val[j] = in_val[i];
            chunk[j] = (u32)(r - r0) * nchunks + (col[j] >> shift);
        }
    }
    __syncthreads();
    #pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
        if (chunk[j] != EMPTY_KEY) warp_count(&hist[warp * local + chunk[j]], chunk[j]);
    }
    __syncthreads();
    // Per local chunk: turn the warp counts into each warp's start within the chunk, and claim
    // the chunk's room in Ĉ_reord.
    u64 tot_mine = 0;
    const u32 per = (local + blockDim.x - 1) / blockDim.x;
    for (u32 c = threadIdx.x * per; c < min(local, (threadIdx.x + 1) * per); ++c) {
        u32 run = 0;
        for (u32 w = 0; w < nwarps; ++w) {
            const u32 v = hist[w * local + c];
            hist[w * local + c] = run;
            run += v;
        }
        offs_local[c] = run;  // the chunk's size for now
        const u64 row = r0 + c / nchunks;
        offs_global[c] = run > 0 && row < nrows
                             ? atomicAdd(&cursor[pos[row * nchunks + c % nchunks]], (u64)run)
                             : 0;
        tot_mine += run;
    }
    __syncthreads();
    // Local offsets: exclusive scan of the chunk sizes (each thread owns a run of chunks).
    u64 at = block_exclusive_scan_u64(tot_mine, tmp, &total_sh);
    for (u32 c = threadIdx.x * per; c < min(local, (threadIdx.x + 1) * per); ++c) {
        const u32 size = offs_local[c];
        offs_local[c] = (u32)at;
        at += size;
    }
    if (threadIdx.x == 0) offs_local[local] = (u32)(g1 - g0);
    __syncthreads();
    // Local permute into shared memory, from the registers.
    #pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
        if (chunk[j] != EMPTY_KEY) {
            const u32 dest = offs_local[chunk[j]] + warp_claim(&hist[warp * local + chunk[j]], chunk[j]);
            col_buf[dest] = col[j];
            val_buf[dest] = val[j];
        }
    }
    __syncthreads();
    // Coalesced writes: local chunks are in row-major order, so a buffer position's row is the
    // row of the input position with the same index.
    r = r0;
    const u32 mask = (1u << shift) - 1;
    for (u64 i = g0 + threadIdx.x; i < g1; i += blockDim.x) {
        while (i >= in_ptr[r + 1]) ++r;
        const u32 p = (u32)(i - g0);
        const u32 col = col_buf[p];
        const u32 chunk = (u32)(r - r0) * nchunks + (col >> shift);
        const u64 dest = offs_global[chunk] + p - offs_local[chunk];
        out_col[dest] = col & mask;
        out_val[dest] = val_buf[p];
    }
}
