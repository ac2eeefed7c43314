"""``capacity`` and ``calibrate`` check their deadline (issue 33, point 3), without a clock
in the assertions: the command's start is moved into the past (``started_at``, the
process-start time the CLI passes in) or the worker's clock is replaced, so what the
deadline stops is decided, not timed. Oracles: the exit code (4: no full result within
the limits), the scenarios and records the documents list as not reached, the files
not written.
"""

from __future__ import annotations

import json
import time
import types

import pytest

from autopar_opt.calibration.calibrate import NOT_REACHED, leave_one_family_out, model_records
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cli.calibrate import calibrate_command
from autopar_opt.cli.capacity import capacity_command
from support import paths

RUNS = paths.DATA / "published_runs.yaml"
SWEEP = paths.DATA / "capacity" / "tiny.yaml"          # 6 scenarios (2 devices x 3 sizes)
LONG_AGO = 3_600.0                                      # the command "started" an hour ago


def _capacity(tmp_path, capsys, **kw) -> tuple[int, dict]:
    code = capacity_command(str(SWEEP), "local", 1, None, True, True,
                            str(tmp_path / "store.sqlite"), **kw)
    return code, json.loads(capsys.readouterr().out)


def test_capacity_with_its_time_spent_runs_no_scenario_and_lists_them(tmp_path, capsys):
    code, doc = _capacity(tmp_path, capsys, time_limit_s=60.0,
                          started_at=time.perf_counter() - LONG_AGO)
    ids = [s["id"] for s in doc["scenarios"]] if doc.get("scenarios") else []
    assert code == 4
    assert len(doc["run"]["not_run"]) == 6 and set(ids) <= set(doc["run"]["not_run"])


def test_capacity_stops_starting_scenarios_at_its_deadline(tmp_path, capsys, monkeypatch):
    """The worker's clock jumps an hour after the second scenario started: those two are
    solved, the four after them are not run (exit 4), whatever the machine's speed."""
    from autopar_opt.capacity import worker

    started = []

    def clock() -> float:
        started.append(1)
        return time.time() + (LONG_AGO if len(started) > 2 else 0.0)

    monkeypatch.setattr(worker, "time", types.SimpleNamespace(
        time=clock, perf_counter=time.perf_counter, monotonic=time.monotonic, sleep=time.sleep))
    code, doc = _capacity(tmp_path, capsys, time_limit_s=600.0, started_at=time.perf_counter())
    assert code == 4
    assert len(doc["run"]["not_run"]) == 4 and doc["run"]["computed"] == 2


def test_calibrate_fit_with_its_time_spent_writes_nothing(tmp_path, capsys):
    """Exit 4, no parameters file, and (--json) the document listing every record as not
    reached (before: nothing on stdout)."""
    out = tmp_path / "fit.yaml"
    code = calibrate_command(str(RUNS), True, fit=True, output=str(out), time_limit_s=5.0,
                             started_at=time.perf_counter() - LONG_AGO)
    doc = json.loads(capsys.readouterr().out)
    reasons = {r["skipped"] for r in doc["records"] if "skipped" in r}
    assert code == 4 and not out.exists()
    assert reasons == {NOT_REACHED} and len(doc["records"]) == len(load_run_file(RUNS))


def test_calibrate_records_stop_at_the_deadline_and_not_before():
    records = load_run_file(RUNS)
    runs, skipped = model_records(records, deadline=time.perf_counter() - 1.0)
    assert runs == [] and [why for _, why in skipped] == [NOT_REACHED] * len(records)
    runs, skipped = model_records(records, deadline=time.perf_counter() + LONG_AGO)
    assert runs and all(why != NOT_REACHED for _, why in skipped)


def test_cross_validation_past_its_deadline_leaves_every_family_out():
    """No family's fit starts after the deadline; each is listed as left out."""
    runs, _ = model_records(load_run_file(RUNS))
    families = sorted({r.family for r in runs if not r.memory_only})
    assert len(families) >= 2
    validated, left_out = leave_one_family_out(runs, deadline=time.perf_counter() - 1.0)
    assert validated == [] and left_out == families


@pytest.mark.parametrize("limit", [0.0, -1.0, float("nan")])
def test_a_limit_that_is_not_a_positive_time_is_refused(tmp_path, limit):
    from autopar_opt.core.errors import SpecError

    with pytest.raises(SpecError, match="--time-limit"):
        calibrate_command(str(RUNS), True, time_limit_s=limit)
    with pytest.raises(SpecError, match="--time-limit"):
        capacity_command(str(SWEEP), "local", 1, None, True, True,
                         str(tmp_path / "s.sqlite"), time_limit_s=limit)


def test_capacity_with_nothing_run_says_why_and_names_only_what_it_wrote(tmp_path, capsys):
    """QA round 9: the note said only that the limit "ran out" (with time left: the output
    reserve and the least time a scenario starts with were not said), and the summary named
    a scenarios/ folder that was never written."""
    out = tmp_path / "out"
    code = capacity_command(str(SWEEP), "local", 1, str(out), False, False,
                            str(tmp_path / "store.sqlite"), time_limit_s=60.0,
                            started_at=time.perf_counter() - LONG_AGO)
    both = capsys.readouterr()
    captured = " ".join(both.out.split() + both.err.split())
    assert code == 4
    assert not (out / "scenarios").exists() and (out / "capacity.json").is_file()
    assert "no scenario solved: no plan reports" in captured
    assert "kept for writing the outputs" in captured and "starts only with at least 1 s" in captured
    # one worker runs in this process: no pool start-up to speak of
    assert "each worker process first imports" not in captured


def test_a_pool_says_its_workers_start_up_too(tmp_path, capsys):
    """QA round 11: with --workers 2 and a short limit both scenarios were 'not run' and the
    note's arithmetic (start-up, output reserve, 1 s a scenario needs) left time over: the
    pool's workers import the solver stack before their first scenario, unsaid."""
    code = capacity_command(str(SWEEP), "local", 2, str(tmp_path / "out"), False, False,
                            str(tmp_path / "store.sqlite"), time_limit_s=60.0,
                            started_at=time.perf_counter() - LONG_AGO)
    both = capsys.readouterr()
    captured = " ".join(both.out.split() + both.err.split())
    assert code == 4 and "each worker process first imports the solver stack" in captured


def test_a_smaller_sweep_into_the_same_out_leaves_no_stale_scenario(tmp_path, capsys):
    """QA round 9: scenario folders of an earlier, larger sweep stayed beside the new ones;
    a folder holding anything else is the user's and is kept."""
    import yaml

    out = tmp_path / "out"
    assert capacity_command(str(SWEEP), "local", 1, str(out), True, True,
                            str(tmp_path / "s.sqlite")) == 0
    before = {p.name for p in (out / "scenarios").iterdir()}
    (out / "scenarios" / "mine").mkdir()
    (out / "scenarios" / "mine" / "notes.txt").write_text("keep")
    data = yaml.safe_load(SWEEP.read_text())
    first = next(iter(data["axes"]))
    data["axes"][first] = data["axes"][first][:1]
    smaller = tmp_path / "smaller.yaml"
    smaller.write_text(yaml.safe_dump(data))
    assert capacity_command(str(smaller), "local", 1, str(out), True, True,
                            str(tmp_path / "s.sqlite")) == 0
    doc = json.loads((out / "capacity.json").read_text())
    now = {p.name for p in (out / "scenarios").iterdir()}
    assert now == {e["id"] for e in doc["scenarios"]} | {"mine"} and now - {"mine"} < before
    capsys.readouterr()
