"""gmcl.tricount against NetworkX's triangles and SciPy's trace(A³)/6."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import gmcl

nx = pytest.importorskip("networkx")


def networkx_counts(g):
    t = nx.triangles(g)
    return np.array([t[v] for v in g], dtype=np.uint64)


@pytest.mark.parametrize(
    "g",
    [
        nx.karate_club_graph(),
        nx.les_miserables_graph(),
        nx.gnp_random_graph(300, 0.05, seed=1),
        nx.complete_graph(12),
        nx.empty_graph(5),
    ],
    ids=["karate", "lesmis", "gnp", "complete", "empty"],
)
def test_counts_are_networkxs(g):
    each = networkx_counts(g)
    assert gmcl.tricount(g, engine="cpu") == each.sum() // 3
    assert (gmcl.tricount(g, per_vertex=True, engine="cpu") == each).all()


def test_counts_are_scipys_trace_of_a_cubed():
    rng = np.random.default_rng(2)
    a = sp.random_array((200, 200), density=0.04, format="csr", rng=rng)
    a = ((a + a.T) != 0).astype(np.float64)
    a.setdiag(0)
    a.eliminate_zeros()
    assert gmcl.tricount(a, engine="cpu") == round((a @ a @ a).diagonal().sum() / 6)


def test_directions_loops_repeats_and_dtypes_are_ignored():
    g = nx.karate_club_graph()
    a = nx.to_scipy_sparse_array(g, format="csr")
    ref = gmcl.tricount(a, engine="cpu")
    upper = sp.triu(a, format="coo")
    looped = (upper + sp.eye_array(34)).astype(np.int16)
    assert gmcl.tricount(looped, engine="cpu") == ref
    assert gmcl.tricount(upper.astype(np.float32).tocsc(), engine="cpu") == ref
    wide = sp.csr_array(
        (a.data, a.indices.astype(np.int64), a.indptr.astype(np.int64)), shape=a.shape
    )
    assert gmcl.tricount(wide, engine="cpu") == ref


def test_a_simple_graphs_csr_is_counted_in_place_and_any_other_as_its_simple_graph():
    g = nx.gnp_random_graph(200, 0.08, seed=4)
    ref = sum(nx.triangles(g).values()) // 3
    a = nx.to_scipy_sparse_array(g, format="csr", dtype=np.float32)
    before = [x.copy() for x in (a.indptr, a.indices, a.data)]
    assert gmcl.tricount(a, engine="cpu") == ref
    for x, y in zip(before, (a.indptr, a.indices, a.data)):
        np.testing.assert_array_equal(x, y)
    # One mirror entry gone: not symmetric, yet the same simple graph.
    coo = a.tocoo()
    u, v = next((i, j) for i, j in zip(coo.row, coo.col) if i > j)
    keep = ~((coo.row == u) & (coo.col == v))
    one_way = sp.csr_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=a.shape)
    assert gmcl.tricount(one_way, engine="cpu") == ref
    # A negative 32-bit index (SciPy does not check them) is refused, not read as a huge one.
    bad = sp.csr_array(
        (np.ones(2), np.array([1, -1], dtype=np.int32), np.array([0, 1, 2], dtype=np.int32)),
        shape=(2, 2),
    )
    with pytest.raises(ValueError, match="invalid CSR: row 1"):
        gmcl.tricount(bad, engine="cpu")


def test_a_file_counts_as_the_cli(graphs, gmcl_cli):
    out = gmcl_cli("tricount", graphs / "karate.el", "--engine", "cpu", "-q")
    assert gmcl.tricount(graphs / "karate.el", engine="cpu") == int(out.stdout) == 45


def test_empty_inputs():
    assert gmcl.tricount(sp.csr_array((0, 0)), engine="cpu") == 0
    assert len(gmcl.tricount(sp.csr_array((4, 4)), per_vertex=True, engine="cpu")) == 4


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="unknown engine"):
        gmcl.tricount(sp.eye_array(2, format="csr"), engine="fast")
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n")
    with pytest.raises(ValueError, match=r"bad\.mtx"):
        gmcl.tricount(bad)


def test_auto_without_a_gpu_says_so_once_and_counts_on_the_cpu():
    """As the command line: work large enough for the GPU, and no GPU, gives one notice."""
    child = """
import gmcl, scipy.sparse as sp
try:
    gmcl.spgemm(sp.eye_array(2, format="csr"), engine="gpu")
    print("gpu")
except gmcl.EngineUnavailableError:
    print("no gpu")
g = gmcl.generate(17, 16, undirected=True, no_self_loops=True)
print(gmcl.tricount(g) == gmcl.tricount(g, engine="cpu"))
"""
    # One worker thread: the size at which the GPU pays is then smallest (src/engine.rs).
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, env=env, check=True
    )
    has_gpu, same = r.stdout.split("\n")[:2]
    assert same == "True", r
    notices = r.stderr.count("gmcl: no usable GPU (")
    if has_gpu == "no gpu":
        assert notices == 1 and "running on the CPU engine" in r.stderr, r.stderr
    else:
        assert notices == 0, r.stderr
