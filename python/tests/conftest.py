"""Shared fixtures: the repository's graphs and the command line built from the same sources."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def graphs():
    """The folder of small graphs shipped with the repository."""
    return REPO / "graphs"


@pytest.fixture
def gmcl_cli():
    """Runs the `gmcl` command line (GMCL_BIN, else target/debug/gmcl, which `cargo build` or
    `cargo test` makes); returns the completed process."""
    binary = pathlib.Path(os.environ.get("GMCL_BIN", REPO / "target" / "debug" / "gmcl"))
    if not binary.exists():
        pytest.fail(f"{binary} is missing: build the command line first (cargo build)")

    def run(*args):
        return subprocess.run(
            [str(binary), *map(str, args)], capture_output=True, text=True, check=True
        )

    return run
