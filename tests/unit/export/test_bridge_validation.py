"""Megatron-Bridge overrides (``autopar export --to megatron-bridge``) checked by
Megatron-Bridge's own code (issue 29), not by string comparison.

Every golden plan whose Megatron-LM export is validated (test_framework_validation.py,
tests/support/golden_plans.py) is also exported for Megatron-Bridge 0.3.1, and Bridge
itself takes the file as a launch does (tests/support/bridge_check.py): a recipe's
``ConfigContainer`` (``_pretrain_common()`` with a ``GPTModelProvider`` or, for MLA, an
``MLAModelProvider``; and, for the non-MLA plans, Bridge's published GPT-3 175B recipe,
whose TP 4 / PP 8 / VP 6 / sequence parallelism the overrides must replace), the file
merged by Bridge's ``process_config_with_overrides``, ``runtime_config_update`` (mixed
precision, data-parallel size from ``WORLD_SIZE``, ``ConfigContainer.validate()`` with
Megatron-Core's config checks), Megatron-Core's micro-batch calculator and Bridge's
``_initialize_distributed`` → ``parallel_state.initialize_model_parallel`` on a fake
process group of the plan's world size. The sizes Bridge and Megatron-Core derive are
compared with the plan. Bridge runs in a subprocess with its own megatron-core
(requirements-bridge.lock, installed by dev.py into .venv/megatron-bridge); without it
these tests skip.

Not verified here:

* Transformer Engine is not installed (it needs CUDA). tests/support/te_shim.py stands
  in for the two unconditional ``import transformer_engine.pytorch`` of Bridge's PEFT
  modules, only so that they import; any use of it raises, and every other importer
  sees TE absent. So nothing that needs TE is validated: TE layer specs, FP8 recipes'
  TE objects, TP communication overlap (the GPT-3 recipe's ``comm_overlap`` is dropped
  before validation: it needs TE's userbuffers and gradient-accumulation fusion, a
  fused CUDA kernel), and ``validate()``'s TE version checks see no TE. FP8 exports
  fail Megatron-Core's config checks here (they compare TE's version): no golden plan
  is FP8, and a test shows such a file fails rather than passes.
* The process groups are built without Gloo (the fake backend cannot create them; they
  are CPU-side copies of the same rank sets), after ``validate()`` ran with Bridge's
  default (Gloo on). ``torch.cuda.device_count`` answers the plan's GPUs per node.
* Model construction, the tokenizer, data loaders and everything after
  ``initialize_model_parallel`` in ``setup()`` (they need a GPU or data).
* Bridge only logs a warning for an override key the config does not have; the check
  turns that warning into an error, so a misspelt or dropped key cannot pass.
"""

from __future__ import annotations

import pytest

from support.bridge import bridge_missing, validate_bridge
from support.golden_plans import CASES, export_or_none, spec_for
from support.paths import REPO
from autopar_opt.export import plan_view
from autopar_opt.ir.training import FP32_DTYPES, Recompute

GOLDEN = REPO / "tests" / "data" / "export" / "megatron_bridge_debug_moe.yaml"
MISSING = bridge_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

#: the recipes the overrides are merged into (tests/support/bridge_check.py)
RECIPES = ("pretrain_common", "gpt3_175b")


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old           # the negative case edits what the export wrote
    return text.replace(old, new)


