"""Exports checked by the frameworks' own code (issue 29), not by string comparison.

Every golden plan (tests/support/golden_plans.py) is exported for each framework that accepts it, and the
file is handed to that framework's validation (tests/support/frameworks.py:
Megatron-LM's own ``parse_args`` / ``validate_args`` and Megatron-Core's
``initialize_model_parallel`` / ``TransformerConfig`` /
``DistributedDataParallelConfig``, torchtitan's ``ConfigManager`` /
``ParallelDims`` / mesh, DeepSpeed's ``DeepSpeedConfig`` / AutoEP validation).
The frameworks come from the ``frameworks`` test extra
(``requirements-frameworks.lock``); without it these tests skip. Megatron-Bridge's
overrides are validated by Bridge in test_bridge_validation.py.
"""

from __future__ import annotations

import json

import pytest

from support.frameworks import (read_megatron, validate_deepspeed, validate_megatron, validate_megatron_lm,
                                validate_torchtitan)
from support.golden_plans import CASES, HAND
from support.golden_plans import export_or_none as _export
from support.golden_plans import spec_for as _spec
from support.paths import REPO
from autopar_opt.core.errors import SpecError
from autopar_opt.export import ExportError, export_plan, plan_view
from autopar_opt.export.megatron import padded_vocab
from autopar_opt.spec import load_spec


@pytest.mark.parametrize("name", CASES)
def test_megatron_core_accepts_the_megatron_arguments(name, tmp_path):
    pytest.importorskip("megatron.core")
    spec = _spec(name, tmp_path)
    out = _export(spec, "megatron")
    if out is None:
        pytest.skip("Megatron-LM refuses this plan (its rules are tested in test_export.py)")
    got = validate_megatron(out.text, spec.cluster.num_devices)
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    assert got["dp"] == view.dp and got["microbatches"] == view.microbatches
    if view.has_moe:   # Megatron-Core's expert grid: etp * ep * edp = tp * cp * dp
        assert got["edp"] * view.ep * view.etp == view.tp * view.cp * view.dp
    args, env = read_megatron(out.text)
    if view.zero >= 2:     # Megatron-LM validate_args: FSDP needs fsdp_dtensor, connections != 1
        assert args["ckpt_format"] == "fsdp_dtensor" and env["CUDA_DEVICE_MAX_CONNECTIONS"] != "1"
    assert int(args["num_layers"]) == spec.graph.arch.num_layers


def test_megatron_core_refuses_what_the_rules_refuse(tmp_path):
    """The validator can fail: the Qwen3 recipe with ep 32 (etp*ep*pp = 512 > 256 GPUs)."""
    pytest.importorskip("megatron.core")
    spec = _spec("qwen3_235b_256_h100.yaml", tmp_path)
    text = export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "megatron").text
    bad = text.replace("--expert-model-parallel-size 8", "--expert-model-parallel-size 32")
    with pytest.raises(RuntimeError, match="not divisible"):
        validate_megatron(bad, spec.cluster.num_devices)


