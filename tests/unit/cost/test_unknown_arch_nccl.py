"""A device of unknown architecture: the NCCL generation the assumptions name is the one
priced (QA round 12).

Oracle: :data:`autopar_opt.cost.comm.GENERATION` orders NCCL's tuning tables Volta,
Ampere, Hopper, Blackwell; the line said "NCCL constants of the newest NVLink
generation" while the collectives took Hopper's (index 2), not Blackwell's (3)."""

from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.cost.comm import GENERATION, collective_group
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import DeviceType, make_cluster
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.transformer import decoder_lm


def test_the_named_generation_is_the_priced_one():
    dev = DeviceType("MyGPU", {"bf16": 500.0, "fp16": 500.0}, 80.0, 2000.0)
    cluster = make_cluster("c", 2, 8, dev)
    training = Training(global_batch_size=16, seq_len=1024)
    lines = [x for x in cost_assumptions(decoder_lm("m", 2, 1024, 512, 8, 2048, 1000), cluster, training)
             if "architecture of MyGPU not known" in x]
    assert len(lines) == 1
    named = [g for g in GENERATION if f"of the {g} generation" in lines[0]]
    assert len(named) == 1
    ctx = StageContext(cluster, training, default_params(), 16, 1)
    assert collective_group(ctx, 16, 1).generation == GENERATION[named[0]]
    assert collective_group(ctx, 8, 1).generation == GENERATION[named[0]]
