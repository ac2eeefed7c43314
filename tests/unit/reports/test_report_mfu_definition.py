"""The report defines its MFU with the figures it divides by (QA round 36).

The card said "MFU 54.3%" and nothing said over what. Oracle: Megatron-LM's model-FLOPs
formula for a GPT (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training
on GPU Clusters Using Megatron-LM", SC21, Sec. 5.1: F = 72·B·s·l·h²·(1 + s/(6h) +
V/(12·l·h)) per iteration without recomputation). The report's stated definition, with
the peak per GPU and the GPU count it prints, times its iteration time and MFU, must give
that F for the quickstart's GPT 1.7B (B 64, s 2048, l 24, h 2304, V 51,200).
"""

from __future__ import annotations

import re

import pytest

from autopar_opt.reports.render import render_html


def test_the_stated_mfu_definition_gives_megatrons_model_flops(solved):
    html = render_html(solved)
    found = re.search(r'id="mfu-definition">([^<]*)<', html)
    assert found, "the report does not define its MFU"
    words = found.group(1)
    peak = float(re.search(r"× ([\d.]+) TFLOP/s", words).group(1)) * 1e12
    gpus = int(re.search(r"× (\d+) GPUs", words).group(1))
    assert "recomputation not counted" in words
    mfu = float(re.search(r'MFU</div><div class="value">([\d.]+)%', html).group(1)) / 100
    t = float(re.search(r'Iteration time</div><div class="value">([\d.]+) s', html).group(1))
    b, s, l, h, v = 64, 2048, 24, 2304, 51200
    megatron = 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
    # the card rounds MFU to 0.1% and the time to 1 ms: 0.2% + 0.1% of slack
    assert mfu * t * peak * gpus == pytest.approx(megatron, rel=4e-3)
