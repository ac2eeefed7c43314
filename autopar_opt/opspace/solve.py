"""Solve operator-level sharding exactly: every logical mesh, DP or MILP, with a certificate.

For every logical mesh shape of the devices (:func:`~autopar_opt.ir.mesh.logical_meshes`;
one 1-D mesh under the ``pase`` rule) the tables are built and solved:

* ``dp`` — PaSE's DP as variable elimination (:func:`eliminate`, which only calls
  :func:`autopar_opt.solvers.dp.elimination.solve_min_sum`: its min-weight/min-fill
  order, unchanged). If the optimum it returns fits the memory it is the constrained
  optimum too; otherwise the Pareto-label elimination under the memory knapsack
  (:mod:`autopar_opt.solvers.dp.pareto_elimination`) solves it exactly, or — past its
  label limit — the unconstrained optimum stays as a proven lower bound.
* before either DP, where the min-weight order would build a table wider than
  :data:`REDUCE_WIDEST` (the PaSE rule's Transformer: 1.4e9 entries at 16 devices), the exact
  domain reduction of :mod:`autopar_opt.solvers.dp.min_sum_reduction` (spanning-forest
  min-marginals fix out what cannot beat its own incumbent; dominated configurations go)
  leaves a problem with the same optimum, which the DP then solves (``reduce+dp``).
* ``highs`` / ``gurobi`` / ``scip`` — the MILP with Alpa's edge variables and the memory
  row (:mod:`autopar_opt.formulations.opspace`), through the solver registry.
* ``auto`` (default) — the DP; where memory binds, its Pareto form on small tables
  (:data:`PARETO_AUTO_WIDEST`), else the MILP (HiGHS) with the DP's optimum as the
  lower bound it starts from.

The MILP is counted before it is built (:func:`~autopar_opt.formulations.opspace.matrix_size`):
past the memory budget (``--memory-limit``, default half the RAM) it is refused and the
mesh keeps the DP's or the unary bound, with the refusal in its message.

Before a mesh's edges are priced, ``Σ_v min A_v`` bounds its optimum from below; a
mesh whose bound is no better than the incumbent is skipped (``pruned``, the bound
recorded). The certificate lists every mesh: status, value, bound, time, method; the
global lower bound is the least bound over the meshes, the gap is relative to the
best plan (:func:`~autopar_opt.core.result.relative_gap`). Every plan's value is
re-priced by the independent evaluator (:func:`~autopar_opt.cost.operators.evaluate.evaluate_plan`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.core.memory_budget import MemoryBudget
from autopar_opt.core.result import relative_gap
from autopar_opt.cost.context import StageContext
from autopar_opt.ir.operators import OperatorGraph
from autopar_opt.ir.mesh import Mesh, logical_meshes
from autopar_opt.cost.operators.tables import OpTables, TableBuilder, bound_fixing, unary_bound

#: Solver names an operator-sharding solve accepts.
SOLVERS = ("auto", "dp", "highs", "gurobi", "scip")
#: Tolerance of "fits in memory" (round-off of sums of per-operator bytes).
MEM_RTOL = 1e-9
#: ``auto``: the Pareto-label DP runs when memory binds only if the unconstrained
#: elimination's widest table is at most this (its labels are handled one table entry at a
#: time in Python; past this the MILP with its memory row is faster).
PARETO_AUTO_WIDEST = 200_000
#: ``auto``: the label limit of that attempt (past it the MILP takes over at once).
PARETO_AUTO_LABELS = 1_000_000
#: ``auto``/``dp``: tables whose min-weight elimination order builds a table wider than this
#: are first reduced exactly (:func:`_solve_reduced`); below it the reduction costs more than
#: it saves.
REDUCE_WIDEST = 2_000_000


@dataclass
class MeshOutcome:
    """One logical mesh's entry of the certificate."""

    mesh: Mesh
    status: str                     # optimal | feasible | infeasible | pruned | no_plan | error
    value: float | None
    lower_bound: float
    wall_time_s: float
    method: str
    message: str = ""
    choice: list[int] | None = None
    tables: OpTables | None = None
    stats: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        from autopar_opt.core.result import json_float
        return {"mesh": list(self.mesh.shape), "replicas": self.mesh.replicas, "status": self.status, "value": json_float(self.value),
                "lower_bound": json_float(self.lower_bound), "wall_time_s": round(self.wall_time_s, 4),
                "method": self.method, "message": self.message, "stats": self.stats}


