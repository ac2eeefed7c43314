"""Issue 18 (and issue 15's leftovers): everything ``autopar solve`` prints is
derived from what the search built, inside the time limit.

Oracles: the baselines derived from the search's cost tables equal the
evaluate()-based enumeration of the same uniform candidates (the one
``autopar solve`` used before), and their values equal evaluate() of their
plans; the cost tables of a configuration are built once per command; a
searcher budget above the time limit is refused before anything runs; start-up
does not import networkx.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from support.mip_instances import random_instance

from autopar_opt.cli.commands import app
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cli.options import OptionError, searcher_budget
from autopar_opt.search import baselines as bl
from autopar_opt.cli.solve import solve_command
from autopar_opt.search.engine import SearchOptions, run_search
from support import paths

ROOT = paths.REPO


def _small_spec(tmp_path: Path, limit: float = 60.0, **extra) -> Path:
    spec = {**extra, "model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16},
            "search": {"pp_degrees": [1, 2], "zero_levels": [0, 1], "recompute": ["none", "full"],
                       "microbatches": [2, 4]},
            "solver": {"name": "highs", "time_limit_s": limit, "rel_gap": 0.0},
            "plan": {"tp": 2, "pp": 2, "microbatches": 4}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("seed,dag", [(0, False), (1, False), (2, True), (3, True)])
def test_table_baselines_equal_the_evaluate_enumeration(seed, dag):
    """Best uniform and pure data parallelism from the search's tables = the
    evaluate()-based enumeration over the same candidates, same value."""
    graph, cluster, training, space = random_instance(seed, 6, dag=dag)
    params = default_params()
    result = run_search(graph, cluster, training, space, params,
                        SearchOptions(time_limit_s=60, rel_gap=1e-9))
    assert result.tables
    fast = bl.table_baselines(result.tables, graph, cluster, training, params, None)
    slow = [bl.pure_data_parallel(graph, cluster, training, space, params),
            bl.best_uniform(graph, cluster, training, space, params)]
    for new, old in zip(fast, slow):
        assert new.name == old.name
        assert (new.metrics is None) == (old.metrics is None), (new.note, old.note)
        if new.metrics is None:
            continue
        assert new.metrics.iteration_time_s == pytest.approx(old.metrics.iteration_time_s, rel=1e-9)
        again = evaluate(new.plan, graph, cluster, training, params)
        assert again.iteration_time_s == pytest.approx(new.metrics.iteration_time_s, rel=1e-12)
        assert new.metrics.iteration_time_s >= result.metrics.iteration_time_s * (1 - 1e-9)


def test_uniform_grid_honours_the_space_degrees():
    """The grid prices only the space's tp (and cp) degrees, not every divisor."""
    from autopar_opt.ir.training import SearchSpace

    space = SearchSpace(tp_degrees=(2, 8), cp_degrees=(1, 2), zero_levels=(0,), recompute=("none",),
                        sequence_parallel=(False,))
    grid = bl._grid(space, 64, dp_only=False)
    assert {(s.tp, s.cp) for s in grid} == {(2, 1), (2, 2), (8, 1), (8, 2)}
    assert all(s.dp * s.tp * s.cp == 64 for s in grid)
    assert {(s.tp, s.cp) for s in bl._grid(space, 64, dp_only=True)} == {(1, 1)}


def test_solve_builds_each_configuration_s_tables_once(tmp_path, monkeypatch, capsys):
    """The command builds cost tables only in the search (once per configuration):
    the baselines reuse them. (The free space alone: under a framework target the
    price of runnability searches the free space too, its own tables.)"""
    from autopar_opt.search import engine

    calls = []
    real = engine.build_cost_tables

    def counting(*args, **kwargs):
        calls.append(args[5:8])     # (pp, microbatches, schedule)
        return real(*args, **kwargs)
    monkeypatch.setattr(engine, "build_cost_tables", counting)
    monkeypatch.setattr(bl, "enumerate_strategies",
                        lambda *a, **k: pytest.fail("baselines enumerated strategies again"))
    code = solve_command(str(_small_spec(tmp_path, target="none")), json_output=True)
    assert code == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert len(calls) == len(set(calls)) == len(doc["certificate"]["configurations"])
    names = [b["name"] for b in doc["baselines"]]
    assert names == ["pure data parallelism", "best uniform Megatron-style", "user plan"]
    assert {"tables_s", "baselines_s", "command_s"} <= set(doc["solver"]["timings"])


def test_budget_above_the_time_limit_is_refused_before_the_searcher_runs(tmp_path):
    result = CliRunner().invoke(app, ["solve", str(_small_spec(tmp_path)), "--searcher", "random",
                                      "--budget-s", "30", "--time-limit", "10"])
    assert result.exit_code == 2, result.output
    assert re.search(r"--budget-s = 30\.0: exceeds the command's time limit \(--time-limit 10 s\)",
                     result.stderr), result.stderr
    assert "lower --budget-s to at most 10" in result.stderr and "Traceback" not in result.output


def test_budget_above_the_spec_time_limit_names_the_spec_key(tmp_path):
    with pytest.raises(OptionError, match=r"the spec's solver\.time_limit_s 5 s"):
        solve_command(str(_small_spec(tmp_path, limit=5)), searcher=_Hook("random", 8.0))


class _Hook:
    """A searcher hook that records its budget and finds nothing."""

    def __init__(self, name: str, budget_s: float | None) -> None:
        self.name, self.budget_s, self.seed = name, budget_s, 0
        self.ran_with: list[float] = []


def test_default_searcher_budget_is_capped_by_the_time_limit(tmp_path, monkeypatch):
    from dataclasses import dataclass

    from autopar_opt.cli.searcher import SearcherHook

    seen = []

    @dataclass
    class Spy(SearcherHook):
        def run(self, spec, err):
            seen.append(self.budget_s)
            return None                   # "cannot run": the command stops with exit 2

    assert solve_command(str(_small_spec(tmp_path)), time_limit_s=4,
                         searcher=Spy("random", None)) == 2
    assert seen == [pytest.approx(2.0)]
    assert searcher_budget(None, 60) == 10.0 and searcher_budget(3.0, 60) == 3.0


def test_start_up_does_not_import_networkx():
    """networkx (~0.3 s of every command's start-up) is imported only where used."""
    code = ("import sys, autopar_opt.cli.commands, autopar_opt.cli.solve, autopar_opt.spec; "
            "from autopar_opt.spec import load_spec; "
            f"s = load_spec({str(ROOT / 'examples' / 'quickstart.yaml')!r}); "
            "print('networkx' in sys.modules); s.graph.nx; print('networkx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
