"""The MILP as a :class:`MatrixForm` straight from the cost tables (no Pyomo).

:func:`build_direct` returns the same MILP as
``build_formulation(tables, "milp").matrix()`` (same column names, the same
rows up to order; ``a[u,P-1] = 1`` is folded into the row bounds as Pyomo's
compiler does), built with numpy in two steps:

- a STRUCTURE (:class:`MatrixStructure`): columns, sparsity pattern, the
  constant coefficients and row bounds. It depends only on the number of
  layers, the edges, ``pp``, the layout groups of every layer's strategy
  list, which big-M rows are skipped (an edge whose cost matrix is all zero
  has none) and the symmetric edges; :func:`structure_key` is exactly that;
- COEFFICIENTS: layer times ``A``, syncs ``G``, memory ``(W + inflight·H)``
  and capacity, the layout-pair resharding/cross matrices and their big-M,
  ``c - 1`` in the objective and the constant overhead.

A :class:`DirectBuilder` caches structures by key, so outer configurations
that share ``pp`` and the strategy layout (different micro-batch counts or
schedules) only refill coefficient arrays: the rebuild-free path of the
outer search. :class:`DirectFormulation` decodes a raw solution vector into
a :class:`~autopar_opt.plan.Plan` and builds warm-start vectors.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.direct_rows import MatrixStructure, StructureKey, build_structure
from autopar_opt.formulations.families import sort_symmetric_runs, symmetry_cuts
from autopar_opt.formulations.formulation import (FormulationError, check_tables, price_assignment,
                                                   start_assignment)
from autopar_opt.hardware import GIB
from autopar_opt.plan import Plan
from autopar_opt.strategies import layout_ids
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.assignment import Assignment
from autopar_opt.core.result import ProblemClass, SolveResult


def _collapse(mat: np.ndarray, gu: np.ndarray, gv: np.ndarray) -> np.ndarray:
    """Strategy-pair matrix -> layout-pair matrix (exactness checked)."""
    fu = np.unique(gu, return_index=True)[1]
    fv = np.unique(gv, return_index=True)[1]
    out = mat[np.ix_(fu, fv)]
    if not np.allclose(mat, out[np.ix_(gu, gv)], rtol=1e-12, atol=0.0):
        raise FormulationError("resharding cost differs between strategies of one layout")
    return out


def _edge_matrices(tables: CostTables, gid: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Layout-pair ``in``/``intra``/``inter`` matrices of every edge (memoised
    on the shared table arrays)."""
    memo: dict[tuple, np.ndarray] = {}
    out = []
    for e, (u, v) in enumerate(tables.edges):
        mats = {}
        for kind, src in (("in", tables.reshard), ("intra", tables.cross_intra),
                          ("inter", tables.cross_inter)):
            key = (id(src[e]), id(tables.strategies[u]), id(tables.strategies[v]))
            if key not in memo:
                memo[key] = _collapse(src[e], gid[u], gid[v])
            mats[kind] = memo[key]
        out.append(mats)
    return out


def structure_key(tables: CostTables, symmetry: bool) -> tuple[StructureKey, list[dict]]:
    """The structure key of ``tables`` and the layout-pair edge matrices."""
    ids: dict[int, tuple[int, ...]] = {}
    for strats in tables.strategies:
        if id(strats) not in ids:
            ids[id(strats)] = tuple(layout_ids(strats))
    gid = tuple(ids[id(s)] for s in tables.strategies)
    mats = _edge_matrices(tables, [np.asarray(g) for g in gid])
    tiers = ["intra" if f else "inter" for f in tables.boundary_intra]
    cuts = tuple((e, k, tuple(ks)) for e, k, ks in symmetry_cuts(tables)) if symmetry else ()
    key = StructureKey(n=tables.num_layers, pp=tables.pp, edges=tuple(tables.edges), gid=gid,
                       skip_reshard=tuple(bool(m["in"].max() <= 0) for m in mats),
                       skip_cross=tuple(tuple(bool(m[t].max() <= 0) for t in tiers) for m in mats),
                       sym_cuts=cuts)
    return key, mats


