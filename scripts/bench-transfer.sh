#!/usr/bin/env bash
# Run on the GPU machine, from the project root: C's trip to the host, side by side for each
# gmcl binary given (e.g. an old and a new build carried in .gpu-base/ and .gpu/). Prints the
# bus's own pinned and pageable device-to-host bandwidth (CuPy), then for each binary three runs
# of sym R-MAT s18 ef8 squared (the copy phase and the whole product) and one of s20 ef16 A²
# (phases, wall time, peak RSS). Usage: scripts/bench-transfer.sh BIN [BIN...]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 GMCL_BINARY [GMCL_BINARY...]" >&2; exit 2; }
w=${TMPDIR:-/tmp}/gmcl-bench-transfer
mkdir -p "$w"
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
python3 - <<'PY'
import cupy as cp, numpy as np, time
n = 1 << 29
d = cp.arange(n, dtype=cp.uint32)
pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(n * 4), np.uint32, n)
for name, fresh in (("pinned", False), ("fresh pageable", True)):
    rates = []
    for _ in range(4):
        out = np.empty(n, np.uint32) if fresh else pinned
        cp.cuda.Device().synchronize(); t = time.perf_counter()
        d.get(out=out); cp.cuda.Device().synchronize()
        rates.append(n * 4 / (time.perf_counter() - t) / 1e9)
    print(f"device to host, {name}: {' '.join(f'{r:.1f}' for r in sorted(rates))} GB/s")
PY
"$1" generate -s 18 -e 8 --seed 7 --undirected --no-duplicates -q -o "$w/s18e8.el"
"$1" generate -s 20 -e 16 --seed 7 --undirected --no-duplicates -q -o "$w/s20.el"
for b in "$@"; do
    for run in 1 2 3; do
        GMCL_GPU_PROFILE=1 "$b" spgemm "$w/s18e8.el" --symmetrize --engine gpu 2>&1 |
            grep -E "copy C to the host|^gmcl: C:" | sed "s|^|$b s18 ef8 sym, run $run: |"
    done
    GMCL_GPU_PROFILE=1 /usr/bin/time -f "$b s20: wall %e s, peak RSS %M KB" "$b" spgemm "$w/s20.el" \
        --engine gpu 2>&1 | grep -E "copy C|^gmcl: C:|wall" | sed "s|^|$b s20: |"
done
