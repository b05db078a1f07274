#!/usr/bin/env bash
# Loading one graph from each input format: the whole process of `gmcl info` and of
# `gmcl tricount --engine cpu` on R-MAT (SCALE, default 20; edge factor 16, undirected) written
# as .el, .mtx and SciPy's .npz, one warm-up then the median of REPEAT (default 5) runs each,
# the answers checked equal. Runs from the project root over GMCL (default .gpu/gmcl); the table
# goes to stdout, the files to $OUT (or /tmp/bench-load).
set -euo pipefail
gmcl=${GMCL:-.gpu/gmcl}
out=${OUT:-/tmp/bench-load}
scale=${SCALE:-20}
repeat=${REPEAT:-5}
mkdir -p "$out"
"$gmcl" generate -s "$scale" -e 16 --undirected --no-duplicates --seed 7 -o "$out/g.el" -q
"$gmcl" convert "$out/g.el" "$out/g.mtx" -q
"$gmcl" convert "$out/g.el" "$out/g.npz" -q
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
for cmd in info tricount; do
    want=""
    for f in el mtx npz; do
        args=("$cmd" "$out/g.$f")
        [ "$cmd" = tricount ] && args+=(--engine cpu)
        got=$("$gmcl" "${args[@]}" -q | grep -v '^file' | grep -v '^format')
        if [ -z "$want" ]; then want=$got; elif [ "$got" != "$want" ]; then
            echo "$cmd: .$f gives a different answer" >&2; exit 1
        fi
        t=$(for _ in $(seq "$repeat"); do seconds "$gmcl" "${args[@]}" -q; done | median)
        printf '%-10s %-6s %10s\n' "$cmd" "$f" "$t"
    done
done
