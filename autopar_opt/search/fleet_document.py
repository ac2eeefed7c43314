"""The ``plan.json`` of a search on a mixed fleet (issue 34): plain JSON, the fleet report's only input.

Beside the usual spec, space, cost model, status, certificate and solver
sections it holds the ``fleet`` (groups and links), the ``shape`` of the best
plan (``pipeline``: one pipeline whose stages run on groups; ``replicas``:
data-parallel classes with their batch shares), ``placement`` (what runs on
every group: its stages with their layers, or its class), the best value of
every group alone with its proven bound (``homogeneous``), and every
configuration row with its groups named. :func:`is_fleet_document` tells it
from the other documents. :func:`fleet_plan_dict`, :func:`fleet_metrics_dict` and
:func:`fleet_placement` map a priced fleet plan to its ``plan``, ``metrics`` and
``placement``, for this document and for ``autopar estimate --plan`` re-pricing it
(:mod:`autopar_opt.cli.reprice_fleet`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

from autopar_opt import __version__
from autopar_opt.cost.compute import causal_mfu
from autopar_opt.cost.interval import fleet_interval
from autopar_opt.core.bounds import Status
from autopar_opt.cost.params import CostParams, calibration_provenance
from autopar_opt.cost.replicas import ReplicaMetrics
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.fleet_pipeline import group_offsets
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import memory_override
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.replicas import ReplicaPlan
from autopar_opt.ir.training import SearchSpace, Training
from autopar_opt.search.certificate import json_float
from autopar_opt.search.document import COST_MODEL_ASSUMPTIONS, _space_dict, resolved_path
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.mixed import FleetResult

FLEET_ASSUMPTIONS = [
    "Fleet: every stage runs on one group (device type) and is priced on that group's device, "
    "HBM, fitted efficiency and links; stages of a group take consecutive ranks of it; a used "
    "group is split whole into congruent stages; the pipeline visits each group once.",
    "Between groups, traffic crosses the slowest link of its path: the least of the two groups' "
    "per-GPU network bandwidth and the stated link, latency the link's plus the larger network "
    "latency.",
    "Replica classes: the batch is split in multiples of the stated quantum; T = max over classes "
    "of the class's iteration + a cross-group ring all-reduce of every gradient over the "
    "smallest class's devices (hierarchical all-reduce), not overlapped with compute.",
]


def is_fleet_document(doc: object) -> bool:
    """A plan.json of a fleet search (it has a ``fleet`` section and a ``shape``)."""
    return isinstance(doc, dict) and "fleet" in doc and "shape" in doc


def _tier(t) -> dict | None:
    return None if t is None else {"name": t.name, "bandwidth_gb_per_s": t.bandwidth_gb_per_s,
                                   "latency_us": t.latency_us}


def fleet_case(graph, fleet, training, params) -> list[str]:
    """What the cost model assumed for this case (``cost_model.case``, as a one-cluster
    plan.json states it): each group's assumptions
    (:func:`~autopar_opt.cost.assumptions.cost_assumptions` on the group's cluster), a line
    every group shares once, a line of some groups prefixed with their names."""
    from autopar_opt.cost.assumptions import cost_assumptions

    per_group = [(g.name, cost_assumptions(graph, g, training, params)) for g in fleet.groups]
    out: list[str] = []
    for _, lines in per_group:
        for line in lines:
            holders = [n for n, ls in per_group if line in ls]
            text = line if len(holders) == len(per_group) else f"{', '.join(holders)}: {line}"
            if text not in out:
                out.append(text)
    return out


def fleet_dict(fleet: Fleet, dtype: str) -> dict:
    """Groups (device, nodes, links) and the links between them."""
    return {"name": fleet.name, "num_devices": fleet.num_devices,
            "groups": [{"name": g.name, "device": g.device.name, "nodes": g.nodes,
                        "gpus_per_node": g.gpus_per_node, "num_devices": g.num_devices,
                        "hbm_gib": g.device.hbm_gib, "device_memory_gib": memory_override(g.device),
                        "peak_tflops": g.device.peak_tflops.get(dtype),
                        "intra_node": _tier(g.intra_node), "inter_node": _tier(g.inter_node),
                        "intra_node_topology": "mesh" if g.nvlink_mesh else "switch",
                        "nvlink_board_gpus": g.nvlink_board or None}
                       for g in fleet.groups],
            "links": [{"between": [link.a, link.b], **_tier(link.tier)} for link in fleet.links]}


def stage_rows(plan: Plan, fleet: Fleet, metrics) -> list[dict]:
    """Every stage of a pipeline plan: its group, ranks inside the group, layers, time, memory
    (``metrics``: the plan's :class:`~autopar_opt.cost.evaluate.PlanMetrics`, or None for
    the stages without figures)."""
    groups, sizes = plan.stage_groups or [], plan.stage_devices or []
    offs = group_offsets(groups, sizes)
    out = []
    for i, (st, g, d, at) in enumerate(zip(plan.stages, groups, sizes, offs)):
        m = metrics.stages[i] if metrics is not None else None
        out.append({"index": i, "group": fleet.groups[g].name, "devices": d, "first_rank": at,
                    "last_rank": at + d - 1, "layers": len(st.layers),
                    "first_layer": st.layers[0], "last_layer": st.layers[-1],
                    "strategies": sorted({s.label() for s in st.strategies}),
                    "time_s": None if m is None else m.time_s,
                    "sync_s": None if m is None else m.sync_s,
                    "peak_memory_gib": None if m is None else m.peak_memory_gib,
                    "capacity_gib": None if m is None else m.capacity_gib})
    return out


# The plan.json's plan, metrics and placement of a priced fleet plan, written by the solve
# (build_fleet_document) and by ``autopar estimate --plan`` re-pricing it
# (cli/reprice_fleet.py): one mapping, so that the two give the same keys and figures.

def fleet_plan_dict(plan: Plan | ReplicaPlan, fleet: Fleet,
                    metrics: ReplicaMetrics | None = None) -> dict:
    """``plan`` as a fleet plan.json's ``plan`` on ``fleet`` (its group order: a strategy's
    ``group`` indexes it; stage groups and classes by name). With ``metrics`` (a replicas
    plan's), each class also carries its iteration time and its stages (:func:`stage_rows`)."""
    if isinstance(plan, ReplicaPlan):
        classes = []
        for t, c in enumerate(plan.classes):
            row = {"groups": [fleet.groups[g].name for g in c.groups], "batch": c.batch,
                   "plan": c.plan.to_dict()}
            if metrics is not None:
                m = metrics.classes[t]
                row.update(iteration_time_s=m.iteration_time_s, stages=stage_rows(c.plan, fleet, m))
            classes.append(row)
        return {"classes": classes}
    out = plan.to_dict()
    out["stage_groups"] = [fleet.groups[g].name for g in plan.stage_groups or []]
    return out


def fleet_placement(plan: Plan | ReplicaPlan, fleet: Fleet, metrics, batch: int) -> list[dict]:
    """A fleet plan.json's ``placement``: a row per stage (:func:`stage_rows`) with its
    replica ``class`` (its index; None in a pipeline) and that class's ``batch`` (``batch``,
    the global batch, in a pipeline)."""
    if isinstance(plan, ReplicaPlan):
        return [{"class": t, "batch": c.batch, **row}
                for t, (c, m) in enumerate(zip(plan.classes, metrics.classes))
                for row in stage_rows(c.plan, fleet, m)]
    return [{"class": None, "batch": batch, **row} for row in stage_rows(plan, fleet, metrics)]


def class_figures(metrics: ReplicaMetrics) -> list[dict]:
    """Per replica class (in plan order), its iteration time, breakdown and per-kind
    communication (:mod:`autopar_opt.cost.comm_split`) as the class's own PlanMetrics
    state them: each class runs its own pipeline, so its ``exposed_s`` per kind is that
    class's breakdown term; the cross-group gradient all-reduce is ``sync_s``, not a kind."""
    return [{"class": t, "iteration_time_s": m.iteration_time_s, "breakdown": dict(m.breakdown),
             "communication": {k: dict(f) for k, f in m.communication.items()}}
            for t, m in enumerate(metrics.classes)]


def fleet_metrics_dict(plan: Plan | ReplicaPlan, metrics, graph: LayerGraph, fleet: Fleet,
                       training: Training, params: CostParams) -> dict:
    """A fleet plan.json's ``metrics`` of ``plan`` priced as ``metrics`` (a
    :class:`~autopar_opt.cost.replicas.ReplicaMetrics` or a pipeline's
    :class:`~autopar_opt.cost.evaluate.PlanMetrics`), with the 80% ``interval`` of either
    shape (the widest of its groups'). A pipeline's has no single ``memory_capacity_gib``
    (the first stage's group's, QA round 36: an A100-40GB stage before an H100 one recorded
    40 GiB for the H100 stage) nor ``stages``: each stage's capacity is its placement row's,
    as in the replicas shape. A pipeline's ``communication`` and ``breakdown`` are its
    PlanMetrics'; the replica classes have no one critical path, so ``classes`` states each
    class's own (:func:`class_figures`)."""
    if isinstance(metrics, ReplicaMetrics):
        sync = metrics.sync
        out = {"iteration_time_s": metrics.iteration_time_s,
               "samples_per_s": metrics.samples_per_s, "tokens_per_s": metrics.tokens_per_s,
               "mfu": metrics.mfu, "mfu_causal": causal_mfu(metrics.mfu, graph.layers),
               "sync_s": metrics.sync_s, "feasible": metrics.feasible,
               "sync": {"grad_bytes": sync.grad_bytes, "rings": sync.rings,
                        "tier": _tier(sync.tier)} if sync else None,
               "classes": class_figures(metrics)}
    else:
        out = {k: v for k, v in metrics.to_dict().items()
               if k not in ("stages", "memory_capacity_gib")}
    out["interval"] = fleet_interval(graph, fleet, training, plan, metrics.iteration_time_s,
                                     params).to_dict()
    return out


def _named(row: dict, fleet: Fleet) -> dict:
    """A configuration row with group indices replaced by names."""
    names = fleet.names
    if "stage_groups" in row:
        row["stage_groups"] = [names[g] for g in row["stage_groups"]]
    if "classes" in row:
        row["classes"] = [[names[g] for g in c] for c in row["classes"]]
    return row


def _homogeneous(result: FleetResult, fleet: Fleet) -> list[dict]:
    """Per group: the best plan found on it alone and the least bound of its configurations
    (every configuration of one group is a record of the certificate)."""
    out = []
    for g, grp in enumerate(fleet.groups):
        rows = [r for r in result.certificate.configurations
                if getattr(r.config, "stage_groups", None) and set(r.config.stage_groups) == {g}]
        if not rows:
            continue
        primals = [r.primal for r in rows if r.primal is not None]
        out.append({"group": grp.name, "devices": grp.num_devices,
                    "primal": json_float(min(primals)) if primals else None,
                    "lower_bound": json_float(min(r.lower_bound for r in rows)),
                    "configurations": len(rows),
                    "statuses": sorted({str(getattr(r.status, "value", r.status)) for r in rows})})
    return out


def build_fleet_document(spec_path: str, graph: LayerGraph, fleet: Fleet, training: Training,
                         space: SearchSpace, params: CostParams, options: SearchOptions,
                         result: FleetResult, split_quantum: int) -> dict:
    """Assemble the fleet plan.json (module doc)."""
    plan, metrics = result.plan, result.metrics
    shape = "replicas" if isinstance(plan, ReplicaPlan) else ("pipeline" if plan is not None else None)
    placement: list[dict] = []
    plan_dict = None
    metrics_dict = None
    if (isinstance(plan, ReplicaPlan) and isinstance(metrics, ReplicaMetrics)) or isinstance(plan, Plan):
        plan_dict = fleet_plan_dict(plan, fleet, metrics if isinstance(plan, ReplicaPlan) else None)
        placement = fleet_placement(plan, fleet, metrics, training.global_batch_size)
        metrics_dict = fleet_metrics_dict(plan, metrics, graph, fleet, training, params)
    cert = result.certificate
    cert_dict = cert.to_dict()
    cert_dict["configurations"] = [_named(row, fleet) for row in cert_dict["configurations"]]
    status = result.status(options.rel_gap).value
    notes = []
    if plan is not None and not (cert.exact and cert.gap <= options.rel_gap + 1e-12):
        notes.append(f"Not certified to the requested gap of {100 * options.rel_gap:.3g}%: the "
                     f"certificate gap is {100 * cert.gap:.3g}%; raise --time-limit, or use --gap "
                     "to accept a larger gap.")
    open_rows = sum(1 for r in cert.configurations if r.status is Status.not_solved)
    if open_rows:
        notes.append(f"{open_rows} configuration(s) were left with their bound only (time limit, or "
                     "a bound within the target gap of the incumbent).")
    return {
        "schema_version": 1,
        "tool": {"name": "autopar-opt", "version": __version__},
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": {"path": spec_path, "resolved_path": resolved_path(spec_path),
                 "model": {"name": graph.name, "num_layers": len(graph.layers),
                           "params": graph.total_params(), "is_chain": graph.is_chain(),
                           "source": graph.source},
                 "training": dataclasses.asdict(training)},
        "fleet": fleet_dict(fleet, training.dtype),
        "search_space": {**_space_dict(space), "batch_split_quantum": split_quantum},
        "cost_model": {"params": params.to_dict(),
                       "assumptions": COST_MODEL_ASSUMPTIONS + FLEET_ASSUMPTIONS,
                       "case": fleet_case(graph, fleet, training, params),
                       "runtime": {"name": training.runtime.name, **training.runtime.capabilities()},
                       "calibration": calibration_provenance(params)},
        "status": status,
        "shape": shape,
        "best_configuration": result.best_label,
        "plan": plan_dict,
        "metrics": metrics_dict,
        "placement": placement,
        "homogeneous": _homogeneous(result, fleet),
        "certificate": cert_dict,
        "solver": {"name": options.solver, "time_limit_s": options.time_limit_s,
                   "rel_gap": options.rel_gap, "wall_time_s": round(result.wall_time_s, 3),
                   "replica_splits": result.replica_records},
        "notices": notes,
    }
