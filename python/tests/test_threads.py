"""The long calls release the GIL: a Python thread keeps running while they compute."""

import threading
import time

import pytest

import gmcl
from cliques import clique

# The call is cut into this many equal slices of time; the thread must run in every one.
SLICES = 10
# A call shorter than this leaves slices too short to be sure of the thread's turn: the work
# below takes a few seconds on 2 cores, still some tenths of a second on 16.
LONG_ENOUGH = 0.2


def thread_runs_during(call):
    """Runs ``call()`` while a Python thread counts; returns the call's start and end and the
    times at which the thread was seen counting between them."""
    stop = threading.Event()
    seen = []

    def count():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                seen.append(time.monotonic())

    thread = threading.Thread(target=count)
    thread.start()
    try:
        while not seen:
            time.sleep(0.001)
        start = time.monotonic()
        call()
        end = time.monotonic()
    finally:
        stop.set()
        thread.join()
    return start, end, [t for t in seen if start <= t <= end]


def long_call(name):
    """The call ``name``, its input built beforehand (building it is no part of the call)."""
    if name == "spgemm":
        a = clique(1500, loops=True)
        return lambda: gmcl.spgemm(a, engine="cpu")
    if name == "tricount":
        g = clique(3000, loops=False)
        return lambda: gmcl.tricount(g, engine="cpu")
    g = gmcl.generate(12, 16, undirected=True, seed=3)
    return lambda: gmcl.cluster(g, engine="cpu", max_iterations=4)


@pytest.mark.parametrize("name", ["spgemm", "tricount", "cluster"])
def test_a_python_thread_runs_throughout_a_long_call(name):
    start, end, seen = thread_runs_during(long_call(name))
    took = end - start
    if took < LONG_ENOUGH:
        pytest.fail(f"gmcl.{name} took {took:.3f} s: too little work to tell; make it larger")
    # Holding the GIL, the call would leave the thread no turn until it returned.
    slices = {min(int((t - start) / took * SLICES), SLICES - 1) for t in seen}
    assert slices == set(range(SLICES)), (name, took, sorted(slices))
