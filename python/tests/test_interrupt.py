"""Ctrl-C during a long call raises KeyboardInterrupt promptly, and the next call runs."""

import os
import signal
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import gmcl
    # Python's own Ctrl-C handler, as in a terminal: a child of a background job inherits SIGINT
    # ignored, and Python then leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    a = gmcl.generate(16, 16, seed=2)
    gmcl.spgemm(a[:64, :], a, engine="cpu")  # warm
    print("ready", flush=True)
    start = time.monotonic()
    try:
        gmcl.cluster(gmcl.generate(17, 16, undirected=True), engine="cpu")
        print("finished", time.monotonic() - start, flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
    small = gmcl.spgemm(a[:8, :8], engine="cpu")
    print("after", small.shape, flush=True)
    """
)


def test_sigint_raises_keyboard_interrupt_and_leaves_gmcl_usable():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        # Into the clustering: generating the graph and the first iterations.
        time.sleep(2.0)
        sent = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    lines = out.splitlines()
    assert lines and lines[0].startswith("interrupted"), (out, err)
    # The clock is the same (CLOCK_MONOTONIC) in both processes.
    assert float(lines[0].split()[1]) - sent < 2.0, (out, err)
    assert lines[1] == "after (8, 8)", (out, err)
    assert child.returncode == 0, err
