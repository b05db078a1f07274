// Shared-memory accumulators (paper section III-E). Light rows of C and light chunks of Ĉ_reord
// go through hash tables (modulo hashing, linear probing, then a bitonic sort to order the row);
// heavy chunks of the last level go through dense accumulators (values plus a bitmap, then a
// block-wide prefix sum over the bitmap). Each kernel has a symbolic form (counts entries) and a
// numeric form (writes them). One block per row or chunk, listed in a bin's list.

#define HASH_SCALE 107u
#define MAX_SLOTS_PER_THREAD 8

// Inserts key into a hash set of `size` slots; counts new keys in *count.
__device__ __forceinline__ void set_insert(u32* keys, u32 size, u32 key, u32* count) {
    u32 s = (key * HASH_SCALE) % size;
    while (true) {
        u32 k = keys[s];
        if (k == key) return;
        if (k == EMPTY_KEY) {
            u32 old = atomicCAS(&keys[s], EMPTY_KEY, key);
            if (old == EMPTY_KEY) { atomicAdd(count, 1u); return; }
            if (old == key) return;
        }
        s = s + 1 == size ? 0 : s + 1;
    }
}

// The slot of key in a hash map of `size` slots, claimed when key is new.
__device__ __forceinline__ u32 map_slot(u32* keys, u32 size, u32 key) {
    u32 s = (key * HASH_SCALE) % size;
    while (true) {
        u32 k = keys[s];
        if (k == EMPTY_KEY) {
            u32 old = atomicCAS(&keys[s], EMPTY_KEY, key);
            if (old == EMPTY_KEY || old == key) return s;
        } else if (k == key) {
            return s;
        }
        s = s + 1 == size ? 0 : s + 1;
    }
}

// Moves the occupied slots of a hash map to its front and sorts them by key (bitonic sort over
// the next power of two of their count, which fits because tables are at most half full).
// Returns the number of entries. Every thread must call; the table must be complete (synced).
template <typename T>
__device__ u32 compact_and_sort(u32* keys, T* vals, u32 size, u32* cursor) {
    u32 k[MAX_SLOTS_PER_THREAD];
    T v[MAX_SLOTS_PER_THREAD];
    #pragma unroll
    for (int j = 0; j < MAX_SLOTS_PER_THREAD; ++j) {
        u32 s = threadIdx.x + j * blockDim.x;
        k[j] = EMPTY_KEY;
        v[j] = (T)0;
        if (s < size) { k[j] = keys[s]; v[j] = vals[s]; }
    }
    __syncthreads();
    #pragma unroll
    for (int j = 0; j < MAX_SLOTS_PER_THREAD; ++j) {
        if (k[j] != EMPTY_KEY) {
            u32 p = atomicAdd(cursor, 1u);
            keys[p] = k[j];
            vals[p] = v[j];
        }
    }
    __syncthreads();
    const u32 n = *cursor;
    const u32 p2 = next_pow2_u32(n);
    for (u32 s = n + threadIdx.x; s < p2; s += blockDim.x) keys[s] = EMPTY_KEY;
    __syncthreads();
    for (u32 k2 = 2; k2 <= p2; k2 <<= 1) {
        for (u32 j = k2 >> 1; j > 0; j >>= 1) {
            for (u32 i = threadIdx.x; i < p2; i += blockDim.x) {
                u32 ixj = i ^ j;
                if (ixj > i) {
                    u32 a = keys[i], b = keys[ixj];
                    bool ascending = (i & k2) == 0;
                    if ((a > b) == ascending) {
                        keys[i] = b; keys[ixj] = a;
                        T t = vals[i]; vals[i] = vals[ixj]; vals[ixj] = t;
                    }
                }
            }
            __syncthreads();
        }
    }
    return n;
}

// The structural mask: row `grow` of the mask holds column c (always true without a mask).
__device__ __forceinline__ bool mask_keeps(const u64* m_ptr, const u32* m_col, int has_mask,
                                           u64 grow, u32 c) {
    return !has_mask || sorted_contains(m_col, m_ptr[grow], m_ptr[grow + 1], c);
}

