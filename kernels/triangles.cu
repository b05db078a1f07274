// Triangle counting on the GPU: the masked product C<L> = L·U of the graph oriented by degree
// (the "dot" form: C(c, b) counts the lowest vertices a of the triangles a < b < c), with each
// entry added to the count as it is found instead of being stored.
//
// 1. Ranks. Vertices are ranked by degree (ties in any order: a counting sort with atomics), and
//    the graph is renumbered by rank, so that "ranks above" is a comparison of ids.
// 2. Orientation. The undirected edge {u, v} becomes u -> v when u ranks below v: each row U(u)
//    keeps its neighbours of higher degree (at most sqrt(2m) of them on any graph). The in-edges
//    of each vertex (the rows of L) come from a transpose.
// 3. Count. For each middle vertex b, U(b) goes into a hash table in shared memory (the mask
//    row); for each a in L(b), every c of U(a) ranked above b is looked up in it, and each hit is
//    the triangle a < b < c, found once. The work of b grows with its in-degree, which is
//    largest for the hubs (the highest ranks, with short rows U(b)), so each row's in-edges are
//    cut into items of TRI_ITEM in-neighbours that warps take in turn, building b's table again
//    only when an item of a new row comes. Within an item, the entries of 32 consecutive
//    in-neighbours are flattened over the warp's lanes, so a lane's work does not depend on any
//    one row's length. Rows b longer than a warp's table go to a second kernel where a whole
//    block shares the table (in shared memory, or in device memory past what fits).
//
// Work: rows of U are sorted (up to TRI_SORT_MAX entries), and each in-edge a -> b of L
// remembers where b sits in U(a), so only the vertices above b are read: sum over a of
// out(a)^2 / 2 look-ups, against sum over b of in(b)·out(b) binary searches for the row-by-row
// (Sandia) form, about 3.5x fewer on R-MAT.

#define TRI_THREADS 256
#define TRI_WARPS (TRI_THREADS / WARP)
// Hash slots per warp of triangles_light: rows of at most half as many entries are light.
#define TRI_WARP_SLOTS 1024
#define TRI_HEAVY_THREADS 512
#define TRI_HEAVY_WARPS (TRI_HEAVY_THREADS / WARP)
// In-neighbours per item of triangles_heavy.
#define TRI_HEAVY_ITEM 1024
// In-neighbours per item of triangles_light, and items a warp takes at a time.
#define TRI_ITEM 64
#define TRI_GRAB 8
#define TRI_EMPTY 0xffffffffu

// The degree of vertex u < n: degree[u] where the degrees are given, else its row's length.
__device__ __forceinline__ u64 degree_of(const u64* ptr, const u32* degree, u64 u) {
    return degree ? (u64)degree[u] : ptr[u + 1] - ptr[u];
}

// hist[d] += the vertices of degree d, one warp-aggregated atomic per distinct degree.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
degree_histogram(const u64* ptr, const u32* degree, u32 n, u64* hist) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += stride) {
        const u64 u = base + threadIdx.x;
        const u64 d = u < n ? degree_of(ptr, degree, u) : ~0ull;
        const u32 same = __match_any_sync(0xffffffffu, d);
        const u32 lane = threadIdx.x & (WARP - 1);
        if (u < n && lane == (u32)(__ffs(same) - 1)) atomicAdd(&hist[d], (u64)__popc(same));
    }
}

// rank[u] = the next free place of u's degree in the order (starts: the scanned histogram,
// advanced as places are taken).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
degree_ranks(const u64* ptr, const u32* degree, u32 n, u64* starts, u32* rank) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u32 lane = threadIdx.x & (WARP - 1);
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += stride) {
        const u64 u = base + threadIdx.x;
        const u64 d = u < n ? degree_of(ptr, degree, u) : ~0ull;
        const u32 same = __match_any_sync(0xffffffffu, d);
        const u32 leader = __ffs(same) - 1;
        u64 first = 0;
        if (u < n && lane == leader) first = atomicAdd(&starts[d], (u64)__popc(same));
        first = __shfl_sync(0xffffffffu, first, leader);
        if (u < n) rank[u] = (u32)(first + __popc(same & ((1u << lane) - 1)));
    }
}

// The orientation walks the adjacency entry by entry, not row by row (warp_entries and
// lane_row in common.cuh): a warp per row left the hubs' rows (tens of thousands of entries) to
// one warp each, which the whole launch then waited for.