#: edits Bridge (or Megatron-Core, as Bridge calls it) must refuse, on one golden export
#: each: (plan, edit, recipe, expected error type and message fragment)
NEGATIVE = {
    # etp * ep * pp = 1 * 32 * 16 = 512 ranks > 256: Megatron-Core's expert grid
    "expert_grid_too_large": ("qwen3_235b_256_h100.yaml",
                              ("expert_model_parallel_size: 8", "expert_model_parallel_size: 32"),
                              "RuntimeError", "not divisible"),
    # ConfigContainer.validate: sequence length a multiple of 2 * cp (cp = 2)
    "seq_not_multiple_of_2cp": ("qwen3_235b_256_h100.yaml", ("seq_length: 4096", "seq_length: 4095"),
                                "AssertionError", "divisible by 2 * context parallel size"),
    # ConfigContainer.validate: Megatron-FSDP saves only fsdp_dtensor
    "fsdp_torch_dist_checkpoint": ("llama3_8b_fsdp", ("ckpt_format: fsdp_dtensor", "ckpt_format: torch_dist"),
                                   "AssertionError", "fsdp_dtensor"),
    # Megatron-Core's micro-batch calculator: global batch = micro-batch * dp * M
    "global_batch_not_divisible": ("llama3_8b_pp4", ("global_batch_size: 64", "global_batch_size: 65"),
                                   "AssertionError", "divisible"),
    # a key the ConfigContainer does not have: Bridge would skip it with a warning
    "misspelt_key": ("llama3_8b_pp4", ("tensor_model_parallel_size: 2", "tensor_parallel_size: 2"),
                     "ValueError", "tensor_parallel_size"),
}


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    """Every golden export and every negative case through one Bridge subprocess:
    ``(versions, plans, results)``."""
    tmp = tmp_path_factory.mktemp("bridge")
    plans, texts, cases = {}, {}, []
    for name in CASES:
        spec = spec_for(name, tmp)
        if export_or_none(spec, "megatron") is None:      # the Megatron-validated golden set
            continue
        out = export_or_none(spec, "megatron-bridge")
        if spec.training.dtype in FP32_DTYPES:             # Bridge's recipes train in bf16:
            assert out is None, name                       # refused (export/__init__.rules_for)
            continue
        assert out is not None, name                       # the same rules as Megatron-LM's
        plans[name], texts[name] = spec, out.text
        path = tmp / f"{name.removesuffix('.yaml')}.yaml"
        path.write_text(out.text)
        for recipe in RECIPES:
            if recipe == "gpt3_175b" and spec.graph.arch.mla is not None:
                continue                                   # GPT-3's provider has no MLA fields
            cases.append({"name": f"{name}@{recipe}", "path": str(path), "world": spec.cluster.num_devices,
                          "gpus_per_node": spec.cluster.gpus_per_node, "recipe": recipe})
    for bad, (name, (old, new), _, _) in NEGATIVE.items():
        path = tmp / f"bad_{bad}.yaml"
        path.write_text(_replace(texts[name], old, new))
        spec = plans[name]
        cases.append({"name": bad, "path": str(path), "world": spec.cluster.num_devices,
                      "gpus_per_node": spec.cluster.gpus_per_node, "recipe": "pretrain_common"})
    # FP8: Megatron-Core's config checks ask Transformer Engine's version (not verifiable)
    fp8 = tmp / "fp8.yaml"
    fp8.write_text(_replace(GOLDEN.read_text(), "mixed_precision: bf16_mixed",
                            "mixed_precision: bf16_with_fp8_current_scaling_mixed"))
    cases.append({"name": "fp8_needs_te", "path": str(fp8), "world": 8, "gpus_per_node": 4,
                  "recipe": "pretrain_common"})
    # the golden file of test_export.py (debug-moe on debug-2x4: 8 A100 in 2 nodes of 4)
    cases.append({"name": "golden_file", "path": str(GOLDEN), "world": 8, "gpus_per_node": 4,
                  "recipe": "pretrain_common"})
    versions, results = validate_bridge(cases)
    return versions, plans, results


def test_the_golden_file_passes_bridge(bridge):
    """tests/data/export/megatron_bridge_debug_moe.yaml (test_export.py's golden file):
    Bridge derives the layout its header states."""
    _, _, results = bridge
    r = results["golden_file"]
    assert r["ok"], r.get("error", "") + "\n" + r.get("traceback", "")
    header = GOLDEN.read_text().splitlines()[0]          # "... pp=2 tp=2 cp=1 dp=2 ep=2 etp=2"
    stated = dict(kv.split("=") for kv in header.split(": ", 1)[1].split() if "=" in kv)
    got = r["derived"]
    assert {k: got[k] for k in stated} == {k: int(v) for k, v in stated.items()}
    assert got["microbatches"] * got["micro_batch_size"] * got["dp"] == got["global_batch_size"]


