"""examples/python/karate.py runs and compares its clusters with the factions, and plots the
cluster sizes with matplotlib (a file, without a display), or lists them without it."""

import os
import re
import subprocess
import sys

from conftest import REPO


def run_example(cwd, **env):
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "karate.py")],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "MPLBACKEND": "Agg", **env},
        check=True,
    ).stdout


def test_karate_example_runs_and_plots(tmp_path):
    out = run_example(tmp_path)
    assert "34 members, 78 friendships, 45 triangles" in out
    assert "inflation 2 vs factions: split/join" in out
    # matplotlib comes with the test extras: the chart is drawn into a PNG file.
    assert "wrote karate-cluster-sizes.png" in out, out
    assert (tmp_path / "karate-cluster-sizes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_karate_example_lists_the_sizes_without_matplotlib(tmp_path):
    # A matplotlib that cannot be imported, first on the path.
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError('hidden')\n")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    out = run_example(tmp_path, PYTHONPATH=path)
    assert not (tmp_path / "karate-cluster-sizes.png").exists()
    sizes = [tuple(map(int, m)) for m in re.findall(r"(\d+) cluster\(s\) of (\d+) member", out)]
    # Every member is in one cluster.
    assert sizes and sum(count * size for count, size in sizes) == 34, out
