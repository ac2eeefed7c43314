"""Megatron's all-to-all (Ulysses) context parallelism, runtime ``cp_comm_type`` ``a2a``,
splits each tensor-parallel rank's query and key-value heads over cp (Transformer Engine
``attn_forward_func_with_cp``: "The number of attention heads needs to be divisible by CP
size!"), the search's own rule (``tp·cp`` divides the layer's ``max_tp``). QA round 11: a
Llama-3-8B hand plan at tp 4 x cp 4 (8 key-value heads: 2 per tp rank, over 4 cp ranks)
priced with a2a was exported with ``--cp-comm-type a2a``. Oracle: the head counts by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Schedule, Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import get_cluster
from support import paths

LLAMA = build_hf_graph(json.loads((paths.REPO / "model_zoo" / "hf" / "llama-3.1-8b.json")
                                  .read_text()), 4096, name="llama3-8b")     # 32 / 8 kv heads
CLUSTER = replace(get_cluster("debug-2x4"), nodes=4)                          # 16 GPUs
A2A = Training(global_batch_size=16, seq_len=4096,
               runtime=runtime_named("megatron-core", cp_comm_type="a2a"))


def _plan(tp: int, cp: int) -> Plan:
    s = Strategy(16 // (tp * cp), tp, cp, True, 1)
    return Plan([StagePlan([layer.name for layer in LLAMA.layers], [s] * len(LLAMA.layers))],
                16 // (16 // (tp * cp)), Schedule.one_f_one_b)


@pytest.mark.parametrize("target", ["megatron", "megatron-bridge"])
def test_heads_per_tp_rank_must_split_over_cp(target):
    assert 8 // 4 % 4 != 0                       # tp 4: 2 kv heads per rank, cp 4
    with pytest.raises(ExportError, match="tp\\*cp = 16 must divide"):
        export_plan(_plan(4, 4), LLAMA, CLUSTER, A2A, target)
    assert 8 // 2 % 4 == 0                       # tp 2: 4 kv heads per rank, cp 4
    assert export_plan(_plan(2, 4), LLAMA, CLUSTER, A2A, target).text
    p2p = replace(A2A, runtime=runtime_named("megatron-core"))   # the ring keeps every head
    assert export_plan(_plan(4, 4), LLAMA, CLUSTER, p2p, target).text
