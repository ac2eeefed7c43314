"""``autopar export PLAN_JSON --to megatron|torchtitan|deepspeed [-o FILE]``.

Sits above :mod:`autopar_opt.export` and :mod:`autopar_opt.spec` (it reads the
spec a plan was solved from), so neither of those imports the other's CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import typer

from autopar_opt.cli.errors import CommandError, emit, refuse
from autopar_opt.core.errors import SpecProblem
from autopar_opt.core.files import COMMAND_LINE

from autopar_opt.export import TARGETS, ExportError, export_plan
from autopar_opt.spec.doc_kinds import (PEER_FORMATS, is_capacity, is_fleet, is_operator_sharding,
                                        is_placement, peer_format)
from autopar_opt.ir.arch import describe
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.target import launch_notice, optimizer_notice


def _fail(message: str, file: str = "", rule: str = "", fix: str = "", key: str = "",
          value: Any = None) -> NoReturn:
    """Refuse with ``message`` (the text on stderr) and its fields (file, key, value, rule,
    fix: the JSON error object of ``--json``, :mod:`autopar_opt.cli.errors`)."""
    refuse(message, file or COMMAND_LINE, rule or message, fix, key=key, value=value,
           kind="invalid plan" if file and file != COMMAND_LINE else "invalid option")


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename (the shared writer: never a
    half-written output, the same umask-respecting mode as every output)."""
    from autopar_opt.core.files import write_atomic
    write_atomic(path, text)


def export_command(plan_json: str, target: str, output: str | None, spec_path: str | None,
                   version: str | None = None, json_output: bool = False) -> int:
    """Load the plan and its spec, export, write atomically; returns the exit code.

    With ``json_output``: on success one JSON object on stdout naming what was written
    (``{"wrote": FILE or null, "target", "version", "notes", "text"}``; ``text`` is the
    configuration itself when no ``--out`` is given); on a refusal the JSON error object
    of the other commands (:meth:`autopar_opt.cli.errors.CommandError.document`)."""
    try:
        return _export(plan_json, target, output, spec_path, version, json_output)
    except CommandError as exc:
        return emit(exc, json_output)


