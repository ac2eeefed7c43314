"""Per kind of communication: its whole transfer time, the part hidden behind compute, the
exposed part and the interference slowdown the exposed part carries (QA round 36;
``PlanMetrics.communication``, ``StageMetrics.communication``, :mod:`autopar_opt.cost.comm_split`).

Oracles:

* with every overlap a spec can switch off switched off, nothing is hidden: hidden = 0,
  interference = 0 and exposed = total for every kind;
* with overlap on, ``exposed - interference = total - hidden`` per kind, each kind's exposed
  time is the breakdown's own term (``metrics.breakdown``), so their sum is the breakdown's
  communication; and the stage's whole DP (ZeRO) time with overlap on is the time the same
  stage exposes with the overlap switched off (the traffic is the same, only its window goes);
* by hand, one layer's gradient all-reduce over 2 ranks
  (:func:`autopar_opt.cost.comm.gradient_sync`): total = the all-reduce of the layer's
  gradient in its buckets (``collective(ctx, "all_reduce", 2, 1, bytes, messages)``),
  hidden = ``min(total, backward)`` (``exposed(ar, bwd_window) = max(0, ar - bwd)`` with
  ``grad_reduce_overlap``), interference = ``comm_interference`` x hidden.
"""

from __future__ import annotations

import textwrap

import pytest

from autopar_opt.cost.comm import collective, grad_bucket_messages, sp_regather_time, tp_comm_time
from autopar_opt.cost.comm_split import BREAKDOWN_TERM, KINDS
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.state import reduced_grad_bytes
from autopar_opt.cost.context import StageContext
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.plan import uniform_plan
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.spec.spec import load_spec
from support.cost_ideal import h100_node_ctx, ideal_params

MEGATRON = """
model: {{zoo: llama3-8b}}
cluster: {{nodes: 2, gpus_per_node: 8, device: H100-SXM-80GB}}
training: {{global_batch_size: 16, seq_len: 8192, runtime: megatron-core{extra}}}
plan: {{tp: 2, pp: 2, cp: 2, dp: 2, sequence_parallel: true, zero: 1, micro_batch_size: 1}}
"""
#: FSDP (ZeRO-3) over 4 ranks: one stage (gathers per micro-batch) or two (once per iteration)
FSDP = """
model: {{zoo: llama3-8b}}
cluster: {{nodes: 1, gpus_per_node: 8, device: H100-SXM-80GB}}
training: {{global_batch_size: 16, seq_len: 4096, runtime: torchtitan{extra}}}
plan: {{tp: 2, pp: {pp}, dp: {dp}, zero: 3, micro_batch_size: 1}}
"""
MEGATRON_OFF = (", runtime_options: {grad_reduce_overlap: false, param_gather_overlap: false, "
                "tp_comm_overlap: false, async_dgrad: false, sp_input_regather: false, "
                "cp_comm_type: all_gather}")
FSDP_OFF = ", runtime_options: {fsdp_prefetch: false}"
DP_OFF = ", runtime_options: {grad_reduce_overlap: false, param_gather_overlap: false}"


def _evaluate(tmp_path, text: str):
    """(metrics, plan) of the spec ``text``."""
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    spec = load_spec(path)
    return evaluate(spec.plan, spec.graph, spec.cluster, spec.training, spec.cost_params), spec.plan


def _metrics(tmp_path, text: str):
    return _evaluate(tmp_path, text)[0]


CASES_OFF = {"megatron": MEGATRON.format(extra=MEGATRON_OFF),
             "fsdp": FSDP.format(extra=FSDP_OFF, pp=1, dp=4),
             "fsdp_pp2": FSDP.format(extra=FSDP_OFF, pp=2, dp=2)}
CASES_ON = {"megatron": MEGATRON.format(extra=""),
            # half of every block's activations copied to the host and back (offload)
            "megatron_offload": MEGATRON.format(extra="").replace(
                "runtime: megatron-core", "activation_offload: 0.5, runtime: megatron-core"),
            "fsdp": FSDP.format(extra="", pp=1, dp=4),
            "fsdp_pp2": FSDP.format(extra="", pp=2, dp=2)}


