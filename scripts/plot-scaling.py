#!/usr/bin/env python3
"""Speed-up against GPUs, per workload, from docs/scaling.csv (the runs of several GPUs of one
host that docs/performance.md logs): each workload's one-process single-GPU time divided by its
time on P ranks, one rank per GPU, with issue 26's targets (1.8x on 2 GPUs, 3.4x on 4) drawn
beside them. A workload (its name before the build in parentheses) and metric is drawn from 1x
on one GPU to its latest speed-up at each P: the latest row (rows are appended as they are
measured) with both a one-GPU time and a time on P ranks, so that each point compares runs of
one call. The CSV keeps every row: the history stays in the file.

    pip install matplotlib
    python3 scripts/plot-scaling.py [docs/scaling.csv] [docs/scaling.svg]
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "docs/scaling.csv"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/scaling.svg"
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot([1, 2, 4], [1.0, 1.8, 3.4], "k:", label="issue 26's targets")
    latest = {}
    for r in rows(src):
        if not r["one_gpu"]:
            # A workload one GPU cannot run (or that was not run there) has no speed-up.
            continue
        speedups = latest.setdefault((r["workload"].split(" (")[0], r["metric"]), {1: 1.0})
        for p in (2, 4):
            if r[f"p{p}"]:
                speedups[p] = float(r["one_gpu"]) / float(r[f"p{p}"])
    for (workload, metric), speedups in latest.items():
        if len(speedups) == 1:
            continue
        xs = sorted(speedups)
        ax.plot(xs, [speedups[p] for p in xs], "o-", label=f"{workload} ({metric})")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4], ["1", "2", "4"])
    ax.set_yscale("log", base=2)
    ticks = [1 / 4, 1 / 2, 1, 2, 4]
    ax.set_yticks(ticks, ["1/4", "1/2", "1", "2", "4"])
    ax.set_xlabel("GPUs (MPI ranks, one per H200)")
    ax.set_ylabel("speed-up over one process on one H200")
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("gmcl on several GPUs of one host", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