def _export(plan_json: str, target: str, output: str | None, spec_path: str | None,
            version: str | None, json_output: bool) -> int:
    from autopar_opt.spec import load_spec

    from autopar_opt.core.files import check_output_file

    if target not in TARGETS:
        _fail(f"--to {target!r}: unknown target; use one of {', '.join(TARGETS)}",
              key="--to", value=target, rule="unknown target",
              fix=f"use one of {', '.join(TARGETS)}")
    from autopar_opt.spec.inputs import spec_input_files

    spec_inputs = spec_input_files(spec_path) if spec_path and "\x00" not in spec_path \
        and Path(spec_path).is_file() else (spec_path,)
    problems = check_output_file(output, "--out", (plan_json, *spec_inputs)) \
        if output is not None else []
    _refuse_options(problems)                      # before any work (issue 15)
    path = Path(plan_json)
    file = str(path)
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    try:          # size, special files, nesting, syntax: autopar_opt.core.reading's limits
        doc = reading.read_json(path, reading.DOCUMENT)
    except SpecError as exc:
        rule = "cannot read the plan JSON (" + "; ".join(p.rule for p in exc.problems) + ")"
        fix = "give the plan.json written by `autopar solve --out DIR`"
        _fail(f"{path}: {rule}; {fix}", file, rule, fix)
    see = f"see it with `autopar report {path} --out report.html`"
    peer = peer_format(doc)
    if peer:
        name, parts = PEER_FORMATS[peer]
        rule = (f"the plan.json of a {name} peer problem: its plan is {parts}, not a model's "
                f"layers and degrees, so it has no --to {target} export")
        _fail(f"{path}: {rule}; {see}", file, rule, see)
    if is_placement(doc):
        rule = ("a placement.json of `autopar place`: operator-graph nodes on devices, not a "
                f"training plan of a model, so it has no --to {target} export")
        _fail(f"{path}: {rule}; {see}", file, rule, see)
    if is_operator_sharding(doc):          # QA round 9: it was called "malformed"
        rule = ("the plan.json of an operator-sharding solve: each operator's split over a "
                f"device mesh, not layers and framework degrees, so it has no --to {target} "
                "export")
        _fail(f"{path}: {rule}; {see}", file, rule, see)
    if is_capacity(doc):
        rule = "a capacity.json of `autopar capacity`: a sweep of scenarios, each with its own plan"
        fix = (f"export one of them: its plan.json is under {path.parent / 'scenarios'}/ID/ "
               "(ID = the scenario's id)")
        _fail(f"{path}: {rule}; {fix}", file, rule, fix)
    if is_fleet(doc):
        # QA round 9: the reason named different device types, also for a plan on one group
        rule = ("the plan.json of a fleet of several groups: a fleet is searched in the free "
                "per-layer space (target: none), whose plans no framework is given, whatever "
                "groups the plan uses")
        fix = (f"to launch on one group, solve a spec of that group alone (its plain cluster) "
               f"with target: {target.split('-')[0]} and export that plan; {see}")
        _fail(f"{path}: {rule}; {fix}", file, rule, fix)
    from autopar_opt.core.document import SCHEMA_VERSION
    if isinstance(doc, dict) and "schema_version" in doc and doc["schema_version"] != SCHEMA_VERSION:
        # a plan.json of another layout (an estimate's JSON states none): `autopar report`
        # refuses it the same way (PlanDocument)
        rule = (f"schema_version {str(doc['schema_version'])[:20]} is not the plan.json layout "
                f"this autopar reads (schema_version {SCHEMA_VERSION})")
        fix = "re-write the plan.json with `autopar solve --out DIR` of this version"
        _fail(f"{path}: {rule}; {fix}", file, rule, fix, key="schema_version",
              value=doc["schema_version"])
    if isinstance(doc, dict) and doc.get("plan") is None and doc.get("status") is not None:
        why = doc.get("infeasibility") if isinstance(doc.get("infeasibility"), dict) else {}
        advice = why.get("advice") if isinstance(why.get("advice"), list) else []
        rule = (f"no plan to export: the solve ended {doc['status']!r}"
                + (f" ({why['reason']})" if why.get("reason") else ""))
        fix = (str(advice[0]) if advice else "give the search more devices, ZeRO levels or "
               "recomputation, or more time, and solve again")
        _fail(f"{path}: {rule}; {fix}", file, rule, fix, key="status", value=doc["status"])
    if isinstance(doc, dict) and doc.get("status") == "infeasible" and doc.get("plan") is not None:
        # a proven-infeasible search has no plan: the document was edited (QA round 9)
        rule = "status 'infeasible' with a plan: a search proven infeasible writes none"
        fix = "give the plan.json written by `autopar solve --out DIR`, unedited"
        _fail(f"{path}: {rule}; {fix}", file, rule, fix, key="status", value="infeasible")
    if not isinstance(doc, dict) or not isinstance(doc.get("plan"), dict):
        rule = "no 'plan' in this file"
        fix = "the solve found none, or it is not a plan.json of `autopar solve`"
        _fail(f"{path}: {rule} ({fix})", file, rule, fix, key="plan")
    from autopar_opt.core.document import plan_problems

    stages = doc["plan"].get("stages")
    ranked = isinstance(stages, list) and any(isinstance(st, dict) and "first_rank" in st
                                              for st in stages)   # plan.json; else a bare plan
    malformed = plan_problems(doc["plan"], ranked=ranked)
    if malformed:       # the plan's own fields, before any spec is looked for or blamed (issue 33)
        fix = "give the plan.json written by `autopar solve --out DIR`"
        err = CommandError([SpecProblem(file, _key_of(m), None, m, fix) for m in malformed[:8]],
                           "invalid plan")
        err.message = f"{path}: the plan is malformed: " + "; ".join(malformed[:8]) + f"; {fix}"
        raise err
    spec_doc = doc.get("spec")      # solve: {"path": ...}; estimate --json: the path itself
    spec_file = spec_path or (spec_doc.get("path") if isinstance(spec_doc, dict) else spec_doc)
    if spec_path is None and isinstance(spec_doc, dict) and isinstance(spec_file, str) \
            and "\x00" not in spec_file:
        # the absolute path solve recorded first: a relative one read from another directory
        # names another file (QA round 9); the relative one where the absolute one is gone
        resolved = spec_doc.get("resolved_path")
        if isinstance(resolved, str) and "\x00" not in resolved and Path(resolved).is_file():
            spec_file = resolved
    if spec_path and ("\x00" in spec_path or not Path(spec_path).is_file()):
        what = "a directory" if "\x00" not in spec_path and Path(spec_path).is_dir() \
            else "no such file"
        fix = "give the spec file the plan was solved (or estimated) from"
        _fail(f"--spec {spec_path!r}: {what}; {fix}", key="--spec", value=spec_path, rule=what,
              fix=fix)
    if not isinstance(spec_file, str) or not spec_file or "\x00" in spec_file \
            or not Path(spec_file).is_file():
        rule = f"the spec it was solved from ({spec_file!r}) is not readable"
        _fail(f"{path}: {rule}; pass it with --spec SPEC", file, rule, "pass it with --spec SPEC",
              key="spec.path", value=spec_file if isinstance(spec_file, str) else None)
    problems = check_output_file(output, "--out", spec_input_files(spec_file)) \
        if output is not None else []
    _refuse_options(problems)  # the spec named inside plan.json, or a file that spec includes
    from autopar_opt.ir.pipeline import PlanError, validate_plan

    scenario = spec_doc.get("scenario") if isinstance(spec_doc, dict) and spec_path is None \
        else None
    spec = _scenario_spec(spec_file, scenario, path, file) if isinstance(scenario, str) \
        else load_spec(spec_file)
    plan = Plan.from_dict(doc["plan"])
    try:
        validate_plan(plan, spec.graph, spec.cluster, spec.training)
    except PlanError as exc:      # the plan was solved from another spec (or edited)
        rule = f"the plan does not fit the spec {spec_file} ({exc})"
        fix = "pass the spec it was solved from with --spec SPEC"
        _fail(f"invalid plan: {path}: {rule}; {fix}", file, rule, fix, key="plan")
    _same_model(doc, spec, path, file, spec_file)
    _same_case(doc, spec, path, file, spec_file)
    _same_price(doc, plan, spec, path, file, spec_file)
    if version is None:        # the version the plan was searched for, else the current one
        space = doc.get("search_space") if isinstance(doc.get("search_space"), dict) else {}
        tgt = space.get("target") if isinstance(space.get("target"), dict) else {}
        version = tgt.get("version") if tgt.get("framework") == target else ""
    if version not in ("", None, "0.3", "0.2") or (version and target != "torchtitan"):
        _fail(f"--framework-version {version!r}: torchtitan takes 0.3 or 0.2; the other "
              "targets take none", key="--framework-version", value=version,
              rule="not a version of this target",
              fix="torchtitan takes 0.3 or 0.2; the other targets take none")
    fw = "megatron" if target == "megatron-bridge" else target
    try:
        result = export_plan(plan, spec.graph, spec.cluster, spec.training, target, version or "")
    except ExportError as exc:
        space = doc.get("search_space") if isinstance(doc.get("search_space"), dict) else {}
        tgt = space.get("target") if isinstance(space.get("target"), dict) else {}
        if not spec.graph.is_chain():
            # a DAG keeps the free space and a stated target is an error (README): "solve again
            # with target: X" was advice the spec cannot follow, and no other target builds it
            fix = ("no target builds this model whatever the plan: its layer graph is not a "
                   "chain (a layer with several inputs or outputs); export writes launch files "
                   "for chains of layers (decoders, encoders) only")
        elif fw in (tgt.get("framework"), space.get("runnable_by")):
            # searched for this framework already: what stops it is the model, not the plan
            fix = (f"the plan was searched for {fw} already; follow the reason above, or "
                   "export to another target")
        elif why := _model_refused(fw, spec):
            # no plan of this model runs there: solving again for it cannot help (QA round 5, L5);
            # the reason is the model's, which the plan's refusal above may not list (QA round 7)
            fix = (f"{fw} cannot build this model whatever the plan: {why}; export to another "
                   "target, or change the model")
        else:
            fix = (f"solve again with target: {fw} in the spec (or --runnable-by {fw}), which "
                   "searches only plans this framework can run")
        _fail(f"{path}: {exc}\n(fix: {fix})", file, str(exc), fix, key="--to", value=target)
    priced = [n for n in (launch_notice(fw, spec.training.runtime.name),
                          optimizer_notice(target, spec.training.optimizer,
                                           spec.training.dtype)) if n]
    notes = priced + list(result.notes) + _memory_notes(plan, spec)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if output:
        try:
            _write_atomic(Path(output), result.text)
        except OSError as exc:
            rule = f"cannot write ({exc.strerror or exc})"
            fix = "choose a file in a directory you can write to"
            _fail(f"--out {output}: {rule}; {fix}", key="--out", value=output, rule=rule, fix=fix)
    if json_output:
        # the version written: torchtitan's default is 0.3 (export_plan), not "none"
        written = version or ("0.3" if target == "torchtitan" else None)
        typer.echo(json.dumps({"wrote": output or None, "target": target,
                               "version": written, "notes": notes,
                               **({} if output else {"text": result.text})}, indent=2))
    elif not output:
        typer.echo(result.text, nl=False)
    else:                                  # as solve and report say what they wrote
        typer.echo(f"wrote {output}", err=True)
    return 0