// Rows of a block of n rows, the vertex of row u being first + u (in one process the whole
// graph: first 0), each adjacency entry replaced by its rank (so that orient_fill reads ranks
// in order instead of looking them up), and out_lens[r] += the neighbours of row u's vertex
// ranked above it, r its rank (out_lens zeroed before).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
orient_ranks(const u64* ptr, u32* adj, u32 n, u32 first, const u32* rank, u64* out_lens) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 e, end, row;
    warp_entries(ptr, n, &e, &end, &row);
    for (; e < end; e += WARP) {
        const u64 i = e + lane;
        const bool valid = i < end;
        const u64 u = lane_row(ptr, n, row, i, valid);
        u32 r = 0;
        bool keep = false;
        if (valid) {
            r = rank[first + u];
            const u32 rv = rank[adj[i]];
            adj[i] = rv;
            keep = rv > r;
        }
        const u32 same = __match_any_sync(0xffffffffu, valid ? u : ~0ull);
        const u32 kept = __popc(__ballot_sync(0xffffffffu, keep) & same);
        if (valid && kept && lane == (u32)(__ffs(same) - 1)) atomicAdd(&out_lens[r], (u64)kept);
        row = __shfl_sync(0xffffffffu, u, WARP - 1);
    }
}

// After orient_ranks, for each row u of the block (r its vertex's rank, out_lens[r] its
// out-row's length): in_lens[r] = the neighbours ranked below; *max_out = the longest out-row.
// Rows with both are counted: light ones as items[r] items of triangles_light, heavy ones (more
// entries than half a warp's table) listed in heavy_rows for triangles_heavy. Across ranks
// (else null): block_lens[u] = the out-row's length.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
orient_counts(const u64* ptr, u32 n, u32 first, const u32* rank, const u64* out_lens,
              u64* in_lens, unsigned long long* max_out, u64* items, u32* heavy_rows,
              u32* heavy_count, u64* block_lens) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 longest = 0;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < n; u += stride) {
        const u32 r = rank[first + u];
        const u64 kept = out_lens[r];
        const u64 in = ptr[u + 1] - ptr[u] - kept;
        if (block_lens) block_lens[u] = kept;
        in_lens[r] = in;
        longest = max(longest, kept);
        const bool heavy = 2 * kept > TRI_WARP_SLOTS;
        items[r] = kept > 0 && !heavy ? (in + TRI_ITEM - 1) / TRI_ITEM : 0;
        if (heavy && in > 0) heavy_rows[atomicAdd(heavy_count, 1u)] = r;
    }
    // The warp's longest row, published once: an atomic per row on one address would
    // serialise the whole kernel.
    #pragma unroll
    for (u32 d = WARP / 2; d > 0; d >>= 1) longest = max(longest, __shfl_xor_sync(0xffffffffu, longest, d));
    if ((threadIdx.x & (WARP - 1)) == 0 && longest > 0) atomicMax(max_out, (unsigned long long)longest);
}

// Writes U(r), r the rank of row u's vertex first + u, at optr[r] (at optr[u] with by_row: a
// block's rows one after another), from u's adjacency row (which orient_ranks turned into
// ranks). cursor (n, zeroed) counts each row's entries written: a row's chunks may come in any
// order, so a row's entries are in adjacency order only when sort_rows sorts them after.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
orient_fill(const u64* ptr, const u32* radj, u32 n, u32 first, const u32* rank, const u64* optr,
            u32 by_row, u32* cursor, u32* oadj) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u32 below = (1u << lane) - 1;
    u64 e, end, row;
    warp_entries(ptr, n, &e, &end, &row);
    for (; e < end; e += WARP) {
        const u64 i = e + lane;
        const bool valid = i < end;
        const u64 u = lane_row(ptr, n, row, i, valid);
        u32 r = 0, rv = 0;
        bool keep = false;
        if (valid) {
            r = rank[first + u];
            rv = radj[i];
            keep = rv > r;
        }
        const u32 same = __match_any_sync(0xffffffffu, valid ? u : ~0ull);
        const u32 kept = __ballot_sync(0xffffffffu, keep) & same;
        const u32 leader = __ffs(same) - 1;
        u32 at = 0;
        if (valid && kept && lane == leader) at = atomicAdd(&cursor[u], (u32)__popc(kept));
        at = __shfl_sync(0xffffffffu, at, leader);
        if (keep) oadj[optr[by_row ? u : r] + at + __popc(kept & below)] = rv;
        row = __shfl_sync(0xffffffffu, u, WARP - 1);
    }
}

// Rows of U up to this long are sorted (longer ones, only on graphs far denser than power-law
// ones, stay in the order orient_fill left them): up to TRI_SORT_WARP entries by sort_rows, a
// warp a row, longer ones by sort_long_rows, a block a row, so that the longest rows do not
// hold one warp each while the rest of the GPU waits.
#define TRI_SORT_MAX 1024
#define TRI_SORT_WARP 256
#define TRI_SORT_THREADS 256

