"""The phases of ``place`` grow linearly with the nodes (issue 33, point 3: the loop of
``placement/condense.py`` grew with classes × nodes; 10^5 nodes took 33.6 s).

No clock: two deterministic counts per phase, on a graph of n and of 2n nodes —
(1) the interpreter's work: every Python line, call and return the phase executes
(``sys.settrace``) plus every call of a C function (``sys.setprofile``), so a Python loop
over classes, units or nodes is counted once per iteration; (2) the peak of memory it
allocates (``tracemalloc``, which NumPy reports its arrays to), so a classes × nodes
array or a quadratic intermediate shows. Doubling the nodes must at most double each
count, within a margin for log factors (sorts) and constants: a quadratic phase gives
about 4x. What this does not see: element work inside one vectorised NumPy call that
allocates nothing (none of these phases has one; the benchmark
``benchmarks/robustness/deadlines.py`` times 10^5-10^6 nodes).

Graphs: a public-format chain whose every node is its own colour class (the issue's
case: classes = nodes), and the zoo's synthetic transformer.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import pytest

from autopar_opt.placement.coarsen import coarsen_chains
from autopar_opt.placement.condense import condense
from autopar_opt.placement.heuristics import compute_lower_bound, critical_path_bound, topo_split
from autopar_opt.placement.importers.spec import load_placement

#: Doubling the nodes may multiply a count by at most this (n log n at these sizes: ~2.2).
RATIO = 2.35
#: Counts this small are constants (set-up), not growth.
FLOOR_EVENTS, FLOOR_BYTES = 2_000, 256 << 10


def _chain(folder: Path, n: int) -> Path:
    nodes = [{"name": f"n{i}", "id": i, "supportedOnFpga": 1, "cpuLatency": 10.0,
              "fpgaLatency": 1.0 + i % 7, "isBackwardNode": 0, "colorClass": i, "size": 1000.0}
             for i in range(n)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(n - 1)]
    path = folder / f"chain_{n}.json"
    path.write_text(json.dumps({"maxSizePerFPGA": 1e12, "maxFPGAs": 8, "maxCPUs": 1,
                                "nodes": nodes, "edges": edges}))
    return path


def _transformer(folder: Path, n: int) -> Path:
    path = folder / f"zoo_{n}.json"
    path.write_text(json.dumps({"placement": {"graph": {
        "zoo": "synthetic_transformer", "nodes": n, "hidden": 256, "seq": 128, "batch": 1},
        "devices": [{"type": "A100-80GB", "count": 8}]}}))
    return path


def _events(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Python line/call/return events and C-function calls of ``fn()``; its result."""
    count = [0]

    def trace(frame, event, arg):
        count[0] += 1
        return trace

    def profile(frame, event, arg):
        if event == "c_call":
            count[0] += 1

    before = sys.gettrace(), sys.getprofile()       # a coverage tracer, say: put back after
    sys.settrace(trace)
    sys.setprofile(profile)
    try:
        out = fn()
    finally:
        sys.setprofile(before[1])
        sys.settrace(before[0])
    return count[0], out


def _peak_bytes(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _phases(problem) -> dict[str, tuple[int, int]]:
    """Each phase of place's max-load path, in order, with (events, peak bytes)."""
    out = {}
    no_deadline = lambda: None  # noqa: E731 - the check a phase calls; a deadline never hit
    steps: list[tuple[str, Callable[[Any], Any]]] = [
        ("condense", lambda _: condense(problem, fuse_cycles=True, check=no_deadline)),
        ("coarsen", lambda cond: coarsen_chains(cond, contiguous=True, check=no_deadline)[0]),
        ("lower bound", lambda cond: (compute_lower_bound(cond), cond)[1]),
        ("heuristic", lambda cond: (topo_split(cond), cond)[1]),
        ("critical path", lambda cond: (critical_path_bound(problem), cond)[1]),
    ]
    state: Any = None
    for name, step in steps:
        events, result = _events(lambda: step(state))
        out[name] = (events, _peak_bytes(lambda: step(state)))
        state = result
    return out


@pytest.mark.parametrize("graph", [_chain, _transformer], ids=["chain, a class per node",
                                                              "synthetic transformer"])
def test_doubling_the_nodes_at_most_doubles_the_work_of_every_place_phase(tmp_path, graph):
    small, large = 1_500, 3_000
    counts = {}
    for n in (small, large):
        problem, _ = load_placement(str(graph(tmp_path, n)))
        assert problem.num_nodes == n
        counts[n] = _phases(problem)
    for phase, (events, peak) in counts[small].items():
        big_events, big_peak = counts[large][phase]
        assert big_events <= RATIO * max(events, FLOOR_EVENTS), (phase, events, big_events)
        assert big_peak <= RATIO * max(peak, FLOOR_BYTES), (phase, peak, big_peak)
    # the counts see growth: the interpreted phases grow with the nodes (not constants)
    assert counts[large]["heuristic"][0] > 1.8 * counts[small]["heuristic"][0]


def test_the_counts_see_a_quadratic_loop(tmp_path):
    """The oracle's own check: the loop the issue found (for each class, a pass over all
    the nodes) on the same chain gives about 4x per doubling in these counts."""
    import numpy as np

    def classes_times_nodes(problem) -> np.ndarray:
        unit = np.empty(problem.num_nodes, dtype=np.int64)
        classes = np.arange(problem.num_nodes)
        for c in classes:                            # before issue 33: condense.py
            members = [i for i in range(problem.num_nodes) if i == c]
            unit[members] = c
        return unit

    work = []
    for n in (300, 600):
        problem, _ = load_placement(str(_chain(tmp_path, n)))
        work.append(_events(lambda: classes_times_nodes(problem))[0])
    assert work[1] > 3.5 * work[0] and work[1] > RATIO * max(work[0], FLOOR_EVENTS)
