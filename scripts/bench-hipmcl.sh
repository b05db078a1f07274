#!/usr/bin/env bash
# gmcl against HipMCL (CombBLAS's Applications/MCL.cpp) on the same graph, ranks and threads:
# whole-process wall time and peak memory per rank of each, and the two partitions compared
# with `gmcl dist` (split/join, VI, adjusted Rand), and with mcl's where mcl is installed.
#
# HipMCL is public (github.com/PASSIONLab/CombBLAS); build it with cmake and MPI:
#   cmake -S CombBLAS -B build -DCMAKE_BUILD_TYPE=Release && make -C build mcl
# then HIPMCL=build/Applications/mcl scripts/bench-hipmcl.sh.
# Needs a gmcl built with --features mpi. HipMCL runs on a square number of ranks (its 2D
# process grid), so RANKS lists squares.
# GMCL (default target/release/gmcl), HIPMCL (required), ENGINE (gmcl's per rank: cpu, the
# default, or gpu: every rank on the machine's GPU), SCALE (default 15), EDGE_FACTOR
# (default 16), RANKS (default "1 4"), CORES (default nproc), LIMIT (seconds a HipMCL run may
# take, default 600); logs go to $OUT (default /tmp/bench-hipmcl).
set -euo pipefail
gmcl=${GMCL:-target/release/gmcl}
hipmcl=${HIPMCL:?set HIPMCL to the built Applications/mcl of CombBLAS}
out=${OUT:-/tmp/bench-hipmcl}
cores=${CORES:-$(nproc)}
limit=${LIMIT:-600}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gmcl" generate --scale "${SCALE:-15}" --edge-factor "${EDGE_FACTOR:-16}" --undirected \
    --seed 1 -o "$tmp/g.el" -q
# HipMCL reads labelled triples; both directions of each edge (it symmetrises too) with the
# node ids as labels, so both tools' cluster files name the same nodes.
awk '{print $1"\t"$2"\t1"; print $2"\t"$1"\t1"}' "$tmp/g.el" >"$tmp/g.abc"
# mcl itself, where installed (Debian's package `mcl`), as the reference both are measured from.
if command -v mcl >/dev/null; then
    start=$(date +%s.%N)
    mcl "$tmp/g.abc" --abc -I 2 -te "$cores" -o "$tmp/mcl.txt" >"$out/mcl.log" 2>&1
    end=$(date +%s.%N)
    echo "mcl -te $cores: $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s wall" | tee "$out/mcl.summary"
fi
for p in ${RANKS:-1 4}; do
    threads=$(( cores / p > 0 ? cores / p : 1 ))
    echo "== $p ranks x $threads threads"
    if timeout "$limit" mpirun --oversubscribe --bind-to none -n "$p" -x OMP_NUM_THREADS="$threads" \
        /usr/bin/time -f "rank peak: %M KB" \
        "$hipmcl" -M "$tmp/g.abc" -I 2 -o "$tmp/hip$p.txt" >"$out/hipmcl-p$p.log" 2>&1; then
        echo "HipMCL: $(grep -E '^Total time' "$out/hipmcl-p$p.log" | tail -1), \
$(grep -c 'Iteration#' "$out/hipmcl-p$p.log") iterations, \
$(grep 'rank peak' "$out/hipmcl-p$p.log" | sort -k3 -n | tail -1)"
        sed 's/ *$//; s/ /\t/g' "$tmp/hip$p.txt" >"$tmp/hip$p.tsv"
    else
        echo "HipMCL: not finished within $limit s ($(grep -c 'Iteration#' "$out/hipmcl-p$p.log" || true) iterations done)"
    fi
    start=$(date +%s.%N)
    mpirun --oversubscribe --bind-to none -n "$p" /usr/bin/time -f "rank peak: %M KB" \
        "$gmcl" cluster "$tmp/g.el" -o "$tmp/gmcl$p.txt" --engine "${ENGINE:-cpu}" --threads "$threads" \
        >"$out/gmcl-p$p.log" 2>&1
    end=$(date +%s.%N)
    echo "gmcl: $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s wall (mpirun included), \
$(grep -c 'gmcl: iteration' "$out/gmcl-p$p.log") iterations, \
$(grep 'rank peak' "$out/gmcl-p$p.log" | sort -k3 -n | tail -1)"
    if [ -f "$tmp/hip$p.tsv" ]; then
        echo "gmcl against HipMCL:"
        "$gmcl" dist "$tmp/gmcl$p.txt" "$tmp/hip$p.tsv" -q
    fi
    if [ -f "$tmp/mcl.txt" ]; then
        echo "gmcl against mcl:"
        "$gmcl" dist "$tmp/gmcl$p.txt" "$tmp/mcl.txt" -q
        if [ -f "$tmp/hip$p.tsv" ]; then
            echo "HipMCL against mcl:"
            "$gmcl" dist "$tmp/hip$p.tsv" "$tmp/mcl.txt" -q
        fi
    fi
done | tee "$out/summary.log"