@pytest.mark.parametrize("case", sorted(CASES_OFF))
def test_with_every_overlap_off_nothing_is_hidden(tmp_path, case):
    m = _metrics(tmp_path, CASES_OFF[case])
    assert set(m.communication) == set(KINDS)
    moved = 0
    for kind, got in m.communication.items():
        assert got["hidden_s"] == 0.0, kind
        assert got["interference_s"] == 0.0, kind
        assert got["exposed_s"] == pytest.approx(got["total_s"], rel=1e-12, abs=1e-15), kind
        moved += got["total_s"] > 0
    for st in m.stages:
        for kind, got in st.communication.items():
            assert got["hidden_s"] == 0.0 and got["interference_s"] == 0.0, (st.index, kind)
    assert moved >= 2          # TP and DP / ZeRO traffic is there to be hidden or not


def test_the_megatron_case_off_moves_every_kind_it_has(tmp_path):
    comm = _metrics(tmp_path, CASES_OFF["megatron"]).communication
    assert all(comm[k]["total_s"] > 0 for k in ("tp", "cp", "dp"))


@pytest.mark.parametrize("case", sorted(CASES_ON))
def test_with_overlap_on_the_parts_add_up_to_the_breakdown(tmp_path, case):
    m, plan = _evaluate(tmp_path, CASES_ON[case])
    comm, bd = m.communication, m.breakdown
    for kind, got in comm.items():
        assert got["exposed_s"] == bd[BREAKDOWN_TERM[kind]], kind          # the breakdown's own
        assert got["exposed_s"] - got["interference_s"] == pytest.approx(
            got["total_s"] - got["hidden_s"], rel=1e-9, abs=1e-15), kind
        assert -1e-15 <= got["hidden_s"] <= got["total_s"] * (1 + 1e-12) + 1e-15, kind
        assert got["interference_s"] >= 0.0, kind
    assert sum(comm[k]["exposed_s"] for k in KINDS) == pytest.approx(
        sum(bd[BREAKDOWN_TERM[k]] for k in KINDS), rel=1e-15)
    # the bottleneck stage's micro-batches, as the breakdown counts them
    b = max(m.stages, key=lambda st: st.time_s)
    for kind in ("tp", "zero"):
        assert comm[kind]["total_s"] == pytest.approx(
            plan.microbatches * b.communication[kind]["total_s"], rel=1e-12)
    hidden = {k for k in KINDS if comm[k]["hidden_s"] > 0}
    want = {"megatron": {"tp", "cp", "dp"}, "megatron_offload": {"tp", "cp", "dp", "offload"},
            "fsdp": {"zero"}, "fsdp_pp2": {"dp"}}[case]
    assert want <= hidden, (want, hidden)


@pytest.mark.parametrize("case,on,off,kind", [
    ("megatron", MEGATRON.format(extra=""), MEGATRON.format(extra=DP_OFF), "dp"),
    ("fsdp", FSDP.format(extra="", pp=1, dp=4), FSDP.format(extra=FSDP_OFF, pp=1, dp=4), "zero"),
    ("fsdp_pp2", FSDP.format(extra="", pp=2, dp=2), FSDP.format(extra=FSDP_OFF, pp=2, dp=2), "dp"),
])
def test_the_total_is_what_the_same_stage_exposes_without_overlap(tmp_path, case, on, off, kind):
    with_overlap, without = _metrics(tmp_path, on), _metrics(tmp_path, off)
    for st_on, st_off in zip(with_overlap.stages, without.stages):
        got = st_on.communication[kind]
        assert got["total_s"] == pytest.approx(st_off.communication[kind]["exposed_s"], rel=1e-12)
        assert got["total_s"] > 0 and got["hidden_s"] > 0


F = 1e12


