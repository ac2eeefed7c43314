"""ZeRO-1/2 parameters broadcast by each rank in turn (runtime ``zero_param_broadcast``:
InternEvo ``HybridZeroOptimizer.broadcast_params``), and NCCL's ring broadcast.

Sources: ``internlm/solver/optimizer/hybrid_zero_optim.py`` ``broadcast_params`` (one
``dist.broadcast`` of each rank's flat fp16 partition, ``src`` that rank, issued in turn);
NCCL ``src/device/broadcast.h`` ``runRing`` (chunks forwarded rank to rank along the ring:
the first crosses ``n-1`` links) and ``src/graph/tuning.cc`` (baseLat, hwLat, netOverhead).

Oracles: the broadcast's latency and time by hand from those constants, and a stage's
broadcasts summed over its layers equal ``group`` broadcasts of ``P/group`` parameters.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost import comm, nccl
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.training import Training


def test_broadcast_latency_is_the_chains_fill_by_hand():
    """16 ranks on 2 nodes (8 per node): 15 links, 1 across the network. LL: baseLat 6.6 +
    14 intra links at max(hwLat nvlink LL 0.6, netOverhead 1.0) + 1 network link at 2.7 =
    23.3 µs; Simple: 8.4 + 14 x max(hwLat nvlink Simple 3.4, netOverhead x 3 = 3.0) + 14.0 =
    70.0 µs."""
    g = nccl.Group(16, 2, 380.0)
    assert nccl.latency_us("broadcast", "ring", "LL", g) == pytest.approx(23.3)
    assert nccl.latency_us("broadcast", "ring", "Simple", g) == pytest.approx(70.0)
    # 1,024 ranks on 128 nodes: 896 intra links, 127 across: LL 6.6 + 896 + 342.9 µs
    big = nccl.Group(1024, 128, 380.0)
    assert nccl.latency_us("broadcast", "ring", "LL", big) == pytest.approx(1245.5)


def test_broadcast_moves_its_bytes_at_the_bus_bandwidth():
    """nccl-tests: a broadcast's bus bandwidth is its algorithm bandwidth. 8 GB at 380 GB/s
    (Simple) on one node: 8e9 / 380e9 s plus the latency."""
    g = nccl.Group(8, 1, 380.0)
    t = nccl.collective_time("broadcast", 8e9, g)
    lat = nccl.latency_us("broadcast", "ring", "Simple", g) * 1e-6
    assert t == pytest.approx(8e9 / 380e9 + lat, rel=1e-9)
    assert nccl.bus_bandwidth("broadcast", 8e9, g) == pytest.approx(8e9 / t / 1e9)
    assert nccl.choices("broadcast", g) == [("ring", p) for p in nccl.PROTOCOLS]


def _ctx(stage_params: float) -> StageContext:
    cl = make_cluster("t", 32, 8, "A100-80GB")
    rt = runtime_named("deepspeed", zero_param_broadcast=True)
    return StageContext(cl, Training(256, 2048, "bf16", runtime=rt), default_params(), 256, 1,
                        stage_params=stage_params)


def test_a_stages_layers_sum_to_one_broadcast_per_rank():
    """A stage of 4 layers of 1e8 parameters (P = 4e8, tp 1) over 256 ranks 1 apart:
    256 broadcasts of P/256 parameters at 2 bytes, whatever the split of P among layers."""
    ctx = _ctx(4e8)
    per_layer = [comm.param_broadcast_time(ctx, 256, 1, p, 2.0, 1) for p in (1e8, 1e8, 5e7, 1.5e8)]
    g = comm.collective_group(ctx, 256, 1)
    whole = 256 * nccl.collective_time("broadcast", 4e8 / 256 * 2.0, g)
    assert sum(per_layer) == pytest.approx(whole, rel=1e-9)
    # far above an all-gather of the same bytes at 256 ranks: each broadcast pays the fill
    assert whole > 3 * nccl.collective_time("all_gather", 4e8 * 2.0, g)
    # tensor parallelism halves each rank's partition: the same 256 broadcasts, half the bytes
    half = 256 * nccl.collective_time("broadcast", 4e8 / 2 / 256 * 2.0, g)
    assert sum(comm.param_broadcast_time(ctx, 256, 1, p / 2, 2.0, 2)
               for p in (1e8, 1e8, 5e7, 1.5e8)) == pytest.approx(half, rel=1e-9)


def test_without_the_stage_size_the_runtime_falls_back_to_the_all_gather():
    assert comm.param_broadcast_time(_ctx(0.0), 256, 1, 1e8, 2.0, 1) == 0.0
    rt = runtime_named("deepspeed")
    assert not rt.zero_param_broadcast
    assert replace(rt, zero_param_broadcast=True).zero_param_broadcast


def test_internevo_records_are_read_with_the_broadcasts():
    from autopar_opt.calibration.reading.stacks import internevo
    notes: list[str] = []
    rt = internevo("InternEvo", None, notes)
    assert rt.zero_param_broadcast
    assert any("broadcast_params" in n for n in notes)