// Calls f(ae, bj) for every intermediate product A[row, k]·B[k, j] of row `grow` (ae: A's entry,
// bj: B's entry), spread evenly over the block's warps. A row with at most 32 entries (most light
// rows) is flattened: each lane holds one entry's B row, a warp scan lays the products end to
// end, and each lane finds its product's entry by a binary search over the lanes (shuffles), so
// that rows of few, long or short B rows keep every lane busy. Longer rows take a warp per entry.
template <typename F>
__device__ __forceinline__ void for_each_product(const u64* a_ptr, const u32* a_col,
                                                 const u64* b_ptr, u64 grow, F f) {
    const u32 warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, nwarps = blockDim.x / WARP;
    const u64 a0 = a_ptr[grow], a1 = a_ptr[grow + 1];
    if (a1 - a0 <= WARP) {
        u64 start = 0, len = 0;
        if (lane < a1 - a0) {
            const u32 k = a_col[a0 + lane];
            start = b_ptr[k];
            len = b_ptr[k + 1] - start;
        }
        const u64 incl = warp_inclusive_scan_u64(len);
        const u64 excl = incl - len;
        const u64 total = __shfl_sync(0xffffffffu, incl, WARP - 1);
        for (u64 base = (u64)warp * WARP; base < total; base += (u64)nwarps * WARP) {
            const u64 p = base + lane;
            u32 e = 0;
            #pragma unroll
            for (u32 step = 16; step > 0; step >>= 1) {
                if (__shfl_sync(0xffffffffu, incl, e + step - 1) <= p) e += step;
            }
            const u64 first = __shfl_sync(0xffffffffu, excl, e);
            const u64 b0 = __shfl_sync(0xffffffffu, start, e);
            if (p < total) f(a0 + e, b0 + (p - first));
        }
    } else {
        for (u64 ae = a0 + warp; ae < a1; ae += nwarps) {
            const u32 k = a_col[ae];
            for (u64 bj = b_ptr[k] + lane; bj < b_ptr[k + 1]; bj += WARP) f(ae, bj);
        }
    }
}

// ---- Light rows of C: products of A's row with B's rows, a warp per entry of A's row. ----

extern "C" __global__ void __launch_bounds__(1024)
hash_rows_symbolic(const u64* a_ptr, const u32* a_col, const u64* b_ptr, const u32* b_col,
                   u64 row0, const u32* rows, u32 table, const u64* m_ptr, const u32* m_col,
                   int has_mask, u64* row_nnz) {
    extern __shared__ u32 keys[];
    __shared__ u32 count;
    const u32 r = rows[blockIdx.x];
    const u64 grow = row0 + r;
    for (u32 s = threadIdx.x; s < table; s += blockDim.x) keys[s] = EMPTY_KEY;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    for_each_product(a_ptr, a_col, b_ptr, grow, [&](u64, u64 bj) {
        const u32 c = b_col[bj];
        if (mask_keeps(m_ptr, m_col, has_mask, grow, c)) set_insert(keys, table, c, &count);
    });
    __syncthreads();
    if (threadIdx.x == 0) row_nnz[r] = count;
}

// Row r's products are prod[r + 1] - prod[r]; exact_below: see makes_exact.
template <typename T, typename S>
__device__ void hash_rows_numeric(const u64* a_ptr, const u32* a_col, const T* a_val,
                                  const u64* b_ptr, const u32* b_col, const T* b_val, u64 row0,
                                  const u32* rows, u32 table, const u64* m_ptr, const u32* m_col,
                                  int has_mask, const u64* prod, u64 exact_below,
                                  const u64* c_ptr, u32* c_col, T* c_val, unsigned char* smem) {
    typedef typename S::Acc A;
    u32* keys = (u32*)smem;
    A* vals = (A*)(smem + (u64)table * sizeof(u32));
    __shared__ u32 cursor;
    const u32 r = rows[blockIdx.x];
    const u64 grow = row0 + r;
    const bool exact = makes_exact(prod[r + 1] - prod[r], exact_below);
    for (u32 s = threadIdx.x; s < table; s += blockDim.x) { keys[s] = EMPTY_KEY; vals[s] = (A)0; }
    if (threadIdx.x == 0) cursor = 0;
    __syncthreads();
    for_each_product(a_ptr, a_col, b_ptr, grow, [&](u64 ae, u64 bj) {
        const u32 c = b_col[bj];
        if (mask_keeps(m_ptr, m_col, has_mask, grow, c))
            S::add_product(&vals[map_slot(keys, table, c)], a_val[ae], b_val[bj], exact);
    });
    __syncthreads();
    const u32 n = compact_and_sort(keys, vals, table, &cursor);
    const u64 out = c_ptr[r];
    for (u32 j = threadIdx.x; j < n; j += blockDim.x) {
        c_col[out + j] = keys[j];
        c_val[out + j] = S::value(vals[j]);
    }
}

