"""Piper's instance format, read as it ships (Tarnawski et al., "Piper: Multidimensional
Planner for DNN Parallelization", NeurIPS 2021; github.com/msr-fiddle/piper ``algo.cpp``).

The format and every check below follow the peers' README
(``tests/data/peers/piper``, copied from the shared peer folder): top-level
``maxMemoryPerDevice``, ``maxDevices``, ``bandwidth``, ``mbsInBatch``,
``nodes``, ``edges``; a node holds ``TMPCs`` keyed by tensor-parallel degree,
each TMPC ``timePerSample``, ``parameterSize``, ``memoryUsageA``,
``memoryUsageB`` and the sync maps ``syncTimeFw`` (one entry per *incoming*
edge, keyed by the tail's id) and ``syncTimeBw`` (one per *outgoing* edge,
keyed by the head's id), as ``Instance::checkInputCorrectness`` reads them.

Every check of Piper's reader is a :class:`SpecProblem` naming the file,
the key, the value, the rule and the fix, including "at most two TMPCs per
(node, t)" (Piper's knapsack routine needs it; the exact knapsack of
:mod:`autopar_opt.peers.piper.model` relies on it too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autopar_opt.core import limits
from autopar_opt.core.errors import MISSING, SpecError, SpecProblem

TOP_KEYS = ("maxMemoryPerDevice", "maxDevices", "bandwidth", "mbsInBatch", "nodes", "edges")
TMPC_NUMBERS = ("timePerSample", "parameterSize", "memoryUsageA", "memoryUsageB")
#: Upper limits of the top-level numbers (and what they count): the devices and
#: micro-batches of :mod:`autopar_opt.core.limits`; bytes, bytes/s and seconds below 1e30.
TOP_MAX = {"maxDevices": (limits.MAX_DEVICES, "devices"),
           "mbsInBatch": (limits.MAX_MICROBATCHES, "micro-batches"),
           "maxMemoryPerDevice": (limits.MAX_FLOAT, "bytes"),
           "bandwidth": (limits.MAX_FLOAT, "bytes per second")}
#: Most nodes and edges of an instance (the published ones have at most 177 nodes; the DP
#: over successor-closed sets is exponential in the graph's width, so far fewer are solvable).
MAX_PIPER_NODES, MAX_PIPER_EDGES = 100_000, 1_000_000


@dataclass(frozen=True)
class Tmpc:
    """One tensor-model-parallel configuration of a node at one degree ``t``.

    ``fw[u]`` / ``bw[w]`` are the sync bytes of the incoming edge from node
    index ``u`` / outgoing edge to node index ``w`` (indices, not file ids).
    """

    name: str
    p: float
    w: float
    a: float
    b: float
    fw: dict[int, float]
    bw: dict[int, float]


@dataclass
class PiperInstance:
    """A Piper problem with the run's settings applied (bytes, bytes/s, seconds as in the file).

    Nodes are indexed ``0..n-1`` in file order; ``ids[i]`` is the file id of
    node ``i``. ``tmpcs[t][i]`` lists node ``i``'s TMPCs at degree ``t``
    (empty when the node has none at ``t``).
    """

    name: str
    ids: list[int]
    names: list[str]
    edges: list[tuple[int, int, float]]
    tmpcs: dict[int, list[list[Tmpc]]]
    memory_bytes: float
    devices: int
    bandwidth: float
    microbatches: int
    file_values: dict[str, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def degrees(self) -> list[int]:
        """Tensor-parallel degrees present in the file, ascending."""
        return sorted(self.tmpcs)

    def index_of(self) -> dict[int, int]:
        """File id -> node index."""
        return {nid: i for i, nid in enumerate(self.ids)}


class _Checker:
    """Collects :class:`SpecProblem` s against one instance file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[SpecProblem] = []

    def add(self, key: str, value: Any, rule: str, fix: str) -> None:
        self.items.append(SpecProblem(self.path, key, value, rule, fix))

    def number(self, obj: dict, key: str, where: str, integer: bool = False) -> float | None:
        """A present, finite, non-negative number; with ``integer``, a count: a positive
        integer (QA round 10: ``mbsInBatch: 0`` was read and the instance reported as
        proven infeasible for memory)."""
        if key not in obj:
            self.add(f"{where}{key}", MISSING, "is required by Piper's reader",
                     f"add {key!r} (a {'positive integer' if integer else 'non-negative number'})")
            return None
        val = obj[key]
        num = limits.bounded_number(val)      # finite, at most 1e30 (no OverflowError on 10^400)
        if integer and (num is None or not num.is_integer() or num < 1):
            self.add(f"{where}{key}", val, "must be a positive integer (a count)",
                     "write an integer >= 1")
            return None
        if num is None or num < 0:
            self.add(f"{where}{key}", val, f"must be a non-negative finite number of at most "
                     f"{limits.MAX_FLOAT:.0e} (Piper rejects negative values)",
                     "write a finite number >= 0")
            return None
        return float(num)


