"""``autopar estimate FLEET_SPEC --plan PLAN_JSON``: a fleet solve's plan priced again.

The plan.json of ``autopar solve`` on a cluster of several groups
(:mod:`autopar_opt.search.fleet_document`: ``fleet``, ``shape``, ``plan``, ``metrics``,
``placement``) was refused by ``estimate --plan`` (QA round 36), although the cost model
prices such a plan on its own: a pipeline whose stages run on groups with
:func:`~autopar_opt.cost.evaluate.evaluate` on the :class:`~autopar_opt.ir.fleet.Fleet`,
data-parallel replica classes with :func:`~autopar_opt.cost.replicas.evaluate_replicas`,
the two functions the fleet search priced it with. This module reads the plan back
(group names mapped to the spec's groups by name, each strategy's group index with them),
prices it under the spec's fleet, training and cost model, and gives the same keys as the
solve's plan.json: ``metrics`` (with its 80% ``interval``,
:func:`~autopar_opt.cost.interval.fleet_interval`) and ``placement`` (per stage: group,
ranks, time, memory against its group's capacity). The same plan under the same spec
gives the figures the solve wrote; what differs from the case the file records (a group's
device or node count, the batch, ...) is said, with the recorded iteration time beside
the new one (:class:`~autopar_opt.cli.reprice.Repriced`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from autopar_opt.cli.errors import CommandError
from autopar_opt.cli.reprice import Repriced, recorded_time
from autopar_opt.core.errors import SpecError, SpecProblem

#: What a refused fleet plan is told to give.
GIVE = ("give the plan.json `autopar solve --out DIR` wrote for this fleet spec (or its "
        "hand-edited copy)")


def _problem(file: str, key: str, value: Any, rule: str, fix: str = GIVE) -> CommandError:
    return CommandError([SpecProblem(file, key, value, rule, fix)], "invalid plan")


def fleet_plan_document(plan_file: str) -> dict[str, Any] | None:
    """The fleet plan.json at ``plan_file``, or None for any other document (the one-cluster
    route reads it and says what it is). An unreadable file is an ``invalid plan``."""
    from autopar_opt.core import reading
    from autopar_opt.spec.doc_kinds import is_fleet

    try:
        reading.refuse_empty_path(plan_file)
        doc = reading.read_json(Path(plan_file), reading.DOCUMENT)
    except SpecError as exc:
        raise CommandError(exc.problems, "invalid plan") from None
    # a document with a fleet object is a fleet's (a one-cluster plan.json has none): one
    # whose shape was deleted is refused by its key, not as a one-cluster plan of a fleet spec
    return doc if is_fleet(doc) or (isinstance(doc, dict) and isinstance(doc.get("fleet"), dict)) \
        else None


def recorded_groups(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The groups a fleet plan.json records (``fleet.groups``), each a mapping; [] where the
    file has none in that form (a hand-edited file)."""
    recorded = doc.get("fleet") if isinstance(doc.get("fleet"), dict) else {}
    groups = recorded.get("groups") if isinstance(recorded.get("groups"), list) else []
    return [g for g in groups if isinstance(g, dict)]


def _group_maps(doc: dict[str, Any], fleet, file: str) -> tuple[list[str], dict[str, int]]:
    """The file's group names in its own order (a strategy's ``group`` indexes them) and
    the spec's index of each name; a group the plan uses that the spec lacks is refused."""
    names = [g.get("name") for g in recorded_groups(doc)]
    if not names or not all(isinstance(n, str) for n in names):
        raise _problem(file, "fleet.groups", None, "lists no groups by name (a fleet plan.json "
                       "records each group it was solved on: name, device, nodes, ...)")
    index = {g.name: i for i, g in enumerate(fleet.groups)}
    placement = doc.get("placement") if isinstance(doc.get("placement"), list) else []
    used = {row.get("group") for row in placement
            if isinstance(row, dict) and isinstance(row.get("group"), str)}
    missing = sorted(str(n) for n in used if n not in index)
    if missing:
        raise _problem(file, "placement[].group", missing,
                       f"the plan runs on group(s) {', '.join(missing)}, which the spec's "
                       f"cluster.groups ({', '.join(index)}) does not have",
                       "give the fleet spec the plan was solved with, or name its groups as "
                       "the plan.json's fleet.groups does")
    return names, index


