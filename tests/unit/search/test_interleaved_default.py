"""The Megatron target's default space holds its interleaved schedule (issue 29).

A spec that states no ``search.schedules`` searches what its target runs and the
cost model prices (``Target.default_schedules``): megatron 1F1B and interleaved
1F1B, torchtitan / DeepSpeed / the free space 1F1B. A stated list wins, and the
outputs say which schedules were searched and where they came from.

Oracle for the spec route: brute force over every split and strategy
combination of each outer configuration of the spec's *default* space
(tests/support/bruteforce.py, priced apart from the cost tables), keeping the
plans the Megatron exporter accepts (its rules are written apart from
ir/target.py) with one recomputation mode for the model, as in
test_interleaved.py. The instance is one where interleaving wins, so a default
that dropped the interleaved schedule fails the equality, not only the
membership check.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from support.exportable import megatron_accepts
from autopar_opt.cost.params import default_params
from autopar_opt.export import export_plan, plan_view
from autopar_opt.ir.training import Schedule
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, run_search

#: debug-moe with 4 MoE blocks on 2 x 4 GPUs (test_interleaved.py's instance), written
#: as a spec without search.schedules; training.runtime defaults to megatron-core
SPEC = ("model: {zoo: debug-moe, overrides: {num_layers: 4}}\ncluster: {zoo: debug-2x4}\n"
        "training: {global_batch_size: 8, seq_len: 128RUNTIME}\n"
        "search: {pp_degrees: [2], tp_degrees: [1, 2], zero_levels: [1], "
        "sequence_parallel: [true], recompute: [none, full], ep_degrees: [1, 2], "
        "etp_degrees: [1], microbatches: [2, 4]SCHEDULES}\nsolver: {name: dp}\n")


def _spec_text(runtime: str = "", schedules: str = "") -> str:
    return (SPEC.replace("RUNTIME", f", runtime: {runtime}" if runtime else "")
            .replace("SCHEDULES", f", schedules: {schedules}" if schedules else ""))


def _load(tmp_path, runtime: str = "", schedules: str = ""):
    from autopar_opt.spec import load_spec

    path = tmp_path / f"spec_{runtime or 'default'}_{len(schedules)}.yaml"
    path.write_text(_spec_text(runtime, schedules))
    return load_spec(path)


@pytest.mark.parametrize("runtime,framework,schedules", [
    ("", "megatron", ("1f1b", "interleaved")),
    ("megatron-lm", "megatron", ("1f1b", "interleaved")),
    ("torchtitan", "torchtitan", ("1f1b",)),
    ("deepspeed", "deepspeed", ("1f1b",)),
    ("pytorch-fsdp", "none", ("1f1b",)),
])
def test_the_default_schedules_are_the_targets(tmp_path, runtime, framework, schedules):
    spec = _load(tmp_path, runtime)
    assert spec.space.target.framework == framework
    assert tuple(s.value for s in spec.space.schedules) == schedules
    assert spec.space.schedules_source == f"default of target {framework} (from training.runtime)"


def test_a_stated_schedule_list_wins(tmp_path):
    spec = _load(tmp_path, schedules="[1f1b]")
    assert spec.space.schedules == (Schedule.one_f_one_b,)
    assert spec.space.schedules_source == "search.schedules"
    spec = _load(tmp_path, "torchtitan", "[gpipe, 1f1b]")
    assert spec.space.schedules == (Schedule.gpipe, Schedule.one_f_one_b)
    # vp_chunks needs no stated list under megatron: its default holds interleaved
    text = _spec_text().replace("microbatches: [2, 4]", "microbatches: [2, 4], vp_chunks: [2]")
    (tmp_path / "vp.yaml").write_text(text)
    from autopar_opt.spec import load_spec
    assert load_spec(tmp_path / "vp.yaml").space.vp_chunks == (2,)


@functools.lru_cache(maxsize=1)
def _oracle_of(text: str):
    """Brute force over the outer configurations of the spec's default space."""
    import tempfile
    from pathlib import Path

    from autopar_opt.spec import load_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(text)
        spec = load_spec(path)
    free = replace(spec.space, target=None)        # strategies: the exporter decides
    accept = megatron_accepts(spec.graph, spec.cluster, spec.training)
    best, best_plan = math.inf, None
    for cfg in outer_configs(spec.graph, spec.cluster, spec.training, spec.space):
        ref = brute_force(spec.graph, spec.cluster, spec.training, free, cfg.pp,
                          cfg.microbatches, cfg.schedule, accept=accept, vp=cfg.vp)
        if ref is not None and ref[0] < best:
            best, best_plan = ref
    return best, best_plan


