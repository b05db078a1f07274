#!/usr/bin/env bash
# Runs on the GPU machine from the project root, over binaries built by scripts/gpu-prepare.sh:
# the fused triangle kernel on symmetric R-MAT graphs (edge factor 16, seed 1, made as the
# anchor figures were), one process per scale: a warm-up count, then the median of REPEAT,
# checked against the CPU merge kernel on all the machine's cores; then the same with the GPU
# phases timed (GMCL_GPU_PROFILE=1, which waits between phases). Logs go to $OUT.
# SCALES (default "20 21 22"), REPEAT (default 5).
set -euo pipefail
out=${OUT:-/tmp/bench-tricount}
mkdir -p "$out"
tmp=$(mktemp -d)
nvidia-smi -L | tee "$out/device.txt"
for s in ${SCALES:-20 21 22}; do
    g="$tmp/s$s.el"
    .gpu/gmcl generate --scale "$s" --edge-factor 16 --undirected --seed 1 -o "$g" -q
    cpu=$(.gpu/gmcl tricount "$g" --engine cpu --json -q)
    echo "s$s cpu: $cpu" | tee -a "$out/tricount.log"
    gpu=$(/usr/bin/time -f "%e s wall, %M KB peak" .gpu/gmcl tricount "$g" --engine gpu --json -q --repeat "${REPEAT:-5}" 2>"$out/time-s$s.txt")
    echo "s$s gpu: $gpu ($(cat "$out/time-s$s.txt"))" | tee -a "$out/tricount.log"
    python3 - "$cpu" "$gpu" <<'PY'
import json, sys
c, g = (json.loads(a) for a in sys.argv[1:3])
if c["triangles"] != g["triangles"]:
    sys.exit(f"MISMATCH: cpu {c['triangles']} gpu {g['triangles']}")
PY
    GMCL_GPU_PROFILE=1 .gpu/gmcl tricount "$g" --engine gpu --repeat 2 2>&1 >/dev/null | tail -8 | tee -a "$out/phases.log"
    rm -f "$g"
done
