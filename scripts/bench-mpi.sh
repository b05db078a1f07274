#!/usr/bin/env bash
# MCL across MPI ranks: for P = 1, 2, 4 ranks (ranks x threads fixed to the machine's cores),
# each iteration's time, time spent on other ranks' rows and bytes the ranks exchanged (rank
# 0's iteration lines), each rank's time busy in the heavier iterations (the report's
# iteration_figures), each rank's peak memory (GNU time), and the cluster file checked
# byte-identical to the single-process run's. Needs a gmcl built with --features mpi and OpenMPI's mpirun. The ranks run with
# --bind-to none: OpenMPI binds each rank to one core when there are at most two, and a rank's
# threads would then share that core.
# GMCL (default target/release/gmcl), SCALE (default 15), EDGE_FACTOR (default 16), RANKS
# (default "1 2 4"), CORES (default nproc), ENGINE (default cpu; gpu: one GPU per rank by local
# rank, and the single process on one GPU); logs go to $OUT (default /tmp/bench-mpi).
set -euo pipefail
gmcl=${GMCL:-target/release/gmcl}
out=${OUT:-/tmp/bench-mpi}
cores=${CORES:-$(nproc)}
engine=${ENGINE:-cpu}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g="$tmp/g.el"
"$gmcl" generate --scale "${SCALE:-15}" --edge-factor "${EDGE_FACTOR:-16}" --undirected \
    --seed 1 -o "$g" -q
/usr/bin/time -f "single process: %e s wall, %M KB peak" \
    "$gmcl" cluster "$g" -o "$tmp/single.txt" --engine "$engine" --threads "$cores" \
    2>&1 | tee "$out/single.log" | tail -2
for p in ${RANKS:-1 2 4}; do
    threads=$(( cores / p > 0 ? cores / p : 1 ))
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --oversubscribe --bind-to none -n "$p" /usr/bin/time -f "rank peak: %M KB" \
        "$gmcl" cluster "$g" -o "$tmp/p$p.txt" --engine "$engine" --threads "$threads" \
        --json-file "$out/p$p.json" >"$out/p$p.log" 2>&1
    echo "== $p ranks x $threads threads"
    grep -E "iteration|rank peak|ranks \(" "$out/p$p.log"
    # Each iteration over a tenth of a second: how far its slowest rank was from the mean.
    python3 - "$out/p$p.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for it in report["iteration_figures"]:
    busy = [r["busy_seconds"] for r in it.get("ranks", [])]
    if it["seconds"] < 0.1 or not busy:
        continue
    mean = sum(busy) / len(busy)
    print(f"iteration {it['index']}: {it['seconds']:.2f} s, ranks busy "
          + " ".join(f"{b:.2f}" for b in busy)
          + (f" s (slowest {max(busy) / mean:.2f}x the mean)" if mean > 0 else " s")
          + f", {it['exchanged_bytes'] / 2**20:.1f} MiB exchanged")
PY
    if cmp -s "$tmp/single.txt" "$tmp/p$p.txt"; then
        echo "clusters: byte-identical to the single-process run"
    else
        echo "clusters: DIFFER from the single-process run" >&2
        exit 1
    fi
done | tee "$out/summary.log"
