"""Tied input/output embeddings on pipelined models (issue 10 point 5).

With ``pp > 1`` the last stage keeps its own copy of the word-embedding
matrix for the output layer, with its gradient and optimizer state, and the
two copies' gradients are all-reduced between the first and the last stage
once per iteration (Megatron-Core ``setup_embeddings_and_output_layer`` and
``_allreduce_word_embedding_grads``; DeepSpeed ``TiedLayerSpec``).

Oracles: bytes and times derived by hand above each test; the brute force,
the DP and the MILP against ``evaluate`` on one tied instance.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations import build_formulation
from autopar_opt.ir.graph import Layer, LayerGraph
from autopar_opt.ir.hardware import GIB
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.solvers.dp import solve_dp
from autopar_opt.solvers.registry import get_backend
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Training
from support.bruteforce import brute_force
from support.mip_instances import SPACE, tables_for
from model_zoo.transformer import decoder_lm
from support import paths

RUNS = paths.DATA / "published_runs.yaml"

#: embed 100x16 = 1600 params (no learned positions); block: QKV 16x48 + proj
#: 16x16 + MLP 2x16x64 + 2 LayerNorms (4x16) + biases (48+16+64+16) = 3280;
#: head: final LayerNorm 2x16 = 32, tied to the 1600 of the embedding.
EMBED, BLOCK, HEAD, TIED = 1600, 3280, 32, 1600
#: megatron-core in bf16: 2-byte weights, fp32 main_grad (4), Adam 12 = 18 B.
PER_PARAM = 18
S1 = Strategy(1, 1, 1, False, 0, Recompute.none)


def tiny() -> LayerGraph:
    return decoder_lm("tiny", 2, 8, 16, 2, 64, 100, tied=True)


def test_tiny_model_parameters_by_hand():
    g = tiny()
    assert [layer.params for layer in g.layers] == [EMBED, BLOCK, BLOCK, HEAD]
    head, embed = g.layers[-1], g.layers[0]
    assert (head.tied_params, head.tied_to, head.holds_tied_copy) == (TIED, "embed", True)
    assert (embed.tied_params, embed.tied_to, embed.tied_owner) == (TIED, "head", True)
    assert g.total_params() == EMBED + 2 * BLOCK + HEAD      # the model's count: one matrix


def test_weight_bytes_pp1_no_copy_pp2_copy_on_last_stage_only():
    """pp=1 (1 GPU): one stage, (1600 + 2*3280 + 32) * 18 = 147,456 B.
    pp=2 (2 GPUs): stage 0 [embed, block0] = (1600 + 3280) * 18 = 87,840 B;
    stage 1 [block1, head] = (3280 + 32 + 1600) * 18 = 88,416 B: the copy is
    on the last stage only, with its 2 + 4 + 12 bytes per parameter."""
    g, names = tiny(), [layer.name for layer in tiny().layers]
    training = Training(4, 8)
    one = evaluate(uniform_plan(names, 1, S1, 1), g, small_cluster(1, 1), training)
    assert one.stages[0].weight_gib * GIB == pytest.approx(147_456, rel=1e-12)
    two = evaluate(uniform_plan(names, 2, S1, 1), g, small_cluster(1, 2), training)
    assert [st.layers for st in two.stages] == [["embed", "block000"], ["block001", "head"]]
    assert two.stages[0].weight_gib * GIB == pytest.approx(87_840, rel=1e-12)
    assert two.stages[1].weight_gib * GIB == pytest.approx(88_416, rel=1e-12)
    last = two.stages[1]
    n = BLOCK + HEAD + TIED
    assert (last.weights_gib * GIB, last.grads_gib * GIB, last.optimizer_gib * GIB) == \
        pytest.approx((2 * n, 4 * n, 12 * n), rel=1e-12)


def test_copy_is_sharded_like_the_layer():
    """ZeRO-1 over dp=2 on a 4-GPU pp=2 cluster: the head's 1632 parameters
    at 2 + 4 + 12/2 = 12 bytes = 19,584 B; at pp=1 its 32 at 12 = 384 B."""
    g = tiny()
    z1 = Strategy(2, 1, 1, False, 1, Recompute.none)
    params = default_params()
    base = StageContext(small_cluster(1, 4), Training(4, 8), params, 2, 2)
    tied = StageContext(small_cluster(1, 4), Training(4, 8), params, 2, 2,
                        tie_tier=small_cluster(1, 4).intra_node)
    assert layer_cost(g.layers[-1], z1, base).weight_bytes == pytest.approx(384)
    assert layer_cost(g.layers[-1], z1, tied).weight_bytes == pytest.approx(19_584)
    # the owner's bytes do not change: its parameters were always counted
    assert layer_cost(g.layers[0], z1, tied).weight_bytes == pytest.approx(1600 * 12)


@pytest.mark.parametrize("nodes,gpus,tp", [(2, 1, 1), (1, 2, 1), (2, 2, 2)])
def test_tied_gradient_allreduce_time_by_hand(nodes, gpus, tp):
    """All-reduce over the 2 ranks of the tie, ``m`` = 1600/tp parameters x 4 bytes
    (Megatron's fp32 main_grad), priced by NCCL's model (NVIDIA/nccl tuning.cc): a message
    this small takes the ring with the LL protocol. On one node: baseLat 6.6 µs + 2 steps
    x hwLat[NVLINK][RING][LL] 0.6 µs, at min(llMaxBw Ampere 87.7, 0.5 x 300 x intra
    efficiency) GB/s. On two nodes (one rank each): 6.6 + 2 x hwLat[NET][TREE][LL] 5.0 µs,
    at min(llMaxBw across 2 nodes 39, 0.5 x 25 x inter efficiency) GB/s. The ring's
    algorithm bandwidth is the bus bandwidth x n / nsteps = x 1. With dp=1 the blocks reduce
    nothing, so each end's exposed DP time is exactly the tie."""
    cluster = small_cluster(nodes, gpus)
    params = default_params()
    m = TIED / tp * 4
    if nodes == 2:
        lat, bw = 6.6 + 2 * 5.0, min(39.0, 0.5 * 25.0 * params.inter_comm_efficiency)
    else:
        lat, bw = 6.6 + 2 * 0.6, min(87.7, 0.5 * 300.0 * params.comm_efficiency)
    expected = lat * 1e-6 + m / (bw * 1e9)
    g = tiny()
    names = [layer.name for layer in g.layers]
    s = Strategy(1, tp, 1, False, 0, Recompute.none)
    m = evaluate(uniform_plan(names, 2, s, 1), g, cluster, Training(4, 8), params)
    assert m.stages[0].dp_s == pytest.approx(expected, rel=1e-12)
    assert m.stages[1].dp_s == pytest.approx(expected, rel=1e-12)
    assert m.breakdown["dp_comm_s"] == pytest.approx(expected, rel=1e-12)
    single = evaluate(uniform_plan(names, 1, s, 1), g, small_cluster(1, tp), Training(4, 8), params)
    assert single.stages[0].dp_s == 0.0


def _tied_instance():
    graph = decoder_lm("tied", 2, 128, 256, 4, 1024, 32000, tied=True)
    return graph, small_cluster(1, 4), Training(16, 128)


def test_dp_equals_milp_equals_evaluate_on_a_tied_pp2_instance():
    """pp=2, c=4 on 4 GPUs: brute force (pure cost functions), the DP and the
    HiGHS MILP reach the same optimum, and evaluate(plan) prices each decoded
    plan at the solver's objective; the tables carry the copy (the head's
    entries at pp=2 exceed pp=1's by exactly the copy's 18 B/param share)."""
    graph, cluster, training = _tied_instance()
    tables = tables_for(graph, cluster, training, SPACE, 2, 4)
    ref = brute_force(graph, cluster, training, SPACE, 2, 4)
    assert ref is not None
    dp = solve_dp(tables)
    f = build_formulation(tables, "milp")
    res = get_backend("highs").solve_model(f.matrix(), f.problem_class, time_limit_s=60,
                                           rel_gap=1e-9)
    assert dp.primal == pytest.approx(ref[0], rel=1e-6)
    assert res.primal == pytest.approx(ref[0], rel=1e-6)
    for plan in (tables.plan_of(dp.solution), f.decode()):
        m = evaluate(plan, graph, cluster, training)
        assert m.feasible
        assert m.iteration_time_s == pytest.approx(ref[0], rel=1e-6)
    head = len(graph.layers) - 1
    for s, w in zip(tables.strategies[head], tables.weight_bytes[head]):
        dw, dg, do = s.zero_divisors(s.dp * s.cp)
        copy_bytes = TIED_BIG / s.tp * (2 / dw + 4 / dg + 12 / do)
        own = graph.layers[head].params / s.tp * (2 / dw + 4 / dg + 12 / do)
        assert w == pytest.approx(own + copy_bytes, rel=1e-12)


TIED_BIG = 32000 * 256


def test_a_tie_must_join_the_first_and_last_layer():
    a, b, c = (Layer(n, params=10) for n in "abc")
    with pytest.raises(ValueError, match="a tie must join the last layer"):
        LayerGraph.chain("m", [a, Layer("b", params=10, tied_params=10, tied_to="a"), c])
    with pytest.raises(ValueError, match="names no layer"):
        LayerGraph.chain("m", [a, b, Layer("c", tied_params=10, tied_to="x")])
    layers = [a, b, Layer("c", tied_params=10, tied_to="a")]
    LayerGraph.chain("m", layers)
    assert not layers[0].tied_owner          # the caller's list is left as given


def _record(rid: str) -> dict:
    runs = yaml.safe_load(RUNS.read_text())
    runs = runs if isinstance(runs, list) else next(v for v in runs.values() if isinstance(v, list))
    return copy.deepcopy(next(r for r in runs if r["id"] == rid))


@pytest.mark.parametrize("key,value,tied", [
    ("tie_word_embeddings", False, False), ("share_embeddings_and_output_weights", False, False),
    ("untie_embeddings_and_output_weights", True, False), ("tie_word_embeddings", True, True)])
def test_dense_records_read_tying_from_stated_fields(key, value, tied):
    """The dense builder reads the same fields as the MoE one: a stated field
    wins over the arch text. The old dense reader looked only for "untied" in
    the arch text, so an explicit ``tie_word_embeddings: false`` under an arch
    saying "tied embeddings" was modelled tied (the head without its V·h)."""
    rec = _record("colossallightning_gpt2xl_ddp_amp_4xa100")
    assert "tied embeddings" in rec["model"]["arch"]
    rec["model"][key] = value
    head = build_run(read_record(rec)).graph.layers[-1]
    v, h = rec["model"]["vocab_size"], rec["model"]["hidden_size"]
    assert head.params == (2 * h if tied else v * h + 2 * h)
    assert head.tied_params == (v * h if tied else 0)
