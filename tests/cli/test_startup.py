"""Issue 18: what a command imports and reads before it answers.

Oracles: the import graph of a fresh interpreter that ran the command (a
module that a command does not use must be absent from ``sys.modules``), the
same answer with the optional paths taken, the brute-force scan that the
indexed baseline lookup replaced, and the HiGHS library's own version string.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from autopar_opt.search.baselines import ClosestIndex
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute
from support import paths

ROOT = paths.REPO
#: heavy modules that only some commands need
HEAVY = ("numpy", "scipy", "highspy", "pyomo", "jinja2", "matplotlib", "networkx", "rich")

SMALL = """\
model: {zoo: debug}
cluster: {name: c4, nodes: 1, gpus_per_node: 4, device: A100-40GB}
training: {global_batch_size: 16}
search: {pp_degrees: [1, 2], zero_levels: [0, 1], recompute: [none, full], microbatches: [2, 4]}
solver: {name: highs, time_limit_s: 60, rel_gap: 0.0}
"""


def _run(args: list[str], preload: str = "") -> tuple[dict, set[str], dict]:
    """Run ``autopar ARGS`` in a fresh interpreter; its JSON, the heavy top-level
    modules it had imported, and the zoo files it parsed."""
    code = (f"import sys, io, json, contextlib\n{preload}\n"
            "import autopar_opt.cli.commands\n"
            f"sys.argv = ['autopar', *{args!r}]\n"
            "buf = io.StringIO()\n"
            "try:\n"
            "    with contextlib.redirect_stdout(buf):\n"
            "        autopar_opt.cli.commands.main()\n"
            "except SystemExit as exc:\n"
            "    assert not exc.code, exc.code\n"
            "from autopar_opt.model_zoo import registry\n"
            "print(json.dumps({'doc': json.loads(buf.getvalue()), 'mods': sorted(sys.modules),"
            " 'zoo': registry._load_one.cache_info().currsize}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    mods = {m.split(".")[0] for m in data["mods"]} & set(HEAVY)
    return data["doc"], mods, data


def _strip(doc):
    """``doc`` without the figures that differ from run to run (times, date)."""
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items()
                if k not in ("timings", "wall_time_s", "time_s", "free_time_s", "created_utc")}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def test_estimate_imports_no_solver_numpy_or_renderer():
    """``autopar estimate`` prices one plan: pure Python, no numpy, no solver, no
    rich, no report renderer; and it parses only the zoo files it names."""
    doc, mods, data = _run(["estimate", "examples/quickstart.yaml", "--json"])
    assert doc["metrics"]["iteration_time_s"] > 0
    assert mods == set(), mods
    assert data["zoo"] == 2          # dgx-a100-8 and gpt-1.7b, not the whole zoo


def test_solve_closed_by_the_dp_loads_no_mip_machinery(tmp_path):
    """A search whose every configuration the exact DP closes builds no MIP, so
    the command loads neither HiGHS nor scipy nor Pyomo; its plan.json is the
    one a run with them loaded up front writes (same plan, values, certificate)."""
    spec = tmp_path / "small.yaml"
    spec.write_text(SMALL)
    doc, mods, _ = _run(["solve", str(spec), "--json"])
    assert doc["status"] == "optimal"
    assert mods == {"numpy"}, mods
    timings = doc["solver"]["timings"]
    assert 0 < timings["search_cpu_s"] <= timings["command_s"] + 0.05
    preloaded, mods2, _ = _run(["solve", str(spec), "--json"],
                               preload="import autopar_opt.formulations, highspy, rich.progress")
    assert {"scipy", "highspy", "rich"} <= mods2
    assert _strip(doc) == _strip(preloaded)


def test_solve_that_needs_a_mip_imports_it_inside_the_search(tmp_path):
    """Without the DP warm start every configuration goes to HiGHS: the
    formulations are imported on the first MIP, and the answer is the DP's."""
    spec = tmp_path / "small.yaml"
    spec.write_text(SMALL)
    doc, mods, _ = _run(["solve", str(spec), "--json", "--no-warm-start"])
    assert {"scipy", "highspy"} <= mods
    dp_doc, _, _ = _run(["solve", str(spec), "--json"])
    assert doc["status"] == dp_doc["status"] == "optimal"
    assert doc["certificate"]["primal"] == pytest.approx(dp_doc["certificate"]["primal"],
                                                         rel=1e-9)


def test_highs_version_without_import_is_the_library_s():
    """The version plan.json records without importing highspy is the one the
    HiGHS library reports."""
    highspy = pytest.importorskip("highspy", reason="HiGHS backend not installed")
    from autopar_opt.solvers.highs import HighsBackend

    assert HighsBackend().version() == f"HiGHS {highspy.Highs().version()}"
    assert HighsBackend().available() == (True, "")


def _closest_scan(options, base):
    """The scan :class:`ClosestIndex` replaced (issue 18's profile: 15 M layout calls),
    with its order of preference: the strategy, then the same layout, sharding (ZeRO
    level, replicas) and recomputation, the same layout and sharding, the same layout
    and recomputation, the same layout."""
    same = [k for k, s in enumerate(options) if s.layout == base.layout]
    exact = [k for k in same if options[k] == base]
    shard = [k for k in same if (options[k].zero, options[k].replicas) == (base.zero, base.replicas)]
    close = [k for k in shard if options[k].recompute == base.recompute]
    recomputed = [k for k in same if options[k].recompute == base.recompute]
    return (exact or close or shard or recomputed or same or [None])[0]


