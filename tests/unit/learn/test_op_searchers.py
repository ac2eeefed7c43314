"""The searchers on the operator space (Auto-MAP's DQN, annealing, random search).

* the pruning of equivalent (dominated) configurations keeps an optimum: brute force over
  the kept configurations equals brute force over all of them;
* an episode of the DQN's environment ends with the potential equal to the table price of
  its plan (the shaped rewards sum to −T/ref);
* every searcher's reported value is the independent evaluator's price of its plan, never
  below the proven optimum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autopar_opt.learn.base import run_searcher, torch_available
from autopar_opt.learn.op_space import OpSearchSpace, kept_configs
from autopar_opt.opspace.pipeline import pipeline_objective
from autopar_opt.opspace.solve import solve_operator_space
from support.opspace_cases import context, random_graph


def _space(seed=3, n_ops=5, pp=(1,), mb=(1,)):
    g = random_graph(np.random.default_rng(seed), n_ops)
    ctx = context(4, batch=8)
    return g, ctx, OpSearchSpace(lambda b: g, ctx, pp_degrees=pp, microbatches=mb)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_pruning_keeps_an_optimum(seed):
    _, _, space = _space(seed, 4)
    for i in range(len(space)):
        t = space.tables(i)
        kept = kept_configs(t)
        assert all(len(k) for k in kept)

        def best(choices):
            return min(pipeline_objective(t, list(ch))[0] for ch in __import__("itertools").product(*choices))
        full = [range(len(c)) for c in t.configs]
        if math.prod(len(c) for c in full) > 50_000:
            continue
        assert best([list(k) for k in kept]) == pytest.approx(best(full), rel=1e-12)


def test_env_episode_potential_is_the_table_price():
    from autopar_opt.learn.op_env import OpEnv
    _, _, space = _space(4, 5)
    env = OpEnv(space)
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs = env.reset()
        total, done = 0.0, False
        while not done:
            a = obs.meaning[int(rng.integers(len(obs.meaning)))]
            r, done = env.step(a)
            total += r
            if not done:
                obs = env.observe()
                assert len(obs.meaning) > 0
        cand = env.candidate()
        assert -total * env.scale == pytest.approx(space.price(cand).time_s, rel=1e-9)


@pytest.mark.parametrize("name", ["random", "anneal", "dqn"])
def test_searchers_report_the_evaluators_value(name):
    if name == "dqn" and not torch_available():
        pytest.skip("the dqn searcher needs PyTorch")
    g, ctx, space = _space(5, 5)
    res = run_searcher(name, space, 30.0, seed=0, max_samples=60)
    optimum = solve_operator_space(g, ctx, 4).value
    assert res.feasible and res.value >= optimum * (1 - 1e-9)
    cand_value = space.price(space.random_candidate(np.random.default_rng(0))).time_s
    assert cand_value >= optimum * (1 - 1e-9)
    assert res.metrics["time_s"] == pytest.approx(res.value, rel=1e-12)


def test_pipeline_task_outer_choices_are_priced_by_the_pipeline_evaluator():
    """With pp ∈ {1, 2} and c ∈ {1, 2} the outer choices include stage splits at layer
    boundaries; a candidate's table price equals the independent pipeline evaluator's."""
    from autopar_opt.model_zoo.operator_graphs import transformer_lm

    def graph_for(mb):
        return transformer_lm(mb, 64, 128, 4, 512, 100, 2, embeddings=False)

    space = OpSearchSpace(graph_for, context(4, batch=4), pp_degrees=(1, 2), microbatches=(1, 2))
    assert {o.pp for o in space.outers} == {1, 2} and {o.microbatches for o in space.outers} == {1, 2}
    rng = np.random.default_rng(1)
    for i, o in enumerate(space.outers):
        if o.pp == 2:
            cand = space.random_candidate(rng, config=i)
            _, value, _, _ = space.plan_value(cand)
            assert value == pytest.approx(space.price(cand).time_s, rel=1e-12)
    res = run_searcher("random", space, 30.0, seed=0, max_samples=40)
    assert res.feasible and res.value > 0
