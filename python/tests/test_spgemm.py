"""gmcl.spgemm against SciPy's A @ B: formats, dtypes, index widths, shapes, masks, errors."""

import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import gmcl


def random(shape, density=0.05, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return sp.random_array(shape, density=density, format="csr", rng=rng, dtype=dtype)


def assert_same(c, ref, tol=1e-9):
    assert c.shape == ref.shape
    diff = abs(sp.csr_array(c) - sp.csr_array(ref))
    assert diff.nnz == 0 or diff.max() <= tol * max(1.0, abs(ref).max())


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "dok"])
def test_every_sparse_format(fmt):
    a = random((60, 50), seed=1)
    b = random((50, 70), seed=2)
    c = gmcl.spgemm(a.asformat(fmt), b.asformat(fmt), engine="cpu")
    assert sp.issparse(c) and c.format == "csr"
    assert_same(c, a @ b)


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64, np.bool_]
)
def test_value_dtypes(dtype):
    a = sp.csr_array((random((40, 40), 0.1, 3) * 10).astype(dtype))
    ref = a.astype(np.float64) @ a.astype(np.float64)
    c = gmcl.spgemm(a, engine="cpu")
    assert c.dtype == (np.float32 if dtype == np.float32 else np.float64)
    assert_same(c, ref, tol=1e-5)


def test_64_bit_indices_are_taken():
    a = random((80, 80), 0.05, 4)
    wide = sp.csr_array(
        (a.data, a.indices.astype(np.int64), a.indptr.astype(np.int64)), shape=a.shape
    )
    assert wide.indices.dtype == np.int64
    assert_same(gmcl.spgemm(wide, engine="cpu"), a @ a)


def test_unsorted_and_repeated_entries_are_summed_as_scipy_does():
    coo = sp.coo_array(([1.0, 2.0, 3.0, 4.0], ([0, 0, 1, 0], [1, 1, 0, 0])), shape=(2, 2))
    assert_same(gmcl.spgemm(coo, engine="cpu"), coo.tocsr() @ coo.tocsr())
    # The caller's matrix is not reordered in place.
    csr = sp.csr_array((np.array([1.0, 2.0]), np.array([1, 0]), np.array([0, 2, 2])), (2, 2))
    gmcl.spgemm(csr, engine="cpu")
    assert list(csr.indices) == [1, 0]


def test_spmatrix_in_spmatrix_out():
    a = sp.csr_matrix(random((20, 20), 0.2, 5))
    c = gmcl.spgemm(a, engine="cpu")
    assert isinstance(c, sp.csr_matrix)
    assert isinstance(gmcl.spgemm(sp.csr_array(a), engine="cpu"), sp.csr_array)


def test_rectangular_and_precision():
    a = random((30, 10), 0.3, 6)
    b = random((10, 45), 0.3, 7)
    c = gmcl.spgemm(a, b, engine="cpu", precision="f32")
    assert c.dtype == np.float32
    assert_same(c, a @ b, tol=1e-5)


def test_empty_operands():
    assert gmcl.spgemm(sp.csr_array((0, 0)), engine="cpu").shape == (0, 0)
    c = gmcl.spgemm(sp.csr_array((5, 3)), sp.csr_array((3, 4)), engine="cpu")
    assert c.shape == (5, 4) and c.nnz == 0


def test_mask_keeps_only_its_positions():
    a = random((50, 50), 0.1, 8)
    mask = random((50, 50), 0.2, 9)
    c = gmcl.spgemm(a, mask=mask, engine="cpu")
    ref = (a @ a).multiply(mask != 0)
    assert_same(c, ref)
    stored = (c != 0).astype(np.int8)
    assert (stored - stored.multiply(mask != 0)).nnz == 0


def test_a_networkx_mask_and_a_square_of_a_rectangle():
    nx = pytest.importorskip("networkx")
    g = nx.path_graph(6)
    a = sp.csr_array(nx.to_scipy_sparse_array(g, nodelist=range(6), format="csr"))
    # A graph's vertex i is its i-th node, as for A: the nodes added in order first.
    mask = nx.Graph()
    mask.add_nodes_from(range(6))
    mask.add_edges_from([(0, 2), (1, 3)])
    c = gmcl.spgemm(a, mask=mask, engine="cpu")
    ref = (a @ a).multiply(nx.to_scipy_sparse_array(mask, nodelist=range(6)) != 0)
    assert_same(c, ref)
    with pytest.raises(ValueError, match=r"A·A needs a square matrix, and A is 5 x 7"):
        gmcl.spgemm(sp.random_array((5, 7), density=0.3, format="csr", rng=1), engine="cpu")


def test_result_shares_the_librarys_memory():
    c = gmcl.spgemm(random((100, 100), 0.05, 10), engine="cpu")
    # The values and column indices are NumPy views of the library's vectors, not copies.
    assert c.data.base is not None
    assert c.indices.base is not None


def test_networkx_and_path_inputs(graphs):
    nx = pytest.importorskip("networkx")
    g = nx.karate_club_graph()
    a = nx.to_scipy_sparse_array(g, nodelist=list(g), format="csr")
    assert_same(gmcl.spgemm(g, engine="cpu"), a @ a)
    k = gmcl.load(graphs / "karate.el")
    assert_same(gmcl.spgemm(graphs / "karate.el", engine="cpu"), k @ k)


