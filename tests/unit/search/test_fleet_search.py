"""The fleet search's pieces (issue 34): batch grid, class partitions, the load-balancing
bound, the cutoff, and what a fleet search certifies.

Oracles: hand-counted grids and partitions; the LP bound is at most every
configuration's brute-force optimum and at least the analytic bound; a
configuration pruned by the cutoff carries a bound at or above it.
"""

from __future__ import annotations

import math

import numpy as np

import pytest

from autopar_opt.core.bounds import Status
from autopar_opt.cost.fleet_tables import build_fleet_tables
from autopar_opt.cost.params import default_params
from autopar_opt.ir.fleet import Fleet, GroupLink
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.synthetic import random_chain
from autopar_opt.search.bounds import analytic_lower_bound
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.fleet import FleetSearch, fleet_outer_configs
from autopar_opt.search.fleet_bounds import load_balance_bound
from autopar_opt.search.stage_lp import knapsack_lp_bound
from autopar_opt.search.replicas import batch_quantum, batch_splits, replica_partitions
from support.fleet_bruteforce import shape_optimum
from support.fleets import SPACE, two_groups


def test_batch_grid() -> None:
    assert batch_quantum(1024, 16) == 64
    assert batch_quantum(1000, 16) == 50          # the largest divisor not above 62.5
    assert batch_quantum(8, 16) == 1
    assert batch_splits(8, 2, 2) == [(2, 6), (4, 4), (6, 2)]
    assert batch_splits(6, 2, 3) == [(2, 2, 2)]
    assert len(batch_splits(1024, 64, 2)) == 15


def test_partitions_need_links_between_classes() -> None:
    c = make_cluster("x", 1, 2, "A100-80GB")
    groups = tuple(make_cluster(n, 1, 2, "A100-80GB") for n in ("a", "b", "c"))
    tier = LinkTier("l", 10.0, 1.0)
    full = Fleet("f", groups, (GroupLink("a", "b", tier), GroupLink("a", "c", tier),
                               GroupLink("b", "c", tier)))
    assert len(replica_partitions(full)) == 7      # a|b a|c b|c a|b|c ab|c ac|b bc|a
    part = Fleet("f", groups, (GroupLink("a", "b", tier), GroupLink("b", "c", tier)))
    assert replica_partitions(part) == [((0,), (1,)), ((0, 2), (1,)), ((1,), (2,))]
    assert replica_partitions(Fleet.of(c)) == []


def test_lp_bounds_are_valid_and_ordered() -> None:
    fleet = two_groups(slow=(1, 2), fast=(1, 4), slow_device="A100-40GB")
    graph, params = random_chain(4, 5), default_params()
    training = Training(global_batch_size=8, seq_len=1024, memory_reserve_gib=20.0)
    checked = 0
    for cfg in fleet_outer_configs(graph, fleet, training, SPACE, mixed=True)[:12]:
        t = build_fleet_tables(graph, fleet, training, SPACE, params, cfg.microbatches, cfg.schedule,
                               cfg.stage_groups, cfg.stage_devices)
        if any(not s for s in t.strategies):
            continue
        lp, analytic = load_balance_bound(t), analytic_lower_bound(t).value
        knap = knapsack_lp_bound(t)
        assert type(lp) is float and type(knap) is float      # no numpy scalar reaches JSON
        ref = shape_optimum(graph, fleet, training, SPACE, params, cfg.stage_groups,
                            cfg.stage_devices, cfg.microbatches, cfg.schedule)
        if ref is not None:
            assert lp <= ref[0] * (1 + 1e-9), cfg.label()
            assert knap <= ref[0] * (1 + 1e-9), cfg.label()
            checked += 1
        if math.isfinite(lp) and math.isfinite(knap):
            assert knap >= lp * (1 - 1e-6), cfg.label()      # keeps each stage's strategy choice
        if math.isfinite(analytic) and math.isfinite(lp):
            # the LP is at least the analytic bound's time part (it keeps each stage's
            # balance); the analytic bound's memory Lagrangian couples a layer's time and
            # memory, which the LP's per-stage minima do not, so it may exceed the LP
            time_part = (sum(float(np.min(a)) for a in t.time) * (1 + (t.rounds - 1) / t.pp)
                         + max(float(np.min(g)) for g in t.sync) + params.iteration_overhead_s)
            assert lp >= min(analytic, time_part) * (1 - 1e-6)
    assert checked >= 4


