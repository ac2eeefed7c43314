"""A batch that no data-parallel degree of a layer divides is named as such when the
layer's own tensor-parallel rule (tp divides its max_tp, e.g. its heads) is what rules
out the degree that would divide it (QA round 12): 8 GPUs per stage, 7 samples, 4 heads:
dp 1 needs tp 8, which no block takes, so every configuration was "proven infeasible
whatever the memory" with no reason, and advised "use more or larger devices". Oracle:
each fix the reason names (an even batch, two stages) solves."""

from __future__ import annotations

import json

from support.cli import run_cli

SPEC = """model: {zoo: debug, overrides: {num_layers: 2}}
cluster: {nodes: 1, gpus_per_node: 8, device: A100-80GB}
training: {global_batch_size: BATCH, seq_len: 128, dtype: bf16}
target: {framework: none}
search: {pp_degrees: [PP]}
"""


def _solve(tmp_path, batch: int, pp: int) -> tuple[int, dict]:
    path = tmp_path / f"spec_{batch}_{pp}.yaml"
    path.write_text(SPEC.replace("BATCH", str(batch)).replace("PP", str(pp)))
    code, text = run_cli("solve", path, "--json")
    return code, json.loads(text)


def test_the_layer_s_tp_rule_is_the_reason_and_the_fixes_solve(tmp_path):
    code, doc = _solve(tmp_path, 7, 1)
    assert code == 3
    inf = doc["infeasibility"]
    assert ("split over none of the data-parallel degrees the space allows (8, 4, 2 = devices "
            "per stage / (tp x cp), tp dividing block000's max_tp 4)") in inf["reason"]
    assert "a multiple of 2 samples" in inf["reason"] and "larger tp_degrees" not in inf["reason"]
    assert "more memory does not help" in inf["advice"][0]
    assert not any("larger devices" in a for a in inf["advice"])
    for batch, pp in ((8, 1), (7, 2)):                  # the two fixes it names
        code, doc = _solve(tmp_path, batch, pp)
        assert code == 0 and doc["status"] == "optimal"
