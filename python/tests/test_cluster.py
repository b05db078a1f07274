"""gmcl.cluster: the command line's partition, byte for byte, from files, SciPy and NetworkX."""

import numpy as np
import pytest
import scipy.sparse as sp

import gmcl

nx = pytest.importorskip("networkx")


def cli_text(c):
    """The clusters as `gmcl cluster` writes them: one per line, labels separated by TABs."""
    name = (lambda v: str(c.nodes[v])) if c.nodes is not None else str
    return "".join("\t".join(name(v) for v in cl) + "\n" for cl in c.clusters)


@pytest.mark.parametrize("graph", ["karate.el", "karate.mtx", "lesmis.abc"])
def test_a_file_gives_the_clis_output_byte_for_byte(graphs, gmcl_cli, tmp_path, graph):
    out = tmp_path / "clusters.txt"
    gmcl_cli("cluster", graphs / graph, "--engine", "cpu", "-q", "-o", out)
    c = gmcl.cluster(graphs / graph, engine="cpu")
    assert cli_text(c) == out.read_text()
    assert len(c) == len(out.read_text().splitlines()) > 1


def test_options_reach_the_engine_as_on_the_command_line(graphs, gmcl_cli, tmp_path):
    out = tmp_path / "clusters.txt"
    gmcl_cli("cluster", graphs / "lesmis.abc", "-I", 4, "--scheme", 2, "--engine", "cpu",
             "--precision", "f64", "-q", "-o", out)
    c = gmcl.cluster(graphs / "lesmis.abc", inflation=4, scheme=2, engine="cpu", precision="f64")
    assert cli_text(c) == out.read_text()
    assert len(c) > len(gmcl.cluster(graphs / "lesmis.abc", engine="cpu"))


def test_networkx_les_miserables_equals_the_cli_on_its_edge_list(gmcl_cli, tmp_path):
    g = nx.les_miserables_graph()
    nodes = list(g)
    index = {v: i for i, v in enumerate(nodes)}
    with open(tmp_path / "lesmis.wel", "w") as f:
        for u, v, w in g.edges(data="weight"):
            f.write(f"{index[u]} {index[v]} {w}\n")
    out = tmp_path / "clusters.txt"
    gmcl_cli("cluster", tmp_path / "lesmis.wel", "--engine", "cpu", "-q", "-o", out)
    c = gmcl.cluster(g, engine="cpu")
    assert c.nodes == nodes
    by_index = "".join("\t".join(str(v) for v in cl) + "\n" for cl in c.clusters)
    assert by_index == out.read_text()


def test_matrix_input_labels_every_vertex(graphs):
    a = gmcl.load(graphs / "karate.el")
    c = gmcl.cluster(a, engine="cpu")
    f = gmcl.cluster(graphs / "karate.el", engine="cpu")
    assert [list(x) for x in c.clusters] == [list(x) for x in f.clusters]
    assert c.labels.shape == (34,)
    for k, members in enumerate(c.clusters):
        assert (c.labels[members] == k).all()


def test_modularity_is_networkxs(graphs):
    g = nx.karate_club_graph()
    for _, _, d in g.edges(data=True):
        d.pop("weight", None)
    c = gmcl.cluster(g, engine="cpu")
    communities = [{c.nodes[v] for v in cl} for cl in c.clusters]
    assert c.modularity == pytest.approx(nx.community.modularity(g, communities), abs=1e-9)


def test_vertices_without_edges_get_clusters_of_their_own():
    a = sp.csr_array(np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]))
    c = gmcl.cluster(a, engine="cpu")
    assert len(c) == 1
    assert list(c.labels) == [0, 0, 1, 2]


def test_empty_graph_has_no_clusters():
    c = gmcl.cluster(sp.csr_array((3, 3)), engine="cpu")
    assert len(c) == 0 and list(c.labels) == [0, 1, 2]
    assert len(gmcl.cluster(sp.csr_array((0, 0)), engine="cpu").labels) == 0


def test_dtypes_and_index_widths_give_the_same_clusters(graphs):
    a = gmcl.load(graphs / "karate.el")
    ref = gmcl.cluster(a, engine="cpu").labels
    for dtype in (np.int8, np.int64, np.float32, np.bool_):
        assert (gmcl.cluster(a.astype(dtype), engine="cpu").labels == ref).all()
    wide = sp.csr_array(
        (a.data, a.indices.astype(np.int64), a.indptr.astype(np.int64)), shape=a.shape
    )
    assert (gmcl.cluster(wide.tocoo(), engine="cpu").labels == ref).all()


def test_bad_input_raises_the_clis_messages(tmp_path):
    with pytest.raises(ValueError, match="inflation 0 is out of range"):
        gmcl.cluster(sp.eye_array(3, format="csr"), inflation=0)
    with pytest.raises(ValueError, match="not square"):
        gmcl.cluster(sp.csr_array((3, 4)), engine="cpu")
    with pytest.raises(ValueError, match="MCL needs weights that are finite and not negative"):
        gmcl.cluster(sp.csr_array(np.array([[0, -1.0], [0, 0]])), engine="cpu")
    with pytest.raises(ValueError, match="unknown overlap mode"):
        gmcl.cluster(sp.eye_array(3, format="csr"), overlap="merge")
    # Integer options out of range are ValueErrors naming the option, as the command line's.
    for option, value in [("scheme", -1), ("select", 2**40), ("max_iterations", -5)]:
        with pytest.raises(ValueError, match=f"{option} = {value} is out of range"):
            gmcl.cluster(sp.eye_array(3, format="csr"), **{option: value})
    with pytest.raises(TypeError, match="recover must be an integer, not float"):
        gmcl.cluster(sp.eye_array(3, format="csr"), recover=2.5)
    # A NetworkX graph's bad edge is named by its nodes, not their positions.
    G = nx.Graph()
    G.add_edge("alice", "bob", weight=1.0)
    G.add_edge("bob", "carol", weight=-2.0)
    with pytest.raises(ValueError, match=r"edge \('bob', 'carol'\) weighs -2: MCL needs"):
        gmcl.cluster(G, engine="cpu")
    bad = tmp_path / "bad.abc"
    bad.write_text("a b 1\nc d x\n")
    with pytest.raises(ValueError, match=r"bad\.abc:2: "):
        gmcl.cluster(bad)


def test_gpu_runs_or_raises_engine_unavailable_and_auto_always_runs(graphs):
    cpu = gmcl.cluster(graphs / "karate.el", engine="cpu")
    try:
        gpu = gmcl.cluster(graphs / "karate.el", engine="gpu")
    except gmcl.EngineUnavailableError as e:
        assert "GPU" in str(e)
    else:
        assert gpu.engine == "gpu"
        assert [list(c) for c in gpu.clusters] == [list(c) for c in cpu.clusters]
    auto = gmcl.cluster(graphs / "karate.el")
    # A graph this small runs on the CPU under auto, without looking for a GPU.
    assert auto.engine == "cpu"
    assert (auto.labels == cpu.labels).all()
