// MCL's expansion and pruning fused, for the dense rows of kernels/dense.cu. When a whole row of
// M² fits one window of shared memory, each block makes one column of M² there (a row of the
// transposed matrix gmcl keeps), prunes, inflates and normalises it in place with
// kernels/mcl.cu's plan_column and write_column, and writes only the entries it keeps, into a
// pool claimed with an atomic counter. The unpruned column never reaches global memory, and no
// symbolic pass is needed. The caller has checked that every product is positive, so a 0 in
// the window is a column without products and needs no presence bit. Products are summed as
// MCL's order-free sums (integer quanta, then narrowed to T in place), as every engine sums them.
// Wider rows go to mcl_wide_prune (below), which makes them a window at a time.

// Narrows the block's window of `len` quanta (8 bytes each) in place to their values in T: a
// round of blockDim entries at a time, all read before any is written. A round's writes reach
// at most the quanta of its own and earlier rounds (a value is at most as wide as a quantum
// count), so nothing is overwritten before it is read. Every thread must call.
template <typename T>
__device__ void quanta_to_values(unsigned char* window, u64 len) {
    const u64* q = (const u64*)window;
    T* v = (T*)window;
    for (u64 i0 = 0; i0 < len; i0 += blockDim.x) {
        const u64 i = i0 + threadIdx.x;
        const u64 x = i < len ? q[i] : 0;
        __syncthreads();
        if (i < len) v[i] = QuantaSum<T>::value(x);
    }
    __syncthreads();
}

// Ends a planned column of both fused kernels: its figures (chaos, entries made), room for its
// kept entries claimed in the pool (fused_len[r], pool_at[r]; NOT_FUSED when the pool is full),
// then mcl's emergency loop (node node0 + r keeps only itself) or the kept entries, candidate
// i of `len` given by entry(i, &col, &val). Every thread must call; claim, stmp and total are
// shared memory.
template <typename T, typename Entry>
__device__ void pool_column(const ColumnPlan<T>& plan, u32 r, u64 node0, u64 len, Entry entry,
                            double inflation, u64 pool_cap, u64* pool_used, u64* fused_len,
                            u64* pool_at, u32* pool_col, T* pool_val, u64* expanded,
                            u64* chaos_bits, u64* claim, u64* stmp, u64* total) {
    if (threadIdx.x == 0) {
        if (plan.chaos > 0.0) atomicMax(chaos_bits, (u64)__double_as_longlong(plan.chaos));
        atomicAdd(expanded, plan.entries);
        const u64 at = atomicAdd(pool_used, plan.out_len);
        *claim = at + plan.out_len <= pool_cap ? at : NOT_FUSED;
        fused_len[r] = plan.out_len;
        pool_at[r] = *claim;
    }
    __syncthreads();
    const u64 base = *claim;
    if (base == NOT_FUSED || plan.out_len == 0) return;  // uniform
    if (plan.kept_mass < 0.0) {
        // mcl's emergency loop: the node keeps only itself.
        if (threadIdx.x == 0) {
            pool_col[base] = (u32)(node0 + r);
            pool_val[base] = (T)1;
        }
        return;
    }
    write_column<T>(len, entry, plan.bar, plan.kept_mass, plan.isum, inflation, base, pool_col,
                    pool_val, stmp, total);
}

