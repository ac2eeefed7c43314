"""``autopar export PLAN_JSON --to megatron|torchtitan|deepspeed [-o FILE]``.

Sits above :mod:`autopar_opt.export` and :mod:`autopar_opt.spec` (it reads the
spec a plan was solved from), so neither of those imports the other's CLI.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer

from autopar_opt.export import TARGETS, ExportError, export_plan
from autopar_opt.plan import Plan


def _fail(message: str) -> int:
    typer.echo(message, err=True)
    return 2


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename: never a half-written output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_command(plan_json: str, target: str, output: str | None, spec_path: str | None) -> int:
    """Load the plan and its spec, export, write atomically; returns the exit code."""
    from autopar_opt.spec import load_spec

    if target not in TARGETS:
        return _fail(f"--to {target!r}: unknown target; use one of {', '.join(TARGETS)}")
    path = Path(plan_json)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return _fail(f"{path}: cannot read the plan JSON ({exc}); give the plan.json "
                     "written by `autopar solve --out DIR`")
    if not isinstance(doc, dict) or not isinstance(doc.get("plan"), dict):
        return _fail(f"{path}: no 'plan' in this file (the solve found none, or it is not a "
                     "plan.json of `autopar solve`)")
    spec_file = spec_path or (doc.get("spec") or {}).get("path")
    if not spec_file or not Path(spec_file).is_file():
        return _fail(f"{path}: the spec it was solved from ({spec_file!r}) is not readable; "
                     "pass it with --spec SPEC")
    from autopar_opt.pipeline import validate_plan

    spec = load_spec(spec_file)
    try:
        plan = Plan.from_dict(doc["plan"])
    except (KeyError, TypeError, ValueError) as exc:
        return _fail(f"{path}: the 'plan' entry is malformed ({exc!r})")
    validate_plan(plan, spec.graph, spec.cluster, spec.training)   # PlanError: exit 2
    try:
        result = export_plan(plan, spec.graph, spec.cluster, spec.training, target)
    except ExportError as exc:
        return _fail(f"{path}: {exc}\n(fix: solve again with --runnable-by {target}, which "
                     "searches only plans this framework can run)")
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    if output:
        _write_atomic(Path(output), result.text)
    else:
        typer.echo(result.text, nl=False)
    return 0
