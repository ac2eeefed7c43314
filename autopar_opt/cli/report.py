"""``autopar report plan.json -o report.html``: the thin command behind the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopar_opt.cli.errors import CommandError, emit
from autopar_opt.core.errors import SpecProblem
from autopar_opt.spec.doc_kinds import (is_capacity, is_estimate, is_fleet, is_operator_sharding,
                                        is_placement, peer_format)
from autopar_opt.reports.document import ReportInputError
from autopar_opt.reports.render import render_html, write_atomic

EXIT_OK = 0
EXIT_BAD_INPUT = 2


class _Refused(CommandError):
    """A refusal of ``report``: its text (``autopar report: FILE: rule; fix``) on stderr,
    its fields in the JSON error object of ``--json``."""


def _fail(plan_json: str, rule: str, fix: str = "", key: str = "", value: Any = None,
          problems: list[SpecProblem] | None = None) -> Any:
    """Raise the refusal of ``plan_json`` (``problems``: a reader's own, else one from
    ``rule`` and ``fix``)."""
    err = _Refused(problems or [SpecProblem(plan_json, key, value, rule, fix)], "invalid input",
                   EXIT_BAD_INPUT)
    err.message = f"autopar report: {plan_json}: {rule}" + (f"; {fix}" if fix else "")
    raise err


def _write(plan_json: str, html: str, output: str, what: str = "", quiet: bool = False,
           json_output: bool = False) -> int:
    """Write ``html`` to ``output`` atomically and say so (``what``: the kind
    of document, printed after the path; with ``json_output`` as one JSON object
    ``{"wrote", "kind", "bytes", "input"}``); exit 2 naming the file if it cannot."""
    try:
        write_atomic(html, output)
    except OSError as exc:
        _fail(plan_json, f"cannot write the report to {output} ({exc})",
              "choose a file in a directory you can write to", key="--out", value=output)
    if json_output:
        print(json.dumps({"wrote": output, "kind": what or "plan", "input": plan_json,
                          "bytes": len(html.encode("utf-8"))}, indent=2))
    elif not quiet:
        print(f"wrote {output}" + (f" ({what})" if what else ""))
    return EXIT_OK


def _peer_report(plan_json: str, doc: dict, peer: str, output: str, say: tuple[bool, bool]) -> int:
    """A peer problem's plan.json gets the peer report, the one ``autopar solve
    SPEC --out DIR`` writes as DIR/report.html (:mod:`autopar_opt.reports.peer`);
    our plan report needs a model, cluster and cost model such a problem lacks."""
    from jinja2 import TemplateError

    from autopar_opt.reports.peer import render_peer_report

    try:
        html = render_peer_report(doc)
    except (TemplateError, KeyError, TypeError, AttributeError) as exc:
        _fail(plan_json, f"a {peer} peer-problem plan.json, but not one the peer report can "
              f"read ({type(exc).__name__}: {exc})", "give the plan.json of `autopar solve "
              "SPEC --out DIR` for a spec with problem:, or use DIR/report.html, which that "
              "command writes beside it")
    return _write(plan_json, html, output, f"peer problem: {peer}", *say)


def _own_report(plan_json: str, doc: dict, output: str, kind: str, say: tuple[bool, bool]) -> int:
    """A placement.json or capacity.json gets its own report, the one ``autopar
    place --out DIR`` (report.html) or ``autopar capacity --out DIR``
    (capacity.html) writes beside it (:mod:`autopar_opt.reports.placement`,
    :mod:`autopar_opt.reports.capacity`)."""
    from jinja2 import TemplateError

    if kind == "placement":
        from autopar_opt.reports.placement import render_placement_html as render
        command, html_name = "place", "report.html"
    elif kind == "fleet":
        from autopar_opt.reports.fleet import render_fleet_html as render
        command, html_name = "solve", "report.html"
    else:
        from autopar_opt.reports.capacity import render_capacity_html as render
        command, html_name = "capacity", "capacity.html"
        doc = _rebase_links(doc, Path(plan_json), Path(output))
    try:
        html = render(doc)
    except ReportInputError as exc:         # the keys the document lacks, each named
        _fail(plan_json, f"a {_file_of(kind)}, but not one the {kind} report can read: "
              + "; ".join(exc.problems), f"give the {_file_of(kind)} of `autopar {command} ... "
              f"--out DIR`, or use DIR/{html_name}, which that command writes beside it")
    except (TemplateError, KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        _fail(plan_json, f"a {_file_of(kind)}, but not one the {kind} report can read "
              f"({type(exc).__name__}: {exc})", f"give the {_file_of(kind)} of `autopar "
              f"{command} ... --out DIR`, or use DIR/{html_name}, which that command writes "
              "beside it")
    return _write(plan_json, html, output, kind, *say)


def _rebase_links(doc: dict, source: Path, output: Path) -> dict:
    """A capacity document's links to its scenarios' plan reports, made relative to
    where the report is written (they are relative to the sweep's folder, beside
    capacity.json); a link to a report that is not there is dropped, not left broken.
    A hand-edited ``scenarios`` that is not a list of mappings is left as it is, for the
    renderer's check to name (QA round 34: ``"scenarios": "x"`` was an AttributeError
    here, exit 70)."""
    import copy
    import os

    doc = copy.deepcopy(doc)
    here = output.resolve().parent
    scenarios = doc.get("scenarios")
    for entry in scenarios if isinstance(scenarios, list) else []:
        if not isinstance(entry, dict):
            continue
        link = entry.get("report")
        if not isinstance(link, str) or not link:
            continue
        target = (source.resolve().parent / link)
        entry["report"] = os.path.relpath(target, here) if target.is_file() else None
    return doc


def _file_of(kind: str) -> str:
    return "plan.json" if kind == "fleet" else f"{kind}.json"


def report_command(plan_json: str, output: str, quiet: bool = False,
                   json_output: bool = False) -> int:
    """Render ``plan_json`` to ``output``; 0 on success, 2 on bad input.

    A missing, unreadable or malformed file, or one missing keys the report
    needs, prints one message on stderr naming the file and every missing key,
    and writes nothing. The output is written atomically (temp file + rename).
    A peer problem's plan.json (Piper, PaSE) gets the peer report instead, a
    placement.json or capacity.json its own report; the JSON of ``estimate`` is refused
    with the command that writes a plan.json. With ``json_output``: success is one JSON
    object naming the file written, a refusal the JSON error object of the other
    commands (:mod:`autopar_opt.cli.errors`), both on stdout.
    """
    try:
        return _report(plan_json, output, (quiet, json_output))
    except CommandError as exc:
        return emit(exc, json_output)


def _report(plan_json: str, output: str, say: tuple[bool, bool]) -> int:
    from autopar_opt.core.files import check_output_file

    problems = check_output_file(output, "--out", (plan_json,))
    if problems:
        _fail(plan_json, "; ".join(p.format() for p in problems), problems=problems)
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    try:          # size, special files, nesting, syntax: autopar_opt.core.reading's limits
        doc = reading.read_json(plan_json, reading.DOCUMENT)
    except SpecError as exc:
        _fail(plan_json, "; ".join(f"{p.rule}; {p.fix}" for p in exc.problems),
              problems=exc.problems)
    peer = peer_format(doc)
    if peer:
        return _peer_report(plan_json, doc, peer, output, say)
    if is_operator_sharding(doc):
        from autopar_opt.reports.opspace import render_opspace_report
        try:
            html = render_opspace_report(doc)
        except Exception as exc:  # noqa: BLE001 - a hand-edited document: say what broke
            _fail(plan_json, f"an operator-sharding plan.json, but not one the report can read "
                  f"({type(exc).__name__}: {exc})", "give the plan.json `autopar solve --out DIR` "
                  "wrote")
        return _write(plan_json, html, output, "operator sharding", *say)
    for kind, test in (("placement", is_placement), ("capacity", is_capacity),
                       ("fleet", is_fleet)):
        if test(doc):
            return _own_report(plan_json, doc, output, kind, say)
    if is_estimate(doc):
        _fail(plan_json, "this is the JSON of `autopar estimate --json`: one plan priced, "
              "without the search, certificate and baselines a report shows", "run "
              "`autopar solve SPEC --out DIR` for a plan.json and its report.html")
    try:
        html = render_html(doc)
    except ReportInputError as exc:
        _fail(plan_json, "not a plan document the report can read: " + "; ".join(exc.problems),
              "give the plan.json written by `autopar solve --out DIR`")
    return _write(plan_json, html, output, "", *say)