// Makes, prunes and writes rows `rows[blockIdx.x]` of the batch starting at row `row0` of A·B
// (A: a_ptr, a_col, a_val; B: b_ptr, b_col, b_val; ncols columns; exact_below: see makes_exact;
// window: ncols quanta of dynamic shared memory); row r of the batch is node `node0 + r` (in one
// process A = B = M and node0 = row0; across ranks A holds a rank's rows and B the rows they
// need). Each row
// r gets fused_len[r] (its kept entries) and pool_at[r], where they start in the pool
// (NOT_FUSED when the pool's pool_cap entries ran out: *pool_used then exceeds pool_cap and the
// caller runs the kernel again with a pool of *pool_used entries). Entries made count into
// *expanded, the largest chaos into *chaos_bits.
template <typename T>
__device__ void mcl_dense_prune(const u64* a_ptr, const u32* a_col, const T* a_val,
                                const u64* b_ptr, const u32* b_col, const T* b_val, u64 row0,
                                u64 node0, const u32* rows, u64 ncols, u64 exact_below,
                                T cutoff, u32 select,
                                u32 recover, double pct, double inflation, u64 pool_cap,
                                u64* pool_used, u64* fused_len, u64* pool_at, u32* pool_col,
                                T* pool_val, u64* expanded, u64* chaos_bits, unsigned char* window) {
    __shared__ double dtmp[WARP];
    __shared__ u32 hist[256];
    __shared__ u64 sel[2];
    __shared__ u64 stmp[WARP];
    __shared__ u64 total;
    __shared__ u64 claim;
    const u32 r = rows[blockIdx.x];
    const u64 a0 = a_ptr[row0 + r], a1 = a_ptr[row0 + r + 1];
    const bool exact = block_row_exact(a_col, a0, a1, b_ptr, exact_below, dtmp);
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    u64* sums = (u64*)window;
    for (u64 c = threadIdx.x; c < ncols; c += blockDim.x) sums[c] = 0;
    __syncthreads();
    for (u64 e = a0 + warp; e < a1; e += nwarps) {
        const T s = scaled(a_val[e]);  // every product is positive here
        window_entries<T, true>(b_ptr, b_col, b_val, a_col[e], 0, ncols, lane, [&](u32 at, T bv) {
            QuantaSum<T>::add_positive(&sums[at], s, bv, exact);
        });
    }
    __syncthreads();
    quanta_to_values<T>(window, ncols);
    const T* acc = (const T*)window;
    const ColumnPlan<T> plan = plan_column<T>(acc, ncols, ValueBits<T>::value(1), cutoff, select,
                                              recover, pct, inflation, dtmp, hist, sel);
    pool_column<T>(
        plan, r, node0, ncols,
        [&](u64 i, u32* col, T* val) {
            *col = (u32)i;
            *val = acc[i];
        },
        inflation, pool_cap, pool_used, fused_len, pool_at, pool_col, pool_val, expanded,
        chaos_bits, &claim, stmp, &total);
}

// Bytes at the start of mcl_wide_prune's dynamic shared memory before its window: the cursors,
// then row_entries' list (rounded up to 16 bytes).
#define MCL_WIDE_HEAD_BYTES 18448
static_assert(MCL_WIDE_HEAD_BYTES >= DENSE_CURSOR_BYTES + ROW_LIST_WORDS * 4 &&
                  MCL_WIDE_HEAD_BYTES % 16 == 0,
              "the head holds the cursors and the list, and keeps the window aligned");

// A wide row's item that the block makes whole, in its own scratch row.
#define WHOLE_ROW 0xffffffffu

// Joins the parts of a split row in place: part q of `parts` (its entries written at its first
// column, q * nwin / parts windows of `window` columns in, lens[q] of them, by any block) moved
// down to follow part q - 1, in rounds of blockDim entries, each read (past L1: other blocks
// wrote them) before any is written. A part never holds more entries than its columns, so a
// round writes only below what later rounds and parts read. Returns the row's entries. Every
// thread must call.
template <typename T>
__device__ u64 join_parts(u32* col, T* val, const u64* lens, u32 parts, u64 nwin, u32 window) {
    u64 to = 0;
    for (u32 q = 0; q < parts; ++q) {
        const u64 from = q * nwin / parts * window;
        const u64 len = __ldcg(lens + q);
        for (u64 i0 = 0; i0 < len; i0 += blockDim.x) {
            const u64 i = i0 + threadIdx.x;
            u32 c = 0;
            T v = (T)0;
            if (i < len) {
                c = __ldcg(col + from + i);
                v = __ldcg(val + from + i);
            }
            __syncthreads();
            if (i < len) {
                col[to + i] = c;
                val[to + i] = v;
            }
        }
        to += len;
    }
    __syncthreads();
    return to;
}

