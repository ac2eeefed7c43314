"""``autopar report plan.json -o report.html``: the thin command behind the CLI."""

from __future__ import annotations

import sys

from autopar_opt.spec.doc_kinds import (is_capacity, is_estimate, is_fleet, is_operator_sharding,
                                        is_placement, peer_format)
from autopar_opt.reports.document import ReportInputError
from autopar_opt.reports.render import render_html, write_atomic

EXIT_OK = 0
EXIT_BAD_INPUT = 2


def _fail(plan_json: str, message: str) -> int:
    print(f"autopar report: {plan_json}: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _write(plan_json: str, html: str, output: str, what: str = "", quiet: bool = False) -> int:
    """Write ``html`` to ``output`` atomically and say so (``what``: the kind
    of document, printed after the path); exit 2 naming the file if it cannot."""
    try:
        write_atomic(html, output)
    except OSError as exc:
        return _fail(plan_json, f"cannot write the report to {output} ({exc})")
    if not quiet:
        print(f"wrote {output}" + (f" ({what})" if what else ""))
    return EXIT_OK


def _peer_report(plan_json: str, doc: dict, peer: str, output: str, quiet: bool) -> int:
    """A peer problem's plan.json gets the peer report, the one ``autopar solve
    SPEC --out DIR`` writes as DIR/report.html (:mod:`autopar_opt.reports.peer`);
    our plan report needs a model, cluster and cost model such a problem lacks."""
    from jinja2 import TemplateError

    from autopar_opt.reports.peer import render_peer_report

    try:
        html = render_peer_report(doc)
    except (TemplateError, KeyError, TypeError, AttributeError) as exc:
        return _fail(plan_json, f"a {peer} peer-problem plan.json, but not one the peer report can "
                     f"read ({type(exc).__name__}: {exc}); give the plan.json of `autopar solve "
                     "SPEC --out DIR` for a spec with problem:, or use DIR/report.html, which that "
                     "command writes beside it")
    return _write(plan_json, html, output, f"peer problem: {peer}", quiet)


def _own_report(plan_json: str, doc: dict, output: str, kind: str, quiet: bool) -> int:
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
    try:
        html = render(doc)
    except (TemplateError, KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        return _fail(plan_json, f"a {_file_of(kind)}, but not one the {kind} report can read "
                     f"({type(exc).__name__}: {exc}); give the {_file_of(kind)} of `autopar "
                     f"{command} ... --out DIR`, or use DIR/{html_name}, which that command writes "
                     "beside it")
    return _write(plan_json, html, output, kind, quiet)


def _file_of(kind: str) -> str:
    return "plan.json" if kind == "fleet" else f"{kind}.json"


def report_command(plan_json: str, output: str, quiet: bool = False) -> int:
    """Render ``plan_json`` to ``output``; 0 on success, 2 on bad input.

    A missing, unreadable or malformed file, or one missing keys the report
    needs, prints one message on stderr naming the file and every missing key,
    and writes nothing. The output is written atomically (temp file + rename).
    A peer problem's plan.json (Piper, PaSE) gets the peer report instead, a
    placement.json or capacity.json its own report; the JSON of ``estimate`` is refused
    with the command that writes a plan.json.
    """
    from autopar_opt.core.files import check_output_file

    problems = check_output_file(output, "--output", (plan_json,))
    if problems:
        return _fail(plan_json, "; ".join(p.format() for p in problems))
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    try:          # size, special files, nesting, syntax: autopar_opt.core.reading's limits
        doc = reading.read_json(plan_json, reading.DOCUMENT)
    except SpecError as exc:
        return _fail(plan_json, "; ".join(f"{p.rule}; {p.fix}" for p in exc.problems))
    peer = peer_format(doc)
    if peer:
        return _peer_report(plan_json, doc, peer, output, quiet)
    if is_operator_sharding(doc):
        from autopar_opt.reports.opspace import render_opspace_report
        try:
            html = render_opspace_report(doc)
        except Exception as exc:  # noqa: BLE001 - a hand-edited document: say what broke
            return _fail(plan_json, f"an operator-sharding plan.json, but not one the report can read "
                         f"({type(exc).__name__}: {exc}); give the plan.json `autopar solve --out DIR` wrote")
        return _write(plan_json, html, output, "operator sharding", quiet)
    if is_placement(doc):
        return _own_report(plan_json, doc, output, "placement", quiet)
    if is_capacity(doc):
        return _own_report(plan_json, doc, output, "capacity", quiet)
    if is_fleet(doc):
        return _own_report(plan_json, doc, output, "fleet", quiet)
    if is_estimate(doc):
        return _fail(plan_json, "this is the JSON of `autopar estimate --json`: one plan priced, "
                     "without the search, certificate and baselines a report shows; run "
                     "`autopar solve SPEC --out DIR` for a plan.json and its report.html")
    try:
        html = render_html(doc)
    except ReportInputError as exc:
        return _fail(plan_json, "not a plan document the report can read: " + "; ".join(exc.problems))
    return _write(plan_json, html, output, quiet=quiet)
