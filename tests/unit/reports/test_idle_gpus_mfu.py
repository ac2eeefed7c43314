"""The MFU of a plan that leaves GPUs idle says over which GPUs it is counted (QA round 12:
a free-stage plan on 8 of 12 GPUs printed "MFU: 28.36 %", the whole cluster's, with no word
that over its own 8 GPUs it is 42.5%). Oracle: the same model FLOPs over the used GPUs'
peak is MFU x total / used."""

from __future__ import annotations

import re

from autopar_opt.reports.formatting import idle_gpus_mfu_note
from support.cli import run_cli
from support.paths import REPO


def test_the_note_by_hand():
    assert idle_gpus_mfu_note(0.2836, [4, 4], 12) == (
        " (over all 12 GPUs of the cluster; 42.5% over the 8 the plan uses)")
    assert idle_gpus_mfu_note(0.45, [4, 8], 12) == ""          # every GPU used
    assert idle_gpus_mfu_note(0.45, None, 12) == ""            # stages on the whole cluster
    assert idle_gpus_mfu_note(None, [4, 4], 12) == ""


def test_estimate_of_a_plan_on_8_of_12_gpus(tmp_path):
    text = (REPO / "examples" / "free_stages_lm_head.yaml").read_text()
    idle = text.replace("- {layers: [head], strategies: [{dp: 2, tp: 4}], devices: 8}",
                        "- {layers: [head], strategies: [{dp: 1, tp: 4}], devices: 4}")
    assert idle != text
    spec = tmp_path / "idle.yaml"
    spec.write_text(idle)
    code, out = run_cli("estimate", spec)
    assert code == 0, out
    line = next(x for x in out.splitlines() if x.startswith("MFU:"))
    mfu, used = re.search(r"MFU:\s+([\d.]+) % \(over all 12 GPUs of the cluster; ([\d.]+)% over "
                          r"the 8 the plan uses\)", line).groups()
    assert float(used) == round(float(mfu) * 12 / 8, 1)
