"""Pipeline rules on a mixed fleet (issue 34): where each stage runs and what links it uses.

A pipeline over a :class:`~autopar_opt.ir.fleet.Fleet` places stage ``i`` on
group ``groups[i]`` with ``sizes[i]`` devices; a stage never straddles two
groups. The stages of one group take consecutive ranks of that group in
pipeline order and follow, inside the group, the rules of
:func:`~autopar_opt.ir.pipeline.stage_devices_problem` (whole nodes from a node
boundary, or a divisor of a node inside one node). A boundary between two
stages of one group is intra-node when they share a node, else the group's
inter-node tier; between two groups it is the path tier
(:meth:`~autopar_opt.ir.fleet.Fleet.path_tier`).

:func:`fleet_shapes` enumerates the shapes the search tries: every ordered,
non-empty subset of the groups, each used group one contiguous run of
congruent stages that use the whole group (today's congruence rule inside it).
"""

from __future__ import annotations

from itertools import permutations, product

from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import LinkTier
from autopar_opt.ir.pipeline import (PlanError, check_placement, check_plan_layers,
                                     pipeline_rule_broken, stage_devices_problem)
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import divisors
from autopar_opt.ir.training import Training

#: Most stage shapes a fleet search enumerates (over every pp); beyond it the spec
#: must list ``search.pp_degrees``.
MAX_FLEET_SHAPES = 4096


def group_offsets(groups: list[int] | tuple[int, ...], sizes: list[int] | tuple[int, ...]) -> list[int]:
    """First rank of every stage inside its own group (stages of a group take
    consecutive ranks of it in pipeline order)."""
    used: dict[int, int] = {}
    out = []
    for g, d in zip(groups, sizes):
        out.append(used.get(g, 0))
        used[g] = used.get(g, 0) + d
    return out


def fleet_stage_problem(groups: list[int] | tuple[int, ...], sizes: list[int] | tuple[int, ...],
                        fleet: Fleet) -> str | None:
    """Why stages on ``groups`` with ``sizes`` devices are not a valid pipeline (None: they are)."""
    if len(groups) != len(sizes):
        return f"{len(groups)} stage groups for {len(sizes)} stages"
    for i, g in enumerate(groups):
        if not 0 <= g < len(fleet.groups):
            return f"stage {i} names group {g}; the fleet has groups 0-{len(fleet.groups) - 1}"
    for g in sorted(set(groups)):
        cl = fleet.groups[g]
        mine = [d for h, d in zip(groups, sizes) if h == g]
        why = stage_devices_problem(mine, cl.gpus_per_node, cl.num_devices)
        if why:
            return f"group {cl.name}: {why}"
    for i in range(len(groups) - 1):
        if groups[i] != groups[i + 1]:
            try:
                fleet.path_tier(groups[i], groups[i + 1])
            except ValueError as exc:
                return f"boundary {i}: {exc}"
    return None


def fleet_boundaries_intra(groups: list[int] | tuple[int, ...], sizes: list[int] | tuple[int, ...],
                           fleet: Fleet) -> list[bool]:
    """Per boundary ``i``: stages ``i`` and ``i+1`` share a node (same group, and
    stage ``i+1`` does not start on a node boundary of it)."""
    offs = group_offsets(groups, sizes)
    return [groups[i] == groups[i + 1] and offs[i + 1] % fleet.groups[groups[i]].gpus_per_node != 0
            for i in range(len(groups) - 1)]


def boundary_tier(fleet: Fleet, g_from: int, g_to: int, intra: bool) -> LinkTier:
    """The tier a transfer from a stage of group ``g_from`` to one of ``g_to``
    crosses: the group's intra-node tier as one pair of GPUs sees it (``intra``: the
    two stages share a node; ``Cluster.intra_pair``, a pair's links on a point-to-point
    board) or inter-node tier as one GPU sees it (``Cluster.inter_node_per_gpu``: every
    GPU of a node sends at once), or the path tier between two groups (never intra-node)."""
    if g_from == g_to:
        cl = fleet.groups[g_from]
        return cl.intra_pair if intra else cl.inter_node_per_gpu
    return fleet.path_tier(g_from, g_to)


