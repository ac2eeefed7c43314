"""An infeasible search's per-configuration reasons (plan.json ``infeasibility.details``)
speak the scale of a plan's peak memory, as its ``reason`` and every plan's
``peak_memory_gib`` do (QA round 12): they said "the least memory any plan needs is 0.844
GiB ..., capacity is 0.774 GiB per device" beside "no plan fits in the 1.60 GiB usable" for
the same device (modelled bytes against HBM less both reserves over the allocator
overhead). Oracle: every plan of the space priced by ``evaluate``: the least of their peaks
is the figure the exact DP names, and ``memory_capacity_gib`` the usable figure."""

from __future__ import annotations

import itertools
import json
import re

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute
from autopar_opt.spec import load_spec
from support.cli import run_cli

SPEC = """model: {zoo: debug, overrides: {num_layers: 2}}
cluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB, device_memory_gib: MEM}
training: {global_batch_size: 8, seq_len: 2048, dtype: bf16}
target: {framework: none}
search: {pp_degrees: [1], tp_degrees: [1], zero_levels: [0, 3], recompute: [none, full],
         microbatches: [1], sequence_parallel: [false], hybrid_sharding: [false]}
solver: {name: dp, time_limit_s: 20}
"""


def _details(tmp_path, mem: float) -> tuple[list[str], object]:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("MEM", str(mem)))
    code, text = run_cli("solve", path, "--json")
    assert code == 3, text
    return json.loads(text)["infeasibility"]["details"], load_spec(path)


def _every_peak(spec) -> tuple[float, float]:
    """The least peak memory over every plan of the space, and the usable memory."""
    names = [layer.name for layer in spec.graph.layers]
    options = [Strategy(dp=2, tp=1, zero=z, recompute=r) for z in (0, 3)
               for r in (Recompute.none, Recompute.full)]
    least, usable = float("inf"), None
    for combo in itertools.product(options, repeat=len(names)):
        m = evaluate(Plan([StagePlan(names, list(combo))], 1), spec.graph, spec.cluster,
                     spec.training, spec.cost_params)
        least = min(least, max(s.peak_memory_gib for s in m.stages))
        usable = m.memory_capacity_gib
    return least, usable


def _figures(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+\.\d+) GiB", line)]


def test_the_dp_s_least_memory_is_the_least_peak_of_the_plans(tmp_path):
    details, spec = _details(tmp_path, 0.85)
    least, usable = _every_peak(spec)
    line = next(d for d in details if "least memory any plan needs" in d)
    need, against = _figures(line)
    assert least > usable                              # infeasible indeed
    assert abs(need - least) < 1e-3 and abs(against - usable) < 1e-3


def test_a_layer_alone_is_held_against_the_usable_memory(tmp_path):
    details, spec = _details(tmp_path, 0.8)
    least, usable = _every_peak(spec)
    line = next(d for d in details if "alone needs" in d)
    need, against = _figures(line)
    assert abs(against - usable) < 5e-3               # printed to 2 decimals
    assert usable < need <= least + 5e-3              # one layer's floor: no plan peaks below it


def test_the_least_memory_of_a_proven_infeasible_space_is_the_least_peak(tmp_path):
    """plan.json's least_memory_gib was the simple per-device floor (0.847 GiB of 0.85 here,
    so the reason fell back to "the simple floor is below it"); it is now the larger of the
    floor and the exact least over contiguous partitions, which the brute force reaches."""
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("MEM", "0.85"))
    code, text = run_cli("solve", path, "--json")
    assert code == 3, text
    inf = json.loads(text)["infeasibility"]
    least, usable = _every_peak(load_spec(path))
    assert abs(inf["least_memory_gib"] - least) < 1e-9 and inf["capacity_gib"] == usable
    assert (f"the least memory any plan needs is at least {least:.2f} GiB per device against "
            f"{usable:.2f} GiB usable") in inf["reason"]
