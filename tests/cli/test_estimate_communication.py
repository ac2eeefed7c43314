"""``autopar estimate`` prints each kind of communication's total, hidden, exposed and
interference time beside the breakdown (plan.json ``metrics.communication`` held them, the
terminal did not: QA round 17). Oracle: the same command's ``--json`` document, and the
breakdown's own exposed terms."""

from __future__ import annotations

import json

from support.cli import communication_table, run_cli

SPEC = "examples/estimate_megatron_gpt3_175b.yaml"
#: terminal name -> plan.json kind and the breakdown term equal to its exposed time
ROWS = {"TP": ("tp", "tp_comm_s"), "DP grad sync": ("dp", "dp_comm_s")}


def test_estimate_prints_the_communication_of_its_json():
    code, text = run_cli("estimate", SPEC)
    assert code == 0, text
    code, doc = run_cli("estimate", SPEC, "--json")
    assert code == 0, doc
    metrics = json.loads(doc)["metrics"]
    table = communication_table(text)
    # the kinds that move anything, and only those (GPT-3 175B at tp8 pp8 without ZeRO)
    assert set(table) == set(ROWS)
    for name, (kind, term) in ROWS.items():
        want = metrics["communication"][kind]
        got = dict(zip(("total_s", "hidden_s", "exposed_s", "interference_s"), table[name]))
        for key, value in got.items():
            assert abs(value - want[key]) <= 5e-4 * max(abs(want[key]), 1e-9), (name, key)
        assert abs(got["exposed_s"] - metrics["breakdown"][term]) <= 5e-4 * metrics["breakdown"][term]
    # TP under Transformer Engine's user buffers hides most of its traffic, and the rows keep
    # exposed - interference = total - hidden (to the printed 4 digits)
    total, hidden, exposed, interference = table["TP"]
    assert hidden > 0.5 * total
    assert abs((exposed - interference) - (total - hidden)) <= 2e-3 * total
