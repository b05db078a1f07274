"""gmcl: Markov clustering, triangle counting and sparse matrix products on large graphs.

The functions take a graph or matrix as a SciPy sparse array or matrix (CSR, CSC, COO, ...;
any integer, boolean or floating-point dtype; 32- or 64-bit indices), a NetworkX graph (its
adjacency, with the ``weight`` attribute), or a path to a graph file in any format the ``gmcl``
command line reads (.el, .wel, .txt/.snap, .mtx, .abc, .npz; the text ones also compressed, as
``g.el.gz``); they return SciPy CSR arrays and NumPy arrays. The work runs without the GIL;
Ctrl-C stops it and raises ``KeyboardInterrupt``.

``engine`` is ``"auto"`` (the GPU engine when the work is large enough for it to pay and a GPU is
usable, else the CPU engine, with a notice on stderr when no GPU is usable), ``"cpu"`` or
``"gpu"``, as for the command line. Bad input raises ``ValueError`` with the command line's
message; an unusable engine ``EngineUnavailableError``; a GPU failure ``GpuError``.
"""

from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from . import _gmcl
from ._gmcl import EngineUnavailableError, GpuError

__version__: str = _gmcl.__version__

__all__ = [
    "Clustering",
    "Distance",
    "EngineUnavailableError",
    "GpuError",
    "cluster",
    "dist",
    "generate",
    "load",
    "save",
    "spgemm",
    "tricount",
]