def _fill(struct: MatrixStructure, tables: CostTables, mats: list[dict]) -> MatrixForm:
    """The coefficient step: costs of ``tables`` into a copy of the structure."""
    C = struct.cols
    pp, K = C.pp, int(C.koff[-1])
    data, lo, hi = struct.template.copy(), struct.row_lo.copy(), struct.row_hi.copy()
    flat = {name: np.concatenate(arrs) for name, arrs in (
        ("A", tables.time), ("G", tables.sync), ("W", tables.weight_bytes), ("H", tables.act_bytes))}
    for slot, arr in (("time", flat["A"]), ("sync", flat["G"])):
        start = struct.slots[slot][1].start
        data[start:start + K * pp] = -np.repeat(arr, pp)
    rows, ents = struct.slots["memory"]
    inflight = np.asarray(tables.inflight, dtype=float)
    data[ents] = ((flat["W"][:, None] + inflight[None, :] * flat["H"][:, None]) / GIB).ravel()
    hi[rows] = float(tables.capacity_bytes) / GIB
    _fill_attribution(struct, tables, mats, data, lo)
    vals = data[struct.order]
    keep = vals != 0
    nrows, ncols = struct.shape
    indptr = np.concatenate([[0], np.cumsum(np.bincount(struct.csr_rows[keep], minlength=nrows))])
    A = sp.csr_array((vals[keep], struct.csr_cols[keep], indptr), shape=(nrows, ncols))
    c = np.zeros(ncols)
    c[C.p0:C.bottleneck] = 1.0                       # p and o
    c[C.bottleneck] = tables.microbatches - 1
    c[C.sync_max] = 1.0
    return MatrixForm(c=c, A=A, row_lo=lo, row_hi=hi, col_lo=struct.col_lo.copy(),
                      col_hi=_stage_device_bounds(struct, tables), integrality=struct.integrality.copy(),
                      offset=float(tables.params.iteration_overhead_s),
                      columns=struct.columns, row_names=struct.row_names)


def _stage_device_bounds(struct: MatrixStructure, tables: CostTables) -> np.ndarray:
    """Column upper bounds; with free stage sizes ``w[u,i,k] <= 0`` for every strategy
    ``k`` whose device count differs from stage ``i``'s. Exact: ``Σ_i w[u,i,k] = s[u,k]``
    and ``Σ_k w[u,i,k] = x[u,i]`` with ``w >= 0`` make ``x[u,i] = 1`` put the chosen
    strategy's ``w`` in stage ``i`` (the Pyomo forms state it as ``x + s <= 1``:
    :func:`~autopar_opt.formulations.families.add_stage_device_constraints`)."""
    hi = struct.col_hi.copy()
    C = struct.cols
    for i in range(C.pp):
        allowed = tables.allowed_in_stage(i)
        if allowed is None:
            break
        hi[[C.w(int(j), i) for j in np.flatnonzero(~np.concatenate(allowed))]] = 0.0
    return hi


def _fill_attribution(struct: MatrixStructure, tables: CostTables, mats: list[dict],
                      data: np.ndarray, lo: np.ndarray) -> None:
    """Big-M rows: ``r - R·el - M·y >= -M`` and ``q - R'·el - M·(a_u - a_v) >= -M``
    with ``M`` the matrix maximum (entry order of ``direct_rows._attribution_rows``)."""
    inp, pp = struct.key, struct.cols.pp
    if "reshard" in struct.slots:
        blocks, bigs = [], []
        for e in range(len(inp.edges)):
            if not inp.skip_reshard[e]:
                mat = mats[e]["in"]
                big = float(mat.max())
                blocks.append(np.tile(np.concatenate([[1.0], -mat.ravel(), [-big]]), pp))
                bigs.append(np.full(pp, -big))
        rows, ents = struct.slots["reshard"]
        data[ents], lo[rows] = np.concatenate(blocks), np.concatenate(bigs)
    if "cross" in struct.slots:
        blocks, bigs = [], []
        tiers = ["intra" if f else "inter" for f in tables.boundary_intra]
        for e in range(len(inp.edges)):
            for b in range(pp - 1):
                if not inp.skip_cross[e][b]:
                    mat = mats[e][tiers[b]]
                    big = float(mat.max())
                    blocks.append(np.concatenate([[1.0], -mat.ravel(), [-big, big]]))
                    bigs.append(-big)
        rows, ents = struct.slots["cross"]
        data[ents], lo[rows] = np.concatenate(blocks), np.asarray(bigs)


