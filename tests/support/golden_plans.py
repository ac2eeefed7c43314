"""The golden plans whose exports the frameworks' own code validates (issue 29):
the published recipes of the zoo's models (examples/*.yaml) and hand-written plans
covering what the exporters write: FSDP, uneven pipeline layouts, recomputation, expert
TP apart from TP, MLA. Shared by tests/unit/export/test_framework_validation.py and
test_bridge_validation.py."""

from __future__ import annotations

from autopar_opt.export import ExportError, export_plan, plan_view, rules_for
from autopar_opt.spec import load_spec
from support.paths import REPO

EXAMPLES = ["qwen3_235b_256_h100.yaml", "mixtral_8x22b_128_h100.yaml", "deepseek_v3_2048_h800.yaml",
            "llama31_405b_16384_h100.yaml", "mixtral_8x7b_2x8_h100.yaml"]

HAND = {
    # Llama-3 8B trained in fp32 with FSDP: torchtitan's parameter dtype float32 (its default
    # bfloat16 would gather bf16), Megatron-LM without --bf16/--fp16 (QA round 9)
    "llama3_8b_fp32": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 4096, dtype: fp32}
plan: {tp: 2, pp: 1, zero: 3, sequence_parallel: true, recompute: full, micro_batch_size: 1}
""",
    # Llama-3 8B in FP8: Megatron-LM's --fp8-format hybrid with the recipe written out
    "llama3_8b_fp8": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 8192, dtype: fp8}
plan: {tp: 2, pp: 1, zero: 1, sequence_parallel: true, micro_batch_size: 1}
""",
    # Llama-3 8B with FSDP (ZeRO-3), tp 2, full recomputation: Megatron-FSDP / FSDP2
    "llama3_8b_fsdp": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 8192}
plan: {tp: 2, pp: 1, zero: 3, sequence_parallel: true, recompute: full, micro_batch_size: 1}
""",
    # Llama-3 8B pipelined with an uneven split (Megatron's first/last stage sizes)
    "llama3_8b_pp4": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 8192}
plan: {tp: 2, pp: 4, zero: 0, sequence_parallel: true, micro_batch_size: 1,
       stage_layers: [7, 9, 9, 9]}
""",
    # Qwen3-30B-A3B with experts unsplit by TP (etp 1, ep spanning tp ranks), ZeRO-3 on 16 GPUs
    "qwen3_30b_etp1": """
model: {hf_config: MODEL_ZOO/hf/qwen3-30b-a3b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 4096}
plan: {tp: 2, pp: 1, ep: 16, etp: 1, zero: 3, sequence_parallel: true, micro_batch_size: 1}
""",
    # Llama-3 8B with hybrid sharding: FSDP inside each node (dp 4 x tp 2), two replicas
    # (Megatron-FSDP + --num-distributed-optimizer-instances, torchtitan HSDP)
    "llama3_8b_hsdp": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 8192}
plan: {tp: 2, pp: 1, zero: 3, zero_group: 4, sequence_parallel: true, recompute: full,
       micro_batch_size: 1}
""",
    # Llama-3 8B, ZeRO-3 inside each node of 8 without TP, two replicas
    "llama3_8b_hsdp_tp1": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 8192}
plan: {tp: 1, pp: 1, zero: 3, zero_group: 8, recompute: full, micro_batch_size: 1}
""",
    # Llama-3 8B, ZeRO-3 over groups of two nodes (16 ranks) on four nodes, two replicas
    "llama3_8b_hsdp_2node": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 4x8-a100-80}
training: {global_batch_size: 64, seq_len: 8192}
plan: {tp: 1, pp: 1, zero: 3, zero_group: 16, recompute: full, micro_batch_size: 1}
""",
    # Llama-3 8B, distributed optimizer per node (ZeRO-1, two instances): Megatron only
    "llama3_8b_distopt2": """
model: {hf_config: MODEL_ZOO/hf/llama-3.1-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 64, seq_len: 8192}
plan: {tp: 2, pp: 1, zero: 1, zero_group: 4, sequence_parallel: true, recompute: full,
       micro_batch_size: 1}
""",
    # Mistral-7B v0.1, its 4,096-key sliding window on every layer at 16k tokens, context
    # parallelism by all-gather (Transformer Engine's only ring-free form with a window)
    "mistral_7b_swa_cp": """