def fleet_tie_tier(fleet: Fleet, groups: list[int] | tuple[int, ...],
                   sizes: list[int] | tuple[int, ...]) -> LinkTier | None:
    """The link between the first and the last stage (tied parameters' gradients),
    None with one stage: inside one group the tier of the span between their first
    ranks, across groups the path tier."""
    if len(sizes) < 2:
        return None
    first, last = groups[0], groups[-1]
    if first != last:
        return fleet.path_tier(first, last)
    return fleet.groups[first].tier_for_span(0, group_offsets(groups, sizes)[-1])


def validate_fleet_plan(plan: Plan, graph: LayerGraph, fleet: Fleet, training: Training) -> list[int]:
    """:func:`~autopar_opt.ir.pipeline.validate_plan` on a fleet: every rule of a
    plan, the stages' groups and devices by :func:`fleet_stage_problem`, every
    strategy tagged with its stage's group. Returns the devices of every stage."""
    check_placement(plan, graph)
    if plan.stage_groups is None or plan.stage_devices is None:
        raise PlanError("a plan on a mixed fleet names every stage's group and devices "
                        "(stage_groups, stage_devices)")
    if len(plan.stage_groups) != plan.pp or len(plan.stage_devices) != plan.pp:
        raise PlanError(f"stage_groups / stage_devices list {len(plan.stage_groups)} / "
                        f"{len(plan.stage_devices)} entries for {plan.pp} stages")
    why = fleet_stage_problem(plan.stage_groups, plan.stage_devices, fleet)
    if why:
        raise PlanError(f"stages on groups {list(plan.stage_groups)} with devices "
                        f"{list(plan.stage_devices)}: {why}")
    sizes = list(plan.stage_devices)
    check_plan_layers(plan, graph, training, sizes)
    for i, (st, g) in enumerate(zip(plan.stages, plan.stage_groups)):
        for name, s in zip(st.layers, st.strategies):
            if s.group != g:
                raise PlanError(f"layer {name}: its strategy is tagged with group {s.group}, "
                                f"stage {i} runs on group {g} ({fleet.groups[g].name})")
    return sizes


def group_stage_counts(fleet: Fleet, g: int, num_layers: int) -> list[int]:
    """Stage counts ``n`` that split group ``g`` whole into congruent stages."""
    cl = fleet.groups[g]
    return [n for n in divisors(cl.num_devices)
            if n <= num_layers and pipeline_rule_broken(n, cl.num_devices, cl.gpus_per_node) is None]


def fleet_shapes(fleet: Fleet, num_layers: int, pp_degrees: tuple[int, ...] | None = None,
                 groups: tuple[int, ...] | None = None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every ``(stage groups, stage devices)`` the fleet search tries: each ordered
    non-empty subset of ``groups`` (default all), each used group one run of ``n``
    congruent stages of ``N_g / n`` devices (:func:`group_stage_counts`), ``pp`` in
    ``pp_degrees`` (None: any) and at most the layers; pairs of groups without a
    link are never adjacent. Stops past :data:`MAX_FLEET_SHAPES`."""
    pool = tuple(range(len(fleet.groups))) if groups is None else tuple(groups)
    counts = {g: group_stage_counts(fleet, g, num_layers) for g in pool}
    out: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for k in range(1, len(pool) + 1):
        for order in permutations(pool, k):
            if any(fleet.link(a, b) is None for a, b in zip(order, order[1:])):
                continue
            for ns in product(*(counts[g] for g in order)):
                pp = sum(ns)
                if pp > num_layers or (pp_degrees is not None and pp not in pp_degrees):
                    continue
                gs = tuple(g for g, n in zip(order, ns) for _ in range(n))
                ds = tuple(fleet.groups[g].num_devices // n for g, n in zip(order, ns) for _ in range(n))
                out.append((gs, ds))
                if len(out) > MAX_FLEET_SHAPES:
                    return out
    return out
