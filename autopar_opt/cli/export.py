"""``autopar export PLAN_JSON --to megatron|torchtitan|deepspeed [-o FILE]``.

Sits above :mod:`autopar_opt.export` and :mod:`autopar_opt.spec` (it reads the
spec a plan was solved from), so neither of those imports the other's CLI.
"""

from __future__ import annotations

from pathlib import Path

import typer

from autopar_opt.export import TARGETS, ExportError, export_plan
from autopar_opt.spec.doc_kinds import PEER_FORMATS, is_capacity, is_fleet, is_placement, peer_format
from autopar_opt.ir.plan import Plan


def _fail(message: str) -> int:
    typer.echo(message, err=True)
    return 2


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename (the shared writer: never a
    half-written output, the same umask-respecting mode as every output)."""
    from autopar_opt.core.files import write_atomic
    write_atomic(path, text)


def export_command(plan_json: str, target: str, output: str | None, spec_path: str | None,
                   version: str | None = None) -> int:
    """Load the plan and its spec, export, write atomically; returns the exit code."""
    from autopar_opt.spec import load_spec

    from autopar_opt.core.files import check_output_file

    if target not in TARGETS:
        return _fail(f"--to {target!r}: unknown target; use one of {', '.join(TARGETS)}")
    from autopar_opt.spec.inputs import spec_input_files

    spec_inputs = spec_input_files(spec_path) if spec_path and "\x00" not in spec_path \
        and Path(spec_path).is_file() else (spec_path,)
    problems = check_output_file(output, "--output", (plan_json, *spec_inputs)) \
        if output is not None else []
    if problems:                                   # before any work (issue 15)
        return _fail("; ".join(p.format() for p in problems))
    path = Path(plan_json)
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    try:          # size, special files, nesting, syntax: autopar_opt.core.reading's limits
        doc = reading.read_json(path, reading.DOCUMENT)
    except SpecError as exc:
        return _fail(f"{path}: cannot read the plan JSON ("
                     + "; ".join(p.rule for p in exc.problems) + "); give the plan.json "
                     "written by `autopar solve --out DIR`")
    peer = peer_format(doc)
    if peer:
        name, parts = PEER_FORMATS[peer]
        return _fail(f"{path}: the plan.json of a {name} peer problem: its plan is {parts}, "
                     f"not a model's layers and degrees, so it has no --to {target} export; see "
                     f"it with `autopar report {path} -o report.html`")
    if is_placement(doc):
        return _fail(f"{path}: a placement.json of `autopar place`: operator-graph nodes on "
                     f"devices, not a training plan of a model, so it has no --to {target} export; "
                     f"see it with `autopar report {path} -o report.html`")
    if is_capacity(doc):
        return _fail(f"{path}: a capacity.json of `autopar capacity`: a sweep of scenarios, each "
                     "with its own plan; export one of them: its plan.json is under "
                     f"{path.parent / 'scenarios'}/ID/ (ID = the scenario's id)")
    if is_fleet(doc):
        return _fail(f"{path}: the plan.json of a fleet of several groups: its stages run on "
                     f"different device types, which no --to {target} configuration states in one "
                     f"file; see it with `autopar report {path} -o report.html`")
    if isinstance(doc, dict) and doc.get("plan") is None and doc.get("status") is not None:
        why = doc.get("infeasibility") if isinstance(doc.get("infeasibility"), dict) else {}
        advice = why.get("advice") if isinstance(why.get("advice"), list) else []
        return _fail(f"{path}: no plan to export: the solve ended {doc['status']!r}"
                     + (f" ({why['reason']})" if why.get("reason") else "")
                     + "; " + (str(advice[0]) if advice else "give the search more devices, "
                               "ZeRO levels or recomputation, or more time, and solve again"))
    if not isinstance(doc, dict) or not isinstance(doc.get("plan"), dict):
        return _fail(f"{path}: no 'plan' in this file (the solve found none, or it is not a "
                     "plan.json of `autopar solve`)")
    from autopar_opt.core.document import plan_problems

    stages = doc["plan"].get("stages")
    ranked = isinstance(stages, list) and any(isinstance(st, dict) and "first_rank" in st
                                              for st in stages)   # plan.json; else a bare plan
    malformed = plan_problems(doc["plan"], ranked=ranked)
    if malformed:       # the plan's own fields, before any spec is looked for or blamed (issue 33)
        return _fail(f"{path}: the plan is malformed: " + "; ".join(malformed[:8])
                     + "; give the plan.json written by `autopar solve --out DIR`")
    spec_doc = doc.get("spec")      # solve: {"path": ...}; estimate --json: the path itself
    spec_file = spec_path or (spec_doc.get("path") if isinstance(spec_doc, dict) else spec_doc)
    if spec_path and ("\x00" in spec_path or not Path(spec_path).is_file()):
        what = "a directory" if "\x00" not in spec_path and Path(spec_path).is_dir() \
            else "no such file"
        return _fail(f"--spec {spec_path!r}: {what}; give the spec file the plan was solved "
                     "(or estimated) from")
    if not isinstance(spec_file, str) or not spec_file or "\x00" in spec_file \
            or not Path(spec_file).is_file():
        return _fail(f"{path}: the spec it was solved from ({spec_file!r}) is not readable; "
                     "pass it with --spec SPEC")
    problems = check_output_file(output, "--output", spec_input_files(spec_file)) \
        if output is not None else []
    if problems:           # the spec named inside plan.json, or a file that spec includes
        return _fail("; ".join(p.format() for p in problems))
    from autopar_opt.ir.pipeline import PlanError, validate_plan

    spec = load_spec(spec_file)
    plan = Plan.from_dict(doc["plan"])
    try:
        validate_plan(plan, spec.graph, spec.cluster, spec.training)
    except PlanError as exc:      # the plan was solved from another spec (or edited)
        return _fail(f"invalid plan: {path}: the plan does not fit the spec {spec_file} ({exc}); pass the "
                     "spec it was solved from with --spec SPEC")
    if version is None:        # the version the plan was searched for, else the current one
        space = doc.get("search_space") if isinstance(doc.get("search_space"), dict) else {}
        tgt = space.get("target") if isinstance(space.get("target"), dict) else {}
        version = tgt.get("version") if tgt.get("framework") == target else ""
    if version not in ("", None, "0.3", "0.2") or (version and target != "torchtitan"):
        return _fail(f"--framework-version {version!r}: torchtitan takes 0.3 or 0.2; the other "
                     "targets take none")
    fw = "megatron" if target == "megatron-bridge" else target
    try:
        result = export_plan(plan, spec.graph, spec.cluster, spec.training, target, version or "")
    except ExportError as exc:
        return _fail(f"{path}: {exc}\n(fix: solve again with target: {fw} in the spec (or "
                     f"--runnable-by {fw}), which searches only plans this framework can run)")
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    if output:
        try:
            _write_atomic(Path(output), result.text)
        except OSError as exc:
            return _fail(f"--output {output}: cannot write ({exc.strerror or exc}); "
                         "choose a file in a directory you can write to")
    else:
        typer.echo(result.text, nl=False)
    return 0