def test_bridge_environment_is_the_locked_one(bridge):
    """The subprocess ran the pinned Bridge and its own megatron-core, not .venv's 0.17.1."""
    versions, _, _ = bridge
    pins = dict(line.split("==") for line in (REPO / "requirements-bridge.lock").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert versions["megatron-bridge"] == pins["megatron-bridge"]
    assert versions["megatron-core"] == pins["megatron-core"]
    assert "megatron-bridge" in versions["megatron.core path"]
    # the Transformer Engine stand-in served Bridge's PEFT modules only: gone afterwards
    assert not versions["transformer_engine in sys.modules"]
    assert not versions["transformer_engine importable"]


def test_every_megatron_validated_plan_reaches_bridge(bridge):
    """The golden set is not vacuous: the twenty golden plans Megatron runs and Bridge
    trains (of twenty-two: not Gemma, not the fp32 one), both recipes where they apply."""
    _, plans, results = bridge
    assert len(plans) == 20
    assert sum(1 for k in results if "@" in k) == 20 + 19    # DeepSeek-V3 (MLA): one recipe


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("name", CASES)
def test_bridge_accepts_the_overrides_and_derives_the_plan(bridge, name, recipe):
    _, plans, results = bridge
    key = f"{name}@{recipe}"
    if key not in results:
        pytest.skip("not exported for Megatron (its rules) or MLA with the GPT-3 recipe")
    r = results[key]
    assert r["ok"], r.get("error", "") + "\n" + r.get("traceback", "")
    got, spec = r["derived"], plans[name]
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    a = spec.graph.arch
    assert (got["tp"], got["pp"], got["cp"], got["dp"]) == (view.tp, view.pp, view.cp, view.dp)
    assert got["cfg_dp"] == view.dp                         # ConfigContainer's, from WORLD_SIZE
    assert got["vp"] == (view.vp_chunks if view.vp_chunks > 1 else None)
    assert got["ep"] == (view.ep if view.has_moe else 1)
    assert got["etp"] == (view.etp if view.has_moe else view.tp)
    assert got["edp"] * got["ep"] * got["etp"] == view.tp * view.cp * view.dp
    assert (got["micro_batch_size"], got["global_batch_size"], got["microbatches"]) == \
        (view.micro_batch_size, spec.training.global_batch_size, view.microbatches)
    assert got["sequence_parallel"] == bool(view.sp and view.tp > 1)
    # ZeRO-1: the distributed optimizer; ZeRO-2/3: Megatron-FSDP with its sharding
    assert got["use_distributed_optimizer"] == got["optimizer_distributed"] == (view.zero == 1)
    assert got["use_megatron_fsdp"] == got["dist_megatron_fsdp"] == (view.zero >= 2)
    if view.zero >= 2:
        assert got["sharding"] == {2: "optim_grads", 3: "optim_grads_params"}[view.zero]
        assert got["ckpt_format"] == "fsdp_dtensor"
    # hybrid sharding: Bridge's parallel state has the plan's shard groups
    assert got["instances"] == view.replicas
    assert got["shard_group"] == view.cp * view.dp // view.replicas
    modes = {m for stage in view.block_recompute for m in stage}
    assert got["recompute_granularity"] == (None if modes <= {Recompute.none} else "full"
                                            if Recompute.full in modes else "selective")
    if got["recompute_granularity"] == "selective":      # the attention core, as priced
        assert got["recompute_modules"] == ["core_attn"]
    assert got["seq_length"] == got["dataset_seq_length"] == spec.training.seq_len
    assert (got["num_layers"], got["hidden_size"], got["num_attention_heads"], got["vocab_size"]) == \
        (a.num_layers, a.hidden, a.heads, a.vocab)
    assert got["position_embedding_type"] == ("learned_absolute" if a.learned_positions else "rope")
    assert got["multi_latent_attention"] == (a.mla is not None)
    if a.dropout is not None:                       # the config's, not Megatron's 0.1
        assert got["dropout"] == list(a.dropout)
    windows = a.windows or (0,) * a.num_layers      # Megatron-Core's per-layer window rule
    assert got["windowed_layers"] == [w > 0 for w in windows]
    assert got["window_size"] == ([max(windows) - 1, 0] if any(windows) else None)
    # the MLP, the norm and the rotated share of a head as Bridge built them; the activation
    # function itself stays the recipe's in Bridge 0.3.1 (it restores the provider's callables
    # after the overrides; the export says so), read by Bridge 0.4+ from the file
    assert got["activation"].endswith(".gelu"), got["activation"]    # both recipes' providers
    assert got["gated_linear_unit"] == a.gated
    assert got["normalization"] == ("RMSNorm" if a.norm == "rmsnorm" else "LayerNorm")
    assert got["zero_centered_gamma"] == a.zero_centered_norm
    assert got["rotary_percent"] == a.rotary_fraction
    if a.mla is not None:
        assert got["kv_lora_rank"] == a.mla[1]
    else:
        assert got["num_query_groups"] == a.kv_heads
    if view.has_moe:
        assert (got["num_moe_experts"], got["moe_router_topk"], got["moe_ffn_hidden_size"]) == \
            (a.num_experts, a.top_k, a.moe_ffn_hidden)
    else:
        assert got["num_moe_experts"] is None
    assert got["bf16"] == (view.dtype in ("bf16", "fp8"))
    if got["layers_per_rank"] is not None:      # Megatron-Core's split (no layout string)
        assert sum(got["layers_per_rank"]) == a.num_layers
        if view.vp_chunks == 1:
            assert got["layers_per_rank"] == view.blocks_per_stage


def test_the_gpt3_recipe_settings_are_replaced(bridge):
    """Merged into Bridge's GPT-3 175B recipe (TP 4, PP 8, VP 6, sequence parallel), the
    overrides leave none of the recipe's layout behind (the exporter writes
    ``virtual_pipeline_model_parallel_size: null`` and the other defaults explicitly)."""
    _, _, results = bridge
    r = results["llama3_8b_fsdp@gpt3_175b"]
    assert r["ok"], r.get("error")
    before, got = r["derived"]["recipe_before"], r["derived"]
    assert (before["tp"], before["pp"], before["vp"]) == (4, 8, 6)
    assert (got["tp"], got["pp"], got["vp"]) == (2, 1, None)


def test_fp8_is_not_verified_here_and_does_not_pass_vacuously(bridge):
    """An FP8 export (``bf16_with_fp8_current_scaling_mixed``, what the exporter writes for
    an FP8 plan) cannot be validated without Transformer Engine: Megatron-Core's
    ``TransformerConfig`` checks compare TE's version, which is absent here, and the
    check fails instead of passing. No golden plan is FP8."""
    _, _, results = bridge
    r = results["fp8_needs_te"]
    assert not r["ok"]
    assert "Version" in r["error"] or "Transformer Engine" in r["error"], r["error"]


@pytest.mark.parametrize("bad", sorted(NEGATIVE))
def test_bridge_refuses_inconsistent_overrides(bridge, bad):
    """The validation can fail: each edit of a golden export breaks one of Bridge's (or
    Megatron-Core's, as Bridge calls it) rules, and the launch path refuses it."""
    _, _, results = bridge
    _, _, kind, fragment = NEGATIVE[bad]
    r = results[bad]
    assert not r["ok"], f"{bad} passed Bridge's checks"
    assert r["error"].startswith(kind + ":") and fragment in r["error"], r["error"]
