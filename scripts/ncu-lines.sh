#!/usr/bin/env bash
# Runs on the GPU machine: where one launch of a kernel stalls, by line of kernels/
# (scripts/ncu_lines.py reads the report). KERNEL is a regex of the kernel's name, LAUNCH which
# of its launches (0-based, default 0). A kernel can run several times in one product or one
# MCL iteration (mcl_wide_prune also remakes the columns that overflowed its pool, in a launch
# of its own), and a profile of the wrong launch misleads: list the launches' durations first,
#   ncu --metrics gpu__time_duration.sum -k regex:KERNEL COMMAND...
# then pick the launch to read. The report, its CSV and the run's log stay in $OUT.
# Usage: KERNEL=mcl_wide_prune LAUNCH=2 scripts/ncu-lines.sh .gpu/gmcl cluster s16.npz --engine gpu -o /tmp/c
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/ncu-lines}
mkdir -p "$out"
kernel=${KERNEL:?KERNEL: a regex of the kernel name}
ncu --section SourceCounters --section WarpStateStats -k "regex:$kernel" \
    --launch-skip "${LAUNCH:-0}" --launch-count 1 --force-overwrite -o "$out/launch" "$@" > "$out/run.log" 2>&1
ncu --import "$out/launch.ncu-rep" --page source --csv --print-source cuda,sass > "$out/source.csv"
python3 "$here/ncu_lines.py" "$out/source.csv" "$here/../kernels" "${TOP:-40}"