def test_cutoff_prunes_with_a_valid_bound() -> None:
    fleet = two_groups(slow=(1, 2), fast=(1, 4))
    graph, params = random_chain(4, 4), default_params()
    training = Training(global_batch_size=8, seq_len=1024)
    free = FleetSearch(graph, fleet, training, SPACE, params, SearchOptions(solver="dp", rel_gap=0.0),
                       mixed=True).run()
    cut = free.certificate.primal * 0.99          # pretend a 1 % better plan of another shape exists
    res = FleetSearch(graph, fleet, training, SPACE, params, SearchOptions(solver="dp", rel_gap=0.0),
                      mixed=True, cutoff=cut, cutoff_source="a test").run()
    pruned = [r for r in res.certificate.configurations if r.pruned_by and "a test" in r.pruned_by]
    assert pruned and all(r.lower_bound >= cut for r in pruned)
    assert res.plan is None or res.metrics.iteration_time_s < cut
    assert all(r.status in (Status.pruned, Status.infeasible, Status.optimal)
               for r in res.certificate.configurations)


def test_fleet_search_certifies_on_a_plain_one_group_fleet() -> None:
    """A one-group fleet searched by the fleet search gives today's optimum."""
    from autopar_opt.search.engine import run_search

    fleet = two_groups(slow=(1, 2), fast=(1, 4))
    graph, params = random_chain(4, 4), default_params()
    training = Training(global_batch_size=8, seq_len=1024)
    one = Fleet.of(fleet.groups[1])
    res = FleetSearch(graph, one, training, SPACE, params, SearchOptions(solver="dp", rel_gap=0.0)).run()
    ref = run_search(graph, fleet.groups[1], training, SPACE, params, SearchOptions(solver="dp", rel_gap=0.0))
    assert res.certificate.primal == pytest.approx(ref.certificate.primal, rel=1e-12)
    assert res.certificate.lower_bound == pytest.approx(ref.certificate.lower_bound, rel=1e-12)


def test_a_stop_signal_ends_every_phase_with_its_bounds() -> None:
    """A stop request during the fleet search (Ctrl-C): the result says interrupted, keeps
    the best plan found so far, and every record that was not decided keeps its bound."""
    from autopar_opt.core.bounds import SearchStatus
    from autopar_opt.search.mixed import run_fleet_search

    fleet = two_groups(slow=(1, 2), fast=(1, 2))
    graph, params = random_chain(4, 3), default_params()
    training = Training(global_batch_size=8, seq_len=1024)
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 12

    options = SearchOptions(solver="dp", rel_gap=0.0, should_stop=stop, stop_signal=lambda: 15)
    res = run_fleet_search(graph, fleet, training, SPACE, params, options, split_parts=4)
    assert res.interrupted_by == 15 and res.status(0.0) is SearchStatus.interrupted
    assert res.certificate.configurations
    assert all(r.lower_bound > -math.inf or "interrupted" in r.message or r.status is Status.not_solved
               for r in res.certificate.configurations)


