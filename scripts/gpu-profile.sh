#!/usr/bin/env bash
# Runs on the GPU machine: phase profiles of A² of symmetric R-MAT graphs through the CLI
# (GMCL_GPU_PROFILE=1), each run twice (the first warms the device up). Logs to $OUT.
set -uo pipefail
out=${OUT:-/tmp/gpu-profile}
mkdir -p "$out"
tmp=$(mktemp -d)
for s in ${SCALES:-14 16}; do
    .gpu/gmcl generate --scale $s --edge-factor 16 --undirected --seed 7 -o "$tmp/s$s.el" -q
    for run in 1 2; do
        GMCL_GPU_PROFILE=1 .gpu/gmcl spgemm "$tmp/s$s.el" --symmetrize --engine gpu --json 2>&1 | tee -a "$out/profile.log"
    done
done
