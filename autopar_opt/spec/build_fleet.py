"""Build a mixed fleet from a spec's ``cluster: {groups: [...], links: [...]}`` (issue 34).

Each group becomes a :class:`~autopar_opt.ir.hardware.Cluster` (device from the
catalog or a custom mapping, link tiers from the device's defaults unless
stated); with ``nics_per_node`` / ``nic_gb_per_s`` its inter-node tier is one
NIC's rate and the cluster has that many NICs per node (a GPU of a busy node
gets ``nics_per_node × nic_gb_per_s / gpus_per_node``, ``Cluster.inter_node_per_gpu``). Every
pair of groups needs a stated link: a fleet whose groups cannot talk is an
error with its fix, never a guessed link.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from autopar_opt.core import limits
from autopar_opt.core.errors import ProblemList, did_you_mean
from autopar_opt.ir.fleet import Fleet, GroupLink
from autopar_opt.ir.hardware import (DEFAULT_INTER_NODE, DEVICE_CATALOG, Cluster, DeviceType, LinkTier,
                                     make_cluster)
from autopar_opt.spec.build_run import stated_mesh, topology_problems
from autopar_opt.spec.power_limit import apply_power_limit
from autopar_opt.spec.schema import FleetClusterSpec, GroupSpec, LinkSpec


def _device(spec, key: str, out: ProblemList) -> DeviceType | None:
    if isinstance(spec, str):
        if spec not in DEVICE_CATALOG:
            out.add(key, spec, "unknown catalog device",
                    f"use one of: {', '.join(DEVICE_CATALOG)}{did_you_mean(spec, DEVICE_CATALOG)}"
                    ", or give {name, peak_tflops, hbm_gib, hbm_gb_per_s}")
            return None
        return DEVICE_CATALOG[spec]
    return DeviceType(spec.name, dict(spec.peak_tflops), spec.hbm_gib, spec.hbm_gb_per_s,
                      source="spec file")


def _tier(spec: LinkSpec | None, name: str) -> LinkTier | None:
    return None if spec is None else LinkTier(spec.name or name, spec.bandwidth_gb_per_s, spec.latency_us)


def _group(g: GroupSpec, key: str, out: ProblemList) -> Cluster | None:
    dev = _device(g.device, f"{key}.device", out)
    if dev is None:
        return None
    if g.device_memory_gib is not None:        # as a plain cluster's (build_run.build_cluster)
        dev = replace(dev, hbm_gib=float(g.device_memory_gib), memory_gb=float(g.device_memory_gib))
    if g.power_limit_w is not None:
        capped = apply_power_limit(dev, g.power_limit_w, f"{key}.power_limit_w", out)
        if capped is None:
            return None
        dev = capped
    inter = _tier(g.inter_node, "inter")
    # inter_node is one NIC's line rate beside nics_per_node, as a plain cluster's
    # (build_run.build_cluster): only nic_gb_per_s states that rate a second time. A group
    # copied from a plain cluster with both was refused ("states the inter-node link twice",
    # fix "keep one"), and keeping inter_node alone gave one NIC per GPU (QA round 36)
    nics = g.nics_per_node if g.inter_node is not None else None
    if g.inter_node is not None and g.nic_gb_per_s is not None:
        out.add(f"{key}.inter_node", "given", "states one NIC's rate twice (inter_node and "
                "nic_gb_per_s)", "keep one of the two (nics_per_node goes with either)")
    elif g.inter_node is None and (g.nics_per_node is not None or g.nic_gb_per_s is not None):
        base = DEFAULT_INTER_NODE.get(dev.name, LinkTier("inter", 25.0, 10.0))
        nic = g.nic_gb_per_s if g.nic_gb_per_s is not None else base.bandwidth_gb_per_s
        nics = g.nics_per_node if g.nics_per_node is not None else g.gpus_per_node
        # the tier is one NIC's line rate and the cluster knows its NICs per node, as a
        # plain cluster's (Cluster.nics_per_node): a group of ranks gets the NICs of its
        # own members, one GPU of a busy node nics/gpus of one (inter_node_per_gpu)
        inter = LinkTier(f"{nic:g}GBps-nic", nic, base.latency_us)
    cluster = make_cluster(g.name, g.nodes, g.gpus_per_node, dev, _tier(g.intra_node, "intra"), inter,
                           source="spec file", nics_per_node=nics,
                           nodes_per_leaf=g.nodes_per_leaf, oversubscription=float(g.oversubscription),
                           nvlink_mesh=stated_mesh(g.intra_node_topology, g.nvlink_board_gpus),
                           board_gpus=g.nvlink_board_gpus)
    if not topology_problems(key, g.intra_node_topology, g.nvlink_board_gpus, cluster, out):
        return None
    return cluster


def build_fleet(section: FleetClusterSpec, out: ProblemList) -> Fleet | None:
    """The fleet of ``section``; every problem recorded in ``out`` (None when any)."""
    names = [g.name for g in section.groups]
    before = len(out.items)
    for i, name in enumerate(names):
        if not str(name).strip():        # QA round 9: "( 1x2 A100-80GB + b ...)" in every output
            out.add(f"cluster.groups[{i}].name", name, "is empty", "give the group a name, "
                    "e.g. a100")
        elif names.index(name) != i:
            out.add(f"cluster.groups[{i}].name", name, "repeats the name of another group",
                    "give every group its own name")
    total = sum(g.nodes * g.gpus_per_node for g in section.groups)
    if total > limits.MAX_DEVICES:
        out.add("cluster.groups", f"{total:,} devices", f"exceed the limit of {limits.MAX_DEVICES:,}",
                "use fewer nodes")
    groups = [_group(g, f"cluster.groups[{i}]", out) for i, g in enumerate(section.groups)]
    links: list[GroupLink] = []
    seen: set[frozenset] = set()
    for i, link in enumerate(section.links):
        key = f"cluster.links[{i}].between"
        bad = [n for n in link.between if n not in names]
        for n in bad:
            out.add(key, n, "names no group of the fleet", f"use group names: {', '.join(dict.fromkeys(names))}"
                    f"{did_you_mean(n, names)}")
        if bad:
            continue
        a, b = link.between
        if a == b:
            out.add(key, link.between, "links a group to itself (its own links are intra_node / "
                    "inter_node)", "name two different groups")
            continue
        if frozenset((a, b)) in seen:
            out.add(key, link.between, "states the link between these groups twice", "keep one")
            continue
        seen.add(frozenset((a, b)))
        links.append(GroupLink(a, b, LinkTier(link.name or f"link:{a}-{b}", link.bandwidth_gb_per_s,
                                              link.latency_us)))
    for a, b in combinations(list(dict.fromkeys(names)), 2):
        if frozenset((a, b)) not in seen:
            out.add("cluster.links", f"{a} - {b}", "no link between these groups (a plan spanning "
                    "them would move data over an unknown network)",
                    f"add {{between: [{a}, {b}], bandwidth_gb_per_s: ..., latency_us: ...}}")
    if len(out.items) > before or any(g is None for g in groups):
        return None
    return Fleet(section.name, tuple(groups), tuple(links), "spec file")


def fleet_dtype_problem(dtype: str, stated: bool, fleet: Fleet, out: ProblemList) -> None:
    """Record ``training.dtype`` when a group's device has no peak for it, naming each such
    group and, as the fix, the dtypes every group has or leaving the groups out. A fleet
    trains in one dtype on every group; the per-device check named the device alone ("device
    A100-40GB has no fp8 peak; use one of its dtypes"), not which group, nor that FP8 on the
    H100 group of an A100 + H100 fleet means a spec without the A100s (QA round 36)."""
    lacking = [(i, g) for i, g in enumerate(fleet.groups) if dtype not in g.device.peak_tflops]
    if not lacking:
        return
    common = [d for d in fleet.groups[0].device.peak_tflops
              if all(d in g.device.peak_tflops for g in fleet.groups)]
    which = ", ".join(f"{g.name} (cluster.groups[{i}], {g.device.name})" for i, g in lacking)
    rule = (f"group {which} has no {dtype} peak" if len(lacking) == 1 else
            f"groups {which} have no {dtype} peak") + "; a fleet trains in one dtype on every group"
    if not stated:
        rule += " (training.dtype not stated: its default is bf16)"
    names = ", ".join(g.name for _, g in lacking)
    use = f"{'use' if stated else 'state'} a dtype every group has: {', '.join(common)}"
    leave = (f"leave {names} out of the fleet (a spec of the other groups)"
             if len(lacking) < len(fleet.groups) else "")
    fix = "; or ".join(x for x in (use if common else "", leave) if x) or \
        "give the groups devices that share a training dtype"
    out.add("training.dtype", dtype, rule, fix)


def fleet_reserve_problem(reserve_gib: float, fleet: Fleet, out: ProblemList) -> None:
    """Record ``training.memory_reserve_gib`` when it is not below some group's device memory
    (it is held on every GPU of every group), naming each such group and, as the fix, the
    least memory of the groups or leaving them out; the per-device check said "reserve is not
    below the 40 GiB of device memory" without the group (QA round 36)."""
    over = [(i, g) for i, g in enumerate(fleet.groups) if reserve_gib >= g.device.hbm_gib]
    if not over:
        return
    which = ", ".join(f"{g.name} (cluster.groups[{i}], {g.device.hbm_gib:.4g} GiB)" for i, g in over)
    least = min(fleet.groups, key=lambda g: g.device.hbm_gib)
    names = ", ".join(g.name for _, g in over)
    out.add("training.memory_reserve_gib", reserve_gib,
            f"reserve is not below the device memory of group{'s' if len(over) > 1 else ''} {which}; "
            "the reserve is held on every GPU of every group",
            f"expected a few GiB, below {least.device.hbm_gib:.4g} GiB ({least.name}'s), e.g. 2"
            + (f"; or leave {names} out of the fleet (a spec of the other groups)"
               if len(over) < len(fleet.groups) else ""))

