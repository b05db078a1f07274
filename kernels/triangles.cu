// Triangle counting on the GPU: the masked product C<U> = U·U of the graph oriented by degree,
// with each entry added to the count as it is found instead of being stored.
//
// Orientation: the undirected edge {u, v} becomes u -> v when u ranks below v, ranking by
// (degree, id). Each row keeps its neighbours of higher degree (at most sqrt(2m) of them on any
// graph) and stays sorted by id, so no renumbering is needed.
//
// Count: row u of the product walks the wedges u -> v -> w (v in N+(u), w in N+(v)), and the
// mask row N+(u), held in shared memory, says whether u -> w closes a triangle. Each triangle
// u < v < w (in rank) is found once: at its lowest vertex, through its middle one. A warp owns a
// row; the wedges of 32 consecutive v are flattened over the warp's lanes, so a lane's work does
// not depend on any one v's degree. Rows longer than a warp's slice of shared memory go to a
// second kernel where a whole block shares the row.

#define TRI_THREADS 256
#define TRI_WARPS (TRI_THREADS / WARP)
// Entries of N+(u) one warp of triangles_light keeps in shared memory; longer rows are heavy.
#define TRI_WARP_ROW 512
#define TRI_HEAVY_THREADS 512
#define TRI_HEAVY_WARPS (TRI_HEAVY_THREADS / WARP)
// Rows a warp of triangles_light takes from the shared row counter at a time.
#define TRI_GRAB 16

// Whether u ranks below v in the orientation order (degree, then id).
__device__ __forceinline__ bool ranks_below(u64 du, u32 u, u64 dv, u32 v) {
    return du < dv || (du == dv && u < v);
}

// lens[u] = |N+(u)|, one warp per row of the symmetric adjacency (ptr, adj).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
orient_counts(const u64* ptr, const u32* adj, u32 n, u64* lens) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 u = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; u < n; u += warps) {
        const u64 lo = ptr[u], hi = ptr[u + 1], du = hi - lo;
        u64 kept = 0;
        for (u64 base = lo; base < hi; base += WARP) {
            bool keep = false;
            if (base + lane < hi) {
                const u32 v = adj[base + lane];
                keep = ranks_below(du, (u32)u, ptr[v + 1] - ptr[v], v);
            }
            kept += __popc(__ballot_sync(0xffffffffu, keep));
        }
        if (lane == 0) lens[u] = kept;
    }
}

// Writes N+(u) at optr[u] in the order of the adjacency row (sorted by id).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
orient_fill(const u64* ptr, const u32* adj, u32 n, const u64* optr, u32* oadj) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u32 below = (1u << lane) - 1;
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 u = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; u < n; u += warps) {
        const u64 lo = ptr[u], hi = ptr[u + 1], du = hi - lo;
        u64 at = optr[u];
        for (u64 base = lo; base < hi; base += WARP) {
            bool keep = false;
            u32 v = 0;
            if (base + lane < hi) {
                v = adj[base + lane];
                keep = ranks_below(du, (u32)u, ptr[v + 1] - ptr[v], v);
            }
            const u32 mask = __ballot_sync(0xffffffffu, keep);
            if (keep) oadj[at + __popc(mask & below)] = v;
            at += __popc(mask);
        }
    }
}

// Whether the sorted row[0, len) holds w (row in shared or global memory).
__device__ __forceinline__ bool row_contains(const u32* row, u32 len, u32 w) {
    u32 lo = 0, hi = len;
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        const u32 x = row[mid];
        if (x == w) return true;
        if (x < w) lo = mid + 1; else hi = mid;
    }
    return false;
}

// One warp's scratch for a chunk of 32 middle vertices: where each one's wedges end in the
// flattened order, where its row starts in oadj, and the vertex itself.
struct WedgeSlots {
    u64 end[WARP];
    u64 start[WARP];
    u32 v[WARP];
};

