// Setup phase (paper Alg. 3): intermediate products per row, and the partition of rows (or of
// chunks) into bins by size: hash bins for light ones, one bin for heavy ones.

// Rows of more than BLOCK_HUB entries are walked by the whole block, at most BLOCK_HUB_LIST of
// them a block and round (others by their warp): R-MAT's largest hubs are rows 0, 1, 2, 4, ...,
// so most of them fall to the first warp, which walked them one after another.
#ifndef BLOCK_HUB
#define BLOCK_HUB 1024
#endif
#define BLOCK_HUB_LIST 32

// out[r] = intermediate products of row row0 + r of A·B. The blocks take blockDim rows at a
// time, a lane per row; rows of more than 32 entries (the hubs of a power-law A, which left one
// thread walking thousands of entries while the rest had finished) are summed by the whole
// warp, and those of more than BLOCK_HUB by the whole block.
extern "C" __global__ void row_products(const u64* a_ptr, const u32* a_col, const u64* b_ptr,
                                        u64 row0, u64 nrows, u64* out) {
    __shared__ u32 nbig;
    __shared__ u32 big[BLOCK_HUB_LIST];
    __shared__ unsigned long long big_sum[BLOCK_HUB_LIST];
    const u32 lane = threadIdx.x & (WARP - 1);
    const u64 step = (u64)gridDim.x * blockDim.x;
    // Rounds are the same for every thread of a block (the barriers below need it).
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < nrows; base += step) {
        if (threadIdx.x == 0) nbig = 0;
        __syncthreads();
        const u64 r = base + threadIdx.x;
        u64 e0 = 0, e1 = 0, s = 0;
        if (r < nrows) {
            e0 = a_ptr[row0 + r];
            e1 = a_ptr[row0 + r + 1];
        }
        u32 slot = BLOCK_HUB_LIST;
        if (e1 - e0 > BLOCK_HUB) {
            slot = atomicAdd(&nbig, 1u);
            if (slot < BLOCK_HUB_LIST) {
                big[slot] = threadIdx.x;
                big_sum[slot] = 0;
            }
        }
        const bool by_block = slot < BLOCK_HUB_LIST;
        const bool hub = !by_block && e1 - e0 > WARP;
        if (!hub && !by_block) {
            for (u64 e = e0; e < e1; ++e) {
                const u32 k = a_col[e];
                s += b_ptr[k + 1] - b_ptr[k];
            }
        }
        for (u32 todo = __ballot_sync(0xffffffffu, hub); todo; todo &= todo - 1) {
            const u32 l = __ffs(todo) - 1;
            const u64 f0 = __shfl_sync(0xffffffffu, e0, l), f1 = __shfl_sync(0xffffffffu, e1, l);
            u64 part = 0;
            for (u64 e = f0 + lane; e < f1; e += WARP) {
                const u32 k = a_col[e];
                part += b_ptr[k + 1] - b_ptr[k];
            }
            part = __shfl_sync(0xffffffffu, warp_inclusive_scan_u64(part), WARP - 1);
            if (lane == l) s = part;
        }
        __syncthreads();
        const u32 n = min(nbig, (u32)BLOCK_HUB_LIST);
        for (u32 h = 0; h < n; ++h) {
            const u64 rr = row0 + base + big[h];
            const u64 f0 = a_ptr[rr], f1 = a_ptr[rr + 1];
            u64 part = 0;
            for (u64 e = f0 + threadIdx.x; e < f1; e += blockDim.x) {
                const u32 k = a_col[e];
                part += b_ptr[k + 1] - b_ptr[k];
            }
            part = __shfl_sync(0xffffffffu, warp_inclusive_scan_u64(part), WARP - 1);
            if (lane == 0 && part != 0) atomicAdd(&big_sum[h], (unsigned long long)part);
        }
        __syncthreads();
        if (by_block) s = big_sum[slot];
        if (r < nrows) out[r] = s;
    }
}

// The most bins a sorting into bins has (MAX_BINS in src/spgemm/gpu/bins.rs): the limits travel
// by value, with the launch, rather than in a buffer of their own.
#define MAX_BINS 16
struct BinLimits {
    u64 limit[MAX_BINS - 1];
};

