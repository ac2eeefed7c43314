"""The Bridge overrides state ``model.recompute_modules``: a recipe may set its own list
(Megatron-Bridge 0.3.1 ``recipes/qwen/qwen3_next.py``: selective recomputation of
``["layernorm", "moe", "moe_act"]``), which the overrides must replace, as they replace the
recipe's granularity, method and layer count; QA round 11: they left it, so a plan priced
with attention-core selective recomputation, merged into such a recipe, recomputed the
recipe's modules. Selective is written as Megatron-Core's default ``["core_attn"]`` (what
the cost model prices), otherwise null."""

from __future__ import annotations

import pytest

from autopar_opt.export import plan_view
from autopar_opt.export.megatron import bridge_overrides
from autopar_opt.ir.training import Recompute
from support.export_cases import CLUSTER, GRAPH, TRAINING, make_plan


@pytest.mark.parametrize("rc,modules", [(Recompute.selective, ["core_attn"]),
                                        (Recompute.full, None), (Recompute.none, None)])
def test_recompute_modules_are_written(rc, modules):
    plan = make_plan([8], dp=4, tp=2, sp=True, ep=2, c=2, rc=rc)
    model = bridge_overrides(plan_view(plan, GRAPH, CLUSTER, TRAINING))["model"]
    assert "recompute_modules" in model and model["recompute_modules"] == modules