def _scenario_spec(sweep_file: str, scenario: str, path, file: str):
    """The spec of one scenario of a capacity sweep, built from the sweep as ``autopar
    capacity`` built it (QA round 5, M8: a scenario's plan.json names the sweep, which
    ``load_spec`` refuses as not a spec)."""
    from autopar_opt.capacity.sweep import load_sweep
    from autopar_opt.spec.spec import build_spec

    found = next((s for s in load_sweep(sweep_file).scenarios if s.id == scenario), None)
    if found is None:
        rule = f"the capacity sweep {sweep_file} has no scenario {scenario!r} (it was edited)"
        fix = "run `autopar capacity` again, or pass the scenario's spec with --spec SPEC"
        _fail(f"{path}: {rule}; {fix}", file, rule, fix, key="spec.scenario", value=scenario)
    return build_spec(found.data, Path(sweep_file))


def _model_refused(framework: str, spec) -> str:
    """Why ``framework`` refuses the spec's model itself (its architecture or windows,
    :func:`~autopar_opt.ir.target.framework_model_problem`; torchtitan: no flavour of the
    export builds it), so that no plan of it can be exported there; empty when it does not."""
    from autopar_opt.export.torchtitan import flavour, flavour_mismatch
    from autopar_opt.ir.target import framework_model_problem

    graph = spec.graph
    problem = framework_model_problem(framework, graph, graph.attention_windows())
    if problem:
        return str(problem)
    if framework == "torchtitan" and graph.arch is not None and flavour(graph.arch) is None:
        return (flavour_mismatch(graph.arch, graph.name)
                or f"torchtitan registers no model flavour with the architecture of "
                   f"{graph.name} ({graph.arch.family})")
    return ""