// Sorts row[0 .. len) in place through buf (shared memory of at least len rounded up to a power
// of two, and at least `least`, slots): a bitonic sort by the threads `first`, `first + step`,
// ... of one warp (BLOCK false) or of the whole block (BLOCK true), all of which must call.
template <bool BLOCK>
__device__ __forceinline__ void sort_in_shared(u32* row, u32 len, u32 least, u32* buf, u32 first,
                                               u32 step) {
    u32 size = least;
    while (size < len) size <<= 1;
    for (u32 i = first; i < size; i += step) buf[i] = i < len ? row[i] : TRI_EMPTY;
    if (BLOCK) __syncthreads(); else __syncwarp();
    for (u32 k = 2; k <= size; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            for (u32 i = first; i < size; i += step) {
                const u32 p = i ^ j;
                if (p > i) {
                    const u32 x = buf[i], y = buf[p];
                    if ((x > y) == ((i & k) == 0)) {
                        buf[i] = y;
                        buf[p] = x;
                    }
                }
            }
            if (BLOCK) __syncthreads(); else __syncwarp();
        }
    }
    for (u32 i = first; i < len; i += step) row[i] = buf[i];
    if (BLOCK) __syncthreads(); else __syncwarp();
}

// Sorts each row of U of at most TRI_SORT_WARP entries, one warp per row: a bitonic sort in
// registers for rows of up to 32 entries, in the warp's shared memory for longer ones.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
sort_rows(const u64* optr, u32* oadj, u32 n) {
    __shared__ u32 buffers[TRI_WARPS][TRI_SORT_WARP];
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    u32* buf = buffers[warp];
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 r = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; r < n; r += warps) {
        const u64 lo = optr[r];
        const u32 len = (u32)(optr[r + 1] - lo);
        if (len < 2 || len > TRI_SORT_WARP) continue;
        if (len <= WARP) {
            u32 v = lane < len ? oadj[lo + lane] : TRI_EMPTY;
            for (u32 k = 2; k <= WARP; k <<= 1) {
                for (u32 j = k >> 1; j > 0; j >>= 1) {
                    const u32 o = __shfl_xor_sync(0xffffffffu, v, j);
                    const bool ascending = (lane & k) == 0, lower = (lane & j) == 0;
                    v = lower == ascending ? min(v, o) : max(v, o);
                }
            }
            if (lane < len) oadj[lo + lane] = v;
            continue;
        }
        sort_in_shared<false>(oadj + lo, len, 64, buf, lane, WARP);
    }
}

// Lists the rows of U of more than TRI_SORT_WARP and at most TRI_SORT_MAX entries:
// long_rows[0 .. *long_count), in any order. Rows are ordered by rank, so the long ones sit
// together; listing them first lets sort_long_rows deal them out one a block.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
list_long_rows(const u64* optr, u32 n, u32* long_rows, u32* long_count) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += stride) {
        const u64 r = base + threadIdx.x;
        bool is_long = false;
        if (r < n) {
            const u64 len = optr[r + 1] - optr[r];
            is_long = len > TRI_SORT_WARP && len <= TRI_SORT_MAX;
        }
        const u32 mask = __ballot_sync(0xffffffffu, is_long);
        u32 at = 0;
        if (lane == 0 && mask) at = atomicAdd(long_count, (u32)__popc(mask));
        at = __shfl_sync(0xffffffffu, at, 0);
        if (is_long) long_rows[at + __popc(mask & ((1u << lane) - 1))] = (u32)r;
    }
}

// Sorts the rows list_long_rows listed, a block of TRI_SORT_THREADS a row, in its shared memory
// (bitonic).
extern "C" __global__ void __launch_bounds__(TRI_SORT_THREADS)
sort_long_rows(const u64* optr, u32* oadj, const u32* long_rows, const u32* long_count) {
    __shared__ u32 buf[TRI_SORT_MAX];
    const u32 count = *long_count;
    for (u32 k = blockIdx.x; k < count; k += gridDim.x) {
        const u64 lo = optr[long_rows[k]];
        const u32 len = (u32)(optr[long_rows[k] + 1] - lo);
        sort_in_shared<true>(oadj + lo, len, 2 * TRI_SORT_WARP, buf, threadIdx.x,
                             TRI_SORT_THREADS);
    }
}

