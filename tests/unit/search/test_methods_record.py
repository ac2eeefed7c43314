"""``certificate.methods`` of the hybrid search's plan.json (issue 35): which method
proved what, as the peers' route records it.

Oracles: the record of the method that found the plan carries the certificate's
primal; the records' configuration counts add up to the certificate's rows; a
forced backend names its method; a MILP the memory budget refused is recorded as
refused with the reason."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.paths import REPO


def _doc(*args):
    code, out = run_cli("solve", REPO / "examples" / "quickstart.yaml", "--json", *args)
    return code, json.loads(out[out.index("{"):])


@pytest.mark.parametrize("args,method", [((), "dp"), (("--solver", "highs", "--no-warm-start"), "milp:highs")])
def test_the_method_that_found_the_plan_is_named_with_its_value(args, method):
    code, doc = _doc(*args)
    cert = doc["certificate"]
    assert code == 0 and doc["status"] == "optimal"
    found = [m for m in cert["methods"] if "found the incumbent" in m["message"]]
    assert [m["method"] for m in found] == [method]
    assert found[0]["primal"] == pytest.approx(cert["primal"], rel=1e-12)
    assert sum(m["stats"]["configurations"] for m in cert["methods"]) == len(cert["configurations"])
    assert any("proved the global lower bound" in m["message"] for m in cert["methods"])


def test_a_refused_milp_is_recorded_as_refused():
    code, doc = _doc("--solver", "highs", "--no-warm-start", "--memory-limit", "0.00001")
    refused = [m for m in doc["certificate"]["methods"] if m["status"] == "refused"]
    assert code == 4 and refused and refused[0]["method"] == "milp:highs (refused)"
    assert "not built:" in refused[0]["message"] and "--memory-limit" in refused[0]["message"]
