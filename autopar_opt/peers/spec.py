"""Specs whose ``problem:`` is a peer's own instance (Piper or PaSE), read as it ships.

```yaml
problem: {format: piper, file: bert32a100.json, devices: 64, memory_per_device_gib: 8,
          bandwidth_gib_per_s: 25}          # microbatches: default the file's mbsInBatch
problem: {format: pase, file: pase_alexnet_p4.json.gz}
solver: {name: dp, time_limit_s: 60}
```

Paths are relative to the spec file; GiB = 2^30 bytes. ``problem.plan`` is a
plan in the peer's terms, priced and compared with the optimum. Every
mistake — in the spec or in the instance file — is a :class:`SpecError`
naming the file, the key, the value, the rule and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Discriminator, Field, Tag, ValidationError

from autopar_opt.core import limits

from autopar_opt.core.reading import describe_path
from autopar_opt.peers.pase.format import PaseInstance, load_pase
from autopar_opt.peers.piper.format import PiperInstance, load_piper
from autopar_opt.peers.piper.model import PiperPlan, PiperStage
from autopar_opt.core.errors import ProblemList, SpecError, SpecProblem, did_you_mean, one_of
from autopar_opt.spec.sections import Section, SolverSection, documented_field
from autopar_opt.spec.translate import problems_from_validation

GIB = float(1 << 30)
#: Instance formats of ``problem.format``.
FORMATS = ("piper", "pase")
PosInt = Annotated[int, Field(gt=0)]


class PiperStageSpec(Section):
    """One stage of a Piper plan, in the file's node ids."""

    nodes: list[int] = documented_field("Node ids (the file's ids) of the stage.", [0, 1, 2], min_length=1)
    d: PosInt = documented_field("Data-parallel degree (must divide N).", 2)
    t: PosInt = documented_field("Tensor-parallel degree (a TMPCs key of every node).", 1, default=1)
    tmpcs: Optional[list[str]] = documented_field("TMPC id per node, in `nodes` order; default: the first TMPC.",
                                    ["vanilla", "activation recomp", "vanilla"], default=None)


class PiperPlanSpec(Section):
    """A Piper plan: stages in pipeline order."""

    stages: list[PiperStageSpec] = documented_field("Stages, first pipeline stage first.",
                                      [{"nodes": [0, 1], "d": 1, "t": 1}], min_length=1)


class PiperProblem(Section):
    """A Piper instance (github.com/msr-fiddle/piper JSON) and the run's settings."""

    format: Literal["piper"] = documented_field("Instance format.", "piper")
    file: str = documented_field("Piper JSON file, relative to the spec.", "bert32a100.json")
    devices: PosInt = documented_field("Number of devices k.", 64, le=limits.MAX_DEVICES)
    memory_per_device_gib: Optional[float] = documented_field("Memory per device M, GiB (2^30 bytes); default: "
                                                "the file's maxMemoryPerDevice.", 8.0, default=None,
                                                gt=0, le=limits.MAX_FLOAT / GIB)
    bandwidth_gib_per_s: Optional[float] = documented_field("Bandwidth B, GiB/s; default: the file's bandwidth.",
                                              25.0, default=None, gt=0, le=limits.MAX_FLOAT / GIB)
    microbatches: Optional[PosInt] = documented_field("Micro-batches per batch N; default: the file's mbsInBatch.",
                                        1920, default=None, le=limits.MAX_MICROBATCHES)
    plan: Optional[PiperPlanSpec] = documented_field("A plan to price and compare with the optimum.",
                                       {"stages": [{"nodes": [0], "d": 1}]}, default=None)


class PasePlanSpec(Section):
    """A PaSE strategy: one configuration index per vertex (vertex-id order)."""

    configs: list[Annotated[int, Field(ge=0)]] = documented_field("Configuration index of every vertex.", [0, 3, 1],
                                                   min_length=1)


class PaseProblem(Section):
    """A PaSE cost-table file (``.json.gz`` or ``.json``)."""

    format: Literal["pase"] = documented_field("Instance format.", "pase")
    file: str = documented_field("PaSE table file, relative to the spec.", "pase_alexnet_p4.json.gz")
    plan: Optional[PasePlanSpec] = documented_field("A strategy to price and compare with the optimum.",
                                      {"configs": [0, 0, 0]}, default=None)


ProblemSection = Annotated[Union[Annotated[PiperProblem, Tag("#piper")], Annotated[PaseProblem, Tag("#pase")]],
                           Discriminator(lambda v: "#pase" if isinstance(v, dict) and v.get("format") == "pase"
                                         else "#piper")]


class PeerSpecFile(Section):
    """A spec that solves a peer's own problem instead of a model on a cluster."""

    description: Optional[str] = documented_field("Free text.", "Piper BERT-32 on 64 devices", default=None)
    problem: ProblemSection = documented_field("The peer instance: {format: piper|pase, file, ...}.",  # type: ignore[valid-type]
                                 {"format": "pase", "file": "pase_alexnet_p4.json.gz"})
    solver: SolverSection = documented_field("Solver options.", {"name": "dp"}, default_factory=SolverSection)