def test_mismatched_shapes_raise_the_cli_message():
    with pytest.raises(ValueError, match=r"cannot multiply: A is 3 x 4 but B is 5 x 2"):
        gmcl.spgemm(sp.csr_array((3, 4)), sp.csr_array((5, 2)), engine="cpu")


def test_bad_arguments():
    a = sp.eye_array(3, format="csr")
    with pytest.raises(ValueError, match="unknown engine 'tpu'"):
        gmcl.spgemm(a, engine="tpu")
    with pytest.raises(ValueError, match="unknown precision"):
        gmcl.spgemm(a, precision="f16")
    with pytest.raises(TypeError, match="SciPy sparse"):
        gmcl.spgemm([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="complex"):
        gmcl.spgemm(sp.csr_array(np.array([[1j]])))


def test_invalid_csr_is_refused():
    bad = sp.csr_array((np.array([1.0, 1.0]), np.array([0, 5]), np.array([0, 1, 2])), (2, 2))
    with pytest.raises(ValueError, match="column index|invalid CSR"):
        gmcl.spgemm(bad, engine="cpu")


def test_gpu_engine_runs_or_raises_engine_unavailable():
    a = random((30, 30), 0.1, 11)
    try:
        c = gmcl.spgemm(a, engine="gpu")
    except gmcl.EngineUnavailableError as e:
        assert "GPU" in str(e) or "gpu" in str(e)
    else:
        assert_same(c, a @ a, tol=1e-6)


def test_auto_runs_anywhere():
    a = random((30, 30), 0.1, 12)
    assert_same(gmcl.spgemm(a), a @ a, tol=1e-6)


def cli_error(gmcl_cli, *args):
    """The command line's error message for ``args`` (it must fail), without ``gmcl: error: ``."""
    with pytest.raises(subprocess.CalledProcessError) as failed:
        gmcl_cli(*args)
    return failed.value.stderr.strip().removeprefix("gmcl: error: ")


def test_f32_refuses_values_float32_cannot_hold():
    a = sp.csr_array(np.array([[1e39, 0.0], [0.0, 3e38]]))
    with pytest.raises(ValueError, match=r"A: value 1e\+39 does not fit the value type f32"):
        gmcl.spgemm(a, precision="f32", engine="cpu")
    with pytest.raises(ValueError, match=r"B: value 1e\+39 does not fit the value type f32"):
        gmcl.spgemm(sp.eye_array(2, format="csr"), a, precision="f32", engine="cpu")
    # float64 holds it; the largest float32 values are taken (their products overflow, as
    # they would on the command line).
    c = gmcl.spgemm(a, precision="f64", engine="cpu")
    assert c[0, 0] == pytest.approx(1e78, rel=1e-12)
    assert gmcl.spgemm(a[1:, 1:], precision="f32", engine="cpu").dtype == np.float32


def test_f32_refuses_a_files_value_as_the_cli(tmp_path, gmcl_cli):
    big = tmp_path / "big.wel"
    big.write_text("0 1 2.5\n1 1 1e39\n")
    message = cli_error(gmcl_cli, "spgemm", big, "--precision", "f32", "--engine", "cpu")
    assert "does not fit the value type f32" in message
    with pytest.raises(ValueError) as raised:
        gmcl.spgemm(big, precision="f32", engine="cpu")
    assert str(raised.value) == message
    assert gmcl.spgemm(big, engine="cpu")[1, 1] == pytest.approx(1e78, rel=1e-12)


def test_two_files_of_labels_or_snap_ids_are_refused_as_the_cli(tmp_path, graphs, gmcl_cli):
    snap = tmp_path / "g.txt"
    snap.write_text("# SNAP ids, renumbered in order of appearance\n10 20\n20 30\n30 10\n")
    el = tmp_path / "g.el"
    el.write_text("0 1\n1 2\n2 0\n")
    for a, b in [(snap, el), (el, snap), (graphs / "lesmis.abc", graphs / "lesmis.abc")]:
        message = cli_error(gmcl_cli, "spgemm", a, b, "--engine", "cpu")
        assert "needs numeric ids" in message
        with pytest.raises(ValueError) as raised:
            gmcl.spgemm(a, b, engine="cpu")
        assert str(raised.value) == message
    # One file (A²), or a file with a matrix, has one numbering.
    assert gmcl.spgemm(snap, engine="cpu").nnz == 3
    assert gmcl.spgemm(snap, gmcl.load(el), engine="cpu").nnz == 3
    assert_same(gmcl.spgemm(el, el, engine="cpu"), gmcl.spgemm(el, engine="cpu"))


def test_mask_of_the_wrong_shape_is_refused():
    a = random((5, 4), 0.5, 13)
    b = random((4, 6), 0.5, 14)
    for shape in [(5, 5), (6, 5), (4, 6)]:
        message = rf"the mask is {shape[0]} x {shape[1]} but the product A·B is 5 x 6"
        with pytest.raises(ValueError, match=message):
            gmcl.spgemm(a, b, mask=sp.csr_array(shape), engine="cpu")


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64])
def test_integer_and_boolean_masks(dtype):
    a = random((50, 50), 0.1, 15)
    mask = random((50, 50), 0.2, 16)
    c = gmcl.spgemm(a, mask=(mask != 0).astype(dtype), engine="cpu")
    assert 0 < c.nnz < (a @ a).nnz
    assert_same(c, (a @ a).multiply(mask != 0))
    np.testing.assert_array_equal(c.indptr, gmcl.spgemm(a, mask=mask, engine="cpu").indptr)