def test_indexed_closest_equals_the_scan():
    rng = random.Random(7)

    def strategy():
        return Strategy(rng.choice([1, 2, 4]), rng.choice([1, 2]), rng.choice([1, 2]),
                        rng.random() < 0.3, rng.randint(0, 3),
                        rng.choice(list(Recompute)), rng.choice([1, 1, 2]))

    for _ in range(300):
        options = [strategy() for _ in range(rng.randint(0, 12))]
        index = ClosestIndex(options)
        for _ in range(10):
            base = strategy()
            assert index(base) == _closest_scan(options, base)


def _prune_loop(strats, costs):
    """The pairwise loop :func:`autopar_opt.cost.tables.prune_layer_strategies` replaced."""
    vec = [(c.time_s, c.sync_s, c.weight_bytes, c.act_bytes, c.working_bytes) for c in costs]
    keep = []
    for i, s in enumerate(strats):
        dominated = False
        for j, t in enumerate(strats):
            if i == j or t.layout != s.layout:
                continue
            le = all(a <= b * (1 + 1e-12) + 1e-18 for a, b in zip(vec[j], vec[i]))
            strict = any(a < b * (1 - 1e-12) - 1e-18 for a, b in zip(vec[j], vec[i]))
            if le and (strict or j < i):
                dominated = True
                break
        if not dominated:
            keep.append(i)
    return [strats[i] for i in keep], [costs[i] for i in keep]


def test_vectorised_prune_keeps_what_the_loop_kept():
    """Ties, near-ties (1e-13 relative), infinities, several layouts."""
    from types import SimpleNamespace

    from autopar_opt.cost.tables import prune_layer_strategies

    rng = random.Random(11)
    values = [0.0, 1.0, 2.0, 1.0 + 1e-13, 3.5, float("inf")]
    fields = ("time_s", "sync_s", "weight_bytes", "act_bytes", "working_bytes")

    def cost():       # prune_layer_strategies reads only these five fields of a LayerCost
        return SimpleNamespace(**{f: rng.choice(values) for f in fields})

    for _ in range(1500):
        n = rng.randint(0, 16)
        strats = [Strategy(rng.choice([1, 2]), rng.choice([1, 2]), 1, False, rng.randint(0, 3),
                           rng.choice(list(Recompute))) for _ in range(n)]
        costs = [cost() for _ in range(n)]
        fast, slow = prune_layer_strategies(strats, costs), _prune_loop(strats, costs)
        assert fast[0] == slow[0] and all(a is b for a, b in zip(fast[1], slow[1]))


def test_vectorised_missing_fraction_equals_the_rank_loop():
    """Bit-identical to the loop over ranks on every layout pair of several
    device counts up to 1,024 (sampled), sequence parallelism included."""
    import itertools

    from autopar_opt.cost import reshard
    from autopar_opt.ir.strategies import Layout, divisors

    def layouts(d):
        return [Layout(d // (tp * cp), tp, cp, sp) for tp in divisors(d)
                for cp in divisors(d // tp) for sp in (False, True)]

    rng = random.Random(5)
    checked = 0
    for d in (6, 12, 32, 48, 64, 96, 1024):
        pairs = list(itertools.product(layouts(d), layouts(d)))
        for a, b in rng.sample(pairs, min(len(pairs), 150)):
            loop = 0.0
            for r in range(d):
                (sb, ss), (db, ds) = reshard._slice(a, r), reshard._slice(b, r)
                loop = max(loop, (db[1] - db[0]) * (ds[1] - ds[0])
                           - reshard._overlap(sb, db) * reshard._overlap(ss, ds))
            fast = reshard._missing_fraction_numpy(a, b, d) if a != b else 0.0
            assert fast == loop, (a, b)
            assert reshard.missing_fraction(a, b) == loop
            checked += 1
    assert checked > 500


def test_peer_solve_loads_no_renderer_unless_a_report_is_asked_for(tmp_path):
    """A Piper/PaSE spec (``problem:``) solved with ``--json`` imports neither the
    report renderer's matplotlib nor jinja2; with ``--out`` the report is
    written (jinja2) and plan.json equals the printed JSON."""
    data = ROOT / "tests" / "data" / "peers" / "pase" / "pase_alexnet_p4.json.gz"
    spec = tmp_path / "pase.yaml"
    spec.write_text(f"problem: {{format: pase, file: {data}}}\nsolver: {{name: dp}}\n")
    doc, mods, _ = _run(["solve", str(spec), "--json"])
    assert doc["status"] == "optimal"
    assert not mods & {"matplotlib", "jinja2", "rich"}, mods
    out = tmp_path / "out"
    doc2, mods2, _ = _run(["solve", str(spec), "--json", "--out", str(out)])
    assert "jinja2" in mods2 and "matplotlib" not in mods2
    assert (out / "report.html").read_text().lstrip().startswith("<")
    assert _strip(json.loads((out / "plan.json").read_text())) == _strip(doc2)
    assert _strip(doc2)["certificate"] == _strip(doc)["certificate"]