// The wedges through v = mrow[first + lane] (lanes past the row's end have none), looked up in
// the mask row mrow[0, len). Returns the lane's hits; with per_vertex, adds each triangle to
// its middle and highest vertex (the caller adds the lowest, u).
__device__ __forceinline__ u64 wedge_chunk(const u32* mrow, u32 len, u32 first, const u64* optr,
                                           const u32* oadj, WedgeSlots* s, u64* per_vertex) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 count = 0, start = 0;
    u32 v = 0;
    if (first + lane < len) {
        v = mrow[first + lane];
        start = optr[v];
        count = optr[v + 1] - start;
    }
    const u64 end = warp_inclusive_scan_u64(count);
    s->end[lane] = end;
    s->start[lane] = start;
    s->v[lane] = v;
    __syncwarp();
    const u64 total = __shfl_sync(0xffffffffu, end, WARP - 1);
    const u32 lowest = mrow[0], highest = mrow[len - 1];
    u64 hits = 0;
    for (u64 p = lane; p < total; p += WARP) {
        // The slot k whose wedges hold position p: the first with end[k] > p.
        u32 k = 0;
        #pragma unroll
        for (u32 step = WARP / 2; step > 0; step >>= 1) {
            if (s->end[k + step - 1] <= p) k += step;
        }
        const u64 before = k ? s->end[k - 1] : 0;
        const u32 w = oadj[s->start[k] + (p - before)];
        if (w >= lowest && w <= highest && row_contains(mrow, len, w)) {
            ++hits;
            if (per_vertex) {
                atomicAdd(&per_vertex[w], 1ull);
                atomicAdd(&per_vertex[s->v[k]], 1ull);
            }
        }
    }
    __syncwarp();
    return hits;
}

__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
    #pragma unroll
    for (u32 d = WARP / 2; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

// Rows with 2 to TRI_WARP_ROW entries, one warp each, taken TRI_GRAB at a time from *next_row.
// Longer rows are listed in heavy_rows for triangles_heavy. Adds the count to *total.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
triangles_light(const u64* optr, const u32* oadj, u32 n, u64* next_row, u32* heavy_rows,
                u32* heavy_count, u64* total, u64* per_vertex) {
    __shared__ u32 rows[TRI_WARPS][TRI_WARP_ROW];
    __shared__ WedgeSlots slots[TRI_WARPS];
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    u32* row = rows[warp];
    u64 hits = 0;
    for (;;) {
        u64 first = 0;
        if (lane == 0) first = atomicAdd(next_row, (u64)TRI_GRAB);
        first = __shfl_sync(0xffffffffu, first, 0);
        if (first >= n) break;
        const u32 last = (u32)min((u64)n, first + TRI_GRAB);
        for (u32 u = (u32)first; u < last; ++u) {
            const u64 lo = optr[u];
            const u32 len = (u32)(optr[u + 1] - lo);
            if (len < 2) continue;
            if (len > TRI_WARP_ROW) {
                if (lane == 0) heavy_rows[atomicAdd(heavy_count, 1u)] = u;
                continue;
            }
            for (u32 i = lane; i < len; i += WARP) row[i] = oadj[lo + i];
            __syncwarp();
            u64 row_hits = 0;
            for (u32 c = 0; c < len; c += WARP) {
                row_hits += wedge_chunk(row, len, c, optr, oadj, &slots[warp], per_vertex);
            }
            hits += row_hits;
            if (per_vertex) {
                row_hits = warp_sum_u64(row_hits);
                if (lane == 0 && row_hits) atomicAdd(&per_vertex[u], row_hits);
            }
        }
    }
    hits = warp_sum_u64(hits);
    if (lane == 0 && hits) atomicAdd(total, hits);
}

// The heavy rows listed by triangles_light, one block each, taken from *next_heavy. A row of
// at most `cap` entries is copied to dynamic shared memory; a longer one is searched in place.
extern "C" __global__ void __launch_bounds__(TRI_HEAVY_THREADS)
triangles_heavy(const u64* optr, const u32* oadj, const u32* heavy_rows, const u32* heavy_count,
                u32* next_heavy, u32 cap, u64* total, u64* per_vertex) {
    extern __shared__ u32 heavy_row[];
    __shared__ WedgeSlots slots[TRI_HEAVY_WARPS];
    __shared__ u32 taken;
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 rows = *heavy_count;
    u64 hits = 0;
    for (;;) {
        if (threadIdx.x == 0) taken = atomicAdd(next_heavy, 1u);
        __syncthreads();
        const u32 r = taken;
        __syncthreads();
        if (r >= rows) break;
        const u32 u = heavy_rows[r];
        const u64 lo = optr[u];
        const u32 len = (u32)(optr[u + 1] - lo);
        const u32* mrow = oadj + lo;
        if (len <= cap) {
            for (u32 i = threadIdx.x; i < len; i += blockDim.x) heavy_row[i] = oadj[lo + i];
            mrow = heavy_row;
        }
        __syncthreads();
        u64 row_hits = 0;
        for (u32 c = warp * WARP; c < len; c += TRI_HEAVY_THREADS) {
            row_hits += wedge_chunk(mrow, len, c, optr, oadj, &slots[warp], per_vertex);
        }
        hits += row_hits;
        if (per_vertex) {
            row_hits = warp_sum_u64(row_hits);
            if (lane == 0 && row_hits) atomicAdd(&per_vertex[u], row_hits);
        }
        __syncthreads();
    }
    hits = warp_sum_u64(hits);
    if (lane == 0 && hits) atomicAdd(total, hits);
}
