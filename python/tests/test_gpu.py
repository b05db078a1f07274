"""The GPU engine from Python against the CPU engine: spgemm (same structure, values within
rounding), tricount (equal counts) and cluster (identical labels) on engine="gpu".

These tests need a usable GPU. Where none is, they skip, saying why; with GMCL_REQUIRE_GPU=1 (set
on the GPU machine, as for the Rust tests) a GPU that does not work fails them instead.
python/tests/gpu_check.sh runs them on a GPU machine from a built wheel."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import gmcl
from gmcl import _gmcl

REQUIRED = os.environ.get("GMCL_REQUIRE_GPU") == "1"


def _gpu_problem():
    """None where the GPU engine runs (a triangle counted on it), else why not."""
    triangle = sp.csr_array(np.ones((3, 3)) - np.eye(3))
    try:
        count = gmcl.tricount(triangle, engine="gpu")
    except gmcl.EngineUnavailableError as e:
        return str(e)
    assert count == 1
    return None


@pytest.fixture(scope="module")
def gpu():
    """Skips the test where no GPU is usable, fails it where GMCL_REQUIRE_GPU=1 says one must."""
    why = _gpu_problem()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"GMCL_REQUIRE_GPU=1 but the GPU engine is unavailable: {why}")
        pytest.skip(f"no usable GPU: {why}")


def rmat(scale, edge_factor=8, weights=False, seed=5):
    return gmcl.generate(
        scale, edge_factor, undirected=True, no_self_loops=True, weights=weights, seed=seed
    )


def lesmis():
    nx = pytest.importorskip("networkx")
    return nx.to_scipy_sparse_array(nx.les_miserables_graph(), weight="weight", format="csr")


def products(a, b, dtype, mask=None):
    """C on both engines, through the extension (which also says which engine ran)."""
    out = {}
    for engine in ("cpu", "gpu"):
        pa = gmcl._parts(a, dtype)
        pb = None if b is None else gmcl._parts(b, dtype, "B")
        pm = None if mask is None else gmcl._parts(mask, np.float64, "mask")
        parts, ran, _seconds = _gmcl.spgemm(pa, pb, engine, pm)
        assert ran == engine
        out[engine] = gmcl._matrix(parts)
    return out["cpu"], out["gpu"]


def assert_same_product(cpu, gpu, rtol):
    assert cpu.shape == gpu.shape
    # The same entries in the same places (sorted columns in each row)...
    np.testing.assert_array_equal(gpu.indptr, cpu.indptr)
    np.testing.assert_array_equal(gpu.indices, cpu.indices)
    # ...and values equal up to the order the products were summed in.
    np.testing.assert_allclose(gpu.data, cpu.data, rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-4)])
def test_spgemm_gpu_equals_cpu(gpu, graphs, dtype, rtol):
    karate = gmcl.load(graphs / "karate.el")
    rng = np.random.default_rng(3)
    a = sp.random_array((300, 200), density=0.05, format="csr", rng=rng)
    b = sp.random_array((200, 250), density=0.05, format="csr", rng=rng)
    for x, y in [(karate, None), (lesmis(), None), (rmat(12, weights=True), None), (a, b)]:
        cpu, gpu_c = products(x, y, dtype)
        assert cpu.nnz > 0
        assert_same_product(cpu, gpu_c, rtol)
        ref = x @ (x if y is None else y)
        np.testing.assert_allclose(gpu_c.toarray(), ref.toarray(), rtol=10 * rtol, atol=1e-12)


def test_spgemm_gpu_masked_and_public_call(gpu):
    a = rmat(11, weights=True)
    cpu, gpu_c = products(a, None, np.float64, mask=a)
    assert_same_product(cpu, gpu_c, 1e-12)
    # The public function on engine="gpu" gives the same matrix.
    c = gmcl.spgemm(a, engine="gpu", mask=a)
    assert_same_product(cpu, c, 1e-12)


def test_tricount_gpu_equals_cpu(gpu, graphs):
    for g in [gmcl.load(graphs / "karate.el"), lesmis(), rmat(12), rmat(14, 16)]:
        assert gmcl.tricount(g, engine="gpu") == gmcl.tricount(g, engine="cpu") > 0
        np.testing.assert_array_equal(
            gmcl.tricount(g, per_vertex=True, engine="gpu"),
            gmcl.tricount(g, per_vertex=True, engine="cpu"),
        )
    # From a file, as the command line counts it.
    path = graphs / "karate.el"
    assert gmcl.tricount(path, engine="gpu") == gmcl.tricount(path, engine="cpu") == 45
    _, _, ran, _ = _gmcl.tricount_matrix(gmcl._parts(rmat(10), None), False, "gpu")
    assert ran == "gpu"


def test_cluster_gpu_labels_equal_cpu(gpu, graphs):
    for g in [graphs / "karate.el", graphs / "lesmis.abc", lesmis(), rmat(11, weights=True)]:
        for precision in ("f32", "f64"):
            cpu = gmcl.cluster(g, engine="cpu", precision=precision)
            on_gpu = gmcl.cluster(g, engine="gpu", precision=precision)
            assert on_gpu.engine == "gpu" and cpu.engine == "cpu"
            assert len(cpu) > 1
            np.testing.assert_array_equal(on_gpu.labels, cpu.labels)
            # Both engines sum alike (order-free sums), so they iterate alike too.
            assert on_gpu.iterations == cpu.iterations


def test_gpu_engine_runs_or_raises_engine_unavailable():
    """Everywhere: engine="gpu" runs on the GPU or raises EngineUnavailableError, as the
    command line exits 3; it never falls back to the CPU."""
    g = rmat(8)
    calls = [
        lambda: gmcl.spgemm(g, engine="gpu"),
        lambda: gmcl.tricount(g, engine="gpu"),
        lambda: gmcl.cluster(g, engine="gpu"),
    ]
    why = _gpu_problem()
    for call in calls:
        if why is None:
            call()
        else:
            with pytest.raises(gmcl.EngineUnavailableError, match="GPU"):
                call()


@pytest.mark.skipif("GMCL_GPU_TESTS_INNER" in os.environ, reason="the run under test itself")
def test_without_a_gpu_the_gpu_tests_fail_when_a_gpu_is_required():
    """GMCL_REQUIRE_GPU=1 turns the skips into failures, so a GPU machine whose GPU does not work
    cannot pass the GPU tests by skipping them."""
    if _gpu_problem() is None:
        pytest.skip("a GPU is usable here: the skips cannot be observed")
    env = dict(os.environ, GMCL_REQUIRE_GPU="1", GMCL_GPU_TESTS_INNER="1")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__]
    r = subprocess.run(
        args + ["-k", "tricount_gpu_equals_cpu"], env=env, capture_output=True, text=True
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "GMCL_REQUIRE_GPU=1 but the GPU engine is unavailable" in r.stdout, r.stdout
    env.pop("GMCL_REQUIRE_GPU")
    r = subprocess.run(args, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "skipped" in r.stdout, r.stdout + r.stderr


FAULT_CHILD = """
import sys
import gmcl

