"""Megatron's partial recomputation (QA round 13): ``--recompute-granularity full
--recompute-method block --recompute-num-layers N`` recomputes the first N layers of every
model chunk and none of the others (Megatron-Core 0.17.1 ``transformer_block.py``
``_checkpointed_forward``), which the per-layer cost model prices exactly; with
``--recompute-method uniform`` and ``N > 1`` it checkpoints groups of N layers at their
input, which it does not (one input kept per group, a whole group's activations held while
it recomputes).

Oracles: Megatron-Core's own ``TransformerConfig`` (and Megatron-LM's ``validate_args``)
accept the exported flags; the import of the exported flags gives the plan back; the
group sizes of Megatron's ``uniform`` loop (``range(0, layers, N)``) counted by hand; the
words of the plan's recomputation derived by hand from the flags."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.export import export_plan
from autopar_opt.export.megatron import MegatronArgsError, parse_megatron_args
from autopar_opt.export.megatron_import import plan_from_megatron
from autopar_opt.ir.recompute_pattern import block_layers, recompute_text, stage_blocks
from autopar_opt.ir.training import Recompute, Schedule, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from support.cli import run_cli
from support.export_cases import make_plan

GRAPH = build_model("debug", overrides={"num_layers": 8})     # embed, 8 blocks, head
CLUSTER = get_cluster("debug-2x4")                             # 8 x A100-40GB
TRAINING = Training(global_batch_size=16, seq_len=128)
F, N = Recompute.full, Recompute.none
BASE = "--tensor-model-parallel-size 1 --micro-batch-size 1 --global-batch-size 16 "


def _flags(text: str) -> str:
    return " ".join(line.rstrip(" \\") for line in text.splitlines() if not line.startswith("#"))


def _block_plan():
    """Two stages of 4 blocks, the first 3 of each recomputed (Megatron block, N = 3)."""
    return make_plan([5, 5], dp=4, tp=1, c=4, block_rc=[F, F, F, N] * 2, graph=GRAPH)


def test_block_export_is_valid_megatron_and_imports_back():
    plan = _block_plan()
    text = export_plan(plan, GRAPH, CLUSTER, TRAINING, "megatron").text
    flags = _flags(text)
    assert "--recompute-granularity full --recompute-method block --recompute-num-layers 3" in flags
    back = plan_from_megatron(parse_megatron_args(flags), GRAPH, CLUSTER, TRAINING)
    assert back.to_dict() == plan.to_dict()
    assert evaluate(back, GRAPH, CLUSTER, TRAINING).iteration_time_s == \
        evaluate(plan, GRAPH, CLUSTER, TRAINING).iteration_time_s
    bridge = yaml.safe_load(export_plan(plan, GRAPH, CLUSTER, TRAINING, "megatron-bridge").text)
    model = bridge["model"]
    assert (model["recompute_granularity"], model["recompute_method"],
            model["recompute_num_layers"]) == ("full", "block", 3)
    try:
        import megatron.core  # noqa: F401
    except ImportError:          # the frameworks lock is not installed: the rest stands
        return
    from support.frameworks import validate_megatron, validate_megatron_lm

    config = validate_megatron(text, CLUSTER.num_devices)["config"]   # Megatron-Core's checks
    assert (config.recompute_granularity, config.recompute_method,
            config.recompute_num_layers) == ("full", "block", 3)
    args = validate_megatron_lm(text, CLUSTER.num_devices, CLUSTER.device.arch)
    assert (args.recompute_method, args.recompute_num_layers) == ("block", 3)


@pytest.mark.parametrize("n,pp,refused", [(2, 2, True), (4, 2, True), (2, 4, True),
                                          (2, 8, False), (1, 2, False)])
def test_uniform_groups_of_several_layers_are_refused(n, pp, refused):
    """``uniform`` groups a chunk's layers ``n`` at a time (``chunk_runner(l, min(l + n,
    layers))``): a group of one layer is the per-layer price, a larger one is refused with
    the reason. 8 blocks over ``pp`` stages: ``8 / pp`` layers per stage."""
    flags = (BASE + f"--pipeline-model-parallel-size {pp} --recompute-granularity full "
             f"--recompute-method uniform --recompute-num-layers {n}")
    args = parse_megatron_args(flags)
    groups = [min(n, 8 // pp - start) for start in range(0, 8 // pp, n)]   # Megatron's loop
    assert refused == (max(groups) > 1)
    if refused:
        with pytest.raises(MegatronArgsError, match=f"each group of {max(groups)} consecutive "
                                                    "layers .* no exact price"):
            plan_from_megatron(args, GRAPH, CLUSTER, TRAINING)
        return
    plan = plan_from_megatron(args, GRAPH, CLUSTER, TRAINING)
    assert {m for stage in stage_blocks(plan, GRAPH) for m in stage} == {F}


def test_the_plan_says_its_recomputation_in_megatrons_terms():
    assert recompute_text(_block_plan(), GRAPH) == (
        "full recomputation of the first 3 of 4 transformer layers per stage, none of the "
        "others (Megatron block method: --recompute-granularity full --recompute-method block "
        "--recompute-num-layers 3)")
    vp = make_plan([5, 5], dp=4, tp=1, c=4, block_rc=[F, F, N, N] * 2, graph=GRAPH,
                   schedule=Schedule.interleaved)
    vp.vp_chunks = 2
    assert block_layers(stage_blocks(vp, GRAPH), 2) == 1
    assert "the first 1 of each of its 2 virtual stages, 2 of 4 transformer layers per " \
           "stage" in recompute_text(vp, GRAPH)
    assert recompute_text(make_plan([5, 5], dp=4, tp=1, c=4, rc=F, graph=GRAPH), GRAPH) == \
        "full recomputation of every transformer layer"
    mixed = make_plan([5, 5], dp=4, tp=1, c=4, block_rc=[F, N, F, N] * 2, graph=GRAPH)
    assert recompute_text(mixed, GRAPH).startswith("per-layer: full on 4, none on 4 of 8")


def test_estimate_says_the_block_method(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: {zoo: gpt-1.7b, overrides: {num_layers: 4}}\n"
        "cluster: {nodes: 1, gpus_per_node: 2, device: A100-80GB}\n"
        "training: {global_batch_size: 8, seq_len: 1024, dtype: bf16, runtime: megatron-core}\n"
        "plan: {megatron_args: '--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 "
        "--micro-batch-size 1 --global-batch-size 8 --seq-length 1024 --bf16 "
        "--recompute-granularity full --recompute-method block --recompute-num-layers 1'}\n")
    code, text = run_cli("estimate", spec)
    assert code == 0, text
    assert "recomputation:    full recomputation of the first 1 of 2 transformer layers per " \
           "stage" in text


def test_a_stage_with_fewer_layers_than_n_recomputes_them_all():
    """Megatron checkpoints ``layer_idx < N`` of each chunk and sets no upper limit on N, so
    with an uneven split a stage of 2 layers under ``N = 3`` recomputes both and one of 6
    its first 3: the import reads it so, and the export writes the plan back (it refused
    the plan as two different counts, 2 and 3)."""
    flags = (BASE + "--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 2 "
             "--recompute-granularity full --recompute-method block --recompute-num-layers 3")
    plan = plan_from_megatron(parse_megatron_args(flags), GRAPH, CLUSTER, TRAINING)
    assert stage_blocks(plan, GRAPH) == [[F, F], [F, F, F, N, N, N]]
    assert block_layers(stage_blocks(plan, GRAPH)) == 3
    assert "the first 3 of 2/6 transformer layers per stage (every layer of a stage with " \
           "fewer)" in recompute_text(plan, GRAPH)
    text = _flags(export_plan(plan, GRAPH, CLUSTER, TRAINING, "megatron").text)
    assert "--recompute-method block --recompute-num-layers 3" in text
    back = plan_from_megatron(parse_megatron_args(text), GRAPH, CLUSTER, TRAINING)
    assert back.to_dict() == plan.to_dict()
    # a stage recomputing fewer than it has, below N elsewhere, is no Megatron setting
    odd = make_plan([3, 7], dp=4, tp=1, c=4, block_rc=[F, N] + [F, F, F, N, N, N], graph=GRAPH)
    assert block_layers(stage_blocks(odd, GRAPH)) is None
