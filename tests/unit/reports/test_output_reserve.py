"""Issue 15: the time limit keeps a reserve for the outputs priced from what they
will cost, and the report stays within what is left.

No timed assertion: the probe (the unit the reserve is priced in) is replaced
by a fixed value, so the reserve, the search's share and whether the timeline
is drawn are exact functions of the spec and the plan. Oracles: the cost
model's own terms (monotone in the plan's size, zero timeline above its
limit), the search options the command hands to the search, and the report's
content (a note instead of the timeline). Leaving the interpreter after the
command (``gc.freeze``, :func:`autopar_opt.cli.commands._skip_exit_collection`) is
checked in a subprocess: a piped ``--json``, the files and an atexit handler
are all intact.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from autopar_opt.reports import cost
from autopar_opt.reports.charts import (MAX_ROW_LABELS, MAX_VALUE_LABELS, memory_svg,
                                        timeline_svg)
from autopar_opt.reports.context import build_context
from autopar_opt.reports.render import render_html
from autopar_opt.reports.sections import MAX_TIMELINE_CELLS, timeline_section
from autopar_opt.reports.timeline import idle_time, idle_times, simulate
from autopar_opt.cli import solve as search_cli
from autopar_opt.spec import load_spec
from support import paths

ROOT = paths.REPO
EXAMPLES = ROOT / "examples"
FIXTURE = ROOT / "tests" / "data" / "report" / "plan_feasible.json"


def _scaled(stages: int, microbatches: int) -> dict:
    """The report fixture with ``stages`` copies of its stages and ``microbatches``."""
    doc = json.loads(FIXTURE.read_text())
    plan_stage, metric = doc["plan"]["stages"][0], doc["metrics"]["stages"]
    doc["plan"]["stages"] = [dict(plan_stage) for _ in range(stages)]
    doc["metrics"]["stages"] = [dict(metric[i % len(metric)], index=i) for i in range(stages)]
    doc["plan"]["pp"], doc["plan"]["microbatches"] = stages, microbatches
    return doc


def test_report_units_grow_with_the_plan():
    """Each term of the model grows with its size; the timeline costs nothing above its limit."""
    base = cost.report_units(4, 4 * 16, 32, 10)
    assert cost.report_units(8, 4 * 16, 32, 10) > base
    assert cost.report_units(4, 4 * 64, 32, 10) > base
    assert cost.report_units(4, 4 * 16, 320, 10) > base
    assert cost.report_units(4, 4 * 16, 32, 100) > base
    assert cost.timeline_units(32, MAX_TIMELINE_CELLS) > cost.timeline_units(32, 2048) > 0
    assert cost.timeline_units(32, MAX_TIMELINE_CELLS + 1) == 0.0
    assert cost.timeline_units(4, 0) == 0.0
    configs = [SimpleNamespace(pp=2, microbatches=8), SimpleNamespace(pp=32, microbatches=64)]
    assert cost.largest_report(configs, 100) == cost.report_units(32, 2048, 100, 2)


def test_reserve_is_priced_for_the_largest_plan_the_space_allows():
    """Same probe, same time left: the 405B space (plans up to 32 stages × 128
    micro-batches) gets a larger reserve than the quickstart (2 × 8); both are
    the model's price for their largest configuration, and the reserve never
    takes more than OUTPUT_SHARE of what is left."""
    from autopar_opt.search.configs import outer_configs

    unit = 0.05
    reserves = {}
    for name in ("quickstart.yaml", "llama31_405b_16384_h100.yaml"):
        spec = load_spec(EXAMPLES / name)
        configs = outer_configs(spec.graph, spec.cluster, spec.training, spec.space)
        expected = unit * cost.largest_report(configs, len(spec.graph.layers))
        reserves[name] = search_cli.output_reserve_s(spec, 1000.0, unit)
        assert reserves[name] == pytest.approx(expected)
        small = search_cli.output_reserve_s(spec, 0.2, unit)
        assert small == pytest.approx(min(expected, search_cli.OUTPUT_SHARE * 0.2))
        assert search_cli.output_reserve_s(spec, -1.0, unit) == 0.0
    assert reserves["llama31_405b_16384_h100.yaml"] > reserves["quickstart.yaml"]
    # the reserve scales with the measured probe (a slower or busier machine)
    spec = load_spec(EXAMPLES / "quickstart.yaml")
    assert search_cli.output_reserve_s(spec, 1000.0, 2 * unit) == pytest.approx(
        2 * reserves["quickstart.yaml"])


def test_timeline_is_drawn_only_when_the_time_left_pays_for_it():
    doc = _scaled(32, 64)
    rest = cost.report_units(32, 0, doc["spec"]["model"]["num_layers"],
                             len(doc["certificate"]["configurations"]))
    full = rest + cost.timeline_units(32, 32 * 64)
    unit = 0.01
    assert search_cli.timeline_fits(doc, full * unit * 1.001, unit)
    assert not search_cli.timeline_fits(doc, full * unit * 0.999, unit)
    assert search_cli.timeline_fits(doc, 0.0, None)          # no probe: nothing to price


def test_report_without_timeline_says_why():
    doc = _scaled(4, 8)
    ctx = build_context(doc, draw_timeline=False)
    assert ctx["timeline"] is None and "--time-limit" in ctx["timeline_left_out"]
    html = render_html(doc, draw_timeline=False)
    assert "the time limit left too little time to draw it" in html
    assert "time within one iteration" not in html          # the chart's axis label
    drawn = render_html(doc)
    assert "time within one iteration" in drawn and build_context(doc)["timeline_left_out"] is None
    big = _scaled(64, MAX_TIMELINE_CELLS // 64 + 1)
    assert timeline_section(big) is None
    assert f"{MAX_TIMELINE_CELLS:,}" in build_context(big)["timeline_left_out"]


def _texts(svg: str) -> list[str]:
    """The text elements of a chart (fonts stay text: ``svg.fonttype = none``)."""
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_large_charts_cap_their_labels():
    """The charts' costly text elements are capped whatever the plan's size."""
    ctx = build_context(_scaled(32, 64))
    texts = _texts(timeline_svg(ctx["timeline"]))
    rows = [t for t in texts if t.startswith(("stage ", "link "))]
    assert rows == [f"stage {i}" for i in range(0, 32, 2)] and len(rows) <= MAX_ROW_LABELS
    assert len(texts) < MAX_ROW_LABELS + 20      # + x ticks, axis label, legend: no bar numbers
    texts = _texts(memory_svg(ctx["memory"]))
    assert [t for t in texts if t.startswith("stage ")] == [f"stage {i}" for i in range(0, 32, 2)]
    values = [t for t in texts if re.fullmatch(r"\d+\.\d\d", t)]
    assert len(values) == 1 <= MAX_VALUE_LABELS          # the peak stage only
    small = build_context(_scaled(4, 8))
    texts = _texts(memory_svg(small["memory"]))
    assert len([t for t in texts if re.fullmatch(r"\d+\.\d\d", t)]) == 4


def test_idle_times_equal_the_per_stage_definition():
    ops = simulate([1.0, 2.0, 1.5, 0.5], [0.1, 0.2, 0.3], [0.05] * 4, 6, "1f1b")
    end = max(op.end for op in ops if op.kind in ("F", "B"))
    for i, value in enumerate(idle_times(ops, 4)):
        busy = sum(op.end - op.start for op in ops if op.stage == i and op.kind in ("F", "B"))
        assert value == pytest.approx(end - busy) == pytest.approx(idle_time(ops, i))


def test_solve_gives_the_search_what_the_reserve_leaves(monkeypatch, tmp_path):
    """With a probe priced so high that the reserve hits its cap, the search gets
    at most (1 - OUTPUT_SHARE) of the time left, and the report leaves the
    timeline out (no time left to draw it) but is still written, with its note."""
    from autopar_opt.reports import cost as cost_module
    from autopar_opt.search import engine

    seen = {}
    real = engine.run_search

    def spy(*args, **kwargs):
        seen.setdefault("limit", args[5].time_limit_s)     # the first search: the plan's
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "run_search", spy)
    monkeypatch.setattr(cost_module, "probe_s", lambda: 1000.0)
    out = tmp_path / "out"
    code = search_cli.solve_command(str(EXAMPLES / "quickstart.yaml"), time_limit_s=30.0,
                                    out_dir=str(out), quiet=True)
    assert code == 0
    assert 0 < seen["limit"] <= (1 - search_cli.OUTPUT_SHARE) * 30.0
    html = (out / "report.html").read_text()
    assert "the time limit left too little time to draw it" in html
    assert json.loads((out / "plan.json").read_text())["status"] in ("optimal", "feasible")


def test_exit_after_gc_freeze_loses_nothing(tmp_path):
    """The console entry point freezes the collector before the interpreter
    exits: a piped --json is complete, plan.json equals it, no temporary file
    is left, the report is whole, and atexit handlers still run."""
    out = tmp_path / "out"
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stdout.write('\\nATEXIT-RAN\\n'))\n"
            "from autopar_opt.cli.commands import main\n"
            f"sys.argv = ['autopar', 'solve', {str(EXAMPLES / 'quickstart.yaml')!r}, '--json',"
            f" '--time-limit', '20', '--out', {str(out)!r}]\n"
            "main()\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text, _, tail = proc.stdout.rpartition("\nATEXIT-RAN\n")
    assert tail == ""
    assert json.loads(text) == json.loads((out / "plan.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == ["plan.json", "report.html"]
    assert (out / "report.html").read_text().rstrip().endswith("</html>")


def test_exit_with_triton_loaded_prints_no_nanobind_leaks(tmp_path):
    """With PyTorch (and so Triton) loaded, the collector is not frozen: Triton's
    nanobind extension printed some thirty 'nanobind: leaked ...' lines for the frozen
    objects at exit (session 24, ``solve --searcher dqn``)."""
    pytest.importorskip("triton")
    code = ("import sys, triton\n"
            "from autopar_opt.cli.commands import main\n"
            f"sys.argv = ['autopar', 'solve', {str(EXAMPLES / 'quickstart.yaml')!r}, '--quiet',"
            f" '--out', {str(tmp_path / 'out')!r}]\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "nanobind" not in proc.stderr


def test_with_triton_loaded_the_process_ends_without_the_teardown(tmp_path):
    """A run that loaded PyTorch (Triton) ends once its outputs are written, its atexit
    handlers have run and stdout is flushed, with the command's exit status, skipping the
    interpreter's teardown (1.5-2.2 s past --time-limit, QA round 35). Oracles, with a
    stand-in ``triton`` module: the --json document is whole and equals plan.json, the
    atexit handler ran, a failing command's status (2, a missing spec) is kept, and a
    non-daemon thread the teardown would wait for (it writes after 4 s) is not waited for;
    without the stand-in the same script waits for it."""
    out = tmp_path / "out"
    code = ("import atexit, os, sys, threading, time, types\n"
            "sys.modules['triton'] = types.ModuleType('triton')\n"
            "if sys.argv[1] == 'wait':\n"
            "    threading.Thread(target=lambda: (time.sleep(4), os.write(2, b'THREAD-DONE'))).start()\n"
            "atexit.register(lambda: sys.stdout.write('\\nATEXIT-RAN\\n'))\n"
            "from autopar_opt.cli.commands import main\n"
            "sys.argv = ['autopar'] + sys.argv[2:]\n"
            "main()\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    args = ["solve", str(EXAMPLES / "quickstart.yaml"), "--json", "--time-limit", "20",
            "--out", str(out)]
    proc = subprocess.run([sys.executable, "-c", code, "go", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text, _, tail = proc.stdout.rpartition("\nATEXIT-RAN\n")
    assert tail == ""
    assert json.loads(text) == json.loads((out / "plan.json").read_text())
    missing = ["solve", str(tmp_path / "nope.yaml")]
    bad = subprocess.run([sys.executable, "-c", code, "wait", *missing], capture_output=True,
                         text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "THREAD-DONE" not in bad.stderr, bad.stderr
    plain = code.replace("sys.modules['triton'] = types.ModuleType('triton')\n", "")
    waited = subprocess.run([sys.executable, "-c", plain, "wait", *missing], capture_output=True,
                            text=True, env=env, timeout=120)
    assert waited.returncode == 2 and "THREAD-DONE" in waited.stderr
