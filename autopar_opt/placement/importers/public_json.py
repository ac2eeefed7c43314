"""Importer for the public device-placement JSON format (msr-fiddle/dnn-partitioning).

Format (Tarnawski et al., NeurIPS 2020, data release): ``maxSizePerFPGA``
(bytes per accelerator), ``maxFPGAs``, ``maxCPUs``, ``nodes[]`` (``id``,
``supportedOnFpga``, ``cpuLatency``, ``fpgaLatency``, ``isBackwardNode``,
optional ``colorClass``, ``size``, ``name``, ``layerId``) and ``edges[]``
(``sourceId``, ``destId``, ``cost``; the cost is a property of the source node,
so every edge leaving one node must carry the same cost). "FPGA" means any
accelerator. Errors are collected in one pass and raised as a
:class:`~autopar_opt.spec.SpecError` naming the file, the key, the value, the
rule and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from autopar_opt.core import limits
from autopar_opt.placement.problem import DeviceType, PlacementProblem
from autopar_opt.core.errors import MISSING, SpecError, SpecProblem

ACCEL, CPU = "accelerator", "cpu"
#: Most edges of a graph (four per node at the node limit).
MAX_EDGES = 4 * limits.MAX_OP_NODES
_NODE_REQUIRED = ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode")
#: Every key of the format (the data release's files use exactly these): a key outside them
#: is refused, naming the nearest one, since a misspelt optional key (``colourClass``) would
#: drop a constraint silently.
TOP_KEYS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")
NODE_KEYS = _NODE_REQUIRED + ("colorClass", "size", "name", "layerId")
EDGE_KEYS = ("sourceId", "destId", "cost", "size")


def _unknown_keys(doc: dict, known: tuple[str, ...], where: str, file: str,
                  probs: list[SpecProblem]) -> None:
    """One problem per key of ``doc`` outside ``known``, with the nearest known key."""
    from autopar_opt.core.errors import closest_name

    for key in doc:
        if key in known:
            continue
        near = closest_name(str(key), known)
        keys = f"the keys are {', '.join(known)}"
        probs.append(SpecProblem(file, f"{where}{key}", doc[key], "is not a key of the public "
                                 "placement format (it would be ignored)",
                                 f"write {near!r} if that was meant; {keys}" if near
                                 else f"remove it; {keys}"))


def _read(path: Path, kind: str = "PLACEMENT") -> Any:
    """The parsed file within the limits of :mod:`autopar_opt.core.reading` for ``kind``
    (``PLACEMENT``: a graph; ``EXPERT_SPLIT``: a split)."""
    from autopar_opt.core import reading

    return reading.read_json(path, getattr(reading, kind))


def is_public_format(data: Any) -> bool:
    """Whether a parsed document looks like the public placement format: its ``nodes``
    and one other key of the format, or (``nodes`` missing) two of the others, so that a
    file without ``nodes`` is told so rather than asked for a spec's ``placement:``
    mapping (QA round 10)."""
    if not isinstance(data, dict) or "placement" in data:
        return False
    others = sum(k in data for k in ("maxFPGAs", "maxSizePerFPGA", "maxCPUs", "edges"))
    return others >= 1 if "nodes" in data else others >= 2


def _number(doc: dict, key: str, where: str, file: str, probs: list[SpecProblem], *,
            minimum: float = 0.0) -> float:
    """A finite number >= ``minimum`` (JSON's NaN and Infinity are refused: a NaN
    time or size compares false with everything and slipped through)."""
    val = doc.get(key, MISSING)
    num = limits.bounded_number(val)      # finite, at most 1e30 (no OverflowError on 10^400)
    if num is None or num < minimum:
        probs.append(SpecProblem(file, f"{where}{key}", val,
                                 f"must be a finite number >= {minimum:g} and at most "
                                 f"{limits.MAX_FLOAT:.0e}", f"write e.g. \"{key}\": 1"))
        return 0.0
    return float(num)


def _count(doc: dict, key: str, file: str, probs: list[SpecProblem]) -> int:
    """A device count: a whole number in [0, limits.MAX_PLACEMENT_DEVICES]."""
    val = doc.get(key, MISSING)
    num = limits.bounded_number(val)
    whole = num is not None and num.is_integer()
    if not whole or not 0 <= num <= limits.MAX_PLACEMENT_DEVICES:
        probs.append(SpecProblem(file, key, val, "must be a whole number of devices from 0 to "
                                 f"{limits.MAX_PLACEMENT_DEVICES:,}", f"write e.g. \"{key}\": 8"))
        return 0
    return int(val)


def _nodes(data: dict, file: str, probs: list[SpecProblem]) -> list[dict]:
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        probs.append(SpecProblem(file, "nodes", nodes if nodes is not None else MISSING,
                                 "must be a non-empty list of node objects",
                                 "list the operator nodes, see README 'Device placement'"))
        return []
    if len(nodes) > limits.MAX_OP_NODES:
        probs.append(SpecProblem(file, "nodes", f"{len(nodes):,} nodes", "more than the limit of "
                                 f"{limits.MAX_OP_NODES:,} operators", "give a smaller graph, or "
                                 "coarsen it (layers instead of operators)"))
        return []
    seen: set[Any] = set()
    for i, nd in enumerate(nodes):
        where = f"nodes[{i}]."
        if not isinstance(nd, dict):
            probs.append(SpecProblem(file, f"nodes[{i}]", nd, "must be an object", "write {...}"))
            continue
        _unknown_keys(nd, NODE_KEYS, where, file, probs)
        if not _valid_id(nd.get("id", 0)):
            probs.append(SpecProblem(file, where + "id", nd.get("id"), "must be an integer or a "
                                     "string", "give every node its own id, e.g. \"id\": 7"))
            continue
        for key in _NODE_REQUIRED:
            if key not in nd:
                probs.append(SpecProblem(file, where + key, MISSING, "is required",
                                         f"add \"{key}\""))
        for key in ("cpuLatency", "fpgaLatency", "size"):
            if key in nd:
                _number(nd, key, where, file, probs)
        for key in ("supportedOnFpga", "isBackwardNode"):
            if key in nd and nd[key] not in (0, 1):       # True/False compare equal to 1/0
                probs.append(SpecProblem(file, where + key, nd[key], "must be 0 or 1 (or a "
                                         "boolean)", f"write \"{key}\": 1"))
        if "colorClass" in nd and not _valid_id(nd["colorClass"]):
            probs.append(SpecProblem(file, where + "colorClass", nd["colorClass"], "must be an "
                                     "integer or a string", "give colocated nodes one class, "
                                     "e.g. \"colorClass\": 3"))
        if nd.get("id") in seen:
            probs.append(SpecProblem(file, where + "id", nd.get("id"), "duplicate node id",
                                     "give every node its own id"))
        seen.add(nd.get("id"))
    return nodes


def _valid_id(value: Any) -> bool:
    """Node ids are JSON integers or strings (a list or an object cannot key a node)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _edges(data: dict, ids: dict[Any, int], file: str, probs: list[SpecProblem]
           ) -> tuple[list[tuple[int, int]], dict[int, float]]:
    edges, cost = [], {}
    nodes = data["nodes"]
    raw = data.get("edges", []) or []
    if not isinstance(raw, list) or len(raw) > MAX_EDGES:
        probs.append(SpecProblem(file, "edges", f"{len(raw):,} edges" if isinstance(raw, list)
                                 else raw, f"must be a list of at most {MAX_EDGES:,} edges",
                                 "write edges: [{sourceId, destId, cost}, ...]"))
        return [], {}
    for i, e in enumerate(raw):
        where = f"edges[{i}]."
        if not isinstance(e, dict):
            probs.append(SpecProblem(file, f"edges[{i}]", e, "must be an object", "write {...}"))
            continue
        _unknown_keys(e, EDGE_KEYS, where, file, probs)
        ends = []
        for key in ("sourceId", "destId"):
            if not _valid_id(e.get(key)) or e.get(key) not in ids:
                probs.append(SpecProblem(file, where + key, e.get(key, MISSING),
                                         "must be the id of a node", "use an id listed in nodes"))
            else:
                ends.append(ids[e[key]])
        c = _number(e, "cost", where, file, probs)
        if len(ends) == 2:
            u, v = ends
            if u == v:
                probs.append(SpecProblem(file, where + "destId", e["destId"], "self-loop",
                                         "remove the edge"))
            if u in cost and abs(cost[u] - c) > 1e-6 * max(1.0, abs(c)):
                probs.append(SpecProblem(file, where + "cost", c,
                                         f"differs from another edge leaving node {e['sourceId']} "
                                         f"({cost[u]:g}); the cost is the source's output transfer",
                                         "give every edge leaving one node the same cost"))
            if _backward_into_forward(nodes[u], nodes[v]):
                probs.append(SpecProblem(
                    file, where + "destId", e["destId"], f"a backward node (id {e['sourceId']!r}, "
                    "isBackwardNode 1) feeds a forward node (isBackwardNode 0): gradients flow "
                    "from the forward pass to the backward pass, never back",
                    "mark the destination \"isBackwardNode\": 1, the source 0, or drop the edge"))
            cost.setdefault(u, c)
            edges.append((u, v))
    return edges, cost