@dataclass
class OpSolveResult:
    """All meshes' outcomes, the best, the global bound and gap."""

    outcomes: list[MeshOutcome]
    best: MeshOutcome | None
    wall_time_s: float
    #: the stop signal that ended the solve early (None: it ran to the end or the time limit)
    interrupted: int | None = None

    @property
    def value(self) -> float | None:
        return None if self.best is None else self.best.value

    @property
    def lower_bound(self) -> float:
        return min((o.lower_bound for o in self.outcomes), default=math.inf)

    @property
    def gap(self) -> float:
        return relative_gap(self.value, self.lower_bound)

    def status(self, rel_gap: float) -> str:
        if self.best is None:
            return "infeasible" if all(o.status in ("infeasible", "pruned") for o in self.outcomes) and \
                math.isinf(self.lower_bound) else "no_plan"
        return "optimal" if self.gap <= rel_gap + 1e-12 else "feasible"


# ------------------------------------------------------------------ the two exact methods
def eliminate(tables: OpTables, deadline: float | None = None):
    """PaSE's DP on the tables (no memory): :func:`solve_min_sum`, its order and all.
    Kept as one small function so that a solver portfolio can swap the call."""
    from autopar_opt.solvers.dp.elimination import solve_min_sum
    return solve_min_sum(tables.time, tables.edges, tables.redistribution, deadline)


def eliminate_capacity(tables: OpTables, deadline: float | None = None, max_labels: int | None = None):
    """The same DP with Pareto labels under the memory knapsack."""
    from autopar_opt.solvers.dp.pareto_elimination import MAX_LABELS, solve_min_sum_capacity
    return solve_min_sum_capacity(tables.time, tables.memory, tables.edges, tables.redistribution,
                                  tables.capacity_bytes, deadline, max_labels or MAX_LABELS)


def solve_mip(tables: OpTables, solver: str, time_limit_s: float | None, rel_gap: float,
              start: list[int] | None = None, ties: list | None = None
              ) -> tuple[str, list[int] | None, float, str, dict]:
    """The MILP of :mod:`autopar_opt.formulations.opspace` with ``solver`` (``ties``: the
    space restricted to per-layer templates); returns (termination, choice, lower bound,
    message, stats)."""
    from autopar_opt.formulations.opspace import build_matrix, decode, start_vector
    from autopar_opt.solvers.matrix import matrix_backend, solve_matrix

    form, offs, layout = build_matrix(tables.time, tables.memory, tables.edges, tables.redistribution,
                                      tables.capacity_bytes, ties=ties)
    if start is not None and not ties:
        form.start = start_vector(form, offs, layout, tables.edges, start)
    res, x = solve_matrix(form, matrix_backend(solver), time_limit_s=time_limit_s,
                          rel_gap=rel_gap)
    scale = form.scale  # type: ignore[attr-defined]
    bound = res.lower_bound * scale if math.isfinite(res.lower_bound) else res.lower_bound
    choice = decode(x, offs) if x is not None else None
    return (res.termination.value, choice, bound, res.message or "",
            {"columns": form.num_cols, "rows": form.num_rows, "solver_version": res.solver_version})


def _fits(tables: OpTables, choice: list[int]) -> bool:
    return tables.memory_of(choice) <= tables.capacity_bytes * (1 + MEM_RTOL)


def _solve_reduced(tables: OpTables, solver: str, time_limit_s: float | None,
                   rel_gap: float, memory_budget: MemoryBudget | None = None) -> MeshOutcome | None:
    """Where PaSE's elimination order would build a table wider than :data:`REDUCE_WIDEST`:
    the exact domain reduction of :mod:`autopar_opt.solvers.dp.min_sum_reduction` (forest
    min-marginals against its own incumbent, dominance), then the same solve on what is
    left, mapped back. ``None`` when the tables are narrow enough or nothing was removed."""
    from autopar_opt.solvers.dp.elimination import greedy_order
    from autopar_opt.solvers.dp.min_sum_reduction import reduce_domains

    _, widest = greedy_order(tables.sizes, tables.edges)
    if widest <= REDUCE_WIDEST:
        return None
    t0 = time.monotonic()
    red = reduce_domains(tables.time, tables.edges, tables.redistribution, tables.memory, tables.capacity_bytes)
    removed = sum(tables.sizes) - sum(map(len, red.keep))
    if removed == 0:
        return None
    left = None if time_limit_s is None else max(0.1, time_limit_s - (time.monotonic() - t0))
    out = solve_tables(tables.subset(red.keep), solver, left, rel_gap,
                       memory_budget=memory_budget, reduce=False)
    if out.choice is not None:
        out.choice = [int(k[c]) for k, c in zip(red.keep, out.choice)]
    elif red.incumbent:                  # the reduction's own plan, with the bounds it has
        out.choice, out.value, out.status = red.incumbent, red.incumbent_value, "feasible"
    out.stats.update({"reduction_s": round(time.monotonic() - t0 - out.wall_time_s, 4),
                      "widest_before_reduction": widest, "configs_before_reduction": sum(tables.sizes),
                      "configs_removed": removed, "forest_bound": red.lower_bound})
    if out.status != "infeasible":
        out.lower_bound = max(out.lower_bound, min(red.lower_bound, out.value if out.value is not None else math.inf))
    out.wall_time_s = time.monotonic() - t0
    out.method = "reduce+" + out.method
    out.tables = tables
    return out