// mcl_dense_prune for columns wider than one window of shared memory: a row of the batch is made
// a window of `window` columns at a time (its quanta in shared memory; each A entry's place in
// its B row kept from one window to the next, as the dense-row kernels keep it: past the shared
// cursors, in the block's `more_len` cursors at more_cursors + blockIdx.x * more_len; where a
// walk cannot resume, and at the end of a long B row's share of a window, read from `bounds`,
// window_bounds' table of B, when it is made, else searched for), and each
// window's entries are narrowed to T and appended, in column order, to a scratch row. The whole
// column is then pruned, inflated and written from there exactly as mcl_dense_prune does it from
// its window: an entry is a column with products (every product is positive), so the plan sees
// the same values.
// The blocks claim work items one at a time, in list order, from the counter *next_item (0 at
// launch): a few rows of a power-law graph take many times the others' work, and rows dealt out
// in turns left most multiprocessors idle while a few finished theirs (the caller lists the
// heaviest first). Item i (items[i]: x the row, y its part p | parts << 16, z its split slot, w
// where its parts' lengths start in part_len) is a whole row (z == WHOLE_ROW: made in the block's
// scratch row, scratch_col/scratch_val + blockIdx.x * ncols) or part p of a row split into
// `parts` runs of windows (the heaviest rows, which alone outlasted the rest of the launch): a
// part writes its entries at its first column of the row's own scratch row (split_col/split_val
// + z * ncols), and the block that ends the row's last part (parts_done[z] counts them) joins
// the parts and prunes the row. The other arguments are mcl_dense_prune's.
template <typename T>
__device__ void mcl_wide_prune(const u64* a_ptr, const u32* a_col, const T* a_val,
                               const u64* b_ptr, const u32* b_col, const T* b_val, u64 row0,
                               u64 node0, const uint4* items, u64 nitems, u64 ncols,
                               u64 exact_below, u32 window,
                               T cutoff, u32 select, u32 recover, double pct, double inflation,
                               u64 pool_cap, u64* pool_used, u64* fused_len, u64* pool_at,
                               u32* pool_col, T* pool_val, u64* expanded, u64* chaos_bits,
                               u32* scratch_col, T* scratch_val, u32* split_col, T* split_val,
                               u64* part_len, u32* parts_done, u32* more_cursors, u64 more_len,
                               const u32* bounds, u32 per_row, u64* next_item,
                               unsigned char* smem) {
    __shared__ double dtmp[WARP];
    __shared__ u32 hist[256];
    __shared__ u64 sel[2];
    __shared__ u64 stmp[WARP];
    __shared__ u64 total;
    __shared__ u64 claim;
    __shared__ u64 walked;
    __shared__ u64 claimed;
    __shared__ u32 last_part;
    const Cursors cur = {(u32*)smem, &walked, more_cursors + blockIdx.x * more_len, more_len,
                         bounds, per_row, window};
    u32* list = (u32*)(smem + DENSE_CURSOR_BYTES);
    u64* sums = (u64*)(smem + MCL_WIDE_HEAD_BYTES);
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    const u64 nwin = (ncols + window - 1) / window;
    for (;;) {
        __syncthreads();  // the last item is done with the shared state
        if (threadIdx.x == 0) {
            claimed = atomicAdd(next_item, 1ull);
            walked = ~0ull;
        }
        __syncthreads();
        if (claimed >= nitems) break;  // uniform
        const uint4 item = items[claimed];
        const u32 r = item.x, p = item.y & 0xffffu, parts = item.y >> 16;
        const bool split = item.z != WHOLE_ROW;
        u32* row_col = split ? split_col + (u64)item.z * ncols : scratch_col + blockIdx.x * ncols;
        T* row_val = split ? split_val + (u64)item.z * ncols : scratch_val + blockIdx.x * ncols;
        const u64 first = p * nwin / parts * window;
        const u64 last = (p + 1) * nwin / parts * window;
        const u64 end = last < ncols ? last : ncols;
        const u64 a0 = a_ptr[row0 + r], a1 = a_ptr[row0 + r + 1];
        const bool exact = block_row_exact(a_col, a0, a1, b_ptr, exact_below, dtmp);
        u64 filled = first;
        for (u64 c0 = first; c0 < end; c0 += window) {
            const u32 span = (u32)(c0 + window < ncols ? window : ncols - c0);
            for (u32 c = threadIdx.x; c < span; c += blockDim.x) sums[c] = 0;
            // row_entries starts and ends with barriers.
            row_entries<T, true, true>(a_col, a_val, a0, a1, b_ptr, b_col, b_val, c0, c0 + span,
                                       ncols, list, cur, [&](T av, u32 at, T bv) {
                                           // Every product is positive here.
                                           QuantaSum<T>::add_positive(&sums[at], scaled(av),
                                                                      bv, exact);
                                       });
            // The window's entries appended in column order: each warp counts a contiguous
            // stretch of the window, and one scan of the warps' counts places them (a scan of
            // the block per blockDim columns kept the block at its barriers).
            const u32 stretch = ((span + nwarps - 1) / nwarps + WARP - 1) / WARP * WARP;
            const u32 lo = warp * stretch < span ? warp * stretch : span;
            const u32 hi = lo + stretch < span ? lo + stretch : span;
            u32 count = 0;
            for (u32 c = lo + lane; c - lane < hi; c += WARP)
                count += __popc(__ballot_sync(0xffffffffu, c < hi && sums[c] != 0));
            u64 at = block_exclusive_scan_u64(lane == 0 ? count : 0, stmp, &total);
            at = filled + __shfl_sync(0xffffffffu, at, 0);
            for (u32 c = lo + lane; c - lane < hi; c += WARP) {
                const u64 q = c < hi ? sums[c] : 0;
                const u32 m = __ballot_sync(0xffffffffu, q != 0);
                if (q != 0) {
                    const u64 k = at + __popc(m & ((1u << lane) - 1));
                    row_col[k] = (u32)(c0 + c);
                    row_val[k] = QuantaSum<T>::value(q);
                }
                at += __popc(m);
            }
            filled += total;
            __syncthreads();  // every warp has read its stretch before the next window's zeros
        }
        if (split) {
            // The part published (its entries, then its length) before it is counted done.
            if (threadIdx.x == 0) part_len[item.w + p] = filled - first;
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0) last_part = atomicAdd(&parts_done[item.z], 1u) == parts - 1;
            __syncthreads();
            if (!last_part) continue;  // uniform
            __threadfence();
            filled = join_parts<T>(row_col, row_val, part_len + item.w, parts, nwin, window);
        }
        __syncthreads();  // the scratch row is written
        const ColumnPlan<T> plan = plan_column<T>(row_val, filled, ValueBits<T>::value(1), cutoff,
                                                  select, recover, pct, inflation, dtmp, hist,
                                                  sel);
        pool_column<T>(
            plan, r, node0, filled,
            [&](u64 k, u32* col, T* val) {
                *col = row_col[k];
                *val = row_val[k];
            },
            inflation, pool_cap, pool_used, fused_len, pool_at, pool_col, pool_val, expanded,
            chaos_bits, &claim, stmp, &total);
    }
}

