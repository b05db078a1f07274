// Device-wide exclusive prefix sum of u64 counts (Ĉ.rowPtr, C.rowPtr, chunk offsets): each block
// scans SCAN_ITEMS elements and writes its total; the host scans the totals the same way
// (recursively) and adds them back.

#define SCAN_THREADS 1024
#define SCAN_PER_THREAD 4
#define SCAN_ITEMS (SCAN_THREADS * SCAN_PER_THREAD)

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
scan_blocks_u64(u64* data, u64 n, u64* block_totals) {
    __shared__ u64 tmp[WARP];
    __shared__ u64 total;
    const u64 base = (u64)blockIdx.x * SCAN_ITEMS + (u64)threadIdx.x * SCAN_PER_THREAD;
    u64 v[SCAN_PER_THREAD];
    u64 sum = 0;
    #pragma unroll
    for (int j = 0; j < SCAN_PER_THREAD; ++j) {
        v[j] = base + j < n ? data[base + j] : 0;
        sum += v[j];
    }
    u64 run = block_exclusive_scan_u64(sum, tmp, &total);
    #pragma unroll
    for (int j = 0; j < SCAN_PER_THREAD; ++j) {
        if (base + j < n) data[base + j] = run;
        run += v[j];
    }
    if (threadIdx.x == 0) block_totals[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
scan_add_u64(u64* data, u64 n, const u64* block_offsets) {
    const u64 add = block_offsets[blockIdx.x];
    const u64 base = (u64)blockIdx.x * SCAN_ITEMS;
    for (u32 j = threadIdx.x; j < SCAN_ITEMS; j += blockDim.x) {
        if (base + j < n) data[base + j] += add;
    }
}

// out[i] = in[i] + add for i < n: row offsets of a matrix placed behind `add` entries.
extern "C" __global__ void add_offset_u64(const u64* in, u64 n, u64 add, u64* out) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        out[i] = in[i] + add;
    }
}