def read_json(path: Path) -> Any:
    """Parse a Piper JSON file within :data:`autopar_opt.core.reading.PIPER`'s limits;
    a missing, special, oversized, packed-bomb, malformed or too deeply nested file is
    a :class:`SpecError`."""
    from autopar_opt.core import reading

    return reading.read_json(path, reading.PIPER)


def _nodes(data: dict, chk: _Checker) -> tuple[list[int], list[str], list[dict]]:
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        chk.add("nodes", nodes if nodes is not None else MISSING, "must be a non-empty array of nodes",
                "write nodes: [{id, TMPCs}, ...]")
        return [], [], []
    if len(nodes) > MAX_PIPER_NODES:
        chk.add("nodes", f"{len(nodes):,} nodes", f"more than the limit of {MAX_PIPER_NODES:,} "
                "nodes", "give a Piper instance of a real model (the published ones have at "
                "most a few hundred nodes)")
        return [], [], []
    ids, names, raw = [], [], []
    seen: set[int] = set()
    for i, node in enumerate(nodes):
        nid = node.get("id") if isinstance(node, dict) else None
        if not isinstance(nid, int) or isinstance(nid, bool):
            chk.add(f"nodes[{i}].id", nid if nid is not None else MISSING, "must be an integer id",
                    "give every node a unique integer id")
            continue
        if nid in seen:
            chk.add(f"nodes[{i}].id", nid, "duplicate node id", "make node ids unique")
            continue
        seen.add(nid)
        ids.append(nid)
        names.append(str(node.get("name", nid)))
        raw.append(node)
    return ids, names, raw


def _edges(data: dict, index: dict[int, int], chk: _Checker) -> list[tuple[int, int, float]]:
    edges = data.get("edges")
    if not isinstance(edges, list) or not edges:
        chk.add("edges", edges if edges is not None else MISSING,
                "Piper's reader needs at least one edge", "write edges: [{sourceId, destId, communicationCost}]")
        return []
    if len(edges) > MAX_PIPER_EDGES:
        chk.add("edges", f"{len(edges):,} edges", f"more than the limit of {MAX_PIPER_EDGES:,} "
                "edges", "give a Piper instance of a real model")
        return []
    out, seen = [], set()
    for j, edge in enumerate(edges):
        where = f"edges[{j}]."
        if not isinstance(edge, dict):
            chk.add(f"edges[{j}]", edge, "must be an object", "write {sourceId, destId, communicationCost}")
            continue
        ends = []
        for key in ("sourceId", "destId"):
            nid = edge.get(key, MISSING)
            if nid not in index:
                chk.add(where + key, nid, "is not the id of a node", "use an id from nodes[].id")
            ends.append(index.get(nid))
        cost = chk.number(edge, "communicationCost", where)
        if None in ends:
            continue
        if cost is None:     # reported; the edge still counts for the sync maps, whose entries
            cost = 0.0       # for it are right (QA round 35: 16 spurious problems about them)
        pair = (ends[0], ends[1])
        if pair[0] == pair[1]:
            chk.add(where + "destId", edge["destId"], "an edge from a node to itself is a cycle",
                    "remove the self-loop")
        elif pair in seen:
            chk.add(f"edges[{j}]", [edge["sourceId"], edge["destId"]], "duplicate edge (Piper rejects it)",
                    "keep one edge per (sourceId, destId) pair")
        else:
            seen.add(pair)
            out.append((pair[0], pair[1], cost))
    return out