#define GMCL_MCL_DENSE_KERNELS(T, S)                                                             \
extern "C" __global__ void __launch_bounds__(DENSE_ROW_THREADS)                                  \
mcl_dense_prune_##S(const u64* a_ptr, const u32* a_col, const T* a_val, const u64* b_ptr,        \
                    const u32* b_col, const T* b_val, u64 row0, u64 node0, const u32* rows,      \
                    u64 ncols, u64 exact_below, T cutoff, u32 select, u32 recover, double pct,   \
                    double inflation,                                                            \
                    u64 pool_cap, u64* pool_used, u64* fused_len, u64* pool_at,                  \
                    u32* pool_col, T* pool_val, u64* expanded, u64* chaos_bits) {                \
    extern __shared__ __align__(16) unsigned char smem_mcl_dense_##S[];                          \
    mcl_dense_prune<T>(a_ptr, a_col, a_val, b_ptr, b_col, b_val, row0, node0, rows, ncols,       \
                       exact_below, cutoff, select, recover, pct, inflation, pool_cap, pool_used, fused_len,  \
                       pool_at, pool_col, pool_val, expanded, chaos_bits, smem_mcl_dense_##S);   \
}                                                                                                \
extern "C" __global__ void __launch_bounds__(DENSE_ROW_THREADS)                                  \
mcl_wide_prune_##S(const u64* a_ptr, const u32* a_col, const T* a_val, const u64* b_ptr,         \
                   const u32* b_col, const T* b_val, u64 row0, u64 node0, const uint4* items,    \
                   u64 nitems, u64 ncols, u64 exact_below, u32 window, T cutoff, u32 select,     \
                   u32 recover,                                                                  \
                   double pct, double inflation, u64 pool_cap, u64* pool_used, u64* fused_len,   \
                   u64* pool_at, u32* pool_col, T* pool_val, u64* expanded, u64* chaos_bits,     \
                   u32* scratch_col, T* scratch_val, u32* split_col, T* split_val,               \
                   u64* part_len, u32* parts_done, u32* more_cursors, u64 more_len,              \
                   const u32* bounds, u32 per_row, u64* next_item) {                             \
    extern __shared__ __align__(16) unsigned char smem_mcl_wide_##S[];                           \
    mcl_wide_prune<T>(a_ptr, a_col, a_val, b_ptr, b_col, b_val, row0, node0, items, nitems,      \
                      ncols, exact_below, window, cutoff, select, recover, pct, inflation, pool_cap,          \
                      pool_used, fused_len, pool_at, pool_col, pool_val, expanded, chaos_bits,   \
                      scratch_col, scratch_val, split_col, split_val, part_len, parts_done,      \
                      more_cursors, more_len, bounds, per_row, next_item, smem_mcl_wide_##S);    \
}

GMCL_MCL_DENSE_KERNELS(float, f32)
GMCL_MCL_DENSE_KERNELS(double, f64)