job, engine, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])
g = gmcl.generate(scale, 16, undirected=True, no_self_loops=True, seed=5)
calls = {
    "spgemm": lambda: gmcl.spgemm(g, engine=engine).nnz,
    "tricount": lambda: gmcl.tricount(g, engine=engine),
    "cluster": lambda: len(gmcl.cluster(g, engine=engine)),
}
try:
    print("result", calls[job](), flush=True)
except gmcl.GpuError as e:
    print("GpuError", e, flush=True)
"""


def _faulty(job, engine, scale, fault_at=None):
    """Runs `job` in a fresh process (the fault switch is read at import, as the command line
    reads it at start) on one thread, where `auto` takes the GPU for smaller work."""
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    env.pop("GMCL_GPU_FAULT", None)
    if fault_at is not None:
        env["GMCL_GPU_FAULT"] = str(fault_at)
    args = [sys.executable, "-c", FAULT_CHILD, job, engine, str(scale)]
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr


def test_a_gpu_fault_raises_gpu_error_and_auto_falls_back_to_the_cpu(gpu):
    """GMCL_GPU_FAULT=N (the N-th checked driver call fails) as in the command line: an explicit
    engine="gpu" raises GpuError naming the step; under engine="auto" the call says once that
    it runs on the CPU instead and gives the CPU's result."""
    for job, scale in (("spgemm", 10), ("tricount", 17), ("cluster", 12)):
        want, _ = _faulty(job, "cpu", scale)
        assert want.startswith("result ") and want != "result 0", want
        for fault_at in (1, 3):
            out, err = _faulty(job, "gpu", scale, fault_at)
            assert out.startswith("GpuError") and "injected fault (GMCL_GPU_FAULT)" in out, (
                job,
                out,
                err,
            )
            if job == "spgemm":
                continue  # auto runs a product this small on the CPU
            out, err = _faulty(job, "auto", scale, fault_at)
            assert out == want, (job, out, err)
            assert err.count("running on the CPU engine instead") == 1, (job, err)


def test_kernels_are_kept_where_gmcl_kernel_cache_says(gpu, tmp_path):
    """The GPU opens as the command line opens it: compiled kernels go to GMCL_KERNEL_CACHE
    (read at import), so a later process need not compile them again."""
    cache = tmp_path / "kernels"
    child = "import gmcl, sys; print(gmcl.tricount(gmcl.generate(8, 8, undirected=True), engine='gpu'))"
    env = dict(os.environ, GMCL_KERNEL_CACHE=str(cache))
    r = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert cache.is_dir() and any(cache.iterdir()), r.stderr
