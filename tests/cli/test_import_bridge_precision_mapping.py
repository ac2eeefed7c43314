"""A Bridge overrides file whose ``mixed_precision`` is not a recipe name is refused clearly.

Bridge takes ``mixed_precision`` as a recipe name or as a ``MixedPrecisionConfig``'s fields;
before, a mapping (``mixed_precision: {bf16: true}``) or a list crashed the reader
(``TypeError: unhashable type: 'dict'`` in ``bridge_argv``, reported as a bug in the tool,
exit 3). Oracle: the same file with the recipe name ``bf16_mixed`` reads (exit 0), so the
refusal (exit 2, naming the key and the recipe names) is the mapping's."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

SPEC = """\
model: {zoo: debug}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: megatron-core}
plan: {megatron_bridge: bridge.yaml}
"""
BRIDGE = """\
model: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2, sequence_parallel: true}
train: {micro_batch_size: 2, global_batch_size: 16}
mixed_precision: PRECISION
"""


def _estimate(folder, precision):
    (folder / "bridge.yaml").write_text(BRIDGE.replace("PRECISION", precision))
    (folder / "s.yaml").write_text(SPEC)
    code, text = run_cli("estimate", folder / "s.yaml", "--json")
    return code, json.JSONDecoder().raw_decode(text[text.index("{\n"):])[0]


@pytest.mark.parametrize("precision", ["{bf16: true, params_dtype: bfloat16}", "[bf16_mixed]"])
def test_a_precision_that_is_not_a_recipe_name_is_refused_naming_the_key(tmp_path, precision):
    code, doc = _estimate(tmp_path, "bf16_mixed")
    assert code == 0, doc
    code, doc = _estimate(tmp_path, precision)
    assert code == 2, doc
    [problem] = doc["error"]["problems"]
    assert problem["key"] == "plan.megatron_bridge"
    assert problem["rule"].startswith("mixed_precision = ")
    assert "not a recipe name" in problem["rule"] and "bf16_mixed" in problem["rule"]
