"""The two-stage tiny decoder the last-stage loss memory tests price.

``decoder_lm("tiny", 2 blocks, s = 256, h = 256, 4 heads, f = 1024, V = 1000)``
on one node of 4 GPUs, cut after the first two layers into pp = 2 stages of
dp = 2, tp = 1, 1F1B with 2 micro-batches: only the output layer (last stage)
has a loss working set, so a runtime capability of the loss moves the last
stage's bytes and leaves the first stage's alone.
"""

from __future__ import annotations

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Schedule, Training


def evaluate_on_off(on: Training, off: Training):
    """(metrics with ``on``, metrics with ``off``, modelled bytes in GiB of
    [on stage 0, on stage 1, off stage 0, off stage 1]): each stage's peak
    less its reserve."""
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 4)
    s = Strategy(dp=2, tp=1)
    names = [layer.name for layer in graph.layers]
    plan = Plan([StagePlan(names[:2], [s, s]), StagePlan(names[2:], [s, s])], 2,
                Schedule.one_f_one_b)
    m_on, m_off = evaluate(plan, graph, cluster, on), evaluate(plan, graph, cluster, off)
    modelled = [st.peak_memory_gib - st.reserve_gib for st in (*m_on.stages, *m_off.stages)]
    return m_on, m_off, modelled
