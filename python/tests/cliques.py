"""Inputs whose work grows faster than their size, for the tests of long calls."""

import numpy as np
import scipy.sparse as sp


def clique(n, loops):
    """Every pair of ``n`` vertices (with ``loops``, every (i, j)): products and triangles that
    take n**3 steps, from n**2 entries built at once."""
    indices = np.tile(np.arange(n, dtype=np.int32), n)
    if not loops:
        indices = np.delete(indices, np.arange(n) * (n + 1))
    indptr = np.arange(n + 1, dtype=np.int64) * (n if loops else n - 1)
    data = np.ones(indices.size, dtype=np.float32)
    return sp.csr_array((data, indices, indptr), shape=(n, n))
