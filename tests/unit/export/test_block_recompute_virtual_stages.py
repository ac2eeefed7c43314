"""Megatron-LM's ``--recompute-method block --recompute-num-layers N`` recomputes the
first N layers of every model chunk (Megatron-Core 0.17.1 ``TransformerBlock.
_checkpointed_forward`` loops over ``num_layers_per_pipeline_rank = len(self.layers)``,
one chunk's layers), so with ``v`` virtual stages a rank recomputes ``v·N`` blocks
(QA round 11: a plan recomputing 1 block of each 4-block stage with v = 2 was written
``--recompute-num-layers 1``, which recomputes 2 per rank).

Oracle: the count of recomputed blocks per rank under Megatron's chunk layout (the
first N of each of the v chunks), against the plan's count per stage."""

from __future__ import annotations

import pytest

from autopar_opt.export import ExportError, export_plan
from autopar_opt.export.megatron import parse_megatron_args
from autopar_opt.export.megatron_import import plan_from_megatron
from autopar_opt.ir.training import Recompute, Schedule, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from support.export_cases import make_plan

GRAPH = build_model("debug", overrides={"num_layers": 8})     # embed, 8 blocks, head
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=16, seq_len=128)
F, N = Recompute.full, Recompute.none


def _interleaved(per_stage: list[Recompute]):
    plan = make_plan([5, 5], dp=2, tp=2, sp=True, zero=1, c=4, schedule=Schedule.interleaved,
                     block_rc=per_stage * 2, graph=GRAPH)
    plan.vp_chunks = 2
    return plan


def _flags(text: str) -> str:
    return " ".join(line.rstrip(" \\") for line in text.splitlines() if not line.startswith("#"))


def _megatron_count(flags: str, chunk_blocks: int, chunks: int) -> int:
    """Blocks a rank recomputes under Megatron's block method: the first N of each chunk."""
    args = flags.split()
    n = int(args[args.index("--recompute-num-layers") + 1])
    return chunks * min(n, chunk_blocks)


def test_two_of_four_blocks_per_stage_is_one_per_virtual_stage():
    plan = _interleaved([F, F, N, N])
    flags = _flags(export_plan(plan, GRAPH, CLUSTER, TRAINING, "megatron").text)
    assert "--recompute-method block" in flags
    assert _megatron_count(flags, chunk_blocks=2, chunks=2) == 2      # the plan's 2 per stage
    back = plan_from_megatron(parse_megatron_args(flags), GRAPH, CLUSTER, TRAINING)
    assert back.to_dict() == plan.to_dict()


def test_a_count_the_virtual_stages_do_not_divide_is_refused():
    with pytest.raises(ExportError, match="multiple of 2"):
        export_plan(_interleaved([F, N, N, N]), GRAPH, CLUSTER, TRAINING, "megatron")
    with pytest.raises(ExportError, match="multiple of 2"):
        export_plan(_interleaved([F, N, N, N]), GRAPH, CLUSTER, TRAINING, "megatron-bridge")
