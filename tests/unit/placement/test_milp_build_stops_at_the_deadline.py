"""The placement MILP's build checks the time limit as it goes (QA round 13): on 2 x
8,192 devices counting and building the model took 6.8 s against a 5 s limit, because
the deadline was only compared once the whole matrix existed.

Oracle: the number of row blocks the count and the build add. With no limit the MILP
of 2,000 devices adds thousands of blocks (one per slot and type, counted here); with a
deadline already past the build must stop at its first block, answer no placement and
say that the MILP was not built in time, instead of adding every block first."""

from __future__ import annotations

import numpy as np

from autopar_opt.core.matrix_builder import MatrixBuilder, MatrixCounter
from autopar_opt.placement.condense import condense
from autopar_opt.placement.exact.solve_milp import milp_size, run_milp
from autopar_opt.placement.importers.public_json import problem_from_public

DEVICES = 2_000
GRAPH = {"maxSizePerFPGA": 100, "maxFPGAs": DEVICES, "maxCPUs": 0,
         "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 4, "fpgaLatency": 1 + i,
                    "isBackwardNode": 0, "size": 30} for i in range(4)],
         "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(3)]}


def _count_blocks(monkeypatch) -> list[int]:
    calls = [0]
    for cls in (MatrixBuilder, MatrixCounter):
        real = cls.add_rows

        def spy(self, *args, _real=real, **kw):
            calls[0] += 1
            return _real(self, *args, **kw)
        monkeypatch.setattr(cls, "add_rows", spy)
    return calls


def test_the_full_count_adds_thousands_of_row_blocks(monkeypatch):
    problem = problem_from_public(GRAPH)
    calls = _count_blocks(monkeypatch)
    milp_size(condense(problem, fuse_cycles=False), "max-load", False)
    assert calls[0] > DEVICES          # one load row block per device at least


def test_a_deadline_already_past_stops_the_build_at_its_first_block(monkeypatch):
    problem = problem_from_public(GRAPH)
    cond = condense(problem, fuse_cycles=False)
    calls = _count_blocks(monkeypatch)
    value, assign, bound, info = run_milp(problem, cond, "max-load", False, "highs", 1e-9,
                                          1e-6, None)
    assert calls[0] <= 1, f"{calls[0]} row blocks added after the deadline"
    assert value == np.inf and assign is None and bound == -np.inf
    assert "time limit ran out while building the MILP" in info["milp_refused"]
    assert "not built" in info["milp_refused"] and "milp_status" not in info
