"""Zoo, ONNX and torch.fx placement graphs on several device types price every transfer
on the slowest intra-node link of the types given, whatever their order, and say so
(QA round 13: every transfer took the FIRST type's link, so 1 x A100-80GB listed before
1 x A100-PCIe-80GB priced PCIe transfers at NVLink speed, and nothing said it).

Oracle, by hand (Hockney's α–β, times in ms): a node whose output is 32 MB costs
5 µs + 32e6 B / 32 GB/s = 1.005 ms on the PCIe Gen4 link (pcie4, 32 GB/s) and
5 µs + 32e6 / 300e9 = 0.1117 ms on NVLink 3 (300 GB/s). On a two-node chain split over
the two devices, each device's load is its node's roofline time (bytes / HBM bandwidth,
no FLOPs) plus that one transfer (sent by one, received by the other)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autopar_opt.model_zoo.op_graphs import OpGraph
from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.zoo import op_problem
from support.cli import run_cli

OUT = 32e6                           # bytes of node a's output
HBM = {"A100-80GB": 2039e9, "A100-PCIe-80GB": 1935e9}      # catalog HBM bandwidth, B/s


def _graph() -> OpGraph:
    g = OpGraph()
    a = g.add("a", [], out=OUT, mem=64e6)
    g.add("b", [a], out=1e6, mem=48e6)
    return g


@pytest.mark.parametrize("order", [("A100-80GB", "A100-PCIe-80GB"),
                                   ("A100-PCIe-80GB", "A100-80GB")])
def test_a_transfer_is_priced_on_the_slower_link_whatever_the_order(order):
    p = op_problem(_graph(), [{"type": t, "count": 1} for t in order], "two")
    by_hand = (5e-6 + OUT / 32e9) * 1e3
    assert p.comm[0] == pytest.approx(by_hand, rel=1e-12)          # 1.005 ms, not 0.1117
    assert "pcie4 (32 GB/s" in p.meta["transfers"] and "A100-80GB: nvlink3 300 GB/s" \
        in p.meta["transfers"]
    labels = p.device_labels()
    a_on, b_on = labels.index("A100-80GB0"), labels.index("A100-PCIe-80GB0")
    m = evaluate_placement(p, np.array([a_on, b_on]))
    assert m.loads[a_on] == pytest.approx(64e6 / HBM["A100-80GB"] * 1e3 + by_hand, rel=1e-9)
    assert m.loads[b_on] == pytest.approx(48e6 / HBM["A100-PCIe-80GB"] * 1e3 + by_hand, rel=1e-9)


def test_one_type_keeps_its_own_link_and_says_it():
    p = op_problem(_graph(), [{"type": "A100-80GB", "count": 2}], "one")
    assert p.comm[0] == pytest.approx((5e-6 + OUT / 300e9) * 1e3, rel=1e-12)
    assert "nvlink3 (300 GB/s, 5 us)" in p.meta["transfers"]


def test_place_says_which_link_priced_the_transfers(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text("placement:\n  graph: {zoo: synthetic_transformer, nodes: 20}\n  devices:\n"
                    "    - {type: A100-80GB, count: 1}\n    - {type: A100-PCIe-80GB, count: 1}\n")
    code, text = run_cli("place", spec)
    assert code == 0, text
    assert "transfers:    every node output priced" in text and "pcie4 (32 GB/s" in text
    code, js = run_cli("place", spec, "--json")
    assert "pcie4 (32 GB/s" in json.loads(js[js.index("{"):])["transfers"]
