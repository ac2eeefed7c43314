"""Runtime capability ``flash_v2_attention`` and the attention kernel a runtime runs.

A FlashAttention-1-class kernel (FlashAttention-1, or llm-foundry's pre-MLIR Triton
kernel) and a FlashAttention-2-class one are priced by their own published
rows (autopar_opt/cost/data/attention_kernels.yaml, cost.attention); a Hopper-
native stack on an H100 runs cuDNN fused attention.

Oracle: the rows by hand. The layer below states no head dimension (128 taken)
and no mask (causal taken) and counts its core whole, so a fused kernel executes
half of ``CORE``; the training's sequence (1 token) is below the shortest measured
length, so the 512-token rows hold. A row of forward+backward TFLOP/s ``R_fb``
prices each pass at ``(3/3.5)·R_fb/peak`` of the peak; separate forward ``R_f`` and
backward ``R_b`` rows at ``R_f/peak`` and ``(2/2.5)·R_b/peak``.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from autopar_opt.calibration.reading import RawRecord, load_run_file
from autopar_opt.calibration.reading.runtime import runtime_of
from autopar_opt.cost.compute import compute_time
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


def _fb(r_fb: float, peak: float) -> float:
    """Attention time from one forward+backward row: half the core executed, F + 2F."""
    eff = 3 / 3.5 * r_fb / peak
    return 0.5 * 3 * CORE / (peak * 1e12 * eff)


def _split(r_f: float, r_b: float, peak: float) -> float:
    """From forward and backward rows."""
    return 0.5 * (CORE / (r_f * 1e12) + 2 * CORE / (2 / 2.5 * r_b * 1e12))


def test_fa1_class_kernel_on_a100():
    """A100, causal, head dim 128, 512 tokens (FlashAttention-2 paper A100 figure, panel d):
    FlashAttention-2 99 TFLOP/s, FlashAttention-1 55."""
    on = _compute("A100-80GB", "pytorch-fsdp")
    off = _compute("A100-80GB", "pytorch-fsdp", flash_v2_attention=False)
    assert on.attn_s == pytest.approx(_fb(99, 312), rel=1e-9)
    assert off.attn_s == pytest.approx(_fb(55, 312), rel=1e-9)
    assert off.gemm_s == on.gemm_s
    assert off.total_s - on.total_s == pytest.approx(off.attn_s - on.attn_s, rel=1e-9)


def test_hopper_native_fa2_and_fa1_kernels_on_h100():
    """H100, causal, head dim 128, 512 tokens. megatron-core (Hopper-native): cuDNN, forward
    the mean of 315 (FlashAttention-3 paper forward figure, panel d) and 344.5 (this
    project's H200 run), backward 211.0 (the H200 run; the paper's backward is non-causal).
    pytorch-fsdp (not Hopper-native): FlashAttention-2, forward the mean of 191 (same
    figure) and 183.3 (H200); backward the mean of the H200's 115.7 and the one the
    FlashAttention-2 H100 figure's forward+backward 163 (panel d) gives with that forward,
    R_b = 2.5/(3.5/163 - 1/R_f). A FlashAttention-1-class kernel is never Hopper-native:
    98 forward+backward (panel d)."""
    cudnn = _compute("H100-SXM-80GB", "megatron-core")
    assert cudnn.attn_s == pytest.approx(_split((315 + 344.5) / 2, 211.0, 989), rel=1e-9)
    r_f = (191 + 183.3) / 2
    r_b = (115.7 + 2.5 / (3.5 / 163 - 1 / r_f)) / 2
    fa1 = _compute("H100-SXM-80GB", "megatron-core", flash_v2_attention=False)
    assert fa1.attn_s == pytest.approx(_fb(98, 989), rel=1e-9)
    fa2 = _compute("H100-SXM-80GB", "pytorch-fsdp")
    assert fa2.attn_s == pytest.approx(_split(r_f, r_b, 989), rel=1e-9)
    assert _compute("H100-SXM-80GB", "pytorch-fsdp", flash_v2_attention=False).attn_s == \
        pytest.approx(fa1.attn_s, rel=1e-12)
    named = _compute("H100-SXM-80GB", "pytorch-fsdp", attention_kernel="flash_attention_3")
    assert named.attn_s < fa2.attn_s


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
                                        r"[^\n]*true or false"):
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
