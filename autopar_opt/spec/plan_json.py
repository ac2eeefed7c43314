"""A plan autopar wrote, brought back as a spec's plan: ``autopar estimate SPEC --plan FILE``.

FILE is the ``plan.json`` of ``autopar solve --out DIR`` (or the JSON of ``autopar
estimate --json``), possibly edited by hand. Its ``plan`` entry is re-priced under the
spec's cluster, training and cost model, so a user can check an edit, or price the plan
on another cluster, without a search.

The plan goes through the same checks as a spec's own stage-by-stage plan
(:func:`autopar_opt.spec.build_plan.build_plan`: every layer placed once, degrees that
multiply to their stage's devices and divide the micro-batch, pipeline and context rules):
its ``plan`` entry is rewritten into that form and the spec is built with it, each
problem naming FILE and the key under ``plan`` it would have in FILE. Before that,
:func:`autopar_opt.core.document.plan_problems` checks the entry's own fields (as
``autopar export`` does), and the model plan.json records (``spec.model``: layer count and
parameters) must be the spec's: a plan of another model is refused, naming each field
that differs. A cluster, batch, sequence, precision or runtime that differs from what
plan.json records is not refused (pricing a plan elsewhere is the point) but said
(:func:`case_differences`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopar_opt.core.errors import SpecError, SpecProblem

#: What a refusal of FILE tells the user to do.
GIVE_PLAN = "give the plan.json written by `autopar solve --out DIR` (or its hand-edited copy)"

#: Why a fleet plan.json is refused here, and what to do instead: a fleet plan is not a
#: spec's plan (a spec's plan cannot name a stage's group, ``spec.build_fleet``);
#: ``autopar estimate FLEET_SPEC --plan FILE`` prices it on its fleet
#: (:mod:`autopar_opt.cli.reprice_fleet`) before this reader is reached.
FLEET_RULE = ("is the plan.json of a fleet of several groups, not a plan of one cluster")
FLEET_FIX = ("price it under the fleet spec it was solved with: `autopar estimate FLEET_SPEC "
             "--plan {file}`")


def _refuse(file: str, key: str, value: Any, rule: str, fix: str = GIVE_PLAN) -> SpecError:
    return SpecError([SpecProblem(file, key, value, rule, fix)])


def read_plan_document(plan_path: str | Path) -> dict[str, Any]:
    """The JSON document at ``plan_path`` holding a model's plan, else a :class:`SpecError`
    (unreadable, another command's output, no plan, or a malformed ``plan`` entry)."""
    from autopar_opt.core import reading
    from autopar_opt.core.document import plan_problems
    from autopar_opt.spec.doc_kinds import (is_capacity, is_fleet, is_operator_sharding,
                                            is_placement, peer_format)

    reading.refuse_empty_path(plan_path)
    file = str(plan_path)
    doc = reading.read_json(Path(plan_path), reading.DOCUMENT)   # size, nesting, syntax
    if is_fleet(doc):
        raise _refuse(file, "fleet", None, FLEET_RULE, FLEET_FIX.format(file=file))
    what = ("a peer problem's plan.json (its plan is a peer's, not a model's layers)"
            if peer_format(doc) else
            "a placement.json (operator-graph nodes on devices, not a training plan)"
            if is_placement(doc) else
            "an operator-sharding plan.json (operators over a mesh, not layers)"
            if is_operator_sharding(doc) else
            "a capacity.json (a sweep: each scenario's plan.json is under scenarios/ID/)"
            if is_capacity(doc) else None)
    if what:
        raise _refuse(file, "", None, f"is {what}, not a plan of a model on one cluster")
    if not isinstance(doc, dict) or not isinstance(doc.get("plan"), dict):
        status = doc.get("status") if isinstance(doc, dict) else None
        rule = (f"has no plan: the solve ended {status!r}" if isinstance(status, str)
                else "holds no 'plan' object")
        raise _refuse(file, "plan", None, rule)
    stages = doc["plan"].get("stages")
    ranked = isinstance(stages, list) and any(isinstance(st, dict) and "first_rank" in st
                                              for st in stages)
    malformed = plan_problems(doc["plan"], ranked=ranked)
    if malformed:
        raise SpecError([SpecProblem(file, *_key_and_rule(m), GIVE_PLAN) for m in malformed[:8]])
    return doc


def _key_and_rule(problem: str) -> tuple[str, None, str]:
    """``'plan.pp': pp = 4 but ...`` -> (``plan.pp``, None, ``pp = 4 but ...``): the key
    :func:`~autopar_opt.core.document.plan_problems` names, and its words without it."""
    import re

    found = re.match(r"(?:missing key )?'(plan(?:[.\[][^']*)?)'(?::| =)?\s*", problem)
    if found is None or problem.startswith("missing key"):
        return (found.group(1) if found else "plan"), None, problem
    return found.group(1), None, problem[found.end():] or problem


def spec_plan_section(plan: dict[str, Any]) -> dict[str, Any]:
    """A document's ``plan`` entry in the form of a spec's stage-by-stage plan
    (:class:`autopar_opt.spec.schema.ExplicitPlanSpec`). What the document only states
    for reading (``pp``: the stage count; the ranks; ``recompute`` in words) is left
    out: :func:`read_plan_document` has checked it against the stages. A stage's
    ``devices`` is kept only where the plan has free stage sizes (``stage_devices``):
    congruent stages take ``N/pp`` devices of the cluster they are priced on."""
    free = plan.get("stage_devices")
    stages = []
    for i, st in enumerate(plan["stages"]):
        strategies = [{k: v for k, v in s.items() if k != "group"} for s in st["strategies"]]
        stage: dict[str, Any] = {"layers": list(st["layers"]), "strategies": strategies}
        if free is not None:
            stage["devices"] = free[i]
        stages.append(stage)
    return {"stages": stages, "microbatches": plan["microbatches"],
            "schedule": plan.get("schedule", "1f1b"), "vp_chunks": plan.get("vp_chunks", 1)}


def model_differences(doc: dict[str, Any], graph: Any) -> list[str]:
    """Each field of the model ``doc`` records (plan.json ``spec.model``) that differs
    from ``graph``: the layer count and the parameter count decide (a plan of another
    model); the name and the architecture line are named beside them. Empty for a
    document that records no model (``estimate --json``: the layer names decide)."""
    from autopar_opt.ir.arch import describe

    spec = doc.get("spec")
    recorded = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(recorded, dict):
        return []
    now = {"num_layers": len(graph), "params": graph.total_params()}
    diffs = [f"spec.model.{key} is {recorded[key]!r} in the plan's file but {value!r} "
             f"in the spec" for key, value in now.items()
             if isinstance(recorded.get(key), int) and recorded[key] != value]
    if not diffs:
        return []
    for key, value in (("name", graph.name),
                       ("architecture", describe(graph.arch) if graph.arch else None)):
        if isinstance(recorded.get(key), str) and value is not None and recorded[key] != value:
            diffs.append(f"spec.model.{key} is {recorded[key]!r} in the plan's file but "
                         f"{value!r} in the spec")
    return diffs


def other_model_problem(doc: dict[str, Any], graph: Any, plan_path: str | Path,
                        spec_path: str | Path) -> SpecProblem | None:
    """The refusal of a plan file made for another model than the spec's
    (:func:`model_differences`), naming the plan file; None when the models agree. Said the
    same by ``estimate --plan`` on one cluster and on a fleet (cli/reprice_fleet.py)."""
    diffs = model_differences(doc, graph)
    if not diffs:
        return None
    return SpecProblem(str(plan_path), "spec.model", None, "the plan was made for another model "
                       "than the spec's: " + "; ".join(diffs),
                       f"give the spec of the model the plan was made for, or solve {spec_path} "
                       "for a plan of its own model")


#: The settings plan.json records that the price depends on, read from the spec now.
_CASE = (("cluster", "name", lambda s: s.cluster.name),
         ("cluster", "num_devices", lambda s: s.cluster.num_devices),
         ("cluster", "gpus_per_node", lambda s: s.cluster.gpus_per_node),
         ("cluster", "device", lambda s: s.cluster.device.name),
         ("training", "global_batch_size", lambda s: s.training.global_batch_size),
         ("training", "seq_len", lambda s: s.training.seq_len),
         ("training", "dtype", lambda s: s.training.dtype),
         ("training", "optimizer", lambda s: s.training.optimizer))


def case_differences(doc: dict[str, Any], spec: Any) -> list[str]:
    """The cluster and training settings (and runtime name) plan.json records that differ
    from the spec's: the plan is re-priced under the spec's, which the output says."""
    recorded = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    out = []
    for section, key, now in _CASE:
        part = recorded.get(section)
        if isinstance(part, dict) and key in part and part[key] != now(spec):
            out.append(f"{section}.{key} {part[key]!r} -> {now(spec)!r}")
    runtime = (recorded.get("training") or {}).get("runtime") \
        if isinstance(recorded.get("training"), dict) else None
    if isinstance(runtime, dict) and runtime.get("name") not in (None, spec.training.runtime.name):
        out.append(f"training.runtime {runtime['name']!r} -> {spec.training.runtime.name!r}")
    return out


def load_spec_with_plan(spec_path: str | Path, plan_path: str | Path) -> tuple[Any, dict[str, Any]]:
    """The spec at ``spec_path`` with the plan of the document at ``plan_path`` as its plan
    (the spec's own ``plan`` section, if any, is replaced), and that document.

    Raises :class:`SpecError` naming ``plan_path`` and the key under ``plan`` for a plan
    the spec's model and cluster cannot run, and naming the differing fields for a plan
    of another model."""
    from autopar_opt.core.reading import refuse_empty_path
    from autopar_opt.spec.doc_kinds import wrong_input
    from autopar_opt.core.errors import ProblemList
    from autopar_opt.spec.loader import read_mapping, resolve_includes
    from autopar_opt.spec.spec import build_spec

    doc = read_plan_document(plan_path)
    refuse_empty_path(spec_path)
    path = Path(spec_path)
    data = read_mapping(path)
    wrong = wrong_input(data, path, "a model spec (model, cluster, training)", ("spec",))
    if wrong:
        raise SpecError([wrong])
    merged, files, problems = resolve_includes(data, path)
    if problems:                      # an unreadable included section: the spec's own problem
        raise SpecError(list(problems))
    # the model first: a plan of another model fails the layer checks with less helpful words
    bare = build_spec({k: v for k, v in merged.items() if k != "plan"}, path, files)
    if bare.fleet is not None:
        # the plan file named: it is the input that does not fit (QA round 36: the refusal
        # read as the spec's own problem, the plan.json unnamed)
        raise _refuse(str(path), "cluster.groups", None, "is a fleet of several groups, but "
                      f"{plan_path} is the plan.json of one cluster (its stages name no group)",
                      f"re-price {plan_path} under a spec of one cluster (one group's), or give "
                      "the plan.json a fleet solve of this spec wrote")
    other = other_model_problem(doc, bare.graph, plan_path, path)
    if other is not None:
        raise SpecError([other])
    # every problem of the plan names the plan's file (its keys are the ones it has there)
    out = ProblemList(str(path), {**files, "plan": str(plan_path)})
    had_plan = merged.get("plan") is not None
    merged = {**merged, "plan": spec_plan_section(doc["plan"])}
    try:
        spec = build_spec(merged, path, out.section_files, out)
    except SpecError as exc:
        case = case_differences(doc, bare)
        if case:           # why a plan that ran where it was made does not run here
            exc = SpecError([*exc.problems, SpecProblem(
                str(plan_path), "spec", None, "the plan was made for another case than the "
                "spec's: " + ", ".join(case), f"re-price it under the case it was made for, or "
                f"solve {path} for a plan of this case")])
        raise exc from None
    if had_plan:
        spec.notices.append(f"the spec's own plan section is not priced: {plan_path}'s plan "
                            "replaces it")
    return spec, doc