@pytest.mark.parametrize("solver", ["dp", "highs"])
def test_the_default_space_optimum_equals_brute_force_and_is_interleaved(tmp_path, solver):
    spec = _load(tmp_path)
    assert Schedule.interleaved in spec.space.schedules
    best, best_plan = _oracle_of(_spec_text())
    assert best_plan.schedule is Schedule.interleaved and best_plan.vp_chunks == 2
    res = run_search(spec.graph, spec.cluster, spec.training, spec.space, default_params(),
                     SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0,
                                   warm_start=solver != "highs"))
    assert res.metrics.iteration_time_s == pytest.approx(best, rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(best, rel=1e-9)
    assert res.plan.schedule is Schedule.interleaved and res.plan.vp_chunks == 2
    # the stated 1f1b-only list is the narrower space: its optimum is worse here
    narrow = _load(tmp_path, schedules="[1f1b]")
    res1 = run_search(narrow.graph, narrow.cluster, narrow.training, narrow.space,
                      default_params(), SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    assert res1.metrics.iteration_time_s > best


def test_the_default_command_searches_exports_and_says_the_interleaved_schedule(tmp_path):
    """``autopar solve`` with no flags finds the interleaved optimum, says which schedules
    it searched and where they came from (console and plan.json), and ``autopar export``
    writes Megatron's virtual-pipeline flags, accepted by Megatron-Core where installed."""
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    path = tmp_path / "spec.yaml"
    path.write_text(_spec_text())
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["solve", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert ("schedules searched: 1f1b, interleaved (search.schedules not stated: the default "
            "of target megatron (from training.runtime)") in res.stdout
    assert "schedule=interleaved vp=2" in res.stdout
    doc = json.loads((out / "plan.json").read_text())
    assert doc["search_space"]["schedules"] == ["1f1b", "interleaved"]
    assert doc["search_space"]["schedules_source"] == "default of target megatron (from training.runtime)"
    assert doc["plan"]["schedule"] == "interleaved" and doc["plan"]["vp_chunks"] == 2
    best, _ = _oracle_of(_spec_text())
    assert doc["certificate"]["primal"] == pytest.approx(best, rel=1e-9)
    assert any(r["schedule"] == "interleaved" and r.get("vp_chunks") == 2
               for r in doc["certificate"]["configurations"])
    html = (out / "report.html").read_text()
    assert "default of target megatron (from training.runtime)" in html   # schedules from
    assert "interleaved vp=2" in html                                      # its configurations
    res = CliRunner().invoke(app, ["export", str(out / "plan.json"), "--to", "megatron"])
    assert res.exit_code == 0, res.output
    assert "--num-virtual-stages-per-pipeline-rank 2" in res.stdout
    res = CliRunner().invoke(app, ["solve", str(path), "--json"])
    assert json.loads(res.stdout)["search_space"]["schedules_source"].startswith("default of")
    pytest.importorskip("megatron.core")
    from support.frameworks import validate_megatron
    from autopar_opt.spec import load_spec

    spec = load_spec(path)
    plan = run_search(spec.graph, spec.cluster, spec.training, spec.space, default_params(),
                      SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0)).plan
    text = export_plan(plan, spec.graph, spec.cluster, spec.training, "megatron").text
    got = validate_megatron(text, spec.cluster.num_devices)
    view = plan_view(plan, spec.graph, spec.cluster, spec.training)
    assert got["config"].virtual_pipeline_model_parallel_size == 2
    assert got["layers_per_rank"] == view.blocks_per_stage == [2, 2]
    assert got["microbatches"] == plan.microbatches


def test_runnable_by_takes_the_named_targets_default_when_the_spec_states_none(tmp_path):
    """--runnable-by re-derives an unstated default from the framework it names: a
    pytorch-fsdp spec (free space, 1F1B) searched for megatron gets interleaving; a
    megatron spec searched for deepspeed gets 1F1B and no 'the spec lists' notice, and
    for none keeps its schedules."""
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    path = tmp_path / "fsdp.yaml"
    path.write_text(_spec_text("pytorch-fsdp"))
    res = CliRunner().invoke(app, ["solve", str(path), "--runnable-by", "megatron", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["search_space"]["schedules"] == ["1f1b", "interleaved"]
    assert doc["search_space"]["schedules_source"] == "default of target megatron (from --runnable-by)"
    assert doc["plan"]["schedule"] == "interleaved"
    path = tmp_path / "mcore.yaml"
    path.write_text(_spec_text())
    res = CliRunner().invoke(app, ["solve", str(path), "--runnable-by", "deepspeed", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["search_space"]["schedules"] == ["1f1b"]
    assert not any("the spec lists" in n for n in doc["notices"])
    # none: the free space of the spec's own schedules (a bound on its megatron space)
    res = CliRunner().invoke(app, ["solve", str(path), "--runnable-by", "none", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["search_space"]["schedules"] == ["1f1b", "interleaved"]
    path = tmp_path / "stated.yaml"
    path.write_text(_spec_text(schedules="[1f1b, interleaved]"))
    res = CliRunner().invoke(app, ["solve", str(path), "--runnable-by", "deepspeed", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["search_space"]["schedules"] == ["1f1b"]
    assert any("interleaved schedule the spec lists" in n for n in doc["notices"])
