"""The peers' problems (Piper, PaSE) through the one portfolio (:mod:`autopar_opt.core.portfolio`).

``auto`` (the default) runs the exact method that is fastest on these
instances first and the MILP only if the gap is still open:

- **Piper**: the DP over successor-closed sets (exact; refused only beyond its
  ideal guard), then the MILP (:mod:`autopar_opt.peers.piper.milp`), whose
  size is counted before it is built and checked against the memory budget;
- **PaSE**: variable elimination (exact; the tables it keeps are counted
  from the elimination order before any is built, and checked against the
  budget: past it the DP is refused and the MILP runs), then the
  local-marginal MILP (size counted the same way).

``--solver dp`` runs the DP alone, ``--solver highs|gurobi|scip`` the MILP
alone on that backend. Every method's part (what it proved, its time, why
it was refused or skipped) is in :attr:`Shared.records`; the Piper DP offers
its first-pass plan to the shared incumbent as soon as it has one, so a stop
signal in its exact pass still leaves a plan and the work bound.
"""

from __future__ import annotations

import math
import time
from typing import Any

from autopar_opt.core.memory_budget import MemoryBudget, ModelSize
from autopar_opt.core.portfolio import Method, Shared, run_portfolio
from autopar_opt.peers.outcome import PeerOutcome
from autopar_opt.peers.spec import PeerSpec

def _limit(shared: Shared, left: float | None) -> float | None:
    del shared
    return None if left is None else max(left, 0.01)


def piper_methods(spec: PeerSpec, solver: str, rel_gap: float) -> list[Method]:
    """The Piper portfolio (or the one forced method)."""
    inst = spec.instance

    def dp(shared: Shared, left: float | None) -> PeerOutcome:
        from autopar_opt.peers.piper.dp import solve_piper_dp

        def offer(value: float, plan: Any, bound: float) -> None:
            shared.offer("dp", value, plan, bound)
        return solve_piper_dp(inst, _limit(shared, left), on_incumbent=offer)

    size_cache: list[ModelSize] = []

    def milp_size() -> ModelSize:
        if not size_cache:
            from autopar_opt.peers.piper.milp import piper_milp_size
            from autopar_opt.peers.piper.model import reduce_instance
            size_cache.append(piper_milp_size(reduce_instance(inst)))
        return size_cache[0]

    def milp(shared: Shared, left: float | None) -> PeerOutcome:
        from autopar_opt.peers.piper.milp import solve_piper_mip
        return solve_piper_mip(inst, "auto" if solver in ("auto", "dp") else solver,
                               _limit(shared, left), min(rel_gap, 1e-9), cutoff=shared.primal)

    methods = [Method("dp", dp),
               Method("milp", milp, size=lambda: milp_size().bytes(),
                      describe_size=lambda: f"the MILP ({milp_size().describe()})")]
    return _forced(methods, solver)


def pase_methods(spec: PeerSpec, solver: str, rel_gap: float) -> list[Method]:
    """The PaSE portfolio (or the one forced method)."""
    inst = spec.instance
    sized: list[tuple[float, int]] = []

    def dp_bytes() -> float:
        """The elimination's tables, counted from its order before any is built
        (:func:`~autopar_opt.solvers.dp.elimination.elimination_bytes`)."""
        if not sized:
            from autopar_opt.solvers.dp.elimination import elimination_bytes
            sized.append(elimination_bytes(inst.sizes, inst.edges))
        return sized[0][0]

    def dp(shared: Shared, left: float | None) -> PeerOutcome:
        from autopar_opt.peers.pase.solve import solve_pase_dp
        return solve_pase_dp(inst, _limit(shared, left))

    size_cache: list[ModelSize] = []

    def milp_size() -> ModelSize:
        if not size_cache:
            from autopar_opt.peers.pase.solve import pase_milp_size
            size_cache.append(pase_milp_size(inst))
        return size_cache[0]

    def milp(shared: Shared, left: float | None) -> PeerOutcome:
        from autopar_opt.peers.pase.solve import solve_pase_mip
        return solve_pase_mip(inst, "auto" if solver in ("auto", "dp") else solver,
                              _limit(shared, left), min(rel_gap, 1e-9), cutoff=shared.primal)

    methods = [Method("dp", dp, size=dp_bytes,
                      describe_size=lambda: "the elimination's tables (widest step "
                                              f"{sized[0][1]:,} entries)"),
               Method("milp", milp, size=lambda: milp_size().bytes(),
                      describe_size=lambda: f"the MILP ({milp_size().describe()})")]
    return _forced(methods, solver)


def _forced(methods: list[Method], solver: str) -> list[Method]:
    """``auto``: every method in order; ``dp``: the DP; a backend name: the MILP on it."""
    if solver == "auto":
        return methods
    if solver == "dp":
        return [m for m in methods if m.name == "dp"]
    out = [m for m in methods if m.name == "milp"]
    for m in out:
        m.name = f"milp:{solver}"
    return out


def solve_peer(spec: PeerSpec, solver: str, *, deadline: float | None, rel_gap: float,
               budget: MemoryBudget, shared: Shared | None = None) -> Shared:
    """Run the portfolio of ``spec``'s instance (``deadline``: a ``time.perf_counter()``
    value); returns the shared state: best plan, proven bound, one record per method.

    A stop signal propagates (``SearchInterrupted``) with ``shared`` holding what
    was proven; the caller passes ``shared`` in to read it afterwards.
    """
    methods = (pase_methods if spec.format == "pase" else piper_methods)(spec, solver, rel_gap)
    return run_portfolio(methods, rel_gap=rel_gap, deadline=deadline, budget=budget,
                         shared=shared if shared is not None else Shared(rel_gap),
                         clock=time.perf_counter)


def outcome_of(shared: Shared, wall_time_s: float) -> PeerOutcome:
    """The portfolio's answer as one :class:`PeerOutcome` (what the document is built from)."""
    from autopar_opt.core.result import Termination

    if shared.infeasible:
        term = Termination.infeasible
    elif shared.primal is None:
        term = Termination.time_limit_no_solution
    elif shared.closed():
        term = Termination.optimal
    else:
        term = Termination.feasible
    proved = [r for r in shared.records if r.status not in ("skipped",)]
    method = "+".join(r.method for r in proved if r.status not in ("refused",)) or "none"
    messages = [f"{r.method}: {r.status}" + (f" ({r.message})" if r.message else "") for r in proved]
    return PeerOutcome(term, shared.solution, shared.primal,
                       shared.lower_bound if not math.isnan(shared.lower_bound) else -math.inf,
                       wall_time_s, method, "; ".join(messages))
