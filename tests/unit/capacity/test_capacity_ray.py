"""The same sweep gives identical results on the local engine and on Ray.

The test starts a local Ray (2 CPUs) itself and shuts it down afterwards;
``run_ray`` uses an initialised Ray as is. Skips cleanly when Ray (the
optional extra ``autopar-opt[ray]``) is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autopar_opt.capacity import ResultStore, answers, load_sweep, run_sweep
from autopar_opt.capacity.run import entries_of
from support import paths

ray = pytest.importorskip("ray", reason="Ray is the optional extra autopar-opt[ray]")

TWO = paths.DATA / "capacity" / "two.yaml"
#: Row fields that depend on the machine's timing, not on the scenario.
VOLATILE = {"search_wall_s", "solve_wall_s", "document", "report_html"}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def _solve(engine: str, store_path: Path):
    sweep = load_sweep(TWO)
    with ResultStore(store_path) as store:
        run = run_sweep(sweep, store, engine=engine, workers=2)
    assert sorted(run.computed) == sorted(s.id for s in sweep.scenarios)
    return sweep, run


def test_local_and_ray_give_identical_results(local_ray, tmp_path):
    sweep, local = _solve("local", tmp_path / "local.sqlite")
    _, on_ray = _solve("ray", tmp_path / "ray.sqlite")
    assert ray.is_initialized()                    # the test's Ray was used, not replaced
    for sid, row in local.rows.items():
        other = on_ray.rows[sid]
        assert {k: v for k, v in row.items() if k not in VOLATILE} == \
            {k: v for k, v in other.items() if k not in VOLATILE}
        assert row["document"]["plan"] == other["document"]["plan"]
        assert row["document"]["certificate"]["primal"] == other["document"]["certificate"]["primal"]
    a = answers(entries_of(sweep, local.rows), sweep.planning)
    b = answers(entries_of(sweep, on_ray.rows), sweep.planning)
    assert a == b
