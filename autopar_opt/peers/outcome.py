"""What a peer-problem solver returns: status, plan in the peer's terms, primal, bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autopar_opt.core.result import Termination, relative_gap


@dataclass
class PeerOutcome:
    """One solve of a peer problem.

    ``solution`` is the plan in the peer's terms (PaSE: one configuration
    index per vertex; Piper: a :class:`~autopar_opt.peers.piper.model.PiperPlan`),
    ``primal`` its value re-priced by the independent evaluator, and
    ``lower_bound`` a proven bound (``+inf`` when infeasibility is proven,
    ``-inf`` when nothing is proven).
    """

    termination: Termination
    solution: Any
    primal: float | None
    lower_bound: float
    wall_time_s: float
    method: str
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    solver_version: str = ""

    @property
    def gap(self) -> float:
        return relative_gap(self.primal, self.lower_bound)
