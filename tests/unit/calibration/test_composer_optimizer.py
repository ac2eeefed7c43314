"""Composer/llm-foundry records run an unfused optimizer step.

llm-foundry's train YAMLs select ``optimizer: name: decoupled_adamw``, Composer's
``DecoupledAdamW``, whose ``adamw`` loops over the parameters in Python with one
in-place op per tensor (``composer/optim/decoupled_weight_decay.py``): no fused
or foreach kernel. Before, their runtime (``pytorch-fsdp``) kept
``fused_optimizer`` on.

Oracles: the source's loop (every Composer record gets ``fused_optimizer`` off,
the note naming the file); the step's price written out from ``_sync``'s
docstring: the unfused step is ``unfused_optimizer_factor`` times the fused one.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from autopar_opt.calibration.reading import RawRecord, load_run_file
from autopar_opt.calibration.reading.runtime import runtime_of
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from support import paths

RUNS = paths.DATA / "published_runs.yaml"


def _composer_records() -> list[dict]:
    return [r for r in load_run_file(RUNS)
            if any(k in r["training"]["framework"].lower() for k in ("composer", "llm-foundry"))]


def test_every_composer_record_runs_decoupled_adamw_unfused():
    recs = _composer_records()
    assert len(recs) >= 28
    for rec in recs:
        for variant in (rec, _later_table(rec)):
            notes: list[str] = []
            rt = runtime_of(variant["training"]["framework"], notes, RawRecord.read(variant))
            assert rt.name == "pytorch-fsdp" and rt.fused_optimizer is False, rec["id"]
            assert any("decoupled_weight_decay.py" in n and "fused_optimizer off" in n
                       for n in notes), rec["id"]


def _later_table(rec: dict) -> dict:
    """The same record outside the 2023 tables (the FlashAttention-2 branch)."""
    later = copy.deepcopy(rec)
    later.setdefault("source", {})["locator"] = 'README.md section "Large Scale"'
    return later


def test_the_unfused_step_costs_the_measured_factor_more():
    p = default_params()
    cl = make_cluster("c", 1, 8, "A100-80GB")
    layer = Layer("l", LayerKind.linear, flops_fwd=1e9, flops_bwd=2e9, params=10_000_000,
                  act_bytes=1e6, input_bytes=1e6, output_bytes=1e6)
    rt = runtime_of("Composer / llm-foundry (PyTorch FSDP)", [],
                    RawRecord.read(_composer_records()[0]))
    steps = []
    for runtime in (replace(rt, fused_optimizer=True), rt):
        ctx = StageContext(cl, Training(64, None, "bf16", runtime=runtime), p, 1, 8)
        steps.append(layer_cost(layer, Strategy(dp=8, tp=1, zero=3), ctx).optimizer_s)
    hand = 10_000_000 / 8 * p.optimizer_bytes_per_param / (2039e9)   # shard·bytes / HBM
    assert steps[0] == pytest.approx(hand, rel=1e-12)
    assert steps[1] == pytest.approx(p.unfused_optimizer_factor * hand, rel=1e-12)
