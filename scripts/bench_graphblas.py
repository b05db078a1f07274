#!/usr/bin/env python3
"""Side-by-side SpGEMM timing: SuiteSparse:GraphBLAS (python-graphblas) against gmcl's CPU engine.

    pip install -r scripts/requirements-bench.txt
    cargo build --release
    python3 scripts/bench_graphblas.py                      # R-MAT A4·B8 pairs at scales 15-17
    python3 scripts/bench_graphblas.py --rmat 15,16,17,18 --threads 2
    python3 scripts/bench_graphblas.py a.mtx b.mtx c.mtx d.mtx   # your own pairs (A B A B ...)

Missing R-MAT pairs are generated first (a=0.57, b=c=0.19, d=0.05 as in Graph500 and the
gMAGNUS paper; A has 4·2^s edges, B 8·2^s; values uniform in [0.5, 1.5); duplicate edges summed)
and written as Matrix Market files under --dir, so later runs and other tools reuse them.

For each pair: GraphBLAS computes C = A@B (plus_times, FP64) with --threads threads, timed around
mxm plus wait (so C is complete and sorted, as gmcl's is); gmcl runs
`gmcl spgemm A B --json --engine cpu --threads N` and reports the "seconds" of the multiplication
only, not the loading. After one warm-up of each, --repeat rounds alternate the two (so that both
see the same load on a shared machine) and the medians are compared. Each round
makes --per-round products on each side in a warm process (gmcl: `--repeat K`, which first makes
one untimed warm-up product) and counts their median, so that both sides reuse their process's
memory alike; --per-round 1 times gmcl's first product in a fresh process instead. With --check
(the default) one more gmcl run writes C with -o and the result is compared with GraphBLAS's:
same structure, values within 1e-12 relative.

GFLOP/s counts 2 flops per intermediate product.
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp


def rmat_matrix(scale, edges, seed, a=0.57, b=0.19, c=0.19):
    """A 2^scale square R-MAT matrix with `edges` edges, duplicates summed (CSR, float64)."""
    n = 1 << scale
    rng = np.random.default_rng(seed)
    rows = np.zeros(edges, dtype=np.int64)
    cols = np.zeros(edges, dtype=np.int64)
    for _ in range(scale):
        r = rng.random(edges)
        down = r >= a + b  # quadrant c or d
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # quadrant b or d
        rows = (rows << 1) | down
        cols = (cols << 1) | right
    vals = rng.uniform(0.5, 1.5, edges)
    m = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    return m


def ensure_rmat_pair(directory, scale, ea=4, eb=8):
    """Paths of the R-MAT pair at `scale`, generated and written if missing."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for which, ef in (("A", ea), ("B", eb)):
        path = os.path.join(directory, f"rmat-s{scale}-{which}{ef}.mtx")
        if not os.path.exists(path):
            seed = 1_000_003 * scale + (1 if which == "A" else 2) * 7919 + ef
            m = rmat_matrix(scale, ef << scale, seed)
            tmp = path + ".tmp.mtx"
            scipy.io.mmwrite(tmp, m, comment=f"R-MAT s{scale} ef{ef} a=0.57 b=c=0.19 seed {seed}")
            os.replace(tmp, path)
            print(f"wrote {path}: {m.shape[0]} x {m.shape[1]}, {m.nnz} entries", file=sys.stderr)
        paths.append(path)
    return paths


def load_csr(path):
    m = scipy.io.mmread(path)
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    m.sort_indices()
    return m


def intermediate_products(a, b):
    return int(np.diff(b.indptr)[a.indices].sum())


class GraphBLASRunner:
    """Holds A and B in GraphBLAS and times C = A@B (plus_times, FP64), C completed by wait."""

    def __init__(self, a, b, threads):
        import graphblas as gb

        self.gb = gb
        gb.ss.config["nthreads"] = threads
        self.a = gb.io.from_scipy_sparse(a)
        self.b = gb.io.from_scipy_sparse(b)
        self.a.wait()
        self.b.wait()
        self.c = None

    def once(self):
        # Free the last result first, as gmcl does. A python-graphblas Matrix sits in reference
        # cycles, so only the cycle collector frees it: without this each product leaks its C
        # (and the next one faults in fresh memory).
        self.c = None
        gc.collect()
        t0 = time.perf_counter()
        c = self.a.mxm(self.b, self.gb.semiring.plus_times).new()
        c.wait()
        t = time.perf_counter() - t0
        self.c = c
        return t