@dataclass
class PeerSpec:
    """A loaded peer spec: the instance (settings applied), the user's plan, solver options."""

    path: Path
    format: str
    instance: PiperInstance | PaseInstance
    plan: Any
    solver: SolverSection
    settings: dict[str, Any]


def _piper_plan(spec: PiperPlanSpec, inst: PiperInstance, out: ProblemList) -> PiperPlan | None:
    index = inst.index_of()
    stages = []
    for i, st in enumerate(spec.stages):
        key = f"problem.plan.stages[{i}]"
        bad = [nid for nid in st.nodes if nid not in index]
        if bad:
            out.add(f"{key}.nodes", bad, "not node ids of the instance file", "use ids from the file's nodes[].id")
            continue
        if st.t not in inst.tmpcs:
            out.add(f"{key}.t", st.t, "no node has TMPCs at this tensor degree",
                    f"use one of {inst.degrees}")
            continue
        names = st.tmpcs or [None] * len(st.nodes)
        if len(names) != len(st.nodes):
            out.add(f"{key}.tmpcs", names, f"needs one TMPC id per node ({len(st.nodes)})",
                    "list one TMPC id per node, or leave tmpcs out")
            continue
        choice = []
        for nid, name in zip(st.nodes, names):
            lst = inst.tmpcs[st.t][index[nid]]
            ids = [c.name for c in lst]
            if not ids or (name is not None and name not in ids):
                out.add(f"{key}.tmpcs", name, f"node {nid} has no such TMPC at t = {st.t}",
                        f"use one of {ids}" if ids else f"node {nid} has no TMPCs at t = {st.t}")
                choice.append(0)
            else:
                choice.append(0 if name is None else ids.index(name))
        stages.append(PiperStage([index[n] for n in st.nodes], st.d, st.t, choice))
    return PiperPlan(stages)


def instance_path(spec_path: Path, file: str) -> Path:
    """The instance ``file`` (relative to the spec's folder, or absolute) as one absolute path
    without ``..`` or ``.`` parts (symbolic links followed), the name every output shows: the
    spec's folder joined to the file read ``sub/../../data/x.json`` in the report."""
    target = spec_path.parent / file
    try:
        return target.resolve()
    except (OSError, RuntimeError):         # a link loop: the joined path, made absolute
        return Path(os.path.abspath(target))


def build_peer_spec(data: dict[str, Any], path: Path) -> PeerSpec:
    """Validate a ``problem:`` spec and load its instance; raises SpecError with every problem."""
    out = ProblemList(str(path))
    problem = data.get("problem") if isinstance(data, dict) else None
    fmt = problem.get("format", "piper") if isinstance(problem, dict) else "piper"
    if fmt not in FORMATS:       # else the discriminator checks it as a misspelt Piper instance
        raise SpecError([SpecProblem(str(path), "problem.format", fmt, "unknown instance format",
                                     f"use one of {one_of(FORMATS)}{did_you_mean(str(fmt), FORMATS)}")])
    try:
        model = PeerSpecFile.model_validate(data)
    except ValidationError as exc:
        out.extend(problems_from_validation(PeerSpecFile, exc, out.file_of))
        out.raise_if_any()
        raise
    prob = model.problem
    target = instance_path(path, prob.file)
    what = describe_path(target)
    if what is not None:
        raise SpecError([SpecProblem(str(path), "problem.file", prob.file, f"{target} {what}",
                                     "give the path of the instance file relative to the spec file")])
    if isinstance(prob, PaseProblem):
        inst = load_pase(target)
        plan = None
        if prob.plan is not None:
            cfg = prob.plan.configs
            if len(cfg) != inst.n or any(c >= s for c, s in zip(cfg, inst.sizes)):
                out.add("problem.plan.configs", cfg, f"needs {inst.n} indices, each below its vertex's "
                        f"number of configurations", "give one valid configuration index per vertex")
            plan = list(cfg)
        out.raise_if_any()
        return PeerSpec(path, "pase", inst, plan, model.solver, {"file": str(target)})
    inst = load_piper(target)
    inst.devices = prob.devices
    if prob.memory_per_device_gib is not None:
        inst.memory_bytes = prob.memory_per_device_gib * GIB
    if prob.bandwidth_gib_per_s is not None:
        inst.bandwidth = prob.bandwidth_gib_per_s * GIB
    if prob.microbatches is not None:
        inst.microbatches = prob.microbatches
    plan = _piper_plan(prob.plan, inst, out) if prob.plan is not None else None
    out.raise_if_any()
    if plan is not None:         # the rules evaluate_piper prices by, checked before the solve
        from autopar_opt.peers.piper.evaluate import PiperPlanError, check_plan
        try:
            check_plan(inst, plan)
        except PiperPlanError as exc:
            raise SpecError([SpecProblem(str(path), "problem.plan", None, f"not a valid Piper plan: "
                                         f"{exc}", "give stages that cover every node once, in "
                                         "edge order, with d dividing the micro-batches and at "
                                         "most the devices")]) from None
    settings = {"file": str(target), "devices": inst.devices, "memory_bytes": inst.memory_bytes,
                "bandwidth_bytes_per_s": inst.bandwidth, "microbatches": inst.microbatches}
    return PeerSpec(path, "piper", inst, plan, model.solver, settings)
