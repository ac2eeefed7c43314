"""DP fallback benchmark (issue 4): growth in layers and strategies; DP vs MILP searches.

Parts (each writes ``benchmarks/dp/<part>.json`` and prints Markdown):

- ``growth``: one configuration (pp=4, c=8, 1F1B) of decoder-only chains with
  32, 64, 128, 256, 512, 1024 layers, in two families: *slack* (hidden 1024 on
  4x8 A100-80GB: memory binds only from about 1,024 layers) and *tight* (hidden
  1024 on 2x8 H100, the memory reserve set so that the capacity is 1.2x the
  least memory any plan needs: every stage memory-bound at every size); then the
  slack family at 128 layers with 2, 4, 8 and the full set of strategies per
  layer. Each layer row is solved three ways: the DP on the tables (inner time,
  tables excluded), the MILP (HiGHS on the direct matrix, same tables, build
  included) and the whole ``autopar solve --solver dp`` command as a
  subprocess on a generated spec of the same model, configuration and space
  (wall clock and peak memory of the child). Growth exponents = least-squares
  slope of log(time) vs log(layers) and vs log(K), over the rows solved to
  optimality. The MILP is the one ``autopar solve --solver highs`` builds (the
  block MILP of formulations/blocks.py on these chains), cold; the whole
  ``autopar solve --solver highs`` command (DP warm start, then that MILP) is
  timed as a subprocess too.
- ``uniap``: the whole search (every outer configuration, certificate) with
  ``--solver dp`` vs ``--solver highs --no-warm-start`` (the MILP alone) on the
  UniAP suite of ``benchmarks/search`` (same space and batch).
- ``large``: the same two searches on Llama-3-70B / 1024 H100 (batch 512, seq 8192).
- ``inception``: the PaSE-style DAG DP on Inception-v3 at layer granularity
  (one stage) on 8 and 64 A100-40GB (1x8, 8x8), batch 256 and 2048, full
  space; the same tables solved by the MILP (HiGHS) for comparison.

Usage: python benchmarks/dp/run.py [--part growth|uniap|large] [--limit S]   (growth: --limit 30, about 25 min)
Then: python benchmarks/dp/report.py > benchmarks/dp/RESULTS.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.solvers.dp import solve_dp
from autopar_opt.model_zoo.registry import get_cluster
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

HERE = Path(__file__).resolve().parent


def _search_benchmark():
    """The search benchmark module (same suite and batch)."""
    spec = importlib.util.spec_from_file_location("search_bench", HERE.parent / "search" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SB = _search_benchmark()
LARGE, UNIAP_BATCH = SB.LARGE, SB.UNIAP_BATCH
UNIAP_CLUSTERS, UNIAP_MODELS = SB.UNIAP_CLUSTERS, SB.UNIAP_MODELS
#: the search benchmark's space (its spec dict, issue 18) as a SearchSpace
SPACE = SearchSpace(zero_levels=(0, 1, 2, 3), recompute=(Recompute.none, Recompute.full),
                    schedules=(Schedule.one_f_one_b,), max_microbatches=32)


def instance(model: str, cluster_name: str, batch: int, seq_len: int | None = None):
    """Graph, cluster and training of one search instance (as the search benchmark's specs)."""
    from autopar_opt.model_zoo.registry import build_model
    cluster = get_cluster(cluster_name)
    dtype = "fp16" if "V100" in cluster.device.name else "bf16"
    graph = build_model(model, seq_len=seq_len) if seq_len else build_model(model)
    return graph, cluster, Training(global_batch_size=batch, seq_len=graph.seq_len, dtype=dtype)


SIZES = (32, 64, 128, 256, 512, 1024)
FAMILIES = {"slack": (1024, "4x8-a100-80"), "tight": (1024, "2x8-h100")}
#: tight family: capacity = this many times the least memory any plan needs (cost model v2 makes
#: a fixed cluster slack at 32 layers and infeasible at 512, so the capacity follows the model)
TIGHT_FACTOR = 1.2
#: the generated spec of a growth row: the model of chain_tables through the zoo's decoder family
SPEC = """model:
  zoo: gpt3-175b
  overrides: {{num_layers: {blocks}, hidden: {hidden}, heads: 16, ffn_hidden: {ffn}, seq_len: 2048,
              learned_positions: false}}
cluster:
  zoo: {cluster}
training:
  global_batch_size: 64
  seq_len: 2048
  memory_reserve_gib: {reserve}
search:
  pp_degrees: [4]
  microbatches: [8]
  schedules: [1f1b]
solver:
  name: dp
  time_limit_s: {limit}
  rel_gap: 0.0
"""
#: strategy sets of growing size K (tp x sp x ZeRO x recompute)
K_SPACES = {
    "tp": SearchSpace(zero_levels=(0,), sequence_parallel=(False,), recompute=(Recompute.none,)),
    "tp+zero": SearchSpace(zero_levels=(0, 3), sequence_parallel=(False,), recompute=(Recompute.none,)),
    "tp+zero+rc": SearchSpace(zero_levels=(0, 3), sequence_parallel=(False,),
                              recompute=(Recompute.none, Recompute.full)),
    "full": SearchSpace(),
}


def tight_reserve(layers: int) -> float:
    """``training.memory_reserve_gib`` of the tight family at ``layers`` layers (full space)."""
    from autopar_opt.cost.context import user_reserve_for
    from autopar_opt.ir.hardware import GIB
    from autopar_opt.solvers.dp.common import least_memory
    hidden, cluster = FAMILIES["tight"]
    tables = _tables(layers, hidden, cluster, SearchSpace(), 0.0)
    cap_gib = TIGHT_FACTOR * least_memory(tables) / GIB
    return float(max(user_reserve_for(cap_gib, get_cluster(cluster).device.hbm_gib, default_params()), 0.0))


def _tables(layers: int, hidden: int, cluster: str, space: SearchSpace, reserve: float):
    graph = decoder_lm(f"lm{layers}", layers - 2, 2048, hidden, 16, 4 * hidden, 50257)
    training = Training(global_batch_size=64, seq_len=2048, memory_reserve_gib=reserve)
    return build_cost_tables(graph, get_cluster(cluster), training, space, default_params(), 4, 8,
                             Schedule.one_f_one_b)


def chain_tables(layers: int, family: str, space: SearchSpace, reserve: float | None = None):
    hidden, cluster = FAMILIES[family]
    if reserve is None:
        reserve = tight_reserve(layers) if family == "tight" else 0.0
    return _tables(layers, hidden, cluster, space, reserve)


def dp_row(tables, limit: float, **tags) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    res = solve_dp(tables, limit)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    row = {**tags, "K": max(len(s) for s in tables.strategies), "dp_s": wall, "dp_cpu_s": cpu,
           "termination": res.termination.value, "primal_s": res.primal,
           "lower_bound_s": res.lower_bound, "gap": res.gap}
    print(json.dumps(row), flush=True)
    return row


def milp_row(tables, limit: float) -> dict:
    """The MILP alone (no DP start, no DP bound) on the same tables, as ``autopar solve
    --solver highs`` builds it: the block MILP (formulations/blocks.py) on a chain of
    identical blocks, else HiGHS on the direct per-layer matrix; time includes the build."""
    from autopar_opt.formulations.block_solve import block_applicable, solve_blocks
    from autopar_opt.formulations.direct import build_direct
    from autopar_opt.solvers.registry import get_backend
    t0 = time.perf_counter()
    if block_applicable(tables):
        res, _ = solve_blocks(tables, get_backend("highs"), time_limit_s=limit, rel_gap=1e-9)
        return {"milp_s": time.perf_counter() - t0, "milp_form": "blocks",
                "milp_termination": res.termination.value, "milp_primal_s": res.primal,
                "milp_bound_s": res.lower_bound, "milp_gap": res.gap}
    form = build_direct(tables)
    left = max(limit - (time.perf_counter() - t0), 1.0)
    res = get_backend("highs").solve_model(form.matrix, form.problem_class, time_limit_s=left, rel_gap=1e-9)
    return {"milp_s": time.perf_counter() - t0, "milp_form": "direct", "milp_termination": res.termination.value,
            "milp_primal_s": res.primal, "milp_bound_s": res.lower_bound, "milp_gap": res.gap}


def cli_row(layers: int, family: str, limit: float, reserve: float, solver: str = "dp") -> dict:
    """``autopar solve --solver <solver>`` on a generated spec, as a subprocess: wall clock,
    peak RSS of the child (ru_maxrss of the waited child), its status, gap and inner time
    (keys ``cli_*`` for the DP, ``cli_<solver>_*`` otherwise)."""
    hidden, cluster = FAMILIES[family]
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "spec.yaml")
        with open(spec, "w") as fh:
            fh.write(SPEC.format(blocks=layers - 2, hidden=hidden, ffn=4 * hidden, cluster=cluster,
                                 limit=limit, reserve=repr(float(reserve))).replace("name: dp", f"name: {solver}"))
        # a fresh wrapper process whose only child is the command: its RUSAGE_CHILDREN peak is the command's
        wrap = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
                "sys.stderr.write('\\nPEAK_KIB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
                "sys.exit(r.returncode)")
        cmd = [sys.executable, "-c", wrap, sys.executable, "-m", "autopar_opt.cli.commands", "solve", spec, "--json",
               "--quiet", "--out", os.path.join(tmp, "out"), "--time-limit", str(limit)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        out, err = proc.stdout, proc.stderr
    peak = [int(x.split()[1]) for x in err.splitlines() if x.startswith("PEAK_KIB")]
    peak = peak[-1] / 1024 if peak else None
    row = {"cli_s": wall, "cli_rc": proc.returncode, "cli_peak_mib": peak}
    try:
        doc = json.loads(out)
        cert = doc.get("certificate", {})
        row.update(cli_status=doc.get("status"), cli_gap=cert.get("gap"),
                   cli_inner_s=(doc.get("solver") or {}).get("wall_time_s"))
    except (json.JSONDecodeError, AttributeError):
        row.update(cli_status="error", cli_error=(err or out)[-300:])
    return row if solver == "dp" else {k.replace("cli_", f"cli_{solver}_", 1): v for k, v in row.items()}


def slope(xs, ys) -> float | None:
    if len(xs) < 2:
        return None
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def part_growth(limit: float) -> dict:
    rows = []
    for family in FAMILIES:
        dead = 0
        for n in SIZES:
            reserve = tight_reserve(n) if family == "tight" else 0.0
            tables = chain_tables(n, family, SearchSpace(), reserve)
            row = dp_row(tables, limit, series="layers", family=family, layers=n, space="full")
            row.update(capacity_gib=tables.capacity_bytes / 2**30, reserve_gib=reserve)
            if dead:   # the MILP found no plan at a smaller size of this family: not run again
                row.update(milp_termination=f"not run (no plan at {dead} layers)")
            else:
                row.update(milp_row(tables, limit))
                if row["milp_termination"] == "time_limit_no_solution":
                    dead = n
            row.update(cli_row(n, family, limit, reserve))
            row.update(cli_row(n, family, limit, reserve, "highs"))
            print(json.dumps(row), flush=True)
            rows.append(row)
    for name, space in K_SPACES.items():
        rows.append(dp_row(chain_tables(128, "slack", space), limit, series="strategies",
                           family="slack", layers=128, space=name))
    exps = {}
    for family in FAMILIES:
        ok = [r for r in rows if r["series"] == "layers" and r["family"] == family
              and r["termination"] == "optimal"]
        exps[f"layers/{family}"] = slope([r["layers"] for r in ok], [r["dp_s"] for r in ok])
        exps[f"layers/{family}/cpu"] = slope([r["layers"] for r in ok], [r["dp_cpu_s"] for r in ok])
        ok = [r for r in rows if r["series"] == "layers" and r["family"] == family
              and r.get("milp_termination") == "optimal"]
        exps[f"layers/{family}/milp"] = slope([r["layers"] for r in ok], [r["milp_s"] for r in ok])
        ok = [r for r in rows if r["series"] == "layers" and r["family"] == family
              and r.get("cli_status") == "optimal"]
        exps[f"layers/{family}/cli"] = slope([r["layers"] for r in ok], [r["cli_s"] for r in ok])
        ok = [r for r in rows if r["series"] == "layers" and r["family"] == family
              and r.get("cli_highs_status") == "optimal"]
        exps[f"layers/{family}/cli_highs"] = slope([r["layers"] for r in ok], [r["cli_highs_s"] for r in ok])
    ok = [r for r in rows if r["series"] == "strategies" and r["termination"] == "optimal"]
    exps["strategies/slack@128"] = slope([r["K"] for r in ok], [r["dp_s"] for r in ok])
    return {"rows": rows, "exponents": exps}


def search_row(model, cluster, batch, seq, solver: str, warm: bool, limit: float) -> dict:
    graph, cl, training = instance(model, cluster, batch, seq)
    options = SearchOptions(solver=solver, time_limit_s=limit, rel_gap=1e-3, warm_start=warm)
    t0 = time.perf_counter()
    res = run_search(graph, cl, training, SPACE, default_params(), options)
    wall = time.perf_counter() - t0
    cert = res.certificate
    inner = sum(sum(r.timings.values()) if r.timings else r.time_s for r in cert.configurations)
    row = {"model": model, "cluster": cluster, "solver": solver, "wall_s": wall,
           "inner_s": inner, "prepare_s": res.prepare_s, "status": res.status(1e-3),
           "primal_s": cert.primal, "lower_bound_s": cert.lower_bound, "gap": cert.gap,
           "plan": f"pp={res.plan.pp} c={res.plan.microbatches}" if res.plan else None}
    print(json.dumps(row), flush=True)
    return row


def part_search(jobs, limit: float) -> dict:
    rows = []
    for model, cluster, batch, seq in jobs:
        rows.append(search_row(model, cluster, batch, seq, "dp", True, limit))
        rows.append(search_row(model, cluster, batch, seq, "highs", False, limit))
    return {"rows": rows}


def part_inception(limit: float) -> dict:
    from autopar_opt.formulations.direct import build_direct
    from autopar_opt.ir.hardware import make_cluster
    from autopar_opt.model_zoo.registry import build_model
    from autopar_opt.solvers.registry import get_backend

    graph = build_model("inception-v3")
    rows = []
    for nodes, batch in ((1, 256), (8, 2048)):
        cluster = make_cluster(f"{nodes}x8-A100-40GB", nodes, 8, "A100-40GB")
        training = Training(global_batch_size=batch, seq_len=graph.seq_len)
        tables = build_cost_tables(graph, cluster, training, SearchSpace(), default_params(), 1, 1,
                                   Schedule.one_f_one_b)
        row = dp_row(tables, limit, series="inception", family=f"{nodes * 8} GPUs",
                     layers=len(graph.layers),
                     space="full")
        t0 = time.perf_counter()
        form = build_direct(tables)
        res = get_backend("highs").solve_model(form.matrix, form.problem_class, time_limit_s=limit,
                                               rel_gap=1e-6)
        row.update(milp_s=time.perf_counter() - t0, milp_termination=res.termination.value,
                   milp_primal_s=res.primal)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {"rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--part", choices=("growth", "uniap", "large", "inception"), required=True)
    ap.add_argument("--limit", type=float, default=120.0, help="time limit per solve/search, s")
    args = ap.parse_args()
    meta = {"machine": f"{platform.machine()}, Python {platform.python_version()}",
            "load_average_at_start": os.getloadavg(),
            "run_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "limit_s": args.limit}
    if args.part == "growth":
        out = part_growth(args.limit)
    elif args.part == "uniap":
        out = part_search([(m, c, UNIAP_BATCH, None) for m in UNIAP_MODELS for c in UNIAP_CLUSTERS],
                          args.limit)
    elif args.part == "large":
        out = part_search([j for j in LARGE if j[0] == "llama3-70b"], args.limit)
    else:
        out = part_inception(args.limit)
    meta["load_average_at_end"] = os.getloadavg()
    (HERE / f"{args.part}.json").write_text(json.dumps({**meta, **out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
