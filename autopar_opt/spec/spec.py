"""``load_spec(path) -> Spec``: read, validate and build everything a run needs.

One pass collects every problem: read errors of included files, schema
errors of all sections, then the cross-field rules of the sections that
validated. Either a complete :class:`Spec` comes back or one
:class:`SpecError` listing all problems is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autopar_opt.cost.params import CostParams
from autopar_opt.ir.arch import positions_notice
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.target import Target
from autopar_opt.ir.plan import Plan
from autopar_opt.spec.build_model import build_graph
from autopar_opt.spec.build_plan import build_plan
from autopar_opt.cost.params import implausible
from autopar_opt.spec import attention_rule
from autopar_opt.spec.notices import command_line_notes, link_notices, precision_notes
from autopar_opt.spec.build_run import (SolverOptions, build_cluster, build_cost_params, build_space,
                                        build_target, check_room_left,
                                        build_solver, build_training)
from autopar_opt.spec.doc_kinds import wrong_input
from autopar_opt.core.errors import ProblemList, SpecError
from autopar_opt.core.reading import refuse_empty_path
from autopar_opt.spec.loader import INCLUDABLE, read_mapping, resolve_includes
from autopar_opt.spec.schema import FleetClusterSpec, SpecFile
from autopar_opt.spec.build_fleet import build_fleet, fleet_dtype_problem, fleet_reserve_problem
from autopar_opt.spec.translate import problems_from_validation
from autopar_opt.ir.training import Schedule, SearchSpace, Training


@dataclass(eq=False)
class Spec:
    """Everything a search or an estimate needs, built from one spec file.

    ``raw`` is the mapping as read (includes inlined); ``plan`` is the spec's
    plan section, if any. Two specs are equal when everything but ``path``
    is equal (same model, cluster, training, space, solver, cost model, plan).
    """

    path: Path
    graph: LayerGraph
    cluster: Cluster
    training: Training
    space: SearchSpace
    solver: SolverOptions
    cost_params: CostParams
    plan: Plan | None
    raw: dict[str, Any] = field(default_factory=dict)
    #: what the spec's reading assumed and the outputs say (e.g. a runtime's target
    #: that cannot run the model, so the free space is searched)
    notices: list[str] = field(default_factory=list)
    #: the mixed fleet of a ``cluster: {groups: [...]}`` with two groups or more
    #: (``cluster`` is then its first group, for what needs one device type);
    #: None for one cluster, which a one-group fleet is
    fleet: Fleet | None = None

    def _key(self) -> tuple:
        g = self.graph
        plan = self.plan.to_dict() if self.plan is not None else None
        return (g.name, tuple(g.layers), tuple(map(tuple, g.edges)), g.seq_len, self.cluster,
                self.training, self.space, self.solver, self.cost_params, repr(plan), self.raw,
                self.fleet)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Spec):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


def _validate(data: dict[str, Any], out: ProblemList, skip: set[str]) -> SpecFile | None:
    """Schema-validate ``data``; sections in ``skip`` (unreadable includes) are not re-reported."""
    try:
        return SpecFile.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation(SpecFile, exc, out.file_of)
        out.extend(p for p in problems if p.key.split(".")[0].split("[")[0] not in skip)
        return None


def build_spec(data: dict[str, Any], path: Path, section_files: dict[str, str] | None = None,
               out: ProblemList | None = None, skip: set[str] | None = None) -> Spec:
    """Validate a spec mapping and build the core objects; raises :class:`SpecError`.

    ``skip`` names sections whose include file failed to read (already in ``out``).
    """
    out = out or ProblemList(str(path), section_files)
    model = _validate(data, out, skip or set())
    if model is None:
        out.raise_if_any()
        raise SpecError(out.items)  # unreachable: validation failed, so problems exist
    section = model.training
    graph = build_graph(model.model, section.seq_len, out)
    if isinstance(model.cluster, FleetClusterSpec):
        return _build_fleet_spec(model, data, path, graph, out)
    cluster = build_cluster(model.cluster, out)
    training = build_training(section, graph, cluster, out)
    if graph is not None and cluster is not None and training is not None:
        # the attention core the runtime runs on this GPU decides what it keeps
        rebuild, training = attention_rule.reconcile(model.model, graph, training, cluster, out)
        if rebuild:
            graph = build_graph(model.model, section.seq_len, out, flash_attention=False)
    target, notice = build_target(model.target, graph, training, model.search, out)
    space = build_space(model.search, cluster, graph, training, out, target)
    solver = build_solver(model.solver, out)
    cost = build_cost_params(model.cost_model, cluster, out, Path(path).parent)
    if cluster is not None and not out.items:
        check_room_left(cluster, training, cost, out,
                        getattr(model.cluster, "device_memory_gib", None))
    plan = build_plan(model.plan, graph, cluster, training, out, Path(path).parent)
    out.raise_if_any()
    return Spec(Path(path), graph, cluster, training, space, solver, cost, plan, data,
                ([notice] if notice else []) + positions_notice(graph.arch, training.seq_len)
                + unused_measurements(graph, space, plan) + implausible(cost)
                + link_notices(cluster) + command_line_notes(model.plan, training, plan, graph)
                + precision_notes(plan))


def unused_measurements(graph: LayerGraph, space, plan) -> list[str]:
    """A notice for each measured (layer, tp) a priced plan does not use: a tp above the
    layer's ``max_tp`` (no plan can run it), a tp the search space does not offer, and,
    with a spec plan, one the plan does not run that layer at (``estimate`` prices the
    plan's own degree analytically; QA round 9: said by solve only, and not for a tp
    above ``max_tp``). ``model.measured`` at tp 3 on 8 GPUs searched at tp 1, 2, 4 was
    silently never read."""
    if not any(layer.measured for layer in graph.layers):
        return []
    offered = set(space.tp_degrees) if space.tp_degrees is not None else None
    planned = plan.strategy_of() if plan is not None else {}
    out = []
    for layer in graph.layers:
        for m in layer.measured:
            where = f"model.measured: layer {layer.name!r} at tp {m.tp}"
            if m.tp > max(layer.max_tp, 1):
                out.append(f"{where} is never used: the layer's max_tp is {max(layer.max_tp, 1)} "
                           "(no plan splits it further; measure at a degree up to it)")
            elif offered is not None and m.tp not in offered and not (
                    layer.name in planned and planned[layer.name].tp == m.tp):
                shown = offered | {s.tp for s in planned.values()}
                out.append(f"{where} is never used: the search space's tp degrees are "
                           f"{', '.join(map(str, sorted(shown)))} (add it to "
                           "search.tp_degrees, or measure at one of them)")
            elif layer.name in planned and planned[layer.name].tp != m.tp and not any(
                    n.tp == planned[layer.name].tp for n in layer.measured):
                out.append(f"{where}: the spec's plan runs that layer at tp "
                           f"{planned[layer.name].tp}, which estimate prices analytically (solve's "
                           "search can use the measurement)")
    return out


def _build_fleet_spec(model: SpecFile, data: dict[str, Any], path: Path, graph: LayerGraph | None,
                      out: ProblemList) -> Spec:
    """A spec whose cluster is a fleet of groups (:mod:`autopar_opt.spec.build_fleet`).
    One group is a plain cluster (everything as today). With several, the training
    is checked against every group's device, the search space without a device
    count (stages are placed per group), and a hand-written plan is refused."""
    fleet = build_fleet(model.cluster, out)
    groups = list(fleet.groups) if fleet is not None else []
    first = groups[0] if groups else None
    several_devices = len(groups) > 1
    training = build_training(model.training, graph, first, out, check_device=not several_devices)
    for g in groups[1:]:
        build_training(model.training, graph, g, out, check_device=False)
    if several_devices:
        fleet_dtype_problem(model.training.dtype, "dtype" in model.training.model_fields_set,
                            fleet, out)
        fleet_reserve_problem(model.training.memory_reserve_gib, fleet, out)
    if graph is not None and fleet is not None and training is not None:
        # the attention core each group's GPU runs decides what it keeps
        rebuild, training = attention_rule.reconcile_fleet(model.model, graph, training, fleet, out)
        if rebuild:
            graph = build_graph(model.model, model.training.seq_len, out, flash_attention=False)
    several = len(model.cluster.groups) > 1      # as written: every problem in one pass
    if several:
        # no framework runs one pipeline over groups of different devices, and export
        # refuses a fleet plan: the free per-layer space is searched
        target, notice = Target("none", "", "cluster.groups"), (
            "a plan on a fleet of several groups is not exported to a framework; the search is "
            "the free per-layer space (target: none)")
        if model.target is not None and (model.target if isinstance(model.target, str)
                                         else model.target.framework) != "none":
            out.add("target", model.target if isinstance(model.target, str)
                    else model.target.framework, "a fleet of several groups has no framework "
                    "target (export refuses fleet plans)", "use target: none, or one group")
    else:
        target, notice = build_target(model.target, graph, training, model.search, out)
    space = build_space(model.search, None if several else first, graph, training, out, target)
    if several:
        # the fleet's configurations carry no virtual-pipeline degree (search/fleet.py):
        # an interleaved schedule listed here was searched as 1F1B, without a word
        for i, sched in enumerate(model.search.schedules or ()):
            if Schedule(sched) is Schedule.interleaved:
                out.add(f"search.schedules[{i}]", sched, "the interleaved schedule is not "
                        "searched on a fleet of several groups (its configurations have no "
                        "virtual pipeline stages)", "drop it (a fleet searches 1F1B and GPipe), "
                        "or write a spec for one group, where Megatron's interleaving is searched")
    if several and model.search.stage_devices != "congruent":
        out.add("search.stage_devices", model.search.stage_devices, "free stage sizes are not "
                "searched on a fleet of several groups (each group is split into congruent stages)",
                "drop search.stage_devices, or use one group")
    solver = build_solver(model.solver, out)
    cost = build_cost_params(model.cost_model, first, out, Path(path).parent)
    plan = None
    if several and model.plan is not None:
        out.add("plan", "given", "a hand-written plan on a fleet of several groups is not "
                "supported (a plan would need every stage's group)", "drop the plan section")
    elif model.plan is not None:
        plan = build_plan(model.plan, graph, first, training, out, Path(path).parent)
    out.raise_if_any()
    return Spec(Path(path), graph, first, training, space, solver, cost, plan, data,
                [notice] if notice else [], fleet if several else None)


def load_spec(path: str | Path) -> Spec:
    """Load the spec at ``path`` (YAML, TOML or JSON; sections may be split into files).

    Raises
    ------
    SpecError
        With every problem found: unreadable files, schema violations, unknown
        keys (with a suggestion), unknown zoo names, broken cross-field rules.
    """
    refuse_empty_path(path)
    path = Path(path)
    data = read_mapping(path)
    wrong = wrong_input(data, path, "a model spec (model, cluster, training)", ("spec",))
    if wrong:                  # another command's file: said as such, not as unknown keys
        raise SpecError([wrong])
    merged, files, problems = resolve_includes(data, path)
    out = ProblemList(str(path), files)
    out.extend(problems)
    failed = {key for key in INCLUDABLE if isinstance(data.get(key), str) and key not in files}
    return build_spec(merged, path, files, out, failed)
