"""Cost model v2 memory terms that published runs exposed (issue 10).

Each expected value is derived by hand in the docstring from the source named
there; the numbers are small so the arithmetic can be checked on paper.
"""

from __future__ import annotations

import pytest

from autopar_opt.calibration.fit import CENSOR_MARGIN_GIB, reserve_and_fragmentation
from autopar_opt.calibration.reading.parallel import map_zero
from autopar_opt.calibration.reading.schema import Parallelism
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.state import weight_bytes
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from model_zoo.transformer import lm_head, transformer_block

S, H, A, FF = 4, 8, 2, 16       # sequence, hidden, heads, MLP width


def _tr(dtype: str, runtime: str) -> Training:
    return Training(1, S, dtype, runtime=runtime_named(runtime))


def test_fused_swiglu_keeps_its_input_and_the_product_only():
    """Gated MLP (SwiGLU), s = 4, h = 8, f = 16, MHA, flash attention, 16-bit:
    attention 7sh + 4sh = 11·32 = 352, norms 4sh = 128, MLP 3sh = 96 plus
    eager 8sf = 512 (both GEMM outputs, SiLU output, product) or fused 6sf =
    384 (Megatron-Core ``bias_swiglu_impl`` keeps the 2f-wide input 4sf = 256
    and the product 2sf = 128): 1088 vs 960 bytes per sample."""
    eager = transformer_block("b", S, H, A, FF, gated_mlp=True, flash_attention=True)
    fused = transformer_block("b", S, H, A, FF, gated_mlp=True, flash_attention=True,
                              fused_gated=True)
    assert eager.act_bytes == pytest.approx(1088)
    assert fused.act_bytes == pytest.approx(960)
    plain = transformer_block("b", S, H, A, FF, flash_attention=True, fused_gated=True)
    assert plain.act_bytes == pytest.approx(352 + 128 + 4 * S * FF + 96)   # no gate: unchanged


def test_fp8_keeps_gemm_inputs_as_their_fp8_cast():
    """Transformer Engine FP8 ``Linear``/``LayerNormLinear`` save the FP8 cast of
    the GEMM input (1 byte instead of 2). GEMM inputs per sample of the block
    above: QKV and first-MLP norm outputs 2·2sh = 128 (replicated without
    SP), attention output 2sh = 64, MLP product 2sf = 128: 320 bytes, of which
    half (160) is saved in FP8. tp = 2 without SP: replicated part 10sh = 320
    stays whole, the rest (1088 − 320 = 768) halves: bf16 320 + 384 = 704;
    FP8: (320 − 64) + (768 − 96)/2 = 256 + 336 = 592."""
    layer = transformer_block("b", S, H, A, FF, gated_mlp=True, flash_attention=True)
    s = Strategy(dp=1, tp=2)
    bf16 = activation_bytes(layer, s, 1, training=_tr("bf16", "megatron-core"))
    fp8 = activation_bytes(layer, s, 1, training=_tr("fp8", "megatron-core"))
    assert layer.act_gemm_input_bytes == pytest.approx(320)
    assert layer.act_gemm_input_replicated_bytes == pytest.approx(128)
    assert bf16 == pytest.approx(704)
    assert fp8 == pytest.approx(592)


def test_fp8_primary_weights_replace_the_16bit_weight():
    """1e9 parameters, dp = 4, ZeRO-1, FP8 training. Megatron-Core default:
    bf16 weight 2 + FP8 copy and transpose 2 + fp32 gradient 4 + 12/4 = 11
    bytes per parameter. Megatron-Bridge FP8 recipe (``fp8_param_gather``,
    ``grad_reduce_in_fp32 = False``): FP8 weight + transpose 2 + bf16
    gradient 2 + 12/4 = 7 bytes per parameter."""
    layer = Layer("b", kind=LayerKind.transformer_block, params=10**9)
    s = Strategy(dp=4, tp=1, zero=1)
    assert weight_bytes(layer, s, _tr("fp8", "megatron-core")) == pytest.approx(11e9)
    assert weight_bytes(layer, s, _tr("fp8", "megatron-bridge")) == pytest.approx(7e9)
    # in bf16 the flag changes nothing: 2 + 2 + 3 bytes
    assert weight_bytes(layer, s, _tr("bf16", "megatron-bridge")) == pytest.approx(7e9)


