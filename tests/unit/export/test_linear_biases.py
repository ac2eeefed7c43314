"""Linear biases a Hugging Face config states are said and launched, or the export is
refused (QA round 5, M3: Llama's and Qwen3's ``attention_bias`` and Llama's ``mlp_bias``
were priced, while the architecture line said "no biases" and the Megatron-LM file wrote
``--disable-bias-linear``)."""

from __future__ import annotations

import json

import pytest

from support.frameworks import validate_megatron_lm
from support.hf_specs import write_hf_spec
from support.paths import REPO
from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.arch import describe
from autopar_opt.spec import load_spec

HF = REPO / "model_zoo" / "hf"


def _spec(tmp_path, name: str, zero: int = 1, **changes):
    config = json.loads((HF / f"{name}.json").read_text())
    config.update(changes, num_hidden_layers=4)
    return load_spec(write_hf_spec(tmp_path, config, f"tp: 2, micro_batch_size: 2, zero: {zero}"))


@pytest.mark.parametrize("changes, words", [
    ({"attention_bias": True}, "attention biases (Q, K, V, O)"),
    ({"mlp_bias": True}, "MLP biases"),
])
def test_biases_on_one_part_are_said_and_megatron_refuses_them(tmp_path, changes, words):
    spec = _spec(tmp_path, "llama-3.1-8b", **changes)
    assert words in describe(spec.graph.arch)
    with pytest.raises(ExportError, match="biases alone"):
        export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "megatron")


def test_biases_on_every_linear_layer_launch_as_megatron_builds_them(tmp_path):
    """attention_bias and mlp_bias together are Megatron's default --add-bias-linear: the
    file leaves out --disable-bias-linear, and Megatron-LM's parser reads biases on."""
    pytest.importorskip("megatron.training.arguments")
    plain = _spec(tmp_path, "llama-3.1-8b")
    spec = _spec(tmp_path, "llama-3.1-8b", attention_bias=True, mlp_bias=True)
    a = spec.graph.arch
    assert a.biases and ", biases" in describe(a)
    # Llama's biases: q (h), k and v (kv·d each), o (h), gate and up (f each), down (h)
    h, f, kv = a.hidden, a.ffn_hidden, a.kv_heads * a.head_dim
    assert spec.graph.total_params() - plain.graph.total_params() == 4 * (3 * h + 2 * kv + 2 * f)
    text = export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "megatron").text
    assert "--disable-bias-linear" not in text
    args = validate_megatron_lm(text, spec.cluster.num_devices, "hopper")
    assert args.add_bias_linear


def test_torchtitan_refuses_biases_its_flavour_has_not(tmp_path):
    spec = _spec(tmp_path, "qwen3-8b", zero=2, attention_bias=True)
    assert "attention biases (Q, K, V, O)" in describe(spec.graph.arch)
    with pytest.raises(ExportError, match="linear biases"):
        export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "torchtitan")


def test_gpt_neox_without_attention_biases_keeps_its_mlp_biases(tmp_path):
    """GPTNeoXConfig.attention_bias (default true) removes the biases of query_key_value and
    dense: 4·h parameters per layer (QA round 5: the key was ignored); the MLP keeps its."""
    from autopar_opt.model_zoo.hf_config import build_hf_graph, load_hf_config
    config = json.loads((HF / "gpt-neox-20b.json").read_text())
    graphs = {}
    for bias in (True, False):
        (tmp_path / "c.json").write_text(json.dumps(dict(config, attention_bias=bias)))
        graphs[bias] = build_hf_graph(load_hf_config(tmp_path / "c.json")[0], 2048)
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    assert graphs[True].total_params() - graphs[False].total_params() == 4 * h * layers
    assert graphs[True].arch.biases and ", biases" in describe(graphs[True].arch)
    assert not graphs[False].arch.biases and "MLP biases" in describe(graphs[False].arch)
