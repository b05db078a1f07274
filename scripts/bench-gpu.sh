#!/usr/bin/env bash
# Runs on the GPU machine, from the project root, over binaries built here by
# scripts/gpu-prepare.sh (in .gpu/): `gmcl bench spgemm` on the paper's R-MAT suite and on the
# symmetric squares, up to scale 18 (override with MAX_SCALE, REPEAT), gMAGNUS against every
# cuSPARSE algorithm. Tables, JSON, plots and logs go to $OUT (or /tmp/bench-gpu). Each suite
# runs under a time limit so that the whole script stays within about 8 minutes on an H200; the
# JSON and the plot are rewritten after every case, so a suite cut short still leaves its figures.
set -uo pipefail
out=${OUT:-/tmp/bench-gpu}
mkdir -p "$out"
max=${MAX_SCALE:-18}
repeat=${REPEAT:-5}
export RUST_BACKTRACE=1
status=0
{ nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv; } \
    >"$out/device.txt" 2>&1
cat "$out/device.txt"
.gpu/gmcl --version | tee -a "$out/device.txt"

run_suite() { # name, time limit (s), then the arguments of gmcl bench spgemm
    local name=$1 limit=$2
    shift 2
    echo "== $name: gmcl bench spgemm $* (limit ${limit} s)"
    local start=$SECONDS
    timeout "$limit" .gpu/gmcl bench spgemm "$@" --repeat "$repeat" \
        --json "$out/$name.json" --plot "$out/$name.svg" \
        >"$out/$name.txt" 2>"$out/$name.log"
    local rc=$?
    cat "$out/$name.txt"
    echo "($name: exit $rc after $((SECONDS - start)) s; progress in $name.log)"
    if [ $rc -ne 0 ]; then
        status=1
        tail -20 "$out/$name.log"
    fi
}

run_suite rmat 270 --suite rmat-paper --max-scale "$max"
run_suite sym 170 --suite sym --max-scale "$max"
exit $status
