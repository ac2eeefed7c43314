"""Records from software stacks outside the calibration file (issue 10, point 7).

Each mapping is checked against the stack's documented default, written out
by hand here from the source cited in ``autopar_opt/calibration/reading/stacks.py``
(or ``records.py`` / ``measured.py``); each FLOP convention against a hand
evaluation of its formula. ``tests/data/synthetic_unseen_runs.yaml`` holds
invented records (no published measurement) that run end to end through
``autopar calibrate``.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.calibrate import calibrate_file
from autopar_opt.cli.calibrate import calibrate_command
from autopar_opt.calibration.flops import (
    Dims, eq7_flops, mcore_causal_flops, mcore_flops, measured_samples_per_s, palm_flops,
    six_nd_flops)
from autopar_opt.calibration.reading.counting import flop_formula, read_counting
from autopar_opt.calibration.reading import RawRecord, Unmodelable, load_run_file
from autopar_opt.calibration.reading.measured import pick_throughput
from autopar_opt.calibration.reading.parallel import map_zero, read_zero_group
from autopar_opt.calibration.reading.runtime import runtime_of
from autopar_opt.calibration.reading.schema import Measured, Parallelism
from autopar_opt.calibration.reading.training import map_precision
from autopar_opt.cost.memory import kept_logit_bytes
from autopar_opt.ir.runtime import RUNTIMES, runtime_named
from autopar_opt.ir.training import Training
from support import paths

DATA = paths.DATA
SYNTH = DATA / "synthetic_unseen_runs.yaml"


def _rt(framework: str, rec: dict | None = None):
    notes: list[str] = []
    return runtime_of(framework, notes, None if rec is None else RawRecord.read(rec)), notes


def _tp(measured: dict):
    """The throughput figure the reading picks from a ``measured`` section."""
    return pick_throughput(Measured(**measured))


def _count(text: str):
    """The FLOP convention the reading takes from a counting text (H100, bf16)."""
    return read_counting(text, "H100-SXM-80GB", "bf16")


def _par(**kw) -> dict:
    return {"parallelism": {"tp": 1, "pp": 1, "zero_stage": None, "fsdp": None, **kw}}


# ----------------------------------------------------------------------------- runtimes


@pytest.mark.parametrize("framework, expected", [
    ("Megatron-LM (commit 6985e58), DDP impl=torch, scatter/gather PP optimization on by default",
     RUNTIMES["megatron-lm"]),
    ("Megatron-LM (commit 6985e58), DDP impl=local, scatter/gather PP optimization on by default",
     runtime_named("megatron-lm", grad_reduce_overlap=False)),
    ("Megatron-LM (2022)", RUNTIMES["megatron-lm"]),
    ("Megatron-LM (2020)", RUNTIMES["megatron-lm"]),
    ("Megatron-Core r0.8.0 with --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap, "
     "PP comm overlap", RUNTIMES["megatron-core"]),
    ("Megatron-Core r0.8.0", runtime_named("megatron-core", tp_comm_overlap=False,
                                           grad_reduce_overlap=False, param_gather_overlap=False)),
    # Composer's DecoupledAdamW is unfused (tests/unit/calibration/test_composer_optimizer.py)
    ("Composer / llm-foundry (PyTorch FSDP)", runtime_named("pytorch-fsdp",
                                                            fused_optimizer=False)),
    ("Megatron-DeepSpeed (bigscience fork) + DeepSpeed", RUNTIMES["deepspeed"]),
    ("Megatron-DeepSpeed", RUNTIMES["deepspeed"]),
    ("Megatron-Bridge / NeMo 25.11", RUNTIMES["megatron-bridge"]),
    ("Megatron-Bridge / NeMo 26.04.01", RUNTIMES["megatron-bridge"]),
])
def test_the_calibration_files_framework_texts_map_as_before(framework, expected):
    """Oracle: the mapping before this change (the 96 records' figures rest on it)."""
    assert _rt(framework)[0] == expected


def test_every_framework_text_of_the_file_is_one_of_those_above():
    texts = {str((r.get("training") or {}).get("framework")) for r in load_run_file(DATA / "published_runs.yaml")}
    assert texts == {
        "Megatron-LM (commit 6985e58), DDP impl=torch, scatter/gather PP optimization on by default",
        "Megatron-LM (commit 6985e58), DDP impl=local, scatter/gather PP optimization on by default",
        "Megatron-LM (2022)", "Megatron-LM (2020)",
        "Megatron-Core r0.8.0 with --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap, "
        "PP comm overlap", "Megatron-Core r0.8.0", "Composer / llm-foundry (PyTorch FSDP)",
        "Megatron-DeepSpeed (bigscience fork) + DeepSpeed", "Megatron-DeepSpeed",
        # (the Megatron-Bridge performance-summary records left the file: issue 28 point 8)
        # memory-only records (tests/unit/calibration/test_calibration_memory.py checks their mapping)
        "Megatron-Core (functional test, transformer_engine) with --use-distributed-optimizer "
        "--overlap-grad-reduce --overlap-param-gather",
        "DeepSpeed ZeRO-3 (PyTorch Lightning DeepSpeedStrategy stage=3, FusedAdam, no offload)",
        "PyTorch DDP (PyTorch Lightning DDPStrategy static_graph=True, torch.optim.Adam)",
        "Megatron-Core (functional test, transformer_engine, --attention-backend unfused) with "
        "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather",
        "Megatron-Core (functional test, transformer_engine, --attention-backend unfused) "
        "without --use-distributed-optimizer",
        "Megatron-Core (functional test, transformer_engine) without --use-distributed-optimizer",
        "Colossal-AI Gemini (PyTorch Lightning ColossalAIStrategy placement_policy=cuda: ZeroDDP "
        "with chunk-based fp16 parameters and enable_distributed_storage=True, ZeroOptimizer over "
        "HybridAdam, no offload)",
        # issue 28's new families (their reading: tests/unit/calibration/test_new_runs.py)
        "KempnerForge (PyTorch FSDP2 fully_shard + DTensor tensor parallel with SequenceParallel, "
        "torch SDPA attention, fused AdamW)",
        "KempnerForge (PyTorch FSDP2 fully_shard + DTensor tensor parallel with SequenceParallel, "
        "torch SDPA attention, fused AdamW), torch.compile enabled",
        "fms-fsdp (PyTorch FSDP, SDPA FlashAttention-2, overlapped communication)",
        "InternEvo (hybrid ZeRO-1 optimizer over all data-parallel ranks, gradient reduce "
        "overlapped with the backward pass: overlap_sync_grad=True, parameter all-gather not "
        "overlapped; FlashAttention-2, Apex fused kernels)"}


def test_torchtitan_is_its_catalog_runtime_with_fsdp2_defaults():
    """torchtitan: FSDP2 prefetch, fp32 reduce-scatter (mixed_precision_reduce =
    "float32"), fused AdamW, async TP off unless stated (was: pytorch-ddp)."""
    rt, notes = _rt("torchtitan (FSDP2 + TP)")
    assert rt.name == "torchtitan" and rt == RUNTIMES["torchtitan"]
    assert rt.fsdp_prefetch and rt.fp32_grad_reduce and rt.fused_optimizer
    assert not rt.tp_comm_overlap and "async TP off" in notes[0]
    assert _rt("torchtitan, async TP")[0].tp_comm_overlap


@pytest.mark.parametrize("framework, rec", [
    ("PyTorch FSDP", None), ("FSDP2", None), ("metaseq (fairscale FSDP + Megatron TP)", None),
    ("torchtitan", None), ("HF Trainer + FSDP", None), ("DeepSpeed ZeRO-3", _par(zero_stage=3)),
    ("in-house trainer", _par(zero_stage=3)), ("", _par(fsdp="FULL_SHARD")),
])
def test_every_sharded_stack_prefetches(framework, rec):
    """No FSDP/ZeRO-3 stack falls to a runtime without parameter prefetch
    (FSDP forward/backward prefetch, DeepSpeed stage3_prefetch_bucket_size)."""
    assert _rt(framework, rec)[0].fsdp_prefetch


def test_fairscale_metaseq_has_no_flash_attention_and_16_bit_reduce():
    rt, _ = _rt("metaseq (fairscale FSDP + Megatron TP)")
    assert rt.name == "fairscale-fsdp"
    assert not rt.flash_attention and not rt.fp32_grad_reduce and not rt.fused_cross_entropy


def test_plain_fsdp_drops_composers_fused_loss():
    """Plain FSDP: no Composer fused loss, the user's F.cross_entropy instead."""
    rt, _ = _rt("PyTorch FSDP")
    assert rt == replace(RUNTIMES["pytorch-fsdp"], fused_cross_entropy=False,
                         eager_cross_entropy=True)


def _bf16(rt) -> Training:
    return Training(global_batch_size=8, seq_len=8, dtype="bf16", runtime=rt)


@pytest.mark.parametrize("framework, rec, upcast", [
    ("PyTorch FSDP", None, False),
    ("PyTorch FSDP2 (fully_shard)", None, False),
    ("PyTorch Lightning FSDPStrategy", None, False),
    ("in-house trainer", _par(fsdp="FULL_SHARD"), False),
    ("HF Trainer + FSDP", None, True),
    ("HF accelerate", None, True),
    ("HF transformers Trainer + DeepSpeed ZeRO-3", _par(zero_stage=3), True),
    ("HF transformers Trainer + DeepSpeed ZeRO-1", _par(zero_stage=1), True),
])
def test_plain_pytorch_loss_stacks_keep_log_probabilities(framework, rec, upcast):
    """Every stack whose loss is the model's plain PyTorch F.cross_entropy runs
    ``eager_cross_entropy`` (the rule of the pytorch-ddp / DeepSpeed ZeRO /
    Colossal-AI runtimes). Hugging Face models cast the logits to fp32 first
    (``ForCausalLMLoss``: ``logits = logits.float()``, transformers
    ``src/transformers/loss/loss_utils.py``): 4 bytes per kept log-probability in
    bf16 training; a plain bf16 FSDP model's log_softmax keeps bf16: 2 bytes."""
    rt, _ = _rt(framework, rec)
    assert rt.eager_cross_entropy and not rt.fused_cross_entropy
    assert rt.loss_fp32_upcast is upcast
    assert kept_logit_bytes(_bf16(rt)) == (4.0 if upcast else 2.0)


def test_a_megatron_text_naming_transformers_is_megatron():
    """'transformers' for the tokenizer does not make a Megatron run a Hugging Face one."""
    rt, _ = _rt("Megatron-LM (2024), transformers==4.40.1 for the tokenizer")
    assert rt == replace(RUNTIMES["megatron-core"], tp_comm_overlap=False,
                         grad_reduce_overlap=False, param_gather_overlap=False)
    assert rt.fused_projections and not rt.eager_cross_entropy and rt.loss_grad_cast


@pytest.mark.parametrize("stage, overlap, lp_copy, fp32_buffer", [
    (0, False, True, True),      # no ZeRO: grad_accum_dtype defaults to fp32 -> BF16_Optimizer
    (1, False, False, False),    # ZeRO on: grad_accum_dtype defaults to bf16 -> ZeRO optimizer
    (2, False, False, False),    # 16-bit communication_data_type; overlap_comm default false
    (3, True, False, False),     # overlap_comm defaults to true for stage 3
])
def test_deepspeed_zero_without_megatron(stage, overlap, lp_copy, fp32_buffer):
    """bf16 DeepSpeed (``deepspeed/runtime/engine.py``): ``get_data_types``
    defaults ``grad_accum_dtype`` to fp32 without ZeRO and to the model dtype
    with ZeRO on; ``_do_optimizer_sanity_check`` picks ``BF16_Optimizer``
    only for fp32 accumulation at stage 0/1, else the ZeRO optimizer."""
    rt, _ = _rt("DeepSpeed", _par(zero_stage=stage))
    assert (rt.grad_reduce_overlap, rt.lp_grad_copy, rt.fp32_grad_buffer) == \
        (overlap, lp_copy, fp32_buffer)
    assert _rt("DeepSpeed overlap_comm: true", _par(zero_stage=2))[0].grad_reduce_overlap


def test_deepspeed_zero1_with_a_stated_fp32_grad_accum_dtype_runs_the_bf16_optimizer():
    rt, _ = _rt("DeepSpeed (grad_accum_dtype: fp32)", _par(zero_stage=1))
    assert rt.lp_grad_copy and rt.fp32_grad_buffer
    rt, _ = _rt("DeepSpeed (grad_accum_dtype: fp32)", _par(zero_stage=2))
    assert not rt.lp_grad_copy and not rt.fp32_grad_buffer


def test_megatron_deepspeed_with_a_stated_ds_config_follows_deepspeeds_rule():
    """A record that states its ds_config (ZeRO stage 1, grad_accum_dtype bf16:
    FlagPerf's llama2_7b Megatron-DeepSpeed case) runs the ZeRO optimizer, not
    BF16_Optimizer; so does one naming the ds_config's ZeRO-1 with the
    accumulation dtype unset (default: the model dtype with ZeRO on). A stated
    fp32 grad_accum_dtype at stage 1 keeps BF16_Optimizer, and a record stating
    only a ZeRO stage keeps the catalog runtime (BLOOM: stage 0 ran, its own
    ZeRO-1 equivalent)."""
    fw = "Megatron-DeepSpeed + DeepSpeed 0.11.0, ZeRO stage 1, no pipeline engine"
    flagperf = {**_par(zero_stage=1),
                "training": {"precision": "bf16 (--bf16; ds_config bf16 enabled, "
                                          "grad_accum_dtype bf16)"}}
    rt, notes = _rt(fw, flagperf)
    assert not rt.lp_grad_copy and not rt.fp32_grad_buffer
    assert any("ZeRO optimizer" in n for n in notes)
    assert "_do_optimizer_sanity_check" in rt.source
    unset = {**_par(zero_stage=1), "training": {"precision": "bf16 (ds_config bf16 enabled)"}}
    assert not _rt(fw, unset)[0].lp_grad_copy
    fp32 = {**_par(zero_stage=1), "training": {"precision": "bf16, grad_accum_dtype fp32"}}
    assert _rt(fw, fp32)[0].lp_grad_copy and _rt(fw, fp32)[0].fp32_grad_buffer
    zero0 = {**_par(zero_stage=0), "training": {"precision": "bf16 (ds_config bf16 enabled)"}}
    assert _rt(fw, zero0)[0].lp_grad_copy
    bloom = _rt("Megatron-DeepSpeed (bigscience fork) + DeepSpeed", _par(zero_stage=1))[0]
    assert bloom == RUNTIMES["deepspeed"]


def test_nemo_before_megatron_bridge():
    """NeMo 1.x/2.0: fp32 gradient reduction (grad_sync_dtype default 'fp32',
    bf16_mixed_plugin grad_reduce_in_fp32=True), no FP8 primary weights
    (fp8_params false); the rest as Megatron-Bridge; 22.xx: Megatron-LM modules."""
    rt, _ = _rt("NeMo 24.07")
    bridge = RUNTIMES["megatron-bridge"]
    assert rt.fp32_grad_buffer and not rt.fp8_primary_weights
    assert replace(rt, name=bridge.name, fp32_grad_buffer=False, fp8_primary_weights=True) == bridge
    stated, _ = _rt("NeMo 2.0 (grad_reduce_in_fp32=False, fp8_params=True)")
    assert not stated.fp32_grad_buffer and stated.fp8_primary_weights
    old, _ = _rt("NeMo Megatron 22.09")
    assert replace(old, name="megatron-lm") == RUNTIMES["megatron-lm"]


def test_megatron_lm_after_2022_runs_megatron_core():
    rt, _ = _rt("Megatron-LM (2024, --tp-comm-overlap)")
    assert rt.name == "megatron-core" and rt.tp_comm_overlap and rt.flash_attention
    assert not rt.grad_reduce_overlap


@pytest.mark.parametrize("text, hopper_native", [
    ("Megatron-LM with Megatron-Core core_v0.6.0 (FlashAttention-2)", False),
    ("Megatron-Core r0.8.0, flash attention 2", False),
    ("Megatron-Core r0.8.0, flash-attn==2.5.8", False),
    ("Megatron-LM (2024, FA2)", False),
    ("Megatron-Core r0.8.0 (FlashAttention-3)", True),
    ("Megatron-Core r0.8.0, FlashAttention-2 and cuDNN fused attention", True),
    ("Megatron-Core r0.8.0, --use-flash-attn", True),
    ("Megatron-Core r0.8.0", True),
])
def test_megatron_core_naming_flash_attention_2_is_not_hopper_native(text, hopper_native):
    """Oracle: autopar_opt/ir/runtime.py, ``hopper_attention``: a FlashAttention-2-class
    kernel is not Hopper-native (FlashAttention-3, cuDNN attention are); a text
    that names no kernel keeps Megatron-Core's default."""
    rt, notes = _rt(text)
    assert rt.name == "megatron-core" and rt.flash_attention and rt.flash_v2_attention
    assert rt.hopper_attention is hopper_native
    assert any("FlashAttention-2 named" in n for n in notes) is (not hopper_native)


def _gpu(gpu_type: str) -> dict:
    return {"hardware": {"gpu_type": gpu_type}}


@pytest.mark.parametrize("text, rec, hopper_native", [
    # TE on sm90+: get_attention_backend prefers cuDNN FusedAttention ("to give
    # FusedAttention preference on Hopper+"), whatever flash-attn is installed
    ("Megatron-Core core_v0.6.0, FlashAttention-2, --transformer-impl transformer_engine",
     _gpu("H100-SXM 80GB"), True),
    ("Megatron-Core r0.8.0 with Transformer Engine, flash attention 2", _gpu("H200"), True),
    ("Megatron-Core r0.8.0 with Transformer Engine, FA2", _gpu("GB200 NVL72"), True),
    # ... but not before sm90, nor without TE named, nor without a GPU stated
    ("Megatron-Core core_v0.6.0, FlashAttention-2, --transformer-impl transformer_engine",
     _gpu("A100-SXM4 80GB"), False),
    ("Megatron-Core core_v0.6.0, FlashAttention-2, --transformer-impl local",
     _gpu("H100-SXM 80GB"), False),
    ("Megatron-Core core_v0.6.0, FlashAttention-2, --transformer-impl transformer_engine",
     None, False),
    # a cuDNN version list is not cuDNN attention
    ("Megatron-Core r0.8.0, FlashAttention-2, CUDA 12.4, cuDNN 8.9", None, False),
    ("Megatron-Core r0.8.0, FlashAttention-2, cuDNN flash attention", None, True),
    ("Megatron-Core r0.8.0, FlashAttention-2 installed, TE FusedAttention", None, True),
])
def test_flash_attention_2_text_under_transformer_engine_on_hopper(text, rec, hopper_native):
    """Oracle: TransformerEngine ``get_attention_backend``
    (transformer_engine/pytorch/attention/dot_product_attention/utils.py): with
    FusedAttention's F16_arbitrary_seqlen backend available and compute
    capability >= (9, 0), FlashAttention is disabled, so TE on Hopper/Blackwell
    runs cuDNN's (Hopper-native) fused attention; elsewhere the FA2 text keeps
    ``hopper_attention`` off (runtime.py)."""
    rt, notes = _rt(text, rec)
    assert rt.name == "megatron-core" and rt.flash_attention
    assert rt.hopper_attention is hopper_native
    assert any("FlashAttention-2 named in the framework text" in n for n in notes) \
        is (not hopper_native)


@pytest.mark.parametrize("zero", [1, 3])
def test_megatron_deepspeed_naming_flash_attention_2_runs_it(zero):
    """Oracle: autopar_opt/ir/runtime.py: a FlashAttention-2 kernel is fused
    (``flash_attention``), FlashAttention-2-class and not Hopper-native; the
    catalog ``deepspeed`` runtime is unfused; nothing else changes."""
    rec = _par(zero_stage=zero)
    plain, _ = _rt("Megatron-DeepSpeed + DeepSpeed 0.11.0", rec)
    named, notes = _rt("Megatron-DeepSpeed + DeepSpeed 0.11.0, FlashAttention-2 (--use-flash-attn-v2)", rec)
    assert not plain.flash_attention
    assert (named.flash_attention, named.flash_v2_attention, named.hopper_attention) == (True, True, False)
    assert replace(named, flash_attention=False) == replace(plain, flash_v2_attention=True,
                                                            hopper_attention=False)
    assert any("FlashAttention-2 named" in n for n in notes)


def test_a_flash_kernel_named_in_the_architecture_makes_the_runtime_fused():
    """InternEvo's records name FlashAttention-2 in ``model.arch``, not in the framework
    text, and run on the unfused DeepSpeed runtime: the graph is built without stored
    scores (read_model), so the compute must price the same fused kernel (before, the
    scores were dropped from memory while the core was priced as two batched GEMMs)."""
    from autopar_opt.calibration.reading.stacks import arch_flash_attention
    ds = runtime_named("deepspeed")
    assert not ds.flash_attention
    notes: list[str] = []
    fa2 = arch_flash_attention("internlm dense decoder (flashattention-2 varlen kernel)", True, ds, notes)
    assert (fa2.flash_attention, fa2.flash_v2_attention, fa2.hopper_attention) == (True, True, False)
    assert "FlashAttention-2 named" in notes[-1]
    other = arch_flash_attention("decoder with flash attention", True, ds, notes)
    assert other.flash_attention and other.hopper_attention == ds.hopper_attention
    assert arch_flash_attention("decoder", False, ds, notes) == ds       # no flash named
    mc = runtime_named("megatron-core")
    assert arch_flash_attention("flashattention-2", True, mc, notes) == mc  # already fused
    for rid in ("internevo_7b_tp1_zero1all_8gpu", "internevo_7b_tp2_zero1all_1024gpu"):
        rec = next(r for r in load_run_file(paths.DATA / "published_runs.yaml") if r["id"] == rid)
        rt = read_record(rec).runtime
        assert rt.flash_attention and rt.flash_v2_attention, rid


def test_a_ulysses_or_allgather_text_sets_the_context_parallel_exchange():
    from autopar_opt.calibration.reading.stacks import cp_exchange
    mc = runtime_named("megatron-core")
    notes: list[str] = []
    assert cp_exchange("XTuner with DeepSpeed ZeRO-3, sequence parallel (DeepSpeed-Ulysses)", mc,
                       notes).cp_comm_type == "a2a"
    assert cp_exchange("Megatron-Core --cp-comm-type allgather", mc, notes).cp_comm_type == "all_gather"
    assert cp_exchange("Megatron-Core --cp-comm-type a2a+p2p", mc, notes) == mc   # hierarchical: not modelled
    assert cp_exchange("Megatron-Core, context parallel 4", mc, notes) == mc


def test_colossal_and_hf_trainer_defaults():
    col, _ = _rt("Colossal-AI")
    assert (col.grad_reduce_overlap, col.fused_optimizer, col.fsdp_prefetch, col.flash_attention) \
        == (True, True, False, False)
    hf, _ = _rt("HF transformers Trainer")
    # the Transformers modeling code keeps q/k/v and gate/up separate (modeling_llama.py)
    # and its loss casts the logits to fp32 (loss_utils.py ForCausalLMLoss: logits.float())
    assert hf == runtime_named("pytorch-ddp", fused_optimizer=False, fused_projections=False,
                               loss_fp32_upcast=True)
    hf_ds, _ = _rt("HF transformers Trainer + DeepSpeed ZeRO-3", _par(zero_stage=3))
    assert hf_ds.flash_attention and hf_ds.name == "deepspeed-zero"
    assert not hf_ds.fused_projections and hf_ds.loss_fp32_upcast


def test_jax_stacks_are_unmodelled_with_the_reason():
    with pytest.raises(Unmodelable, match="JAX/XLA"):
        _rt("MaxText (JAX)")


@pytest.mark.parametrize("rec, name", [
    (_par(zero_stage=3), "pytorch-fsdp"), (_par(zero_stage=2), "deepspeed-zero"),
    (_par(tp=4), "megatron-core"), (_par(), "pytorch-ddp"),
])
def test_unknown_framework_falls_back_by_the_records_fields_and_says_so(rec, name):
    rt, notes = _rt("in-house trainer", rec)
    assert rt.name == name
    assert any("names no catalog stack" in n for n in notes)


# ----------------------------------------------------------------------------- sharding


@pytest.mark.parametrize("par, zero", [
    ({"fsdp": "FSDP2"}, 3), ({"fsdp": "fully_shard"}, 3), ({"fsdp": "yes"}, 3),
    ({"fsdp": "none"}, 0), ({"fsdp": "NO_SHARD"}, 0), ({"fsdp": "none (DDP)"}, 0),
    ({"fsdp": "SHARD_GRAD_OP"}, 2), ({"fsdp": "ZeRO-1"}, 1), ({"zero_stage": 2}, 2),
    ({"fsdp": "FULL_SHARD (PyTorch FSDP, ZeRO-3 equivalent)", "zero_stage": 3}, 3),
])
def test_fsdp_texts(par, zero):
    assert map_zero(Parallelism(**par)) == zero


def test_torchtitan_shards_by_default_and_hybrid_sharding_needs_its_replicas():
    notes: list[str] = []
    assert map_zero(Parallelism(), RUNTIMES["torchtitan"], notes) == 3
    assert "data_parallel_shard_degree" in notes[0]
    assert map_zero(Parallelism(zero_stage=0), RUNTIMES["torchtitan"]) == 0    # stated: kept
    assert map_zero(Parallelism(fsdp="HYBRID_SHARD")) == 3
    # the shard group is dp·cp / dp_replicate (stated), never read from the text
    assert read_zero_group(Parallelism(fsdp="HYBRID_SHARD", dp_replicate=16), 128, 1, 3) == 8
    assert read_zero_group(Parallelism(dp_replicate=4), 256, 2, 3) == 128
    assert read_zero_group(Parallelism(dp_replicate=2), 64, 1, 0) == 0     # DDP replicas
    assert read_zero_group(Parallelism(fsdp="FULL_SHARD"), 64, 1, 3) == 0
    for par in ({"fsdp": "HYBRID_SHARD"}, {"fsdp": "HSDP (dp_shard=8)"}, {"fsdp": "MiCS"}):
        with pytest.raises(Unmodelable, match="hybrid sharding.*dp_replicate"):
            read_zero_group(Parallelism(**par), 64, 1, 3)
    with pytest.raises(Unmodelable, match="does not divide"):
        read_zero_group(Parallelism(dp_replicate=3), 64, 1, 3)


# ----------------------------------------------------------------------------- precision


@pytest.mark.parametrize("text, dtype", [
    ("fp8", "fp8"), ("float8", "fp8"), ("FP8 (delayed scaling)", "fp8"), ("e4m3 / e5m2 hybrid", "fp8"),
    ("MXFP8", "fp8"), ("bf16 + FP8 linear layers", "fp8"), ("float8 rowwise", "fp8"),
    ("FP8-CS (FP8-MX in parentheses)", "fp8"), ("amp_fp8 (FSDP mixed_precision=DEFAULT)", "fp8"),
    ("bf16 (no FP8)", "bf16"), ("bf16, fp8 disabled", "bf16"), ("bfloat16", "bf16"),
    ("bf16-mixed", "bf16"), ("16-mixed", "fp16"), ("float16", "fp16"), ("half", "fp16"),
    ("fp16 mixed precision (--fp16, loss-scale 8192)", "fp16"),
    ("mixed precision (16-bit; fp16 vs bf16 not stated)", "bf16"),   # as before: bf16 first
    ("mixed precision (16-bit)", "bf16"),                             # as before: default
])
def test_precision_texts(text, dtype):
    assert map_precision(text, "H100-SXM-80GB", []) == dtype


def test_fp8_without_fp8_tensor_cores_and_fp4_are_unmodelable():
    with pytest.raises(Unmodelable, match="no FP8 tensor cores"):
        map_precision("FP8 (delayed scaling)", "A100-80GB", [])
    with pytest.raises(Unmodelable, match="FP4"):
        map_precision("NVFP4", "B200", [])


# ----------------------------------------------------------------------------- FLOPs


def test_megatron_core_count_is_eq7_for_mha_and_a_4h_mlp():
    """num_floating_point_operations with g = a, f = 4h, no gating, k = 1:
    12·(1 + 1 + s/h + 4 + V/(2lh)) = 72·(1 + s/(6h) + V/(12lh))."""
    for d in (Dims(8, 2048, 24, 2304, 51200, 0, 24, 24, 9216),
              Dims(1, 4096, 96, 12288, 50257, 0)):
        assert mcore_flops(d) == pytest.approx(eq7_flops(d), rel=1e-12)


def test_megatron_core_count_gqa_swiglu_by_hand():
    """Llama-3-8B shapes, B = 1, s = 8192: 12·s·l·h²·((1 + 8/32 + 8192/4096)
    + 14336/4096·1.5 + 128256/(2·32·4096)) = 5.2776558133248e13·8.9892578125
    = 4.7442208751616e14; causal: minus 12·s·l·h²·(s/2h) = 5.2776558133248e13."""
    d = Dims(1, 8192, 32, 4096, 128256, 0, 32, 8, 14336, True)
    assert mcore_flops(d) == pytest.approx(474422087516160.0, rel=1e-12)
    assert mcore_flops(d) - mcore_causal_flops(d) == pytest.approx(52776558133248.0, rel=1e-12)


def test_palm_torchtitan_and_6nd_counts_by_hand():
    """N = 1e9, V·h = 1e8, l = 10, h = 1000, s = 1000, B = 1: torchtitan per
    token 6·(1e9 − 1e8) + 12·10·1000·1000 = 5.52e9, ×1000 tokens = 5.52e12;
    6ND = 6e9·1000 = 6e12; non-embedding 6ND = 5.4e12."""
    d = Dims(1, 1000, 10, 1000, 100_000, 1e9)
    assert palm_flops(d) == pytest.approx(5.52e12)
    assert six_nd_flops(d) == pytest.approx(6e12)
    assert six_nd_flops(d, non_embedding=True) == pytest.approx(5.4e12)


@pytest.mark.parametrize("text, label", [
    ("torchtitan get_num_flop_per_token: 6*N + 12*l*h*q*t", "PaLM"),
    ("PaLM appendix B model FLOPs", "PaLM"),
    ("Megatron-Core num_floating_point_operations", "num_floating_point_operations"),
    ("Megatron-Bridge model TFLOP/s/GPU: Llama formula with the attention term HALVED for causal",
     "(causal)"),
    ("6ND", "6·N·D (N as published)"), ("6 * N * D with N non-embedding", "N non-embedding"),
    ("Korthikanti et al. 2022 App. A: model FLOPs/iter = 72*B*L*s*h^2", "Eq. 7"),
    ("Per-GPU teraFLOP/s and MFU as printed; Exact FLOP formula (recompute/causal accounting) "
     "not stated in README.", "[formula not stated: assumed]"),
    ("", "[formula not stated: assumed]"),
])
def test_flop_conventions_are_recognised(text, label):
    assert label in flop_formula(text, for_mfu=True)[1]


# ----------------------------------------------------------------------------- measured


def test_total_token_rate_and_aggregate_pflops():
    """tokens_per_sec_total 190000 at s = 8192: 23.193359375 samples/s.
    aggregate_pflops 0.5 with Eq. 7 at B = 8, s = 6144, l = 2, h = 1024,
    V = 24576 (s/6h = V/12lh = 1): F = 72·8·6144·2·1024²·3 = 2.2265110462464e13,
    samples/s = 8·0.5e15/F."""
    d = Dims(8, 8192, 2, 1024, 24576, 0)
    sps, basis = measured_samples_per_s(_tp({"other": {"tokens_per_sec_total": 190000}}), d, 64,
                                        "H100-SXM-80GB", "bf16", _count(""))
    assert sps == pytest.approx(23.193359375) and "all GPUs" in basis
    d = Dims(8, 6144, 2, 1024, 24576, 0)
    sps, basis = measured_samples_per_s(_tp({"aggregate_pflops": 0.5}), d, 64, "H100-SXM-80GB",
                                        "bf16", _count("72*B*s*l*h^2 (Eq.7)"))
    assert sps == pytest.approx(8 * 0.5e15 / 22265110462464.0, rel=1e-12)
    assert "7.812 TFLOP/s per GPU" in basis          # 500 TFLOP/s / 64 GPUs


def test_per_gpu_figures_keep_precedence_over_the_new_keys():
    d = Dims(8, 6144, 2, 1024, 24576, 0)
    both = {"tflops_per_gpu": 100.0, "aggregate_pflops": 99.0,
            "tokens_per_sec_per_gpu": 1000.0, "other": {"tokens_per_sec_total": 5.0}}
    assert measured_samples_per_s(_tp(both), d, 64, "H100-SXM-80GB", "bf16", _count(""))[1] \
        .startswith("tokens_per_sec_per_gpu")
    del both["tokens_per_sec_per_gpu"]
    assert measured_samples_per_s(_tp(both), d, 64, "H100-SXM-80GB", "bf16", _count(""))[1] \
        .startswith("other.tokens_per_sec_total")
    del both["other"]
    assert measured_samples_per_s(_tp(both), d, 64, "H100-SXM-80GB", "bf16", _count(""))[1] \
        .startswith("tflops_per_gpu")


# ----------------------------------------------------------------------------- end to end


def test_synthetic_unseen_stacks_end_to_end(capsys):
    """Every invented record is modelled, or skipped with the precise reason."""
    assert calibrate_command(str(SYNTH), json_output=True) == 0
    data = json.loads(capsys.readouterr().out)
    skipped = {r["id"]: r["skipped"] for r in data["records"] if "skipped" in r}
    assert set(skipped) == {"synth_maxtext", "synth_hsdp", "synth_fp8_a100"}
    assert "JAX/XLA" in skipped["synth_maxtext"]
    assert "hybrid sharding" in skipped["synth_hsdp"]
    assert "no FP8 tensor cores" in skipped["synth_fp8_a100"]
    assert data["summary"]["modeled"] == 13


def test_synthetic_records_map_to_their_stacks():
    runs = {r["id"]: build_run(read_record(r)) for r in load_run_file(SYNTH)
            if r["id"] not in ("synth_maxtext", "synth_hsdp", "synth_fp8_a100")}
    tt = runs["synth_torchtitan_fsdp2_tp"]
    assert tt.training.runtime.name == "torchtitan"
    assert (tt.strategy.zero, tt.strategy.sp, tt.strategy.tp) == (3, True, 8)
    assert "PaLM" in tt.measured_basis
    f8 = runs["synth_torchtitan_float8"]
    assert f8.training.dtype == "fp8" and f8.strategy.zero == 3 and f8.training.runtime.tp_comm_overlap
    assert runs["synth_nemo_2407"].training.dtype == "fp8"
    assert runs["synth_megatron_lm_2024"].training.dtype == "fp8"
    assert runs["synth_metaseq"].strategy.zero == 3 and not runs["synth_metaseq"].strategy.sp
    assert runs["synth_pytorch_fsdp"].training.runtime.fp32_grad_reduce      # stated reduce_dtype
    assert runs["synth_hf_trainer_ds3"].measured_basis.startswith("aggregate_pflops")
    assert runs["synth_h800"].cluster.device.name == "H800-SXM-80GB"
    report = calibrate_file(SYNTH)
    assert {c.id for c in report.comparisons} == set(runs)


def test_torchtitan_mfu_divides_by_the_bf16_peak_in_float8_runs():
    """torchtitan's get_peak_flops is the bf16 dense peak (989 TFLOP/s on H100
    SXM) in float8 runs too: the same MFU means 989/1979 of the throughput an
    FP8-peak reading would give."""
    rec = next(r for r in load_run_file(SYNTH) if r["id"] == "synth_torchtitan_float8")
    rec["measured"] = {"mfu_pct": 40.0}
    run = build_run(read_record(rec))
    assert run.training.dtype == "fp8" and "(bf16 peak)" in run.measured_basis
    rec["flops_counting"] = "PaLM appendix B, MFU vs the FP8 peak"
    fp8 = build_run(read_record(rec))
    assert run.measured_samples_per_s / fp8.measured_samples_per_s == pytest.approx(989 / 1979)


def test_h100_pcie_and_nvl_are_not_read_as_sxm():
    """Since issue 28 (point 4) both are catalog devices: a record naming them runs on them,
    with their own peaks (756 / 835 dense bf16 TFLOP/s against the SXM's 989)."""
    rec = next(r for r in load_run_file(SYNTH) if r["id"] == "synth_pytorch_fsdp")
    for gpu, name, peak in (("H100 PCIe", "H100-PCIe-80GB", 756.0), ("H100 NVL", "H100-NVL-94GB", 835.0)):
        rec["hardware"]["gpu_type"] = gpu
        rec["hardware"].pop("gpu_memory_gb", None)
        run = build_run(read_record(rec))
        assert run.cluster.device.name == name and run.cluster.device.peak_tflops["bf16"] == peak


def test_fsdp_runtimes_shard_by_default_and_megatron_deepspeed_zero3_drops_the_bf16_optimizer():
    """FSDP's default ShardingStrategy is FULL_SHARD (and fairscale's
    reshard_after_forward=True): stage 3 when the record states nothing.
    Megatron-DeepSpeed at ZeRO-3 runs DeepSpeed's ZeRO optimizer, not the
    stage-0/1 BF16_Optimizer (no 16-bit gradient copy beside fp32 buffers)."""
    for fw in ("PyTorch FSDP", "metaseq (fairscale FSDP)"):
        rt, _ = _rt(fw)
        assert map_zero(Parallelism(), rt) == 3
    assert map_zero(Parallelism(), RUNTIMES["pytorch-ddp"]) == 0
    rt, _ = _rt("Megatron-DeepSpeed", _par(zero_stage=3))
    assert rt.name == "deepspeed-zero" and not rt.lp_grad_copy and rt.grad_reduce_overlap
    assert _rt("Megatron-DeepSpeed", _par(zero_stage=1))[0] == RUNTIMES["deepspeed"]


def test_nemo_releases_from_25_09_are_megatron_bridge():
    assert _rt("NeMo 25.11")[0] == RUNTIMES["megatron-bridge"]
    assert _rt("NeMo 25.07")[0].name == "nemo"


def test_deepspeed_fp16_reduces_in_fp16_and_hfu_alone_is_refused_with_the_reason():
    rec = {"parallelism": {"zero_stage": 1}, "training": {"precision": "fp16"}}
    rt, _ = _rt("DeepSpeed", rec)
    assert not rt.fp32_grad_buffer and not rt.lp_grad_copy
    with pytest.raises(ValueError, match="hfu_pct alone"):
        pick_throughput(Measured(hfu_pct=50.0))


def test_nemo_overrides_stated_with_the_precision_are_read():
    rec = {"training": {"precision": "FP8 (fp8_params: true, grad_sync_dtype bf16, "
                                     "grad_reduce_in_fp32 = false)"}}
    rt, _ = _rt("NeMo 24.07", rec)
    assert rt.fp8_primary_weights and not rt.fp32_grad_buffer
    rt, _ = _rt("NeMo 24.07 (optim.grad_sync_dtype: bf16)")
    assert not rt.fp32_grad_buffer and not rt.fp8_primary_weights