def _same_model(doc: dict, spec, path, file: str, spec_file: str) -> None:
    """Refuse a spec whose model is not the one plan.json records (its parameter count,
    written by solve): a plan that fits another model's layer list (the same layer count)
    was exported with that model's dimensions (QA round 5, M9)."""
    recorded = doc.get("spec", {}).get("model") if isinstance(doc.get("spec"), dict) else None
    if not isinstance(recorded, dict):
        return                      # estimate --json records only the spec's path
    graph = spec.graph
    params = graph.total_params()
    # the parameter count, not the architecture line's words (they change between versions)
    if not isinstance(recorded.get("params"), int) or recorded["params"] == params:
        return
    arch = recorded.get("architecture")
    rule = (f"the spec {spec_file} builds another model ({params:,} parameters"
            + (f": {describe(graph.arch)}" if graph.arch is not None else "")
            + f") than the plan was solved for ({recorded['params']:,} parameters"
            + (f": {arch}" if isinstance(arch, str) else "") + ")")
    fix = "pass the spec it was solved from with --spec SPEC"
    _fail(f"invalid plan: {path}: {rule}; {fix}", file, rule, fix, key="spec.model")


#: The settings plan.json records (``spec.training``, ``spec.cluster``) that the exported
#: file takes from the spec read again: each must still be what the plan was solved for.
_CASE_KEYS = (("training", "global_batch_size", lambda spec: spec.training.global_batch_size),
              ("training", "seq_len", lambda spec: spec.training.seq_len),
              ("training", "dtype", lambda spec: spec.training.dtype),
              ("training", "optimizer", lambda spec: spec.training.optimizer),
              ("cluster", "nodes", lambda spec: spec.cluster.nodes),
              ("cluster", "gpus_per_node", lambda spec: spec.cluster.gpus_per_node),
              ("cluster", "device", lambda spec: spec.cluster.device.name))


def _same_case(doc: dict, spec, path, file: str, spec_file: str) -> None:
    """Refuse a spec whose batch, sequence, precision, optimizer or cluster differ from
    what plan.json records: the export takes them from the spec, so an edited spec
    launched the plan with another global batch or dtype silently (QA round 9)."""
    recorded = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    diffs = []
    for section, key, now in _CASE_KEYS:
        part = recorded.get(section)
        if not isinstance(part, dict) or key not in part:
            continue                 # estimate --json records only the spec's path
        try:
            value = now(spec)
        except AttributeError:       # a fleet: its groups, not one device
            continue
        if part[key] != value:
            diffs.append(f"{section}.{key} is {value!r} in {spec_file} but the plan was solved "
                         f"for {part[key]!r}")
    diffs += _runtime_diffs(recorded, spec, spec_file)
    if diffs:
        rule = "the spec differs from the one the plan was solved from: " + "; ".join(diffs)
        fix = ("solve the edited spec again, or pass the spec the plan was solved from with "
               "--spec SPEC")
        _fail(f"invalid plan: {path}: {rule}; {fix}", file, rule, fix, key="spec")