// Across ranks, the triangles a < b < c are counted by the rank owning the middle vertex b
// (the pivot): rank q of `parts` owns the pivots whose rank ids are q modulo parts, so that
// every degree's vertices, hubs included, are dealt out evenly.

// degree[first + u] = the length of row u of a block of rows (ptr): a rank's part of every
// vertex's degree.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
block_degrees(const u64* ptr, u32 rows, u32 first, u32* degree) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < rows; u += stride) {
        degree[first + u] = (u32)(ptr[u + 1] - ptr[u]);
    }
}

// lens[first + u] = the length of row u of a block of rows (ptr): a rank's part of every
// vertex's row length, gathered across the ranks by vertex.
extern "C" __global__ void block_lengths(const u64* ptr, u32 rows, u32 first, u64* lens) {
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < rows;
         u += (u64)gridDim.x * blockDim.x) {
        lens[first + u] = ptr[u + 1] - ptr[u];
    }
}

// by_rank[rank[v]] = by_vertex[v] for the n vertices: the rows' lengths, gathered by vertex,
// laid out by rank.
extern "C" __global__ void lengths_by_rank(const u64* by_vertex, const u32* rank, u32 n,
                                           u64* by_rank) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < n;
         v += (u64)gridDim.x * blockDim.x) {
        by_rank[rank[v]] = by_vertex[v];
    }
}

// inverse[rank[v]] = v for the n vertices: each rank id's vertex.
extern "C" __global__ void invert_ranks(const u32* rank, u32 n, u32* inverse) {
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < n;
         v += (u64)gridDim.x * blockDim.x) {
        inverse[rank[v]] = (u32)v;
    }
}

// Whether the blocks' rows, taken from a file unchecked, are a simple graph's, once every rank
// holds all of U (optr, oadj over the n rank ids). A block's rows are kept as the orientation
// left them (ptr, radj: rows first.. of the graph, each entry its neighbour's rank, in the
// order read: by vertex id, strictly increasing, no diagonal). With U half of all the blocks'
// entries, the pairs {a, b} (a ranked below b) split by a's row of U:
// - a's row sorted (at most TRI_SORT_MAX entries): every down entry b -> a of the blocks must
//   find b in U(a) (mirrors_of_down_entries, on the block holding b's row);
// - a's row longer (unsorted): every entry a -> b of U(a) must find a in b's row as read
//   (mirrors_of_unsorted_rows, on the block holding b's row).
// Both maps are injective; the blocks are symmetric exactly when nothing is missing and, summed
// over the blocks, the down entries into unsorted rows are as many as those rows' entries:
// then the down entries into sorted rows are as many as those rows' entries too (the down
// entries being half of all), and both maps are onto. Each block walks its own entries and the
// unsorted rows only: the work divides among the ranks.
// counts[0] += the mirrors missing, counts[1] += the down entries into unsorted rows,
// counts[2] += the unsorted rows' entries whose upper end is the block's.

// *at_x += x and *at_y += y summed over the warp's lanes, added once by its first lane.
__device__ __forceinline__ void add_warp_counts(u64 x, u64* at_x, u64 y, u64* at_y) {
    #pragma unroll
    for (u32 d = WARP / 2; d > 0; d >>= 1) {
        x += __shfl_xor_sync(0xffffffffu, x, d);
        y += __shfl_xor_sync(0xffffffffu, y, d);
    }
    if ((threadIdx.x & (WARP - 1)) == 0) {
        if (x) atomicAdd(at_x, x);
        if (y) atomicAdd(at_y, y);
    }
}

// The block's part, entry by entry (warp_entries: a hub's row is shared by many warps).
extern "C" __global__ void
mirrors_of_down_entries(const u64* ptr, const u32* radj, u32 rows, u32 first, const u32* rank,
                        const u64* optr, const u32* oadj, u64* counts) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 missing = 0, unsorted = 0;
    u64 e, end, row;
    warp_entries(ptr, rows, &e, &end, &row);
    for (; e < end; e += WARP) {
        const u64 x = e + lane;
        const bool valid = x < end;
        const u64 u = lane_row(ptr, rows, row, x, valid);
        row = __shfl_sync(0xffffffffu, u, WARP - 1);
        if (!valid) continue;
        const u32 b = rank[first + u], a = radj[x];
        if (a > b) continue;
        const u64 lo = optr[a], hi = optr[a + 1];
        if (hi - lo > TRI_SORT_MAX) unsorted++;
        else if (!sorted_contains(oadj, lo, hi, b)) missing++;
    }
    add_warp_counts(missing, &counts[0], unsorted, &counts[1]);
}

