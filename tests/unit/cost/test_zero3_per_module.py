"""DeepSpeed ZeRO-3 gathers a layer module by module (runtime ``zero3_gather_per_module``).

Oracle: ``PartitionedParameterCoordinator.fetch_sub_module`` issues one
``all_gather_coalesced`` per submodule about to run (DeepSpeed,
``deepspeed/runtime/zero/partitioned_param_coordinator.py``), the norms staying
gathered under ``stage3_param_persistence_threshold``: a Megatron-style block's four
linear modules are four all-gathers of a quarter of its weights each, each over the
whole ZeRO group (NCCL's latency paid four times); PyTorch FSDP gathers the unit's
flat parameter once. Computed by hand from the module's own collective pricing."""

import pytest

from autopar_opt.cost import comm
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.transformer import transformer_block


def _ctx(runtime: str) -> StageContext:
    cl = make_cluster("c", 32, 8, "A100-80GB")
    tr = Training(global_batch_size=256, seq_len=1024, runtime=runtime_named(runtime))
    return StageContext(cl, tr, default_params(), 256, 256)


def test_deepspeed_gathers_each_linear_module_fsdp_the_unit():
    blk = transformer_block("b", 1024, 12288, 96, 49152)
    s = Strategy(dp=256, tp=1, zero=3)
    ds, fsdp = _ctx("deepspeed"), _ctx("pytorch-fsdp")
    assert ds.training.runtime.zero3_gather_per_module
    assert not fsdp.training.runtime.zero3_gather_per_module
    assert comm.zero3_gather_calls(blk, ds) == 4 and comm.zero3_gather_calls(blk, fsdp) == 1
    w = comm.zero3_bytes(ds.training)[0] * blk.params
    gather, _ = comm._unit_gather_scatter(blk, s, ds)
    assert gather == pytest.approx(4 * comm.collective(ds, "all_gather", 256, 1, w / 4))
    # the latency is paid per call: four quarter gathers take longer than one whole one
    assert gather > comm.collective(ds, "all_gather", 256, 1, w)
