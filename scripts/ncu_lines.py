#!/usr/bin/env python3
"""Where one kernel launch's warps stall, by line of kernels/.

Reads the source page of an Nsight Compute report exported as CSV
(`ncu --import R.ncu-rep --page source --csv --print-source cuda,sass > S.csv`, the report
taken with `--section SourceCounters`) and prints the source lines with the most warp stall
samples, each with its share, its text and its three largest stall reasons, after each file's
share. gmcl's kernels are compiled by NVRTC from one translation unit whose `#line` markers
name each file, so the report names `common.cuh`, `dense.cu`, ...; their text is read from
the kernels folder given (the same commit as the profiled build).

Usage: scripts/ncu_lines.py S.csv [KERNELS_DIR] [TOP]
"""

import csv
import os
import sys

REASONS = [
    "stall_barrier",
    "stall_branch_resolving",
    "stall_lg",
    "stall_long_sb",
    "stall_math",
    "stall_mio",
    "stall_not_selected",
    "stall_selected",
    "stall_short_sb",
    "stall_wait",
]


def number(text):
    """A CSV cell as a number: 0 for empty cells and '-'."""
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return 0.0


def by_line(rows):
    """{(file, line): (samples, {reason: samples})} over the CUDA source rows of the export."""
    lines = {}
    path = None
    width = None
    for row in rows:
        if not row:
            continue
        if row[0] == "File Path":
            path = os.path.basename(row[1])
            continue
        if row[0] == "Line No":
            # The columns read, found once per file's header.
            width = len(row)
            at_samples = row.index("Warp Stall Sampling (All Samples)")
            at_reasons = [(r, row.index(r)) for r in REASONS if r in row]
            continue
        if width is None or path is None or len(row) < width:
            continue
        try:
            line = int(row[0])
        except ValueError:
            continue  # a SASS row, or a blank line number
        total, reasons = lines.get((path, line), (0.0, {}))
        for r, at in at_reasons:
            reasons[r] = reasons.get(r, 0.0) + number(row[at])
        lines[(path, line)] = (total + number(row[at_samples]), reasons)
    return lines


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.reader(f))
    kernels = sys.argv[2] if len(sys.argv) > 2 else "kernels"
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    lines = by_line(rows)
    total = sum(s for s, _ in lines.values())
    if total == 0:
        sys.exit(f"{sys.argv[1]}: no warp stall samples (was the report taken with "
                 "--section SourceCounters?)")
    files = {}
    for (path, _), (samples, _) in lines.items():
        files[path] = files.get(path, 0.0) + samples
    print(f"{int(total)} samples; by file: " + ", ".join(
        f"{p} {100 * s / total:.1f}%" for p, s in sorted(files.items(), key=lambda x: -x[1])))
    texts = {}
    for path in files:
        try:
            with open(os.path.join(kernels, path)) as f:
                texts[path] = f.read().split("\n")
        except OSError:
            texts[path] = []
    ranked = sorted(lines.items(), key=lambda x: -x[1][0])[:top]
    for (path, line), (samples, reasons) in ranked:
        text = texts[path][line - 1].strip() if line <= len(texts[path]) else "?"
        most = sorted(reasons.items(), key=lambda x: -x[1])[:3]
        why = ", ".join(f"{r[len('stall_'):]} {int(n)}" for r, n in most if n > 0)
        print(f"{100 * samples / total:6.2f}%  {path}:{line}  {text[:90]}  [{why}]")


if __name__ == "__main__":
    main()
