"""DeepSpeed runs AutoTP (``tensor_parallel.autotp_size``) without pipeline parallelism only
(QA round 11: a deepspeed-target solve of Llama-3-8B on 16 H100s returned pp 2 x tp 2 and
the export wrote ``autotp_size: 2`` with ``PipelineModule(num_stages=2, ...)``, whose
default topology is ``PipeDataParallelTopology(num_pp=2, num_dp=8)``: no tensor axis, so
DeepSpeed's batch check takes dp = 8 against the file's dp = 4, and AutoTP's own mesh is
data x tensor over all 16 ranks, across the stages). Oracle: DeepSpeed's own topology."""

from __future__ import annotations

import pytest

from autopar_opt.export import ExportError, export_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.target import Target
from support.export_cases import CLUSTER, GRAPH, TRAINING, make_plan


def test_the_pipeline_module_topology_has_no_tensor_axis():
    topology = pytest.importorskip("deepspeed.runtime.pipe.topology")
    default = topology.PipeDataParallelTopology(num_pp=2, num_dp=16 // 2)   # PipelineModule's
    assert default.get_axis_names() == ["pipe", "data"] and default.get_dim("data") == 8


def test_the_target_and_the_export_keep_to_pp_1():
    block = GRAPH.layers[1]
    target = Target("deepspeed")
    assert target.strategy_problem(block, Strategy(2, 2), 2) is not None
    assert target.strategy_problem(block, Strategy(4, 2), 1) is None
    assert target.strategy_problem(block, Strategy(4, 1), 2) is None
    with pytest.raises(ExportError, match="tp=2 with pp=2"):
        export_plan(make_plan([4, 4], dp=2, tp=2, c=4), GRAPH, CLUSTER, TRAINING, "deepspeed")
    text = export_plan(make_plan([8], dp=4, tp=2, c=4), GRAPH, CLUSTER, TRAINING,
                       "deepspeed").text
    assert '"autotp_size": 2' in text