def test_analytic_bound_reports_the_least_memory_as_a_number() -> None:
    """The bound's least memory (the infeasibility messages' figure) is the larger of the
    largest single-layer need and the stored bytes spread over the stages, by hand."""
    import numpy as np

    fleet = two_groups(slow=(1, 2), fast=(1, 4))
    graph, params = random_chain(4, 4), default_params()
    t = build_fleet_tables(graph, fleet, Training(global_batch_size=8, seq_len=1024), SPACE, params,
                           2, fleet_outer_configs(graph, fleet, Training(global_batch_size=8, seq_len=1024),
                                                  SPACE, mixed=True)[0].schedule, (0, 1), (2, 4))
    m = min(t.inflight)
    per = [float(np.min(w + m * h + x)) for w, h, x in zip(t.weight_bytes, t.act_bytes, t.working_bytes)]
    stored = sum(float(np.min(w + m * h)) for w, h in zip(t.weight_bytes, t.act_bytes))
    held = max(float(np.min(x)) for x in t.working_bytes)
    assert analytic_lower_bound(t).least_memory_bytes == pytest.approx(max(max(per), (stored + held) / 2))


def test_time_is_shared_among_the_configurations_the_strong_bound_leaves_open(monkeypatch) -> None:
    """The first pass shares the time left among the configurations still open by the
    bound each will be decided on (the knapsack LP, not the analytic bound), and decides
    them in the order of that bound. Oracle: every configuration's strong bound computed
    here (the larger of its analytic/load-balance and knapsack LP bounds), the engine's
    rule ``share = max(R / open, min(1, R))``, capped at the share of the first
    configuration solved (``first_pass``), with the time left ``R`` held at 100 s (no
    clock: the check is exact). The cut is taken between two strong bounds where the analytic
    bound leaves more configurations open than the strong one (12 against 8 under the
    calibration of 2026-11-29 morning), and in analytic order the strong bounds are not sorted."""
    from autopar_opt.search.fleet import fleet_config_bound

    fleet = two_groups(slow=(1, 2), fast=(1, 4), slow_device="A100-40GB")
    graph, params = random_chain(4, 3), default_params()
    training = Training(global_batch_size=8, seq_len=1024)
    strong, analytic = {}, {}
    for cfg in fleet_outer_configs(graph, fleet, training, SPACE, mixed=True):
        t = build_fleet_tables(graph, fleet, training, SPACE, params, cfg.microbatches, cfg.schedule,
                               cfg.stage_groups, cfg.stage_devices, with_edges=False)
        analytic[cfg] = fleet_config_bound(t).value
        strong[cfg] = analytic[cfg] if math.isinf(analytic[cfg]) else max(analytic[cfg], knapsack_lp_bound(t))
    finite = sorted(v for v in strong.values() if math.isfinite(v))
    # the cut between two strong bounds where the analytic bound leaves the most more open
    cuts = [(a + b) / 2 for a, b in zip(finite, finite[1:]) if b > a]
    cut = max(cuts, key=lambda c: (sum(v < c for v in analytic.values())
                                   - sum(v < c for v in strong.values()), -c))
    k = sum(v < cut for v in strong.values())
    assert 2 <= k < len(finite)
    assert sum(v < cut for v in analytic.values()) > k          # the analytic bound leaves more

    monkeypatch.setattr(FleetSearch, "remaining_s", lambda self: 100.0)
    seen: list[tuple[float, int, float]] = []
    solve = FleetSearch.solve

    def spy(self, k, share):
        rest = [c for c, _, _ in self.prepared[k:]]
        below = self.incumbent * (1 - self.options.rel_gap)
        seen.append((share, sum(strong[c] < below for c in rest), strong[rest[0]]))
        return solve(self, k, share)

    monkeypatch.setattr(FleetSearch, "solve", spy)
    search = FleetSearch(graph, fleet, training, SPACE, params,
                         SearchOptions(solver="dp", rel_gap=0.01, time_limit_s=100.0), mixed=True,
                         cutoff=cut, cutoff_source="a test")
    search.first_pass()
    assert len(seen) == len(strong)
    cap = None          # never more than the first configuration solved had (first_pass)
    for (share, still_open, _), rec in zip(seen, search.records):
        want = max(100.0 / max(still_open, 1), 1.0)
        want = want if cap is None else min(want, cap)
        assert share == pytest.approx(want, rel=1e-12)
        if cap is None and rec.status is not Status.pruned:
            cap = want
    decided = [b for _, _, b in seen if b < cut]
    assert len(decided) == k and decided == sorted(decided)     # the most promising first