@dataclass
class DirectFormulation:
    """The direct MILP of one configuration: matrix, decoding, warm starts."""

    tables: CostTables
    structure: MatrixStructure
    matrix: MatrixForm
    symmetry: bool = True
    cached: bool = False                 # the structure came from the cache
    problem_class: ProblemClass = ProblemClass.milp

    @property
    def model(self) -> MatrixForm:
        """What the backend solves (the formulation interface)."""
        return self.matrix

    @property
    def build_s(self) -> float:
        """Seconds to produce :attr:`matrix` (structure step included when built)."""
        return self.matrix.compile_s

    def stage_assignment(self, x: np.ndarray) -> list[int]:
        """Stage of every layer: the first ``i`` with ``a[u,i] = 1``, else ``P-1``."""
        C = self.structure.cols
        if C.pp == 1:
            return [0] * C.n
        a = np.asarray(x[C.a(0, 0):C.a(C.n, 0)]).reshape(C.n, C.pp - 1) > 0.5
        return [int(np.argmax(row)) if row.any() else C.pp - 1 for row in a]

    def strategy_choice(self, x: np.ndarray) -> list[int]:
        """Strategy of every layer: the largest ``s[u,k]``."""
        C = self.structure.cols
        s = np.asarray(x[C.s(0, 0):C.s(C.n, 0)])
        return [int(np.argmax(s[C.koff[u]:C.koff[u + 1]])) for u in range(C.n)]

    def assignment(self, x: np.ndarray) -> Assignment:
        """The :class:`Assignment` of a raw column vector of :attr:`matrix`."""
        if x is None or len(x) != self.matrix.num_cols:
            raise FormulationError("no solution vector of this matrix to decode")
        return Assignment(self.stage_assignment(x), self.strategy_choice(x))

    def invert(self, result: SolveResult) -> Assignment | None:
        """The backend's raw vector as the typed :class:`Assignment`; ``None`` without one."""
        return self.assignment(result.solution) if result.has_solution else None

    def decode_values(self, x: np.ndarray) -> Plan:
        """The plan of a raw column vector (:meth:`CostTables.plan_of`)."""
        return self.tables.plan_of(self.assignment(x))

    def assignment_vector(self, stage: list[int], ks: list[int]) -> np.ndarray:
        """Every column from a stage/strategy assignment, consistently (the
        values of :func:`~autopar_opt.formulations.formulation.set_assignment_values`)."""
        C, t = self.structure.cols, self.tables
        pp, x = C.pp, np.zeros(self.matrix.num_cols)
        st, kk = np.asarray(stage), np.asarray(ks)
        j = C.koff[:-1] + kk
        for i in range(pp - 1):
            x[C.a(np.arange(C.n), i)] = st <= i
        x[C.s(0, j)] = 1.0
        x[C.w(j, st)] = 1.0
        p, o, g, rin, rx = price_assignment(t, list(stage), list(ks))
        gid = self.structure.key.gid
        for e, (u, v) in enumerate(t.edges):
            nv = int(C.nl[v])
            x[C.el(e, gid[u][ks[u]], gid[v][ks[v]], nv)] = 1.0
            if stage[u] == stage[v]:
                x[C.y(e, stage[u])] = 1.0
                x[C.r(e, stage[u])] = rin[e]
            for b in range(stage[u], stage[v]):
                x[C.q(e, b)] = rx[e]["intra" if t.boundary_intra[b] else "inter"]
        x[C.p0:C.p0 + pp] = p
        x[C.o0:C.o0 + pp - 1] = o
        x[C.g(0):C.g(pp)] = g
        x[C.bottleneck] = max(p + o)
        x[C.sync_max] = max(g)
        return x

    def start_vector(self, start: Plan | Assignment) -> np.ndarray:
        """The warm-start vector of a plan or assignment (sorted into the symmetry
        cuts' order when they are on: same cost, see ``add_symmetry_constraints``)."""
        asg = start_assignment(self.tables, start)
        stage, ks = asg.stage, asg.choice
        if self.symmetry:
            ks = sort_symmetric_runs(self.tables, stage, ks)
        return self.assignment_vector(stage, ks)

    def set_warm_start(self, start: Plan | Assignment) -> None:
        """Attach ``start`` as :attr:`MatrixForm.start` (HiGHS ``setSolution``)."""
        self.matrix.start = self.start_vector(start)


class DirectBuilder:
    """Builds :class:`DirectFormulation` objects, caching structures by key
    (least recently used first out)."""

    def __init__(self, symmetry: bool = True, max_structures: int = 32) -> None:
        self.symmetry = symmetry
        self.max_structures = max_structures
        self._cache: OrderedDict[StructureKey, MatrixStructure] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def build(self, tables: CostTables) -> DirectFormulation:
        """The direct MILP of ``tables``; FormulationError as ``build_formulation``."""
        check_tables(tables)
        start = time.perf_counter()
        key, mats = structure_key(tables, self.symmetry)
        struct = self._cache.get(key)
        cached = struct is not None
        if struct is None:
            self.misses += 1
            struct = build_structure(key)
            self._cache[key] = struct
            while len(self._cache) > self.max_structures:
                self._cache.popitem(last=False)
        else:
            self.hits += 1
            self._cache.move_to_end(key)
        matrix = _fill(struct, tables, mats)
        matrix.compile_s = time.perf_counter() - start
        return DirectFormulation(tables, struct, matrix, symmetry=self.symmetry, cached=cached)


def build_direct(tables: CostTables, symmetry: bool = True) -> DirectFormulation:
    """The direct MILP of ``tables`` without a cache (see :class:`DirectBuilder`)."""
    return DirectBuilder(symmetry, max_structures=1).build(tables)
