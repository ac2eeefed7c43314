"""PyTorch AMP (torch.autocast over fp32 parameters) and DDP's gradient buckets.

Per parameter under AMP: fp32 weights 4 B, fp32 gradients 4 B, Adam m and v
8 B, autocast's cached 16-bit weight casts 2 B (``cached_cast`` in
``aten/src/ATen/autocast_mode.cpp``), and with PyTorch DDP a bucket copy of
the gradients, 4 B (``gradient_as_bucket_view=False``, the default). Oracles:
bytes derived by hand in each test; the published GPT-2 XL record.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.memory import modelled_gib
from autopar_opt.calibration.reading.training import autocast_of
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.comm import collective, grad_bucket_messages
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.cost.state import weight_parts
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.hardware import GIB
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Training
from support import paths

RUNS = paths.DATA / "published_runs.yaml"
LAYER = Layer("l", params=1000, max_tp=2)
DDP = runtime_named("pytorch-ddp")


def per_param(training: Training, s: Strategy) -> tuple[float, ...]:
    return tuple(x / (LAYER.params / s.tp) for x in weight_parts(LAYER, s, training))


@pytest.mark.parametrize("strategy,runtime,expected", [
    # DDP over 2 ranks: (4 + 2 cache, 4 + 4 bucket, 8) = 22 B
    (Strategy(2, 1, 1, False, 0, Recompute.none), "pytorch-ddp", (6, 8, 8)),
    # one rank: no DDP reduction, no bucket: 18 B
    (Strategy(1, 1, 1, False, 0, Recompute.none), "pytorch-ddp", (6, 4, 8)),
    # ZeroRedundancyOptimizer (ZeRO-1) under DDP: Adam sharded over 2, buckets kept
    (Strategy(2, 1, 1, False, 1, Recompute.none), "pytorch-ddp", (6, 8, 4)),
    # ZeRO-3 (FSDP): everything sharded over 2, no autocast cache of views, no DDP buckets
    (Strategy(2, 1, 1, False, 3, Recompute.none), "pytorch-ddp", (2, 2, 4)),
    # Megatron-Core: no bucket copy (main_grad is the bucket storage)
    (Strategy(2, 1, 1, False, 0, Recompute.none), "megatron-core", (6, 4, 8)),
    # per device after tp=2: the same bytes per local parameter
    (Strategy(1, 2, 1, False, 0, Recompute.none), "pytorch-ddp", (6, 4, 8)),
])
def test_autocast_bytes_per_parameter(strategy, runtime, expected):
    training = Training(8, 128, "fp16", runtime=runtime_named(runtime), autocast=True)
    assert per_param(training, strategy) == pytest.approx(expected, rel=1e-12)


def test_ddp_bucket_copy_without_autocast_and_its_override():
    """16-bit DDP (adam_mixed, no fp32 buffer in pytorch-ddp): 2 + (2 + 2) + 12
    = 18 B; ``gradient_as_bucket_view=True`` (capability off): 16 B."""
    s = Strategy(2, 1, 1, False, 0, Recompute.none)
    assert per_param(Training(8, 128, "bf16", runtime=DDP), s) == pytest.approx((2, 4, 12))
    view = runtime_named("pytorch-ddp", ddp_bucket_copy=False)
    assert per_param(Training(8, 128, "bf16", runtime=view), s) == pytest.approx((2, 2, 12))


def test_autocast_gathers_and_reduces_fp32():
    """Under AMP the DDP all-reduce moves fp32 gradients: the exposed sync of
    a layer with no backward window (grad_reduce_overlap off) is the all-reduce
    of 4-byte gradients, twice the bytes of 16-bit DDP, in DDP's 25 MiB buckets:
    ceil(bytes/25 MiB) messages of NCCL's all-reduce (8 for 2e8 bytes, 16 for 4e8)."""
    rt = runtime_named("pytorch-ddp", grad_reduce_overlap=False)
    s = Strategy(2, 1, 1, False, 0, Recompute.none)
    big = Layer("l", params=10**8, flops_fwd=1.0, flops_bwd=2.0)
    for amp, width, buckets in ((False, 2, 8), (True, 4, 16)):
        tr = Training(8, 128, "fp16", runtime=rt, autocast=amp)
        ctx = StageContext(small_cluster(1, 2), tr, default_params(), 2, 8)
        nbytes = 10**8 * width
        assert grad_bucket_messages(nbytes, "pytorch-ddp", 2, width) == buckets
        expect = collective(ctx, "all_reduce", 2, 1, nbytes, buckets)
        assert layer_cost(big, s, ctx).dp_exposed_s == pytest.approx(expect, rel=1e-12)


