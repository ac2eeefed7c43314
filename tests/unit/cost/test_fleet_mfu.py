"""A fleet plan's MFU is over every GPU of the fleet, each group at its own device's peak,
the groups it leaves idle included, as on one cluster (``cluster.num_devices``) and as the
README and plan.json's schema define it. It was over the used stages' GPUs alone: a plan on
the H100 group of an A100 + H100 fleet reported the H100s' utilisation as the fleet's.

Oracle: the same plan priced on the H100 group as a plain cluster, its MFU rescaled by the
peaks (2 x 989 against 2 x 989 + 2 x 312 TFLOP/s bf16, the catalog's datasheet figures)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import yaml

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.reports.formatting import fleet_idle_mfu_note, fmt_pct
from autopar_opt.spec import load_spec
from support.fleets import TINY_MIX_CLUSTER


def test_a_plan_on_one_group_of_a_fleet_is_measured_against_the_whole_fleet(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"model": {"zoo": "debug"},
                                    "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
                                    "training": {"global_batch_size": 16}}))
    spec = load_spec(str(path))
    fleet, graph, training = spec.fleet, spec.graph, spec.training
    h100 = fleet.groups[1]
    alone = uniform_plan([layer.name for layer in graph.layers], 1, Strategy(dp=2, tp=1), 2)
    on_h100 = uniform_plan([layer.name for layer in graph.layers], 1, Strategy(dp=2, tp=1, group=1), 2)
    m_alone = evaluate(alone, graph, h100, training)
    m_fleet = evaluate(replace(on_h100, stage_groups=[1], stage_devices=[2]), graph, fleet, training)
    assert m_fleet.iteration_time_s == pytest.approx(m_alone.iteration_time_s, rel=1e-12)
    p_h100, p_a100 = 2 * 989e12, 2 * 312e12
    assert m_fleet.mfu == pytest.approx(m_alone.mfu * p_h100 / (p_h100 + p_a100), rel=1e-12)
    groups = [{"name": "a100", "num_devices": 2, "peak_tflops": 312.0},
              {"name": "h100", "num_devices": 2, "peak_tflops": 989.0}]
    note = fleet_idle_mfu_note(m_fleet.mfu, groups, [{"group": "h100", "devices": 2}])
    # the debug model's 4.1e-4: written with two significant digits, as the MFU it follows
    assert note == (f" (over all 4 GPUs of the fleet; {fmt_pct(m_alone.mfu, 1)} over the 2 the "
                    "plan uses)") and fmt_pct(m_alone.mfu, 1) == f"{100 * m_alone.mfu:.2g}%"
    assert fleet_idle_mfu_note(m_fleet.mfu, groups, [{"group": "h100", "devices": 2},
                                                     {"group": "a100", "devices": 2}]) == ""
