#!/usr/bin/env python3
"""What crossing from Python costs: gmcl.spgemm and gmcl.tricount on an R-MAT graph held as a
SciPy CSR array, timed from Python (the whole call: the checks of the arrays, the run, the result
handed back), side by side with the Rust library doing the same job on the same matrix already
in memory (python/examples/crossing.rs, on the matrix saved as .npz: the CSR's check, the
simple-graph check and the count; the product). Both sides run the same library build when the
example is built in the profile the extension was built in (see --crossing). One warm-up each,
then --repeat rounds, each one Python call and one Rust run (so that a change in the machine's
load hits both sides alike); medians; the counts and entry counts are checked equal.

    cargo build --profile dev --manifest-path python/Cargo.toml --example crossing
    python scripts/bench-python.py --crossing target/debug/examples/crossing \\
        --scales 16 17 18 --repeat 5 [--engine cpu] [--skip-spgemm-above 16] \\
        [--paper-pairs 4 16 32]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import scipy.sparse as sp

import gmcl
from gmcl import _gmcl

LAST = {}


def spy(name):
    """Wraps the extension's function `name` to keep what the library returned from the last
    call (a product's arrays only until `side_by_side` has taken their entry count)."""
    inner = getattr(_gmcl, name)

    def wrapped(*args):
        r = inner(*args)
        LAST["result"] = r
        return r

    setattr(_gmcl, name, wrapped)


def side_by_side(call, binary, path, job, repeat, engine, b_path=None):
    """`repeat` rounds of one Python call and one Rust run (after its own warm-up)."""
    call()
    walls, results, rust = [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        result = call()
        walls.append(time.perf_counter() - t)
        results.append(summary(LAST.pop("result")))
        # Freed outside the timing: the library's time does not include freeing its result
        # either, and a caller keeps it. Only one product is held at a time (a scale-18
        # square is tens of GB).
        del result
        args = [binary, path, job, "1", engine] + ([b_path] if b_path else [])
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        rust += [json.loads(line) for line in out.splitlines()]
    return walls, results, rust


def summary(r):
    """What the comparison needs of a call's result: a count's value, a product's entries."""
    if isinstance(r[0], tuple):
        return int(r[0][2][-1])
    return r[0]


def med(xs):
    return statistics.median(xs)


def report(name, nnz, job, walls, results, rust):
    """One table row: both sides' medians (minimums), the crossing, the Rust side's parts."""
    totals = [r["total"] for r in rust]
    if job == "tricount":
        assert set(results) == {r["triangles"] for r in rust}, "counts differ"
        checks = f"{med([r['check'] for r in rust]):.4f}, {med([r['symmetric'] for r in rust]):.4f}"
        alone = f"{med([r['count'] for r in rust]):.4f}"
    else:
        assert set(results) == {r["nnz"] for r in rust}, "products differ"
        checks, alone = f"nnz(C) {results[0]}", "—"
    wall = med(walls)
    print(
        f"| {name} | {nnz} | {wall:.4f} ({min(walls):.4f}) | "
        f"{med(totals):.4f} ({min(totals):.4f}) | "
        f"{100 * (wall - med(totals)) / med(totals):+.1f}% | {checks} | {alone} |",
        flush=True,
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--crossing", required=True, help="the crossing example's binary")
    p.add_argument("--scales", type=int, nargs="+", default=[16, 17, 18])
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--engine", default="cpu")
    p.add_argument("--skip-spgemm-above", type=int, default=99)
    p.add_argument(
        "--paper-pairs",
        type=int,
        nargs="*",
        default=[],
        help="also A·B of the gMAGNUS paper's R-MAT pairs at each scale: A with these nonzeros "
        "per row (seed: that number), B with 8 (seed 1008), as `gmcl bench spgemm --suite "
        "rmat-paper` makes them",
    )
    a = p.parse_args()
    spy("spgemm")
    spy("tricount_matrix")
    print(
        "| case | nnz(A) | Python call, median (min) s | Rust library, same job, median (min) s "
        "| crossing (medians) | of which the checks in Rust: CSR, simple graph, s | "
        "count alone (`Triangles::seconds`), s |"
    )
    print("|---|---|---|---|---|---|---|")
    tmp = tempfile.mkdtemp()
    for s in a.scales:
        A = gmcl.generate(s, a.edge_factor, undirected=True, no_self_loops=True, seed=1)
        path = os.path.join(tmp, f"s{s}.npz")
        sp.save_npz(path, A, compressed=False)
        jobs = [("tricount", lambda: gmcl.tricount(A, engine=a.engine))]
        if s <= a.skip_spgemm_above:
            jobs.insert(0, ("spgemm", lambda: gmcl.spgemm(A, engine=a.engine)))
        for job, call in jobs:
            walls, results, rust = side_by_side(call, a.crossing, path, job, a.repeat, a.engine)
            name = f"{'tricount' if job == 'tricount' else 'spgemm A²'} s{s} ef{a.edge_factor}"
            report(name, A.nnz, job, walls, results, rust)
        if a.paper_pairs:
            B = gmcl.generate(s, 8, seed=1008)
            b_path = os.path.join(tmp, f"b{s}.npz")
            sp.save_npz(b_path, B, compressed=False)
            for per_row in a.paper_pairs:
                A = gmcl.generate(s, per_row, seed=per_row)
                path = os.path.join(tmp, f"a{s}_{per_row}.npz")
                sp.save_npz(path, A, compressed=False)
                walls, results, rust = side_by_side(
                    lambda: gmcl.spgemm(A, B, engine=a.engine),
                    a.crossing, path, "spgemm", a.repeat, a.engine, b_path,
                )
                report(f"spgemm s{s} A{per_row}·B8", A.nnz, "spgemm", walls, results, rust)


if __name__ == "__main__":
    main()