def test_a_split_no_micro_batch_count_can_take_says_so(tmp_path):
    """A100 x2 + H100 x2 with micro-batches [2, 4]: a split that gives one group an odd
    batch share has no configuration at all (no allowed count splits it), not "no plan
    that fits" (oracle: the shares' parity; the A100 group alone has 2 data-parallel ranks
    at most, so odd shares cannot be split into 2 or 4 micro-batches either way)."""
    import json

    from support.cli import run_cli
    spec = tmp_path / "fleet.yaml"
    spec.write_text(
        "model: {zoo: gpt-1.7b, overrides: {num_layers: 2}}\n"
        "cluster:\n  name: a100+h100\n  groups:\n"
        "    - {name: a100, device: A100-80GB, nodes: 1, gpus_per_node: 2}\n"
        "    - {name: h100, device: H100-SXM-80GB, nodes: 1, gpus_per_node: 2}\n"
        "  links:\n    - {between: [a100, h100], bandwidth_gb_per_s: 25, latency_us: 20}\n"
        "training: {global_batch_size: 16, seq_len: 2048, dtype: bf16, memory_reserve_gib: 0.0}\n"
        "target: none\n"
        "search: {pp_degrees: [1, 2], tp_degrees: [1, 2], sequence_parallel: [false], "
        "zero_levels: [0, 1], hybrid_sharding: [false], recompute: [none], schedules: [1f1b], "
        "microbatches: [2, 4]}\n")
    code, text = run_cli("solve", spec, "--json")
    assert code == 0, text
    doc = json.loads(text)
    # the fleet's MFU has its causal count too (as a cluster plan's: metrics.mfu_causal)
    from autopar_opt.cost.compute import uncomputed_attention_share
    from autopar_opt.spec import load_spec
    share = uncomputed_attention_share(load_spec(spec).graph.layers)
    assert 0 < share < 1
    assert doc["metrics"]["mfu_causal"] == pytest.approx(doc["metrics"]["mfu"] * (1 - share))
    # each group alone: its plan, or why it has none (the A100 pair is pruned by its bound)
    alone = {h["group"]: h for h in doc["homogeneous"]}
    assert alone["h100"]["primal"] is not None
    if alone["a100"]["primal"] is None:
        assert set(alone["a100"]["statuses"]) <= {"pruned", "infeasible"}
        code, summary = run_cli("solve", spec)
        assert "a100 alone: pruned: no plan of it alone can beat the fleet's, proven >=" in summary
    rows = [r for r in doc["certificate"]["configurations"]
            if r["status"] == "infeasible"]
    assert rows
    for r in rows:
        share = int(r["message"].split("batch share of ")[1].split()[0])
        assert share % 2 == 1 and "no allowed micro-batch count splits it" in r["message"]
        assert "fits" not in r["message"]


def test_a_split_the_time_limit_left_without_a_bound_says_so():
    """A split reached after the deadline keeps lower bound -inf: its message does not say
    its bound is recorded, and certificate.methods does not say the method (none, no time
    left) proved the global lower bound."""
    import math

    from autopar_opt.core.bounds import Status
    from autopar_opt.search.certificate import ConfigRecord, method_records
    from autopar_opt.search.replicas import SplitConfig, bound_words

    assert bound_words(1.5) == "its bound is recorded"
    assert "before its bound was computed" in bound_words(-math.inf)
    rows = [ConfigRecord(SplitConfig(((0,), (1,)), (8, 8)), Status.not_solved, None, -math.inf,
                         0.0, message="search time limit reached before this split; "
                         + bound_words(-math.inf)),
            ConfigRecord(SplitConfig(((0,), (1,)), (4, 12)), Status.optimal, 1.0, 1.0, 0.1,
                         method="dp")]
    notes = {m["method"]: m["message"] for m in method_records(rows)}
    assert "proved the global lower bound" not in notes["none (no time left)"]
    assert "left the global lower bound unproven" in notes["none (no time left)"]


