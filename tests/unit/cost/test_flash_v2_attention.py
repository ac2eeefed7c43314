"""Runtime capability ``flash_v2_attention``: a FlashAttention-1-class kernel
(FlashAttention-1, or llm-foundry's pre-MLIR Triton kernel) runs the attention
core at ``FA1_VS_FA2`` = 1/2 of a FlashAttention-2-class one (Dao 2023: FA2 is
"around 2x" faster than FlashAttention, abstract and Sec. 4.1).

Oracle: ``kernel_time`` by hand, ``t = (τ + τ_half) / eff`` with ``τ = f /
peak`` (its docstring), so halving ``eff`` doubles the time exactly, whatever
``τ_half``; the GEMMs do not move.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from autopar_opt.calibration.reading import RawRecord, load_run_file
from autopar_opt.calibration.reading.runtime import runtime_of
from autopar_opt.cost.compute import FA1_VS_FA2, FA2_ON_HOPPER, compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.spec import SpecError, load_spec
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from support import paths

F = 1e12                  # forward FLOPs per sample
CORE = 0.1 * F            # of which the attention core (scores, softmax, ·V)


def _compute(device: str, runtime: str, **caps):
    cl = make_cluster("c", 1, 8, device)
    tr = Training(1, 1, "bf16", runtime=runtime_named(runtime, **caps))
    ctx = StageContext(cl, tr, default_params(), 1, 1)
    layer = Layer("b", kind=LayerKind.transformer_block, flops_fwd=F, flops_bwd=2 * F,
                  flops_recompute_selective=CORE)
    return compute_time(layer, Strategy(dp=1, tp=1), ctx)


def _attn_by_hand(device: str, eff: float) -> float:
    """Forward core + backward 2·core, each ``(τ + τ_half) / eff`` (kernel_time)."""
    p = default_params()
    peak = make_cluster("c", 1, 8, device).device.peak_tflops["bf16"] * 1e12
    half = p.efficiency_half_us * 1e-6
    return sum((f / peak + half) / eff for f in (CORE, 2 * CORE))


def test_fa1_class_kernel_on_a100_takes_twice_the_attention_time():
    """A100 (not Hopper): eff = gemm_eff x attention_efficiency, x 1/2 when off."""
    p = default_params()
    eff = p.efficiency_for("A100-80GB") * p.attention_efficiency
    on = _compute("A100-80GB", "pytorch-fsdp")
    off = _compute("A100-80GB", "pytorch-fsdp", flash_v2_attention=False)
    assert FA1_VS_FA2 == 0.5
    assert on.attn_s == pytest.approx(_attn_by_hand("A100-80GB", eff), rel=1e-12)
    assert off.attn_s == pytest.approx(_attn_by_hand("A100-80GB", eff * FA1_VS_FA2), rel=1e-12)
    assert off.attn_s == pytest.approx(on.attn_s / FA1_VS_FA2, rel=1e-12)
    assert off.gemm_s == on.gemm_s
    assert off.total_s - on.total_s == pytest.approx(off.attn_s - on.attn_s, rel=1e-9)


def test_fa1_class_kernel_is_never_hopper_native():
    """megatron-core is Hopper-native on H100; a FlashAttention-1-class kernel is
    not, so it also pays FA2_ON_HOPPER: 1/(1/2 x 1/2) = 4x the attention time."""
    p = default_params()
    eff = p.efficiency_for("H100-SXM-80GB") * p.attention_efficiency
    on = _compute("H100-SXM-80GB", "megatron-core")
    off = _compute("H100-SXM-80GB", "megatron-core", flash_v2_attention=False)
    assert on.attn_s == pytest.approx(_attn_by_hand("H100-SXM-80GB", eff), rel=1e-12)
    assert off.attn_s == pytest.approx(
        _attn_by_hand("H100-SXM-80GB", eff * FA1_VS_FA2 * FA2_ON_HOPPER), rel=1e-12)
    # pytorch-fsdp is not Hopper-native either way: only the 1/2 of FA1_VS_FA2 differs
    fsdp_on = _compute("H100-SXM-80GB", "pytorch-fsdp")
    fsdp_off = _compute("H100-SXM-80GB", "pytorch-fsdp", flash_v2_attention=False)
    assert fsdp_off.attn_s == pytest.approx(fsdp_on.attn_s / FA1_VS_FA2, rel=1e-12)


def test_unfused_attention_ignores_the_capability():
    """Without flash_attention the core is two batched GEMMs at the GEMM efficiency."""
    on = _compute("A100-80GB", "megatron-lm")
    off = _compute("A100-80GB", "megatron-lm", flash_v2_attention=False)
    assert off.attn_s == on.attn_s


def _spec(tmp_path: Path, options: dict | None) -> Path:
    training = {"global_batch_size": 16, "runtime": "pytorch-fsdp"}
    if options is not None:
        training["runtime_options"] = options
    spec = {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": training, "plan": {"tp": 2, "pp": 2, "microbatches": 4}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_spec_runtime_option_is_read(tmp_path):
    """``runtime_options: {flash_v2_attention: false}`` reaches the runtime and
    slows the plan (the debug model has flash attention cores)."""
    default = load_spec(_spec(tmp_path, None))
    off = load_spec(_spec(tmp_path, {"flash_v2_attention": False}))
    assert default.training.runtime.flash_v2_attention is True
    assert off.training.runtime.flash_v2_attention is False
    assert off.training.runtime.name == "pytorch-fsdp"
    t = [evaluate(s.plan, s.graph, s.cluster, s.training, s.cost_params).iteration_time_s
         for s in (default, off)]
    assert t[1] > t[0]


def test_spec_runtime_option_rejects_a_non_boolean(tmp_path):
    with pytest.raises(SpecError, match=r"training\.runtime_options\.flash_v2_attention"
                                        r"[^\n]*valid boolean"):
        load_spec(_spec(tmp_path, {"flash_v2_attention": "maybe"}))


RUNS = paths.DATA / "published_runs.yaml"


def test_llmfoundry_2023_tables_run_the_fa1_class_triton_kernel():
    """All 28 llm-foundry records come from the four 2023 README tables, whose
    scripts default to attn_impl: triton (calibration.reading.stacks docstring): the
    kernel is FlashAttention-1-class and the record's notes say so. A record
    from another section (the later "Large Scale" table ran attn_impl: flash
    with FlashAttention-2) keeps the FlashAttention-2-class kernel."""
    foundry = [r for r in load_run_file(RUNS) if r["id"].startswith("llmfoundry_")]
    assert len(foundry) == 28
    for rec in foundry:
        notes: list[str] = []
        rt = runtime_of(rec["training"]["framework"], notes, RawRecord.read(rec))
        assert rt.name == "pytorch-fsdp" and rt.flash_attention and not rt.flash_v2_attention
        assert any("flash_attn_triton" in n and "flash_v2_attention off" in n for n in notes)
    later = copy.deepcopy(foundry[0])
    later["source"]["locator"] = 'README.md section "Large Scale"'
    rt = runtime_of(later["training"]["framework"], [], RawRecord.read(later))
    assert rt.flash_v2_attention