@pytest.mark.parametrize("text, stage", [
    ("FSDP (sharding group 8)", 3),                  # Megatron-Bridge table (Megatron-FSDP)
    ("FULL_SHARD (PyTorch FSDP, ZeRO-3 equivalent)", 3),
    ("SHARD_GRAD_OP", 2),
    ("none (DDP)", 0),
])
def test_fsdp_text_maps_to_its_zero_stage(text, stage):
    """Megatron-Bridge turns ``use_megatron_fsdp`` into
    ``data_parallel_sharding_strategy = "optim_grads_params"`` (ZeRO-3)."""
    assert map_zero(Parallelism(fsdp=text)) == stage


def test_a_model_without_dropout_keeps_no_masks():
    """Korthikanti et al. 2022, Sec. 4.1: one ``s·h`` dropout mask after the
    attention projection and one after the MLP, both in the replicated
    ``10·s·h``. MHA 4h MLP, flash attention, s = 4, h = 8: 34sh = 1088 bytes
    with dropout, 32sh = 1024 without; replicated 10sh = 320 vs 8sh = 256.
    Without flash attention the ``5·a·s²`` scores lose the dropout's mask and output,
    keeping the softmax output (``2·a·s²``, model_zoo.transformer.kept_per_score):
    5·2·16 = 160 vs 2·2·16 = 64."""
    with_d = transformer_block("b", S, H, A, 4 * H, flash_attention=True)
    without = transformer_block("b", S, H, A, 4 * H, flash_attention=True, dropout=False)
    assert with_d.act_bytes == pytest.approx(34 * S * H)
    assert without.act_bytes == pytest.approx(32 * S * H)
    assert (with_d.act_replicated_bytes, without.act_replicated_bytes) == (10 * S * H, 8 * S * H)
    unfused = transformer_block("b", S, H, A, 4 * H, dropout=False)
    assert unfused.act_attn_bytes == pytest.approx(2 * A * S * S)


def test_fused_cross_entropy_keeps_16bit_logits():
    """Output layer, s = 4, h = 8, vocabulary 32: fp32 logits 4·s·V = 512 bytes
    plus the final norm's 16-bit input and output 4·s·h = 128 per sample
    (Korthikanti et al. 2022, Sec. 4.3). llm-foundry's default
    ``fused_crossentropy`` (flash-attn xentropy) keeps the 16-bit logits:
    2·s·V = 256, so 384 instead of 640 bytes."""
    head = lm_head("head", S, H, 32)
    s = Strategy(dp=1, tp=1)
    assert activation_bytes(head, s, 1, training=_tr("bf16", "megatron-core")) == pytest.approx(640)
    assert activation_bytes(head, s, 1, training=_tr("bf16", "pytorch-fsdp")) == pytest.approx(384)


def test_plans_that_ran_censor_the_memory_fit():
    """``measured = reserve + (1+f)·modelled`` on (10, 13) and (20, 25): exactly
    reserve 1, f = 0.2. A plan that ran with 40 GiB modelled on a 48 GiB GPU
    would need 1 + 1.2·40 = 49 > 48, so the constraint r + 40g = 48 (g = 1+f)
    is active: minimise (35 − 30g)² + (23 − 20g)², d/dg = 0 at g = 3020/2600,
    f = 0.161538, reserve = 48 − 40g = 1.538462. A plan over capacity even at
    the lowest reserve (modelled 60 on 48) cannot constrain the fit."""
    assert reserve_and_fragmentation([(10, 13), (20, 25)]) == pytest.approx((1.0, 0.2), abs=1e-6)
    cap = 48 + CENSOR_MARGIN_GIB          # the fit keeps 1 MiB below a capacity
    r, f = reserve_and_fragmentation([(10, 13), (20, 25)], [(40, cap), (60, cap), (5, 80)])
    assert f == pytest.approx(3020 / 2600 - 1, abs=1e-6)
    assert r == pytest.approx(48 - 40 * 3020 / 2600, abs=1e-6)