@pytest.mark.parametrize("name", CASES)
def test_megatron_lm_parses_and_validates_the_arguments(name, tmp_path):
    """Megatron-LM's own ``parse_args(ignore_unknown_args=False)`` and ``validate_args``
    (``megatron/training/arguments.py``, shipped in the megatron-core 0.17.1 package)
    accept every golden export, with ``WORLD_SIZE`` the plan's device count and the
    file's environment; the arguments they derive are the plan's.

    Not verified here (no GPU): the two device queries ``validate_args`` makes are
    answered with the plan's GPU generation instead (``torch.cuda.
    get_device_capability`` for ``--moe-grouped-gemm``, ``get_device_arch_version`` for
    the ``CUDA_DEVICE_MAX_CONNECTIONS`` rule; tests/support/frameworks.py). Transformer
    Engine is not installed, so its version checks see none."""
    pytest.importorskip("megatron.training.arguments")
    spec = _spec(name, tmp_path)
    out = _export(spec, "megatron")
    if out is None:
        pytest.skip("Megatron-LM refuses this plan (its rules are tested in test_export.py)")
    args = validate_megatron_lm(out.text, spec.cluster.num_devices, spec.cluster.device.arch)
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
            args.context_parallel_size, args.data_parallel_size) == (view.tp, view.pp, view.cp, view.dp)
    assert args.world_size == spec.cluster.num_devices
    assert args.global_batch_size == spec.training.global_batch_size
    assert args.micro_batch_size == view.micro_batch_size
    assert args.virtual_pipeline_model_parallel_size == (view.vp_chunks if view.vp_chunks > 1 else None)
    if view.has_moe:
        assert (args.expert_model_parallel_size, args.expert_tensor_parallel_size) == (view.ep, view.etp)
    assert args.use_distributed_optimizer == (view.zero == 1)
    assert args.use_megatron_fsdp == (view.zero >= 2)
    assert args.num_layers == spec.graph.arch.num_layers
    if spec.graph.arch.dropout is not None:          # the config's, not Megatron's 0.1 default
        assert (args.hidden_dropout, args.attention_dropout) == spec.graph.arch.dropout
    a = spec.graph.arch                              # the MLP, the norm, the rotated share
    assert (args.swiglu, args.squared_relu) == (a.gated, a.activation == "relu2")
    assert args.normalization == ("RMSNorm" if a.norm == "rmsnorm" else "LayerNorm")
    assert args.layernorm_zero_centered_gamma == a.zero_centered_norm   # --apply-layernorm-1p
    assert args.rotary_percent == a.rotary_fraction
    # the vocabulary: Megatron's own NullTokenizer (one end-of-document token added) and padding
    from megatron.core.tokenizers.utils.build_tokenizer import build_tokenizer
    assert build_tokenizer(args).vocab_size == a.vocab
    assert args.padded_vocab_size == padded_vocab(a.vocab, view.tp)
    # sliding windows: Megatron-Core's own per-layer rule reads back the model's windows
    from megatron.core.transformer.utils import is_layer_window_attention
    windows = spec.graph.arch.windows or (0,) * args.num_layers
    assert [is_layer_window_attention(args.window_size, args.window_attn_skip_freq, i + 1)
            for i in range(args.num_layers)] == [w > 0 for w in windows]
    if any(windows):    # keys i - window_size[0] .. i: the model's window of w keys
        assert args.window_size == (max(windows) - 1, 0)


def _megatron_text(name: str, tmp_path) -> tuple[str, object]:
    spec = _spec(name, tmp_path)
    return export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "megatron").text, spec


def test_megatron_lm_refuses_fsdp_without_its_checkpoint_format(tmp_path):
    """The exporter writes ``--ckpt-format fsdp_dtensor`` with Megatron-FSDP because
    ``validate_args`` demands it: without it, Megatron-LM refuses the file."""
    pytest.importorskip("megatron.training.arguments")
    text, spec = _megatron_text("llama3_8b_fsdp", tmp_path)
    assert "--ckpt-format fsdp_dtensor" in text
    validate_megatron_lm(text, spec.cluster.num_devices, "hopper")
    with pytest.raises(AssertionError, match="fsdp_dtensor"):
        validate_megatron_lm(text.replace("--ckpt-format fsdp_dtensor", ""),
                             spec.cluster.num_devices, "hopper")
    env = text.replace("# env: CUDA_DEVICE_MAX_CONNECTIONS=8", "# env: CUDA_DEVICE_MAX_CONNECTIONS=1")
    with pytest.raises(AssertionError, match="CUDA_DEVICE_MAX_CONNECTIONS"):
        validate_megatron_lm(env, spec.cluster.num_devices, "hopper")


def test_megatron_lm_refuses_interleaving_with_one_pipeline_stage(tmp_path):
    """A rule that is Megatron's: virtual pipeline stages need pp > 1. autopar refuses
    such a plan already in the spec (and the exporter's rules again), and Megatron-LM
    refuses the same arguments written by hand."""
    pytest.importorskip("megatron.training.arguments")
    path = tmp_path / "vp_pp1.yaml"
    path.write_text(HAND["llama3_8b_fsdp"].replace("MODEL_ZOO", str(REPO / "model_zoo")).replace(
        "micro_batch_size: 1}", "micro_batch_size: 1, schedule: interleaved, vp_chunks: 2}"))
    with pytest.raises(SpecError, match="pipeline-model-parallel size must be greater than 1"):
        load_spec(path)
    text, spec = _megatron_text("llama3_8b_fsdp", tmp_path)
    assert "--pipeline-model-parallel-size 1" in text
    with pytest.raises(AssertionError, match="pipeline-model-parallel size should be greater"):
        validate_megatron_lm(text.replace("--pipeline-model-parallel-size 1",
                                          "--pipeline-model-parallel-size 1 "
                                          "--num-virtual-stages-per-pipeline-rank 2"),
                             spec.cluster.num_devices, "hopper")


