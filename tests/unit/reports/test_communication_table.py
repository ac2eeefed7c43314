"""The report's "Communication: hidden and exposed" table states plan.json's
``metrics.communication`` (QA round 36).

Oracles: the plan.json the session's quickstart solve wrote (every kind's figures, formatted
as the report formats times), its own breakdown (each kind's exposed time is the breakdown's
term), and plan.json's schema (the document validates with the new key, which the schema
describes). A document without the key (written before it) has no such table.
"""

from __future__ import annotations

import re

import pytest

from autopar_opt.core.document import document_problems, plan_json_schema
from autopar_opt.reports.formatting import fmt_time
from autopar_opt.reports.render import render_html

BREAKDOWN_TERM = {"tp": "tp_comm_s", "cp": "cp_comm_s", "zero": "zero_comm_s", "ep": "ep_comm_s",
                  "offload": "offload_comm_s", "reshard": "reshard_s", "dp": "dp_comm_s"}


def _table(html: str) -> list[list[str]]:
    found = re.search(r"<h3>Communication: hidden and exposed</h3>\s*<table>(.*?)</table>", html, re.S)
    if not found:
        return []
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)
    return [[" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
            for r in rows]


def test_plan_json_states_every_kind_and_the_report_shows_it(quickstart_plan_json):
    doc = quickstart_plan_json
    assert document_problems(doc) == []
    comm, bd = doc["metrics"]["communication"], doc["metrics"]["breakdown"]
    assert set(comm) == set(BREAKDOWN_TERM)
    for kind, got in comm.items():
        assert got["exposed_s"] == bd[BREAKDOWN_TERM[kind]], kind
        assert got["exposed_s"] - got["interference_s"] == pytest.approx(
            got["total_s"] - got["hidden_s"], rel=1e-9, abs=1e-15), kind
    for st in doc["metrics"]["stages"]:
        assert set(st["communication"]) == set(BREAKDOWN_TERM)
    assert any(got["hidden_s"] > 0 for got in comm.values())      # the solve overlaps something
    table = _table(render_html(doc))
    assert table[0] == ["kind (per iteration, critical path)", "total", "hidden", "exposed",
                        "of which interference"]
    moving = [k for k, got in comm.items() if got["total_s"] > 0 or got["exposed_s"] > 0]
    assert len(table) - 1 == len(moving)
    for row, kind in zip(table[1:], [k for k in BREAKDOWN_TERM if k in moving]):
        got = comm[kind]
        assert row[1:] == [fmt_time(got[f]) for f in ("total_s", "hidden_s", "exposed_s",
                                                          "interference_s")], kind


def test_no_table_for_a_document_written_before_it(solved):
    solved["metrics"].pop("communication", None)
    assert _table(render_html(solved)) == []


def test_the_schema_describes_the_figures():
    props = plan_json_schema()["$defs"]["MetricsDoc"]["properties"]
    text = props["communication"]["description"]
    for word in ("total_s", "hidden_s", "exposed_s", "interference_s",
                 "exposed_s - interference_s = total_s - hidden_s", "pipeline_bubble_s"):
        assert word in text, word
    assert "communication" in plan_json_schema()["$defs"]["StageMetricsDoc"]["properties"]


def test_a_plan_that_communicates_nothing_is_not_called_older(solved):
    # one GPU, or a plan whose every kind moves nothing: metrics.communication is there, all
    # zero; the report has no table, and must not say the document predates the key
    for got in solved["metrics"]["communication"].values():
        for figure in got:
            got[figure] = 0.0
    html = render_html(solved)
    assert _table(html) == []
    assert "written before metrics.communication" not in " ".join(html.split())
    solved["metrics"].pop("communication")
    assert "written before metrics.communication" in " ".join(render_html(solved).split())
