"""Group node counts as sweep axes (issue 34): "how many A100 nodes match 64 H100 nodes",
"the cheapest mix that meets a deadline".

A sweep whose base spec is a fleet (``cluster: {groups: [...], links: [...]}``)
may list ``axes.group_nodes: {GROUP: [counts...]}``: one scenario dimension per
group, each value that group's ``nodes`` (0 leaves the group out, with its
links). The axis of group ``g`` is named ``nodes:g`` in scenario axes and ids
(``a100x32n``); the combination where every group is 0 is no scenario and is
skipped. A scenario keeps one group (a plain cluster, searched as
today) or several (a fleet, searched by :mod:`autopar_opt.search.mixed`); its
price per hour is the sum over its groups of GPUs × that device's price.
"""

from __future__ import annotations

from typing import Any

from autopar_opt.core.errors import SpecProblem, did_you_mean

PREFIX = "nodes:"


def group_axis_names(group_nodes: dict[str, list[int]] | None) -> list[str]:
    """Axis names of the group-count axes, in the order they are written."""
    return [PREFIX + g for g in (group_nodes or {})]


def is_group_axis(name: str) -> bool:
    return name.startswith(PREFIX)


def group_label(name: str, value: int) -> str:
    """Scenario-id label of one group count (``a100x32n``)."""
    return f"{name[len(PREFIX):]}x{value}n"


def apply_group_nodes(data: dict[str, Any], name: str, value: int) -> None:
    """Set group ``name``'s node count in the spec mapping (mutated); 0 drops the group
    and every link that names it."""
    group = name[len(PREFIX):]
    cluster = data["cluster"]
    if value == 0:
        cluster["groups"] = [g for g in cluster["groups"] if g.get("name") != group]
        cluster["links"] = [ln for ln in cluster.get("links", []) if group not in ln.get("between", [])]
        return
    for g in cluster["groups"]:
        if g.get("name") == group:
            g["nodes"] = value


def drop_empty(data: dict[str, Any]) -> bool:
    """True when a scenario's mapping kept no group at all (every count 0)."""
    return not data["cluster"]["groups"]


def group_axis_problems(group_nodes: dict[str, list[int]] | None, base: dict[str, Any],
                        file: str) -> list[SpecProblem]:
    """Group axes that cannot apply: a base that is not a fleet, an unknown group name,
    a negative count."""
    if not group_nodes:
        return []
    cluster = base.get("cluster")
    if not (isinstance(cluster, dict) and isinstance(cluster.get("groups"), list)):
        return [SpecProblem(file, "axes.group_nodes", list(group_nodes), "group node counts need a "
                            "base cluster of groups", "write cluster: {groups: [{name: a100, device: "
                            "A100-80GB, nodes: 8, gpus_per_node: 8}, ...], links: [...]} in the base "
                            "spec")]
    names = [g.get("name") for g in cluster["groups"] if isinstance(g, dict)]
    out = []
    for group, counts in group_nodes.items():
        if group not in names:
            out.append(SpecProblem(file, f"axes.group_nodes.{group}", group, "names no group of the "
                                   "base cluster", f"use one of: {', '.join(map(str, names))}"
                                   f"{did_you_mean(group, names)}"))
        if not counts:      # the other axes refuse an empty list (QA round 9: 0 scenarios)
            out.append(SpecProblem(file, f"axes.group_nodes.{group}", [], "is an empty list "
                                   "(no scenario would run)", "give at least one node count, "
                                   "0 to leave the group out"))
        repeated = sorted({n for n in counts if counts.count(n) > 1})
        if repeated:        # two identical scenarios sharing one id and folder (QA round 9)
            out.append(SpecProblem(file, f"axes.group_nodes.{group}", list(counts),
                                   f"repeats {', '.join(map(str, repeated))}: two scenarios "
                                   "would be the same", "list each node count once"))
        for i, n in enumerate(counts):
            if n < 0:
                out.append(SpecProblem(file, f"axes.group_nodes.{group}[{i}]", n, "is negative",
                                       "give a node count, 0 to leave the group out"))
    if all(set(counts) == {0} for counts in group_nodes.values()) and len(group_nodes) == len(names):
        out.append(SpecProblem(file, "axes.group_nodes", dict(group_nodes), "every group is always "
                               "0: no scenario has a GPU", "give a group a positive node count"))
    return out


def scenario_devices(spec) -> dict[str, int]:
    """GPUs per device type of a built scenario spec (a fleet's groups added up)."""
    groups = spec.fleet.groups if spec.fleet is not None else (spec.cluster,)
    out: dict[str, int] = {}
    for g in groups:
        out[g.device.name] = out.get(g.device.name, 0) + g.num_devices
    return out


def scenario_groups(spec) -> dict[str, int]:
    """Nodes per group of a fleet scenario (empty for a plain cluster)."""
    return {} if spec.fleet is None else {g.name: g.nodes for g in spec.fleet.groups}


def base_devices(base: dict[str, Any]) -> set[str]:
    """Catalog device names of a fleet base's groups (prices needed)."""
    cluster = base.get("cluster")
    if not (isinstance(cluster, dict) and isinstance(cluster.get("groups"), list)):
        return set()
    return {g["device"] for g in cluster["groups"] if isinstance(g, dict) and isinstance(g.get("device"), str)}
