"""Where the default target falls back to the free space, the source it names is why:
``search.stage_devices: free`` or a model no framework builds, not ``training.runtime``,
which names a framework (QA round 12: "the default of target none (from
training.runtime)" beside megatron-core; a fleet's fallback already named cluster.groups).
Oracle: the notice that explains the fallback, and the spec that states no target."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

CLUSTER = "cluster: {nodes: 2, gpus_per_node: 4, device: A100-80GB}\n"
TRAINING = "training: {global_batch_size: 16, seq_len: 1024}\n"
CHAIN = "model: {zoo: debug, overrides: {num_layers: 2}}\n"
DAG = """model:
  name: dag3
  seq_len: 1024
  layers:
    - {name: a, kind: transformer_block, flops_fwd: 1.0e+9, params: 1000, act_bytes: 1.0e+4,
       input_bytes: 1.0e+3, output_bytes: 1.0e+3, max_tp: 4}
    - {name: b, kind: transformer_block, flops_fwd: 1.0e+9, params: 1000, act_bytes: 1.0e+4,
       input_bytes: 1.0e+3, output_bytes: 1.0e+3, max_tp: 4}
    - {name: c, kind: transformer_block, flops_fwd: 1.0e+9, params: 1000, act_bytes: 1.0e+4,
       input_bytes: 1.0e+3, output_bytes: 1.0e+3, max_tp: 4}
  edges: [[a, b], [a, c], [b, c]]
"""


@pytest.mark.parametrize("model, search, source", [
    (CHAIN, "search: {pp_degrees: [1, 2], stage_devices: free}\n", "search.stage_devices"),
    (DAG, "search: {pp_degrees: [1]}\n", "model")])
def test_the_fallback_names_its_reason(tmp_path, model, search, source):
    spec = tmp_path / "spec.yaml"
    spec.write_text(model + CLUSTER + TRAINING + search)
    code, text = run_cli("solve", spec, "--json", "--time-limit", "30")
    assert code == 0, text
    doc = json.loads(text)
    space = doc["search_space"]
    assert space["target"] == {"framework": "none", "version": "", "source": source}
    assert space["schedules_source"] == f"default of target none (from {source})"
    assert any("the search is the free per-layer space (target: none)" in n for n in doc["notices"])