def test_megatron_lm_connections_rule_depends_on_the_gpu(tmp_path):
    """``CUDA_DEVICE_MAX_CONNECTIONS=1`` with tensor parallelism is required before
    Blackwell only: the device query answered from the plan's GPU is what decides."""
    pytest.importorskip("megatron.training.arguments")
    text, spec = _megatron_text("llama3_8b_pp4", tmp_path)
    assert "# env: CUDA_DEVICE_MAX_CONNECTIONS=1" in text
    bare = text.replace("# env: CUDA_DEVICE_MAX_CONNECTIONS=1", "")
    with pytest.raises(AssertionError, match="CUDA_DEVICE_MAX_CONNECTIONS to 1"):
        validate_megatron_lm(bare, spec.cluster.num_devices, "hopper")
    validate_megatron_lm(bare, spec.cluster.num_devices, "blackwell")


def test_megatron_lm_refuses_an_unknown_flag(tmp_path):
    """``ignore_unknown_args=False``: a misspelt flag is an error, not ignored."""
    pytest.importorskip("megatron.training.arguments")
    text, spec = _megatron_text("llama3_8b_pp4", tmp_path)
    with pytest.raises(ValueError, match="unrecognized arguments: --tensor-parallel-size"):
        validate_megatron_lm(text.replace("--tensor-model-parallel-size", "--tensor-parallel-size"),
                             spec.cluster.num_devices, "hopper")


@pytest.mark.parametrize("name", CASES)
def test_deepspeed_accepts_its_config(name, tmp_path):
    pytest.importorskip("deepspeed")
    spec = _spec(name, tmp_path)
    out = _export(spec, "deepspeed")
    if out is None:
        pytest.skip("DeepSpeed refuses this plan")
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    ds = validate_deepspeed(out.text, spec.cluster.num_devices, view.pp, view.num_experts)
    assert ds.train_batch_size == spec.training.global_batch_size
    assert ds.zero_optimization_stage == view.zero
    if view.has_moe:
        assert ds.expert_parallel_config.autoep_size == view.ep


def test_deepspeed_golden_plans_include_expert_parallelism(tmp_path):
    """At least one golden plan exercises AutoEP (the expert_parallel key)."""
    spec = _spec("qwen3_30b_ds", tmp_path)
    assert '"autoep_size": 8' in _export(spec, "deepspeed").text


@pytest.mark.parametrize("name", CASES)
def test_torchtitan_loads_and_checks_its_config(name, tmp_path):
    pytest.importorskip("torchtitan")
    spec = _spec(name, tmp_path)
    out = _export(spec, "torchtitan", "0.3")
    if out is None:
        pytest.skip("torchtitan refuses this plan or has no flavour for the model")
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    config = validate_torchtitan(out.text, spec.cluster.num_devices, tmp_path)
    p = config.parallelism
    assert p.tensor_parallel_degree == view.tp and p.pipeline_parallel_degree == view.pp
    assert p.expert_parallel_degree == (view.ep if view.has_moe else 1)
    model = config.model_spec.model        # the flavour is the model's architecture
    assert len(model.layers) == spec.graph.arch.num_layers
    assert model.dim == spec.graph.arch.hidden


def test_torchtitan_flavours_match_its_model_registry():
    """Every entry of the exporter's flavour table is torchtitan's own model config."""
    pytest.importorskip("torchtitan")
    import importlib

    from autopar_opt.export.torchtitan import FLAVOURS

    for (family, hidden, heads, kv, vocab, experts), (module, flav, base, layers) in FLAVOURS.items():
        registry = importlib.import_module(f"torchtitan.models.{module}").model_registry
        model = registry(flav).model
        assert model.dim == hidden and len(model.layers) == layers and model.vocab_size == vocab
        assert callable(getattr(importlib.import_module(
            f"torchtitan.models.{module}.config_registry"), base))


def test_some_golden_plan_reaches_every_framework(tmp_path):
    """The golden set is not vacuous: each framework validates at least one plan."""
    reached = {t: [] for t in ("megatron", "torchtitan", "deepspeed")}
    for name in CASES:
        spec = _spec(name, tmp_path)
        for t in reached:
            if _export(spec, t, "0.3" if t == "torchtitan" else "") is not None:
                reached[t].append(name)
    assert all(reached.values()), reached


@pytest.mark.parametrize("name", ["megatron_debug_moe.txt", "torchtitan_qwen3_6.py",
                                  "deepspeed_debug_moe.json"])