FLEET3 = """\
model: {{zoo: gpt-1.7b, overrides: {{num_layers: 2}}}}
cluster:
  name: three
  groups:
    - {{name: a80, device: A100-80GB, nodes: 1, gpus_per_node: 2}}
    - {{name: h100, device: H100-SXM-80GB, nodes: 2, gpus_per_node: 1, nic_gb_per_s: 25}}
{third}  links:
    - {{between: [a80, h100], bandwidth_gb_per_s: 50, latency_us: 10}}
{links}training: {{global_batch_size: 32, seq_len: 2048, dtype: bf16, optimizer: adam_mixed,
           memory_reserve_gib: 0.0}}
target: none
search: {{pp_degrees: [1, 2, 3], tp_degrees: [1, 2], sequence_parallel: [false], zero_levels: [0, 1],
         hybrid_sharding: [false], recompute: [none, full], schedules: [1f1b], microbatches: [2, 4]}}
"""


def test_a_third_group_never_makes_the_fleet_worse(tmp_path):
    """QA round 6 (F1, high): a replica class of two groups was searched over shapes using
    one of them; the split's pricing then raised "class on groups [1, 2] has stages on
    groups [1]" and the solve of this ordinary 3-group fleet exited 2 ("invalid plan").
    A class's plan runs on every group of the class (a plan on fewer is another
    partition's). Oracle: monotonicity, the fleet without its A100-40GB pair solves at
    0.16595 s; with it the optimum may only improve (QA's brute force of the three-group
    space: 0.16433 s, three one-group classes)."""
    import json

    from support.cli import run_cli
    two = tmp_path / "two.yaml"
    two.write_text(FLEET3.format(third="", links=""))
    three = tmp_path / "three.yaml"
    three.write_text(FLEET3.format(
        third="    - {name: a40, device: A100-40GB, nodes: 1, gpus_per_node: 2}\n",
        links="    - {between: [a80, a40], bandwidth_gb_per_s: 50, latency_us: 10}\n"
              "    - {between: [h100, a40], bandwidth_gb_per_s: 20, latency_us: 30}\n"))
    got = {}
    for name, path in (("two", two), ("three", three)):
        code, text = run_cli("solve", path, "--json", "--quiet")
        assert code == 0, text
        doc = json.loads(text)
        assert doc["status"] == "optimal"
        got[name] = doc["certificate"]["primal"]
    assert got["three"] <= got["two"] * (1 + 1e-9)


def test_a_group_proven_infeasible_alone_and_an_unbounded_gap_are_said(tmp_path):
    """QA round 6 (W1, W2): the fleet report said a group proven infeasible alone had
    "no plan searched: its bound already exceeds the fleet's plan", the summary "proven >=
    inf s", and a time-limited run's certificate line "gap inf" without its plan."""
    import json

    from support.cli import run_cli
    from autopar_opt.cli.fleet import summary
    from autopar_opt.reports.fleet import build_context
    two = tmp_path / "two.yaml"
    two.write_text(FLEET3.format(third="", links=""))
    code, text = run_cli("solve", two, "--json", "--quiet")
    assert code == 0, text
    doc = json.loads(text)
    doc["homogeneous"][0].update(primal=None, lower_bound="inf", statuses=["infeasible"])
    doc["certificate"].update(lower_bound="-inf", gap="inf")
    words = summary(doc)
    assert f"{doc['homogeneous'][0]['group']} alone: no plan fits (proven)\n" in words + "\n"
    assert "proven >= inf" not in words and "no lower bound proven" in words
    row = build_context(doc)["homogeneous"][0]
    assert "no plan fits (proven)" in row["primal"] and "already exceeds" not in row["primal"]
