# %% [markdown]
# # Clustering Zachary's karate club with gmcl
#
# A notebook-style script (the `# %%` cells open as a notebook in Jupyter, VS Code or
# jupytext): load a graph, cluster it with MCL, compare the clusters with the club's two
# factions, and look at the cluster sizes. Run it from the repository's root after
# `pip install ./python`:
#
#     python examples/python/karate.py

# %%
import pathlib

import numpy as np

import gmcl

graphs = pathlib.Path(__file__).resolve().parents[2] / "graphs"

# %% [markdown]
# ## Load the graph
# `gmcl.load` reads any format the command line reads; the result is a SciPy CSR array.

# %%
A = gmcl.load(graphs / "karate.el")
print(f"{A.shape[0]} members, {A.nnz} friendships, {gmcl.tricount(A)} triangles")

# %% [markdown]
# ## Cluster it
# Inflation 2 (mcl's default) and a finer clustering at inflation 3.

# %%
coarse = gmcl.cluster(A, inflation=2.0)
fine = gmcl.cluster(A, inflation=3.0)
for name, c in [("inflation 2", coarse), ("inflation 3", fine)]:
    print(
        f"{name}: {len(c)} clusters in {c.iterations} iterations, "
        f"modularity {c.modularity:.3f}, efficiency {c.efficiency:.3f}"
    )

# %% [markdown]
# ## Compare with the ground truth
# The club split into two factions (`graphs/karate.factions`, one faction per line).

# %%
factions = np.zeros(A.shape[0], dtype=np.int64)
for k, line in enumerate((graphs / "karate.factions").read_text().splitlines()):
    factions[[int(v) for v in line.split("\t")]] = k
for name, c in [("inflation 2", coarse), ("inflation 3", fine)]:
    d = gmcl.dist(c, factions)
    print(
        f"{name} vs factions: split/join {d.split_join}, "
        f"VI {d.variation_of_information:.3f}, adjusted Rand {d.adjusted_rand:.3f}"
    )

# %% [markdown]
# ## Cluster sizes
# A bar chart with matplotlib when it is installed, else the counts.

# %%
sizes = np.bincount(np.bincount(fine.labels))
try:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(np.arange(len(sizes)), sizes)
    ax.set_xlabel("cluster size (members)")
    ax.set_ylabel("clusters")
    ax.set_title("Karate club, MCL at inflation 3")
    fig.tight_layout()
    if plt.get_backend().lower() == "agg":
        # No display (a script on a server): the plot goes to a file.
        fig.savefig("karate-cluster-sizes.png")
        print("wrote karate-cluster-sizes.png")
    else:
        plt.show()
except ImportError:
    for size, count in enumerate(sizes):
        if count:
            print(f"{count} cluster(s) of {size} member(s)")
