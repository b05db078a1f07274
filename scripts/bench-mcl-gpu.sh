#!/usr/bin/env bash
# MCL side by side on the GPU machine: gmcl on the GPU (matrix resident on the device), gmcl's
# CPU engine and van Dongen's mcl 22-282 on all the machine's cores, on symmetric R-MAT graphs
# (edge factor 16), partitions compared with `gmcl dist`. Run from the project root over
# binaries built by scripts/gpu-prepare.sh (.gpu/) and mcl unpacked from the Debian packages
# into .mcl/ (apt-get download mcl libtingea0; dpkg -x each into .mcl). SCALES (default
# "15 16"), THREADS (default: all cores), SKIP_CPU=1 / SKIP_MCL=1 leave those out, GPU_RUNS
# (default 1) runs gmcl on the GPU that many times (the first also fills the kernel cache),
# UNFUSED=1 adds GPU runs with --unfused (expansion stored, then pruned) for comparison.
# Logs and JSON reports go to $OUT (or /tmp/bench-mcl).
set -uo pipefail
out=${OUT:-/tmp/bench-mcl}
mkdir -p "$out"
threads=${THREADS:-$(nproc)}
mcl_bin=.mcl/usr/bin/mcl
export LD_LIBRARY_PATH=$(pwd)/.mcl/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
tmp=$(mktemp -d)
# Seconds since $1 (an $EPOCHREALTIME); awk starts in a millisecond, python would add tens.
secs() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
for s in ${SCALES:-15 16}; do
    g="$tmp/s$s.el"
    .gpu/gmcl generate --scale "$s" --edge-factor 16 --undirected --seed 1 -o "$g" -q
    echo "== sym R-MAT s$s ef16 ($(wc -l <"$g") edges), $threads threads" | tee -a "$out/summary.txt"
    modes=("")
    [ "${UNFUSED:-0}" = 1 ] && modes+=("--unfused")
    for mode in "${modes[@]}"; do
        for run in $(seq "${GPU_RUNS:-1}"); do
            t=$EPOCHREALTIME
            .gpu/gmcl --threads "$threads" cluster "$g" --engine gpu $mode -o "$tmp/s$s.gpu$mode" \
                --json-file "$out/s$s-gpu.json" 2>"$out/s$s-gpu$mode-$run.log" \
                || { echo "gpu run failed"; tail -20 "$out/s$s-gpu$mode-$run.log"; }
            echo "gmcl gpu $mode (run $run): $(secs "$t") s wall; $(cat "$out/s$s-gpu.json")" | tee -a "$out/summary.txt"
        done
    done
    if [ "${UNFUSED:-0}" = 1 ]; then
        echo "dist gpu gpu--unfused: $(.gpu/gmcl dist "$tmp/s$s.gpu" "$tmp/s$s.gpu--unfused" 2>&1 | tr '\n' ' ')" | tee -a "$out/summary.txt"
    fi
    if [ "${SKIP_CPU:-0}" != 1 ]; then
        t=$EPOCHREALTIME
        .gpu/gmcl --threads "$threads" cluster "$g" --engine cpu -o "$tmp/s$s.cpu" --json-file "$out/s$s-cpu.json" \
            2>"$out/s$s-cpu.log"
        echo "gmcl cpu: $(secs "$t") s wall; $(cat "$out/s$s-cpu.json")" | tee -a "$out/summary.txt"
        echo "dist gpu cpu: $(.gpu/gmcl dist "$tmp/s$s.gpu" "$tmp/s$s.cpu" 2>&1 | tr '\n' ' ')" | tee -a "$out/summary.txt"
    fi
    if [ "${SKIP_MCL:-0}" != 1 ] && [ -x "$mcl_bin" ]; then
        t=$EPOCHREALTIME
        "$mcl_bin" "$g" --abc -te "$threads" -o "$tmp/s$s.mcl" 2>"$out/s$s-mcl.log"
        echo "mcl -te $threads: $(secs "$t") s wall" | tee -a "$out/summary.txt"
        echo "dist gpu mcl: $(.gpu/gmcl dist "$tmp/s$s.gpu" "$tmp/s$s.mcl" 2>&1 | tr '\n' ' ')" | tee -a "$out/summary.txt"
    fi
done
