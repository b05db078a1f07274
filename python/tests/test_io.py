"""gmcl.load, gmcl.save and gmcl.generate against SciPy's own reading and writing."""

import gzip

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
    with pytest.raises(ValueError, match="scale = -1 is out of range"):
        gmcl.generate(-1, 4)
    with pytest.raises(ValueError, match="seed = -1 is out of range"):
        gmcl.generate(4, 4, seed=-1)


SNAP = """# Directed graph (each unordered pair of nodes is saved once): example.txt
# Nodes: 4 Edges: 5
# FromNodeId\tToNodeId
30\t10
10\t20
7\t30
20\t7
10\t30
30\t10
"""


@pytest.mark.parametrize("name", ["g.txt", "g.snap", "g.txt.gz"])
def test_snap_files_are_numbered_by_their_ids(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(SNAP)
    else:
        path.write_text(SNAP)
    a, names = gmcl.load(path, labels=True)
    assert sorted(names, key=int) == ["7", "10", "20", "30"]
    # Entry (i, j) for each line "names[i] names[j]"; the repeated edge is summed.
    pairs = [line.split("\t") for line in SNAP.splitlines() if not line.startswith("#")]
    rows = [names.index(u) for u, _ in pairs]
    cols = [names.index(v) for _, v in pairs]
    ref = sp.csr_array((np.ones(len(pairs)), (rows, cols)), shape=(4, 4))
    assert a.shape == (4, 4) and a.nnz == 5
    assert (a != ref).nnz == 0
    assert a[names.index("30"), names.index("10")] == 2


@pytest.mark.parametrize("name", ["karate.el", "karate.mtx"])
def test_gz_files_read_as_the_name_before_gz(tmp_path, graphs, name):
    packed = tmp_path / f"{name}.gz"
    with open(graphs / name, "rb") as f, gzip.open(packed, "wb") as g:
        g.write(f.read())
    plain = gmcl.load(graphs / name)
    a = gmcl.load(packed)
    assert a.nnz > 0 and (a != plain).nnz == 0
    assert gmcl.tricount(packed, engine="cpu") == 45


def test_damaged_gz_is_a_value_error_naming_it(tmp_path, graphs):
    packed = tmp_path / "cut.el.gz"
    with open(graphs / "karate.el", "rb") as f:
        whole = gzip.compress(f.read())
    packed.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut\.el\.gz"):
        gmcl.load(packed)


@pytest.mark.parametrize("compressed", [True, False])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize(
    "dtype", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64, np.bool_]
)
def test_npz_saved_by_scipy(tmp_path, fmt, dtype, compressed):
    rng = np.random.default_rng(11)
    a = sp.random_array((30, 20), density=0.2, format=fmt, rng=rng)
    # Values none of which is zero: of both signs where the type has them, with fractions in
    # a float type.
    values = rng.integers(1, 100, a.nnz).astype(np.float64)
    if np.issubdtype(dtype, np.floating):
        values += 0.25
    if np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.signedinteger):
        values *= rng.choice([-1, 1], a.nnz)
    a.data = values
    a = a.astype(dtype)
    sp.save_npz(tmp_path / "m.npz", a, compressed=compressed)
    back = gmcl.load(tmp_path / "m.npz")
    ref = sp.csr_array(a.astype(np.float64))
    assert back.dtype == np.float64 and back.shape == (30, 20)
    assert back.nnz == ref.nnz > 0
    assert (back != ref).nnz == 0


def test_npz_of_scipy_with_64_bit_indices_and_repeated_coo_entries(tmp_path):
    a = sp.random_array((25, 25), density=0.2, format="csr", rng=np.random.default_rng(12))
    wide = sp.csr_array(
        (a.data, a.indices.astype(np.int64), a.indptr.astype(np.int64)), shape=a.shape
    )
    sp.save_npz(tmp_path / "wide.npz", wide)
    assert np.load(tmp_path / "wide.npz")["indices"].dtype == np.int64
    assert (gmcl.load(tmp_path / "wide.npz") != a).nnz == 0
    coo = sp.coo_array(([1.0, 2.0, 4.0], ([0, 0, 1], [1, 1, 0])), shape=(2, 3))
    sp.save_npz(tmp_path / "coo.npz", coo)
    back = gmcl.load(tmp_path / "coo.npz")
    assert back.shape == (2, 3) and back.nnz == 2
    assert back[0, 1] == 3.0 and back[1, 0] == 4.0