_INT32_MAX = 2**31 - 1
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def _count(name: str, value: Any, top: int) -> Any:
    """``value``, an integer option from 0 to ``top`` (or None), as an ``int``: a ValueError
    naming the option when it is out of that range, a TypeError when it is no integer (the
    extension would name a field of its own instead)."""
    if value is None:
        return None
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not 0 <= v <= top:
        raise ValueError(f"{name} = {v} is out of range (0 to {top})")
    return v


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def _is_networkx(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "networkx"


def _networkx_adjacency(g: Any) -> Tuple[Any, list]:
    import networkx as nx

    nodes = list(g)
    return nx.to_scipy_sparse_array(g, nodelist=nodes, weight="weight", format="csr"), nodes


def _parts(a: Any, dtype: Any, name: str = "A") -> tuple:
    """(nrows, ncols, indptr, indices, data) of a sparse matrix in the layout the library takes:
    CSR with sorted, distinct columns in each row, ``uint64`` offsets, ``uint32`` columns and
    ``dtype`` values (``None``: float32 and float64 values as they are, any other as float64).
    A canonical CSR matrix with 32-bit columns and ``dtype`` values crosses without copying its
    column indices or values; only 32-bit row offsets (one per row) are widened."""
    if isinstance(a, np.ndarray):
        a = sp.csr_array(a)
    if not sp.issparse(a):
        raise TypeError(
            f"{name} must be a SciPy sparse array or matrix, a NumPy array, a NetworkX graph or "
            f"a path, not {type(a).__name__}"
        )
    if a.ndim != 2:
        raise ValueError(f"{name} is {a.ndim}-dimensional: a matrix has 2 dimensions")
    m = a.tocsr()
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()
    nrows, ncols = m.shape
    if ncols > 2**32:
        raise ValueError(f"{name} has {ncols} columns: gmcl's column indices are 32-bit")
    if np.iscomplexobj(m.data):
        raise ValueError(f"{name} has complex values: gmcl multiplies real matrices")
    if dtype is None:
        dtype = m.data.dtype if m.data.dtype in (np.float32, np.float64) else np.float64
    indptr = np.ascontiguousarray(m.indptr, dtype=np.int64).view(np.uint64)
    indices = m.indices
    if indices.dtype == np.int32:
        # Sorted and in range in canonical form; a negative index (never in a valid matrix)
        # would become one past the columns and be refused by the library.
        indices = np.ascontiguousarray(indices).view(np.uint32)
    else:
        if indices.size and (indices.min() < 0 or indices.max() >= ncols):
            raise ValueError(f"{name} has a column index outside 0..{ncols - 1}")
        indices = indices.astype(np.uint32)
    with np.errstate(over="ignore"):
        data = np.ascontiguousarray(m.data, dtype=dtype)
    if data.dtype == np.float32 and m.data.dtype != np.float32:
        # As the command line refuses a weight that --precision f32 cannot hold: it would
        # become infinite and change the answer.
        beyond = np.flatnonzero(np.isinf(data) & np.isfinite(m.data))
        if beyond.size:
            value = float(m.data[beyond[0]])
            raise ValueError(
                f"{name}: value {value!r} does not fit the value type f32 (it would become "
                f"infinite and change the answer); use precision=\"f64\""
            )
    return (nrows, ncols, indptr, indices, data)


def _matrix(parts: tuple, like: Any = None) -> Any:
    """A SciPy CSR array (a ``csr_matrix`` when ``like`` is a ``spmatrix``) over the library's
    arrays: the values and, when they fit 32 bits as SciPy would choose, the column indices are
    the library's own memory."""
    nrows, ncols, indptr, indices, data = parts
    cls = sp.csr_matrix if isinstance(like, sp.spmatrix) else sp.csr_array
    wide = indptr[-1] > _INT32_MAX or max(nrows, ncols) > _INT32_MAX
    if wide:
        # 64-bit indices, widened by the extension already (in parallel). SciPy's constructor
        # would scan them to see whether 32 bits would do (their count alone says no): they are
        # set on an empty matrix of the shape instead, and checked as the constructor checks
        # them short of that scan.
        m = cls((nrows, ncols), dtype=data.dtype)
        m.indptr = indptr.view(np.int64)
        m.indices = indices.astype(np.int64, copy=False)
        m.data = data
        m.check_format(full_check=False)
        return m
    indptr = indptr.astype(np.int32)
    indices = indices.view(np.int32)
    return cls((data, indices, indptr), shape=(nrows, ncols), copy=False)


def _input(g: Any, dtype: Any) -> Tuple[tuple, Optional[list]]:
    """A graph argument's CSR parts and its vertices' names (NetworkX nodes; None otherwise)."""
    if _is_networkx(g):
        a, nodes = _networkx_adjacency(g)
        return _parts(a, dtype, "G"), nodes
    return _parts(g, dtype, "G"), None


def load(path: Union[str, os.PathLike], format: Optional[str] = None, *, labels: bool = False) -> Any:
    """Reads a graph or matrix file, in any format ``gmcl`` reads (.el, .wel, .txt/.snap, .mtx,
    .abc, .npz; ``format`` overrides the extension; a name ending in ``.gz``, such as
    ``g.el.gz``, is gzip-compressed text of the format the name before ``.gz`` says), as the CSR
    array of its entries (float64, repeated entries summed, a symmetric .mtx file's mirror
    entries included).

    With ``labels=True``, returns ``(A, names)``: ``names[i]`` is vertex ``i``'s name in the file
    (SNAP ids, .abc labels, .mtx's 1-based indices), or ``None`` when vertex ``i`` is ``i``
    (.el, .wel, .npz)."""
    parts, names, _ = _gmcl.load(os.fspath(path), format)
    a = _matrix(parts)
    return (a, names) if labels else a


def _operand(x: Any, f32: bool) -> Tuple[Any, Optional[str]]:
    """An operand of ``spgemm`` and, for a path, the format it was read as: the file read as
    ``load`` reads it, with the command line's check of ``--precision f32`` when ``f32``."""
    if not _is_path(x):
        return x, None
    parts, _names, read_as = _gmcl.load(os.fspath(x), None, f32)
    return _matrix(parts), read_as


def save(path: Union[str, os.PathLike], A: Any) -> None:
    """Writes ``A`` (a sparse matrix or NetworkX graph) in the format ``path``'s extension names:
    .mtx (Matrix Market), .wel (``u v w`` lines), .npz (SciPy's ``save_npz`` layout, CSR), or .el
    (when every value is 1). An .npz archive keeps float32 values float32, as ``save_npz`` does;
    other values are written as float64. The file appears whole or not at all."""
    if _is_networkx(A):
        A, _ = _networkx_adjacency(A)
    path = os.fspath(path)
    # Text holds float32 values exactly as float64 ones; only the archive has a value type.
    npz = os.fsdecode(path).lower().endswith(".npz")
    _gmcl.save(path, _parts(A, None if npz else np.float64))


def generate(
    scale: Optional[int] = None,
    edge_factor: Optional[int] = None,
    *,
    vertices: Optional[int] = None,
    edges: Optional[int] = None,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 1,
    undirected: bool = False,
    no_duplicates: bool = False,
    no_self_loops: bool = False,
    weights: bool = False,
) -> Any:
    """An R-MAT graph, the edges ``gmcl generate`` writes for the same options, as its adjacency
    matrix (float64 CSR; a repeated edge's entry is the sum of its weights, or its count).
    ``2**scale`` (or ``vertices``) vertices and ``edge_factor`` times as many (or ``edges``)
    edges. An undirected graph's matrix is symmetric (a self loop appears once)."""
    parts = _gmcl.generate_rmat(
        dict(
            scale=_count("scale", scale, _U32_MAX),
            vertices=_count("vertices", vertices, _U64_MAX),
            edges=_count("edges", edges, _U64_MAX),
            edge_factor=_count("edge_factor", edge_factor, _U64_MAX),
            a=a,
            b=b,
            c=c,
            seed=_count("seed", seed, _U64_MAX),
            undirected=undirected,
            no_duplicates=no_duplicates,
            no_self_loops=no_self_loops,
            weights=weights,
        )
    )
    return _matrix(parts)


def _precision_dtype(precision: Optional[str], *mats: Any) -> Any:
    if precision is None:
        dtypes = [getattr(m, "dtype", None) for m in mats if m is not None]
        return np.float32 if dtypes and all(d == np.float32 for d in dtypes) else np.float64
    if precision == "f32":
        return np.float32
    if precision == "f64":
        return np.float64
    raise ValueError(f"unknown precision '{precision}': expected f32 or f64")


def spgemm(
    A: Any,
    B: Any = None,
    engine: str = "auto",
    precision: Optional[str] = None,
    mask: Any = None,
) -> Any:
    """``C = A @ B`` (``A @ A`` when ``B`` is None) as a CSR array, on ``engine``. ``precision``
    is ``"f32"`` or ``"f64"`` (default: ``"f32"`` when the operands are float32, else
    ``"f64"``). With ``mask``, C keeps only the positions the mask stores (its values do not
    matter). A path is loaded as ``load`` reads it. As on the command line, A and B given as two
    files are refused when either is numbered by labels or SNAP ids (each file numbers its
    own), and with ``"f32"`` a value that float32 cannot hold is a ``ValueError``, not an
    infinity."""
    f32 = precision == "f32"
    A, a_format = _operand(A, f32)
    B, b_format = _operand(B, f32)
    if a_format and b_format and {a_format, b_format} & {"snap", "abc"}:
        raise ValueError(_gmcl.TWO_NUMBERINGS)  # the command line's refusal
    mask = load(mask) if _is_path(mask) else mask
    if _is_networkx(mask):
        mask, _ = _networkx_adjacency(mask)
    if _is_networkx(A):
        A, _ = _networkx_adjacency(A)
    if _is_networkx(B):
        B, _ = _networkx_adjacency(B)
    dtype = _precision_dtype(precision, A, B)
    pa = _parts(A, dtype, "A")
    pb = None if B is None else _parts(B, dtype, "B")
    pm = None if mask is None else _parts(mask, np.float64, "mask")
    parts, _engine, _seconds = _gmcl.spgemm(pa, pb, engine, pm)
    return _matrix(parts, like=A)


@dataclass(frozen=True)
class Clustering:
    """A clustering made by ``cluster``.

    ``labels[v]`` is vertex ``v``'s cluster: an index into ``clusters`` (MCL's clusters in the
    command line's order, largest first, each an array of vertex indices), or, for a vertex
    without edges (which MCL never sees), a cluster of its own numbered after them. ``nodes``
    names the vertices (NetworkX nodes, or the file's labels; None when vertex ``v`` is ``v``).
    The measures are ``clm info``'s."""

    labels: np.ndarray
    clusters: List[np.ndarray]
    nodes: Optional[list]
    iterations: int
    converged: bool
    engine: str
    seconds: float
    singletons: int
    largest: int
    smallest: int
    area_fraction: float
    efficiency: float
    modularity: float
    mass_fraction: float

    def __len__(self) -> int:
        """The number of clusters MCL made."""
        return len(self.clusters)


def _clustering(r: dict, nodes: Optional[list]) -> Clustering:
    n = r["vertices"]
    clusters = r["clusters"]
    labels = np.full(n, -1, dtype=np.int64)
    # With overlap="keep" a vertex is in several clusters: its label is the first.
    for k in range(len(clusters) - 1, -1, -1):
        labels[clusters[k]] = k
    alone = np.flatnonzero(labels < 0)
    labels[alone] = len(clusters) + np.arange(alone.size)
    return Clustering(
        labels=labels,
        clusters=clusters,
        nodes=nodes,
        iterations=r["iterations"],
        converged=r["converged"],
        engine=r["engine"],
        seconds=r["seconds"],
        singletons=r["singletons"],
        largest=r["largest"],
        smallest=r["smallest"],
        area_fraction=r["area_fraction"],
        efficiency=r["efficiency"],
        modularity=r["modularity"],
        mass_fraction=r["mass_fraction"],
    )


def cluster(
    G: Any,
    inflation: float = 2.0,
    scheme: int = 6,
    *,
    loop_gain: float = 1.0,
    prune: Optional[int] = None,
    select: Optional[int] = None,
    recover: Optional[int] = None,
    pct: Optional[int] = None,
    max_iterations: int = 10000,
    overlap: str = "cut",
    engine: str = "auto",
    precision: str = "f32",
    format: Optional[str] = None,
) -> Clustering:
    """Markov clustering, as ``gmcl cluster`` (mcl 22-282): the graph made symmetric (the larger
    weight of ``(u, v)`` and ``(v, u)`` kept), self loops dropped; ``inflation`` (mcl's -I),
    ``scheme`` (1..7) and ``prune``/``select``/``recover``/``pct`` (-P -S -R -pct),
    ``loop_gain`` (-c), ``max_iterations`` (-L), ``overlap`` ("cut", "keep", "split"),
    ``precision`` ("f32", as mcl, or "f64"). A path is clustered exactly as the command line
    clusters the file, so the clusters are the command line's."""
    options = dict(
        inflation=inflation,
        loop_gain=loop_gain,
        scheme=_count("scheme", scheme, _U32_MAX),
        prune=_count("prune", prune, _U32_MAX),
        select=_count("select", select, _U32_MAX),
        recover=_count("recover", recover, _U32_MAX),
        pct=_count("pct", pct, _U32_MAX),
        max_iterations=_count("max_iterations", max_iterations, _U64_MAX),
        overlap=overlap,
        engine=engine,
        precision=precision,
    )
    if _is_path(G):
        r = _gmcl.cluster_file(os.fspath(G), format, options)
        return _clustering(r, r["labels"])
    parts, nodes = _input(G, np.float64)
    try:
        r = _gmcl.cluster_matrix(parts, options)
    except ValueError as e:
        raise _named_edge(e, nodes) from None
    return _clustering(r, nodes)


def _named_edge(e: ValueError, nodes: Optional[list]) -> ValueError:
    """``e``, whose message names an edge ``(i, j)`` by its vertices' positions, naming them by
    the graph's nodes instead (NetworkX input: ``nodes``)."""
    m = re.match(r"edge \((\d+), (\d+)\)(.*)", str(e), re.DOTALL)
    if nodes is None or m is None:
        return e
    i, j = int(m.group(1)), int(m.group(2))
    return ValueError(f"edge ({nodes[i]!r}, {nodes[j]!r}){m.group(3)}")


def tricount(
    G: Any, per_vertex: bool = False, engine: str = "auto", format: Optional[str] = None
) -> Union[int, np.ndarray]:
    """The triangles of the undirected simple graph of ``G`` (directions, self loops, repeated
    edges and weights ignored), as ``gmcl tricount``: their number, or with ``per_vertex=True``
    the number through each vertex (a uint64 array in vertex order: NetworkX's node order, the
    file's vertex order)."""
    if _is_path(G):
        (count, each, _engine, _seconds), _names = _gmcl.tricount_file(
            os.fspath(G), format, per_vertex, engine
        )
    else:
        # The values are not read: float32 or float64 ones cross as they are.
        parts, _nodes = _input(G, None)
        count, each, _engine, _seconds = _gmcl.tricount_matrix(parts, per_vertex, engine)
    return each if per_vertex else int(count)


@dataclass(frozen=True)
class Distance:
    """``clm dist``'s distances between two clusterings ``a`` and ``b`` of the same vertices:
    split/join (``split_join = split_join_a + split_join_b``), variation of information in nats
    (``vi_a + vi_b``) and the adjusted Rand index (1 for identical partitions)."""

    nodes: int
    clusters_a: int
    clusters_b: int
    split_join: int
    split_join_a: int
    split_join_b: int
    variation_of_information: float
    vi_a: float
    vi_b: float
    adjusted_rand: float


def _labels(x: Any, name: str) -> np.ndarray:
    if isinstance(x, Clustering):
        return x.labels
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(
            f"clustering {name} must be a Clustering, one label per vertex, or a file"
        )
    if arr.dtype.kind in "iub":
        return np.ascontiguousarray(arr, dtype=np.int64)
    _, inverse = np.unique(arr, return_inverse=True)
    return inverse.astype(np.int64).ravel()


def dist(a: Any, b: Any) -> Distance:
    """``clm dist``'s distances between two clusterings of the same vertices, each a
    ``Clustering``, a sequence of one label per vertex (any hashable labels), or (both) a path
    to a clustering file (one cluster per line, labels separated by TABs, as ``gmcl cluster``
    writes; the files' labels are matched by name, as ``gmcl dist`` does)."""
    if _is_path(a) and _is_path(b):
        return Distance(**_gmcl.dist_files(os.fspath(a), os.fspath(b)))
    if _is_path(a) or _is_path(b):
        raise ValueError("give both clusterings as files, or neither")
    return Distance(**_gmcl.dist_labels(_labels(a, "a"), _labels(b, "b")))