// ---- Chunks of Ĉ_reord (segments): elements [ptr[s], ptr[s+1]) with columns local to the
// chunk, which starts at column base[s] of row heavy_rows[h[s]]. Their entries land in the
// heavy-row grid G[h * R + base / chunk_width] (symbolic) or in C (numeric). ----

__device__ __forceinline__ u64 grid_slot(u32 h, u32 base, u32 width_shift, u32 nchunks) {
    return (u64)h * nchunks + (base >> width_shift);
}

// Where a chunk's entries start in C: the row's start plus the entries of its earlier chunks.
__device__ __forceinline__ u64 chunk_out(const u64* gs, const u64* c_ptr, const u32* heavy_rows,
                                         u32 h, u32 base, u32 width_shift, u32 nchunks) {
    const u64 row_first = (u64)h * nchunks;
    return c_ptr[heavy_rows[h]] + gs[grid_slot(h, base, width_shift, nchunks)] - gs[row_first];
}

extern "C" __global__ void __launch_bounds__(1024)
hash_segs_symbolic(const u64* s_ptr, const u32* s_col, const u32* segs, const u32* s_h,
                   const u32* s_base, u32 table, u32 width_shift, u32 nchunks,
                   const u32* heavy_rows, u64 row0, const u64* m_ptr, const u32* m_col,
                   int has_mask, u64* grid) {
    extern __shared__ u32 keys[];
    __shared__ u32 count;
    const u32 s = segs[blockIdx.x];
    const u32 h = s_h[s], base = s_base[s];
    const u64 grow = row0 + heavy_rows[h];
    for (u32 j = threadIdx.x; j < table; j += blockDim.x) keys[j] = EMPTY_KEY;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    for (u64 p = s_ptr[s] + threadIdx.x; p < s_ptr[s + 1]; p += blockDim.x) {
        const u32 c = s_col[p];
        if (mask_keeps(m_ptr, m_col, has_mask, grow, base + c)) set_insert(keys, table, c, &count);
    }
    __syncthreads();
    if (threadIdx.x == 0) grid[grid_slot(h, base, width_shift, nchunks)] = count;
}

template <typename T, typename S>
__device__ void hash_segs_numeric(const u64* s_ptr, const u32* s_col,
                                  const typename S::Heavy* s_val,
                                  const u32* segs, const u32* s_h, const u32* s_base, u32 table,
                                  u32 width_shift, u32 nchunks, const u32* heavy_rows, u64 row0,
                                  const u64* m_ptr, const u32* m_col, int has_mask,
                                  const u64* gs, const u64* c_ptr, u32* c_col, T* c_val,
                                  unsigned char* smem) {
    typedef typename S::Acc A;
    u32* keys = (u32*)smem;
    A* vals = (A*)(smem + (u64)table * sizeof(u32));
    __shared__ u32 cursor;
    const u32 s = segs[blockIdx.x];
    const u32 h = s_h[s], base = s_base[s];
    const u64 grow = row0 + heavy_rows[h];
    for (u32 j = threadIdx.x; j < table; j += blockDim.x) { keys[j] = EMPTY_KEY; vals[j] = (A)0; }
    if (threadIdx.x == 0) cursor = 0;
    __syncthreads();
    for (u64 p = s_ptr[s] + threadIdx.x; p < s_ptr[s + 1]; p += blockDim.x) {
        const u32 c = s_col[p];
        if (mask_keeps(m_ptr, m_col, has_mask, grow, base + c))
            S::add_heavy(&vals[map_slot(keys, table, c)], s_val[p]);
    }
    __syncthreads();
    const u32 n = compact_and_sort(keys, vals, table, &cursor);
    const u64 out = chunk_out(gs, c_ptr, heavy_rows, h, base, width_shift, nchunks);
    for (u32 j = threadIdx.x; j < n; j += blockDim.x) {
        c_col[out + j] = base + keys[j];
        c_val[out + j] = S::value(vals[j]);
    }
}

// Dense accumulators over a chunk `width` columns wide (a power of two, a multiple of 32). A
// byte per column marks presence: every writer stores the same 1, so no atomic is needed (a
// bitmap needs atomicOr, and the consecutive columns of one B row all hit the same word).

// The entries of a chunk: the marked bytes, counted four at a time.
__device__ __forceinline__ u32 marked_in_word(u32 w) {
    return __popc(w & 0x01010101u);
}

