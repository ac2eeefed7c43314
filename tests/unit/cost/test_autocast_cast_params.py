"""Which parameters torch.autocast casts: none of a lookup embedding's, the tied
matrix on the output layer.

Rule (``autopar_opt/ir/training.py`` ``autocast_casts_weights``, ``autopar_opt/cost/state.py``
``autocast_cast_params``): autocast casts the inputs of the ops on its
lower-precision list (PyTorch ``docs/source/amp.rst``, "Autocast Op Reference":
``matmul``, ``mm``, ``linear``, ``conv*``, ...). ``F.embedding`` is on no list, so
``nn.Embedding`` runs in fp32 and saves only its int64 indices
(``benchmarks/autocast/probe_embedding.py``, output in
``benchmarks/autocast/RESULTS.md``); ``layer_norm`` is on the float32 list, so a
norm's fp32 weight is used as is. A tied word-embedding matrix is cast by the
output layer's GEMM (``logits = h @ E^T``), at ``pp = 1`` (reading the
embedding's matrix) as at ``pp > 1`` (its own copy). The casts are 2 B per local
parameter: a standing cache below ZeRO-3 (``weight_parts``), per in-flight
micro-batch under ZeRO-3 (``autocast_saved_cast_bytes``, in ``act_bytes``).

Oracles: bytes derived by hand from the layer sizes and that rule; brute force
over every plan of a tied ``pp = 1`` instance where booking the tied cast on the
embedding (the former rule) picks a plan that does not fit = DP = MILP =
``evaluate``.
"""

from __future__ import annotations

import pytest

from support.bruteforce import brute_force
from autopar_opt.cost import compute as cost_compute
from autopar_opt.cost import memory as cost_memory
from autopar_opt.cost import moe, state
from autopar_opt.cost.context import StageContext, user_reserve_for
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables, stage_memory
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations import build_formulation
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import GIB, MEM_EPS
from autopar_opt.model_zoo.transformer import decoder_lm, embedding, lm_head
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.solvers.dp import solve_dp
from autopar_opt.solvers.dp.common import least_memory
from autopar_opt.solvers.registry import get_backend
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.core.result import Termination
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

FSDP = runtime_named("pytorch-fsdp")
# seq 128, hidden 64, vocab 1000: the word embedding is V·h = 64,000 parameters;
# the output layer adds its final norm, 2h = 128 (model_zoo.transformer.lm_head).
SEQ, H, V = 128, 64, 1000


def _amp(**kw) -> Training:
    return Training(global_batch_size=8, seq_len=SEQ, dtype="bf16", runtime=FSDP, autocast=True, **kw)


def _plain() -> Training:
    return Training(global_batch_size=8, seq_len=SEQ, dtype="bf16", runtime=FSDP)


def _cost(layer: Layer, s: Strategy, training: Training, pp: int = 1):
    cluster = small_cluster(1, 4)
    tie = cluster.intra_node if pp > 1 else None
    return layer_cost(layer, s, StageContext(cluster, training, default_params(), 4, 8, tie_tier=tie))


def _pair(tied: bool) -> tuple[Layer, Layer]:
    g = LayerGraph.chain("pair", [embedding("embed", SEQ, H, V), lm_head("head", SEQ, H, V, tied=tied)])
    return g.layers[0], g.layers[1]


Z3 = Strategy(2, 2, zero=3)      # dp 2 x tp 2 on the stage's 4 GPUs
Z0 = Strategy(2, 2, zero=0)


def _casts(layer: Layer, s: Strategy, pp: int = 1) -> float:
    """act_bytes with autocast less without: the per-micro-batch casts alone
    (autocast changes no activation, activation_bytes reads no parameter)."""
    return _cost(layer, s, _amp(), pp).act_bytes - _cost(layer, s, _plain(), pp).act_bytes


def test_untied_model_casts_the_head_not_the_embedding() -> None:
    """Untied: embedding 64,000 parameters, head 64,000 + 128 = 64,128.
    tp = 2 splits both (vocab-parallel). ZeRO-3 per micro-batch: embedding
    0 B (a lookup); head 2 B x 64,128 / 2 = 64,128 B. ZeRO-0 standing cache in
    the weights (fp32 weights 4 B per local parameter, the cache 2 B where cast):
    embedding 4 x 32,000 = 128,000 B; head (4 + 2) x 32,064 = 192,384 B."""
    emb, head = _pair(tied=False)
    assert (emb.params, head.params) == (64_000, 64_128)
    assert _casts(emb, Z3) == 0.0
    assert _casts(head, Z3) == pytest.approx(64_128, rel=1e-12)
    assert state.weight_parts(emb, Z0, _amp())[0] == pytest.approx(128_000, rel=1e-12)
    assert state.weight_parts(head, Z0, _amp())[0] == pytest.approx(192_384, rel=1e-12)