def test_golden_files_pass_their_framework(name, tmp_path):
    """The golden files of test_export.py (8 GPUs, 16 samples) pass the framework's checks."""
    text = (REPO / "tests" / "data" / "export" / name).read_text()
    if name.startswith("megatron"):
        pytest.importorskip("megatron.core")
        validate_megatron(text, 8)
        pytest.importorskip("megatron.training.arguments")
        args = validate_megatron_lm(text, 8, "ampere")        # debug-2x4: A100-40GB
        assert args.data_parallel_size == 2 and args.expert_model_parallel_size == 2
    elif name.startswith("torchtitan"):
        pytest.importorskip("torchtitan")
        validate_torchtitan(text, 8, tmp_path)
    else:
        pytest.importorskip("deepspeed")
        assert validate_deepspeed(text, 8, 2, 8).expert_parallel_config.autoep_size == 2


def test_torchtitan_loads_a_deepep_plan(tmp_path):
    """A plan priced with DeepEP: torchtitan 0.3's config manager loads the module and the
    model's MoE layers carry DeepEP's token dispatcher config (the default plan: the
    all-to-all one)."""
    pytest.importorskip("torchtitan")
    from dataclasses import replace

    from autopar_opt.ir.runtime import runtime_named

    spec = _spec("qwen3_30b_etp1", tmp_path)
    base = _export(spec, "torchtitan", "0.3")
    assert base is not None, "the golden Qwen3-30B plan no longer exports to torchtitan"
    plain = validate_torchtitan(base.text, spec.cluster.num_devices, tmp_path)
    assert "AllToAllTokenDispatcher" in repr(plain.model_spec.model)
    # the flash-attention (varlen) kernel the plan was priced with, not FlexAttention
    assert "VarlenAttention" in repr(plain.model_spec.model)
    assert "FlexAttention" not in repr(plain.model_spec.model)
    training = replace(spec.training, runtime=runtime_named("torchtitan", moe_dispatcher="deepep"))
    out = export_plan(spec.plan, spec.graph, spec.cluster, training, "torchtitan", "0.3")
    config = validate_torchtitan(out.text, spec.cluster.num_devices, tmp_path)
    model = repr(config.model_spec.model)
    assert "DeepEPTokenDispatcher" in model and "AllToAllTokenDispatcher" not in model


@pytest.mark.parametrize("name", ["llama3_8b_hsdp", "llama3_8b_hsdp_tp1", "llama3_8b_distopt2",
                                  "llama3_8b_hsdp_2node"])
