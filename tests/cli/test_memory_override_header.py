"""The summary header of a cluster whose memory ``cluster.device_memory_gib`` set says so
(QA round 13: "8 x A100-80GB" for 6 GiB devices named the catalog part's 80 GB). Oracle:
the spec's own key and value, and the same spec without the key (no note)."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

SPEC = """model: {zoo: gpt-1.7b, overrides: {num_layers: 2}}
cluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB MEMORY}
training: {global_batch_size: 8, seq_len: 1024, dtype: bf16}
target: {framework: megatron}
search: {pp_degrees: [1], tp_degrees: [1], sequence_parallel: [false], zero_levels: [1],
         hybrid_sharding: [false], recompute: [none], schedules: [1f1b], microbatches: [1]}
solver: {name: dp, time_limit_s: 10}
plan: {tp: 1, pp: 1, microbatches: 1}
"""
NOTE = "2 x A100-80GB (memory set to 24 GiB by cluster.device_memory_gib)"


@pytest.mark.parametrize("stated", [True, False])
def test_solve_and_estimate_headers_say_the_set_memory(tmp_path, stated):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("MEMORY", ", device_memory_gib: 24" if stated else ""))
    out = tmp_path / "out"
    code, text = run_cli("solve", spec, "--out", out)
    assert code == 0, text
    header = text.strip().splitlines()[0]
    doc = json.loads((out / "plan.json").read_text())
    report = (out / "report.html").read_text()
    code, estimate = run_cli("estimate", spec)
    assert code == 0, estimate
    cluster_line = next(line for line in estimate.splitlines() if line.startswith("cluster:"))
    if stated:
        assert NOTE in header
        assert doc["spec"]["cluster"]["device_memory_gib"] == 24.0
        assert doc["spec"]["cluster"]["hbm_gib"] == 24.0
        assert "A100-80GB (memory set to 24 GiB by cluster.device_memory_gib)" in report
        assert NOTE in cluster_line
    else:
        assert "(2 x A100-80GB)" in header and "memory set" not in text
        assert doc["spec"]["cluster"]["device_memory_gib"] is None
        assert "memory set" not in report
        assert cluster_line.endswith("(2 x A100-80GB)")


def test_a_fleet_group_with_set_memory_says_so(tmp_path):
    """A fleet group's ``device_memory_gib`` is in plan.json's group and its summary; the
    other group, the catalog part as it is, carries none."""
    from autopar_opt.search.fleet_document import fleet_dict
    from autopar_opt.spec.spec import load_spec

    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.split("cluster:")[0] + """cluster:
  name: mixed
  groups:
    - {name: a, device: A100-80GB, nodes: 1, gpus_per_node: 2, device_memory_gib: 24}
    - {name: h, device: H100-SXM-80GB, nodes: 1, gpus_per_node: 2}
  links:
    - {between: [a, h], bandwidth_gb_per_s: 25, latency_us: 20}
training: {global_batch_size: 8, seq_len: 1024, dtype: bf16}
""")
    groups = fleet_dict(load_spec(str(spec)).fleet, "bf16")["groups"]
    assert [g["device_memory_gib"] for g in groups] == [24.0, None]
