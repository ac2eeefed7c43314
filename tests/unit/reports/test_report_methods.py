"""The solve report names what proved the certificate (QA round 36).

plan.json's ``certificate.methods`` says which method found the plan and which proved
the bound (issue 35); the report showed only ``solver.name`` ("highs HiGHS 1.15.1"),
also when the exact DP proved everything. Oracle: the document itself, read back out of
the HTML with the standard library's parser: every record is a row with its method,
status and bound, and the row whose message says it proved the global lower bound
carries the certificate's bound.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from autopar_opt.reports.document import ReportInputError
from autopar_opt.reports.formatting import fmt_time
from autopar_opt.reports.render import render_html
from autopar_opt.reports.methods import method_rows
from support import paths
from support.cli import run_cli


class _Tables(HTMLParser):
    """Every table's rows as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _methods_table(html: str) -> list[list[str]]:
    parser = _Tables()
    parser.feed(html)
    found = [t for t in parser.tables if t and t[0][:2] == ["method", "status"]]
    assert len(found) == 1, "the report has no table of the certificate's methods"
    return found[0][1:]


def test_every_method_record_is_a_row_with_its_bound(solved):
    records = solved["certificate"]["methods"]
    assert records, "the search wrote no method records"
    rows = _methods_table(render_html(solved))
    assert [(r[0], r[1]) for r in rows] == [(m["method"], m["status"]) for m in records]
    prover = [r for r, m in zip(rows, records) if "proved the global lower bound" in m["message"]]
    assert prover, records
    bound = float(solved["certificate"]["lower_bound"])
    assert all(r[3] == fmt_time(bound) for r in prover)
    assert all("proved the global lower bound" in r[5] for r in prover)


def test_a_bad_record_is_named():
    with pytest.raises(ReportInputError, match=r"certificate\.methods\[1\]"):
        method_rows([{"method": "dp", "status": "optimal"}, ["dp"]], "certificate.methods", fmt_time)
    with pytest.raises(ReportInputError, match=r"certificate\.methods\[0\]\.lower_bound"):
        method_rows([{"method": "dp", "status": "optimal", "lower_bound": "x"}],
                    "certificate.methods", fmt_time)


def test_the_placement_report_lists_its_methods(tmp_path):
    """placement.json's ``details.methods`` (QA round 36: the report named only
    ``method``); the row that proved the optimum carries the document's bound."""
    from autopar_opt.reports.placement import render_placement_html

    code, text = run_cli("place", paths.REPO / "examples" / "placement" / "transformer_two_types.yaml",
                         "--out", tmp_path, "--quiet", "--time-limit", "20")
    assert code == 0, text
    doc = json.loads((tmp_path / "placement.json").read_text())
    records = doc["details"]["methods"]
    rows = _methods_table(render_placement_html(doc))
    assert [(r[0], r[1]) for r in rows] == [(m["method"], m["status"]) for m in records]
    assert f"{doc['lower_bound']:.6g}" in [r[3] for r in rows]


def test_the_peer_report_lists_its_methods_and_writes_one_precision(tmp_path):
    """A Piper solve's ``certificate.methods`` are rows (QA round 36), and the stage
    table's TPS is written as the certificate's primal is (it printed 65.05719078515098
    beside "primal 65.0572")."""
    from autopar_opt.reports.peer import render_peer_report

    code, text = run_cli("solve", paths.REPO / "examples" / "peers" / "piper_gnmt_k8.yaml",
                         "--out", tmp_path, "--quiet", "--time-limit", "20")
    assert code == 0, text
    doc = json.loads((tmp_path / "plan.json").read_text())
    html = render_peer_report(doc)
    rows = _methods_table(html)
    records = doc["certificate"]["methods"]
    assert [(r[0], r[1]) for r in rows] == [(m["method"], m["status"]) for m in records]
    primal = f"{doc['certificate']['primal']:.6g}"
    assert f"TPS {primal})" in html
    assert repr(doc["plan"]["tps"]) not in html or repr(doc["plan"]["tps"]) == primal
