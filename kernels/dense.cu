// Dense rows: rows of C with many intermediate products against C's width (at least C's columns
// / DENSE_FRACTION; the expansions of MCL and the hub rows of R-MAT products). Row by row
// (Gustavson) into a dense accumulator in shared memory, one block per row: B's entries are read
// once and nothing goes through global memory but C itself, where the outer product would write
// and multisplit every product. Presence is one bit per column (a sum may be 0 and still be an
// entry). Values are summed at their columns' ranks among the presence bits (rank windows), or,
// where the shared memory is too small for those, a window of `width` columns at a time. The
// block's warps take A's entries in turn; long B rows are cut into pieces shared out over the
// warps.

#define DENSE_ROW_THREADS 1024
// B entries a lane loads before using them: one block fills a multiprocessor, so its 32 warps
// must keep several loads each in flight to cover the memory latency (H100, MCL at s16: 2 loads
// 0.99 s, 4 loads 0.89 s, 8 loads 0.80 s in all).
#ifndef DENSE_UNROLL
#define DENSE_UNROLL 8
#endif

// The first j in [lo, hi) with col[j] >= c (hi when none; col sorted): one lane's binary search.
__device__ __forceinline__ u64 lane_first_at_least(const u32* col, u64 lo, u64 hi, u64 c) {
    while (lo < hi) {
        const u64 mid = lo + ((hi - lo) >> 1);
        if (col[mid] < c) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// The first entry of B's row k at column >= c (b_ptr[k + 1] when none); the search is skipped
// for the first window.
__device__ __forceinline__ u64 window_start(const u64* b_ptr, const u32* b_col, u32 k, u64 c) {
    const u64 lo = b_ptr[k];
    return c == 0 ? lo : lane_first_at_least(b_col, lo, b_ptr[k + 1], c);
}

// The entries of a B row from index j (the lane's first) to `end` whose column is below c1, in
// steps of DENSE_UNROLL * WARP, `stride` apart; calls visit(column - c0, value). Columns are
// sorted, so the first one past the window ends the lane's walk.
template <typename T, bool VALUES, typename Visit>
__device__ __forceinline__ void walk_b_row(const u32* b_col, const T* b_val, u64 j, u64 end,
                                           u64 stride, u64 c0, u64 c1, Visit visit) {
    for (bool inside = true; inside && j < end; j += stride) {
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

// The first j in [lo, hi) with col[j] >= c (hi when none; col sorted), the warp's lanes searching
// together: each step probes 32 places at once and narrows the range 32-fold, so a step costs
// one round trip to memory where a binary search pays five. Every lane of the warp must call,
// with the same arguments; every lane gets the answer.
__device__ __forceinline__ u64 warp_first_at_least(const u32* col, u64 lo, u64 hi, u64 c,
                                                   u32 lane) {
    while (hi - lo > WARP) {
        const u64 step = (hi - lo + WARP - 1) / WARP;
        const u64 j = lo + lane * step;
        const u32 below = __popc(__ballot_sync(0xffffffffu, j < hi && col[j] < c));
        if (below == 0) return lo;
        // Probe below - 1 is under c and probe `below` is not (or past hi).
        const u64 next_hi = lo + (u64)below * step;
        lo += (u64)(below - 1) * step + 1;
        hi = next_hi < hi ? next_hi : hi;
    }
    const u64 j = lo + lane;
    return lo + __popc(__ballot_sync(0xffffffffu, j < hi && col[j] < c));
}

// The first j in [j0, end) with col[j] >= c (end when none): warp_first_at_least over ranges
// from j0 that grow 32-fold, so an end a few entries past j0 (a B row's share of one window)
// costs one load of the warp. Every lane of the warp must call, with the same arguments.
__device__ __forceinline__ u64 warp_window_end(const u32* col, u64 j0, u64 end, u64 c, u32 lane) {
    u64 lo = j0, span = WARP;
    while (lo < end) {
        const u64 hi = end - lo > span ? lo + span : end;
        const u64 j = warp_first_at_least(col, lo, hi, c, lane);
        if (j < hi || hi == end) return j;
        lo = hi;
        span *= WARP;
    }
    return end;
}

// A entries of a row whose place in their B rows row_entries keeps between walks.
#define DENSE_CURSORS 4096
// Bytes the cursors take at the start of the dense-row kernels' dynamic shared memory.
#define DENSE_CURSOR_BYTES (DENSE_CURSORS * 4)

// Where a row's walks stand in B's rows. A row's windows (and a rank window's chunks) are walked
// in column order, each starting where the last ended: a cursor keeps, for an A entry of the
// row, the offset in its B row of the first entry at or past column `*at` (the end of the last
// walk), so the next walk reads its start instead of searching the B row again. `pos` holds the
// first DENSE_CURSORS entries' cursors in shared memory; `more` (the block's own, in global
// memory; null when `more_len` is 0) the next `more_len` entries'; an entry past both is searched
// for in every walk. *at is in shared memory, block-uniform, ~0 before the row's first walk.
// `bounds` (null when not made; see window_bounds) gives, for every B row k and every window
// boundary w·window inside C's columns, the first entry at or past it, so that a walk that
// cannot resume reads its start, and a long row its end, instead of searching for them.
struct Cursors {
    u32* pos;
    u64* at;
    u32* more;
    u64 more_len;
    const u32* bounds = nullptr;
    u32 per_row = 0;
    u32 window = 0;
    // The cursor of the row's A entry `i` (from the row's first), null when it has none.
    __device__ __forceinline__ u32* of(u64 i) const {
        if (i < DENSE_CURSORS) return pos + i;
        return i - DENSE_CURSORS < more_len ? more + (i - DENSE_CURSORS) : nullptr;
    }
    // The first entry of B's row k (starting at rb) at or past column c: c a window boundary
    // strictly inside C's columns. Only where `bounds` is made.
    __device__ __forceinline__ u64 bound(u64 rb, u32 k, u64 c) const {
        return rb + bounds[(u64)k * per_row + c / window - 1];
    }
};

// bounds[k * per_row + w - 1] = the entries of B's row k below column w·window, for w in
// [1, per_row] (the window boundaries inside C's columns): a thread per row and boundary, each a
// binary search of the row.
extern "C" __global__ void window_bounds(const u64* b_ptr, const u32* b_col, u64 nrows,
                                         u32 window, u32 per_row, u32* bounds) {
    const u64 total = nrows * per_row;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 k = i / per_row, w = i % per_row + 1;
        const u64 rb = b_ptr[k];
        bounds[i] = (u32)(lane_first_at_least(b_col, rb, b_ptr[k + 1], w * window) - rb);
    }
}

// Calls visit(at, value) for each entry of B's row k whose column lies in the window [c0, c1),
// `at` being the column's place in the window (value 0 unless VALUES). The warp's lanes share the
// row, each keeping DENSE_UNROLL loads in flight.
template <typename T, bool VALUES, typename Visit>
__device__ __forceinline__ void window_entries(const u64* b_ptr, const u32* b_col, const T* b_val,
                                               u32 k, u64 c0, u64 c1, u32 lane, Visit visit) {
    walk_b_row<T, VALUES>(b_col, b_val, window_start(b_ptr, b_col, k, c0) + lane, b_ptr[k + 1],
                          DENSE_UNROLL * WARP, c0, c1, visit);
}

// Lanes' B rows whose first WARP entries in a window a warp reads at once: each is two loads in
// flight a lane; more than two rows spill registers under the kernels' 64-register bound.
#ifndef PROBE
#define PROBE 2
#endif
static_assert(PROBE >= 1 && WARP % PROBE == 0,
              "PROBE divides the warp: a group of rows must not reach past lane 31");
// 1: a B row longer than its probe has its probed entries visited at once, and only the rest
// walked again (0: the whole row walked again, the probe's loads dropped).
#ifndef PROBE_KEEPS_HEAD
#define PROBE_KEEPS_HEAD 1
#endif

// row_entries' first pass over A's entries [a0, a1) for narrow windows: warp w takes entries w,
// w + nwarps, ..., WARP of them at a time, one a lane, and reads the first WARP entries in the
// window of PROBE of its lanes' B rows at once, columns and values together, every load in
// flight before any is used (one A entry at a time, a warp waited on a chain of loads per
// entry: its end's search, then the walk). The probed entries' products go to visit; a B row
// with more entries in the window than that (every probed entry inside, more behind them) gets
// its end from a warp search, and its entries past the probe (PROBE_KEEPS_HEAD) go to
// take(offset, row start, j0, j1, a). Keeps the cursors.
template <typename T, bool VALUES, typename Take, typename Visit>
__device__ __forceinline__ void entries_probed(const u32* a_col, const T* a_val, u64 a0, u64 a1,
                                               const u64* b_ptr, const u32* b_col,
                                               const T* b_val, u64 c0, u64 c1, u64 ncols,
                                               bool resume, Cursors cur, Take take, Visit visit) {
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    for (u64 g = 0; a0 + warp + g * nwarps < a1; g += WARP) {
        const u64 e = a0 + warp + (g + lane) * nwarps;
        const bool mine = e < a1;
        u32* const kept = mine ? cur.of(e - a0) : nullptr;
        u64 rb = 0, re = 0, j0 = 0;
        T av = (T)0;
        if (mine) {
            const u32 k = a_col[e];
            const u32 at = resume && kept ? *kept : 0;
            rb = b_ptr[k];
            re = b_ptr[k + 1];
            j0 = c0 == 0          ? rb
                 : resume && kept ? rb + at
                 : cur.bounds     ? cur.bound(rb, k, c0)
                                  : lane_first_at_least(b_col, rb, re, c0);
            if (VALUES) av = a_val[e];
        }
        u64 j1 = j0;    // the end of this lane's entries in the window, once known
        u32 longs = 0;  // lanes whose rows are too long to probe
        for (u32 s = 0; s < WARP && a0 + warp + (g + s) * nwarps < a1; s += PROBE) {
            u32 c[PROBE];
            T v[PROBE];
            bool in[PROBE];
            #pragma unroll
            for (u32 u = 0; u < PROBE; ++u) {
                const u64 j = __shfl_sync(0xffffffffu, j0, s + u) + lane;
                in[u] = j < __shfl_sync(0xffffffffu, re, s + u);
                c[u] = in[u] ? b_col[j] : 0;
                v[u] = VALUES && in[u] ? b_val[j] : (T)0;
            }
            // The rows' starts and ends are shuffled again, not kept from above: registers.
            #pragma unroll
            for (u32 u = 0; u < PROBE; ++u) {
                in[u] = in[u] && c[u] < c1;
                const u32 m = __ballot_sync(0xffffffffu, in[u]);
                const u64 start = __shfl_sync(0xffffffffu, j0, s + u);
                if (m == 0xffffffffu && start + WARP < __shfl_sync(0xffffffffu, re, s + u)) {
                    longs |= 1u << (s + u);
                    in[u] = PROBE_KEEPS_HEAD;
                }
                if (lane == s + u) j1 = start + __popc(m);
                const T a = VALUES ? __shfl_sync(0xffffffffu, av, s + u) : (T)0;
                if (in[u]) visit(a, c[u] - (u32)c0, v[u]);
            }
        }
        while (longs != 0) {  // uniform
            const u32 l = __ffs(longs) - 1;
            longs &= longs - 1;
            const u64 start = __shfl_sync(0xffffffffu, j0, l);
            const u64 end = __shfl_sync(0xffffffffu, re, l);
            const u64 row = __shfl_sync(0xffffffffu, rb, l);
            const T a = VALUES ? __shfl_sync(0xffffffffu, av, l) : (T)0;
            // Lane l's B row read again (an L1 hit) rather than kept in a register for it.
            const u64 stop = c1 >= ncols ? end
                             : cur.bounds
                                 ? cur.bound(row, a_col[a0 + warp + (g + l) * nwarps], c1)
                                 : warp_window_end(b_col, start + WARP, end, c1, lane);
            if (lane == l) j1 = stop;
            take(warp + (g + l) * nwarps, row, PROBE_KEEPS_HEAD ? start + WARP : start, stop, a);
        }
        if (kept) *kept = (u32)(j1 - rb);
    }
}

// B rows longer than this many entries (within the window) are listed and shared out.
#define LISTED_B_ROW WARP
// Most B rows a block lists at a time; a warp walks the others itself.
#define ROW_LIST 128
// Words of the shared `list` that row_entries takes: per listed row its A entry, pieces, first
// entry and span; then the count and the number of pieces.
#define ROW_LIST_WORDS (4 * ROW_LIST + 2)

// Calls visit(a, at, b) for every product of A's row [a0, a1) with B whose column lies in the
// window [c0, c1) of C's `ncols` columns (`at`: its place in the window; a, b: the two values,
// 0 unless VALUES), spread evenly over the block. Warps take A's entries in turn and walk short
// B rows at once; longer ones are listed, cut into pieces of DENSE_UNROLL * WARP entries, and
// the pieces dealt to the warps: in a power-law B a few hub rows hold most products, and a warp
// walking a hub alone kept the rest of its block waiting at the next barrier. Each B row's
// entries in the window are found once, not per piece: the start from the row's cursor when
// the last walk ended at c0 (else a search), the end by a warp search from the start, kept as
// the next walk's start. PROBED: for a row made in many narrow windows, where most B rows have
// only a few entries in each, a warp finds the ends and walks the short rows of PROBE A entries
// at once (entries_probed) instead of one at a time. Starts and ends with the block in step
// (every thread must call). `list`: ROW_LIST_WORDS words of shared memory.
template <typename T, bool VALUES, bool PROBED = false, typename Visit>
__device__ void row_entries(const u32* a_col, const T* a_val, u64 a0, u64 a1, const u64* b_ptr,
                            const u32* b_col, const T* b_val, u64 c0, u64 c1, u64 ncols,
                            u32* list, Cursors cur, Visit visit) {
    u32* listed = list;                // A's entry, as an offset from a0
    u32* pieces = list + ROW_LIST;     // its pieces, then where they start among all pieces
    u32* first = list + 2 * ROW_LIST;  // its first entry in the window, from the row's start
    u32* span = list + 3 * ROW_LIST;   // its entries in the window
    u32& nlisted = list[4 * ROW_LIST];
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    const u64 piece = DENSE_UNROLL * WARP;
    // B row [j0, j1) of A entry a0 + at (its row starting at rb) listed for the block to share
    // out, or walked by the warp when the row is short or the list full. Every lane of the warp
    // must call, with the same arguments.
    auto take = [&](u64 at, u64 rb, u64 j0, u64 j1, T av) {
        if (j1 - j0 > LISTED_B_ROW) {
            u32 slot = 0;
            if (lane == 0) slot = atomicAdd(&nlisted, 1u);
            slot = __shfl_sync(0xffffffffu, slot, 0);
            if (slot < ROW_LIST) {
                if (lane == 0) {
                    listed[slot] = (u32)at;
                    pieces[slot] = (u32)((j1 - j0 + piece - 1) / piece);
                    first[slot] = (u32)(j0 - rb);
                    span[slot] = (u32)(j1 - j0);
                }
                return;
            }
        }
        walk_b_row<T, VALUES>(b_col, b_val, j0 + lane, j1, piece, c0, c1,
                              [&](u32 c, T bv) { visit(av, c, bv); });
    };
    __syncthreads();
    if (threadIdx.x == 0) nlisted = 0;
    const bool resume = *cur.at == c0;
    __syncthreads();
    if constexpr (PROBED) {
        entries_probed<T, VALUES>(a_col, a_val, a0, a1, b_ptr, b_col, b_val, c0, c1, ncols,
                                  resume, cur, take, visit);
    } else {
        for (u64 e = a0 + warp; e < a1; e += nwarps) {
            const u32 k = a_col[e];
            const u64 rb = b_ptr[k], re = b_ptr[k + 1];
            u32* const kept = cur.of(e - a0);
            const u64 j0 = c0 == 0          ? rb
                           : resume && kept ? rb + *kept
                           : cur.bounds     ? cur.bound(rb, k, c0)
                                            : warp_first_at_least(b_col, rb, re, c0, lane);
            const u64 j1 = c1 >= ncols   ? re
                           : cur.bounds ? cur.bound(rb, k, c1)
                                        : warp_window_end(b_col, j0, re, c1, lane);
            __syncwarp();  // every lane has read the cursor before lane 0 moves it
            if (kept && lane == 0) *kept = (u32)(j1 - rb);
            take(e - a0, rb, j0, j1, VALUES ? a_val[e] : (T)0);
        }
    }
    __syncthreads();
    // Every thread has read *cur.at; the next walk's first barrier orders this write.
    if (threadIdx.x == 0) *cur.at = c1;
    const u32 n = nlisted < ROW_LIST ? nlisted : ROW_LIST;
    if (n == 0) return;  // uniform: every thread read the same count
    // Warp 0 turns the piece counts into starts (ROW_LIST / WARP per lane, in order).
    if (warp == 0) {
        constexpr u32 PER = ROW_LIST / WARP;
        u32 mine[PER], sum = 0;
        #pragma unroll
        for (u32 q = 0; q < PER; ++q) {
            const u32 i = lane * PER + q;
            mine[q] = i < n ? pieces[i] : 0;
            sum += mine[q];
        }
        u32 before = sum;
        #pragma unroll
        for (u32 d = 1; d < WARP; d <<= 1) {
            const u32 x = __shfl_up_sync(0xffffffffu, before, d);
            if (lane >= d) before += x;
        }
        before -= sum;
        #pragma unroll
        for (u32 q = 0; q < PER; ++q) {
            const u32 i = lane * PER + q;
            if (i < n) pieces[i] = before;
            before += mine[q];
        }
        if (lane == WARP - 1) list[4 * ROW_LIST + 1] = before;  // all pieces
    }
    __syncthreads();
    const u32 total = list[4 * ROW_LIST + 1];
    // The listed row of the warp's last piece, its first entry and A's value: a hub row's pieces
    // mostly come to the same warp in turn, which then skips the two dependent loads.
    u32 last = ~0u;
    u64 row = 0;
    T av = (T)0;
    for (u32 q = warp; q < total; q += nwarps) {  // q is the same on every lane of a warp
        // The last listed row whose pieces start at or before q: the starts ascend from 0, so
        // it is the number of starts at or before q, less one. The lanes test 32 starts at once
        // (a binary search paid a chain of shared loads per piece).
        u32 at_or_before = 0;
        for (u32 i0 = 0; i0 < n; i0 += WARP) {
            const u32 i = i0 + lane;
            at_or_before += __popc(__ballot_sync(0xffffffffu, i < n && pieces[i] <= q));
        }
        const u32 lo = at_or_before - 1;
        if (lo != last) {
            last = lo;
            const u64 e = a0 + listed[lo];
            row = b_ptr[a_col[e]] + first[lo];
            av = VALUES ? a_val[e] : (T)0;
        }
        const u64 j = row + (u64)(q - pieces[lo]) * piece, end = row + span[lo];
        walk_b_row<T, VALUES>(b_col, b_val, j + lane, j + piece < end ? j + piece : end, piece,
                              c0, c1, [&](u32 at, T bv) { visit(av, at, bv); });
    }
    __syncthreads();
}

// Counts the entries of each listed row of C = A·B (c_nnz[r] for batch row r = rows[i]); the
// window is `width` columns (a multiple of 32), its bits in dynamic shared memory after the
// cursors.
extern "C" __global__ void __launch_bounds__(DENSE_ROW_THREADS)
dense_rows_symbolic(const u64* a_ptr, const u32* a_col, const u64* b_ptr, const u32* b_col,
                    u64 row0, const u32* rows, u64 ncols, u32 width, u64* c_nnz) {
    extern __shared__ __align__(16) unsigned char smem_sym[];
    u32* bits = (u32*)(smem_sym + DENSE_CURSOR_BYTES);
    __shared__ double tmp[WARP];
    __shared__ u64 walked;
    const Cursors cur = {(u32*)smem_sym, &walked, nullptr, 0};
    if (threadIdx.x == 0) walked = ~0ull;
    const u32 r = rows[blockIdx.x];
    const u64 a0 = a_ptr[row0 + r], a1 = a_ptr[row0 + r + 1];
    __shared__ u32 list[ROW_LIST_WORDS];
    u64 count = 0;
    for (u64 c0 = 0; c0 < ncols; c0 += width) {
        const u64 c1 = c0 + width < ncols ? c0 + width : ncols;
        const u32 words = (u32)((c1 - c0 + 31) / 32);
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0;
        __syncthreads();
        row_entries<float, false>(a_col, (const float*)0, a0, a1, b_ptr, b_col, (const float*)0,
                                  c0, c1, ncols, list, cur, [&](float, u32 at, float) {
                                      atomicOr(&bits[at >> 5], 1u << (at & 31));
                                  });
        u64 mine = 0;
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) mine += __popc(bits[w]);
        // Counts are far below 2^53, so a double sum is exact.
        count += (u64)block_reduce_f64((double)mine, tmp, false);
    }
    if (threadIdx.x == 0) c_nnz[r] = count;
}

// Rank-compressed rows. A window of `window` columns (a multiple of RANK_BLOCK) keeps in shared
// memory its presence bits, each 64-column word's rank within its block of RANK_BLOCK columns
// (u16) and each block's rank in the window (u32): 164 bytes per 1024 columns, so 2^20 columns
// take 164 KiB. A walk over the row's products sets the bits; the ranks follow from them;
// then the values are summed at their columns' ranks, in chunks of whole blocks whose entries
// fit the values' room, each chunk one more walk of the products in its columns (a plain sum of
// a row that outgrows the room, or of RANK_IN_C_FROM entries, is made in C's own values instead,
// by global atomics in one walk). Values come out in column order with no sort, no empty column is cleared or scanned,
// and the cost of a row grows with its entries, not with C's width (rows of a few thousand
// entries against 2^20 columns: R-MAT A·B at scale 20).
#define RANK_BLOCK 1024
// Bytes of the bits, word ranks and block ranks of RANK_BLOCK columns.
#define RANK_BLOCK_BYTES (RANK_BLOCK / 8 + RANK_BLOCK / 64 * 2 + 4)
// Values a window leaves room for at least (a chunk holds at least one whole block).
#define RANK_MIN_VALUES 4096
// Entries of a 64-column word past which a whole warp writes its columns, and most such words
// listed at a time (the others are written by their own thread).
#ifndef CROWDED_WORD
#define CROWDED_WORD 8
#endif
#define CROWDED_LIST (ROW_LIST_WORDS - 2)
// 1: a row whose sums need no narrowing (S::IN_C) and that has at least RANK_IN_C_FROM entries,
// or more than the values' room, sums its products straight into its place in C (zeroed first)
// with global atomics (fire-and-forget, where a shared float add is a compare-and-swap loop) in
// one walk of its products, instead of in shared memory, one walk per chunk of the room (0).
#ifndef RANK_SUMS_IN_C
#define RANK_SUMS_IN_C 1
#endif
#ifndef RANK_IN_C_FROM
#define RANK_IN_C_FROM 1024
#endif

// The rank window for `shared` bytes and values of `val_bytes`: the widest multiple of
// RANK_BLOCK columns (no wider than C) that leaves room for RANK_MIN_VALUES values; 0 if none.
__device__ __forceinline__ u64 rank_window(u64 shared, u64 val_bytes, u64 ncols) {
    const u64 need = RANK_MIN_VALUES * val_bytes + 32;
    if (shared < need) return 0;
    const u64 widest = (shared - need) / RANK_BLOCK_BYTES * RANK_BLOCK;
    const u64 all = (ncols + RANK_BLOCK - 1) / RANK_BLOCK * RANK_BLOCK;
    return all < widest ? all : widest;
}

template <typename T, typename S>
__device__ void rank_row_numeric(u64 a0, u64 a1, const u32* a_col, const T* a_val,
                                 const u64* b_ptr, const u32* b_col, const T* b_val, u64 ncols,
                                 bool exact, u64 window, u64 shared, u64 out, u32* c_col, T* c_val,
                                 unsigned char* smem, u64* tmp, u64* total, u32* list,
                                 Cursors cur) {
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = blockDim.x / WARP;
    constexpr u32 WORDS = RANK_BLOCK / 64;  // 64-column words per block
    u32* bits = (u32*)smem;
    const u64* bits64 = (const u64*)smem;
    unsigned short* rel = (unsigned short*)(smem + window / 8);
    u32* base = (u32*)(smem + window / 8 + window / 32);
    const u64 acc_at = (window / 8 + window / 32 + (window / RANK_BLOCK + 1) * 4 + 15) / 16 * 16;
    typedef typename S::Acc A;
    A* acc = (A*)(smem + acc_at);
    const u32 room = (u32)((shared - acc_at) / sizeof(A));
    __shared__ u32 crowded;  // crowded words listed (in `list`, free once a walk is done)
    for (u64 c0 = 0; c0 < ncols; c0 += window) {
        const u64 c1 = c0 + window < ncols ? c0 + window : ncols;
        const u32 blocks = (u32)((c1 - c0 + RANK_BLOCK - 1) / RANK_BLOCK);
        for (u32 w = threadIdx.x; w < blocks * (RANK_BLOCK / 32); w += blockDim.x) bits[w] = 0;
        row_entries<float, false>(a_col, (const float*)0, a0, a1, b_ptr, b_col, (const float*)0,
                                  c0, c1, ncols, list, cur, [&](float, u32 c, float) {
                                      atomicOr(&bits[c >> 5], 1u << (c & 31));
                                  });
        // Ranks: half a warp per block, a lane per word.
        for (u32 p = warp; p * 2 < blocks; p += nwarps) {
            const u32 b = p * 2 + (lane >> 4), h = lane & 15;
            const bool mine = b < blocks;
            const u32 count = mine ? __popcll(bits64[b * WORDS + h]) : 0;
            u32 inc = count;
            #pragma unroll
            for (u32 d = 1; d < WORDS; d <<= 1) {
                const u32 x = __shfl_up_sync(0xffffffffu, inc, d, WORDS);
                if (h >= d) inc += x;
            }
            if (mine) {
                rel[b * WORDS + h] = (unsigned short)(inc - count);
                if (h == WORDS - 1) base[b] = inc;
            }
        }
        __syncthreads();
        u64 before = 0;
        for (u32 b0 = 0; b0 < blocks; b0 += blockDim.x) {
            const u32 b = b0 + threadIdx.x;
            const u64 at = block_exclusive_scan_u64(b < blocks ? base[b] : 0, tmp, total);
            if (b < blocks) base[b] = (u32)(before + at);
            before += *total;
        }
        if (threadIdx.x == 0) base[blocks] = (u32)before;
        __syncthreads();
        const bool chunked = base[blocks] > room;  // uniform: read after the barrier
        // Summed in C itself: the whole window is one chunk, its values C's.
        const bool in_c =
            RANK_SUMS_IN_C && S::IN_C && (chunked || base[blocks] >= RANK_IN_C_FROM);
        for (u32 from = 0; from < blocks;) {
            // The chunk: blocks [from, to), as many as the values' room takes (ranks only grow).
            const u32 lo = base[from];
            u32 to = in_c ? blocks : from;
            for (u32 b0 = from + 1; !in_c && b0 <= blocks; b0 += blockDim.x) {
                const u32 b = b0 + threadIdx.x;
                const u32 fits = __syncthreads_count(b <= blocks && base[b] - lo <= room);
                to += fits;
                if (fits < blockDim.x) break;  // uniform: every thread got the same count
            }
            const u32 here = base[to] - lo;
            if (threadIdx.x == 0) crowded = 0;  // row_entries' first barrier orders this
            if (in_c)
                for (u32 i = threadIdx.x; i < here; i += blockDim.x) c_val[out + i] = (T)0;
            else
                for (u32 i = threadIdx.x; i < here; i += blockDim.x) acc[i] = (A)0;
            const u64 cs = c0 + (u64)from * RANK_BLOCK;
            const u64 ce = c0 + (u64)to * RANK_BLOCK < c1 ? c0 + (u64)to * RANK_BLOCK : c1;
            const u32 skip = from * RANK_BLOCK;
            const auto rank = [&](u32 at) {
                const u32 c = at + skip;
                const u64 below = bits64[c >> 6] & ((1ull << (c & 63)) - 1);
                return base[c / RANK_BLOCK] + rel[c >> 6] + __popcll(below) - lo;
            };
            const auto add = [&](T av, u32 at, T bv) {
                S::add_product(&acc[rank(at)], av, bv, exact);
            };
            // The block's zeros come before its atomics: row_entries starts with a barrier.
            const auto add_in_c = [&](T av, u32 at, T bv) {
                atomicAdd(&c_val[out + rank(at)], product_rn(av, bv));
            };
            // A row summed in several chunks walks its B rows once a chunk, most of them with
            // only a few entries in each: the probed pass reads those for many A entries at once.
            if (in_c)
                row_entries<T, true>(a_col, a_val, a0, a1, b_ptr, b_col, b_val, cs, ce, ncols,
                                     list, cur, add_in_c);
            else if (chunked)
                row_entries<T, true, true>(a_col, a_val, a0, a1, b_ptr, b_col, b_val, cs, ce,
                                           ncols, list, cur, add);
            else
                row_entries<T, true>(a_col, a_val, a0, a1, b_ptr, b_col, b_val, cs, ce, ncols,
                                     list, cur, add);
            if (!in_c)
                for (u32 i = threadIdx.x; i < here; i += blockDim.x)
                    c_val[out + i] = S::value(acc[i]);
            // Columns: a thread per word; words of more than CROWDED_WORD entries are listed and
            // written by whole warps, dealt out over the block (R-MAT rows crowd their low
            // columns: threads walking full words alone kept the block waiting at the barrier).
            for (u32 w = from * WORDS + threadIdx.x; w < to * WORDS; w += blockDim.x) {
                const u64 word = bits64[w];
                if (!word) continue;
                if (__popcll(word) > CROWDED_WORD) {
                    const u32 slot = atomicAdd(&crowded, 1u);
                    if (slot < CROWDED_LIST) {
                        list[slot] = w;
                        continue;
                    }
                }
                u64 o = out + base[w / WORDS] + rel[w] - lo;
                for (u64 rest = word; rest; rest &= rest - 1)
                    c_col[o++] = (u32)(c0 + (u64)w * 64 + __ffsll(rest) - 1);
            }
            __syncthreads();
            const u32 listed = crowded < CROWDED_LIST ? crowded : CROWDED_LIST;
            for (u32 q = warp; q < listed; q += nwarps) {
                const u32 w = list[q];
                const u64 word = bits64[w];
                const u64 o = out + base[w / WORDS] + rel[w] - lo;
                #pragma unroll
                for (u32 half = 0; half < 64; half += WARP) {
                    const u32 b = half + lane;
                    if ((word >> b) & 1)
                        c_col[o + __popcll(word & ((1ull << b) - 1))] = (u32)(c0 + (u64)w * 64 + b);
                }
            }
            out += here;
            from = to;
            __syncthreads();
        }
    }
}

// Computes each listed row of C into its place c_ptr[r] (offsets of the batch's rows), columns
// in order, summed as S sums (exact_below: see makes_exact). The shared memory after the cursors (`width` sums and their
// presence bits) holds rank windows (rank_row_numeric) unless it is too small for them (narrow
// windows set for tests and tuning); then a window of `width` columns at a time, each cleared
// and scanned whole.
template <typename T, typename S>
__device__ void dense_rows_numeric(const u64* a_ptr, const u32* a_col, const T* a_val,
                                   const u64* b_ptr, const u32* b_col, const T* b_val, u64 row0,
                                   const u32* rows, u64 ncols, u64 exact_below, u32 width,
                                   const u64* c_ptr, u32* c_col, T* c_val,
                                   unsigned char* smem_all) {
    typedef typename S::Acc A;
    unsigned char* smem = smem_all + DENSE_CURSOR_BYTES;
    A* acc = (A*)smem;
    u32* bits = (u32*)(acc + width);
    __shared__ u64 tmp[WARP];
    __shared__ u64 total;
    __shared__ u32 list[ROW_LIST_WORDS];
    __shared__ u64 walked;
    const Cursors cur = {(u32*)smem_all, &walked, nullptr, 0};
    if (threadIdx.x == 0) walked = ~0ull;
    const u32 r = rows[blockIdx.x];
    const u64 a0 = a_ptr[row0 + r], a1 = a_ptr[row0 + r + 1];
    const bool exact = block_row_exact(a_col, a0, a1, b_ptr, exact_below, (double*)tmp);
    u64 out = c_ptr[r];
    const u64 shared = (u64)width * sizeof(A) + width / 8;
    const u64 window = rank_window(shared, sizeof(A), ncols);
    if (window > 0) {
        rank_row_numeric<T, S>(a0, a1, a_col, a_val, b_ptr, b_col, b_val, ncols, exact, window,
                               shared, out, c_col, c_val, smem, tmp, &total, list, cur);
        return;
    }
    for (u64 c0 = 0; c0 < ncols; c0 += width) {
        const u64 c1 = c0 + width < ncols ? c0 + width : ncols;
        const u32 span = (u32)(c1 - c0);
        const u32 words = (span + 31) / 32;
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0;
        for (u32 c = threadIdx.x; c < span; c += blockDim.x) acc[c] = (A)0;
        row_entries<T, true>(a_col, a_val, a0, a1, b_ptr, b_col, b_val, c0, c1, ncols, list, cur,
                             [&](T av, u32 at, T bv) {
                                 S::add_product(&acc[at], av, bv, exact);
                                 atomicOr(&bits[at >> 5], 1u << (at & 31));
                             });
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
                c_val[o] = S::value(acc[c]);
                ++o;
            }
            out += here;
        }
        __syncthreads();
    }
}

#define GMCL_DENSE_ROW_KERNELS(T, SUM, S)                                                        \
extern "C" __global__ void __launch_bounds__(DENSE_ROW_THREADS)                                  \
dense_rows_numeric_##S(const u64* a_ptr, const u32* a_col, const T* a_val, const u64* b_ptr,     \
                       const u32* b_col, const T* b_val, u64 row0, const u32* rows, u64 ncols,   \
                       u64 exact_below, u32 width, const u64* c_ptr, u32* c_col, T* c_val) {     \
    extern __shared__ __align__(16) unsigned char smem_dense_##S[];                              \
    dense_rows_numeric<T, SUM<T> >(a_ptr, a_col, a_val, b_ptr, b_col, b_val, row0, rows, ncols,  \
                                   exact_below, width, c_ptr, c_col, c_val, smem_dense_##S);     \
}

GMCL_DENSE_ROW_KERNELS(float, PlainSum, f32)
GMCL_DENSE_ROW_KERNELS(double, PlainSum, f64)
GMCL_DENSE_ROW_KERNELS(float, QuantaSum, f32q)
GMCL_DENSE_ROW_KERNELS(double, QuantaSum, f64q)
