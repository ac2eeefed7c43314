"""An interleaved plan without ``stage_layers`` takes Megatron-LM's default split.

Megatron-LM divides the transformer blocks evenly into ``pp*vp`` model chunks,
the embedding on the first chunk and the output layer on the last. Before the
fix the spec split all layers (embedding and head included) evenly by count,
so gpt-1.7b (embed, 24 blocks, head: 26 layers) at pp 4, vp 2 became 7/7/6/6
layers = 6/7/6/5 blocks and a Megatron-valid plan was refused.

Oracles: the hand-derived split (24 blocks / pp 4 = 6 per stage: embed +
block000-005 | block006-011 | block012-017 | block018-023 + head); the plan
Megatron-LM's own flags give (``plan.megatron_args``, read by
:mod:`autopar_opt.export.megatron_import`) and its price under ``evaluate``;
the Megatron export needing no split flag; for a 22-block model, which has no
even split into 8 chunks, exit 2 with key, value, rule and fix.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.export.megatron import megatron_args
from autopar_opt.export.view import plan_view
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.spec import load_spec
from autopar_opt.spec.build_plan import vp_split

from support.cli import run_cli as _cli
from support import paths

ROOT = paths.REPO
QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())


def _spec(tmp_path: Path, plan: dict, name: str = "spec.yaml", **overrides) -> Path:
    spec = copy.deepcopy(QUICKSTART)
    spec["plan"] = plan
    if overrides:
        spec["model"]["overrides"] = overrides
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def _blocks(a: int, b: int) -> list[str]:
    return [f"block{i:03d}" for i in range(a, b)]


HAND_SPLIT = [["embed", *_blocks(0, 6)], _blocks(6, 12), _blocks(12, 18),
              [*_blocks(18, 24), "head"]]
INTERLEAVED = {"tp": 2, "pp": 4, "microbatches": 8, "schedule": "interleaved", "vp_chunks": 2}


def test_24_blocks_pp4_vp2_is_accepted_with_megatrons_split(tmp_path):
    spec = load_spec(_spec(tmp_path, INTERLEAVED))
    assert [st.layers for st in spec.plan.stages] == HAND_SPLIT
    assert spec.plan.vp_chunks == 2 and spec.plan.schedule.value == "interleaved"


def test_default_split_equals_the_plan_of_megatrons_own_flags(tmp_path):
    """The same run written as Megatron-LM flags: same stages, same price; and
    the export of the spec's plan needs no stage-split flag (Megatron's default)."""
    ours = load_spec(_spec(tmp_path, INTERLEAVED))
    flags = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
             "--num-virtual-stages-per-pipeline-rank 2 --micro-batch-size 8 "
             "--global-batch-size 64")
    theirs = load_spec(_spec(tmp_path, {"megatron_args": flags}, "flags.yaml"))
    assert [st.layers for st in theirs.plan.stages] == HAND_SPLIT
    assert theirs.plan.vp_chunks == 2 and theirs.plan.microbatches == 8
    a = evaluate(ours.plan, ours.graph, ours.cluster, ours.training, ours.cost_params)
    b = evaluate(theirs.plan, theirs.graph, theirs.cluster, theirs.training, theirs.cost_params)
    assert a.iteration_time_s == b.iteration_time_s
    assert [s.peak_memory_gib for s in a.stages] == [s.peak_memory_gib for s in b.stages]
    args = megatron_args(plan_view(ours.plan, ours.graph, ours.cluster, ours.training))
    assert "--num-virtual-stages-per-pipeline-rank" in args
    assert not {"--decoder-first-pipeline-num-layers",
                "--pipeline-model-parallel-layout"} & set(args)


def test_22_blocks_pp4_vp2_is_refused_with_the_rule_and_fix(tmp_path):
    """22 blocks do not split into pp*vp = 8 chunks; no vp > 1 fits pp 4 (22 is
    not a multiple of 4) and no pp dividing 8 devices fits vp 2."""
    path = _spec(tmp_path, INTERLEAVED, num_layers=22)
    code, text = _cli("estimate", path)
    assert code == 2, text
    for words in ("spec.yaml", "plan.vp_chunks = 2", "22 transformer blocks",
                  "pp*vp_chunks = 8 model chunks", "22 is not a multiple of 8",
                  "use vp_chunks: 1 and schedule: 1f1b", "give stage_layers"):
        assert words in text, text


def test_refusal_lists_the_vp_that_fit(tmp_path):
    """24 blocks, pp 4, vp 4: 16 chunks do not divide 24; vp with 24 % (4 vp) == 0
    are 1, 2, 3, 6."""
    code, text = _cli("estimate", _spec(tmp_path, {**INTERLEAVED, "vp_chunks": 4}))
    assert code == 2 and "plan.vp_chunks = 4" in text and "use vp_chunks in [1, 2, 3, 6]" in text, text


def test_split_of_a_model_without_transformer_blocks():
    """Eight plain layers, pp 2, vp 2: every layer counts, 4 per stage; six
    layers have no split into 4 chunks."""
    def chain(n: int) -> LayerGraph:
        return LayerGraph.chain("plain", [Layer(f"l{i}", LayerKind.linear, 1.0, 2.0, 1)
                                          for i in range(n)])
    assert vp_split(chain(8), 2, 2) == [4, 4]
    assert vp_split(chain(6), 2, 2) is None



def test_interleaving_without_a_pipeline_is_refused(tmp_path):
    """pp 1, vp 2: Megatron-LM's validate_args asserts pp > 1 with the interleaved
    schedule. Before: accepted and priced (spec plan and Megatron flags alike)."""
    code, text = _cli("estimate", _spec(tmp_path, {**INTERLEAVED, "tp": 8, "pp": 1}))
    assert code == 2, text
    assert "plan.vp_chunks = 2" in text and "the plan has one stage" in text
    assert "use pp >= 2, or vp_chunks: 1" in text
    flags = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 1 "
             "--num-virtual-stages-per-pipeline-rank 2 --micro-batch-size 8 --global-batch-size 64")
    code, text = _cli("estimate", _spec(tmp_path, {"megatron_args": flags}, "flags.yaml"))
    assert code == 2, text
    assert "plan.megatron_args" in text and "--pipeline-model-parallel-size 1" in text
    assert "greater than 1" in text


ONE_F_ONE_B = {"tp": 2, "pp": 4, "microbatches": 8, "schedule": "1f1b"}


def test_a_1f1b_plan_takes_megatrons_split_too(tmp_path):
    """pp 4 with 1F1B: the blocks evenly over the stages, embedding first, head last, as
    Megatron-LM's --pipeline-model-parallel-size 4 builds it; the even split by layer count
    it replaced put 7 layers on stages 0 and 1 (QA round 10: GPT-3 175B's 8 stages got 13,
    13, 12, ... 11 + head, one stage 13 blocks, 4.8% slower than Megatron's plan)."""
    ours = load_spec(_spec(tmp_path, ONE_F_ONE_B))
    assert [st.layers for st in ours.plan.stages] == HAND_SPLIT
    flags = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
             "--micro-batch-size 8 --global-batch-size 64")
    theirs = load_spec(_spec(tmp_path, {"megatron_args": flags}, "flags.yaml"))
    assert [st.layers for st in theirs.plan.stages] == HAND_SPLIT
    args = megatron_args(plan_view(ours.plan, ours.graph, ours.cluster, ours.training))
    assert not {"--decoder-first-pipeline-num-layers", "--pipeline-model-parallel-layout"} & set(args)


def test_blocks_that_do_not_divide_keep_the_even_split(tmp_path):
    """22 blocks over pp 4 have no Megatron split (it refuses without its uneven-split
    flags): a 1F1B plan still prices the 24 layers as evenly as possible, 6 per stage."""
    spec = load_spec(_spec(tmp_path, ONE_F_ONE_B, num_layers=22))
    assert [len(st.layers) for st in spec.plan.stages] == [6, 6, 6, 6]