def solve_tables(tables: OpTables, solver: str = "auto", time_limit_s: float | None = None,
                 rel_gap: float = 1e-9, incumbent: float | None = None,
                 memory_budget: MemoryBudget | None = None, reduce: bool = True) -> MeshOutcome:
    """Solve one mesh's tables exactly (module docstring). With ``incumbent`` (a plan's
    value from another mesh) configurations that cannot beat it are fixed out first
    (:func:`~autopar_opt.cost.operators.tables.bound_fixing`); the mesh is then either
    solved exactly (its optimum is below the incumbent) or proven no better (status
    ``pruned``, bound ``min(restricted optimum, incumbent)``)."""
    if incumbent is not None and math.isfinite(incumbent):
        keep = bound_fixing(tables, incumbent)
        floor = unary_bound(tables)
        if any(len(k) == 0 for k in keep):
            return MeshOutcome(tables.mesh, "pruned", None, max(floor, incumbent), 0.0, "bound",
                               "no configuration of some operator can beat the incumbent", tables=tables)
        if sum(map(len, keep)) < sum(tables.sizes):
            out = solve_tables(tables.subset(keep), solver, time_limit_s, rel_gap,
                               memory_budget=memory_budget)
            out.stats["configs_fixed_out"] = sum(tables.sizes) - sum(map(len, keep))
            out.tables = tables
            if out.choice is not None:
                out.choice = [int(k[c]) for k, c in zip(keep, out.choice)]
            if out.status in ("optimal", "infeasible") and (out.value is None or out.value >= incumbent):
                bound = max(floor, incumbent if out.value is None else min(out.value, incumbent))
                return MeshOutcome(tables.mesh, "pruned", None, bound, out.wall_time_s, out.method + "+fixing",
                                   "cannot beat the incumbent once configurations that cannot are fixed out",
                                   tables=tables, stats=out.stats)
            out.method += "+fixing"
            return out
    if solver in ("auto", "dp") and reduce:
        reduced = _solve_reduced(tables, solver, time_limit_s, rel_gap, memory_budget)
        if reduced is not None:
            return reduced
    start = time.monotonic()
    deadline = None if time_limit_s is None else start + time_limit_s
    stats: dict = {"operators": len(tables.time), "edges": len(tables.edges),
                   "configs_max": max(tables.sizes, default=0), "configs_total": sum(tables.sizes)}
    choice, bound, method, message = None, unary_bound(tables), solver, ""
    if solver in ("auto", "dp"):
        from autopar_opt.solvers.dp.elimination import EliminationTimeout, EliminationTooWide
        from autopar_opt.solvers.dp.pareto_elimination import ParetoTooLarge
        try:
            res = eliminate(tables, deadline)
            stats["widest_table"] = res.widest_entries
            bound = res.value
            method = "dp"
            if _fits(tables, res.choice):
                choice = res.choice
                message = "variable elimination (memory does not bind)"
            elif solver == "auto" and res.widest_entries > PARETO_AUTO_WIDEST:
                message = (f"memory binds (the unconstrained optimum needs "
                           f"{tables.memory_of(res.choice) / 2**30:.3g} GiB); MILP with the memory row")
            else:
                try:
                    pr = eliminate_capacity(tables, deadline,
                                            PARETO_AUTO_LABELS if solver == "auto" else None)
                    stats["pareto_labels_peak"] = pr.peak_labels
                    method = "dp-pareto"
                    if pr.choice is None:
                        return _outcome(tables, "infeasible", None, math.inf, start, method,
                                        "no configuration choice fits the memory", stats)
                    choice, bound = pr.choice, pr.value
                    message = "Pareto-label elimination under the memory knapsack"
                except ParetoTooLarge as exc:
                    message = f"memory binds; {exc}"
        except (EliminationTimeout, EliminationTooWide) as exc:
            message = f"DP stopped: {exc or 'time limit'}"
        if choice is not None or solver == "dp":
            status = "optimal" if choice is not None else "no_plan"
            return _outcome(tables, status, choice, bound, start, method, message, stats)
    from autopar_opt.formulations.opspace import matrix_size
    from autopar_opt.solvers.matrix import matrix_backend

    # auto: the first installed backend that takes a matrix, chosen by its features
    mip = matrix_backend(None if solver == "auto" else solver).name
    size = matrix_size(tables.time, tables.edges, tables.redistribution, tables.capacity_bytes)
    budget = memory_budget if memory_budget is not None else MemoryBudget.default()
    refusal = budget.refuses(size, "the MILP")
    if refusal:                                  # counted, nothing built
        stats.update(milp_rows=size.rows, milp_columns=size.cols, milp_nonzeros=size.nonzeros,
                     milp_refused=True)
        return _outcome(tables, "no_plan", None, bound, start, method,
                        "; ".join(m for m in (message, refusal) if m), stats)
    left = None if deadline is None else max(0.1, deadline - time.monotonic())
    term, mchoice, mbound, mmsg, mstats = solve_mip(tables, mip, left, rel_gap)
    stats.update(mstats)
    bound = max(bound, mbound)
    if term == "infeasible":
        return _outcome(tables, "infeasible", None, math.inf, start, f"milp-{mip}", mmsg, stats)
    status = "no_plan" if mchoice is None else ("optimal" if term == "optimal" else "feasible")
    return _outcome(tables, status, mchoice, bound, start,
                    "dp+milp-" + mip if method.startswith("dp") else "milp-" + mip,
                    "; ".join(m for m in (message, mmsg) if m), stats)


