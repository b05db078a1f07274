// Shared helpers of the gMAGNUS kernels. NVRTC has no system headers: only built-in types here.
// The Rust side concatenates this file in front of the kernel files before compiling.

typedef unsigned int u32;
typedef unsigned long long u64;

// The empty-slot key of the hash tables; no column index reaches it (columns are < 2^32 - 1).
#define EMPTY_KEY 0xffffffffu
#define WARP 32

// First index i in [lo, hi) with a[i] > x (hi when none).
__device__ __forceinline__ u64 upper_bound_u64(const u64* a, u64 lo, u64 hi, u64 x) {
    while (lo < hi) {
        u64 mid = lo + ((hi - lo) >> 1);
        if (a[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Whether the sorted columns cols[lo, hi) hold c (the structural mask test).
__device__ __forceinline__ bool sorted_contains(const u32* cols, u64 lo, u64 hi, u32 c) {
    while (lo < hi) {
        u64 mid = lo + ((hi - lo) >> 1);
        u32 v = cols[mid];
        if (v == c) return true;
        if (v < c) lo = mid + 1; else hi = mid;
    }
    return false;
}

// Kernels that walk a CSR pattern entry by entry, not row by row (a warp per row leaves a hub's
// row to one warp, which the whole launch then waits for): each warp takes an equal share of the
// entries, 32 at a time, and finds the row of each lane's entry from the row offsets.

// The last row u < n with ptr[u] <= x (the row holding entry x < ptr[n]): a 32-way search by
// the whole warp. Every lane must call with the same x; every lane gets the row.
__device__ __forceinline__ u64 warp_row_of(const u64* ptr, u64 n, u64 x) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 lo = 0, hi = n;
    while (hi - lo > 1) {
        const u64 step = (hi - lo + WARP - 1) / WARP;
        const u64 p = lo + (u64)lane * step;
        const u32 ok = __ballot_sync(0xffffffffu, p < hi && ptr[p] <= x);
        lo += (u64)(31 - __clz(ok)) * step;
        hi = min(hi, lo + step);
    }
    return lo;
}

// The warp's share of the entries ptr[0]..ptr[n], whole chunks of WARP entries: [*begin, *end),
// and the row holding *begin (when the share is not empty).
__device__ __forceinline__ void warp_entries(const u64* ptr, u64 n, u64* begin, u64* end,
                                             u64* row) {
    const u64 lo = ptr[0], len = ptr[n] - lo;
    const u64 chunks = (len + WARP - 1) / WARP;
    const u64 warps = (u64)gridDim.x * (blockDim.x / WARP);
    const u64 w = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    *begin = lo + min(len, chunks * w / warps * WARP);
    *end = lo + min(len, chunks * (w + 1) / warps * WARP);
    *row = *begin < *end ? warp_row_of(ptr, n, *begin) : 0;
}

// The row of entry e for each lane (e at or past ptr[row0], below ptr[n]; any e where `valid`
// is false, whose row is then meaningless): row0 plus the row offsets past it that are at most
// e, read 32 at a time. Every lane must call with the same row0.
__device__ __forceinline__ u64 lane_row(const u64* ptr, u64 n, u64 row0, u64 e, bool valid) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 row = row0;
    bool open = valid;
    for (u64 base = row0; __any_sync(0xffffffffu, open); base += WARP) {
        const u64 q = base + 1 + lane;
        const u64 bound = q <= n ? ptr[q] : ~0ull;
        // How many of the 32 offsets (ascending) are at most e.
        u32 c = 0;
        #pragma unroll
        for (u32 s = 16; s > 0; s >>= 1) {
            if (__shfl_sync(0xffffffffu, bound, c + s - 1) <= e) c += s;
        }
        if (__shfl_sync(0xffffffffu, bound, WARP - 1) <= e) c = WARP;
        if (open && c < WARP) {
            row = base + c;
            open = false;
        }
    }
    return row;
}

// Inclusive scan of v across the warp.
__device__ __forceinline__ u64 warp_inclusive_scan_u64(u64 v) {
    const u32 lane = threadIdx.x & (WARP - 1);
    #pragma unroll
    for (u32 d = 1; d < WARP; d <<= 1) {
        u64 o = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += o;
    }
    return v;
}

// Exclusive scan of one value per thread across the block; `tmp` holds 32 u64 of shared memory.
// Returns the thread's exclusive prefix; *total receives the block's sum. Every thread must call.
__device__ __forceinline__ u64 block_exclusive_scan_u64(u64 v, u64* tmp, u64* total) {
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = (blockDim.x + WARP - 1) / WARP;
    u64 inc = warp_inclusive_scan_u64(v);
    if (lane == WARP - 1 || threadIdx.x == blockDim.x - 1) tmp[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        u64 w = lane < nwarps ? tmp[lane] : 0;
        u64 wi = warp_inclusive_scan_u64(w);
        if (lane < nwarps) tmp[lane] = wi - w;
        if (lane == nwarps - 1) total[0] = wi;
    }
    __syncthreads();
    u64 r = tmp[warp] + inc - v;
    __syncthreads();
    return r;
}

// Warp-aggregated counting (shared or global memory): the lanes that hit the same counter elect
// one lane to add their number, instead of each lane contending for it (the multisplit's chunks,
// the setup's bins, where consecutive items mostly share one).
__device__ __forceinline__ void warp_count(u32* counter, u32 key) {
    const u32 peers = __match_any_sync(__activemask(), key);
    if ((threadIdx.x % WARP) == (u32)(__ffs(peers) - 1)) atomicAdd(counter, (u32)__popc(peers));
}

// As warp_count, returning each lane's own slot: the counter's old value plus the lane's rank
// among its peers.
__device__ __forceinline__ u32 warp_claim(u32* counter, u32 key) {
    const u32 peers = __match_any_sync(__activemask(), key);
    const u32 lane = threadIdx.x % WARP;
    const u32 leader = __ffs(peers) - 1;
    u32 first = 0;
    if (lane == leader) first = atomicAdd(counter, (u32)__popc(peers));
    first = __shfl_sync(peers, first, leader);
    return first + __popc(peers & ((1u << lane) - 1));
}

// Next power of two of x (x >= 1).
__device__ __forceinline__ u32 next_pow2_u32(u32 x) {
    return x <= 1 ? 1u : 1u << (32 - __clz(x - 1));
}

__device__ __forceinline__ double warp_sum_f64(double v) {
    #pragma unroll
    for (u32 d = WARP / 2; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

__device__ __forceinline__ double warp_max_f64(double v) {
    #pragma unroll
    for (u32 d = WARP / 2; d > 0; d >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

// The sum (or, with `max`, the maximum) of v over the block, returned to every thread in the
// same order of operations. tmp: WARP doubles of shared memory. Every thread must call.
__device__ __forceinline__ double block_reduce_f64(double v, double* tmp, bool max) {
    v = max ? warp_max_f64(v) : warp_sum_f64(v);
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = (blockDim.x + WARP - 1) / WARP;
    if (lane == 0) tmp[warp] = v;
    __syncthreads();
    double r = tmp[0];
    for (u32 w = 1; w < nwarps; ++w) r = max ? fmax(r, tmp[w]) : r + tmp[w];
    __syncthreads();
    return r;
}

// The sum of v over the block as a 64-bit integer (exact, so in any order), returned to every
// thread. tmp: as block_reduce_f64 takes it. Every thread must call.
__device__ __forceinline__ u64 block_sum_u64(u64 v, double* tmp) {
    for (u32 d = WARP / 2; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    const u32 lane = threadIdx.x & (WARP - 1), warp = threadIdx.x / WARP;
    const u32 nwarps = (blockDim.x + WARP - 1) / WARP;
    u64* t = (u64*)tmp;
    if (lane == 0) t[warp] = v;
    __syncthreads();
    u64 r = 0;
    for (u32 w = 0; w < nwarps; ++w) r += t[w];
    __syncthreads();
    return r;
}

// MCL's order-free sums (src/quantized.rs): every term, non-negative, rounded up to a multiple of
// 2^-52 before it is added. Below 2 such sums are exact in a double, and as 64-bit integers
// counts of quanta, so they come out the same in any order, on every engine.
__device__ __forceinline__ double quantum(double x) { return ceil(x * 0x1p52) * 0x1p-52; }

// x's quanta, as an integer (x below 4096).
__device__ __forceinline__ u64 quanta(double x) { return (u64)ceil(x * 0x1p52); }

// Order-free sums at the scale of their largest term (src/quantized.rs's ColumnScale, for terms
// that may lie far below 2^-52: MCL's inflated powers): a term counts ceil(x * 2^shift) as a
// 64-bit integer, shift = 62 - floor(log2 largest) - h with 2^h at least the number of terms, so
// that the integers' sum stays below 2^63; the sum is that integer times 2^-shift.
__device__ __forceinline__ int sum_shift(double largest, u64 terms) {
    const int h = terms > 1 ? 64 - __clzll((long long)(terms - 1)) : 0;
    return 62 - ilogb(largest) - h;
}
__device__ __forceinline__ u64 quanta_at(double x, int shift) {
    return (u64)ceil(ldexp(x, shift));
}

// The product a·b rounded once in T's arithmetic (never fused with what follows).
__device__ __forceinline__ float product_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double product_rn(double a, double b) { return __dmul_rn(a, b); }

// The product a·b made in double: exact for two floats (48 significant bits).
__device__ __forceinline__ double product_exact(float a, float b) {
    return __dmul_rn((double)a, (double)b);
}
__device__ __forceinline__ double product_exact(double a, double b) { return __dmul_rn(a, b); }

// Whether a row of `products` intermediate products makes them exactly: as mcl does, a column of
// M² with fewer products than a tenth of its columns (src/quantized.rs's exact_products; the
// caller passes exact_below = ceil(columns / 10) for MCL's sums, 0 otherwise).
__device__ __forceinline__ bool makes_exact(u64 products, u64 exact_below) {
    return products < exact_below;
}

// How the numeric kernels sum products into shared memory. PlainSum: in T, with atomic adds
// whose order (and so rounding) varies from run to run: general SpGEMM. QuantaSum: MCL's
// order-free sums, as integer quanta; a value is then its quanta times 2^-52, rounded to T.
// Each adds a product a·b (`add_product`; `exact` as makes_exact says, which PlainSum is never
// asked) or a value of Ĉ (`add_heavy`): the heavy rows' products as `heavy` made them, in the
// type `Heavy` (for QuantaSum a double, which holds an exact product).
template <typename T> struct PlainSum {
    typedef T Acc;
    typedef T Heavy;
    // Sums may be made in C's own values (global atomics, in T).
    static constexpr bool IN_C = true;
    static __device__ __forceinline__ Heavy heavy(T a, T b, bool) { return product_rn(a, b); }
    static __device__ __forceinline__ void add_product(Acc* acc, T a, T b, bool) {
        atomicAdd(acc, product_rn(a, b));
    }
    static __device__ __forceinline__ void add_heavy(Acc* acc, Heavy p) { atomicAdd(acc, p); }
    static __device__ __forceinline__ T value(Acc a) { return a; }
};
// A 64-bit add made of two 32-bit ones: a 64-bit atomicAdd in shared memory is a compare-and-
// swap loop (ATOMS.CAST.SPIN), which spins where many products hit one column; the 32-bit adds
// are native. The add that carries out of the low word puts the carry into the high one, so the
// sum is exact (and the order still free) once every add is done.
__device__ __forceinline__ void atomic_add_u64_split(u64* a, u64 q) {
    u32* w = (u32*)a;  // little-endian: w[0] is the low word
    const u32 lo = (u32)q, hi = (u32)(q >> 32);
    const u32 old = atomicAdd(&w[0], lo);
    const u32 high = hi + ((u32)(old + lo) < old ? 1u : 0u);
    if (high != 0) atomicAdd(&w[1], high);
}

// A factor of MCL's positive products scaled to count in quanta (src/quantized.rs's scaled):
// a·2^52, exact in T.
template <typename T> __device__ __forceinline__ T scaled(T a) { return a * (T)0x1p52; }

// The quanta of the positive product a·b from s = scaled(a) (src/quantized.rs's count and
// count_exact): ceil(s·b) in T, or made exactly in double. Rounding commutes with the scaling
// by 2^52 where a·b is normal in T, and where it is subnormal both count one quantum, so this is
// quanta(QuantaSum<T>::heavy(a, b, exact)) with one multiply and one conversion.
__device__ __forceinline__ u64 quanta_scaled(float s, float b, bool exact) {
    return exact ? (u64)ceil(__dmul_rn((double)s, (double)b)) : (u64)ceilf(__fmul_rn(s, b));
}
__device__ __forceinline__ u64 quanta_scaled(double s, double b, bool) {
    return (u64)ceil(__dmul_rn(s, b));
}

template <typename T> struct QuantaSum {
    typedef u64 Acc;
    typedef double Heavy;
    // Sums are narrowed to T only once complete.
    static constexpr bool IN_C = false;
    static __device__ __forceinline__ Heavy heavy(T a, T b, bool exact) {
        return exact ? product_exact(a, b) : (double)product_rn(a, b);
    }
    static __device__ __forceinline__ void add_product(Acc* acc, T a, T b, bool exact) {
        atomic_add_u64_split(acc, quanta(heavy(a, b, exact)));
    }
    static __device__ __forceinline__ void add_heavy(Acc* acc, Heavy p) {
        atomic_add_u64_split(acc, quanta(p));
    }
    static __device__ __forceinline__ T value(Acc a) { return (T)((double)a * 0x1p-52); }
    // add_product for a product known to be positive in T, from s = scaled(a).
    static __device__ __forceinline__ void add_positive(Acc* acc, T s, T b, bool exact) {
        atomic_add_u64_split(acc, quanta_scaled(s, b, exact));
    }
};

// Whether the row [a0, a1) of A makes its products exactly (makes_exact): its products are the
// lengths of the rows of B its entries name. Every thread of the block must call; tmp: as
// block_sum_u64 takes it.
__device__ __forceinline__ bool block_row_exact(const u32* a_col, u64 a0, u64 a1,
                                                const u64* b_ptr, u64 exact_below, double* tmp) {
    if (exact_below == 0) return false;  // uniform
    u64 mine = 0;
    for (u64 e = a0 + threadIdx.x; e < a1; e += blockDim.x) {
        const u32 k = a_col[e];
        mine += b_ptr[k + 1] - b_ptr[k];
    }
    return makes_exact(block_sum_u64(mine, tmp), exact_below);
}
