#!/usr/bin/env bash
# Loading one graph from each input format: the whole process of `gmcl info` and of
# `gmcl tricount --engine ENGINE` (default cpu; gpu on the GPU host) on R-MAT (SCALE, default
# 20; edge factor 16, undirected, self loops kept, seed SEED, default 7) written as .el, .mtx and
# SciPy's .npz, one warm-up then the median of REPEAT (default 5) runs each, the answers checked
# equal; then tricount's own load_seconds (--json) for each format, median of the same runs.
# Runs from the project root over GMCL (default .gpu/gmcl); the tables go to stdout, the files
# to $OUT (or /tmp/bench-load). The s22 target of issue 22 on the GPU host:
#   SCALE=22 SEED=1 ENGINE=gpu FORMATS=npz COMMANDS=tricount scripts/bench-load.sh
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
for f in $formats; do
    "$gmcl" generate -s "$scale" -e 16 --undirected --seed "$seed" -o "$out/g.$f" -q
done
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
