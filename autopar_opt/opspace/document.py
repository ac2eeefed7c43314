"""plan.json of an operator-sharding solve: the plan per operator, its metrics, the
certificate per logical mesh (or per pipeline configuration), the baselines and, for
transformer graphs, the template space's optimum beside the operator space's."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from autopar_opt.core.result import json_float, relative_gap


def _metrics(m: Any, batch: int) -> dict:
    data = {k: json_float(v) if isinstance(v, float) else v for k, v in m.to_dict().items()}
    data["samples_per_s"] = batch / m.time_s if m.time_s > 0 else None
    return data


def baseline_entry(b: Any, value: float | None, batch: int, proven: bool = True) -> dict:
    """One baseline: its value and memory, how much slower than the plan written
    (``ratio_to_plan``) and, only when the certificate proves that plan optimal, than the
    optimum (QA round 35: a plan left at a 10% gap was called "the optimum")."""
    ratio = (b.metrics.time_s / value) if value else None
    return {"name": b.name, "note": b.note, "metrics": _metrics(b.metrics, batch),
            "ratio_to_plan": ratio, "ratio_to_optimum": ratio if proven else None}


def operator_rows(graph: Any, plan: Any, metrics: Any) -> list[dict]:
    """Per operator: its configuration, time parts and memory."""
    rows = []
    for op, cfg, cost in zip(graph.ops, plan.configs, metrics.per_op):
        rows.append({"name": op.name, "layer": op.layer, "role": op.role, "kind": op.kind.value,
                     "dims": dict(op.dims), **cfg.to_dict(op), "compute_s": cost.compute_s,
                     "collective_s": cost.collective_s, "sync_s": cost.sync_s,
                     "dp_s": cost.dp_s, "optimizer_s": cost.optimizer_s,
                     "memory_bytes": cost.memory_bytes})
    return rows


def template_comparison(graph: Any, plan: Any, value: float, template: Any | None,
                        proven: bool = True) -> dict | None:
    """Where the operator-space plan departs from the best template plan, and by how much;
    ``optimum_proven``: whether the certificate proves that plan optimal (the keys keep
    the word "optimum" for the plan either way)."""
    if template is None:
        return None
    tv = template.metrics.time_s
    diff = []
    if template.plan.mesh == plan.mesh:
        for op, a, b in zip(graph.ops, plan.configs, template.plan.configs):
            if a != b:
                diff.append({"name": op.name, "role": op.role, "optimum": a.label(op), "template": b.label(op)})
    return {"template_value": tv, "optimum_value": value, "template_mesh": list(template.plan.mesh.shape),
            "optimum_mesh": list(plan.mesh.shape), "speedup_over_templates": tv / value if value else None,
            "strictly_better": value < tv * (1 - 1e-9), "differences": diff, "note": template.note,
            "optimum_proven": proven}


def build_document(spec: Any, result: Any, plan: Any, metrics: Any, baselines: list, template: Any,
                   solver: str, time_limit_s: float, rel_gap: float, version: str,
                   pipeline: dict | None = None, source: str = "solver") -> dict:
    """The whole plan.json (module docstring). ``result`` is an
    :class:`~autopar_opt.opspace.solve.OpSolveResult` or a pipeline search (``pipeline``
    then holds its plan and certificate); ``source`` says where the plan comes from (the
    solver, or a baseline that beat the solver's incumbent within its limits)."""
    value = None if metrics is None else metrics.time_s
    if pipeline is not None:
        # a numpy float from the pipeline search: its comparisons are numpy bools, which
        # json cannot write (QA round 10: the README's AlexNet pipeline ended in exit 70)
        bound, status, cert_rows = (float(pipeline["lower_bound"]), pipeline["status"],
                                    pipeline["configurations"])
        method = "milp"
    else:
        bound, status = result.lower_bound, result.status(rel_gap)
        if value is not None:
            status = "optimal" if relative_gap(value, bound) <= rel_gap + 1e-12 else "feasible"
        cert_rows = [o.to_dict() for o in result.outcomes]
        method = result.best.method if result.best is not None else None
    exact = bool(value is not None and math.isfinite(bound)
                 and bound >= value * (1 - max(rel_gap, 1e-9)) - 1e-15)
    batch = spec.batch
    doc = {
        "schema_version": 1,
        "tool": {"name": "autopar-opt", "version": version},
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": {"path": str(spec.path), "problem": {"format": "operator_sharding", **spec.settings}},
        "status": status,
        "plan": None if plan is None else (pipeline["plan"] if pipeline else
                                          {"mesh": list(plan.mesh.shape), "replicas": plan.mesh.replicas,
                                           "operators": operator_rows(spec.graph, plan, metrics)}),
        "plan_source": source,
        "metrics": None if metrics is None else _metrics(metrics, batch),
        "certificate": {"primal": json_float(value), "lower_bound": json_float(bound),
                        "gap": json_float(relative_gap(value, bound)), "exact": exact, "status": status,
                        "method": method, "configurations": cert_rows},
        "baselines": [baseline_entry(b, value, batch, exact) for b in baselines],
        "templates": None if (plan is None or pipeline)
        else template_comparison(spec.graph, plan, value, template, exact),
        "solver": {"name": solver, "time_limit_s": time_limit_s, "rel_gap": rel_gap,
                   "wall_time_s": round(result.wall_time_s, 4)},
        "wall_time_s": round(result.wall_time_s, 4),
    }
    return doc
