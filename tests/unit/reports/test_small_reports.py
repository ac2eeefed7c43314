"""The operator-sharding and peer reports print values as a reader wants them (found by
a new user, session 24: a pruned configuration, which has no ``replicas``, shifted its
cells under the wrong headings; "None", "True", "inf" and raw key names were shown; a
peer's method read "dp: dp: optimal")."""

from __future__ import annotations

import json
import re

import pytest

from autopar_opt.reports.formatting import columns, show
from support import paths
from support.cli import run_cli


def test_show_and_columns():
    assert [show(x) for x in (None, True, False, float("inf"), "inf", 0.1234567891, [1, 2.5])] \
        == ["—", "yes", "no", "∞", "∞", "0.123457", "[1, 2.5]"]
    assert columns([{"a": 1, "stats": {}}, {"a": 2, "b": 3}]) == ["a", "b"]


def _cells(row: str) -> int:
    return len(re.findall(r"<t[dh]>", row))


@pytest.mark.parametrize("example", ["operator_sharding/pipeline.yaml",
                                     "peers/piper_gnmt_k8.yaml"])
def test_reports_show_no_raw_values_and_aligned_tables(tmp_path, example):
    code, text = run_cli("solve", paths.REPO / "examples" / example, "--out", tmp_path / "o",
                         "--quiet")
    assert code == 0, text
    html = (tmp_path / "o" / "report.html").read_text()
    for raw in (">None<", ">True<", ">False<", ">inf<", "dp: dp:"):
        assert raw not in html, raw
    for table in re.findall(r"<table>(.*?)</table>", html, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
        if rows and "<th>" in rows[0] and "<td>" not in rows[0]:      # a header row
            assert {_cells(r) for r in rows} == {_cells(rows[0])}, rows[:3]
    doc = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert doc["status"] in html


def test_an_infeasible_operator_sharding_summary_says_why(tmp_path):
    spec = tmp_path / "os.yaml"
    spec.write_text("problem: {format: operator_sharding, graph: {zoo: alexnet, batch: 128}, "
                    "cluster: {nodes: 1, gpus_per_node: 8, device: A100-80GB}, "
                    "memory_gib: 0.001}\n")
    code, text = run_cli("solve", spec)
    assert code == 3, text
    assert "certificate: proven infeasible" in text and "fits the memory" in text
    assert "primal None" not in text and "gap inf" not in text


def test_a_peer_summary_prints_the_plan_in_the_peers_terms():
    """README: the peer summary prints the plan (Piper's stages, PaSE's configurations);
    it printed the certificate only (session 24)."""
    code, text = run_cli("solve", paths.REPO / "examples" / "peers" / "piper_gnmt_k8.yaml")
    assert code == 0 and "stage 0: nodes 0-77, d=8, t=1, TMPC" in text
    code, text = run_cli("solve", paths.REPO / "examples" / "peers" / "pase_inception3_p8.yaml")
    assert code == 0 and "configurations: Conv_0 8x1x1x1x1x1x1" in text