def _backward_into_forward(src: dict, dst: dict) -> bool:
    """Whether an edge runs from a backward node to a forward one: the solvers leave
    backward nodes out of the contiguity order and take every edge into or out of them
    to run forward -> backward, so such an edge is refused at input (QA round 12: it
    ended in an internal error from the condensation)."""
    return bool(src["isBackwardNode"]) and not bool(dst["isBackwardNode"])


def problem_from_public(data: dict, *, name: str = "placement", file: str = "<input>"
                        ) -> PlacementProblem:
    """Build a :class:`PlacementProblem` from a parsed public-format document."""
    probs: list[SpecProblem] = []
    _unknown_keys(data, TOP_KEYS, "", file, probs)
    mem = _number(data, "maxSizePerFPGA", "", file, probs)
    k = _count(data, "maxFPGAs", file, probs)
    cpus = _count(data, "maxCPUs", file, probs)
    if not probs and k + cpus == 0:
        probs.append(SpecProblem(file, "maxFPGAs", k, "maxFPGAs and maxCPUs are both 0: no "
                                 "device to place the nodes on", "give at least one device, "
                                 "e.g. \"maxFPGAs\": 2"))
    nodes = _nodes(data, file, probs)
    if probs:
        raise SpecError(probs)
    ids = {nd["id"]: i for i, nd in enumerate(nodes)}
    edges, cost = _edges(data, ids, file, probs)
    if probs:
        raise SpecError(probs)
    n = len(nodes)
    classes: dict[Any, int] = {}
    color = []
    for nd in nodes:
        key = ("cc", nd["colorClass"]) if "colorClass" in nd else ("node", nd["id"])
        color.append(classes.setdefault(key, len(classes)))
    fpga = np.array([float(nd["fpgaLatency"]) if nd["supportedOnFpga"] else np.inf for nd in nodes])
    devices = [DeviceType(ACCEL, int(k), mem, True)]
    if int(cpus) > 0:
        devices.append(DeviceType(CPU, int(cpus), float("inf"), False))
    return PlacementProblem(
        name=name, node_names=[str(nd.get("name", nd["id"])) for nd in nodes],
        node_ids=[nd["id"] for nd in nodes], edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
        time={ACCEL: fpga, CPU: np.array([float(nd["cpuLatency"]) for nd in nodes])},
        size_bytes=np.array([float(nd.get("size", 0.0)) for nd in nodes]),
        comm=np.array([cost.get(i, 0.0) for i in range(n)]), color=np.array(color),
        is_backward=np.array([bool(nd["isBackwardNode"]) for nd in nodes]), device_types=devices,
        meta={"source": file, "format": "public-json"})