def test_hybrid_sharding_reaches_each_framework_as_priced(name, tmp_path):
    """Hybrid sharding (a ZeRO shard group per node, or per two nodes of four,
    replicated across the others):
    Megatron-Core builds intra-partial data-parallel groups of the plan's shard group
    (``--num-distributed-optimizer-instances``), torchtitan's mesh has the plan's
    ``dp_replicate`` x ``dp_shard``; a target that cannot run it refuses it (torchtitan
    has no ZeRO-1; DeepSpeed 0.19 removed MiCS)."""
    spec = _spec(name, tmp_path)
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    assert view.replicas == 2 and view.zero_group * view.replicas == view.dp * view.cp
    assert view.zero_group == (16 if name.endswith("2node") else 8 // view.tp)
    reached = []
    out = _export(spec, "megatron")
    assert out is not None and f"--num-distributed-optimizer-instances {view.replicas}" in out.text
    if _has("megatron.core"):
        got = validate_megatron(out.text, spec.cluster.num_devices)
        assert got["shard_group"] == view.zero_group and got["dp"] == view.dp
        assert got["ddp"].num_distributed_optimizer_instances == view.replicas
        reached.append("megatron")
    out = _export(spec, "torchtitan", "0.3")
    assert (out is None) == (view.zero == 1)
    if out is not None and _has("torchtitan"):
        p = validate_torchtitan(out.text, spec.cluster.num_devices, tmp_path).parallelism
        assert p.data_parallel_replicate_degree == view.replicas
        assert p.data_parallel_shard_degree == view.zero_group // view.cp
        reached.append("torchtitan")
    assert _export(spec, "deepspeed") is None
    if not reached:
        pytest.skip("no framework installed (the frameworks test extra)")


def test_deepspeed_refuses_the_mics_key_the_export_no_longer_writes(tmp_path):
    """Why the DeepSpeed target has no hybrid sharding: DeepSpeed's own config check
    rejects MiCS's key. The same plan without hybrid sharding exports and passes."""
    pytest.importorskip("deepspeed")
    import json
    from dataclasses import replace as _replace

    spec = _spec("llama3_8b_hsdp_tp1", tmp_path)
    for st in spec.plan.stages:
        st.strategies = [_replace(s, zero_group=0) for s in st.strategies]
    out = _export(spec, "deepspeed")
    assert out is not None
    validate_deepspeed(out.text, spec.cluster.num_devices, 1)
    config = json.loads(out.text)
    config["zero_optimization"]["mics_shard_size"] = 8
    with pytest.raises(Exception, match="MiCS ZeRO-3 sharding has been removed"):
        validate_deepspeed(json.dumps(config), spec.cluster.num_devices, 1)


def _has(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def test_the_launch_line_passes_quoted_values_and_no_backslashes(tmp_path):
    """The file's own ``# launch:`` line, run by bash (``support.frameworks.launch_argv``),
    hands Megatron-LM the arguments the file writes: no ``\\`` from the line ends, and a
    shell-quoted value (DeepSeek-V2-Lite's first dense layer, ``--moe-layer-freq
    '([0]*1+[1]*26)'``) without its quotes. Oracle: shlex's reading of the file, and
    Megatron-LM's own parse of what bash passed (its ``moe_layer_freq``: one dense
    layer, then 26 MoE layers)."""
    import json
    import shlex

    from support.cli import run_cli
    from support.frameworks import launch_argv
    pytest.importorskip("megatron.training.arguments")
    spec = tmp_path / "dsv2l.yaml"
    spec.write_text("model: {hf_config: deepseek-v2-lite}\ncluster: {zoo: 2x8-h100}\n"
                    "training: {global_batch_size: 128, seq_len: 4096, dtype: bf16}\n"
                    "search: {pp_degrees: [1], tp_degrees: [1, 2], ep_degrees: [1, 2, 4, 8], "
                    "zero_levels: [1], recompute: [none, full]}\n")
    code, text = run_cli("solve", str(spec), "--out", str(tmp_path / "out"), "--json")
    assert code == 0, text
    code, text = run_cli("export", str(tmp_path / "out" / "plan.json"), "--to", "megatron",
                         "--out", str(tmp_path / "args.txt"))
    assert code == 0, text
    exported = (tmp_path / "args.txt").read_text()
    assert "--moe-layer-freq '([0]*1+[1]*26)'" in exported
    argv = launch_argv(exported)
    assert "\\" not in argv and argv == shlex.split(exported.replace("\\\n", " "), comments=True)
    assert argv[argv.index("--moe-layer-freq") + 1] == "([0]*1+[1]*26)"
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    args = validate_megatron_lm(exported, 16, "hopper")
    assert args.moe_layer_freq == [0] + [1] * 26 and doc["status"] == "optimal"
    # MLA's latent norms (kv_a_layernorm) exist only with qk_layernorm in Megatron-Core's
    # MLA spec; Megatron-Bridge's DeepSeek providers set it too
    assert args.multi_latent_attention and args.qk_layernorm
    code, text = run_cli("export", str(tmp_path / "out" / "plan.json"), "--to", "megatron-bridge",
                         "--out", str(tmp_path / "bridge.yaml"))
    assert code == 0, text
    assert "qk_layernorm: true" in (tmp_path / "bridge.yaml").read_text()


def test_torchtitan_flavour_shapes_match_its_model_registry():
    """The shapes the export matches beyond the flavour key (MLP width, head dimension,
    tying, top-k, expert and shared-expert widths, RoPE base) are torchtitan 0.3's own."""
    pytest.importorskip("torchtitan")
    import importlib

    from autopar_opt.export.torchtitan import FLAVOUR_SHAPES, FLAVOUR_THETA, FLAVOURS

    for module, flav, _, _ in FLAVOURS.values():
        model = importlib.import_module(f"torchtitan.models.{module}").model_registry(flav).model
        first, last = model.layers[0], model.layers[-1]
        ffn, head_dim, tied, top_k, expert, shared = FLAVOUR_SHAPES[(module, flav)]
        assert (first.feed_forward.w2.in_features if first.feed_forward else 0) == ffn
        qkv = getattr(first.attention, "qkv_linear", None)       # MLA (DeepSeek) has none
        assert (qkv.head_dim if qkv is not None else 0) == head_dim
        assert model.enable_weight_tying == tied
        moe = last.moe
        assert (moe.routed_experts.token_dispatcher.top_k if moe else 0) == top_k
        assert (moe.routed_experts.inner_experts.hidden_dim if moe else 0) == expert
        assert (moe.shared_experts.w2.in_features if moe and moe.shared_experts else 0) == shared
        assert first.attention.rope.theta == FLAVOUR_THETA.get((module, flav), FLAVOUR_THETA[module])


QWEN3_14B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
             "intermediate_size": 17408, "num_hidden_layers": 40, "num_attention_heads": 40,
             "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
             "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
             "tie_word_embeddings": False, "hidden_act": "silu"}      # Qwen/Qwen3-14B config.json


@pytest.mark.parametrize("change, named", [
    ({}, None),
    ({"intermediate_size": 8192}, "MLP width 8192 (the flavour's: 17408)"),
    ({"head_dim": 64}, "head dimension 64 (the flavour's: 128)"),
    ({"tie_word_embeddings": True}, "tied embeddings (the flavour's are untied)"),
])
def test_torchtitan_export_refuses_a_config_its_flavour_does_not_build(change, named, tmp_path):
    """QA round 5 (H1): the flavour was matched on family, width, heads, kv heads,
    vocabulary and experts only, so a Qwen3-14B config with an 8,192-wide MLP (9.1 B
    parameters priced) was exported as torchtitan's stock 14B (14.8 B), which its
    validator accepts. Now every shape the job file cannot change is compared; the
    stock config still exports (and passes torchtitan's own validation). A different
    RoPE base is said, not refused (it changes no shape)."""
    pytest.importorskip("torchtitan")
    cfg = dict(QWEN3_14B, **change)
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    (tmp_path / "s.yaml").write_text("model: {hf_config: c.json}\ncluster: {zoo: 2x8-h100}\n"
                                     "training: {global_batch_size: 32, seq_len: 4096}\n"
                                     "plan: {tp: 2, micro_batch_size: 2, zero: 2}\n")
    spec = load_spec(tmp_path / "s.yaml")
    if named is None:
        out = export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "torchtitan")
        assert "model_registry('14B'" in out.text
        validate_torchtitan(out.text, spec.cluster.num_devices, tmp_path)
        return
    with pytest.raises(ExportError) as err:
        export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "torchtitan")
    assert named in str(err.value)


