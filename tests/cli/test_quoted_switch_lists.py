"""A quoted switch in a list of switches is refused as a quoted scalar switch is (QA round
12): pydantic's lax mode read ``search.sequence_parallel: ['no']`` as ``[false]`` and
``search.hybrid_sharding: [false, 'on']`` as ``[false, true]`` silently, while
``search.tp_within_node: 'no'`` was refused. Oracle: the scalar's own message; the space
plan.json would have stated."""

from __future__ import annotations

import pytest

from support.cli import run_cli

SPEC = """model: {zoo: debug, overrides: {num_layers: 2}}
cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}
training: {global_batch_size: 16, seq_len: 128}
search: {pp_degrees: [1], tp_degrees: [1, 2], microbatches: [2], KEY: VALUE}
"""


@pytest.mark.parametrize("key, value, words", [
    ("sequence_parallel", "['no']", "search.sequence_parallel[0] = 'no': must be a valid boolean"),
    ("sequence_parallel", "[false, 'yes']",
     "search.sequence_parallel[1] = 'yes': must be a valid boolean"),
    ("hybrid_sharding", "[false, 'on']", "search.hybrid_sharding[1] = 'on': must be a valid boolean"),
    ("tp_within_node", "'no'",                   # the scalar, refused before too
     "search.tp_within_node = 'no': must be true or false, not the text 'no'")])
def test_a_quoted_switch_is_refused(tmp_path, key, value, words):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("KEY", key).replace("VALUE", value))
    code, out = run_cli("solve", spec, "--out", tmp_path / "o")
    flat = " ".join(out.split())
    assert code == 2, out
    assert words in flat and "expected true or false" in flat, out
    assert not (tmp_path / "o").exists()


def test_unquoted_switches_still_solve(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("KEY", "sequence_parallel").replace("VALUE", "[false, true]"))
    code, out = run_cli("solve", spec, "--quiet", "--time-limit", "20")
    assert code == 0, out
