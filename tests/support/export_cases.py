"""The small plans the export tests write: the debug MoE model and Qwen3-30B-A3B's
first six layers on 8 A100-40GB, and a plan builder with the importers' convention."""

from __future__ import annotations

import json
from dataclasses import replace

from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule, Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import build_model, get_cluster
from support import paths

GRAPH = build_model("debug-moe", overrides={"num_layers": 6})   # embed, 6 MoE blocks, head
# Qwen3-30B-A3B's first 6 layers: torchtitan's qwen3 30B-A3B flavour, cut (its config is Python)
QWEN = build_hf_graph({**json.loads((paths.REPO / "model_zoo" / "hf" / "qwen3-30b-a3b.json")
                                    .read_text()), "num_hidden_layers": 6}, 128, name="qwen3-6")
CLUSTER = get_cluster("debug-2x4")          # 8 x A100-40GB
TRAINING = Training(global_batch_size=16, seq_len=128)


def make_plan(stage_sizes, dp, tp, *, sp=False, zero=0, rc=Recompute.none, ep=1, c=4,
              schedule=Schedule.one_f_one_b, block_rc=None, etp=0, graph=GRAPH, zg=0) -> Plan:
    """Embedding/head take the base strategy (no recomputation), blocks take ``rc``
    (or ``block_rc[i]``), ``ep`` and ``etp`` — the convention every importer follows;
    ``zg``: hybrid sharding's shard group (0: the whole dp group)."""
    base = Strategy(dp, tp, 1, sp, zero, zero_group=zg)
    names = [layer.name for layer in graph.layers]
    stages, start, block = [], 0, 0
    for size in stage_sizes:
        part = names[start:start + size]
        strats = []
        for name in part:
            if name.startswith("block"):
                mode = block_rc[block] if block_rc else rc
                strats.append(replace(base, recompute=mode, ep=ep, etp=etp))
                block += 1
            else:
                strats.append(base)
        stages.append(StagePlan(part, strats))
        start += size
    return Plan(stages, c, schedule)