// The unsorted rows of U, a warp a row: each entry a -> b whose upper end's vertex vertex[b]
// is one of the block's looks for vertex[a] in that row as read (radj by vertex id through
// vertex: the ranks are in the order of the ids).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
mirrors_of_unsorted_rows(const u64* optr, const u32* oadj, u32 n, const u32* vertex, u32 first,
                         u32 rows, const u64* ptr, const u32* radj, u64* counts) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    u64 missing = 0, owned = 0;
    for (u64 base = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP * WARP; base < n;
         base += warps * WARP) {
        const u64 r = base + lane;
        const bool unsorted = r < n && optr[r + 1] - optr[r] > TRI_SORT_MAX;
        for (u32 m = __ballot_sync(0xffffffffu, unsorted); m; m &= m - 1) {
            const u64 a = base + __ffs(m) - 1;
            const u32 va = vertex[a];
            for (u64 x = optr[a] + lane; x < optr[a + 1]; x += WARP) {
                const u32 k = vertex[oadj[x]] - first;
                if (k >= rows) continue;
                owned++;
                u64 lo = ptr[k], hi = ptr[k + 1];
                bool found = false;
                while (lo < hi && !found) {
                    const u64 mid = lo + ((hi - lo) >> 1);
                    const u32 v = vertex[radj[mid]];
                    found = v == va;
                    if (v < va) lo = mid + 1; else hi = mid;
                }
                if (!found) missing++;
            }
        }
    }
    add_warp_counts(missing, &counts[0], owned, &counts[2]);
}

// in_lens[b] = the in-edges a -> b of the rank's pivots b (b % parts == me) among the rows of
// U held (optr, oadj over all n rank ids; rows not held are empty). One warp per row, the
// increments of equal b within a warp added at once (hubs take many).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
pivot_in_lens(const u64* optr, const u32* oadj, u32 n, u32 parts, u32 me, u64* in_lens) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 a = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; a < n; a += warps) {
        const u64 lo = optr[a], hi = optr[a + 1];
        for (u64 base = lo; base < hi; base += WARP) {
            const u32 b = base + lane < hi ? oadj[base + lane] : TRI_EMPTY;
            const bool mine = b != TRI_EMPTY && b % parts == me;
            const u32 same = __match_any_sync(0xffffffffu, mine ? b : TRI_EMPTY);
            if (mine && lane == (u32)(__ffs(same) - 1)) atomicAdd(&in_lens[b], (u64)__popc(same));
        }
    }
}

// For each pivot b of the rank (b % parts == me) with in-edges: items[b] as orient_counts
// makes them for a light row, or b listed in heavy_rows; *max_out = the longest heavy row.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
pivot_items(const u64* optr, const u64* in_lens, u32 n, u32 parts, u32 me, u64* items,
            u32* heavy_rows, u32* heavy_count, unsigned long long* max_out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k * parts + me < n; k += stride) {
        const u64 b = k * parts + me;
        const u64 kept = optr[b + 1] - optr[b], in = in_lens[b];
        const bool heavy = 2 * kept > TRI_WARP_SLOTS;
        items[b] = kept > 0 && !heavy ? (in + TRI_ITEM - 1) / TRI_ITEM : 0;
        if (heavy && in > 0) {
            heavy_rows[atomicAdd(heavy_count, 1u)] = (u32)b;
            atomicMax(max_out, (unsigned long long)kept);
        }
    }
}

// The rows of L: for each edge a -> c of U, a joins L(c) at the next free place of cursor[c]
// (which starts as iptr), with where U(a) may hold vertices above c: past c when U(a) is
// sorted, else from its start. One warp per row a. With `filtered` (a rank's part of U across
// ranks), only the vertices c with a row of L in iptr take their in-edges. The rows a are
// taken from the highest rank down, so each L(c) lists its in-neighbours roughly from the
// highest rank down: the heavy rows' count reads them faster in that order (the light rows'
// a little slower; measured in docs/performance.md).
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
transpose_fill(const u64* optr, const u32* oadj, u32 n, const u64* iptr, u32 filtered,
               u64* cursor, u32* iadj, u32* ifrom) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    for (u64 w = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP; w < n; w += warps) {
        const u64 a = n - 1 - w;
        const u64 lo = optr[a], hi = optr[a + 1];
        const bool sorted = hi - lo <= TRI_SORT_MAX;
        for (u64 i = lo + lane; i < hi; i += WARP) {
            const u32 c = oadj[i];
            if (filtered && iptr[c + 1] == iptr[c]) continue;
            const u64 at = atomicAdd(&cursor[c], 1ull);
            iadj[at] = (u32)a;
            ifrom[at] = sorted ? (u32)(i - lo + 1) : 0;
        }
    }
}

