"""An ideal cost context for hand oracles of the TP overlap tests: every efficiency 1, no
per-kernel latency, no element-wise traffic, no memory reserve, and a chosen
``comm_interference``, on one 8-GPU H100 SXM node (8 samples per stage, micro-batch 8)."""

from __future__ import annotations

from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.training import Training


def ideal_params(interference: float) -> CostParams:
    """Every efficiency 1 and nothing fitted, but ``comm_interference``."""
    return CostParams(gemm_efficiency={}, efficiency_default=1.0, fp8_efficiency={},
                      comm_interference=interference, fp8_efficiency_default=1.0,
                      efficiency_half_us=0.0, comm_efficiency=1.0, inter_comm_efficiency=1.0,
                      elementwise_passes=0.0, optimizer_bytes_per_param=0.0,
                      memory_reserve_gib=0.0, memory_fragmentation=0.0)


def h100_node_ctx(runtime: str, interference: float, **caps) -> StageContext:
    """One H100 node's stage context under the named runtime with ``caps`` overridden."""
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB")
    return StageContext(cl, Training(8, 1, "bf16", runtime=runtime_named(runtime, **caps)),
                        ideal_params(interference), 8, 8)