def test_tied_model_one_stage_casts_the_tied_matrix_on_the_head() -> None:
    """Tied, pp = 1: the embedding owns the 64,000-parameter matrix, the head
    holds 128 (its norm) and reads the matrix in its GEMM. ZeRO-3 per
    micro-batch: embedding 0 B; head 2 B x (128 + 64,000) / 2 = 64,128 B.
    ZeRO-0 weights: embedding 4 x 32,000 = 128,000 B (no cache); head
    4 x 64 + 2 x 32,064 = 64,384 B (its own fp32 norm, the cast of both)."""
    emb, head = _pair(tied=True)
    assert (emb.params, head.params, head.tied_params, emb.tied_owner) == (64_000, 128, 64_000, True)
    assert _casts(emb, Z3) == 0.0
    assert _casts(head, Z3) == pytest.approx(64_128, rel=1e-12)
    assert state.weight_parts(emb, Z0, _amp())[0] == pytest.approx(128_000, rel=1e-12)
    assert state.weight_parts(head, Z0, _amp())[0] == pytest.approx(64_384, rel=1e-12)
    assert _cost(head, Z0, _amp()).weight_bytes == pytest.approx(sum(state.weight_parts(head, Z0, _amp())))


def test_tied_model_two_stages_casts_the_heads_copy() -> None:
    """Tied, pp = 2: the head keeps its own copy, 128 + 64,000 parameters.
    ZeRO-3 per micro-batch: head 2 B x 64,128 / 2 = 64,128 B (as at pp = 1: the
    same GEMM casts the same matrix), embedding 0 B. ZeRO-0 weights: head
    (4 + 2) x 32,064 = 192,384 B; embedding 128,000 B."""
    emb, head = _pair(tied=True)
    assert _casts(head, Z3, pp=2) == pytest.approx(64_128, rel=1e-12)
    assert _casts(emb, Z3, pp=2) == 0.0
    assert state.weight_parts(head, Z0, _amp(), tie_active=True)[0] == pytest.approx(192_384, rel=1e-12)
    assert _cost(head, Z0, _amp(), pp=2).weight_bytes == pytest.approx(
        sum(state.weight_parts(head, Z0, _amp(), tie_active=True)), rel=1e-12)
    assert state.weight_parts(emb, Z0, _amp(), tie_active=True)[0] == pytest.approx(128_000, rel=1e-12)


def test_patch_embedding_and_norm_follow_the_op_lists() -> None:
    """A convolutional patch embedding (kind embedding with FLOPs) is a conv2d,
    on the lower-precision list: its 1,000 parameters are cast, 2 B x 1,000 /
    tp 1 = 2,000 B per micro-batch at dp 4. A norm layer (layer_norm on the
    float32 list) casts nothing."""
    patch = Layer("patch", LayerKind.embedding, flops_fwd=1e6, flops_bwd=2e6, params=1000,
                  act_bytes=1e3, output_bytes=1e3)
    norm = Layer("ln", LayerKind.norm, flops_fwd=1e3, flops_bwd=2e3, params=1000,
                 act_bytes=1e3, output_bytes=1e3)
    s = Strategy(4, 1, zero=3)
    assert _casts(patch, s) == pytest.approx(2000, rel=1e-12)
    assert _casts(norm, s) == 0.0
    assert state.autocast_cast_params(norm, s) == 0.0


def test_recomputing_the_embedding_does_not_move_the_tied_cast() -> None:
    """Tied, pp = 1, ZeRO-3: full recomputation of the embedding changes its
    stored bytes by its activations only (autocast or not), and adds no cast
    to its working set; the head's cast stays with the head."""
    emb, head = _pair(tied=True)
    full = Strategy(2, 2, zero=3, recompute=Recompute.full)
    for tr in (_amp(), _plain()):
        drop = _cost(emb, Z3, tr).act_bytes - _cost(emb, full, tr).act_bytes
        assert drop == pytest.approx(activation_bytes(emb, Z3, 8, training=tr)
                                     - activation_bytes(emb, full, 8, training=tr), rel=1e-12)
    grown = _cost(emb, full, _amp()).working_bytes - _cost(emb, Z3, _amp()).working_bytes
    assert grown == pytest.approx(activation_bytes(emb, Z3, 8, training=_amp())
                                  - activation_bytes(emb, full, 8, training=_amp()), rel=1e-12)
    assert _casts(head, Z3) == pytest.approx(64_128, rel=1e-12)


SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False,), tp_degrees=(1, 2))


def _tables(graph, cluster, training):
    return build_cost_tables(graph, cluster, training, SPACE, default_params(), 1, 4,
                             Schedule.one_f_one_b)


def _former_rule(layer: Layer, s: Strategy) -> float:
    """The rule before this fix: every declared parameter cast, none borrowed."""
    return sum(moe.split_params(layer, s))


def test_solvers_agree_where_the_tied_cast_decides(monkeypatch) -> None:
    """Tied decoder (1 block, h 512, V 256,000), 2 GPUs, pp = 1, capacity 1.06 x
    the least memory of any plan. Booking the tied matrix's cast on the
    embedding (the former rule) makes the solver pick a plan that, with the
    cast on the head, does not fit (0.122 GiB more: head at tp 1 casts
    2 B x 256,000 x 512, the embedding at tp 2 no longer 2 B x that / 2).
    Brute force = DP = MILP = evaluate on the fixed tables."""
    graph = decoder_lm("tiny", 1, 512, 512, 4, 1024, 256_000)
    cluster = small_cluster(1, 2)
    reserve = user_reserve_for(least_memory(_tables(graph, cluster, _amp())) / GIB * 1.06,
                               cluster.device.hbm_gib, default_params())
    training = _amp(memory_reserve_gib=reserve)
    tables = _tables(graph, cluster, training)
    lim = tables.capacity_bytes + MEM_EPS * GIB
    with monkeypatch.context() as m:
        m.setattr(state, "autocast_cast_params", _former_rule)
        m.setattr(cost_memory, "autocast_cast_params", _former_rule)
        m.setattr(cost_compute, "autocast_cast_params", _former_rule)   # the casts' time too
        former = _tables(graph, cluster, training)
        picked = solve_dp(former)
    assert picked.termination is Termination.optimal
    a = picked.solution
    assert max(stage_memory(tables, a.stage, a.choice)) > lim     # the former pick does not fit
    ref = brute_force(graph, cluster, training, SPACE, 1, 4)
    assert ref is not None
    dp = solve_dp(tables)
    assert dp.termination is Termination.optimal
    assert dp.primal == pytest.approx(ref[0], rel=1e-12)
    assert dp.primal > picked.primal * (1 + 1e-9)
    milp = build_formulation(tables, "milp")
    r = get_backend("highs").solve_model(milp.matrix(), milp.problem_class, time_limit_s=60, rel_gap=1e-9)
    assert r.termination is Termination.optimal
    assert r.primal == pytest.approx(ref[0], rel=1e-6)
    for asg in (dp.solution, tables.assignment_of(milp.decode())):
        assert max(stage_memory(tables, asg.stage, asg.choice)) <= lim
        metrics = evaluate(tables.plan_of(asg), graph, cluster, training)
        assert metrics.feasible
        assert metrics.iteration_time_s == pytest.approx(ref[0], rel=1e-6)
        st = metrics.stages[0]
        assert st.peak_memory_gib * GIB == pytest.approx(
            max(stage_memory(tables, asg.stage, asg.choice)) + (st.reserve_gib * GIB), rel=1e-9)


def test_full_recomputation_is_not_offered_where_it_drops_no_cast() -> None:
    """Under ZeRO-3 + autocast, full recomputation is kept on a layer whose
    activations are no larger than its input only when it drops casts: a
    linear layer (cast) keeps it, a norm layer (not cast) does not."""
    from autopar_opt.ir.strategies import enumerate_strategies
    space = SearchSpace(zero_levels=(3,), recompute=(Recompute.none, Recompute.full),
                        tp_degrees=(1,), sequence_parallel=(False,))
    kw = dict(flops_fwd=1e6, flops_bwd=2e6, params=1000, act_bytes=1e3, input_bytes=1e3,
              output_bytes=1e3)
    modes = {kind: {s.recompute for s in enumerate_strategies(Layer("x", kind, **kw), 2, 8, space, 8,
                                                              autocast=True)}
             for kind in (LayerKind.linear, LayerKind.norm)}
    assert modes[LayerKind.linear] == {Recompute.none, Recompute.full}
    assert modes[LayerKind.norm] == {Recompute.none}
