"""Adam on bf16 weights with no fp32 master (optimizer ``adam_bf16``).

Oracles: the bytes per parameter counted by hand from the tensors each
optimizer keeps (bf16 weight 2, bf16 gradient 2, AdamW's ``exp_avg`` and
``exp_avg_sq`` as ``zeros_like`` of a bf16 weight 2 + 2; mixed precision's fp32
master and moments 12), the step's HBM traffic from the update rule (seven 2-byte
tensors against mixed precision's 28 bytes), and KempnerForge's published
memory column, whose fall with the data-parallel degree measures the sharded
bytes per parameter directly.
"""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.compare import compare
from autopar_opt.calibration.reading.stacks import optimizer_of
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.cost.state import weight_parts
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training, autocast_problem, optimizer_step_ratio
from support.paths import REPO

P = 8_000_000


def _layer() -> Layer:
    return Layer("l", LayerKind.linear, flops_fwd=1e9, flops_bwd=2e9, params=P,
                 act_bytes=1e6, input_bytes=1e6, output_bytes=1e6)


def _training(optimizer: str) -> Training:
    return Training(64, None, "bf16", optimizer, runtime=runtime_named("pytorch-fsdp"))


@pytest.mark.parametrize("zero,divisors", [(0, (1, 1, 1)), (1, (1, 1, 4)), (3, (4, 4, 4))])
def test_state_is_two_two_and_four_bytes_sharded_as_zero_says(zero, divisors):
    w, g, o = weight_parts(_layer(), Strategy(dp=4, tp=1, zero=zero), _training("adam_bf16"))
    assert (w, g, o) == pytest.approx((2 * P / divisors[0], 2 * P / divisors[1],
                                       4 * P / divisors[2]))
    mixed = weight_parts(_layer(), Strategy(dp=4, tp=1, zero=zero), _training("adam_mixed"))
    assert mixed[2] - o == pytest.approx(8 * P / divisors[2])     # 12 - 4 bytes of state


def test_the_step_moves_half_of_mixed_precision_adams_bytes():
    assert optimizer_step_ratio("adam_bf16") == 0.5                 # 14 / 28
    assert optimizer_step_ratio("sgd_momentum_mixed") == pytest.approx(20 / 28)
    p = default_params()
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    steps = {}
    for opt in ("adam_mixed", "adam_bf16"):
        ctx = StageContext(cl, _training(opt), p, 1, 8)
        steps[opt] = layer_cost(_layer(), Strategy(dp=8, tp=1, zero=3), ctx).optimizer_s
    hand = P / 8 * p.optimizer_bytes_per_param / (cl.device.hbm_gb_per_s * 1e9)
    assert steps["adam_mixed"] == pytest.approx(hand, rel=1e-12)
    assert steps["adam_bf16"] == pytest.approx(hand / 2, rel=1e-12)


def test_autocast_cannot_go_with_sixteen_bit_weights():
    assert "fp32 parameters" in autocast_problem("bf16", True, "adam_bf16")
    assert autocast_problem("bf16", True, "adam_mixed") is None
    assert autocast_problem("bf16", False, "adam_bf16") is None


def test_kempnerforge_is_read_as_bf16_weights_and_others_are_not():
    notes: list[str] = []
    assert optimizer_of("KempnerForge (PyTorch FSDP2 fully_shard ...)", "bf16", notes) \
        == "adam_bf16"
    assert "model.to(dtype=param_dtype)" in notes[0]
    assert optimizer_of("PyTorch FSDP2 (torchtitan)", "bf16", []) == "adam_mixed"
    # fp32 training keeps fp32 weights and Adam moments, no master copy (QA round 11:
    # an fp32 record was priced as mixed-precision Adam)
    assert optimizer_of("KempnerForge", "fp32", []) == "adam_fp32"


@pytest.fixture(scope="module")
def kempnerforge_70b():
    records = yaml.safe_load((REPO / "tests/data/published_runs.yaml").read_text())
    runs, skipped = model_records([r for r in records
                                   if r["id"].startswith("kempnerforge_weak_70b")])
    assert not skipped
    return {run.strategy.dp: run for run in runs}


def test_kempnerforge_memory_falls_with_dp_as_six_bytes_per_parameter(kempnerforge_70b):
    """The report's Mem/GPU column (max_memory_allocated, GiB) at dp 2 and dp 40 is
    128.5 and 82.9: 45.6 GiB = S x (1/2 - 1/40) for the sharded bytes S of the
    parameters a tensor-parallel rank holds: 17.6 B of the blocks and head plus the
    whole 1.05 B token embedding, which KempnerForge keeps replicated over the
    tensor-parallel ranks (distributed/tensor_parallel.py: "Token embedding stays
    replicated"), 18.4 B: S / 18.4e9 = 5.6 bytes per parameter, near bf16 weight and
    moments, 2 + 4 (the sharded bf16 gradient is not yet written at the backward's
    peak), and far from mixed precision's 2 + 12 = 14 (a fall of 114 GiB). The
    model's fall, 6 bytes over 18.4 B, is 48.8 GiB, within 10% of the measured one
    (the 7% left is unexplained: the dp-2 peak may fall at another moment), and the
    dp-2 run that ran in 141 GB fits (under mixed-precision Adam it needed 207 GiB)."""
    p = default_params()
    mem = {dp: compare(run, p).predicted_memory_gib for dp, run in kempnerforge_70b.items()}
    measured_fall = 128.5 - 82.9
    assert mem[2] - mem[40] == pytest.approx(measured_fall, rel=0.10)
    run2 = kempnerforge_70b[2]
    assert run2.training.optimizer == "adam_bf16"
    assert compare(run2, p).memory_status != "over"
