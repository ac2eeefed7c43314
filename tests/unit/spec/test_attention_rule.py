"""One truth for a spec's attention core: the kernel its runtime runs on its GPU
(:mod:`autopar_opt.spec.attention_rule`). QA round 10: under megatron-lm (unfused by
default) a decoder built with FlashAttention's activations was priced unfused in compute
("scores stored") while its memory left the 5·a·s² scores out (8 GiB per device, Llama-3.1-8B
at 4k tokens, tp 8); a stated flash_attention the runtime contradicted was dropped.

Oracle: the score activations by hand, Korthikanti et al. 2022, Eq. 2: 5·a·s²·b bytes per
layer (the softmax input and output, 2 bytes each, and the 1-byte dropout mask), 4·a·s²·b
for a model trained without dropout (Llama 3), split by tp."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.spec import SpecError, load_spec


def _spec(tmp_path, runtime: str, device: str = "H100-SXM-80GB", model: str | None = None,
          options: dict | None = None):
    data = {"model": yaml.safe_load(model) if model else {"zoo": "llama3-8b"},
            "cluster": {"nodes": 1, "gpus_per_node": 8, "device": device},
            "training": {"global_batch_size": 8, "seq_len": 4096, "runtime": runtime,
                         "dtype": "fp16" if device.startswith("V100") else "bf16",
                         **({"runtime_options": options} if options else {})},
            "plan": {"tp": 8, "pp": 1, "microbatches": 8}}
    path = tmp_path / f"{runtime}_{device}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _activations(spec) -> float:
    m = evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    return max(st.activation_gib for st in m.stages)


def test_an_unfused_runtime_keeps_the_scores_in_memory(tmp_path):
    """Llama-3-8B (32 layers, 32 heads, no dropout), seq 4096, one sample per micro-batch,
    tp 8, one stage: megatron-lm's unfused core keeps its fused softmax's 16-bit output,
    2·32·4096²·1 bytes per layer, /8 (no dropout mask or output: cost.scores)."""
    unfused = load_spec(_spec(tmp_path, "megatron-lm"))
    fused = load_spec(_spec(tmp_path, "megatron-core"))
    assert not unfused.training.runtime.flash_attention
    scores_gib = 32 * 2 * 32 * 4096 ** 2 / 8 / 2 ** 30
    assert _activations(unfused) - _activations(fused) == pytest.approx(scores_gib, rel=1e-6)
    assert any(layer.act_attn_bytes > 0 for layer in unfused.graph.layers)
    # flash stated through the runtime: fused, no scores
    flash = load_spec(_spec(tmp_path, "megatron-lm", options={"flash_attention": True}))
    assert _activations(flash) == pytest.approx(_activations(fused), rel=1e-9)


def test_a_gpu_without_fused_kernels_keeps_them_too(tmp_path):
    spec = load_spec(_spec(tmp_path, "megatron-core", device="V100-32GB"))
    assert not spec.training.runtime.flash_attention
    assert any(layer.act_attn_bytes > 0 for layer in spec.graph.layers)


@pytest.mark.parametrize("runtime, stated, words", [
    ("megatron-lm", "true", "runtime_options: {flash_attention: true}"),
    ("megatron-core", "false", "runtime_options: {flash_attention: false}"),
])
def test_a_stated_flag_the_runtime_contradicts_is_refused(tmp_path, runtime, stated, words):
    model = f"{{hf_config: llama-3.1-8b, flash_attention: {stated}}}"
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, runtime, model=model))
    text = str(err.value)
    assert f"model.flash_attention = {stated}" in text.lower() or \
        f"model.flash_attention = {stated.capitalize()}" in text
    assert words in text


def test_a_stated_flag_the_runtime_agrees_with_is_kept(tmp_path):
    spec = load_spec(_spec(tmp_path, "megatron-core",
                           model="{hf_config: llama-3.1-8b, flash_attention: true}"))
    assert all(layer.act_attn_bytes == 0 for layer in spec.graph.layers)


def test_a_megatron_command_line_says_what_the_runtime_prices_instead(tmp_path):
    """plan.megatron_args runs unfused attention and no overlaps (Megatron-LM's defaults
    off) while training.runtime megatron-core prices fused attention and overlaps: each
    said with the runtime option that prices the command line (QA round 10: silent)."""
    data = yaml.safe_load(_spec(tmp_path, "megatron-core").read_text())
    data["plan"] = {"megatron_args": "--tensor-model-parallel-size 8 --micro-batch-size 1 "
                                     "--attention-backend unfused --use-distributed-optimizer"}
    path = tmp_path / "cmd.yaml"
    path.write_text(yaml.safe_dump(data))
    notes = " ".join(load_spec(path).notices)
    assert "--attention-backend unfused: the attention priced is training.runtime " \
           "megatron-core's fused kernel" in notes
    for flag, option in (("--overlap-grad-reduce", "grad_reduce_overlap"),
                         ("--overlap-param-gather", "param_gather_overlap"),
                         ("--tp-comm-overlap", "tp_comm_overlap")):
        assert f"no {flag} (Megatron-LM's default: off)" in notes and f"{{{option}: false}}" in notes
    data["plan"]["megatron_args"] = ("--tensor-model-parallel-size 8 --micro-batch-size 1 "
                                     "--global-batch-size 8 "
                                     "--overlap-grad-reduce --tp-comm-overlap")
    path.write_text(yaml.safe_dump(data))
    assert not any("megatron_args" in n for n in load_spec(path).notices)


def _fleet_spec(tmp_path, runtime: str, model: str | None = None):
    """Llama-3-8B at 4k on a fleet of an A100 node beside a V100 node (fp16: both run it)."""
    data = {"model": yaml.safe_load(model) if model else {"zoo": "llama3-8b"},
            "cluster": {"name": "mix", "groups": [
                {"name": "a100", "device": "A100-80GB", "nodes": 1, "gpus_per_node": 8},
                {"name": "v100", "device": "V100-32GB", "nodes": 1, "gpus_per_node": 8}],
                "links": [{"between": ["a100", "v100"], "bandwidth_gb_per_s": 12.5,
                                     "latency_us": 20}]},
            "training": {"global_batch_size": 8, "seq_len": 4096, "runtime": runtime,
                         "dtype": "fp16"}}
    path = tmp_path / f"fleet_{runtime}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_fleet_keeps_the_scores_on_the_groups_whose_gpu_runs_the_unfused_core(tmp_path):
    """A flash runtime on A100 and V100 groups: the V100 group runs the unfused core and
    keeps 2·a·s² bytes per layer per sample (Megatron's fused softmax, no dropout), the
    A100 group none (session 30 left fleets out of the rule: both groups left them out)."""
    from autopar_opt.cost.context import StageContext
    from autopar_opt.cost.memory import activation_bytes
    from autopar_opt.ir.strategies import Strategy
    spec = load_spec(_fleet_spec(tmp_path, "megatron-core"))
    assert spec.training.runtime.flash_attention            # the A100 group runs it fused
    block = next(layer for layer in spec.graph.layers if layer.act_attn_bytes > 0)
    a100, v100 = spec.fleet.groups
    s = Strategy(tp=8, dp=1)
    kept = {}
    for group in (a100, v100):
        ctx = StageContext(group, spec.training, spec.cost_params, 8, 1)
        kept[group.name] = activation_bytes(block, s, 1, training=ctx.training)
    assert kept["v100"] - kept["a100"] == pytest.approx(2 * 32 * 4096 ** 2 / 8, rel=1e-9)


def test_a_fleet_under_an_unfused_runtime_is_built_with_its_scores(tmp_path):
    spec = load_spec(_fleet_spec(tmp_path, "megatron-lm"))
    assert not spec.training.runtime.flash_attention
    assert any(layer.act_attn_bytes > 0 for layer in spec.graph.layers)


def test_a_stated_flag_true_of_some_groups_only_is_refused(tmp_path):
    with pytest.raises(SpecError) as err:
        load_spec(_fleet_spec(tmp_path, "megatron-core",
                              model="{hf_config: llama-3.1-8b, flash_attention: true}"))
    text = str(err.value)
    assert "true of some groups only" in text and "V100-32GB: unfused" in text