extern "C" __global__ void __launch_bounds__(1024)
dense_segs_symbolic(const u64* s_ptr, const u32* s_col, const u32* segs, const u32* s_h,
                    const u32* s_base, u32 width, u32 width_shift, u32 nchunks,
                    const u32* heavy_rows, u64 row0, const u64* m_ptr, const u32* m_col,
                    int has_mask, u64* grid) {
    extern __shared__ u32 flag_words[];
    unsigned char* flags = (unsigned char*)flag_words;
    __shared__ u64 tmp[WARP];
    __shared__ u64 total;
    const u32 s = segs[blockIdx.x];
    const u32 h = s_h[s], base = s_base[s];
    const u64 grow = row0 + heavy_rows[h];
    const u32 words = width / 4;
    for (u32 w = threadIdx.x; w < words; w += blockDim.x) flag_words[w] = 0;
    __syncthreads();
    for (u64 p = s_ptr[s] + threadIdx.x; p < s_ptr[s + 1]; p += blockDim.x) {
        const u32 c = s_col[p];
        if (mask_keeps(m_ptr, m_col, has_mask, grow, base + c)) flags[c] = 1;
    }
    __syncthreads();
    u64 mine = 0;
    for (u32 w = threadIdx.x; w < words; w += blockDim.x) mine += marked_in_word(flag_words[w]);
    block_exclusive_scan_u64(mine, tmp, &total);
    if (threadIdx.x == 0) grid[grid_slot(h, base, width_shift, nchunks)] = total;
}

template <typename T, typename S>
__device__ void dense_segs_numeric(const u64* s_ptr, const u32* s_col,
                                   const typename S::Heavy* s_val, const u32* segs, const u32* s_h, const u32* s_base, u32 width,
                                   u32 width_shift, u32 nchunks, const u32* heavy_rows, u64 row0,
                                   const u64* m_ptr, const u32* m_col, int has_mask,
                                   const u64* gs, const u64* c_ptr, u32* c_col, T* c_val,
                                   unsigned char* smem) {
    typedef typename S::Acc A;
    A* vals = (A*)smem;
    u32* flag_words = (u32*)(smem + (u64)width * sizeof(A));
    unsigned char* flags = (unsigned char*)flag_words;
    const u32 s = segs[blockIdx.x];
    const u32 h = s_h[s], base = s_base[s];
    const u64 grow = row0 + heavy_rows[h];
    const u32 words = width / 4;
    for (u32 j = threadIdx.x; j < width; j += blockDim.x) vals[j] = (A)0;
    for (u32 w = threadIdx.x; w < words; w += blockDim.x) flag_words[w] = 0;
    __syncthreads();
    for (u64 p = s_ptr[s] + threadIdx.x; p < s_ptr[s + 1]; p += blockDim.x) {
        const u32 c = s_col[p];
        if (mask_keeps(m_ptr, m_col, has_mask, grow, base + c)) {
            S::add_heavy(&vals[c], s_val[p]);
            flags[c] = 1;
        }
    }
    __syncthreads();
    // Write the entries in column order, a round of blockDim columns at a time: each warp ranks
    // its marked columns with a ballot, warp 0 offsets the warps, and consecutive entries go to
    // consecutive places in C (coalesced).
    __shared__ u32 warp_tot[WARP];
    __shared__ u32 round_tot;
    const u32 lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nwarps = blockDim.x / WARP;
    u64 at = chunk_out(gs, c_ptr, heavy_rows, h, base, width_shift, nchunks);
    for (u32 c0 = 0; c0 < width; c0 += blockDim.x) {
        const u32 c = c0 + threadIdx.x;
        const bool marked = c < width && flags[c];
        const u32 ballot = __ballot_sync(0xffffffffu, marked);
        if (lane == 0) warp_tot[warp] = __popc(ballot);
        __syncthreads();
        if (warp == 0) {
            const u32 v = lane < nwarps ? warp_tot[lane] : 0;
            u32 inc = v;
            #pragma unroll
            for (u32 d = 1; d < WARP; d <<= 1) {
                const u32 o = __shfl_up_sync(0xffffffffu, inc, d);
                if (lane >= d) inc += o;
            }
            if (lane < nwarps) warp_tot[lane] = inc - v;
            if (lane == WARP - 1) round_tot = inc;
        }
        __syncthreads();
        if (marked) {
            const u64 dest = at + warp_tot[warp] + __popc(ballot & ((1u << lane) - 1));
            c_col[dest] = base + c;
            c_val[dest] = S::value(vals[c]);
        }
        at += round_tot;
        __syncthreads();
    }
}
