"""gmcl.dist against a direct computation of split/join, VI and ARI, and against `gmcl dist`."""

import json
import math

import numpy as np
import pytest

import gmcl


def reference(a, b):
    """Split/join, variation of information and adjusted Rand from the contingency table."""
    a, b = np.asarray(a), np.asarray(b)
    n = len(a)
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(table, (ia, ib), 1)
    sj = 2 * n - table.max(axis=1).sum() - table.max(axis=0).sum()
    pa, pb = table.sum(axis=1) / n, table.sum(axis=0) / n
    p = table[table > 0] / n
    h = lambda q: -(q[q > 0] * np.log(q[q > 0])).sum()  # noqa: E731
    vi = 2 * h(p) - h(pa) - h(pb)
    c2 = lambda x: x * (x - 1) / 2  # noqa: E731
    index = c2(table).sum()
    ea, eb = c2(table.sum(axis=1)).sum(), c2(table.sum(axis=0)).sum()
    expected = ea * eb / c2(n)
    ari = (index - expected) / ((ea + eb) / 2 - expected)
    return sj, vi, ari


def test_random_labellings_match_the_reference():
    rng = np.random.default_rng(3)
    for _ in range(5):
        a = rng.integers(0, 6, 200)
        b = rng.integers(0, 4, 200)
        d = gmcl.dist(a, b)
        sj, vi, ari = reference(a, b)
        assert d.split_join == sj
        assert d.variation_of_information == pytest.approx(vi, abs=1e-9)
        assert d.adjusted_rand == pytest.approx(ari, abs=1e-9)
        assert d.nodes == 200


def test_identical_and_relabelled_partitions_are_at_distance_zero():
    a = [0, 0, 1, 1, 2]
    d = gmcl.dist(a, ["x", "x", "y", "y", "z"])
    assert (d.split_join, d.variation_of_information, d.adjusted_rand) == (0, 0.0, 1.0)


def test_karate_against_its_factions(graphs, gmcl_cli, tmp_path):
    c = gmcl.cluster(graphs / "karate.el", engine="cpu")
    factions = np.zeros(34, dtype=int)
    for k, line in enumerate((graphs / "karate.factions").read_text().splitlines()):
        factions[[int(v) for v in line.split("\t")]] = k
    d = gmcl.dist(c, factions)
    out = tmp_path / "c.txt"
    gmcl_cli("cluster", graphs / "karate.el", "--engine", "cpu", "-q", "-o", out)
    cli = json.loads(gmcl_cli("dist", out, graphs / "karate.factions", "--json").stdout)
    assert d.split_join == cli["split_join"]
    assert math.isclose(d.adjusted_rand, cli["adjusted_rand"], abs_tol=1e-12)
    files = gmcl.dist(out, graphs / "karate.factions")
    # The sums run in hash order: equal up to rounding.
    for name, value in vars(d).items():
        assert getattr(files, name) == pytest.approx(value, rel=1e-12, abs=1e-15), name


def test_empty_clusterings():
    d = gmcl.dist([], [])
    assert d.nodes == 0 and d.split_join == 0


def test_bad_input():
    with pytest.raises(ValueError, match="label 3 and 2 vertices"):
        gmcl.dist([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="both clusterings as files"):
        gmcl.dist("a.txt", [0, 1])
    with pytest.raises(OSError, match="nope.txt"):
        gmcl.dist("nope.txt", "nope.txt")
