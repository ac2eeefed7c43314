"""The MFU of a plan that leaves GPUs idle says over which GPUs it is counted (QA round 12:
a free-stage plan on 8 of 12 GPUs printed "MFU: 28.36 %", the whole cluster's, with no word
that over its own 8 GPUs it is 42.5%). Oracle: the same model FLOPs over the used GPUs'
peak is MFU x total / used."""

from __future__ import annotations

import re

from autopar_opt.reports.formatting import fleet_idle_mfu_note, idle_gpus_mfu_note
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


def test_a_small_utilisation_over_the_used_gpus_keeps_its_digits():
    """A tiny model's MFU is printed 0.019% (two significant digits, ``fmt_pct``); the
    utilisation over the GPUs the plan uses was printed ``:.1f`` beside it, "0.0%" (QA round 36,
    the debug model on 4 H100s of a 2 x A100-40GB + 4 x H100 fleet). By hand: MFU 1.867e-4
    over 2 x 312 + 4 x 989 = 4580 TFLOP/s is 1.867e-4 x 4580 / 3956 = 2.16e-4 over the 4 H100s
    (0.022%); on a cluster, 1.0e-4 over 12 GPUs is 1.5e-4 over the 8 used (0.015%)."""
    groups = [{"name": "a100", "num_devices": 2, "peak_tflops": 312.0},
              {"name": "h100", "num_devices": 4, "peak_tflops": 989.0}]
    note = fleet_idle_mfu_note(1.867e-4, groups, [{"group": "h100", "devices": 4}])
    assert note == " (over all 6 GPUs of the fleet; 0.022% over the 4 the plan uses)"
    assert idle_gpus_mfu_note(1.0e-4, [4, 4], 12) == (
        " (over all 12 GPUs of the cluster; 0.015% over the 8 the plan uses)")
    # a utilisation of a usual size keeps one decimal, as before
    assert "42.5% over the 8" in idle_gpus_mfu_note(0.2836, [4, 4], 12)