def test_format_overrides_the_extension(tmp_path, graphs):
    data = tmp_path / "karate.data"
    data.write_bytes((graphs / "karate.el").read_bytes())
    with pytest.raises(ValueError, match="cannot tell the format"):
        gmcl.load(data)
    assert (gmcl.load(data, format="el") != gmcl.load(graphs / "karate.el")).nnz == 0
    # A .txt file read as an edge list: its ids are positions, not names.
    snap = tmp_path / "g.txt"
    snap.write_text(SNAP)
    assert gmcl.load(snap).shape == (4, 4)
    a, names = gmcl.load(snap, format="el", labels=True)
    assert a.shape == (31, 31) and names is None
    assert a[30, 10] == 2 and a[7, 30] == 1


@pytest.mark.parametrize("shape", [(0, 0), (3, 4)])
def test_save_an_empty_matrix(tmp_path, shape):
    empty = sp.csr_array(shape)
    for ext in ["npz", "mtx"]:
        gmcl.save(tmp_path / f"e.{ext}", empty)
        back = gmcl.load(tmp_path / f"e.{ext}")
        assert back.shape == shape and back.nnz == 0
    assert sp.load_npz(tmp_path / "e.npz").shape == shape
    # Lines of edges have no size: no edge, no vertex.
    for ext in ["wel", "el"]:
        gmcl.save(tmp_path / f"e.{ext}", empty)
        assert (tmp_path / f"e.{ext}").read_text() == ""
        assert gmcl.load(tmp_path / f"e.{ext}").shape == (0, 0)


def test_save_npz_keeps_the_value_type_as_scipy(tmp_path):
    a = sp.random_array((30, 30), density=0.2, format="csr", rng=np.random.default_rng(13))
    for dtype in [np.float32, np.float64]:
        m = a.astype(dtype)
        gmcl.save(tmp_path / "g.npz", m)
        sp.save_npz(tmp_path / "s.npz", m)
        back, scipys = sp.load_npz(tmp_path / "g.npz"), sp.load_npz(tmp_path / "s.npz")
        assert back.dtype == scipys.dtype == dtype
        assert back.indices.dtype == scipys.indices.dtype
        assert (back != scipys).nnz == 0
    # Text keeps float32 values exactly (as float64).
    m = a.astype(np.float32)
    gmcl.save(tmp_path / "g.mtx", m)
    assert (gmcl.load(tmp_path / "g.mtx") != m.astype(np.float64)).nnz == 0


def test_64_bit_indices_come_back_when_a_result_has_more_than_2_31_columns(tmp_path):
    n = 3_000_000_000
    b = sp.csr_array(
        (np.array([2.5, 1.0]), np.array([n - 1, 0], dtype=np.int64), np.array([0, 1, 2])),
        shape=(2, n),
    )
    c = gmcl.spgemm(sp.eye_array(2, format="csr") * 3, b, engine="cpu")
    assert c.shape == (2, n)
    # The index type SciPy gives a matrix of this shape.
    assert c.indptr.dtype == c.indices.dtype == sp.csr_array((2, n)).indices.dtype == np.int64
    assert list(c.indptr) == [0, 1, 2] and list(c.indices) == [n - 1, 0]
    assert list(c.data) == [7.5, 3.0]
    gmcl.save(tmp_path / "wide.npz", c)
    back = sp.load_npz(tmp_path / "wide.npz")
    assert back.shape == (2, n) and back.indices.dtype == np.int64
    assert list(back.indices) == [n - 1, 0] and list(back.data) == [7.5, 3.0]


def test_snap_columns_past_the_target_are_skipped_and_said(tmp_path, capsys):
    p = tmp_path / "signed.txt"
    p.write_text("# FromNodeId\tToNodeId\tSign\n30\t1\t-1\n1\t2\t1\n2\t30\t1\n")
    a, names = gmcl.load(p, labels=True)
    # Ids in increasing order, the signs not read: 30 -> 1, 1 -> 2, 2 -> 30, all ones.
    assert names == ["1", "2", "30"] and a.shape == (3, 3)
    assert a.nnz == 3 and (a.data == 1).all()
    err = capsys.readouterr().err
    assert err.count("signed.txt: line 2 has 3 columns; SNAP text is read as source") == 1, err
    assert 'format="wel"' in err, err
    assert gmcl.tricount(p) == 1
    assert "signed.txt: line 2 has 3 columns" in capsys.readouterr().err
    q = tmp_path / "plain.txt"
    q.write_text("# c\n30 1\n1 2\n")
    gmcl.load(q)
    assert "columns" not in capsys.readouterr().err
