"""Type stubs of gmcl: see the module's docstrings (help(gmcl.cluster), ...)."""

import os
from dataclasses import dataclass
from typing import Any, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

Path = Union[str, os.PathLike[str]]
# A SciPy sparse array or matrix (any format and dtype), a 2-D NumPy array, a NetworkX graph,
# or a path to a graph file.
Graph = Any
Engine = Literal["auto", "cpu", "gpu"]

class GpuError(RuntimeError):
    """The GPU failed during a run (the command line's exit status 4)."""

class EngineUnavailableError(RuntimeError):
    """The engine asked for cannot run here (the command line's exit status 3)."""

@overload
def load(path: Path, format: Optional[str] = ..., *, labels: Literal[False] = ...) -> Any: ...
@overload
def load(
    path: Path, format: Optional[str] = ..., *, labels: Literal[True]
) -> Tuple[Any, Optional[List[str]]]: ...
def save(path: Path, A: Graph) -> None: ...
def generate(
    scale: Optional[int] = ...,
    edge_factor: Optional[int] = ...,
    *,
    vertices: Optional[int] = ...,
    edges: Optional[int] = ...,
    a: float = ...,
    b: float = ...,
    c: float = ...,
    seed: int = ...,
    undirected: bool = ...,
    no_duplicates: bool = ...,
    no_self_loops: bool = ...,
    weights: bool = ...,
) -> Any: ...
def spgemm(
    A: Graph,
    B: Optional[Graph] = ...,
    engine: Engine = ...,
    precision: Optional[Literal["f32", "f64"]] = ...,
    mask: Optional[Graph] = ...,
) -> Any: ...
@dataclass(frozen=True)
class Clustering:
    labels: npt.NDArray[np.int64]
    clusters: List[npt.NDArray[np.uint32]]
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
    def __len__(self) -> int: ...

def cluster(
    G: Graph,
    inflation: float = ...,
    scheme: int = ...,
    *,
    loop_gain: float = ...,
    prune: Optional[int] = ...,
    select: Optional[int] = ...,
    recover: Optional[int] = ...,
    pct: Optional[int] = ...,
    max_iterations: int = ...,
    overlap: Literal["cut", "keep", "split"] = ...,
    engine: Engine = ...,
    precision: Literal["f32", "f64"] = ...,
    format: Optional[str] = ...,
) -> Clustering: ...
@overload
def tricount(
    G: Graph, per_vertex: Literal[False] = ..., engine: Engine = ..., format: Optional[str] = ...
) -> int: ...
@overload
def tricount(
    G: Graph, per_vertex: Literal[True], engine: Engine = ..., format: Optional[str] = ...
) -> npt.NDArray[np.uint64]: ...
@dataclass(frozen=True)
class Distance:
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

def dist(
    a: Union[Clustering, Sequence[Any], npt.ArrayLike, Path],
    b: Union[Clustering, Sequence[Any], npt.ArrayLike, Path],
) -> Distance: ...
