"""A plain PyTorch loss (runtime ``eager_cross_entropy``): the log-probabilities
the output layer keeps and its backward transient (cost/layer_cost.py
``kept_logit_bytes``, ``eager_loss_bytes``, part of ``working_set_bytes``).

Oracles: bytes written out from the layer sizes. ``F.cross_entropy`` =
``log_softmax`` + ``nll_loss``: ``log_softmax`` saves its result (``e`` bytes per
logit: 4 when the loss computes in fp32 under ``torch.autocast``, after
torchtitan's ``.float()`` or in fp32 training, else 2); its backward holds that
result, ``nll_loss_backward``'s gradient and ``_log_softmax_backward_data``'s
output together: ``2·e`` bytes per logit on top of the ``e`` kept. Then the
exactness oracle: DP = MILP = MIQP = block MILP = brute force = ``evaluate`` on
instances where the term decides which plans fit.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from support.two_stage_lm import evaluate_on_off
from support.solver_agreement import assert_all_reach, assignments, memory_limit, solve_every_way
from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.memory import activation_bytes, eager_loss_bytes, kept_logit_bytes, loss_grad_cast_bytes, working_set_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables, stage_memory
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import decoder_lm, lm_head
from autopar_opt.ir.runtime import RUNTIMES, runtime_named
from autopar_opt.solvers.dp.common import iteration_time, least_memory
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

S, H, V = 8, 16, 64          # 512 logits per sample


def _tr(runtime: str = "pytorch-ddp", dtype: str = "bf16", autocast: bool = False,
        **caps: bool) -> Training:
    return Training(global_batch_size=8, seq_len=S, dtype=dtype, autocast=autocast,
                    runtime=runtime_named(runtime, **caps))


def test_hand_derived_bytes_of_a_tiny_output_layer() -> None:
    """s = 8, V = 64: 512 logits per sample. Micro-batch of 4 samples over dp = 2:
    2 samples per GPU; tp = 2 splits the vocabulary: 512 logits on the GPU.
    16-bit loss (bf16 model, no autocast): e = 2, kept 2 x 512 = 1024 bytes,
    transient 2 x 2 x 512 = 2048. fp32 loss (autocast, torchtitan's upcast, fp32
    training): e = 4, kept 2048, transient 4096. cp = 2 halves both again."""
    head = lm_head("head", S, H, V)
    s = Strategy(dp=2, tp=2)
    # the final norm's 16-bit input and output (Korthikanti et al. 2022, Sec. 4.3: 2·s·h
    # each) x 2 samples, replicated over tp
    inp = 4 * S * H * 2
    sixteen = _tr()
    assert sixteen.runtime.eager_cross_entropy and kept_logit_bytes(sixteen) == 2.0
    assert eager_loss_bytes(head, s, 4, sixteen) == pytest.approx(2048)
    assert activation_bytes(head, s, 4, training=sixteen) - inp == pytest.approx(1024)
    assert working_set_bytes(head, s, 4, sixteen) == pytest.approx(2048)
    assert eager_loss_bytes(head, Strategy(dp=2, tp=2, cp=2), 4, sixteen) == pytest.approx(1024)
    for fp32_loss in (_tr(autocast=True), _tr(autocast=True, dtype="fp16"), _tr("torchtitan"),
                      _tr(dtype="fp32")):
        assert kept_logit_bytes(fp32_loss) == 4.0
        assert eager_loss_bytes(head, s, 4, fp32_loss) == pytest.approx(4096)
        assert working_set_bytes(head, s, 4, fp32_loss) == pytest.approx(4096)
    # the output layer of an FP8 run stays 16-bit: e = 2
    assert eager_loss_bytes(head, s, 4, _tr(dtype="fp8")) == pytest.approx(2048)
    # 3·e at the peak: the kept log-probabilities and the transient together
    ttn = _tr("torchtitan")
    peak = activation_bytes(head, s, 4, training=ttn) - inp + working_set_bytes(head, s, 4, ttn)
    assert peak == pytest.approx(3 * 4 * 512)


def test_no_term_where_the_loss_is_not_plain_pytorch() -> None:
    """Megatron's vocabulary-parallel loss keeps 4 bytes and casts its gradient (2 more,
    ``loss_grad_cast``); a fused kernel keeps 2 and adds nothing; the eager loss
    switches the Megatron cast off (one loss per run); other layers: 0."""
    head = lm_head("head", S, H, V)
    s = Strategy(dp=2, tp=2)
    mc = _tr("megatron-core")
    assert not mc.runtime.eager_cross_entropy and kept_logit_bytes(mc) == 4.0
    assert eager_loss_bytes(head, s, 4, mc) == 0.0
    assert loss_grad_cast_bytes(head, s, 4, mc) == pytest.approx(1024)
    fused = _tr(fused_cross_entropy=True)
    assert kept_logit_bytes(fused) == 2.0 and eager_loss_bytes(head, s, 4, fused) == 0.0
    assert working_set_bytes(head, s, 4, fused) == 0.0
    both = _tr("megatron-core", eager_cross_entropy=True)
    assert loss_grad_cast_bytes(head, s, 4, both) == 0.0
    assert eager_loss_bytes(head, s, 4, both) == pytest.approx(2048)
    for name in ("megatron-lm", "megatron-core", "megatron-bridge", "deepspeed", "pytorch-fsdp"):
        assert not RUNTIMES[name].eager_cross_entropy, name
    block = Layer("b", LayerKind.transformer_block, params=10, act_bytes=4096.0,
                  act_replicated_bytes=1024.0, input_bytes=64.0)
    assert eager_loss_bytes(block, s, 4, _tr()) == 0.0


def test_evaluate_holds_it_in_the_last_stage() -> None:
    """pp = 2, dp = 2, tp = 1, no recompute, ZeRO-0, bf16 without autocast (e = 2):
    batch 8 in 2 micro-batches of 4, 2 samples per GPU, s = 256, V = 1000.
    The last stage's working set is 2·2 B x 256 x 1000 x 2 = 2,048,000 bytes; against
    the same runtime without the eager loss (4-byte logits kept, no transient) its
    modelled bytes differ by 2,048,000 - 2 B x 256 x 1000 x 2 = 1,024,000 (one
    in-flight micro-batch on the last stage); the first stage is unchanged."""
    on = Training(global_batch_size=8, seq_len=256, runtime=RUNTIMES["pytorch-ddp"])
    off = replace(on, runtime=replace(on.runtime, eager_cross_entropy=False))
    m_on, m_off, modelled = evaluate_on_off(on, off)
    assert m_on.stages[1].inflight_microbatches == 1
    assert m_on.stages[1].working_gib == pytest.approx(2_048_000 / GIB, rel=1e-12)
    assert m_off.stages[1].working_gib == 0.0
    assert modelled[1] - modelled[3] == pytest.approx(1_024_000 / GIB, rel=1e-9)
    assert modelled[0] == pytest.approx(modelled[2], rel=1e-12)


SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False,), tp_degrees=(1, 2))


def _tables(training: Training, graph, cluster, pp: int):
    return build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, 2,
                             Schedule.one_f_one_b, prune_dominated=False)


@pytest.mark.parametrize("blocks,pp,factor", [(2, 1, 1.05), (2, 2, 1.02), (3, 2, 1.02)])
def test_solvers_agree_where_the_eager_loss_decides_what_fits(blocks, pp, factor) -> None:
    """Capacity just above the least memory of the eager-loss instance: some plan that
    fits without the term (same runtime, ``eager_cross_entropy`` off: 4-byte logits,
    no transient) does not fit with it and is faster than the optimum, so the term
    binds; every solver reaches the enumerated optimum, brute force over plans agrees,
    and ``evaluate`` prices each answer at its objective."""
    graph = decoder_lm("tiny", blocks, 256, 256, 4, 1024, 8000)
    cluster = small_cluster(1, 2 * pp)
    base = Training(global_batch_size=8, seq_len=256, runtime=RUNTIMES["pytorch-ddp"])
    reserve = user_reserve_for(least_memory(_tables(base, graph, cluster, pp)) / GIB * factor,
                               cluster.device.hbm_gib, default_params())
    training = replace(base, memory_reserve_gib=reserve)
    off = replace(training, runtime=replace(training.runtime, eager_cross_entropy=False))
    tables, t_off = _tables(training, graph, cluster, pp), _tables(off, graph, cluster, pp)
    head = len(graph.layers) - 1
    assert graph.layers[head].kind is LayerKind.lm_head
    assert any(float(x) > 0 for x in tables.working_bytes[head])
    lim = memory_limit(tables)
    plans = []
    for stage, ks, asg in assignments(tables):
        fits = max(stage_memory(tables, stage, ks)) <= lim
        fits_off = max(stage_memory(t_off, stage, ks)) <= lim
        plans.append((iteration_time(tables, asg), fits, fits_off))
    best = min(p[0] for p in plans if p[1])
    assert any(p[2] and not p[1] and p[0] < best * (1 - 1e-9) for p in plans)
    ref = brute_force(graph, cluster, training, SPACE, pp, 2)
    assert ref is not None and ref[0] == pytest.approx(best, rel=1e-9)
    assert_all_reach(solve_every_way(tables, pp), best, tables, graph, cluster, training)
