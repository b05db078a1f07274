"""gmcl.load, gmcl.save and gmcl.generate against SciPy's own reading and writing."""

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import gmcl


def test_every_format_loads_the_same_karate(graphs):
    el = gmcl.load(graphs / "karate.el")
    mtx = gmcl.load(graphs / "karate.mtx")
    assert el.shape == (34, 34) and el.nnz == 78
    # The .mtx file is symmetric storage: both triangles come back.
    assert (mtx != (el + el.T)).nnz == 0
    ref = sp.csr_array(scipy.io.mmread(graphs / "karate.mtx"))
    assert (mtx != ref).nnz == 0


def test_load_returns_the_files_names(graphs):
    a, names = gmcl.load(graphs / "lesmis.abc", labels=True)
    assert a.shape[0] == len(names) and "Valjean" in names
    _, names = gmcl.load(graphs / "karate.el", labels=True)
    assert names is None
    _, names = gmcl.load(graphs / "karate.mtx", labels=True)
    assert names[:2] == ["1", "2"]


@pytest.mark.parametrize("ext", ["mtx", "wel", "npz"])
def test_save_then_load_round_trips_values(tmp_path, ext):
    rng = np.random.default_rng(7)
    a = sp.random_array((40, 40), density=0.1, format="lil", rng=rng)
    # An .wel file has no size line: its size is the largest id + 1.
    a[39, 39] = 0.5
    a = sp.csr_array(a)
    path = tmp_path / f"m.{ext}"
    gmcl.save(path, a)
    back = gmcl.load(path)
    assert back.shape == a.shape
    assert np.abs((back - a).toarray()).max() < 1e-12


def test_saved_npz_is_read_by_scipy(tmp_path):
    a = sp.csr_array(np.array([[0, 2.5, 0], [1, 0, 0]]))
    gmcl.save(tmp_path / "m.npz", a)
    assert (sp.load_npz(tmp_path / "m.npz") != a).nnz == 0


def test_el_is_written_only_without_values(tmp_path):
    pattern = sp.csr_array(np.array([[0, 1], [1, 0]]))
    gmcl.save(tmp_path / "g.el", pattern)
    assert (gmcl.load(tmp_path / "g.el") != pattern).nnz == 0
    weighted = sp.csr_array(np.array([[0, 2.0], [0, 0]]))
    with pytest.raises(ValueError, match="holds no weights"):
        gmcl.save(tmp_path / "w.el", weighted)
    assert not (tmp_path / "w.el").exists()


def test_save_refuses_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match="extension names no format"):
        gmcl.save(tmp_path / "m.xyz", sp.eye_array(3, format="csr"))


def test_bad_file_raises_value_error_with_the_cli_message(tmp_path):
    bad = tmp_path / "bad.el"
    bad.write_text("0 1\n1 x\n")
    with pytest.raises(ValueError, match=r"bad\.el:2: "):
        gmcl.load(bad)


def test_missing_file_raises_os_error(tmp_path):
    with pytest.raises(OSError, match="missing.el"):
        gmcl.load(tmp_path / "missing.el")


def test_unknown_format_is_refused(graphs):
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        gmcl.load(graphs / "karate.el", format="xml")


def test_empty_file_loads_an_empty_matrix(tmp_path):
    (tmp_path / "empty.el").write_text("")
    a = gmcl.load(tmp_path / "empty.el")
    assert a.nnz == 0


def test_generate_matches_the_cli_stream(tmp_path, gmcl_cli):
    a = gmcl.generate(8, 4, seed=3)
    # Matrix Market keeps the size (an edge list's is its largest id + 1).
    gmcl_cli("generate", "-s", 8, "-e", 4, "--seed", 3, "-o", tmp_path / "g.mtx")
    ref = gmcl.load(tmp_path / "g.mtx")
    assert a.shape == (256, 256) and a.sum() == 1024
    assert (a != ref).nnz == 0


def test_generate_undirected_is_symmetric_and_seeded():
    a = gmcl.generate(9, 8, undirected=True, no_self_loops=True, no_duplicates=True, seed=5)
    assert (a != a.T).nnz == 0
    assert a.diagonal().sum() == 0
    assert a.nnz == 2 * 8 * 512
    assert (gmcl.generate(9, 8, seed=5) != gmcl.generate(9, 8, seed=6)).nnz > 0


def test_generate_refuses_bad_parameters():
    with pytest.raises(ValueError, match="scale 40 is too large"):
        gmcl.generate(40, 1)
    with pytest.raises(ValueError, match="give edges or edge_factor"):
        gmcl.generate(4)
