"""Data-parallel replica classes on a mixed fleet (issue 34; docs/DESIGN.md §11, shape D).

The global batch is split over ``K >= 2`` *classes*; class ``t`` runs its own
pipeline plan (:class:`~autopar_opt.ir.plan.Plan` with ``stage_groups``) on its
own groups with ``batch`` samples per iteration, and the classes all-reduce
their gradients across groups once per iteration. Replicas of different
composition (an H100 pipeline beside an A100 one, each with the batch share
its speed earns) are what Metis (Um et al., USENIX ATC'24, Sec. 4:
heterogeneity-aware data load balancing) plans; here each class is a
certified plan of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.ir.plan import Plan


@dataclass
class ReplicaClass:
    """One class: the fleet groups it uses (indices), its samples per iteration, its plan."""

    groups: tuple[int, ...]
    batch: int
    plan: Plan

    def to_dict(self) -> dict:
        return {"groups": list(self.groups), "batch": self.batch, "plan": self.plan.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "ReplicaClass":
        return cls(tuple(int(g) for g in data["groups"]), int(data["batch"]), Plan.from_dict(data["plan"]))


@dataclass
class ReplicaPlan:
    """A plan of ``K >= 2`` data-parallel classes whose batches sum to the global batch."""

    classes: list[ReplicaClass]

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(c.batch for c in self.classes)

    def to_dict(self) -> dict:
        return {"classes": [c.to_dict() for c in self.classes]}

    @classmethod
    def from_dict(cls, data: dict) -> "ReplicaPlan":
        return cls([ReplicaClass.from_dict(c) for c in data["classes"]])
