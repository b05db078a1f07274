"""Ctrl-C during a long call raises KeyboardInterrupt promptly, and the next call runs."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# The child builds the input, says "started" (with the time) just before the long call, and
# then says how the call ended: "interrupted" (with the time) or "finished" (with how long it
# took). Then a small call shows that gmcl still works.
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import gmcl
    from cliques import clique  # python/tests/cliques.py, on the child's path
    # Python's own Ctrl-C handler, as in a terminal: a child of a background job inherits SIGINT
    # ignored, and Python then leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    small = gmcl.generate(8, 4, seed=2)
    gmcl.spgemm(small, engine="cpu")  # warm: the thread pool and the library loaded
    call = sys.argv[1]
    if call == "cluster":
        g = gmcl.generate(17, 16, undirected=True)
        run = lambda: gmcl.cluster(g, engine="cpu")
    elif call == "spgemm":
        a = clique(3000, loops=True)
        run = lambda: gmcl.spgemm(a, engine="cpu")
    elif call == "tricount":
        g = clique(4500, loops=False)
        run = lambda: gmcl.tricount(g, engine="cpu")
    start = time.monotonic()
    print("started", start, flush=True)
    try:
        run()
        print("finished", time.monotonic() - start, flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
    print("after", gmcl.spgemm(small[:8, :8], engine="cpu").shape, flush=True)
    """
)

# How long the call runs before the interrupt: long enough for it to be well inside the
# library, far shorter than the work (tens of seconds on 2 cores).
INTO_THE_CALL = 0.5


@pytest.mark.parametrize("call", ["cluster", "spgemm", "tricount"])
def test_sigint_raises_keyboard_interrupt_and_leaves_gmcl_usable(call):
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, call],
        env=dict(os.environ, PYTHONPATH=path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = child.stdout.readline().split()
        assert started and started[0] == "started", (started, child.stderr.read())
        time.sleep(INTO_THE_CALL)
        sent = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    lines = out.splitlines()
    assert lines, err
    if lines[0].startswith("finished"):
        pytest.fail(
            f"gmcl.{call} finished in {float(lines[0].split()[1]):.2f} s, before the interrupt "
            f"{INTO_THE_CALL} s in: its work is too small for this machine; make it larger"
        )
    assert lines[0].startswith("interrupted"), (out, err)
    # The clock is the same (CLOCK_MONOTONIC) in both processes.
    assert float(lines[0].split()[1]) - sent < 2.0, (out, err)
    assert lines[1] == "after (8, 8)", (out, err)
    assert child.returncode == 0, err