__device__ __forceinline__ u32 tri_hash(u32 key, u32 bits) {
    return (key * 2654435761u) >> (32 - bits);
}

// A hash set of distinct keys in `size` = 2^bits slots (shared or device memory), filled by
// the threads of one warp or block, each taking keys[i] for i = first, first + step, ...
__device__ __forceinline__ void set_fill(u32* table, u32 bits, const u32* keys, u32 len,
                                         u32 first, u32 step) {
    const u32 mask = (1u << bits) - 1;
    for (u32 i = first; i < len; i += step) {
        const u32 key = keys[i];
        u32 h = tri_hash(key, bits);
        while (atomicCAS(&table[h], TRI_EMPTY, key) != TRI_EMPTY) h = (h + 1) & mask;
    }
}

__device__ __forceinline__ bool set_has(const u32* table, u32 bits, u32 key) {
    const u32 mask = (1u << bits) - 1;
    for (u32 h = tri_hash(key, bits);; h = (h + 1) & mask) {
        const u32 k = table[h];
        if (k == key) return true;
        if (k == TRI_EMPTY) return false;
    }
}

// log2 of the table size for a row of len entries: at least twice as many slots, at least 32.
__device__ __forceinline__ u32 table_bits(u32 len) {
    u32 bits = 5;
    while ((1u << bits) < 2 * len) ++bits;
    return bits;
}

// One warp's scratch for a chunk of 32 in-neighbours: where each one's entries end in the
// flattened order, where its row starts in oadj, and the vertex itself.
struct WedgeSlots {
    u64 end[WARP];
    u64 start[WARP];
    u32 a[WARP];
};