def test_torchtitan_export_says_a_different_rope_base(tmp_path):
    pytest.importorskip("torchtitan")
    (tmp_path / "c.json").write_text(json.dumps(dict(QWEN3_14B, rope_theta=10000)))
    (tmp_path / "s.yaml").write_text("model: {hf_config: c.json}\ncluster: {zoo: 2x8-h100}\n"
                                     "training: {global_batch_size: 32, seq_len: 4096}\n"
                                     "plan: {tp: 2, micro_batch_size: 2, zero: 2}\n")
    spec = load_spec(tmp_path / "s.yaml")
    out = export_plan(spec.plan, spec.graph, spec.cluster, spec.training, "torchtitan")
    assert any("RoPE base 1e+06; the config states 10000" in n for n in out.notes)


def test_torchtitan_trains_an_fp32_plan_with_fp32_parameters(tmp_path):
    """torchtitan's ``mixed_precision_param`` defaults to bfloat16 (its configs.py): an fp32
    plan's export sets float32, which torchtitan's own ConfigManager loads (QA round 9)."""
    pytest.importorskip("torchtitan")
    spec = _spec("llama3_8b_fp32", tmp_path)
    out = _export(spec, "torchtitan", "0.3")
    config = validate_torchtitan(out.text, spec.cluster.num_devices, tmp_path)
    assert config.training.mixed_precision_param == "float32"
    bf16 = _spec("llama3_8b_fsdp", tmp_path)
    config = validate_torchtitan(_export(bf16, "torchtitan", "0.3").text,
                                 bf16.cluster.num_devices, tmp_path)
    assert config.training.mixed_precision_param == "bfloat16"


def test_megatron_lm_reads_the_fp8_recipe_written_out(tmp_path):
    """The FP8 export states its recipe (delayed, Megatron-LM's default) rather than leaving
    it to the default, and says which recipe the Bridge export uses (QA round 9)."""
    pytest.importorskip("megatron.training.arguments")
    spec = _spec("llama3_8b_fp8", tmp_path)
    out = _export(spec, "megatron")
    args = validate_megatron_lm(out.text, spec.cluster.num_devices, spec.cluster.device.arch)
    assert args.fp8 == "hybrid" and args.fp8_recipe == "delayed"
    assert any(n.startswith("FP8 recipe: delayed scaling") and "current_scaling" in n
               for n in out.notes)