def run_gmcl(gmcl, a_path, b_path, threads, extra=()):
    cmd = [gmcl, "spgemm", a_path, b_path, "--json", "--engine", "cpu", "--threads", str(threads)]
    cmd += list(extra)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.strip().startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON from {' '.join(cmd)}:\n{out}")
    return json.loads(lines[-1])


def cpu_idle(seconds):
    """The fraction of CPU time the whole machine spent idle over `seconds` (Linux /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    try:
        t1, i1 = sample()
        time.sleep(seconds)
        t2, i2 = sample()
        return (i2 - i1) / max(t2 - t1, 1)
    except OSError:
        return 1.0


def wait_idle(threshold, timeout):
    """Waits (up to `timeout` seconds) until the machine is at least `threshold` idle, so that a
    timed round does not share the cores with other work. Returns whether it got there."""
    if threshold <= 0:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cpu_idle(0.5) >= threshold:
            return True
    return False


def time_side_by_side(runner, gmcl, a_path, b_path, threads, repeat, per_round, idle=0.0,
                      idle_timeout=120):
    """One warm-up each, then `repeat` rounds alternating GraphBLAS and gmcl, so that both see
    the same machine load (each round first waits for the machine to be `idle` idle, when given).
    In a round each side makes `per_round` products in one warm process and counts their median:
    GraphBLAS in this process, gmcl with `--repeat per_round` (its own untimed warm-up first).
    Each product is freed before the next on both sides. With per_round 1, gmcl runs one product
    in a fresh process: its figure then includes faulting in C's memory for the first time,
    which GraphBLAS's warm process does not pay in full.
    Returns the lists of GraphBLAS and gmcl seconds (one per round), gmcl's last report and how
    many rounds ran on a busy machine."""
    if runner is not None:
        runner.once()
    extra = ["--repeat", str(per_round)]
    run_gmcl(gmcl, a_path, b_path, threads, extra)
    gb_times, gm_times, rep, busy = [], [], None, 0
    for _ in range(repeat):
        busy += not wait_idle(idle, idle_timeout)
        if runner is not None:
            gb_times.append(statistics.median(runner.once() for _ in range(per_round)))
        rep = run_gmcl(gmcl, a_path, b_path, threads, extra)
        gm_times.append(rep["seconds"])
    return gb_times, gm_times, rep, busy


def check_equal(gmcl, a_path, b_path, threads, c_gb):
    import graphblas as gb

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "c.mtx")
        run_gmcl(gmcl, a_path, b_path, threads, ["-o", out])
        mine = load_csr(out)
    ref = gb.io.to_scipy_sparse(c_gb, format="csr")
    ref.sort_indices()
    if mine.shape != ref.shape:
        return f"shape {mine.shape} != GraphBLAS {ref.shape}"
    if mine.nnz != ref.nnz:
        return f"nnz {mine.nnz} != GraphBLAS {ref.nnz}"
    if not (np.array_equal(mine.indptr, ref.indptr) and np.array_equal(mine.indices, ref.indices)):
        return "structure differs from GraphBLAS"
    err = np.abs(mine.data - ref.data) / np.maximum(np.abs(ref.data), 1e-300)
    worst = float(err.max()) if err.size else 0.0
    if worst > 1e-12:
        return f"values differ from GraphBLAS (worst relative error {worst:.3g})"
    return f"ok (worst relative error {worst:.2g})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mtx", nargs="*", help="pairs of Matrix Market files: A1 B1 [A2 B2 ...]")
    p.add_argument("--rmat", default=None, help="R-MAT scales of A4·B8 pairs to run (default 15,16,17 when no files are given)")
    p.add_argument("--dir", default="target/bench-data", help="where generated R-MAT pairs are kept (default target/bench-data, git-ignored)")
    p.add_argument("--gmcl", default="target/release/gmcl", help="the gmcl binary (default target/release/gmcl)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5, help="rounds, alternating the two (default 5)")
    p.add_argument("--per-round", type=int, default=3, metavar="K",
                   help="products per round on each side, in one warm process; the round counts their "
                        "median (default 3; 1 runs gmcl in a fresh process per product)")
    p.add_argument("--no-check", action="store_true", help="skip comparing gmcl's C with GraphBLAS's")
    p.add_argument("--no-graphblas", action="store_true", help="time gmcl only")
    p.add_argument("--json", default=None, help="also write the rows of the table to this JSON file")
    p.add_argument("--wait-idle", type=float, default=0.0, metavar="FRACTION",
                   help="before each round wait (up to 2 minutes) until the machine is this idle, e.g. 0.9 "
                        "on a shared machine (default 0: do not wait)")
    args = p.parse_args()

    if len(args.mtx) % 2:
        p.error("give Matrix Market files in pairs: A B [A B ...]")
    pairs = [(args.mtx[i], args.mtx[i + 1], None) for i in range(0, len(args.mtx), 2)]
    scales = args.rmat if args.rmat is not None else ("" if pairs else "15,16,17")
    for s in filter(None, scales.split(",")):
        a_path, b_path = ensure_rmat_pair(args.dir, int(s))
        pairs.append((a_path, b_path, f"s{s} A4·B8"))

    rows = []
    print(f"| pair | A.nnz | B.nnz | intermediate products | C.nnz | GraphBLAS s | GraphBLAS GFLOP/s "
          f"| gmcl s | gmcl GFLOP/s | speed-up | check | busy rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for a_path, b_path, name in pairs:
        name = name or f"{os.path.basename(a_path)}·{os.path.basename(b_path)}"
        a, b = load_csr(a_path), load_csr(b_path)
        prods = intermediate_products(a, b)
        row = {"pair": name, "a": a_path, "b": b_path, "a_nnz": a.nnz, "b_nnz": b.nnz,
               "intermediate_products": prods, "threads": args.threads}
        runner = None if args.no_graphblas else GraphBLASRunner(a, b, args.threads)
        del a, b
        gb_all, g_all, rep, busy = time_side_by_side(runner, args.gmcl, a_path, b_path, args.threads,
                                                     args.repeat, args.per_round, args.wait_idle)
        row["busy_rounds"] = busy
        c_gb = None if runner is None else runner.c
        g_s = statistics.median(g_all)
        row.update(gmcl_seconds=g_s, gmcl_runs=g_all, gmcl_min=min(g_all), gmcl_nnz=rep["nnz"],
                   gmcl_products=rep.get("intermediate_products"))
        if runner is not None:
            row.update(graphblas_seconds=statistics.median(gb_all), graphblas_runs=gb_all,
                       graphblas_min=min(gb_all), c_nnz=c_gb.nvals)
        if rep.get("intermediate_products") not in (None, prods):
            row["check"] = f"gmcl counts {rep['intermediate_products']} products, not {prods}"
        elif c_gb is not None and rep["nnz"] != c_gb.nvals:
            row["check"] = f"nnz {rep['nnz']} != GraphBLAS {c_gb.nvals}"
        elif c_gb is not None and not args.no_check:
            row["check"] = check_equal(args.gmcl, a_path, b_path, args.threads, c_gb)
        else:
            row["check"] = "not checked"
        del c_gb, runner
        gf = lambda s: 2 * prods / s / 1e9
        gb_s = row.get("graphblas_seconds")
        print(f"| {name} | {row['a_nnz']:,} | {row['b_nnz']:,} | {prods:,} | {rep['nnz']:,} "
              f"| {'-' if gb_s is None else f'{gb_s:.4f}'} | {'' if gb_s is None else f'{gf(gb_s):.3f}'} "
              f"| {g_s:.4f} | {gf(g_s):.3f} | {'' if gb_s is None else f'{gb_s / g_s:.2f}x'} "
              f"| {row['check']} | {row['busy_rounds']}/{args.repeat} |", flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["check"].startswith(("ok", "not")) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
