"""gmcl.spgemm against SciPy's A @ B: formats, dtypes, index widths, shapes, masks, errors."""

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
