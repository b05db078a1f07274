#!/usr/bin/env python3
"""What crossing from Python costs: gmcl.spgemm and gmcl.tricount on an R-MAT graph held as a
SciPy CSR array, timed from Python (the whole call: the checks and copies of the arrays, the
result handed back) beside the library's own time for the same call (`ProductStats::seconds`,
`Triangles::seconds`, returned by the extension). One warm-up, then the median of --repeat.

    python scripts/bench-python.py --scales 16 17 18 --repeat 3 [--engine cpu] [--skip-spgemm-above 16]
"""

import argparse
import statistics
import time

import gmcl
from gmcl import _gmcl

LAST = {}


def spy(name):
    """Wraps the extension's function `name` to keep the library's seconds of the last call."""
    inner = getattr(_gmcl, name)

    def wrapped(*args):
        r = inner(*args)
        LAST["seconds"] = r[2] if name == "spgemm" else r[3]
        return r

    setattr(_gmcl, name, wrapped)


def timed(call, repeat):
    call()
    walls, libs = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        result = call()
        walls.append(time.perf_counter() - t)
        libs.append(LAST["seconds"])
        # Freed outside the timing: the library's time does not include freeing its result
        # either, and a caller keeps it.
        del result
    return statistics.median(walls), statistics.median(libs), min(walls), min(libs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scales", type=int, nargs="+", default=[16, 17, 18])
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--engine", default="cpu")
    p.add_argument("--skip-spgemm-above", type=int, default=99)
    a = p.parse_args()
    spy("spgemm")
    spy("tricount_matrix")
    print("| case | nnz(A) | Python call, median (min) s | library, median (min) s | crossing (medians) |")
    print("|---|---|---|---|---|")
    for s in a.scales:
        A = gmcl.generate(s, a.edge_factor, undirected=True, no_self_loops=True, seed=1)
        cases = [("tricount", lambda: gmcl.tricount(A, engine=a.engine))]
        if s <= a.skip_spgemm_above:
            cases.insert(0, ("spgemm A²", lambda: gmcl.spgemm(A, engine=a.engine)))
        for name, call in cases:
            wall, lib, wall_min, lib_min = timed(call, a.repeat)
            print(
                f"| {name} s{s} ef{a.edge_factor} | {A.nnz} | {wall:.4f} ({wall_min:.4f}) | "
                f"{lib:.4f} ({lib_min:.4f}) | "
                f"{100 * (wall - lib) / lib:+.1f}% |",
                flush=True,
            )


if __name__ == "__main__":
    main()
