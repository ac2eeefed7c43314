"""A pipeline send across nodes, then the receiving tensor-parallel group's gather (QA round 12).

Oracle: Narayanan et al. 2021, Sec. 4.1 (scatter/gather): each sender ships its
``1/t`` share over the network, the receivers all-gather it over NVLink inside their
node. By hand from the α-β times of :mod:`autopar_opt.cost.collectives`: the send at
the network's nccl-tests efficiency (``inter_comm_efficiency``), the gather at
NVLink's (``comm_efficiency``). The gather was priced at the network's efficiency
(0.95 instead of 0.80) whenever the send crossed nodes."""

import pytest

from autopar_opt.cost.collectives import allgather_time, p2p_time
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.params import default_params
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Schedule, Training
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.model_zoo.transformer import decoder_lm


def test_the_gather_after_a_network_send_runs_at_nvlink_efficiency():
    graph = decoder_lm("tiny", 2, 512, 1024, 8, 4096, 1024)
    cluster = small_cluster(2, 4)                    # stage 0 on node 0, stage 1 on node 1
    training = Training(global_batch_size=8, seq_len=512)
    s = Strategy(dp=1, tp=4)                         # no sequence parallelism: the receiver gathers
    plan = Plan([StagePlan(["embed", "block000"], [s, s]), StagePlan(["block001", "head"], [s, s])],
                2, Schedule.one_f_one_b)
    params = default_params()
    assert params.comm_efficiency != params.inter_comm_efficiency
    m = evaluate(plan, graph, cluster, training, params)
    nbytes = graph.layers[1].output_bytes * 4        # micro-batch of 8 / 2 = 4 samples
    send = p2p_time(nbytes / 4, cluster.inter_node_per_gpu, params.inter_comm_efficiency)
    gather = allgather_time(4, nbytes, cluster.intra_node, params.comm_efficiency)
    assert m.stages[0].transfer_s == pytest.approx(2 * (send + gather), rel=1e-12)