def _same_price(doc: dict, plan: Plan, spec, path, file: str, spec_file: str) -> None:
    """Refuse an ``estimate --json`` document whose plan no longer prices as it records
    under the spec read now. Such a document records the spec's path only (not its batch,
    sequence, precision or cluster, which :func:`_same_case` checks for a solve's
    plan.json), so a spec edited after the estimate, or another file of the same name
    where a relative path is read from another directory, was exported with its own
    global batch and micro-batch size without a word (QA round 11). Its recorded
    iteration time is the price of that plan under that spec: the same code prices it
    again here, so any difference means another spec (or another cost model)."""
    if not isinstance(doc.get("spec"), str):
        return                       # a solve's plan.json: _same_model and _same_case
    metrics = doc.get("metrics") if isinstance(doc.get("metrics"), dict) else {}
    recorded = metrics.get("iteration_time_s")
    if not isinstance(recorded, (int, float)) or isinstance(recorded, bool) or recorded <= 0:
        return
    from autopar_opt.cost.evaluate import evaluate

    now = evaluate(plan, spec.graph, spec.cluster, spec.training,
                   spec.cost_params).iteration_time_s
    if abs(now - recorded) <= 1e-9 * max(abs(recorded), 1.0):
        return
    rule = (f"the plan was estimated at {recorded:.6g} s per iteration, but it prices at "
            f"{now:.6g} s under {spec_file} as read now: the spec (or a file it includes, or "
            "autopar's cost model) is not the one it was estimated from")
    fix = ("estimate the spec again (autopar estimate SPEC --json), or pass the spec it was "
           "estimated from with --spec SPEC")
    _fail(f"invalid plan: {path}: {rule}; {fix}", file, rule, fix, key="spec")


def _runtime_diffs(recorded: dict, spec, spec_file: str) -> list[str]:
    """The runtime behaviours (``training.runtime`` and its ``runtime_options``: overlaps,
    kernels, dispatcher, ...) that differ between the spec read now and the one plan.json
    records: the export writes the flags of the runtime it reads (``--overlap-grad-reduce``,
    ``--tp-comm-overlap``, ``--cp-comm-type``, the dispatcher), so an edited runtime wrote
    another run than the plan priced, silently (QA round 11). Keys one side lacks (another
    version's) and the runtime's ``source`` text are not compared."""
    import dataclasses

    training = recorded.get("training") if isinstance(recorded.get("training"), dict) else {}
    was = training.get("runtime")
    if not isinstance(was, dict):
        return []
    try:
        now = dataclasses.asdict(spec.training.runtime)
    except (AttributeError, TypeError):
        return []
    return [f"training.runtime {key} is {now[key]!r} in {spec_file} but the plan was solved "
            f"for {was[key]!r}" for key in sorted((set(was) & set(now)) - {"source"})
            if was[key] != now[key]]


def _memory_notes(plan: Plan, spec) -> list[str]:
    """A note when the plan does not fit device memory under the cost model (an
    ``estimate`` of a hand-written plan may not): the file is still written, as the
    plan is the user's, but not silently."""
    from autopar_opt.cost.evaluate import evaluate

    metrics = evaluate(plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    if metrics.feasible:
        return []
    worst = max(metrics.stages, key=lambda s: s.peak_memory_gib)
    return [f"the plan does not fit device memory under the cost model (stage {worst.index} "
            f"needs {worst.peak_memory_gib:.2f} GiB of {worst.capacity_gib:.2f} GiB): the launch "
            "would run out of memory; try more pipeline stages, ZeRO, or recomputation"]


def _key_of(problem: str) -> str:
    """The key a plan problem names (``'plan.stages[0].strategies[0].tp' input should ...``:
    that key), else ``plan``."""
    import re

    found = re.search(r"'(plan(?:[.\[][^']*)?)'", problem)
    return found.group(1) if found else "plan"


def _refuse_options(problems: list[Any]) -> None:
    """Refuse the output option's problems (SpecProblems of the command line), if any."""
    if problems:
        err = CommandError(problems, "invalid option")
        err.message = "; ".join(p.format() for p in problems)
        raise err
