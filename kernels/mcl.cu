// MCL's per-column steps on the device: pruning (threshold, selection, recovery), rescaling,
// inflation and chaos, as src/mcl/prune.rs and src/mcl/inflate.rs do them on the host. gmcl
// keeps Mᵀ, so an expanded column of M² is a row of the batch; one block works on one row at a
// time. Values are never negative, so the bits of a value order like the value itself, and the
// k-th largest value is found by radix selection on those bits.

#define PRUNE_THREADS 256
// fused_len of a row that mcl_dense_prune did not make.
#define NOT_FUSED 0xffffffffffffffffull
#define INF_F64 __longlong_as_double(0x7ff0000000000000ll)

template <typename T> struct ValueBits;
template <> struct ValueBits<float> {
    typedef u32 K;
    static __device__ __forceinline__ K key(float v) { return __float_as_uint(v); }
    static __device__ __forceinline__ float value(K k) { return __uint_as_float(k); }
};
template <> struct ValueBits<double> {
    typedef u64 K;
    static __device__ __forceinline__ K key(double v) { return (u64)__double_as_longlong(v); }
    static __device__ __forceinline__ double value(K k) { return __longlong_as_double((long long)k); }
};

// The k-th largest (1-based) key among the keys of vals[0, len) that lie in [lo, hi); there must
// be at least k of them. Eight bits a pass, from the top: each pass counts the candidates' next
// digit, and warp 0 finds the digit holding the k-th. hist: 256 counters, sel: 2 values of
// shared memory.
template <typename T>
__device__ typename ValueBits<T>::K kth_largest_key(const T* vals, u64 len,
                                                    typename ValueBits<T>::K lo,
                                                    typename ValueBits<T>::K hi, u64 k,
                                                    u32* hist, u64* sel) {
    typedef typename ValueBits<T>::K K;
    K prefix = 0, mask = 0;
    for (int shift = (int)sizeof(K) * 8 - 8; shift >= 0; shift -= 8) {
        for (u32 i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        if (threadIdx.x == 0) {
            sel[0] = 0;
            sel[1] = 1;
        }
        __syncthreads();
        for (u64 i = threadIdx.x; i < len; i += blockDim.x) {
            K key = ValueBits<T>::key(vals[i]);
            if (key >= lo && key < hi && (key & mask) == prefix)
                atomicAdd(&hist[(u32)(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x < WARP) {
            // Lane l holds digits 255 - 8l down to 248 - 8l, so the scan runs from the top.
            const u32 lane = threadIdx.x;
            u32 c[8];
            u64 mine = 0;
            #pragma unroll
            for (u32 j = 0; j < 8; ++j) {
                c[j] = hist[255 - 8 * lane - j];
                mine += c[j];
            }
            const u64 inc = warp_inclusive_scan_u64(mine);
            const u64 before = inc - mine;
            if (before < k && inc >= k) {
                u64 acc = before;
                u32 d = 255 - 8 * lane;
                for (u32 j = 0; j < 8; ++j) {
                    if (acc + c[j] >= k) {
                        d = 255 - 8 * lane - j;
                        break;
                    }
                    acc += c[j];
                }
                sel[0] = d;
                sel[1] = k - acc;
            }
        }
        __syncthreads();
        prefix |= (K)sel[0] << shift;
        mask |= (K)255 << shift;
        k = sel[1];
        __syncthreads();
    }
    return prefix;
}

// How many of vals[0, len) are >= bar, and their sum (an order-free sum, as every sum here and
// in src/mcl/prune.rs, so that it is exact whatever the block's shape); every thread gets both.
template <typename T>
__device__ __forceinline__ void count_at_least(const T* vals, u64 len, T bar, double* tmp,
                                               u64* n_out, double* mass_out) {
    double n = 0.0, mass = 0.0;
    for (u64 i = threadIdx.x; i < len; i += blockDim.x) {
        const T v = vals[i];
        if (v >= bar) {
            n += 1.0;
            mass += quantum((double)v);
        }
    }
    *n_out = (u64)block_reduce_f64(n, tmp, false);
    *mass_out = block_reduce_f64(mass, tmp, false);
}

// A kept value rescaled by the kept mass (unless that is 0), then raised to the inflation, each
// step rounded to T as the host does it. Inflation 2 squares, as src/mcl/inflate.rs does (the
// correctly rounded square, which CUDA's pow does not promise).
template <typename T>
__device__ __forceinline__ T inflated(T v, double kept_mass, double inflation) {
    const T scaled = kept_mass != 0.0 ? (T)((double)v / kept_mass) : v;
    const double x = (double)scaled;
    return (T)(inflation == 2.0 ? __dmul_rn(x, x) : pow(x, inflation));
}

// How one column is pruned: every kept value reaches `bar`; `kept_mass` is their sum (-1 marks
// mcl's emergency loop, a column with nothing kept and no recovery), `isum` the sum of their
// inflated values, `out_len` the entries the column keeps (0 when inflation underflows to
// nothing) and `chaos` its (max − Σv²) · kept.
// `entries`: the column's entries before pruning.
template <typename T> struct ColumnPlan {
    T bar;
    double kept_mass, isum, chaos;
    u64 out_len, entries;
};

// Plans the pruning of one expanded column, vals[0, len), as src/mcl/prune.rs does it. The
// entries are the values >= `floor`: 0 for a stored column, the smallest positive value for a
// dense window where 0 marks a column without products. Every thread of the block must call;
// every thread gets the plan. tmp, hist, sel: shared memory as kth_largest_key takes it.
template <typename T>
__device__ ColumnPlan<T> plan_column(const T* v, u64 len, T floor, T cutoff, u32 select,
                                     u32 recover, double pct, double inflation, double* tmp,
                                     u32* hist, u64* sel) {
    typedef typename ValueBits<T>::K K;
    const K all = ~(K)0;
    // Thresholding at the floor drops exactly the non-entries, whatever the cutoff.
    const T cut = cutoff > floor ? cutoff : floor;
    double maxv = 0.0, center = 0.0, n_over = 0.0, mass = 0.0, n_in = 0.0;
    for (u64 i = threadIdx.x; i < len; i += blockDim.x) {
        const double x = (double)v[i];
        center += quantum(__dmul_rn(x, x));
        maxv = fmax(maxv, x);
        if (v[i] >= floor) n_in += 1.0;
        if (v[i] >= cut) {
            n_over += 1.0;
            mass += quantum(x);
        }
    }
    maxv = block_reduce_f64(maxv, tmp, true);
    center = block_reduce_f64(center, tmp, false);
    mass = block_reduce_f64(mass, tmp, false);
    const u64 n_kept = (u64)block_reduce_f64(n_over, tmp, false);
    const u64 entries = (u64)block_reduce_f64(n_in, tmp, false);

    T bar = cut;
    bool emergency = false;
    if (recover == 0 && n_kept == 0) {
        emergency = true;
    } else if (recover > 0 && n_kept < recover && mass < pct) {
        // Recovery: besides the entries over the threshold, the largest below it.
        bar = entries > recover
                  ? ValueBits<T>::value(kth_largest_key<T>(v, len, ValueBits<T>::key(floor),
                                                           ValueBits<T>::key(cut),
                                                           recover - n_kept, hist, sel))
                  : floor;
    } else if (select > 0 && n_kept > select) {
        // Selection of the S largest, then recovery of the largest it dropped if needed.
        const K skey = kth_largest_key<T>(v, len, ValueBits<T>::key(cut), all, select, hist, sel);
        const T sbar = ValueBits<T>::value(skey);
        u64 n_sel;
        double mass_sel;
        count_at_least(v, len, sbar, tmp, &n_sel, &mass_sel);
        bar = sbar;
        if (recover > 0 && n_sel < recover && mass_sel < pct) {
            bar = n_kept > recover
                      ? ValueBits<T>::value(kth_largest_key<T>(v, len, ValueBits<T>::key(cut),
                                                               skey, recover - n_sel, hist, sel))
                      : cut;
        }
    }

    ColumnPlan<T> plan;
    u64 kept = 1;
    plan.kept_mass = -1.0;
    plan.isum = 1.0;
    if (!emergency) {
        count_at_least(v, len, bar, tmp, &kept, &plan.kept_mass);
        // The inflated values' sum at the scale of the largest (inflation keeps the order, so
        // that is the largest value's), as src/mcl/inflate.rs makes it; 0 when all underflow.
        const double largest = (double)inflated((T)maxv, plan.kept_mass, inflation);
        plan.isum = 0.0;
        if (largest > 0.0) {  // uniform
            const int shift = sum_shift(largest, kept);
            u64 part = 0;
            for (u64 i = threadIdx.x; i < len; i += blockDim.x) {
                if (v[i] >= bar)
                    part += quanta_at((double)inflated(v[i], plan.kept_mass, inflation), shift);
            }
            plan.isum = ldexp((double)block_sum_u64(part, tmp), -shift);
        }
    }
    plan.bar = bar;
    plan.entries = entries;
    plan.chaos = (maxv - center) * (double)kept;
    plan.out_len = (kept > 0 && plan.isum > 0.0) ? kept : 0;
    return plan;
}

// Writes the kept entries of a planned column at out_col/out_val + base, in column order,
// rescaled, inflated and normalised: entry(i, &col, &val) gives the column's i-th of `len`
// candidates. The emergency loop is the caller's. Returns the smallest value written (+inf when
// none) among those this thread wrote. Every thread must call; tmp and total as
// block_exclusive_scan_u64 takes them.
template <typename T, typename Entry>
__device__ double write_column(u64 len, Entry entry, T bar, double kept_mass, double isum,
                               double inflation, u64 base, u32* out_col, T* out_val, u64* tmp,
                               u64* total) {
    double least = INF_F64;
    for (u64 i0 = 0; i0 < len; i0 += blockDim.x) {
        const u64 i = i0 + threadIdx.x;
        u32 col = 0;
        T val = (T)0;
        if (i < len) entry(i, &col, &val);
        const bool keep = i < len && val >= bar;
        const u64 at = block_exclusive_scan_u64(keep ? 1 : 0, tmp, total);
        if (keep) {
            const T x = (T)((double)inflated(val, kept_mass, inflation) / isum);
            out_col[base + at] = col;
            out_val[base + at] = x;
            least = fmin(least, (double)x);
        }
        base += *total;
    }
    return least;
}

// Lowers *least_bits (the bits of a non-negative double, +inf at first) to the block's smallest
// `least`. Every thread must call.
__device__ __forceinline__ void lower_least(u64* least_bits, double least, double* tmp) {
    least = -block_reduce_f64(-least, tmp, true);
    if (threadIdx.x == 0 && least < INF_F64)
        atomicMin(least_bits, (u64)__double_as_longlong(least));
}

// Plans the pruning of rows [0, nrows) of an expanded batch (row_bar, row_mass, row_isum: the
// fields of ColumnPlan; out_len: the entries each row keeps). Rows whose fused_len is not
// NOT_FUSED were expanded and pruned by mcl_dense_prune and keep fused_len entries (fused_len
// is read only when has_fused). The largest chaos goes to *chaos_bits as the bits of a
// non-negative double.
template <typename T>
__device__ void mcl_prune_plan(const u64* c_ptr, const T* c_val, u64 nrows, T cutoff, u32 select,
                               u32 recover, double pct, double inflation, const u64* fused_len,
                               int has_fused, u64* out_len, T* row_bar, double* row_mass,
                               double* row_isum, u64* chaos_bits) {
    __shared__ double tmp[WARP];
    __shared__ u32 hist[256];
    __shared__ u64 sel[2];
    for (u64 r = blockIdx.x; r < nrows; r += gridDim.x) {
        if (has_fused && fused_len[r] != NOT_FUSED) {
            if (threadIdx.x == 0) out_len[r] = fused_len[r];
            continue;
        }
        const u64 start = c_ptr[r];
        const ColumnPlan<T> plan = plan_column<T>(c_val + start, c_ptr[r + 1] - start, (T)0, cutoff,
                                                  select, recover, pct, inflation, tmp, hist, sel);
        if (threadIdx.x == 0) {
            if (plan.chaos > 0.0) atomicMax(chaos_bits, (u64)__double_as_longlong(plan.chaos));
            out_len[r] = plan.out_len;
            row_bar[r] = plan.bar;
            row_mass[r] = plan.kept_mass;
            row_isum[r] = plan.isum;
        }
    }
}

// Writes the kept entries of each row at out_ptr[r] (the prefix sum of mcl_prune_plan's
// out_len): planned rows from the batch, fused rows copied from the pool at pool_at[r]. Row r
// of the batch is column row0 + r of M, which is where the emergency loop goes. The smallest
// value written lowers *least_bits.
template <typename T>
__device__ void mcl_prune_write(const u64* c_ptr, const u32* c_col, const T* c_val, u64 nrows,
                                u64 row0, const T* row_bar, const double* row_mass,
                                const double* row_isum, double inflation, const u64* fused_len,
                                const u64* pool_at, const u32* pool_col, const T* pool_val,
                                int has_fused, const u64* out_ptr, u32* out_col, T* out_val,
                                u64* least_bits) {
    __shared__ u64 tmp[WARP];
    __shared__ u64 total;
    __shared__ double dtmp[WARP];
    double least = INF_F64;
    for (u64 r = blockIdx.x; r < nrows; r += gridDim.x) {
        const u64 o = out_ptr[r];
        const u64 len = out_ptr[r + 1] - o;
        if (len == 0) continue;
        if (has_fused && fused_len[r] != NOT_FUSED) {
            const u64 from = pool_at[r];
            for (u64 i = threadIdx.x; i < len; i += blockDim.x) {
                out_col[o + i] = pool_col[from + i];
                out_val[o + i] = pool_val[from + i];
                least = fmin(least, (double)pool_val[from + i]);
            }
            continue;
        }
        const double kept_mass = row_mass[r];
        if (kept_mass < 0.0) {
            if (threadIdx.x == 0) {
                out_col[o] = (u32)(row0 + r);
                out_val[o] = (T)1;
                least = fmin(least, 1.0);
            }
            continue;
        }
        const u64 start = c_ptr[r];
        const double l = write_column<T>(
            c_ptr[r + 1] - start,
            [&](u64 i, u32* col, T* val) {
                *col = c_col[start + i];
                *val = c_val[start + i];
            },
            row_bar[r], kept_mass, row_isum[r], inflation, o, out_col, out_val, tmp, &total);
        least = fmin(least, l);
    }
    lower_least(least_bits, least, dtmp);
}

#define GMCL_MCL_KERNELS(T, S)                                                                   \
extern "C" __global__ void __launch_bounds__(PRUNE_THREADS)                                      \
mcl_prune_plan_##S(const u64* c_ptr, const T* c_val, u64 nrows, T cutoff, u32 select,            \
                   u32 recover, double pct, double inflation, const u64* fused_len,              \
                   int has_fused, u64* out_len, T* row_bar, double* row_mass, double* row_isum,  \
                   u64* chaos_bits) {                                                            \
    mcl_prune_plan<T>(c_ptr, c_val, nrows, cutoff, select, recover, pct, inflation, fused_len,   \
                      has_fused, out_len, row_bar, row_mass, row_isum, chaos_bits);              \
}                                                                                                \
extern "C" __global__ void __launch_bounds__(PRUNE_THREADS)                                      \
mcl_prune_write_##S(const u64* c_ptr, const u32* c_col, const T* c_val, u64 nrows, u64 row0,     \
                    const T* row_bar, const double* row_mass, const double* row_isum,            \
                    double inflation, const u64* fused_len, const u64* pool_at,                  \
                    const u32* pool_col, const T* pool_val, int has_fused, const u64* out_ptr,   \
                    u32* out_col, T* out_val, u64* least_bits) {                                 \
    mcl_prune_write<T>(c_ptr, c_col, c_val, nrows, row0, row_bar, row_mass, row_isum, inflation, \
                       fused_len, pool_at, pool_col, pool_val, has_fused, out_ptr, out_col,      \
                       out_val, least_bits);                                                     \
}

GMCL_MCL_KERNELS(float, f32)
GMCL_MCL_KERNELS(double, f64)