def _cycle(n: int, edges: list[tuple[int, int, float]]) -> list[int] | None:
    """Nodes left on a cycle (Kahn's algorithm), or None for a DAG."""
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v, _ in edges:
        succ[u].append(v)
        indeg[v] += 1
    stack = [v for v in range(n) if indeg[v] == 0]
    done = 0
    while stack:
        u = stack.pop()
        done += 1
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    return None if done == n else [v for v in range(n) if indeg[v] > 0]


def _sync_map(raw: Any, want: set[int], index: dict[int, int], key: str, chk: _Checker,
              what: str) -> dict[int, float]:
    """A sync map that covers exactly the node's ``what`` edges (file ids as strings)."""
    if not isinstance(raw, dict):
        chk.add(key, raw if raw is not None else MISSING, "must be an object keyed by node id",
                f"write one entry per {what} edge")
        return {}
    out: dict[int, float] = {}
    for name, val in raw.items():
        try:
            nid = int(name)
        except (TypeError, ValueError):
            nid = None
        if nid not in index or index[nid] not in want:
            chk.add(f"{key}[{name!r}]", val, f"is not the id of a node joined to this node by an {what} edge",
                    f"keep exactly one entry per {what} edge")
            continue
        num = chk.number(raw, name, f"{key}.")
        out[index[nid]] = 0.0 if num is None else num
    missing = sorted(want - set(out))
    if missing:
        chk.add(key, sorted(raw), f"lacks entries for the {what} edge(s) of node id(s) "
                f"{[next(i for i, x in index.items() if x == m) for m in missing][:5]}",
                f"add one entry per {what} edge (bytes, 0 when none)")
    return out


def _tmpc(raw: Any, where: str, ins: set[int], outs: set[int], index: dict[int, int],
          chk: _Checker) -> Tmpc | None:
    if not isinstance(raw, dict):
        chk.add(where.rstrip("."), raw, "must be an object", "write {id, timePerSample, ...}")
        return None
    nums = [chk.number(raw, key, where) for key in TMPC_NUMBERS]
    fw = _sync_map(raw.get("syncTimeFw"), ins, index, where + "syncTimeFw", chk, "incoming")
    bw = _sync_map(raw.get("syncTimeBw"), outs, index, where + "syncTimeBw", chk, "outgoing")
    if any(x is None for x in nums):
        return None
    return Tmpc(str(raw.get("id", "")), nums[0], nums[1], nums[2], nums[3], fw, bw)


