"""The pipeline rules are asked in one place (``pipeline.pipeline_rule_broken``):
the search's outer configurations, the cost tables, the spec's plan builder and
the plan validator agree on every ``pp`` of several clusters, and with the rule
written out by hand here (pp divides the devices; the stage's devices divide
or are a multiple of a node's GPUs; no more stages than layers)."""

from __future__ import annotations

import pytest

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.pipeline import PlanError, microbatch_rule_broken, pipeline_rule_broken, validate_plan
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.search.configs import pipeline_degrees
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from support.mip_instances import repeated_graph

CLUSTERS = [(1, 4), (2, 4), (3, 4), (2, 6), (4, 2)]


def _expected(pp: int, n: int, g: int, layers: int) -> bool:
    d = n // pp if n % pp == 0 else 0
    return d > 0 and (g % d == 0 or d % g == 0) and pp <= layers


@pytest.mark.parametrize("nodes,gpus", CLUSTERS)
def test_every_caller_agrees_with_the_rule(nodes, gpus):
    graph = repeated_graph(0, "abbbbc")          # 6 layers
    cluster, training = small_cluster(nodes, gpus), Training(12, 128)
    n = cluster.num_devices
    allowed = set(pipeline_degrees(graph, cluster, SearchSpace()))
    for pp in range(1, n + 2):
        ok = _expected(pp, n, gpus, len(graph.layers))
        assert (pipeline_rule_broken(pp, n, gpus, len(graph.layers)) is None) is ok, pp
        assert (pp in allowed) is ok, pp
        if pp > len(graph.layers):
            continue
        try:
            build_cost_tables(graph, cluster, training, SearchSpace(), default_params(), pp, 2,
                              Schedule.one_f_one_b)
            tables_ok = True
        except ValueError as exc:
            tables_ok = False
            assert str(exc) == str(pipeline_rule_broken(pp, n, gpus)), pp
        assert tables_ok is ok, pp
        if n % pp == 0:
            d = n // pp
            per = [list(range(i * len(graph.layers) // pp, (i + 1) * len(graph.layers) // pp))
                   for i in range(pp)]
            plan = Plan([StagePlan([graph.layers[u].name for u in us], [Strategy(1, d)] * len(us))
                         for us in per], 2, Schedule.one_f_one_b)
            if ok:
                assert validate_plan(plan, graph, cluster, training) == [d] * pp
            else:
                with pytest.raises(PlanError, match="neither divide nor are a multiple"):
                    validate_plan(plan, graph, cluster, training)


def test_microbatch_rule():
    assert microbatch_rule_broken(4, 16) is None
    broken = microbatch_rule_broken(5, 16)
    assert "5 micro-batches do not divide the global batch (16)" in broken.rule
    assert "e.g. 4; one of 1, 2, 4, 8, 16" in broken.fix
    # with the data-parallel degree, only counts whose micro-batch splits over it
    assert microbatch_rule_broken(5, 16, dp=4).fix.endswith("e.g. 4; one of 1, 2, 4")
    assert "not a multiple of dp=3" in microbatch_rule_broken(5, 16, dp=3).fix
