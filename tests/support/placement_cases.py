"""Small random placement instances and a brute-force oracle (shared by placement tests)."""

from __future__ import annotations

import itertools
import random

import numpy as np

from autopar_opt.placement import DeviceType, PlacementProblem, evaluate_placement


def random_problem(seed: int, *, n: int | None = None, training: bool = False,
                   hetero: bool = False, cpu: bool = True) -> PlacementProblem:
    """A random DAG with positive times, comm costs, sizes, a few colour pairs,
    sometimes a CPU-only node and a memory limit that binds."""
    rng = random.Random(seed)
    nf = n or rng.randint(3, 6)
    edges = [(u, v) for u in range(nf) for v in range(u + 1, nf) if rng.random() < 0.4]
    for v in range(1, nf):                      # keep it connected-ish
        if not any(b == v for _, b in edges):
            edges.append((rng.randrange(v), v))
    perm = list(range(nf))
    rng.shuffle(perm)
    edges = [(perm[u], perm[v]) for u, v in edges]
    color = list(range(nf))
    if nf >= 4 and rng.random() < 0.5:
        a, b = rng.sample(range(nf), 2)
        color[b] = color[a]
    is_bwd = [False] * nf
    if training:                                # one backward node per forward node with a consumer
        bwd_of = {}
        for v in range(nf):
            if rng.random() < 0.6:
                bwd_of[v] = len(color)
                color.append(color[v])
                is_bwd.append(True)
        for u, v in list(edges):
            if u in bwd_of and v in bwd_of:
                edges.append((bwd_of[v], bwd_of[u]))
            if u in bwd_of and rng.random() < 0.5:
                edges.append((u, bwd_of[u]))
    n_all = len(color)
    acc = np.array([rng.uniform(1, 10) for _ in range(n_all)])
    times = {"acc": acc}
    types = []
    size = np.array([rng.uniform(1, 5) for _ in range(n_all)])
    mem = float(size.sum()) * rng.choice([0.5, 0.7, 2.0])
    if hetero:
        times["fast"] = acc * rng.uniform(0.3, 0.8)
        types.append(DeviceType("fast", 1, mem, True))
    types.insert(0, DeviceType("acc", rng.choice([1, 2]) if hetero else rng.choice([2, 3]), mem, True))
    if cpu:
        c = acc * rng.uniform(2, 5)
        times["cpu"] = c
        types.append(DeviceType("cpu", 1, float("inf"), False))
        if rng.random() < 0.5:                  # a CPU-only node
            v = rng.randrange(n_all)
            for k in times:
                if k != "cpu":
                    times[k] = times[k].copy()
                    times[k][np.array(color) == color[v]] = np.inf
    return PlacementProblem(name=f"random{seed}", node_names=[f"n{i}" for i in range(n_all)],
                            node_ids=list(range(n_all)), edges=np.array(edges).reshape(-1, 2),
                            time=times, size_bytes=size,
                            comm=np.array([rng.uniform(0.5, 4) for _ in range(n_all)]),
                            color=np.array(color), is_backward=np.array(is_bwd),
                            device_types=types)


def brute_force(problem: PlacementProblem, objective: str, contiguous: bool) -> float:
    """Best feasible value over every assignment (devices^nodes, classes moved together)."""
    classes = sorted(set(problem.color.tolist()))
    nd = problem.num_devices
    best = np.inf
    for choice in itertools.product(range(nd), repeat=len(classes)):
        dev = dict(zip(classes, choice))
        assign = np.array([dev[int(c)] for c in problem.color])
        m = evaluate_placement(problem, assign, objective=objective,
                               contiguous=contiguous if objective == "max-load" else None)
        if m.feasible and m.value < best:
            best = m.value
    return best


def public_chain(latencies=(1, 1, 1), *, fpga_size: int, fpgas: int, cpus: int = 0,
                 cost: float = 1, on_fpga: bool = True, size: int = 1) -> dict:
    """A chain of forward nodes in the public JSON format (Tarnawski et al.'s instances):
    node ``i`` costs ``latencies[i]`` on a CPU core and 1 (or 0 where ``on_fpga`` is
    false) on an accelerator, each edge ``cost``."""
    n = len(latencies)
    return {"maxSizePerFPGA": fpga_size, "maxFPGAs": fpgas, "maxCPUs": cpus,
            "nodes": [{"id": i, "supportedOnFpga": int(on_fpga), "cpuLatency": t,
                       "fpgaLatency": 1 if on_fpga else 0, "isBackwardNode": 0, "size": size}
                      for i, t in enumerate(latencies)],
            "edges": [{"sourceId": i, "destId": i + 1, "cost": cost} for i in range(n - 1)]}


def place_with_searcher(tmp_path, graph: dict, searcher: str) -> dict:
    """``autopar place --searcher S --budget-s 1 --time-limit 10 --json`` on ``graph``
    written to a file: the JSON answer (the command must succeed)."""
    import json

    from support.cli import run_cli

    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    code, text = run_cli("place", path, "--searcher", searcher, "--budget-s", "1",
                         "--time-limit", "10", "--json")
    assert code == 0, text
    return json.loads(text)