def _node_tmpcs(node: dict, i: int, ins: set[int], outs: set[int], index: dict[int, int],
                chk: _Checker, tmpcs: dict[int, list[list[Tmpc]]], n: int) -> None:
    where = f"nodes[{i}].TMPCs"
    table = node.get("TMPCs")
    if not isinstance(table, dict):
        chk.add(where, table if table is not None else MISSING, "must be an object keyed by tensor degree",
                'write TMPCs: {"1": [{...}], "2": [...]}')
        return
    if not any(isinstance(lst, list) and lst for lst in table.values()):
        # no TMPC at any degree: the node cannot run in any stage, so no plan exists; the
        # DP said "no plan fits the memory per device and the devices" (QA round 12)
        chk.add(where, table, "lists no TMPC at any tensor-parallel degree: the node cannot "
                "run in any stage, so no plan exists", 'give it at least one TMPC, e.g. '
                '"1": [{"id": "vanilla", "timePerSample": ..., ...}]')
        return
    for tkey, lst in table.items():
        digits = isinstance(tkey, str) and tkey.isascii() and tkey.isdigit() and len(tkey) <= 8
        t = int(tkey) if digits else 0
        if not 1 <= t <= limits.MAX_DEVICES:
            chk.add(f"{where}[{str(tkey)[:20]!r}]", str(tkey)[:20], "keys must be tensor-parallel "
                    f"degrees from 1 to {limits.MAX_DEVICES:,} written as strings",
                    'use keys like "1", "2", "4"')
            continue
        if not isinstance(lst, list):
            chk.add(f"{where}[{tkey!r}]", lst, "must be an array of TMPCs", "write a list of TMPC objects")
            continue
        names = [c.get("id") for c in lst if isinstance(c, dict)]
        if len(lst) > 2:
            chk.add(f"{where}[{tkey!r}]", f"{len(lst)} TMPCs", "at most 2 TMPCs per (node, t) "
                    "(Piper's knapsack routine is limited to two)", "keep two TMPCs, e.g. vanilla and "
                    "activation recomputation")
        if len(set(map(str, names))) != len(names):
            chk.add(f"{where}[{tkey!r}]", names, "TMPC ids must be unique within the array",
                    "rename the duplicate TMPC")
        row = tmpcs.setdefault(t, [[] for _ in range(n)])
        for j, raw in enumerate(lst):
            got = _tmpc(raw, f"{where}[{tkey!r}][{j}].", ins, outs, index, chk)
            if got is not None:
                row[i].append(got)


def parse_piper(data: Any, path: str, name: str) -> tuple[dict, PiperInstance | None, list[SpecProblem]]:
    """Check and convert a parsed Piper file (settings are applied by the caller)."""
    chk = _Checker(path)
    if not isinstance(data, dict):
        chk.add("", type(data).__name__, "the top level must be an object", "use a Piper instance file")
        return {}, None, chk.items
    values = {}
    for key in TOP_KEYS[:4]:
        val = chk.number(data, key, "", integer=key in ("maxDevices", "mbsInBatch"))
        if val is not None and val > TOP_MAX[key][0]:
            chk.add(key, val, f"exceeds the limit of {TOP_MAX[key][0]:,} {TOP_MAX[key][1]}",
                    f"write a realistic {TOP_MAX[key][1].rstrip('s')} count"
                    if key in ("maxDevices", "mbsInBatch") else "write a realistic value")
        elif val is not None:
            values[key] = val
    ids, names, raw = _nodes(data, chk)
    index = {nid: i for i, nid in enumerate(ids)}
    edges = _edges(data, index, chk) if ids else []
    cyc = _cycle(len(ids), edges)
    if cyc:
        chk.add("edges", [ids[v] for v in cyc[:8]], "the graph has a cycle through these node ids "
                "(Piper needs a DAG)", "remove the edge that closes the cycle")
    ins: list[set[int]] = [set() for _ in ids]
    outs: list[set[int]] = [set() for _ in ids]
    for u, v, _ in edges:
        outs[u].add(v)
        ins[v].add(u)
    tmpcs: dict[int, list[list[Tmpc]]] = {}
    for i, node in enumerate(raw):
        _node_tmpcs(node, i, ins[i], outs[i], index, chk, tmpcs, len(ids))
    if chk.items:
        return values, None, chk.items
    inst = PiperInstance(name, ids, names, edges, tmpcs, values["maxMemoryPerDevice"],
                         int(values["maxDevices"]), values["bandwidth"], int(values["mbsInBatch"]),
                         dict(values))
    return values, inst, []


def load_piper(path: Path) -> PiperInstance:
    """Read and check a Piper file with its own (placeholder) settings; raises SpecError."""
    _, inst, problems = parse_piper(read_json(path), str(path), path.stem)
    if problems:
        raise SpecError(problems)
    assert inst is not None
    return inst
