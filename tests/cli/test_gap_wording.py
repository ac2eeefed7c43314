"""An "optimal" that met a requested gap is said to be within it, with the gap: the status
field stays "optimal" (the solve did what it was asked), the headline and the report do not
read as a proof. Oracle: the certificate's own gap, against the proof tolerance."""

from __future__ import annotations

import json

from autopar_opt.core.result import PROOF_GAP, status_words
from support.cli import run_cli

SPEC = """model: {zoo: t5-large-32}
cluster: {zoo: dgx-a100-8}
training: {global_batch_size: 32, seq_len: 512, dtype: bf16}
target: none
search: {pp_degrees: [2], tp_degrees: [1, 2], sequence_parallel: [false], zero_levels: [0, 1],
         recompute: [none], schedules: [1f1b], microbatches: [4]}
solver: {name: highs, time_limit_s: 30}
"""


def test_status_words_only_qualify_a_gap_above_the_proof_tolerance():
    assert status_words("optimal", 0.0) == "optimal"
    assert status_words("optimal", PROOF_GAP / 2) == "optimal"
    # the gap is (T - L)/T; above the bound is (T - L)/L = 0.0303/0.9697 (QA round 9)
    assert status_words("optimal", 0.0303) == ("optimal within the requested gap (gap 3.03%: "
                                               "3.12% above the proven bound)")
    assert status_words("feasible", 0.0303) == "feasible"
    assert status_words("optimal", None) == "optimal"


def test_a_gap_solve_is_said_within_the_gap(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    code, text = run_cli("solve", spec, "--gap", "0.2", "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    gap = doc["certificate"]["gap"]
    assert doc["status"] == "optimal"
    html = (tmp_path / "out" / "report.html").read_text()
    if gap > PROOF_GAP:          # HiGHS stopped inside the 20% it was given
        said = status_words("optimal", gap)
        assert f"(8 x A100-80GB): {said}" in text and said in html
    code, text = run_cli("solve", spec, "--gap", "0", "--out", tmp_path / "exact")
    exact = json.loads((tmp_path / "exact" / "plan.json").read_text())
    assert exact["certificate"]["gap"] <= PROOF_GAP
    headline = next(line for line in text.splitlines() if "(8 x A100-80GB):" in line)
    assert headline.endswith(": optimal")
    assert exact["certificate"]["primal"] <= doc["certificate"]["primal"] + 1e-12
