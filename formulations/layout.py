"""Columns of the formulation and what its structure depends on (docs/DESIGN.md §3).

Notation (per outer configuration ``(pp, c, schedule)``): layers ``u`` in
topological order, stages ``i = 0..P-1``, boundaries ``b = 0..P-2`` (between
stage ``b`` and ``b+1``), edges ``e = (u, v)`` with ``u < v``, strategies ``k``
of layer ``u``; ``j = koff[u] + k`` is the flat strategy index.

:class:`ColumnLayout` places the variable blocks of one form in one column
order (the MILP: ``p, o, bottleneck, sync_max, a, s, y, w, el, r, q, g, work``; the
MIQP: ``p, o, bottleneck, sync_max, a, s, y, g, rho, rho_x, work``; ``work[i]`` is
stage ``i``'s working set in GiB, the epigraph of ``max_u X`` over its layers) and names every
column as Pyomo does (``a[3,1]``). ``a[u,P-1] = 1`` is no column: every
family folds it into its row bounds, and the Pyomo model holds it as a fixed
variable. A new variable block is an entry in :data:`BLOCKS` and :data:`DIMS`,
its size and Pyomo index in :class:`ColumnLayout`, and an index method.
Every block and row name is stable: the outer search, warm starts and the
exported MPS/LP files rely on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INF = np.inf

#: Variable blocks of each form, in column order.
BLOCKS: dict[str, tuple[str, ...]] = {
    "milp": ("p", "o", "bottleneck", "sync_max", "a", "s", "y", "w", "el", "r", "q", "g", "work",
             "uni"),
    "miqp": ("p", "o", "bottleneck", "sync_max", "a", "s", "y", "g", "rho", "rho_x", "work", "uni"),
}
#: Blocks whose columns are binary; ``y`` lies in [0, 1]; every other block is >= 0.
BINARY = frozenset({"a", "s", "uni"})
#: Index dimension of every block (0: a scalar), as :meth:`ColumnLayout.index` spells it.
DIMS: dict[str, int] = {"p": 1, "o": 1, "bottleneck": 0, "sync_max": 0, "a": 2, "s": 2, "y": 2,
                        "w": 3, "el": 3, "r": 2, "q": 2, "g": 1, "rho": 1, "rho_x": 2, "work": 1,
                        "uni": 2}


@dataclass(frozen=True)
class StructureKey:
    """Everything the structure of a formulation depends on (hashable: the cache key)."""

    n: int
    pp: int
    edges: tuple[tuple[int, int], ...]
    gid: tuple[tuple[int, ...], ...]          # layout group of each strategy, per layer
    skip_reshard: tuple[bool, ...]            # per edge: all-zero R, no big-M rows
    skip_cross: tuple[tuple[bool, ...], ...]  # per edge and boundary
    sym_cuts: tuple[tuple[int, int, tuple[int, ...]], ...]
    tiers: tuple[str, ...] = ()               # link tier ("intra"/"inter") of each boundary
    form: str = "milp"
    #: (u, i, k): strategy k of layer u may not run in stage i (free stage sizes)
    forbid: tuple[tuple[int, int, int], ...] = ()
    #: a target's uniform keys: per layer, per strategy, one value per dimension
    #: (-1: any; :mod:`autopar_opt.ir.target`); empty: the free space
    uniform: tuple[tuple[tuple[int, ...], ...], ...] = ()
    #: the stage of every layer when the target fixes the split; empty: free split
    fixed: tuple[int, ...] = ()


class ColumnLayout:
    """Column offsets and names of the blocks of one form (see module doc).

    The index methods take scalars or numpy arrays (vectorised row building).
    """

    def __init__(self, key: StructureKey) -> None:
        self.n, self.pp, self.form = key.n, key.pp, key.form
        nk = np.array([len(g) for g in key.gid], dtype=np.int64)
        self.koff = np.concatenate([[0], np.cumsum(nk)])
        self.nl = np.array([max(g) + 1 if g else 0 for g in key.gid], dtype=np.int64)
        el_sizes = [int(self.nl[u] * self.nl[v]) for u, v in key.edges]
        self.eloff = np.concatenate([[0], np.cumsum(el_sizes, dtype=np.int64)])
        self.edges = key.edges
        self.num_edges = len(key.edges)
        self.tier_names = tuple(sorted(set(key.tiers)))
        #: the (dimension, value) pairs of the uniform-choice columns ``uni[d,v]``
        self.uni_index = uniform_values(key.uniform)
        self.uni_pos = {p: j for j, p in enumerate(self.uni_index)}
        n, pp, E, K = self.n, self.pp, self.num_edges, int(self.koff[-1])
        sizes = {"p": pp, "o": pp - 1, "bottleneck": 1, "sync_max": 1, "a": n * (pp - 1), "s": K,
                 "y": E * pp, "w": K * pp, "el": int(self.eloff[-1]), "r": E * pp,
                 "q": E * (pp - 1), "g": pp, "rho": E, "rho_x": E * len(self.tier_names),
                 "work": pp, "uni": len(self.uni_index)}
        self.off: dict[str, int] = {}
        start = 0
        for name in BLOCKS[key.form]:
            self.off[name] = start
            start += sizes[name]
        self.sizes = {name: sizes[name] for name in BLOCKS[key.form]}
        self.num_cols = start

    def block(self, name: str) -> slice:
        """The columns of block ``name``."""
        return slice(self.off[name], self.off[name] + self.sizes[name])

    def p(self, i):
        return self.off["p"] + i

    def o(self, b):
        return self.off["o"] + b

    @property
    def bottleneck(self) -> int:
        return self.off["bottleneck"]

    @property
    def sync_max(self) -> int:
        return self.off["sync_max"]

    def a(self, u, i):
        """``a[u,i]`` for ``i < P-1`` (``a[u,P-1] = 1`` is folded)."""
        return self.off["a"] + u * (self.pp - 1) + i

    def s(self, u, k):
        return self.off["s"] + self.koff[u] + k

    def y(self, e, i):
        return self.off["y"] + e * self.pp + i

    def w(self, j, i):
        """``w[u,i,k]`` with ``j = koff[u] + k`` (the flat strategy index)."""
        return self.off["w"] + j * self.pp + i

    def el(self, e, a, b, nlv):
        return self.off["el"] + self.eloff[e] + a * nlv + b

    def r(self, e, i):
        return self.off["r"] + e * self.pp + i

    def q(self, e, b):
        return self.off["q"] + e * (self.pp - 1) + b

    def g(self, i):
        return self.off["g"] + i

    def work(self, i):
        """``work[i]``: stage ``i``'s working set (GiB), ``>= X[u,k]`` of its layers."""
        return self.off["work"] + i

    def uni(self, pair: tuple[int, int]) -> int:
        """``uni[d,v]``: the model takes value ``v`` in uniform dimension ``d``."""
        return self.off["uni"] + self.uni_pos[pair]

    def rho(self, e):
        return self.off["rho"] + e

    def rho_x(self, e, t: int):
        """``rho_x[e, tier_names[t]]``."""
        return self.off["rho_x"] + e * len(self.tier_names) + t

    def index(self, name: str) -> list[tuple]:
        """The Pyomo index of every column of block ``name``, in column order
        (``[()]`` for a scalar block)."""
        n, pp, E = self.n, self.pp, self.num_edges
        nk = np.diff(self.koff)
        return {
            "p": lambda: [(i,) for i in range(pp)],
            "o": lambda: [(b,) for b in range(pp - 1)],
            "bottleneck": lambda: [()],
            "sync_max": lambda: [()],
            "a": lambda: [(u, i) for u in range(n) for i in range(pp - 1)],
            "s": lambda: [(u, k) for u in range(n) for k in range(nk[u])],
            "y": lambda: [(e, i) for e in range(E) for i in range(pp)],
            "w": lambda: [(u, i, k) for u in range(n) for k in range(nk[u]) for i in range(pp)],
            "el": lambda: [(e, a, b) for e, (u, v) in enumerate(self.edges)
                           for a in range(self.nl[u]) for b in range(self.nl[v])],
            "r": lambda: [(e, i) for e in range(E) for i in range(pp)],
            "q": lambda: [(e, b) for e in range(E) for b in range(pp - 1)],
            "g": lambda: [(i,) for i in range(pp)],
            "rho": lambda: [(e,) for e in range(E)],
            "rho_x": lambda: [(e, t) for e in range(E) for t in self.tier_names],
            "work": lambda: [(i,) for i in range(pp)],
            "uni": lambda: [(d, v) for d, v in self.uni_index],
        }[name]()

    def names(self) -> list[str]:
        """Column names in column order (Pyomo's ``var.name`` spelling)."""
        return [index_name(name, ix) for name in self.sizes for ix in self.index(name)]

    def bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Column lower and upper bounds and integrality (see :data:`BINARY`)."""
        lo, hi = np.zeros(self.num_cols), np.full(self.num_cols, INF)
        integ = np.zeros(self.num_cols, dtype=bool)
        for name in BINARY | {"y"}:
            hi[self.block(name)] = 1.0
        for name in BINARY:
            integ[self.block(name)] = True
        return lo, hi, integ


def uniform_values(uniform: tuple) -> list[tuple[int, int]]:
    """Every (dimension, value) that some strategy of some layer states, sorted."""
    pairs = {(d, v) for layer in uniform for key in layer for d, v in enumerate(key) if v >= 0}
    return sorted(pairs)


def index_name(component: str, index: tuple) -> str:
    """``component[i,j]`` (Pyomo's spelling; the bare name for a scalar)."""
    if len(index) == 1:
        return f"{component}[{index[0]}]"
    if len(index) == 2:
        return f"{component}[{index[0]},{index[1]}]"
    return f"{component}[{','.join(map(str, index))}]" if index else component