def load_public(path: str | Path) -> PlacementProblem:
    """Read a public-format file (errors: :class:`SpecError`, exit code 2 in the CLI)."""
    path = Path(path)
    data = _read(path)
    if not is_public_format(data):
        raise SpecError([SpecProblem(str(path), "", None,
                                     "not a placement file (needs 'nodes' and 'maxFPGAs')",
                                     "give a file in the public placement format or a spec")])
    return problem_from_public(data, name=path.stem, file=str(path))


#: The keys of an expert split in the public format, and of each of its device groups.
EXPERT_KEYS = ("fpgas", "cpus", "maxLoad")
EXPERT_GROUP_KEYS = ("nodes", "load")


def load_expert_split(path: str | Path, problem: PlacementProblem,
                      placed: dict | None = None) -> np.ndarray:
    """A human-expert split (``{"fpgas": [{"nodes": [...]}, ...], "cpus": [...]}``) as a
    device per node; nodes it omits (backward nodes) follow their colour class.
    ``placed``, when given, receives ``by_colour``: how many nodes that rule placed
    (said with the baseline: QA round 12, an inference split on a training graph left half
    the nodes to it without a word).

    Devices are numbered as :meth:`PlacementProblem.devices`: accelerators first.
    """
    path = Path(path)
    data = _read(path, "EXPERT_SPLIT")
    if not isinstance(data, dict) or not {"fpgas", "cpus"} & set(data):
        from autopar_opt.spec.doc_kinds import describe, input_kind, is_placement

        kind = input_kind(data)
        what = ("a placement.json of `autopar place` (its devices, not an expert split)"
                if is_placement(data) else
                f"{describe(kind)}, not an expert split" if kind else "not an expert split")
        raise SpecError([SpecProblem(str(path), "", None, f"--expert: {what}",
                                     'give a split as the public format writes it: {"fpgas": '
                                     '[{"nodes": [ids]}, ...], "cpus": [{"nodes": [...]}]}')])
    index = {nid: i for i, nid in enumerate(problem.node_ids)}
    assign = np.full(problem.num_nodes, -1, dtype=np.int64)
    n_acc = sum(dt.count for dt in problem.device_types if dt.name == ACCEL)
    n_cpu = sum(dt.count for dt in problem.device_types if dt.name == CPU)
    # each type's first device in the problem's numbering (a spec may list the CPU first)
    first, offsets = 0, {}
    for dt in problem.device_types:
        offsets.setdefault(dt.name, first)
        first += dt.count
    probs: list[SpecProblem] = []
    # a misspelt key ("cpu", "node") was ignored: its nodes then followed their colour
    # class or were "not placed" (QA round 34); the public files also write maxLoad, load
    _unknown_keys(data, EXPERT_KEYS, "", str(path), probs)
    for key in ("fpgas", "cpus"):
        part = data.get(key, [])
        if not isinstance(part, list) or not all(
                isinstance(g, dict) and isinstance(g.get("nodes", []), list) for g in part):
            probs.append(SpecProblem(str(path), key, part, 'must be a list of {"nodes": [ids]}',
                                     f'write "{key}": [{{"nodes": [1, 2]}}, ...]'))
            continue
        for i, group in enumerate(part):
            _unknown_keys(group, EXPERT_GROUP_KEYS, f"{key}[{i}].", str(path), probs)
    if probs:
        raise SpecError(probs)
    groups = [(offsets.get(ACCEL, 0) + d, g) for d, g in enumerate(data.get("fpgas", []))]
    groups += [(offsets.get(CPU, 0) + d, g) for d, g in enumerate(data.get("cpus", []))]
    for d, g in groups:
        for nid in g.get("nodes", []):
            if not _valid_id(nid) or nid not in index:
                probs.append(SpecProblem(str(path), "nodes", nid, "not a node of the instance",
                                         f"use ids of {problem.name}"))
            elif assign[index[nid]] >= 0:
                probs.append(SpecProblem(str(path), "nodes", nid, "listed in two groups (a node "
                                         "runs on one device)", "keep it in one group"))
            else:
                assign[index[nid]] = d
    busy_cpus = [i for i, g in enumerate(data.get("cpus", [])) if g.get("nodes")]
    if busy_cpus and busy_cpus[-1] >= n_cpu:
        # QA round 12: a node on a CPU the instance lacks was an internal error (exit 70)
        probs.append(SpecProblem(str(path), "cpus", len(data["cpus"]),
                                 f"places nodes on CPU {busy_cpus[-1]}, more CPUs than the "
                                 f"instance has ({n_cpu})", "use at most maxCPUs groups"))
    if len(data.get("fpgas", [])) > n_acc:
        probs.append(SpecProblem(str(path), "fpgas", len(data["fpgas"]),
                                 f"more accelerators than the instance has ({n_acc})",
                                 "use at most maxFPGAs groups"))
    if probs:
        raise SpecError(probs)
    missing = np.flatnonzero(assign < 0)
    if placed is not None:
        placed["by_colour"] = int(missing.size)
    for v in missing:
        mates = assign[(problem.color == problem.color[v]) & (assign >= 0)]
        if mates.size == 0:
            raise SpecError([SpecProblem(str(path), "nodes", problem.node_ids[v],
                                         "node not placed and no colocated node is",
                                         "list it in one group")])
        assign[v] = mates[0]
    return assign
