"""Mixed fleets (issue 34): groups, links, the path tier and the pipeline rules on a fleet.

Oracles are hand-derived: the slowest link on a path, which stages share a
node, the shapes of a two-group fleet counted by hand, and each broken rule
named in its error.
"""

from __future__ import annotations

import pytest

from autopar_opt.ir.fleet import Fleet, GroupLink, group_cluster
from autopar_opt.ir.fleet_pipeline import (boundary_tier, fleet_boundaries_intra, fleet_shapes,
                                           fleet_stage_problem, fleet_tie_tier, group_offsets,
                                           validate_fleet_plan)
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.pipeline import PlanError
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.synthetic import random_chain
from support.fleets import two_groups


def _fleet() -> Fleet:
    a = make_cluster("a100", 2, 8, "A100-80GB")                  # inter 25 GB/s, 10 µs (catalog)
    h = make_cluster("h100", 1, 8, "H100-SXM-80GB")              # inter 50 GB/s, 10 µs
    return Fleet("mix", (a, h), (GroupLink("a100", "h100", LinkTier("dc", 12.5, 20.0)),))


def test_path_tier_is_the_slowest_link_on_the_path() -> None:
    fleet = _fleet()
    tier = fleet.path_tier(0, 1)
    assert tier.bandwidth_gb_per_s == 12.5           # min(25, 50, 12.5): the link
    assert tier.latency_us == 30.0                   # the link's 20 + max(10, 10)
    fast = Fleet("mix", fleet.groups, (GroupLink("a100", "h100", LinkTier("dc", 400.0, 1.0)),))
    assert fast.path_tier(1, 0).bandwidth_gb_per_s == 25.0   # the A100 nodes' NICs bind
    assert fleet.path_tier(0, 0) is fleet.groups[0].inter_node
    assert fleet.slowest_path([0, 1]).bandwidth_gb_per_s == 12.5


def test_missing_link_is_named() -> None:
    a, h = _fleet().groups
    bare = Fleet("bare", (a, h), ())
    assert bare.missing_links() == [("a100", "h100")]
    with pytest.raises(ValueError, match="no link between groups a100 and h100"):
        bare.path_tier(0, 1)


def test_one_group_fleet_is_the_cluster() -> None:
    a = make_cluster("a100", 2, 8, "A100-80GB")
    fleet = Fleet.of(a)
    assert fleet.groups == (a,) and fleet.num_devices == 16
    assert group_cluster(a, 0) is a and group_cluster(fleet, 0) is a
    with pytest.raises(ValueError, match="one group"):
        group_cluster(a, 1)


def test_offsets_boundaries_and_tiers() -> None:
    fleet = _fleet()
    groups, sizes = (0, 0, 0, 1), (4, 4, 8, 8)      # a100: 4+4 (node 0) then 8 (node 1); h100: 8
    assert group_offsets(groups, sizes) == [0, 4, 8, 0]
    assert fleet_boundaries_intra(groups, sizes, fleet) == [True, False, False]
    assert boundary_tier(fleet, 0, 0, True) is fleet.groups[0].intra_node
    assert boundary_tier(fleet, 0, 0, False) is fleet.groups[0].inter_node
    assert boundary_tier(fleet, 0, 1, False).bandwidth_gb_per_s == 12.5
    assert fleet_tie_tier(fleet, groups, sizes).bandwidth_gb_per_s == 12.5   # a100 -> h100
    assert fleet_tie_tier(fleet, (0, 0), (8, 8)) is fleet.groups[0].inter_node
    assert fleet_tie_tier(fleet, (1,), (8,)) is None


def test_stage_rules_inside_each_group() -> None:
    fleet = _fleet()
    assert fleet_stage_problem((0, 1), (16, 8), fleet) is None
    assert "group h100" in fleet_stage_problem((0, 1), (16, 16), fleet)       # 16 > 8 GPUs
    assert "inside a node" in fleet_stage_problem((0, 0), (4, 8), fleet)     # whole node at rank 4
    assert "group 2" in fleet_stage_problem((2,), (8,), fleet)
    bare = Fleet("bare", fleet.groups, ())
    assert "no link" in fleet_stage_problem((0, 1), (16, 8), bare)


def test_shapes_of_two_groups_counted_by_hand() -> None:
    fleet = two_groups(slow=(1, 2), fast=(1, 4))
    shapes = fleet_shapes(fleet, num_layers=6)
    # slow: 1 or 2 stages (2 GPUs); fast: 1, 2 or 4 stages (4 GPUs): 2 + 3 alone, 2 x (2 x 3) mixed
    assert len(shapes) == 2 + 3 + 12
    assert ((0, 1), (2, 4)) in shapes and ((1, 1, 0), (2, 2, 2)) in shapes
    assert len(fleet_shapes(fleet, num_layers=6, pp_degrees=(2,))) == 1 + 1 + 2
    assert all(len(g) <= 3 for g, _ in fleet_shapes(fleet, num_layers=3))
    assert fleet_shapes(fleet, 6, groups=(1,)) == [((1,), (4,)), ((1, 1), (2, 2)), ((1,) * 4, (1,) * 4)]


def test_validate_fleet_plan_names_the_rule() -> None:
    fleet = _fleet()
    graph = random_chain(0, 2)
    training = Training(global_batch_size=16, seq_len=1024)
    s0, s1 = Strategy(16, 1, group=0), Strategy(8, 1, group=1)
    plan = Plan([StagePlan(["l0"], [s0]), StagePlan(["l1"], [s1])], 1,
                stage_devices=[16, 8], stage_groups=[0, 1])
    assert validate_fleet_plan(plan, graph, fleet, training) == [16, 8]
    wrong_group = Plan([StagePlan(["l0"], [s0]), StagePlan(["l1"], [Strategy(8, 1)])], 1,
                       stage_devices=[16, 8], stage_groups=[0, 1])
    with pytest.raises(PlanError, match="tagged with group 0, stage 1 runs on group 1"):
        validate_fleet_plan(wrong_group, graph, fleet, training)
    with pytest.raises(PlanError, match="stage_groups, stage_devices"):
        validate_fleet_plan(Plan(plan.stages, 1), graph, fleet, training)
    with pytest.raises(PlanError, match="group h100"):
        validate_fleet_plan(Plan(plan.stages, 1, stage_devices=[16, 16], stage_groups=[0, 1]),
                            graph, fleet, training)


def test_strategy_group_is_part_of_the_layout_and_json() -> None:
    s = Strategy(2, 4, sp=True, zero=1)
    g = Strategy(2, 4, sp=True, zero=1, group=1)
    assert s.layout != g.layout and s.to_dict() == {k: v for k, v in g.to_dict().items() if k != "group"}
    assert "group" not in s.to_dict() and Strategy.from_dict(g.to_dict()) == g
    assert "@g1" in g.label() and "@" not in s.label()
    plan = Plan([StagePlan(["l0"], [g])], 1, stage_devices=[8], stage_groups=[1])
    assert Plan.from_dict(plan.to_dict()).stage_groups == [1]
    assert "stage_groups" not in Plan([StagePlan(["l0"], [s])], 1).to_dict()
