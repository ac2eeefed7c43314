"""An export launches what the plan was priced with (found by a new user, session 24).

* Megatron-LM leaves ``--overlap-grad-reduce``, ``--overlap-param-gather`` and
  ``--tp-comm-overlap`` off; the megatron-core runtime prices all three on, so the
  files write them (each under Megatron-LM's own preconditions, which its parser
  enforces in ``test_framework_validation``); Bridge's ``ddp`` section states the first two.
* Transformer Engine's user-buffer overlap needs sequence parallelism (Megatron-LM
  ``validate_args``): without it the cost model exposes the all-reduces.
* FP8 plans: torchtitan's float8 converters (0.3 module, 0.2 TOML) and compile; a
  DeepSpeed file says that its FP8 GEMMs come from Transformer Engine in the model code.
* The zoo's Llama models state RoPE's base (Llama 3: 500,000; Megatron-LM's default is
  10,000), so their exports write ``--rotary-base``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace

import pytest

from autopar_opt.cost.context import Compute
from autopar_opt.cost.overlap import tp_exposed
from autopar_opt.export import export_plan, plan_view
from autopar_opt.export.megatron import bridge_overrides, megatron_args
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.training import Recompute, Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import build_model, get_cluster
from support import paths
from support.export_cases import CLUSTER, GRAPH, QWEN, TRAINING, make_plan

CORE = runtime_named("megatron-core")
OVERLAPS = ("--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap")


def _args(plan, runtime=CORE, graph=GRAPH):
    return megatron_args(plan_view(plan, graph, CLUSTER, replace(TRAINING, runtime=runtime)))


def test_megatron_writes_the_overlaps_the_plan_was_priced_with():
    args = _args(make_plan([5, 3], dp=2, tp=2, sp=True, zero=1, rc=Recompute.full, ep=2))
    assert all(flag in args for flag in OVERLAPS)


@pytest.mark.parametrize("kw, absent", [
    (dict(dp=4, tp=1, zero=0), {"--overlap-param-gather", "--tp-comm-overlap"}),  # DDP, no TP
    (dict(dp=2, tp=2, sp=False, zero=1), {"--tp-comm-overlap"}),                 # no SP
    (dict(dp=1, tp=4, sp=True, zero=0, ep=1), {"--overlap-grad-reduce",           # nothing
                                                "--overlap-param-gather"}),       # to reduce
])
def test_each_overlap_only_where_megatron_runs_it(kw, absent):
    args = _args(make_plan([4, 4], **kw))
    assert not absent & set(args)
    assert set(OVERLAPS) - absent <= set(args)


def test_a_runtime_without_the_overlaps_writes_none_and_bridge_says_so():
    off = replace(CORE, grad_reduce_overlap=False, param_gather_overlap=False,
                  tp_comm_overlap=False)
    plan = make_plan([5, 3], dp=2, tp=2, sp=True, zero=1, ep=2)
    assert not set(OVERLAPS) & set(_args(plan, off))
    view = plan_view(plan, GRAPH, CLUSTER, replace(TRAINING, runtime=off))
    assert bridge_overrides(view)["ddp"]["overlap_grad_reduce"] is False
    on = plan_view(plan, GRAPH, CLUSTER, replace(TRAINING, runtime=CORE))
    assert bridge_overrides(on)["ddp"] | {"overlap_grad_reduce": True,
                                          "overlap_param_gather": True} == \
        bridge_overrides(on)["ddp"]


def test_user_buffer_overlap_hides_nothing_without_sequence_parallelism():
    """A block's TP collectives of 1 ms against 2 ms of forward GEMMs: with SP most
    of it hides (less the SMs the communication kernels hold), without SP the user buffers
    hide nothing; only Megatron-Core's asynchronous input-gradient all-reduces (runtime
    async_dgrad) hide behind the QKV and MLP-up weight-gradient GEMMs: each all-reduce is
    two of the 8 collective units (1 ms / 2 passes / 4 pairs = 0.125 ms), each GEMM a
    quarter of the 2 ms (no GEMM shares stated: an even split), so 2 x min(0.25, 0.5) ms."""
    layer = GRAPH.layers[1]
    comp = Compute(0.002, 0.004, 0.006, 0.0, 0.0, 0.0, gemm_fwd_s=0.002)

    class Ctx:                                 # only what tp_exposed reads
        training = replace(TRAINING, runtime=CORE)
        cluster = CLUSTER

    s = make_plan([4, 4], dp=2, tp=2, sp=True).stages[0].strategies[1]
    assert tp_exposed(layer, s, Ctx, comp, 1e-3) < 1e-3
    assert tp_exposed(layer, replace(s, sp=False), Ctx, comp, 1e-3) == pytest.approx(0.5e-3)

    class NoAsync(Ctx):
        training = replace(TRAINING, runtime=replace(CORE, async_dgrad=False))

    assert tp_exposed(layer, replace(s, sp=False), NoAsync, comp, 1e-3) == 1e-3


FP8 = replace(TRAINING, dtype="fp8", runtime=runtime_named("torchtitan"))


def test_torchtitan_fp8_module_converts_the_linears_and_compiles():
    plan = make_plan([8], dp=2, tp=2, sp=True, zero=3, ep=2, etp=1, graph=QWEN)
    out = export_plan(plan, QWEN, CLUSTER, FP8, "torchtitan")
    text = out.text
    assert ("converters=[Float8LinearConverter.Config(filter_fqns=[\"output\"], "
            "model_compile_enabled=True), Float8GroupedExpertsConverter.Config(") in text
    assert "config.compile.enable = True" in text
    assert 'mixed_precision_param = "bfloat16"' in text
    assert any(note.startswith("FP8: torchtitan's float8 converters") for note in out.notes)
    # the arguments are fields of torchtitan 0.3's converter configs
    quant = pytest.importorskip("torchtitan.components.quantization")
    quant.Float8LinearConverter.Config(filter_fqns=["output"], model_compile_enabled=True)
    quant.Float8GroupedExpertsConverter.Config(model_compile_enabled=True)


def test_torchtitan_fp8_toml_names_the_registered_converters():
    qwen = build_hf_graph(json.loads((paths.REPO / "model_zoo" / "hf" / "qwen3-30b-a3b.json")
                                     .read_text()), 128, name="qwen3-30b-a3b")
    plan = make_plan([len(qwen.layers)], dp=2, tp=2, sp=True, zero=3, ep=2, etp=1, graph=qwen)
    doc = tomllib.loads(export_plan(plan, qwen, CLUSTER, FP8, "torchtitan", version="0.2").text)
    assert doc["model"]["converters"] == ["quantize.linear.float8", "quantize.grouped_mm.float8"]
    assert doc["quantize"]["linear"]["float8"] == {"recipe_name": "tensorwise",
                                                   "filter_fqns": ["output"]}
    assert doc["quantize"]["grouped_mm"]["float8"] == {"fqns": ["experts"]}
    assert doc["compile"] == {"enable": True}


def test_deepspeed_fp8_says_where_its_fp8_comes_from():
    plan = make_plan([4, 4], dp=4, tp=1, zero=1, rc=Recompute.full, ep=2)
    out = export_plan(plan, GRAPH, CLUSTER,
                      replace(TRAINING, dtype="fp8", runtime=runtime_named("deepspeed")), "deepspeed")
    assert '"bf16"' in out.text
    assert any("te.fp8_autocast" in note for note in out.notes)


def test_zoo_llama3_exports_its_rope_base():
    graph = build_model("llama3-8b")
    cluster = get_cluster("2x8-h100")
    plan = make_plan([len(graph.layers)], dp=16, tp=1, zero=1, graph=graph)
    args = megatron_args(plan_view(plan, graph, cluster,
                                   Training(global_batch_size=64, seq_len=8192)))
    assert args[args.index("--rotary-base") + 1] == "500000"