def _record(rid: str) -> dict:
    runs = yaml.safe_load(RUNS.read_text())
    runs = runs if isinstance(runs, list) else next(v for v in runs.values() if isinstance(v, list))
    return copy.deepcopy(next(r for r in runs if r["id"] == rid))


#: Allowed shortfall of the GPT-2 XL AMP record. Unmodelled and all positive:
#: the working set of the block recomputed in the backward pass (one block's
#: Korthikanti Eq. 1 activations, ``s·b·h·(34 + 5·a·s/h)`` = 1024·6·1600·114 B =
#: 1.04 GiB at micro-batch 6) and the fp32 gradient of the logits that the
#: cross-entropy backward writes beside the kept logits (``4·s·b·V`` = 1.15 GiB):
#: 2.2 GiB together, 5.9% of the published 37.0 GiB; plus allocator-rounding
#: and temporaries not modelled anywhere. The prediction must not exceed the
#: published figure and may fall short by at most 10%.
AMP_RECORD_SHORTFALL = 0.10


def test_gpt2xl_ddp_amp_record():
    """ColossalAI-Pytorch-lightning GPT2-XL, DDP + AMP on 4x A100-40GB:
    ``max_memory_allocated`` 37,905 MiB = 37.02 GiB. The record maps to AMP on
    PyTorch DDP; its training state is 22 B per parameter (1,557,611,200
    parameters: 4 + 2 + 4 + 4 + 8) less the autocast cache of the learned
    position table, which ``F.embedding`` reads in fp32 (2 B x 1024 x 1600 =
    3,276,800 B; the tied word embedding is cast once, by the output GEMM), and
    the modelled tensors fall short of the published figure by no more than
    :data:`AMP_RECORD_SHORTFALL` (was -31.7% with 16-bit weights and no DDP
    buckets)."""
    run = build_run(read_record(_record("colossallightning_gpt2xl_ddp_amp_4xa100")))
    assert run.training.autocast and run.training.runtime.ddp_bucket_copy
    n = run.graph.total_params()
    assert n == 1_557_611_200
    m = evaluate(run.plan, run.graph, run.cluster, run.training)
    st = m.stages[0]
    assert (st.weights_gib * GIB, st.grads_gib * GIB, st.optimizer_gib * GIB) == \
        pytest.approx((6 * n - 2 * 1024 * 1600, 8 * n, 8 * n), rel=1e-9)
    predicted = modelled_gib(m.stages, run.memory_rank)
    err = predicted / run.measured_memory_gib - 1
    assert -AMP_RECORD_SHORTFALL <= err <= 0.0, err


@pytest.mark.parametrize("text,runtime,amp", [
    ("fp16 AMP (torch.autocast via Lightning precision=16)", "pytorch-ddp", True),
    ("amp_bf16 (FSDP mixed_precision=DEFAULT)", "pytorch-ddp", False),   # Composer's name
    ("fp16 AMP", "pytorch-fsdp", False),          # FSDP casts its own parameters
    ("mixed precision fp16", "pytorch-ddp", False),
    ("Apex AMP O2", "pytorch-ddp", False),        # fp16 weights + fp32 masters, not autocast
    ("amp O1 (apex)", "pytorch-ddp", False),
    ("native AMP (torch.cuda.amp)", "pytorch-ddp", True),
])
def test_autocast_reader(text, runtime, amp):
    assert autocast_of(text, runtime_named(runtime), []) is amp
