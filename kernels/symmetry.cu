// Whether a CSR pattern is symmetric with no diagonal entry, decided on the device.

// For the pattern (ptr, col) of n rows (each strictly increasing, every column below n):
// counts[0] += the entries that are diagonal or whose mirror is missing, counts[1] += the
// entries checked, counts[2] += the others. An entry (i, j) is checked when row j comes before
// row i in the order of (length, id), and it is found in row j by binary search: the shorter
// row is searched. The pattern is symmetric without loops exactly when counts[0] is 0 and
// counts[1] equals counts[2]: the checked entries are distinct, so their mirrors, all present and
// all of the other kind, are as many distinct entries of the other kind; with equal counts they
// are all of them. Entry by entry (warp_entries): a hub's row is shared by many warps. Counts
// zeroed by the caller.
extern "C" __global__ void mirror_check(const u64* ptr, const u32* col, u64 n, u64* counts) {
    const u32 lane = threadIdx.x & (WARP - 1);
    u64 bad = 0, checked = 0, others = 0;
    u64 e, end, row;
    warp_entries(ptr, n, &e, &end, &row);
    for (; e < end; e += WARP) {
        const u64 x = e + lane;
        const bool valid = x < end;
        const u64 i = lane_row(ptr, n, row, x, valid);
        row = __shfl_sync(0xffffffffu, i, WARP - 1);
        if (!valid) continue;
        const u32 j = col[x];
        if (j == i) {
            bad++;
            continue;
        }
        const u64 len = ptr[i + 1] - ptr[i];
        const u64 jlo = ptr[j], jhi = ptr[j + 1], jlen = jhi - jlo;
        if (jlen > len || (jlen == len && j > i)) {
            others++;
            continue;
        }
        checked++;
        if (!sorted_contains(col, jlo, jhi, (u32)i)) bad++;
    }
    #pragma unroll
    for (u32 d = WARP / 2; d > 0; d >>= 1) {
        bad += __shfl_xor_sync(0xffffffffu, bad, d);
        checked += __shfl_xor_sync(0xffffffffu, checked, d);
        others += __shfl_xor_sync(0xffffffffu, others, d);
    }
    if (lane == 0) {
        if (bad) atomicAdd(&counts[0], bad);
        atomicAdd(&counts[1], checked);
        atomicAdd(&counts[2], others);
    }
}
