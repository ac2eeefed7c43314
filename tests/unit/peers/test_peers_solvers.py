"""Peer problems solved exactly: DP = MILP = brute force, evaluate = objective.

Oracles: exhaustive enumeration on small random instances (PaSE: every
configuration vector; Piper: every ordered partition into stages, every
(t, d) per stage and every TMPC per node, priced by a third transcription of
the README formula written here), the two exact methods against each other on
the shipped instances, and the independent evaluators.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from autopar_opt.peers.pase.format import PaseInstance, load_pase, pase_objective
from autopar_opt.peers.pase.solve import solve_pase_dp, solve_pase_mip
from autopar_opt.peers.piper.dp import relaxation_bound, solve_piper_dp
from autopar_opt.peers.piper.evaluate import evaluate_piper
from autopar_opt.peers.piper.format import PiperInstance, Tmpc, load_piper
from autopar_opt.peers.piper.milp import solve_piper_mip
from autopar_opt.peers.piper.model import reduce_instance, solve_mckp
from autopar_opt.core.result import Termination
from support import paths

DATA = paths.DATA / "peers"
GIB = float(1 << 30)


# ----------------------------------------------------------------------- PaSE
def _random_pase(rng: np.random.Generator, n: int) -> PaseInstance:
    sizes = [int(rng.integers(1, 4)) for _ in range(n)]
    edges = sorted({(int(u), int(v)) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.5})
    return PaseInstance("rand", [f"v{i}" for i in range(n)], [[[k] for k in range(s)] for s in sizes],
                        [rng.integers(0, 20, s).astype(float) for s in sizes], edges,
                        [rng.integers(0, 20, (sizes[u], sizes[v])).astype(float) for u, v in edges], {})


@pytest.mark.parametrize("seed", range(12))
def test_pase_dp_and_milp_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    inst = _random_pase(rng, int(rng.integers(1, 7)))
    best = min(pase_objective(inst, list(c)) for c in itertools.product(*[range(s) for s in inst.sizes]))
    dp, mip = solve_pase_dp(inst), solve_pase_mip(inst)
    assert dp.termination is Termination.optimal and mip.termination is Termination.optimal
    assert dp.primal == pytest.approx(best) and mip.primal == pytest.approx(best)
    assert dp.lower_bound == pytest.approx(best) and mip.lower_bound == pytest.approx(best)


@pytest.mark.parametrize("seed", range(24))
def test_pase_dp_after_the_domain_reduction_matches_brute_force(monkeypatch, seed):
    """The exact domain reduction forced on every instance (it runs by default only where
    the elimination is wide), on tables with repeated rows (PaSE's structure: the reduction
    prunes them) and, for odd seeds, negative edge costs (shifted for its bound)."""
    import autopar_opt.peers.pase.solve as pase_solve

    monkeypatch.setattr(pase_solve, "REDUCE_WIDEST", 0)
    rng = np.random.default_rng(100 + seed)
    inst = _random_pase(rng, int(rng.integers(2, 7)))
    for i, m in enumerate(inst.edge_cost):
        m[:] = m[rng.integers(0, m.shape[0], m.shape[0])]          # rows repeated
        if seed % 2:
            inst.edge_cost[i] = m - 25.0
    best = min(pase_objective(inst, list(c)) for c in itertools.product(*[range(s) for s in inst.sizes]))
    dp = solve_pase_dp(inst)
    assert dp.termination is Termination.optimal and "exact domain reduction first" in dp.message
    assert dp.primal == pytest.approx(best, abs=1e-9) and dp.lower_bound == pytest.approx(best, abs=1e-9)
    assert pase_objective(inst, dp.solution) == dp.primal


@pytest.mark.parametrize("model", ["alexnet", "rnnlm", "inception3", "transformer"])
def test_pase_shipped_p4_exact_by_both(model):
    inst = load_pase(DATA / "pase" / f"pase_{model}_p4.json.gz")
    dp, mip = solve_pase_dp(inst), solve_pase_mip(inst, time_limit_s=120)
    assert dp.gap == 0.0 and mip.termination is Termination.optimal
    assert mip.primal == pytest.approx(dp.primal, rel=1e-12)
    assert dp.primal == pase_objective(inst, dp.solution)


# ------------------------------------------------------------------- knapsack
@pytest.mark.parametrize("seed", range(40))
def test_knapsack_matches_enumeration(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 9))
    costs = [rng.integers(1, 6, int(rng.integers(1, 3))).astype(float) for _ in range(n)]
    mems = [rng.integers(1, 6, len(c)).astype(float) for c in costs]
    cap = float(rng.integers(n, 5 * n))
    best = None
    for choice in itertools.product(*[range(len(c)) for c in costs]):
        if sum(m[k] for m, k in zip(mems, choice)) <= cap:
            val = sum(c[k] for c, k in zip(costs, choice))
            best = val if best is None else min(best, val)
    got = solve_mckp(costs, mems, cap)
    assert (got is None) == (best is None)
    if got is not None:
        assert got[0] == pytest.approx(best)
        assert sum(m[k] for m, k in zip(mems, got[1])) <= cap


# ---------------------------------------------------------------------- Piper
def _random_piper(rng: np.random.Generator, n: int, k: int) -> PiperInstance:
    edges = [(u, v, float(rng.integers(0, 4)) * 1e9) for u in range(n) for v in range(u + 1, n)
             if rng.random() < 0.4]
    ins = [[u for u, x, _ in edges if x == v] for v in range(n)]
    outs = [[x for u, x, _ in edges if u == v] for v in range(n)]
    tmpcs: dict[int, list[list[Tmpc]]] = {}
    for t in (1, 2):
        row = []
        for v in range(n):
            if t == 2 and rng.random() < 0.2:
                row.append([])
                continue
            lst = []
            for name in ("vanilla", "activation recomp")[: int(rng.integers(1, 3))]:
                lst.append(Tmpc(name, float(rng.integers(1, 10)) / t, float(rng.integers(0, 3)) * 1e9,
                                float(rng.integers(1, 5)) / t, float(rng.integers(0, 3)) / t,
                                {u: float(rng.integers(0, 2)) * 1e9 for u in ins[v]},
                                {w: float(rng.integers(0, 2)) * 1e9 for w in outs[v]}))
            row.append(lst)
        tmpcs[t] = row
    inst = PiperInstance("rand", list(range(n)), [str(i) for i in range(n)], edges, tmpcs, 0.0, k, 1e9,
                         int(rng.choice([2, 4, 6])))
    least = sum(min(c.a + c.b for t in tmpcs for c in tmpcs[t][v]) for v in range(n))
    inst.memory_bytes = float(least * rng.uniform(0.15, 1.2))
    return inst


def _stage_value(inst, nodes, t, d, sigma):
    """Least TPS of one stage over all TMPC choices that fit (README formula), or None."""
    y = -(-sigma // d)
    lists = [inst.tmpcs[t][v] for v in nodes]
    if any(not lst for lst in lists):
        return None
    best = None
    inside = set(nodes)
    for choice in itertools.product(*[range(len(lst)) for lst in lists]):
        tm = {v: lst[k] for v, lst, k in zip(nodes, lists, choice)}
        if sum(c.a * y + c.b for c in tm.values()) > inst.memory_bytes * (1 + 1e-12):
            continue
        P = sum(c.p for c in tm.values())
        R = sum(4 * (d - 1) * c.w / d / inst.microbatches for c in tm.values())
        X = sum(2 * (c + tm[v].fw[u]) for u, v, c in inst.edges if v in inside and u not in inside)
        X += sum(2 * (c + tm[u].bw[v]) for u, v, c in inst.edges if u in inside and v not in inside)
        val = (X / d + R) / inst.bandwidth + P / d
        best = val if best is None else min(best, val)
    return best


def _brute_piper(inst: PiperInstance) -> float:
    n, best = inst.n, math.inf
    for m in range(1, n + 1):
        for stage_of in itertools.product(range(m), repeat=n):
            if len(set(stage_of)) != m or any(stage_of[u] > stage_of[v] for u, v, _ in inst.edges):
                continue
            groups = [[v for v in range(n) if stage_of[v] == i] for i in range(m)]
            opts = [(t, d) for t in inst.tmpcs for d in range(1, inst.microbatches + 1)
                    if inst.microbatches % d == 0 and t * d <= inst.devices]
            for conf in itertools.product(opts, repeat=m):
                if sum(t * d for t, d in conf) > inst.devices or sum(d for _, d in conf) > inst.microbatches:
                    continue
                worst, sigma = 0.0, 0
                for i in range(m - 1, -1, -1):
                    sigma += conf[i][1]
                    val = _stage_value(inst, groups[i], conf[i][0], conf[i][1], sigma)
                    if val is None:
                        worst = math.inf
                        break
                    worst = max(worst, val)
                best = min(best, worst)
    return best


def _relaxation_bounds(inst: PiperInstance) -> float:
    """The relaxation bound unpruned and climbing its ladder from the work bound: the pruned
    rungs must find the same relaxed optimum (or the work bound, when that is higher)."""
    from autopar_opt.peers.piper.dp import PassTable

    prep = reduce_instance(inst)
    table = PassTable(prep, None)
    work = float(table.rest_tp[0]) / inst.devices
    free, climbed = relaxation_bound(prep, None), relaxation_bound(prep, None, table.shared, work)
    assert climbed == pytest.approx(max(work, free), rel=1e-12)
    return climbed


@pytest.mark.parametrize("seed", range(14))
def test_piper_dp_and_milp_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 7 if seed == 0 else int(rng.integers(2, 6))
    inst = _random_piper(rng, n, int(rng.integers(1, 9)) if n <= 4 else 2)
    best = _brute_piper(inst)
    dp, mip = solve_piper_dp(inst), solve_piper_mip(inst)
    assert _relaxation_bounds(inst) <= best * (1 + 1e-12)    # where the DP's greedy ladder starts
    if math.isinf(best):
        assert dp.termination is Termination.infeasible and mip.termination is Termination.infeasible
        return
    for res in (dp, mip):
        assert res.termination is Termination.optimal
        assert res.primal == pytest.approx(best, rel=1e-9)
        metrics = evaluate_piper(inst, res.solution)
        assert metrics.feasible and metrics.tps == pytest.approx(res.primal, rel=1e-12)
    assert dp.lower_bound == pytest.approx(best, rel=1e-9)


def _piper(name: str, k: int, mem_gib: float) -> PiperInstance:
    inst = load_piper(DATA / "piper" / f"{name}.json")
    inst.devices, inst.memory_bytes, inst.bandwidth = k, mem_gib * GIB, 25 * GIB
    return inst


@pytest.mark.parametrize("name,k,mem", [("gnmt", 2, 8.0), ("bert32a100", 2, 80.0), ("resnet", 1, 16.0)])
def test_piper_shipped_small_exact_by_both(name, k, mem):
    inst = _piper(name, k, mem)
    dp, mip = solve_piper_dp(inst), solve_piper_mip(inst, time_limit_s=120)
    assert dp.termination is mip.termination
    if dp.termination is Termination.optimal:
        assert mip.gap <= 1e-9 and mip.primal == pytest.approx(dp.primal, rel=1e-9)
        assert evaluate_piper(inst, dp.solution).tps == pytest.approx(dp.primal, rel=1e-12)


def test_piper_relaxation_bound_on_a_memory_bound_resnet():
    """ResNet-50, k = 8, 4 GiB: the relaxation bound (where the DP's greedy ladder starts) is
    above the work bound and below the value of Piper's own plan (its C++ ``runDP``, run by
    benchmarks/peers/run.py: 73.4933; the DP's optimum is 73.49328600013165)."""
    from autopar_opt.peers.piper.dp import PassTable

    prep = reduce_instance(_piper("resnet", 8, 4.0))
    table = PassTable(prep, None)
    work = float(table.rest_tp[0]) / prep.inst.devices
    bound = relaxation_bound(prep, None, table.shared, work)
    assert work * 1.05 < bound <= 73.49328600013165


def test_given_plan_priced_against_optimum(tmp_path):
    import json

    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app
    spec = tmp_path / "spec.yaml"
    file = (DATA / "piper" / "gnmt.json").resolve()
    ids = [n["id"] for n in json.loads(file.read_text())["nodes"]]
    spec.write_text(f"problem: {{format: piper, file: {file}, devices: 2, memory_per_device_gib: 8,\n"
                    f"  bandwidth_gib_per_s: 25, plan: {{stages: [{{nodes: {ids}, d: 1}}]}}}}\n"
                    "solver: {name: dp}\n")
    result = CliRunner().invoke(app, ["solve", str(spec), "--json", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["certificate"]["gap"] == 0.0 and doc["status"] == "optimal"
    given = doc["given_plan"]
    assert given["valid"] and given["value"] >= doc["certificate"]["primal"]
    assert given["above_optimum"] > 0
    assert (tmp_path / "out" / "plan.json").is_file() and (tmp_path / "out" / "report.html").is_file()
    # the distance is said as a percentage and a ratio (0.99999 read as "at the optimum" for
    # a plan twice as slow): oracle, the two values by hand
    ratio = given["value"] / doc["certificate"]["primal"]
    said = f"{100 * (ratio - 1):+.1f}% ({ratio:.2f}x the optimum)"
    assert said in (tmp_path / "out" / "report.html").read_text()
    text = CliRunner().invoke(app, ["solve", str(spec)]).output
    assert f"given plan: value (the objective's units) {given['value']:.6g}; fits memory yes; " \
        f"above the optimum {said}" in text and "{'valid'" not in text
    # the objective is named with its unit, and figures are not full float reprs
    assert "objective: time per sample (Piper's TPS" in text
    assert f"primal {doc['certificate']['primal']:.6g} lower bound" in text
    assert "Objective: time per sample" in (tmp_path / "out" / "report.html").read_text()


def test_piper_dp_time_limit_returns_first_pass_plan_with_valid_bound(monkeypatch):
    """Stopped in the exact pass: the first-pass plan, priced by the evaluator, and a bound below the optimum."""
    import autopar_opt.peers.piper.dp as piper_dp

    inst = _piper("bert32a100", 8, 8.0)
    inst.microbatches = 1920
    optimum = solve_piper_dp(inst)
    original, calls = piper_dp.PassTable.run, []

    def run(self):
        calls.append(self.exact)
        if self.exact:
            raise piper_dp._Timeout
        original(self)

    monkeypatch.setattr(piper_dp.PassTable, "run", run)
    res = solve_piper_dp(inst)
    # the feasibility pass and the greedy ladder, then the exact pass, which the limit stops
    assert calls[-1] and not any(calls[:-1]) and res.termination is Termination.feasible
    assert evaluate_piper(inst, res.solution).tps == pytest.approx(res.primal, rel=1e-12)
    assert res.lower_bound <= optimum.primal <= res.primal