// Bins items [0, n) whose sizes are ptr[i+1] - ptr[i]: bin_of[i] = the first bin b < nbins whose
// limit the size is within, nbins (heavy) past them all, none (0xffffffff) for an empty item;
// tallies[b] counts bin b's items.
extern "C" __global__ void classify_sizes(const u64* ptr, u64 n, BinLimits limits, u32 nbins,
                                          u32* bin_of, u32* tallies) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        u64 size = ptr[i + 1] - ptr[i];
        u32 bin = 0xffffffffu;
        if (size > 0) {
            bin = nbins;
            for (u32 b = 0; b < nbins; ++b) {
                if (size <= limits.limit[b]) { bin = b; break; }
            }
            warp_count(&tallies[bin], bin);
        }
        bin_of[i] = bin;
    }
}

// Places each binned item in its bin's list, the bins one after another in `lists`: each block
// finds the bins' offsets from their counts (tallies[0..=nbins]); tallies[nbins + 1 + b], from
// 0, claims places within bin b.
extern "C" __global__ void scatter_bins(const u32* bin_of, u64 n, u32 nbins, u32* tallies,
                                        u32* lists) {
    __shared__ u32 offset[MAX_BINS];
    if (threadIdx.x == 0) {
        u32 run = 0;
        for (u32 b = 0; b <= nbins; ++b) {
            offset[b] = run;
            run += tallies[b];
        }
    }
    __syncthreads();
    u32* cursor = tallies + nbins + 1;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        u32 b = bin_of[i];
        if (b != 0xffffffffu) lists[offset[b] + warp_claim(&cursor[b], b)] = (u32)i;
    }
}

// out[j] = ptr[idx[j] + 1] - ptr[idx[j]]: the sizes of the listed items (out has n + 1 slots,
// the last set to 0, ready for an exclusive scan).
extern "C" __global__ void gather_sizes(const u64* ptr, const u32* idx, u64 n, u64* out) {
    for (u64 j = blockIdx.x * (u64)blockDim.x + threadIdx.x; j <= n;
         j += (u64)gridDim.x * blockDim.x) {
        out[j] = j < n ? ptr[idx[j] + 1] - ptr[idx[j]] : 0;
    }
}

// Fills a[i] = i for i < n (the identity map of heavy rows into Ĉ at level 0).
extern "C" __global__ void iota_u32(u32* a, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        a[i] = (u32)i;
    }
}

// row_nnz[heavy_rows[h]] = entries of heavy row h: the sum of its chunks' counts in the grid,
// read off the grid's exclusive scan `gs` (nchunks slots per heavy row).
extern "C" __global__ void grid_row_sums(const u64* gs, const u32* heavy_rows, u64 nheavy,
                                         u32 nchunks, u64* row_nnz) {
    for (u64 h = blockIdx.x * (u64)blockDim.x + threadIdx.x; h < nheavy;
         h += (u64)gridDim.x * blockDim.x) {
        row_nnz[heavy_rows[h]] = gs[(h + 1) * nchunks] - gs[h * nchunks];
    }
}

// For each block b of a static partition of [0, total) into groups of group_elems elements:
// first[b] = the row holding element b * group_elems, last[b] = the row holding the group's last
// element (rows as laid out by the offsets ptr[0..n]). One thread per block boundary, so that the
// kernels over the partition start without a binary search of their own.
extern "C" __global__ void group_starts(const u64* ptr, u64 n, u64 group_elems, u64 total,
                                        u64 nblocks, u32* first, u32* last) {
    for (u64 b = blockIdx.x * (u64)blockDim.x + threadIdx.x; b < nblocks;
         b += (u64)gridDim.x * blockDim.x) {
        const u64 g0 = b * group_elems;
        const u64 g1 = min(g0 + group_elems, total);
        first[b] = (u32)(upper_bound_u64(ptr, 0, n + 1, g0) - 1);
        last[b] = (u32)(upper_bound_u64(ptr, 0, n + 1, g1 - 1) - 1);
    }
}