model: {hf_config: MODEL_ZOO/hf/mistral-7b-v0.1.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 16384, runtime_options: {cp_comm_type: all_gather}}
plan: {tp: 2, pp: 1, cp: 2, zero: 1, sequence_parallel: true, micro_batch_size: 1}
""",
    # Qwen3-8B with use_sliding_window on its last 8 of 36 layers (max_window_layers 28):
    # Megatron's window_attn_skip_freq pattern
    "qwen3_8b_swa_partial": """
model: {hf_config: TEST_DATA/hf/qwen3-8b-swa.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 8192}
plan: {tp: 2, pp: 2, zero: 1, sequence_parallel: true, micro_batch_size: 1}
""",
    # Qwen3-8B (dense): torchtitan's qwen3 8B flavour, FSDP with tp 2; Megatron too
    "qwen3_8b_fsdp": """
model: {hf_config: MODEL_ZOO/hf/qwen3-8b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 4096}
plan: {tp: 2, pp: 1, zero: 3, sequence_parallel: true, recompute: full, micro_batch_size: 1}
""",
    # Gemma-2 9B (GeGLU, post-norms: no Megatron-LM form) with ZeRO-3: DeepSpeed, which runs
    # the Hugging Face model
    "gemma2_9b_ds": """
model: {hf_config: MODEL_ZOO/hf/gemma-2-9b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 8192, runtime: deepspeed}
plan: {tp: 1, pp: 1, zero: 3, recompute: full, micro_batch_size: 1}
""",
    # Minitron-4B (Nemotron-4: squared-ReLU MLP, LayerNorm1P, RoPE on half of each head),
    # tp 2 pp 2 with the distributed optimizer
    "minitron_4b_tp2_pp2": """
model: {hf_config: MODEL_ZOO/hf/minitron-4b-base.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 4096}
plan: {tp: 2, pp: 2, zero: 1, sequence_parallel: true, micro_batch_size: 1}
""",
    # GPT-2 XL (learned positions, GELU, biases, tied; its dropout 0.1) with the distributed
    # optimizer, pure data parallelism
    "gpt2_xl_dp": """
model: {hf_config: MODEL_ZOO/hf/gpt2-xl.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 1024}
plan: {tp: 1, pp: 1, zero: 1, micro_batch_size: 2}
""",
    # StarCoder2-3B at its 16k context: grouped keys, a 4,096-key window on every layer,
    # biases, dropout 0.1; tp 2 with sequence parallelism, selective recomputation
    "starcoder2_3b_16k": """
model: {hf_config: MODEL_ZOO/hf/starcoder2-3b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 16, seq_len: 16384}
plan: {tp: 2, pp: 1, zero: 1, sequence_parallel: true, recompute: selective, micro_batch_size: 1}
""",
    # Qwen3-30B-A3B, DDP-style data parallelism with experts over the data ranks: DeepSpeed
    "qwen3_30b_ds": """
model: {hf_config: MODEL_ZOO/hf/qwen3-30b-a3b.json}
cluster: {zoo: 2x8-h100}
training: {global_batch_size: 32, seq_len: 4096}
plan: {tp: 1, pp: 1, ep: 8, etp: 1, zero: 2, micro_batch_size: 2}
""",
}


def spec_for(name: str, tmp_path):
    """The golden plan ``name`` (an example file, or a HAND plan written under ``tmp_path``)."""
    if name in HAND:
        path = tmp_path / f"{name}.yaml"
        path.write_text(HAND[name].replace("MODEL_ZOO", str(REPO / "model_zoo"))
                        .replace("TEST_DATA", str(REPO / "tests" / "data")))
        return load_spec(path)
    return load_spec(REPO / "examples" / name)


def export_or_none(spec, target: str, version: str = ""):
    """The plan exported for ``target``, or None where the target's rules refuse it."""
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    if rules_for(target, view, spec.graph.is_chain(), version):
        return None
    try:
        return export_plan(spec.plan, spec.graph, spec.cluster, spec.training, target, version)
    except ExportError:          # no torchtitan flavour for this model
        return None


#: every golden plan, by name
CASES = EXAMPLES + sorted(HAND)