def _pipeline(plan: dict[str, Any], names: list[str], index: dict[str, int], file: str,
              key: str = "plan"):
    """``plan`` (a fleet plan.json's pipeline entry) as a :class:`~autopar_opt.ir.plan.Plan`
    on the spec's groups: ``stage_groups`` and every strategy's ``group``, each a group's
    name or the file's index of it (a pipeline's stage groups are written by name, a replica
    class's by index), mapped to the spec's indices."""
    from autopar_opt.ir.plan import Plan

    def spec_index(recorded: Any, where: str) -> int:
        name = recorded if isinstance(recorded, str) else (
            names[recorded] if isinstance(recorded, int) and not isinstance(recorded, bool)
            and 0 <= recorded < len(names) else None)
        if name not in index:
            raise _problem(file, where, recorded, "names no group of the plan.json's "
                           f"fleet.groups ({', '.join(map(str, names))}) that the spec has")
        return index[name]

    for name, what in (("stage_groups", "each stage's group, by name or by the index of the "
                        "plan.json's fleet.groups"), ("stages", "the stages, each its layers and "
                                                   "their strategies")):
        if not isinstance(plan.get(name), list):
            # iterated as it was, a string named its letters as groups, None a TypeError
            state = "missing" if name not in plan else "not a list"
            raise _problem(file, f"{key}.{name}", plan.get(name),
                           f"is {state}: a fleet plan's pipeline lists {what}")
    try:
        data = copy.deepcopy(plan)
        data["stage_groups"] = [spec_index(g, f"{key}.stage_groups[{i}]")
                                for i, g in enumerate(plan["stage_groups"])]
        for i, stage in enumerate(data["stages"]):
            for j, s in enumerate(stage["strategies"]):
                s["group"] = spec_index(s.get("group", 0),
                                        f"{key}.stages[{i}].strategies[{j}].group")
        malformed = _entry_problems(data, file, key)
        if malformed:
            raise CommandError(malformed, "invalid plan")
        return Plan.from_dict(data)
    except CommandError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise _problem(file, key, None, f"is not a fleet plan's pipeline entry ({type(exc).__name__}: "
                       f"{exc})") from None


def _entry_problems(data: dict[str, Any], file: str, key: str) -> list[SpecProblem]:
    """The problems of a pipeline entry (its groups already mapped to indices) against the
    layout a one-cluster plan's entry is checked with (degrees >= 1, ZeRO 0-3, whole
    micro-batches, pp = the stages, ...): Plan.from_dict's int() took 1.5 micro-batches as
    1 and '8' as 8, and nothing refused ZeRO -1 or pp 0 (QA round 36)."""
    import re

    from autopar_opt.core.document import EstimatePlanDoc, document_problems

    out = []
    for text in document_problems(data, EstimatePlanDoc)[:8]:
        found = re.match(r"(missing key )?'([^']*)'", text)
        where = f"{key}.{found.group(2)}" if found else key
        rule = text if found is None or found.group(1) else text[found.end():].lstrip(" =:")
        out.append(SpecProblem(file, where, None, rule or text, GIVE))
    return out


def fleet_plan(doc: dict[str, Any], fleet, file: str):
    """The plan of a fleet plan.json on ``fleet`` (the spec's): a pipeline
    :class:`~autopar_opt.ir.plan.Plan` or a :class:`~autopar_opt.ir.replicas.ReplicaPlan`."""
    from autopar_opt.ir.replicas import ReplicaClass, ReplicaPlan

    plan = doc.get("plan")
    if not isinstance(plan, dict):
        status = doc.get("status")
        if plan is not None:        # a hand-edited entry, whatever the solve ended
            kind = {list: "an array", str: "a string", bool: "a boolean"}.get(type(plan), "a number")
            raise _problem(file, "plan", None, f"is {kind}, not an object (a fleet plan.json's "
                           "plan: stages with their groups, or replica classes)")
        raise _problem(file, "plan", None, f"has no plan: the fleet solve ended {status!r}"
                       if isinstance(status, str) else "holds no 'plan' object")
    shape = doc.get("shape")
    if shape not in ("pipeline", "replicas"):
        # read as a pipeline whatever it said, a replicas plan was refused as 'not a fleet
        # plan's pipeline entry (KeyError: 'stage_groups')'
        raise _problem(file, "shape", shape, "is neither 'pipeline' (one pipeline over the "
                       "groups: plan.stages and plan.stage_groups) nor 'replicas' (data-"
                       "parallel replica classes: plan.classes)", "write 'replicas' where "
                       "the plan holds classes, else 'pipeline' (as the solve wrote it)")
    names, index = _group_maps(doc, fleet, file)
    if shape != "replicas":
        return _pipeline(plan, names, index, file)
    classes = plan.get("classes")
    if not isinstance(classes, list) or not classes:
        raise _problem(file, "plan.classes", None, "a replicas plan lists its classes")
    out = []
    for t, c in enumerate(classes):
        key = f"plan.classes[{t}]"
        if not isinstance(c, dict) or not isinstance(c.get("plan"), dict) \
                or not isinstance(c.get("groups"), list) or isinstance(c.get("batch"), bool) \
                or not isinstance(c.get("batch"), int):
            raise _problem(file, key, None, "a class holds groups (names), batch and plan")
        groups = []
        for g in c["groups"]:
            if not isinstance(g, str) or g not in index:
                raise _problem(file, f"{key}.groups", g, "names no group of the spec's "
                               f"cluster.groups ({', '.join(index)})")
            groups.append(index[g])
        out.append(ReplicaClass(tuple(groups), c["batch"],
                                _pipeline(c["plan"], names, index, file, f"{key}.plan")))
    return ReplicaPlan(out)


