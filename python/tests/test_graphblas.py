"""gmcl.spgemm and gmcl.tricount against python-graphblas (SuiteSparse:GraphBLAS): mxm over the
plus_times semiring, masked mxm, and the standard GraphBLAS triangle counts."""

import numpy as np
import pytest
import scipy.sparse as sp

import gmcl

gb = pytest.importorskip("graphblas")
nx = pytest.importorskip("networkx")


def random(shape, density, seed, dtype=np.float64):
    """Random values in [0.5, 2): no sum cancels to near zero, so every entry can be compared
    with a relative tolerance."""
    rng = np.random.default_rng(seed)
    a = sp.random_array(shape, density=density, format="csr", rng=rng)
    a.data = 0.5 + 1.5 * a.data
    return a.astype(dtype)


def to_graphblas(a):
    return gb.io.from_scipy_sparse(sp.csr_array(a))


def from_graphblas(c):
    c = gb.io.to_scipy_sparse(c, format="csr")
    c.sort_indices()
    return c


def assert_same(c, ref, rtol):
    """The same structure exactly (every stored position), the values within ``rtol``."""
    assert c.shape == ref.shape
    np.testing.assert_array_equal(c.indptr, ref.indptr)
    np.testing.assert_array_equal(c.indices, ref.indices)
    np.testing.assert_allclose(c.data, ref.data, rtol=rtol, atol=0)


@pytest.mark.parametrize(
    "dtype, rtol", [(np.float64, 1e-9), (np.float32, 1e-5)], ids=["float64", "float32"]
)
@pytest.mark.parametrize(
    "m, k, n, density",
    [(60, 45, 80, 0.08), (200, 200, 200, 0.03), (1, 300, 7, 0.2), (90, 3, 40, 0.5)],
)
def test_spgemm_is_mxm_plus_times(dtype, rtol, m, k, n, density):
    a = random((m, k), density, m + k, dtype)
    b = random((k, n), density, k + n + 1, dtype)
    ref = from_graphblas(to_graphblas(a).mxm(to_graphblas(b), gb.semiring.plus_times).new())
    assert ref.dtype == dtype
    c = gmcl.spgemm(a, b, engine="cpu")
    assert c.dtype == dtype
    assert_same(c, ref, rtol)


def test_spgemm_of_integers_is_exact():
    a = (random((70, 70), 0.1, 3) * 10).astype(np.int64)
    ref = from_graphblas(to_graphblas(a).mxm(to_graphblas(a), gb.semiring.plus_times).new())
    c = gmcl.spgemm(a, engine="cpu")
    assert_same(c, ref.astype(np.float64), rtol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.bool_])
def test_masked_spgemm_is_mxm_with_a_structural_mask(dtype):
    a = random((80, 50), 0.08, 4)
    b = random((50, 90), 0.08, 5)
    mask = random((80, 90), 0.2, 6)
    # Stored zeros are positions of the mask too (a structural mask reads no values).
    mask.data[::3] = 0
    mask = mask.astype(dtype)
    assert (mask.data == 0).any()
    ref = from_graphblas(
        to_graphblas(a)
        .mxm(to_graphblas(b), gb.semiring.plus_times)
        .new(mask=to_graphblas(mask).S)
    )
    c = gmcl.spgemm(a, b, mask=mask, engine="cpu")
    assert 0 < c.nnz < (a @ b).nnz
    assert_same(c, ref, 1e-9)


def graphblas_triangles(a):
    """The number of triangles (Sandia: C<L> = L·L over plus_pair, L the strictly lower
    triangle) and the number through each vertex (Burkhardt: C<A> = A·A over plus_pair, half
    of each row's sum), of the simple graph of ``a``."""
    s = sp.csr_array(((a + a.T) != 0).astype(np.int64))
    s.setdiag(0)
    s.eliminate_zeros()
    A = to_graphblas(s)
    L = gb.select.tril(A, -1).new()
    total = L.mxm(L, gb.semiring.plus_pair).new(mask=L.S).reduce_scalar().get(0)
    rows = A.mxm(A, gb.semiring.plus_pair).new(mask=A.S).reduce_rowwise().new()
    each = np.zeros(s.shape[0], dtype=np.uint64)
    idx, vals = rows.to_coo()
    each[idx] = vals // 2
    return int(total), each


@pytest.mark.parametrize(
    "g",
    [
        nx.karate_club_graph(),
        nx.les_miserables_graph(),
        nx.gnp_random_graph(400, 0.04, seed=7),
        nx.barabasi_albert_graph(500, 6, seed=8),
    ],
    ids=["karate", "lesmis", "gnp", "barabasi-albert"],
)
def test_tricount_is_graphblas(g):
    a = nx.to_scipy_sparse_array(g, nodelist=list(g), format="csr")
    total, each = graphblas_triangles(a)
    assert total > 0
    assert gmcl.tricount(g, engine="cpu") == total
    np.testing.assert_array_equal(gmcl.tricount(g, per_vertex=True, engine="cpu"), each)


def test_tricount_of_a_directed_weighted_matrix_is_graphblas_on_its_simple_graph():
    # One direction of each edge, weights and self loops: the count is the simple graph's.
    a = random((300, 300), 0.05, 9)
    a = sp.csr_array(sp.triu(a) + sp.eye_array(300))
    total, each = graphblas_triangles(a)
    assert total > 0
    assert gmcl.tricount(a, engine="cpu") == total
    np.testing.assert_array_equal(gmcl.tricount(a, per_vertex=True, engine="cpu"), each)