// The wedges a -> c for a = in_row[first + lane] (lanes past in_len have none), c taken from
// U(a) starting at in_from[first + lane], with c ranked above b looked up in b's table. Returns the lane's hits; with per_vertex (indexed by rank),
// adds each triangle to its lowest and highest vertex (the caller adds b).
__device__ __forceinline__ u64 wedge_chunk(u32 b, const u32* table, u32 bits, const u32* in_row,
                                           const u32* in_from, u32 in_len, u32 first,
                                           const u64* optr, const u32* oadj, WedgeSlots* s,
                                           u64* per_vertex) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 count = 0, start = 0;
    u32 a = 0;
    if (first + lane < in_len) {
        a = in_row[first + lane];
        start = optr[a] + in_from[first + lane];
        count = optr[a + 1] - start;
    }
    const u64 end = warp_inclusive_scan_u64(count);
    s->end[lane] = end;
    s->start[lane] = start;
    s->a[lane] = a;
    __syncwarp();
    const u64 total = __shfl_sync(0xffffffffu, end, WARP - 1);
    u64 hits = 0;
    u32 k = 0;
    for (u64 p = lane; p < total; p += WARP) {
        // The slot holding position p: the first k with end[k] > p (p only grows).
        while (s->end[k] <= p) ++k;
        const u64 before = k ? s->end[k - 1] : 0;
        const u32 c = oadj[s->start[k] + (p - before)];
        if (c > b && set_has(table, bits, c)) {
            ++hits;
            if (per_vertex) {
                atomicAdd(&per_vertex[c], 1ull);
                atomicAdd(&per_vertex[s->a[k]], 1ull);
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

// The items of the light rows (item_ptr: the scanned items per row), taken TRI_GRAB at a time
// from *next_item, one warp each. Adds the count to *total.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
triangles_light(const u64* optr, const u32* oadj, const u64* iptr, const u32* iadj,
                const u32* ifrom, const u64* item_ptr, u32 n, u64* next_item, u64* total, u32 count_per_vertex,
                u64* by_rank) {
    u64* per_vertex = count_per_vertex ? by_rank : nullptr;
    __shared__ u32 tables[TRI_WARPS][TRI_WARP_SLOTS];
    __shared__ WedgeSlots slots[TRI_WARPS];
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    u32* table = tables[warp];
    const u64 items = item_ptr[n];
    u64 hits = 0;
    u32 built = 0xffffffffu, bits = 0;
    for (;;) {
        u64 first = 0;
        if (lane == 0) first = atomicAdd(next_item, (u64)TRI_GRAB);
        first = __shfl_sync(0xffffffffu, first, 0);
        if (first >= items) break;
        const u64 last = min(items, first + TRI_GRAB);
        // The row of the first item: the last r with item_ptr[r] <= first.
        u32 b = (u32)(upper_bound_u64(item_ptr, 0, (u64)n + 1, first) - 1);
        for (u64 i = first; i < last; ++i) {
            while (item_ptr[b + 1] <= i) ++b;
            const u64 lo = optr[b];
            const u32 len = (u32)(optr[b + 1] - lo);
            if (b != built) {
                bits = table_bits(len);
                for (u32 j = lane; j < (1u << bits); j += WARP) table[j] = TRI_EMPTY;
                __syncwarp();
                set_fill(table, bits, oadj + lo, len, lane, WARP);
                __syncwarp();
                built = b;
            }
            const u64 in_lo = iptr[b] + (i - item_ptr[b]) * TRI_ITEM;
            const u32 in_len = (u32)min((u64)TRI_ITEM, iptr[b + 1] - in_lo);
            u64 item_hits = 0;
            for (u32 c = 0; c < in_len; c += WARP) {
                item_hits += wedge_chunk(b, table, bits, iadj + in_lo, ifrom + in_lo, in_len,
                                         c, optr, oadj, &slots[warp], per_vertex);
            }
            hits += item_hits;
            if (per_vertex) {
                item_hits = warp_sum_u64(item_hits);
                if (lane == 0 && item_hits) atomicAdd(&per_vertex[b], item_hits);
            }
        }
    }
    hits = warp_sum_u64(hits);
    if (lane == 0 && hits) atomicAdd(total, hits);
}

// items[k] = the items of heavy row k (its in-neighbours in groups of TRI_HEAVY_ITEM).
extern "C" __global__ void heavy_items(const u32* heavy_rows, u32 heavy, const u64* iptr,
                                       u64* items) {
    const u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < heavy) {
        const u32 b = heavy_rows[k];
        items[k] = (iptr[b + 1] - iptr[b] + TRI_HEAVY_ITEM - 1) / TRI_HEAVY_ITEM;
    }
}

// The items of the heavy rows (item_ptr: the scanned items per heavy row), one block each,
// taken from *next_item; the block builds a row's table again only when it moves to a new
// row. The table lives in dynamic shared memory when it needs at most shared_slots slots,
// else in the block's global_slots slots of `scratch`.
extern "C" __global__ void __launch_bounds__(TRI_HEAVY_THREADS)
triangles_heavy(const u64* optr, const u32* oadj, const u64* iptr, const u32* iadj,
                const u32* ifrom, const u32* heavy_rows, const u64* item_ptr, u32 heavy, u64* next_item,
                u32 shared_slots, u32* scratch, u64 global_slots, u64* total,
                u32 count_per_vertex, u64* by_rank) {
    u64* per_vertex = count_per_vertex ? by_rank : nullptr;
    extern __shared__ u32 shared_table[];
    __shared__ WedgeSlots slots[TRI_HEAVY_WARPS];
    __shared__ u64 taken;
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u64 items = item_ptr[heavy];
    u32* own_scratch = scratch + blockIdx.x * global_slots;
    u64 hits = 0;
    u32 built = 0xffffffffu, bits = 0;
    u32* table = shared_table;
    for (;;) {
        if (threadIdx.x == 0) taken = atomicAdd(next_item, 1ull);
        __syncthreads();
        const u64 i = taken;
        __syncthreads();
        if (i >= items) break;
        const u32 k = (u32)(upper_bound_u64(item_ptr, 0, (u64)heavy + 1, i) - 1);
        const u32 b = heavy_rows[k];
        if (b != built) {
            const u64 lo = optr[b];
            const u32 len = (u32)(optr[b + 1] - lo);
            bits = table_bits(len);
            table = (1u << bits) <= shared_slots ? shared_table : own_scratch;
            for (u32 j = threadIdx.x; j < (1u << bits); j += blockDim.x) table[j] = TRI_EMPTY;
            __syncthreads();
            set_fill(table, bits, oadj + lo, len, threadIdx.x, blockDim.x);
            __syncthreads();
            built = b;
        }
        const u64 in_lo = iptr[b] + (i - item_ptr[k]) * TRI_HEAVY_ITEM;
        const u32 in_len = (u32)min((u64)TRI_HEAVY_ITEM, iptr[b + 1] - in_lo);
        u64 item_hits = 0;
        for (u32 c = warp * WARP; c < in_len; c += TRI_HEAVY_THREADS) {
            item_hits += wedge_chunk(b, table, bits, iadj + in_lo, ifrom + in_lo, in_len, c,
                                     optr, oadj, &slots[warp], per_vertex);
        }
        hits += item_hits;
        if (per_vertex) {
            item_hits = warp_sum_u64(item_hits);
            if (lane == 0 && item_hits) atomicAdd(&per_vertex[b], item_hits);
        }
        __syncthreads();
    }
    hits = warp_sum_u64(hits);
    if (lane == 0 && hits) atomicAdd(total, hits);
}

// out[u] = by_rank[rank[u]]: per-vertex counts back to the input's vertex ids.
extern "C" __global__ void gather_by_rank(const u32* rank, u32 n, const u64* by_rank, u64* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < n; u += stride) {
        out[u] = by_rank[rank[u]];
    }
}

// |s ∩ l| for two rows sorted by id, the lanes of one warp taking the shorter row's entries in
// turn and binary-searching each in the longer one; with per-vertex counts (counts not null)
// each common c counts for c. Every lane of the warp must call; every lane gets the sum.
__device__ __forceinline__ u64 warp_common(const u32* s, u64 ls, const u32* l, u64 ll,
                                           u32 per_vertex, u64* counts) {
    if (ll < ls) {
        const u32* t = s; s = l; l = t;
        const u64 lt = ls; ls = ll; ll = lt;
    }
    u64 found = 0;
    for (u64 i = threadIdx.x & (WARP - 1); i < ls; i += WARP) {
        const u32 c = s[i];
        u64 lo = 0, hi = ll;
        while (lo < hi) {
            const u64 mid = (lo + hi) / 2;
            if (l[mid] < c) lo = mid + 1; else hi = mid;
        }
        if (lo < ll && l[lo] == c) {
            found++;
            if (per_vertex) atomicAdd(&counts[c], 1ull);
        }
    }
    return warp_sum_u64(found);
}

// The triangles through the edges a -> b of a rank's own rows in a count across ranks
// (src/dist/tricount.rs) whose b is among this launch's rows: U(a) is row i of (a_ptr, a_idx)
// for vertex first + i, sorted by id. With `fetched` 0 the b rows are the own rows (b in
// [first, first + a_rows), row b - first); else they are the rows fetched in this round
// (b_ptr, b_idx; b_ids sorted, b found by binary search; a b outside the block and not among
// them belongs to another round). |U(a) ∩ U(b)| by warp_common. Each warp takes 32 consecutive
// entries of U at a time, finds the first one's row by binary search and steps on from there,
// so the work is dealt out by edges, not rows, and no list of pairs is made. The hits are
// added to *total; with per-vertex counts, each pair's hits count for a and b too.
extern "C" __global__ void __launch_bounds__(TRI_THREADS)
triangles_rows(const u64* a_ptr, const u32* a_idx, u64 a_rows, u32 first, const u64* b_ptr,
               const u32* b_idx, const u32* b_ids, u64 b_rows, u32 fetched, u32 per_vertex,
               u64* counts, u64* total) {
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 warps = (u64)gridDim.x * TRI_WARPS;
    const u64 nnz = a_ptr[a_rows];
    u64 mine = 0;
    for (u64 e0 = ((u64)blockIdx.x * TRI_WARPS + threadIdx.x / WARP) * WARP; e0 < nnz;
         e0 += warps * WARP) {
        // The row holding entry e0: a_ptr[row] <= e0 < a_ptr[row + 1].
        u64 row = 0, hi = a_rows;
        while (hi - row > 1) {
            const u64 mid = (row + hi) / 2;
            if (a_ptr[mid] <= e0) row = mid; else hi = mid;
        }
        const u64 e1 = e0 + WARP < nnz ? e0 + WARP : nnz;
        for (u64 e = e0; e < e1; ++e) {
            while (a_ptr[row + 1] <= e) ++row;
            const u32 b = a_idx[e];
            const bool own = b >= first && (u64)(b - first) < a_rows;
            if (own == (fetched != 0)) continue;  // uniform: the warp reads one b
            u64 ib = b - first;
            if (fetched) {
                u64 lo = 0, h = b_rows;
                while (lo < h) {
                    const u64 mid = (lo + h) / 2;
                    if (b_ids[mid] < b) lo = mid + 1; else h = mid;
                }
                if (lo == b_rows || b_ids[lo] != b) continue;
                ib = lo;
            }
            const u64 found = warp_common(a_idx + a_ptr[row], a_ptr[row + 1] - a_ptr[row],
                                          b_idx + b_ptr[ib], b_ptr[ib + 1] - b_ptr[ib],
                                          per_vertex, counts);
            if (lane == 0 && found) {
                mine += found;
                if (per_vertex) {
                    atomicAdd(&counts[first + row], found);
                    atomicAdd(&counts[b], found);
                }
            }
        }
    }
    if (lane == 0 && mine) atomicAdd(total, mine);
}
