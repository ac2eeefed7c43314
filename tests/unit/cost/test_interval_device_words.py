"""An interval says when no published run behind it ran on the priced kind of part: every
record of both record files ran on SXM or superchip parts at rated power, so a PCIe/NVL card
or a power-limited part is priced by figures (form-factor peaks and links, the capped clock)
that no residual measures (issue 28 audit, QA round 17: the interval of an H100 PCIe at
300 W read like an SXM one's)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.interval import PUBLISHED_FORMS, device_unlike, plan_interval
from autopar_opt.ir.hardware import DEVICE_CATALOG
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.ir.training import Training
from support import paths

FILES = (paths.REPO / "tests" / "data" / "published_runs.yaml",
         paths.REPO / "benchmarks" / "calibration" / "holdout_runs.yaml")


def test_every_published_run_is_of_a_published_form_at_rated_power():
    """What keeps the sentence true: a record on another form or under a cap makes it false."""
    seen = set()
    for path in FILES:
        runs, _ = model_records(load_run_file(path))
        for run in runs:
            d = run.cluster.device
            assert d.form in PUBLISHED_FORMS, (run.id, d.name, d.form)
            assert d.power_limit_w is None or d.power_limit_w >= d.tdp_w, (run.id, d.power_limit_w)
            seen.add(d.form)
    assert seen == set(PUBLISHED_FORMS)


@pytest.mark.parametrize("name,limit,words", [
    ("H100-SXM-80GB", None, None),
    ("H100-SXM-80GB", 700.0, None),                       # at its rated power: no cap
    ("H100-SXM-80GB", 500.0, "under a power limit (500 W of 700 W rated)"),
    ("H100-PCIe-80GB", None, "on a PCIe card: "),
    ("H100-NVL-94GB", 300.0, "on a NVL card or under a power limit (300 W of 400 W rated)"),
    ("GB200", None, None),
])
def test_the_words_name_what_no_run_measured(name, limit, words):
    device = replace(DEVICE_CATALOG[name], power_limit_w=limit)
    text = device_unlike(device)
    if words is None:
        assert text == ""
    else:
        assert words in text and device.name in text


def test_the_plan_interval_carries_it():
    graph = build_model("debug", overrides={"num_layers": 2})
    base = get_cluster("debug-2x4")
    training = Training(global_batch_size=8, seq_len=128)
    pcie = replace(base, device=DEVICE_CATALOG["H100-PCIe-80GB"])
    sxm = replace(base, device=DEVICE_CATALOG["H100-SXM-80GB"])
    assert "PCIe card" in plan_interval(graph, pcie, training, None, 1.0).text()
    assert "card" not in plan_interval(graph, sxm, training, None, 1.0).text()
