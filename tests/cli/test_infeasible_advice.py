"""An infeasible search advises only what its space does not already offer (QA round 12):
a space with ZeRO-3, full recomputation, every pipeline and tensor degree and every
micro-batch count was still told to "allow ZeRO-3 sharding and full recomputation", "allow
more pipeline stages or tensor parallelism" and "use more micro-batches". Oracle: the
space plan.json states (``search_space``) against each piece of advice."""

from __future__ import annotations

import json

from support.cli import run_cli

SPEC = """model: {zoo: debug, overrides: {num_layers: 2}}
cluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB, device_memory_gib: 0.78}
training: {global_batch_size: 8, seq_len: 2048, dtype: bf16}
target: {framework: none}
solver: {name: dp, time_limit_s: 20}
"""


def _solve(tmp_path, search: str = "") -> dict:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC + search)
    code, text = run_cli("solve", path, "--json")
    assert code == 3, text
    return json.loads(text)


def test_the_whole_default_space_is_told_only_to_change_the_devices(tmp_path):
    doc = _solve(tmp_path)
    space = doc["search_space"]
    assert 3 in space["zero_levels"] and "full" in space["recompute"]
    assert space["pp_degrees"] is None and space["tp_degrees"] is None     # every divisor
    assert space["microbatches"] is None and space["max_microbatches"] >= 8
    assert doc["infeasibility"]["advice"] == ["use more or larger devices (cluster.nodes, "
                                              "cluster.device)"]


def test_a_narrow_space_is_told_what_it_leaves_out(tmp_path):
    doc = _solve(tmp_path, "search: {zero_levels: [0, 1], recompute: [none], pp_degrees: [1], "
                           "microbatches: [1]}\n")
    advice = doc["infeasibility"]["advice"]
    assert advice[0] == ("allow ZeRO-3 sharding and full recomputation (search.zero_levels, "
                         "search.recompute)")
    assert "allow more pipeline stages or tensor parallelism (search.pp_degrees)" in advice
    assert "use more micro-batches to shrink activations (search.microbatches)" in advice
    assert advice[-1] == "use more or larger devices (cluster.nodes, cluster.device)"