def fleet_differences(doc: dict[str, Any], spec) -> list[str]:
    """Each group setting and training setting the file records that the spec changes."""
    out = []
    recorded = {g.get("name"): g for g in recorded_groups(doc) if isinstance(g.get("name"), str)}
    for g in spec.fleet.groups:
        was = recorded.get(g.name)
        if was is None:
            out.append(f"fleet.groups {g.name} (not in the plan's file)")
            continue
        for key, now in (("device", g.device.name), ("nodes", g.nodes),
                         ("gpus_per_node", g.gpus_per_node)):
            if key in was and was[key] != now:
                out.append(f"fleet.groups.{g.name}.{key} {was[key]!r} -> {now!r}")
    training = (doc.get("spec") or {}).get("training") if isinstance(doc.get("spec"), dict) else None
    training = training if isinstance(training, dict) else {}
    for key in ("global_batch_size", "seq_len", "dtype", "optimizer"):
        now = getattr(spec.training, key)
        if key in training and training[key] != now:
            out.append(f"training.{key} {training[key]!r} -> {now!r}")
    runtime = training.get("runtime")
    if isinstance(runtime, dict) and runtime.get("name") not in (None, spec.training.runtime.name):
        out.append(f"training.runtime {runtime['name']!r} -> {spec.training.runtime.name!r}")
    return out