def test_a_pinned_reserve_leaves_only_the_fragmentation_free():
    """The shipped fit holds the reserve at the measured MEASURED_RESERVE_GIB. Held at 1
    on (10, 13) and (20, 25), f = 0.2 exactly; held at 2, least squares of
    (1 - 10f)² + (3 - 20f)² gives f = (10 + 60) / (100 + 400) = 0.14; the censored plan
    of the test above (40 GiB on 48) then bounds f by (48 - 2 - 40)/40 = 0.15, not active."""
    assert reserve_and_fragmentation([(10, 13), (20, 25)], reserve=1.0) == pytest.approx((1.0, 0.2))
    cap = 48 + CENSOR_MARGIN_GIB
    r, f = reserve_and_fragmentation([(10, 13), (20, 25)], [(40, cap)], reserve=2.0)
    assert r == 2.0 and f == pytest.approx(0.14, abs=1e-6)


def test_the_shipped_reserve_is_the_measured_one():
    """Oracle: the device measurement file (memory outside PyTorch's allocator after a
    training step on one H200), rounded to the MiB."""
    import json
    from pathlib import Path

    from autopar_opt.cost.params import MEASURED_RESERVE_GIB, default_params

    raw = json.loads((Path(__file__).resolve().parents[3] / "benchmarks" / "kernels"
                      / "h200_results.json").read_text())
    assert MEASURED_RESERVE_GIB == pytest.approx(raw["memory"]["after_step"]["outside_torch_gib"],
                                                 abs=1e-3)
    assert default_params().memory_reserve_gib == pytest.approx(MEASURED_RESERVE_GIB, abs=1e-6)


def test_decoder_block_states_its_gemm_inputs_for_fp8():
    """The zoo's and Hugging Face configs' blocks (``model_zoo/blocks.py``) state the GEMM
    inputs FP8 keeps as 1-byte casts, as ``transformer_block`` does; before, they stated
    none and FP8 runs of those models kept 16-bit GEMM inputs. s = 4, h = 8, 2 heads of 4:
    the two norm outputs 2·2sh = 128 (replicated), the projection input 2·s·heads·v = 64,
    the SwiGLU product 2sf = 128: 320, as the Megatron block above. MoE, 4 experts of
    f_e = 16, top-2: the routed copies' dispatched inputs and products 2·s·k·(h + f_e) =
    384 replace the dense product: 128 + 64 + 384 = 576. MLA with q/kv latents of 4: their
    normed latents 2·s·(4 + 4) = 64 join the split part: 128 + 64 + 64 + 128 = 384. At
    tp = 1 FP8 keeps half of them: the activations fall by exactly 160, 288 and 192."""
    from model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block

    gqa = AttentionDims(hidden=H, heads=A, kv_heads=A, head_dim=H // A)
    mla = AttentionDims(hidden=H, heads=A, kv_heads=A, head_dim=H // A, q_lora_rank=4,
                        kv_lora_rank=4, qk_nope_dim=2, qk_rope_dim=2, v_head_dim=4)
    dense = decoder_block("d", S, gqa, mlp=MlpDims(ffn=FF))
    ref = transformer_block("b", S, H, A, FF, gated_mlp=True, flash_attention=True)
    assert (dense.act_gemm_input_bytes, dense.act_gemm_input_replicated_bytes) \
        == pytest.approx((ref.act_gemm_input_bytes, ref.act_gemm_input_replicated_bytes))
    assert dense.act_gemm_input_bytes == pytest.approx(320)
    moe = decoder_block("m", S, gqa, moe=MoeDims(num_experts=4, top_k=2, expert_ffn=FF))
    assert moe.act_gemm_input_bytes == pytest.approx(576)
    latent = decoder_block("l", S, mla, mlp=MlpDims(ffn=FF))
    assert latent.act_gemm_input_bytes == pytest.approx(384)
    assert latent.act_gemm_input_replicated_bytes == pytest.approx(128)
    s = Strategy(dp=1, tp=1)
    for layer, saved in ((dense, 160), (moe, 288), (latent, 192)):
        bf16 = activation_bytes(layer, s, 1, training=_tr("bf16", "megatron-core"))
        fp8 = activation_bytes(layer, s, 1, training=_tr("fp8", "megatron-core"))
        assert bf16 - fp8 == pytest.approx(saved), layer.name