def _outcome(tables: OpTables, status: str, choice: list[int] | None, bound: float, start: float,
             method: str, message: str, stats: dict) -> MeshOutcome:
    value = None
    if choice is not None:
        value = tables.objective(choice)
        bound = min(bound, value) if math.isfinite(bound) else bound
        if status == "optimal" and bound < value * (1 - 1e-9):
            status = "feasible"
    return MeshOutcome(tables.mesh, status, value, bound, time.monotonic() - start, method, message,
                       choice, tables, stats)


def solve_operator_space(graph: OperatorGraph, ctx: StageContext, devices: int, rule: str = "alpa",
                         reduce_scatter: bool = True, solver: str = "auto",
                         time_limit_s: float | None = None, rel_gap: float = 1e-9,
                         meshes: list[Mesh] | None = None,
                         memory_budget: MemoryBudget | None = None) -> OpSolveResult:
    """Every mesh, solved exactly, with lower-bound pruning (module docstring)."""
    start = time.monotonic()
    gpn = ctx.cluster.gpus_per_node
    if meshes is None:
        meshes = logical_meshes(devices, gpn, one_d_only=rule == "pase")
    builders = [TableBuilder(ctx, m, rule, reduce_scatter) for m in meshes]
    firsts = [(unary_bound(b.build(graph, edges=False)), i) for i, b in enumerate(builders)]
    outcomes: list[MeshOutcome | None] = [None] * len(meshes)
    best: MeshOutcome | None = None
    stopped: str | None = None
    interrupted: int | None = None
    tried = False
    for lb, i in sorted(firsts):
        if best is not None and best.value is not None and lb >= best.value * (1 - 1e-12):
            outcomes[i] = MeshOutcome(meshes[i], "pruned", None, lb, 0.0, "bound",
                                      f"Σ min A = {lb:.6g} s ≥ incumbent {best.value:.6g} s")
            continue
        out_of_time = time_limit_s is not None and (best is not None or tried or time_limit_s <= 0) \
            and time.monotonic() - start >= time_limit_s
        if stopped is None and out_of_time:
            stopped = "not solved: the time limit was spent"
        if stopped is not None:           # Σ min A keeps the certificate's bound valid
            outcomes[i] = MeshOutcome(meshes[i], "no_plan", None, lb, 0.0, "bound", stopped)
            continue
        left = None if time_limit_s is None else max(0.1, time_limit_s - (time.monotonic() - start))
        try:
            tables = builders[i].build(graph)
            out = solve_tables(tables, solver, left, rel_gap, None if best is None else best.value,
                               memory_budget)
        except SearchInterrupted as exc:  # a stop signal: keep what is proven, answer now
            interrupted, stopped = exc.signum, f"not solved: stopped by signal {exc.signum}"
            outcomes[i] = MeshOutcome(meshes[i], "no_plan", None, lb, 0.0, "bound", stopped)
            continue
        out.stats["tables_s"] = round(sum(tables.timings.values()), 4)
        outcomes[i] = out
        tried = True
        if out.value is not None and (best is None or out.value < best.value):
            best = out
    return OpSolveResult([o for o in outcomes if o is not None], best, time.monotonic() - start,
                         interrupted)