def price_fleet_plan(plan, spec) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """``(metrics, metrics dict, placement rows)`` of ``plan`` under ``spec``'s fleet, in
    the keys of the fleet plan.json (the solve's own mapping,
    :func:`~autopar_opt.search.fleet_document.fleet_metrics_dict` and
    :func:`~autopar_opt.search.fleet_document.fleet_placement`). Raises
    :class:`~autopar_opt.ir.pipeline.PlanError`."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.cost.replicas import evaluate_replicas
    from autopar_opt.search.fleet_document import fleet_metrics_dict, fleet_placement

    fleet, training, graph = spec.fleet, spec.training, spec.graph
    if hasattr(plan, "classes"):
        metrics = evaluate_replicas(plan, graph, fleet, training, spec.cost_params)
    else:
        metrics = evaluate(plan, graph, fleet, training, spec.cost_params)
    return (metrics, fleet_metrics_dict(plan, metrics, graph, fleet, training, spec.cost_params),
            fleet_placement(plan, fleet, metrics, training.global_batch_size))


def _text(spec, doc: dict[str, Any], metrics: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    from autopar_opt.reports.formatting import INTERVAL_GLOSS, fmt_pct

    fl = spec.fleet
    lines = [f"{spec.graph.name} on {fl.name} ("
             + " + ".join(f"{g.name} {g.nodes}x{g.gpus_per_node} {g.device.name}" for g in fl.groups)
             + f"): fleet plan, shape {doc.get('shape')}",
             f"iteration time:   {metrics['iteration_time_s']:.6g} s",
             f"throughput:       {metrics['samples_per_s']:.2f} samples/s, "
             f"{metrics['tokens_per_s']:.0f} tokens/s",
             f"MFU:              {fmt_pct(metrics['mfu'], 1)}",
             f"{metrics['interval']['text']} {INTERVAL_GLOSS}",
             "per stage (time per micro-batch, peak memory / its group's capacity, GiB):"]
    for r in rows:
        who = f"class {r['class']} (batch {r['batch']}) " if r["class"] is not None else ""
        mark = "fits" if r["peak_memory_gib"] <= r["capacity_gib"] else "DOES NOT FIT"
        lines.append(f"  {who}stage {r['index']} on {r['group']} ranks {r['first_rank']}-"
                     f"{r['last_rank']}: {r['time_s']:.6g} s, {r['peak_memory_gib']:.2f} / "
                     f"{r['capacity_gib']:.2f}  {mark}  [{', '.join(r['strategies'])}]")
    if metrics.get("sync_s") is not None and doc.get("shape") == "replicas":
        lines.append(f"cross-group gradient all-reduce: {metrics['sync_s']:.6g} s")
    # a pipeline's communication per kind, as estimate prints it on one cluster; the replica
    # classes have no one critical path: each class's own (metrics.classes)
    from autopar_opt.cli.commands import communication_lines

    for c in metrics.get("classes") or []:
        lines += [f"class {c['class']}: {line}" if line.startswith("communication") else line
                  for line in communication_lines(c.get("communication") or {})]
    return lines + communication_lines(metrics.get("communication") or {})


def estimate_fleet_plan(spec_path: str, plan_file: str, doc: dict[str, Any],
                        json_output: bool) -> tuple[list[str] | dict[str, Any], bool]:
    """Re-price the fleet plan.json ``doc`` (read from ``plan_file``) under the spec at
    ``spec_path``: the text lines (or the ``--json`` document) and whether every stage fits."""
    from autopar_opt.ir.pipeline import PlanError
    from autopar_opt.search.fleet_document import fleet_case, fleet_dict, fleet_plan_dict
    from autopar_opt.spec import load_spec
    from autopar_opt.spec.plan_json import other_model_problem

    spec = load_spec(spec_path)
    if spec.fleet is None:
        groups = [str(g.get("name")) for g in recorded_groups(doc)]
        named = f" ({', '.join(groups)})" if groups else " (its fleet.groups lists none)"
        raise _problem(str(plan_file), "fleet", None,
                       f"is the plan.json of a fleet of several groups{named} "
                       f"but {spec_path} has one cluster: a fleet plan is priced on the fleet it "
                       "runs on", "give the fleet spec it was solved with (its cluster.groups); "
                       "to price one group's part alone, estimate a spec of that group with the "
                       "stages it runs")
    other = other_model_problem(doc, spec.graph, plan_file, spec_path)
    if other is not None:
        raise CommandError([other], "invalid plan")
    plan = fleet_plan(doc, spec.fleet, str(plan_file))
    from autopar_opt.ir.training import Schedule

    pipelines = [c.plan for c in plan.classes] if hasattr(plan, "classes") else [plan]
    if any(p.schedule is Schedule.interleaved for p in pipelines):
        # as the search (README "Mixed fleets"): a pipeline over groups runs 1F1B or GPipe
        raise _problem(str(plan_file), "plan.schedule", "interleaved", "the interleaved "
                       "schedule is not priced on a fleet of several groups (the fleet search "
                       "refuses it too)", "give a 1f1b or gpipe plan, or estimate the plan "
                       "on one group's cluster")
    try:
        metrics, out, rows = price_fleet_plan(plan, spec)
    except PlanError as exc:
        case = fleet_differences(doc, spec)
        raise _problem(str(plan_file), "plan", None, f"cannot run on {spec_path}'s fleet: {exc}"
                       + (f" (the plan was made for another case: {', '.join(case)})" if case else ""),
                       f"{GIVE}; or solve {spec_path} for a plan of its own") from None
    repriced = Repriced(str(plan_file), str(spec_path), recorded_time(doc),
                        fleet_differences(doc, spec))
    repriced.priced(metrics.iteration_time_s)
    fits = all(r["peak_memory_gib"] <= r["capacity_gib"] for r in rows)
    if json_output:
        # with the fleet it was priced on, so that this document is itself a plan file
        # estimate --plan reads (as a one-cluster estimate --json is)
        return ({"spec": str(spec_path), "fleet": fleet_dict(spec.fleet, spec.training.dtype),
                 "shape": doc.get("shape"), "plan": fleet_plan_dict(plan, spec.fleet), "metrics": out,
                 "placement": rows,
                 "assumed": fleet_case(spec.graph, spec.fleet, spec.training, spec.cost_params),
                 **({"notices": list(spec.notices)} if spec.notices else {}),
                 **repriced.document()}, fits)
    notes = list(spec.notices) + repriced.notes
    return _text(spec, doc, out, rows) + [f"note: {n}" for n in notes], fits
