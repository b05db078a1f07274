#!/usr/bin/env python3
"""Where the GPU engine starts to pay: the whole process of `gmcl cluster`, `gmcl spgemm` and
`gmcl tricount` on symmetric R-MAT graphs of growing size, with `--engine cpu` and
`--engine gpu` side by side (warm-up run, then the median of REPEAT runs each), and the work
measure `--engine auto` decides on (MCL: products of the first expansion; spgemm: intermediate
products; tricount: edges). Runs on the GPU machine from the project root over .gpu/gmcl
(scripts/gpu-prepare.sh); writes a table and JSON to $OUT (or /tmp/bench-crossover).

Usage: scripts/bench-crossover.py [--min-scale 6] [--max-scale 16] [--repeat 5] [--threads N]
                                  [--cases cluster,spgemm,tricount]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

GMCL = os.environ.get("GMCL", ".gpu/gmcl")


def run(args, threads):
    """Runs gmcl, returns (seconds of the whole process, stdout, stderr); fails loudly."""
    cmd = [GMCL, "--threads", str(threads)] + args
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return dt, p.stdout, p.stderr


def timed(args, threads, repeat):
    run(args, threads)  # warm-up: page cache, kernel cache
    times, out = [], None
    for _ in range(repeat):
        dt, stdout, stderr = run(args, threads)
        times.append(dt)
        out = (stdout, stderr)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-scale", type=int, default=6)
    ap.add_argument("--max-scale", type=int, default=16)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--cases", default="cluster,spgemm,tricount")
    a = ap.parse_args()
    out_dir = os.environ.get("OUT", "/tmp/bench-crossover")
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    print(f"{'case':<22}{'work':>14}{'cpu s':>10}{'gpu s':>10}{'gpu/cpu':>9}", flush=True)
    for scale in range(a.min_scale, a.max_scale + 1):
        g = os.path.join(out_dir, f"rmat{scale}.el")
        subprocess.run([GMCL, "generate", "--scale", str(scale), "--edge-factor",
                        str(a.edge_factor), "--seed", "7", "--undirected", "--no-duplicates",
                        "--quiet", "-o", g], check=True)
        cases = {
            "cluster": (["cluster", g], "products"),
            "spgemm": (["spgemm", g, "--json"], "intermediate_products"),
            "tricount": (["tricount", g, "--json"], "edges"),
        }
        for name, (args, measure) in cases.items():
            if name not in a.cases.split(","):
                continue
            res = {}
            for engine in ("cpu", "gpu"):
                sec, (stdout, stderr) = timed(args + ["--engine", engine], a.threads, a.repeat)
                res[engine] = (sec, stdout, stderr)
            cpu_out, gpu_out = res["cpu"][1], res["gpu"][1]
            if name == "cluster":
                m = re.search(r"iteration +1 .*products +(\d+)", res["cpu"][2])
                work = int(m.group(1)) if m else -1
                same = cpu_out == gpu_out
            else:
                jc, jg = json.loads(cpu_out), json.loads(gpu_out)
                work = jc[measure]
                key = "triangles" if name == "tricount" else "nnz"
                same = jc[key] == jg[key]
            if not same:
                sys.exit(f"{name} scale {scale}: the engines disagree")
            row = {"case": name, "scale": scale, "work": work, "cpu_seconds": res["cpu"][0],
                   "gpu_seconds": res["gpu"][0], "threads": a.threads}
            rows.append(row)
            print(f"{name + ' s' + str(scale):<22}{work:>14}{row['cpu_seconds']:>10.3f}"
                  f"{row['gpu_seconds']:>10.3f}{row['gpu_seconds'] / row['cpu_seconds']:>9.2f}",
                  flush=True)
        os.remove(g)
    with open(os.path.join(out_dir, "crossover.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