@pytest.mark.parametrize("params", [10**6, 10**9])     # all-reduce shorter / longer than the backward
def test_one_layer_gradient_all_reduce_over_two_ranks_by_hand(params):
    """A one-layer model on 2 GPUs of an H100 node, dp 2, ZeRO-0, megatron-core with
    ``grad_reduce_overlap``, ideal efficiencies, ``comm_interference`` 0.2, one micro-batch of
    8 samples. :func:`autopar_opt.cost.comm.gradient_sync` all-reduces the layer's gradient
    (``reduced_grad_bytes`` per parameter, in :func:`~autopar_opt.cost.comm.grad_bucket_messages`
    buckets) over the 2 ranks, ``ar = collective(ctx, "all_reduce", 2, 1, bytes, buckets)``,
    exposed ``max(0, ar - bwd)`` behind the layer's backward ``bwd``: total ``ar``, hidden
    ``min(ar, bwd)``, interference ``0.2 min(ar, bwd)``; once per iteration, so the plan's
    figures are the layer's."""
    cl = make_cluster("t", 1, 2, "H100-SXM-80GB")
    training = Training(8, 1, "bf16", runtime=runtime_named("megatron-core", grad_reduce_overlap=True))
    params_ = ideal_params(0.2)
    ctx = StageContext(cl, training, params_, 2, 8)
    layer = Layer("l", kind=LayerKind.mlp, flops_fwd=F, flops_bwd=2 * F, params=params)
    s = Strategy(dp=2, tp=1)
    g_bytes = reduced_grad_bytes(training, 0)
    nbytes = params * g_bytes
    ar = collective(ctx, "all_reduce", 2, 1, nbytes,
                    grad_bucket_messages(nbytes, training.runtime.name, 2, g_bytes))
    bwd = compute_time(layer, s, ctx).bwd_s
    assert (ar < bwd) == (params == 10**6)
    hidden = min(ar, bwd)
    cost = layer_cost(layer, s, ctx)
    assert cost.dp_total_s == pytest.approx(ar, rel=1e-12)
    assert cost.dp_hidden_s == pytest.approx(hidden, rel=1e-12)
    assert cost.dp_interference_s == pytest.approx(0.2 * hidden, rel=1e-12)
    assert cost.dp_exposed_s == pytest.approx(max(0.0, ar - bwd) + 0.2 * hidden, rel=1e-12)
    for kind in ("tp", "cp", "zero", "ep", "offload"):
        assert getattr(cost, f"{kind}_total_s") == 0.0, kind
    m = evaluate(uniform_plan(["l"], 1, s, microbatches=1), LayerGraph.chain("m", [layer]), cl,
                 training, params_)
    dp = m.communication["dp"]
    assert dp["total_s"] == pytest.approx(ar, rel=1e-12)
    assert dp["hidden_s"] == pytest.approx(hidden, rel=1e-12)
    assert dp["interference_s"] == pytest.approx(0.2 * hidden, rel=1e-12)
    assert dp["exposed_s"] == m.breakdown["dp_comm_s"]


def test_user_buffer_sm_margin_is_interference_not_hidden_traffic():
    """Transformer Engine's user buffers (megatron-core, sequence parallelism): the GEMMs of
    the four ``pipeline`` pairs and two ``bulk`` pairs run ``16/(132-16)`` longer while the
    communication kernels hold 16 SMs (tests/unit/cost/test_cost_v2.py's 6 margins of the
    forward GEMM ``g`` of one pair); that slowdown is the whole interference (no NCCL kernel
    on the compute's SMs), and the traffic's total is the TP collectives and the re-gathers."""
    layer = Layer("b", kind=LayerKind.transformer_block, flops_fwd=F, flops_bwd=2 * F,
                  params=10**6, tp_comm_bytes=4e8, max_tp=8)
    s = Strategy(dp=1, tp=8, sp=True)
    ctx = h100_node_ctx("megatron-core", 0.2)
    cost = layer_cost(layer, s, ctx)
    g = F * 8 / 8 / 989e12 / 4
    assert cost.tp_interference_s == pytest.approx(6 * 16 / 116 * g, rel=1e-12)
    assert cost.tp_total_s == pytest.approx(tp_comm_time(layer, s, ctx) + sp_regather_time(layer, s, ctx),
                                            rel=1e-12)
    assert cost.tp_hidden_s > 0
    assert cost.tp_exposed_s - cost.tp_interference_s == pytest.approx(
        cost.tp_total_s - cost.tp_hidden_s, rel=1e-12)
