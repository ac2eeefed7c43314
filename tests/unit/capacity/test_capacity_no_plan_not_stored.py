"""A scenario whose search ended with no plan and nothing proven (its own time limit came
first) is not stored: the next run searches it again (QA round 35: on 2 loaded cores two
Qwen3-235B scenarios ended "no plan was found within the time limit" at 4 s, were stored,
and every later run of the sweep, on any machine, served that row)."""

from __future__ import annotations

import yaml

from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.run import run_sweep
from autopar_opt.capacity.store import ResultStore
from support import paths


def test_an_undecided_scenario_is_searched_again(tmp_path):
    data = yaml.safe_load((paths.DATA / "capacity" / "tiny.yaml").read_text())
    data["base"]["solver"]["time_limit_s"] = 1e-6     # no configuration gets a solve
    data["axes"] = {"device": ["A100-80GB"], "gpus": [4]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    (sid,) = [s.id for s in sweep.scenarios]
    with ResultStore(tmp_path / "store.sqlite") as store:
        first = run_sweep(sweep, store, "local", 1)
        assert first.rows[sid]["status"] == "no_plan"        # the oracle: nothing decided
        assert store.count() == 0
        assert first.rows[sid]["reason"].endswith("(not stored: the next run of the sweep "
                                                  "searches it again)")
        again = run_sweep(sweep, store, "local", 1)
        assert again.computed == [sid] and again.reused == []
