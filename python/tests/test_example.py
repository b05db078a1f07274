"""examples/python/karate.py runs and compares its clusters with the factions."""

import os
import subprocess
import sys

from conftest import REPO


def test_karate_example_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "karate.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MPLBACKEND": "Agg"},
        check=True,
    ).stdout
    assert "34 members, 78 friendships, 45 triangles" in out
    assert "inflation 2 vs factions: split/join" in out
