#!/usr/bin/env python3
"""Triangle counting timings of `gmcl tricount` beside the GAP Benchmark Suite's `tc` figures.

    cargo build --release
    python3 scripts/bench_tricount.py                          # R-MAT s16 and s20, edge factor 16
    python3 scripts/bench_tricount.py --scales 16 --methods merge,spgemm --repeat 7

Missing graphs are generated first with gmcl itself, as the anchor figures were made:
`gmcl generate --scale S --edge-factor 16 --undirected --seed 1 -o DIR/rmat-sS-ef16.el`
(a=0.57, b=c=0.19; the edges are then made simple by `tricount`).

Each configuration runs once as a warm-up, then --repeat times; reported are the medians of
  - count s: the JSON "seconds" (orientation, relabelling and counting; not loading), which is
    what GAP's tc times (its trial time includes the relabelling, not the graph build);
  - total s: the wall time of the whole process, loading and building the graph included.
Standard library only (Python 3.8+).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# GAP Benchmark Suite tc, 2 threads, on the 2-core development machine (shared/anchors).
GAP_TC = {16: 0.25, 20: 9.0}


def ensure_graph(gmcl, directory, scale, ef, seed):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"rmat-s{scale}-ef{ef}-seed{seed}.el")
    if not os.path.exists(path):
        subprocess.run(
            [gmcl, "generate", "--scale", str(scale), "--edge-factor", str(ef), "--undirected",
             "--seed", str(seed), "-o", path, "-q"],
            check=True,
        )
    return path


def run_once(gmcl, path, method, threads, engine):
    cmd = [gmcl, "tricount", path, "--json", "-q", "--engine", engine, "--method", method,
           "--threads", str(threads)]
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - start
    return json.loads(out), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gmcl", default=os.environ.get("GMCL", "target/release/gmcl"))
    ap.add_argument("--scales", default="16,20")
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--methods", default="merge", help="comma-separated: merge, spgemm")
    ap.add_argument("--engine", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/gmcl-tricount")
    a = ap.parse_args()

    rows = []
    for scale in [int(s) for s in a.scales.split(",") if s.strip()]:
        path = ensure_graph(a.gmcl, a.dir, scale, a.edge_factor, a.seed)
        for method in [m.strip() for m in a.methods.split(",") if m.strip()]:
            first, _ = run_once(a.gmcl, path, method, a.threads, a.engine)  # warm-up
            counts, walls = [], []
            for _ in range(a.repeat):
                r, wall = run_once(a.gmcl, path, method, a.threads, a.engine)
                if r["triangles"] != first["triangles"]:
                    sys.exit(f"{path}: {method} gave {r['triangles']} then {first['triangles']}")
                counts.append(r["seconds"])
                walls.append(wall)
            count_s = statistics.median(counts)
            gap = GAP_TC.get(scale)
            rows.append((scale, first["vertices"], first["edges"], first["triangles"], method,
                         count_s, min(counts), max(counts), statistics.median(walls),
                         first["edges"] / count_s, gap, gap / count_s if gap else None))
            print(f"s{scale} {method}: {count_s:.3f} s (count), {statistics.median(walls):.3f} s "
                  f"(total)", file=sys.stderr)

    print(f"threads {a.threads}, engine {a.engine}, median of {a.repeat} after one warm-up\n")
    print("| graph | vertices | edges | triangles | method | count s (min-max) | total s "
          "| edges/s | GAP tc s | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (scale, n, m, t, method, c, lo, hi, wall, eps, gap, up) in rows:
        print(f"| R-MAT s{scale} ef{a.edge_factor} | {n:,} | {m:,} | {t:,} | {method} "
              f"| {c:.3f} ({lo:.3f}-{hi:.3f}) | {wall:.3f} | {eps:.3g} "
              f"| {gap if gap else '—'} | {f'{up:.2f}x' if up else '—'} |")


if __name__ == "__main__":
    main()
