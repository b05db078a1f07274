#!/usr/bin/env bash
# MCL side by side on this machine's CPU (the 3x-mcl target at s16 on 2 cores): gmcl's CPU engine (one or more
# binaries, e.g. a change and its base) and van Dongen's mcl 22-282 with the same thread count,
# in alternating rounds, on a symmetric R-MAT graph (edge factor 16), partitions compared with
# `gmcl dist`. Run from the project root, with mcl unpacked from the Debian packages into .mcl/
# (mkdir -p .mcl && cd .mcl && apt-get download mcl libtingea0 && for f in *.deb; do dpkg -x
# "$f" .; done). GMCL (default target/release/gmcl; several, space-separated), SCALE (default
# 16), THREADS (default 2), ROUNDS (default 2), SKIP_MCL=1 leaves mcl out. Each run's start time,
# load average, /usr/bin/time line and gmcl's progress go to $OUT/summary.txt (default
# /tmp/bench-mcl-cpu).
set -uo pipefail
out=${OUT:-/tmp/bench-mcl-cpu}
mkdir -p "$out"
read -r -a bins <<<"${GMCL:-target/release/gmcl}"
scale=${SCALE:-16}
threads=${THREADS:-2}
mcl_bin=.mcl/usr/bin/mcl
export LD_LIBRARY_PATH=$(pwd)/.mcl/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g="$tmp/s$scale.el"
"${bins[0]}" generate --scale "$scale" --edge-factor 16 --undirected --seed 1 -o "$g" -q
log() { echo "$*" | tee -a "$out/summary.txt"; }
# A binary's name in the logs: its folder and file, e.g. release-gmcl.
name_of() { echo "$(basename "$(dirname "$1")")-$(basename "$1")"; }
started() { log "== round $1 $2 start $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"; }
log "== sym R-MAT s$scale ef16 ($(wc -l <"$g") edges), $threads threads, $(date -u +%F)"
for round in $(seq "${ROUNDS:-2}"); do
    for b in "${bins[@]}"; do
        name=$(name_of "$b")
        started "$round" "$name"
        /usr/bin/time -f "wall %e user %U sys %S cpu %P rss %MkB" "$b" --threads "$threads" \
            cluster "$g" --engine cpu -o "$tmp/$name.$round" 2>&1 \
            | grep -E "iteration +[1-4] |clusters of|^wall" | tee -a "$out/summary.txt"
    done
    if [ "${SKIP_MCL:-0}" != 1 ] && [ -x "$mcl_bin" ]; then
        started "$round" mcl
        /usr/bin/time -f "wall %e user %U sys %S cpu %P rss %MkB" "$mcl_bin" "$g" --abc \
            -te "$threads" -o "$tmp/mcl.$round" 2>&1 | tail -1 | tee -a "$out/summary.txt"
    fi
done
if [ "${SKIP_MCL:-0}" != 1 ] && [ -x "$mcl_bin" ]; then
    for b in "${bins[@]}"; do
        name=$(name_of "$b")
        log "dist $name mcl: $("${bins[0]}" dist "$tmp/$name.1" "$tmp/mcl.1" 2>&1 | tr '\n' ' ')"
    done
fi
