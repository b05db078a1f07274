#!/usr/bin/env bash
# Runs on the GPU machine, from the project root, over binaries built by scripts/gpu-prepare.sh
# (in .gpu/): every test binary with the GPU required (the huge tests too when GMCL_HUGE=1; the
# test that fills the GPU's memory alone, after them),
# compute-sanitizer on CLI runs, and a quick CLI comparison of the engines. Logs go to $OUT (or
# /tmp/gpu-check).
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
# The tests name the binary and the repository through these (the paths baked into them are
# those of the machine that built them).
export GMCL_REQUIRE_GPU=1 RUST_BACKTRACE=1 GMCL_BIN=$PWD/.gpu/gmcl GMCL_ROOT=$PWD
status=0
fills=a_buffer_larger_than_any_the_pool_holds_is_made_once_the_pool_gives_back
nvidia-smi -L | tee "$out/device.txt"
for t in .gpu/tests/*; do
    name=$(basename "$t")
    extra=()
    # The test that fills the GPU's memory runs alone, below.
    [ "${GMCL_HUGE:-0}" = 1 ] && extra=(--include-ignored --skip "$fills")
    if ! timeout 900 "$t" "${extra[@]}" >"$out/test-$name.log" 2>&1; then
        echo "FAILED: $name"; tail -40 "$out/test-$name.log"; status=1
    else
        echo "ok: $name ($(grep -h 'test result' "$out/test-$name.log" | tail -1))"
    fi
done
if ! timeout 300 .gpu/tests/gmcl-lib "$fills" --ignored --test-threads 1 >"$out/test-gpu-memory.log" 2>&1; then
    echo "FAILED: gmcl-lib $fills (alone)"; tail -40 "$out/test-gpu-memory.log"; status=1
else
    echo "ok: gmcl-lib $fills, alone ($(grep -h 'test result' "$out/test-gpu-memory.log" | tail -1))"
fi
# compute-sanitizer over small CLI runs (memcheck, racecheck on shared memory).
tmp=$(mktemp -d)
.gpu/gmcl generate --scale 11 --edge-factor 16 --undirected --weights --seed 3 -o "$tmp/s11.wel" -q
for tool in memcheck racecheck synccheck initcheck; do
    if compute-sanitizer --tool $tool --error-exitcode 9 .gpu/gmcl spgemm "$tmp/s11.wel" --symmetrize \
        --engine gpu -q >"$out/sanitizer-$tool.log" 2>&1; then
        echo "ok: compute-sanitizer $tool"
    else
        echo "FAILED: compute-sanitizer $tool"; tail -30 "$out/sanitizer-$tool.log"; status=1
    fi
    # The triangle kernels, with per-vertex counts (every atomic path).
    if compute-sanitizer --tool $tool --error-exitcode 9 .gpu/gmcl tricount "$tmp/s11.wel" --engine gpu \
        --per-vertex "$tmp/pv.tsv" -q >"$out/sanitizer-tricount-$tool.log" 2>&1; then
        echo "ok: compute-sanitizer $tool (tricount)"
    else
        echo "FAILED: compute-sanitizer $tool (tricount)"; tail -30 "$out/sanitizer-tricount-$tool.log"; status=1
    fi
    # Device-resident MCL: expansion, pruning, inflation and stacking kernels.
    if compute-sanitizer --tool $tool --error-exitcode 9 .gpu/gmcl cluster "$tmp/s11.wel" --engine gpu \
        -q -o "$tmp/s11.clusters" >"$out/sanitizer-cluster-$tool.log" 2>&1; then
        echo "ok: compute-sanitizer $tool (cluster)"
    else
        echo "FAILED: compute-sanitizer $tool (cluster)"; tail -30 "$out/sanitizer-cluster-$tool.log"; status=1
    fi
done
# The engines side by side through the CLI, outputs compared.
for s in 14 16; do
    .gpu/gmcl generate --scale $s --edge-factor 16 --undirected --seed 7 -o "$tmp/s$s.el" -q
    for e in cpu gpu; do
        .gpu/gmcl spgemm "$tmp/s$s.el" --symmetrize --engine $e --json -o "$tmp/c-$e.mtx" | tee -a "$out/cli.log"
    done
    if cmp -s "$tmp/c-cpu.mtx" "$tmp/c-gpu.mtx"; then echo "s$s: cpu and gpu outputs identical"
    else echo "s$s: outputs differ in bytes (values may differ in the last digits; the tests compare them)"; fi
done
exit $status
