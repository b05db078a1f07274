#!/usr/bin/env bash
# Loading one graph from each input format: the whole process of `gmcl info` and of
# `gmcl tricount --engine ENGINE` (default cpu; gpu on the GPU host) on R-MAT (SCALE, default
# 20; edge factor 16, undirected, seed SEED, default 7) in FORMATS (default "el mtx npz"), one
# warm-up then the median of REPEAT (default 5) runs each, the answers checked equal; then
# tricount's own load_seconds and wall_s.total (--json) for each format, median of REPEAT more
# runs. The formats are converted from one edge list of distinct edges, or, with
# GENERATE=direct, each written by `gmcl generate` (repeats summed, self loops kept; a .npz then
# holds both directions of each edge). COMMANDS (default "info tricount") picks the commands.
# Runs from the project root over GMCL (default .gpu/gmcl); the tables go to stdout, the files
# to OUT (default /tmp/bench-load). The s22 target of issue 22 on the GPU host (OUT outside the
# folder that comes back: the archive is 1.56 GB):
#   OUT=/tmp/bench-load SCALE=22 SEED=1 GENERATE=direct ENGINE=gpu FORMATS=npz \
#     COMMANDS=tricount scripts/bench-load.sh
set -euo pipefail
gmcl=${GMCL:-.gpu/gmcl}
out=${OUT:-/tmp/bench-load}
scale=${SCALE:-20}
seed=${SEED:-7}
repeat=${REPEAT:-5}
engine=${ENGINE:-cpu}
formats=${FORMATS:-el mtx npz}
commands=${COMMANDS:-info tricount}
mkdir -p "$out"
if [ "${GENERATE:-convert}" = direct ]; then
    # Each format written by the generator: a .npz then holds both directions of every edge
    # (and the loops), as scipy.sparse.save_npz writes an undirected graph.
    for f in $formats; do
        "$gmcl" generate -s "$scale" -e 16 --undirected --seed "$seed" -o "$out/g.$f" -q
    done
else
    # One edge list, converted: every format holds the same entries.
    "$gmcl" generate -s "$scale" -e 16 --undirected --no-duplicates --seed "$seed" -o "$out/g.el" -q
    for f in $formats; do
        [ "$f" = el ] || "$gmcl" convert "$out/g.el" "$out/g.$f" -q
    done
fi
ls -l "$out"/g.* | awk '{print $5, $9}'

median() { # the median of the numbers on stdin
    sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

seconds() { # runs "$@" once, prints its wall seconds
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}'
}

printf '%-10s %-6s %10s\n' command format seconds
for cmd in $commands; do
    want=""
    for f in $formats; do
        args=("$cmd" "$out/g.$f")
        [ "$cmd" = tricount ] && args+=(--engine "$engine")
        got=$("$gmcl" "${args[@]}" -q | grep -v '^file' | grep -v '^format')
        if [ -z "$want" ]; then want=$got; elif [ "$got" != "$want" ]; then
            echo "$cmd: .$f gives a different answer" >&2; exit 1
        fi
        t=$(for _ in $(seq "$repeat"); do seconds "$gmcl" "${args[@]}" -q; done | median)
        printf '%-10s %-6s %10s\n' "$cmd" "$f" "$t"
    done
done

case " $commands " in *" tricount "*) ;; *) exit 0 ;; esac
printf '\n%-10s %-6s %12s %12s\n' tricount format load_seconds wall_total
for f in $formats; do
    "$gmcl" tricount "$out/g.$f" --engine "$engine" -q >/dev/null
    for _ in $(seq "$repeat"); do
        "$gmcl" tricount "$out/g.$f" --engine "$engine" --json -q
    done >"$out/tricount-$f.json"
    load=$(grep -o '"load_seconds":[0-9.e-]*' "$out/tricount-$f.json" | cut -d: -f2 | median)
    total=$(grep -o '"total":[0-9.e-]*' "$out/tricount-$f.json" | cut -d: -f2 | median)
    printf '%-10s %-6s %12s %12s\n' tricount "$f" "$load" "$total"
done
