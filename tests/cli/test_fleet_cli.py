"""``autopar solve`` on a cluster of several groups (issue 34), end to end.

A debug model on two one-node groups: the command exits 0 with a certified
plan, writes a fleet plan.json and a report drawing the groups; ``autopar
report`` renders the same page from the plan.json alone; ``export`` and the
options a fleet search does not take are refused (exit 2); spec mistakes are
listed with key and fix; a one-group fleet is exactly the plain cluster.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from autopar_opt.spec import SpecError, load_spec
from support.cli import run_cli
from support.fleets import TINY_MIX_CLUSTER

import pytest

BASE = {"model": {"zoo": "debug"},
        "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
        "training": {"global_batch_size": 16},
        "search": {"zero_levels": [0, 3], "recompute": ["none", "full"]},
        "solver": {"name": "dp", "time_limit_s": 60, "rel_gap": 0.001}}


def _write(tmp_path: Path, data: dict, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_solve_writes_a_certified_fleet_plan_and_report(tmp_path: Path) -> None:
    spec = _write(tmp_path, BASE)
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    assert "a100 alone" in text and "h100 alone" in text and "certificate" in text
    # each stage's memory, as a plain solve's (QA round 9)
    assert "peak memory" in text and "GiB" in text
    # the free per-layer space it searches is said (QA round 9)
    assert "the search is the free per-layer space (target: none)" in " ".join(text.split())
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["status"] == "optimal" and doc["shape"] in ("pipeline", "replicas")
    assert [g["name"] for g in doc["fleet"]["groups"]] == ["a100", "h100"]
    # the tier is one NIC's line rate, the group knows its NICs (as a plain cluster does):
    # a GPU of a busy node gets 1 NIC x 50 / 2 GPUs
    assert doc["fleet"]["groups"][1]["inter_node"]["bandwidth_gb_per_s"] == 50.0
    from autopar_opt.spec import load_spec
    h100 = load_spec(spec).fleet.groups[1]
    assert h100.nics == 1 and h100.inter_node_per_gpu.bandwidth_gb_per_s == 25.0
    assert doc["placement"] and {p["group"] for p in doc["placement"]} <= {"a100", "h100"}
    # no one capacity for stages on groups of different memory: each placement row's own
    # (QA round 36: a pipeline's metrics gave its first stage's group's to every stage)
    assert "memory_capacity_gib" not in doc["metrics"]
    hbm = {g["name"]: g["hbm_gib"] for g in doc["fleet"]["groups"]}
    assert all(p["capacity_gib"] == pytest.approx(hbm[p["group"]]) for p in doc["placement"])
    assert doc["certificate"]["exact"] and doc["certificate"]["gap"] <= 0.001
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<svg" in html and "a100" in html and "h100" in html and "<script" not in html
    code, text = run_cli("report", tmp_path / "out" / "plan.json", "-o", tmp_path / "again.html")
    assert code == 0 and "fleet" in text
    assert (tmp_path / "again.html").read_text() == html
    code, text = run_cli("export", tmp_path / "out" / "plan.json", "--to", "megatron")
    assert code == 2 and "fleet of several groups" in text
    assert "solve a spec of that group alone" in " ".join(text.split())


def test_a_fleet_plan_carries_the_widest_of_its_groups_intervals(tmp_path: Path) -> None:
    """QA round 11: a fleet plan had no 80% interval (plan.json, summary, report, capacity),
    while the README says every predicted time carries one. Oracle: each group's own
    interval (plan_interval on that group's cluster, the plan's GPUs for ZeRO-3 at scale);
    the plan's is the widest of those of the groups it runs on."""
    from autopar_opt.cost.interval import plan_interval
    from autopar_opt.ir.plan import Plan
    from autopar_opt.ir.replicas import ReplicaPlan
    from autopar_opt.spec import load_spec

    spec_path = _write(tmp_path, BASE)
    code, text = run_cli("solve", spec_path, "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    got = doc["metrics"]["interval"]
    assert "80% interval" in text and got["text"].split(";")[0] in text
    spec, t = load_spec(spec_path), doc["metrics"]["iteration_time_s"]
    index = {g["name"]: i for i, g in enumerate(doc["fleet"]["groups"])}
    if doc["shape"] == "replicas":      # plan.json names the groups
        plan = ReplicaPlan.from_dict({"classes": [
            {**c, "groups": [index[g] for g in c["groups"]]} for c in doc["plan"]["classes"]]})
        parts = [(g, c.plan) for c in plan.classes for g in c.groups]
        used = sum(st.strategies[0].devices for c in plan.classes for st in c.plan.stages)
    else:
        plan = Plan.from_dict({**doc["plan"], "stage_groups": [index[g] for g in
                                                               doc["plan"]["stage_groups"]]})
        parts = [(g, plan) for g in sorted(set(plan.stage_groups or [0]))]
        used = sum(st.strategies[0].devices for st in plan.stages)
    own = [plan_interval(spec.graph, spec.fleet.groups[g], spec.training, p, t, devices=used)
           for g, p in parts]
    widest = max(own, key=lambda iv: iv.high / iv.low)
    assert (got["low"], got["high"]) == (widest.low, widest.high)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Iteration time 80% interval" in html


def test_a_fleet_states_what_was_assumed_per_group(tmp_path: Path) -> None:
    """QA round 7: a fleet's plan.json had no ``cost_model.case`` and its report no list of
    the case's assumptions (the optimizer, each group's device and kernels). Lines every
    group shares stand once; a group's own lines carry its name."""
    spec = _write(tmp_path, {**BASE, "training": {"global_batch_size": 16,
                                                  "optimizer": "adam_bf16"}})
    code, text = run_cli("solve", spec, "--out", tmp_path / "out")
    assert code == 0, text
    case = json.loads((tmp_path / "out" / "plan.json").read_text())["cost_model"]["case"]
    assert sum(line.startswith("optimizer adam_bf16: 2 + 2 + 4") for line in case) == 1
    assert any(line.startswith("a100: device A100") for line in case)
    assert any(line.startswith("h100: device H100") for line in case)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Assumed for this case" in html and "optimizer adam_bf16" in html


def test_options_a_fleet_search_does_not_take_are_refused(tmp_path: Path) -> None:
    spec = _write(tmp_path, BASE)
    code, text = run_cli("solve", spec, "--runnable-by", "megatron")
    assert code == 2 and "--runnable-by" in text and "several groups" in text
    # none asks for the free space, the one a fleet searches (QA round 10: refused)
    assert "several groups" not in run_cli("solve", spec, "--runnable-by", "none",
                                           "--time-limit", "30", "--quiet")[1]


def test_spec_mistakes_are_listed_with_their_fix(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(BASE))
    bad["cluster"]["groups"][1]["name"] = "a100"
    bad["cluster"]["groups"].append({"name": "v100", "device": "V100-32GB", "nodes": 1,
                                     "gpus_per_node": 2, "inter_node": {"bandwidth_gb_per_s": 5,
                                                                        "latency_us": 10},
                                     "nic_gb_per_s": 5})
    bad["cluster"]["links"][0]["between"] = ["a100", "b100"]
    bad["search"]["stage_devices"] = "free"
    bad["search"]["schedules"] = ["1f1b", "interleaved"]
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, bad))
    text = str(err.value)
    assert "repeats the name of another group" in text
    assert "names no group of the fleet" in text and "did you mean" in text
    assert "states one NIC's rate twice (inter_node and nic_gb_per_s)" in text
    assert "no link between these groups" in text and "add {between: [a100, v100]" in text
    assert "free stage sizes are not searched" in text
    # searched as 1F1B without a word before: the fleet's configurations have no vp
    assert "search.schedules[1] = 'interleaved': the interleaved schedule is not searched on a " \
        "fleet of several groups" in text
    assert "search.schedules[0]" not in text
    code, out = run_cli("solve", _write(tmp_path, bad, "bad.yaml"))
    assert code == 2 and "Traceback" not in out


def test_one_group_fleet_is_the_plain_cluster(tmp_path: Path) -> None:
    one = json.loads(json.dumps(BASE))
    one["cluster"] = {"name": "h", "groups": [{"name": "h", "device": "H100-SXM-80GB", "nodes": 1,
                                                "gpus_per_node": 2}]}
    plain = json.loads(json.dumps(BASE))
    plain["cluster"] = {"name": "h", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 2}
    a, b = load_spec(_write(tmp_path, one, "one.yaml")), load_spec(_write(tmp_path, plain, "plain.yaml"))
    assert a.fleet is None and a.cluster == b.cluster
    code_a, _ = run_cli("solve", tmp_path / "one.yaml", "--out", tmp_path / "o1")
    code_b, _ = run_cli("solve", tmp_path / "plain.yaml", "--out", tmp_path / "o2")
    da = json.loads((tmp_path / "o1" / "plan.json").read_text())
    db = json.loads((tmp_path / "o2" / "plan.json").read_text())
    assert code_a == code_b == 0 and da["plan"] == db["plan"] and "fleet" not in da
    assert da["certificate"]["primal"] == db["certificate"]["primal"]


def test_a_fleet_lists_a_training_mistake_once(tmp_path: Path) -> None:
    """QA round 7: the fleet checked the training section once per group and listed the
    same problem twice ("2 problems", identical lines)."""
    spec = _write(tmp_path, {**BASE, "training": {"global_batch_size": 16, "dtype": "fp16",
                                                  "optimizer": "adam_bf16"}}, "bad.yaml")
    code, out = run_cli("solve", spec)
    assert code == 2 and "invalid spec: 1 problem" in out and "2 problems" not in out


@pytest.mark.parametrize("edit, said", [
    (lambda d: d["certificate"].update(lower_bound=d["certificate"]["primal"] * 10),
     "is above certificate.primal"),
    (lambda d: d.update(status="banana"), "status = 'banana' is not one of"),
    (lambda d: d["fleet"].update(groups=[]), "fleet.groups is empty"),
    (lambda d: d["placement"][0].update(group="zzz"), "placement[0].group = 'zzz' is no group"),
    (lambda d: d["fleet"]["groups"][0].update(nodes=0), "a group has at least one of each")])
def test_report_refuses_a_fleet_document_no_solve_writes(tmp_path: Path, edit, said) -> None:
    """QA round 9: edited fleet plan.json files were rendered (a bound of 99 s over a 1.38 s
    plan as "Optimal"), two as Python errors naming no key; a plain plan.json is refused."""
    code, text = run_cli("solve", _write(tmp_path, BASE), "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, text = run_cli("report", bad, "-o", tmp_path / "r.html")
    assert code == 2 and said in " ".join(text.split())
    assert not (tmp_path / "r.html").exists()


def test_a_misspelt_groups_key_and_an_empty_group_name_are_named(tmp_path: Path) -> None:
    """QA round 9: `group:` gave four problems of the plain-cluster form with no "did you
    mean 'groups'", and a group named '' was accepted."""
    data = copy.deepcopy(BASE)
    data["cluster"]["group"] = data["cluster"].pop("groups")
    code, text = run_cli("solve", _write(tmp_path, data))
    flat = " ".join(text.split())
    assert code == 2 and "unknown key 'group'" in flat and "did you mean 'groups'" in flat
    assert "required key missing" not in flat and "1 problem" in flat
    data = copy.deepcopy(BASE)
    data["cluster"]["groups"][0]["name"] = ""
    code, text = run_cli("solve", _write(tmp_path, data))
    assert code == 2 and "cluster.groups[0].name = '': is empty" in " ".join(text.split())


def test_an_infeasible_fleet_says_why(tmp_path: Path) -> None:
    """QA round 9: the summary said only "infeasible"; a plain cluster names the least
    memory a plan needs. Oracle: Llama-3-70B does not fit on two 2-GPU nodes."""
    data = {"model": {"zoo": "llama3-70b"},
            "cluster": {"groups": [
                {"name": "a100", "device": "A100-80GB", "nodes": 1, "gpus_per_node": 2},
                {"name": "h100", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 2}],
                "links": [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 25,
                           "latency_us": 20}]},
            "training": {"global_batch_size": 16, "seq_len": 2048},
            "search": {"pp_degrees": [1, 2], "zero_levels": [3], "recompute": ["full"]},
            "solver": {"name": "dp", "time_limit_s": 30}}
    code, text = run_cli("solve", _write(tmp_path, data), "--out", tmp_path / "out")
    flat = " ".join(text.split())
    assert code == 3
    assert "no plan: every configuration is proven infeasible; e.g. the layers need at least" in flat
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert any(n.startswith("no plan:") for n in doc["notices"])


def test_replica_classes_say_the_bandwidth_in_effect(tmp_path: Path) -> None:
    """QA round 9: the report drew the link's stated bandwidth; the all-reduce between the
    replica classes runs at the slowest of the link and each group's NICs (one 25 GB/s NIC
    per GPU by default here, under a 100 GB/s link). GPT-1.7B on an A100 and an H100 node
    splits into replica classes."""
    from autopar_opt.cli.fleet import summary

    data = {"model": {"zoo": "gpt-1.7b"},
            "cluster": {"name": "mix", "groups": [
                {"name": "a100", "device": "A100-80GB", "nodes": 1, "gpus_per_node": 8},
                {"name": "h100", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8}],
                "links": [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 100,
                           "latency_us": 20}]},
            "training": {"global_batch_size": 128, "seq_len": 2048},
            "search": {"pp_degrees": [1, 2], "tp_degrees": [1, 2], "zero_levels": [1],
                       "recompute": ["none"], "sequence_parallel": [True]},
            "solver": {"name": "dp", "time_limit_s": 50, "rel_gap": 0.001}}
    code, text = run_cli("solve", _write(tmp_path, data), "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["shape"] == "replicas"
    tier = doc["metrics"]["sync"]["tier"]["bandwidth_gb_per_s"]
    assert tier < 100.0                     # the NICs, not the stated link
    assert f"at {tier:g} GB/s per GPU" in summary(doc)
    # the group suffix of the strategies is explained where it appears (QA round 9)
    text = summary(doc)
    assert "@g1" in text
    assert "(@gK in a strategy: its layout is on fleet group K: g1 h100; no suffix: a100)" in text


def test_a_group_takes_the_plain_clusters_nic_limit(tmp_path: Path) -> None:
    """QA round 9: a group's nics_per_node of 100,000,000 was accepted (a plain cluster caps
    it at 4,096)."""
    data = copy.deepcopy(BASE)
    data["cluster"]["groups"][1]["nics_per_node"] = 100_000_000
    code, text = run_cli("solve", _write(tmp_path, data))
    assert code == 2 and "cluster.groups[1].nics_per_node = 100000000" in " ".join(text.split())


def test_no_bound_is_said_as_none_not_minus_infinity() -> None:
    """QA round 9: a time-limited fleet printed "proven >= -inf s" and "lower bound -inf s"."""
    from autopar_opt.cli.fleet import summary
    from autopar_opt.reports.formatting import alone_words

    assert alone_words(None, ["not_solved"], "-inf") == "no plan found (not_solved), no bound proven"
    assert alone_words("1.2", ["optimal"], "1.1") == "best 1.2 s, proven >= 1.1 s"
    doc = {"spec": {"model": {"name": "m"}}, "status": "no_plan", "metrics": None,
           "fleet": {"name": "f", "groups": [{"name": "a", "nodes": 1, "gpus_per_node": 2,
                                               "device": "A100-80GB"}]},
           "homogeneous": [{"group": "a", "primal": None, "lower_bound": "-inf",
                            "statuses": ["not_solved"]}],
           "certificate": {"primal": None, "lower_bound": "-inf", "gap": "inf",
                           "configurations": []}, "notices": []}
    text = summary(doc)
    assert "-inf" not in text and "no lower bound proven" in text and "no bound proven" in text


def test_a_group_states_the_plain_clusters_device_and_fabric_keys(tmp_path: Path) -> None:
    """QA round 9: a group could not state a 94 GB Hopper, a power cap or a blocking fabric
    (unknown keys), so a one-group fleet could not say every plain cluster. Oracle: the
    one-group fleet builds the plain cluster with the same keys; in a two-group fleet the
    group's device carries them."""
    keys = {"device_memory_gib": 94.0, "power_limit_w": 500.0, "nodes_per_leaf": 1,
            "oversubscription": 2.0}
    one = json.loads(json.dumps(BASE))
    one["cluster"] = {"name": "h", "groups": [{"name": "h", "device": "H100-SXM-80GB",
                                                "nodes": 2, "gpus_per_node": 2, **keys}]}
    plain = json.loads(json.dumps(BASE))
    plain["cluster"] = {"name": "h", "device": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 2,
                        **keys}
    a, b = load_spec(_write(tmp_path, one, "one.yaml")), load_spec(_write(tmp_path, plain, "plain.yaml"))
    assert a.fleet is None and a.cluster == b.cluster
    assert a.cluster.device.hbm_gib == 94.0 and a.cluster.device.clock_factor < 1.0
    mixed = json.loads(json.dumps(BASE))
    mixed["cluster"]["groups"][1].update(keys)
    h100 = load_spec(_write(tmp_path, mixed, "mixed.yaml")).fleet.groups[1]
    assert h100.device.hbm_gib == 94.0 and h100.device.power_limit_w == 500.0
    assert h100.nodes_per_leaf == 1 and h100.oversubscription == 2.0


def test_the_summary_lists_every_layout_of_a_stage_as_the_report_does(tmp_path: Path) -> None:
    """A stage of 4 layouts (the example fleet's h100 class) was summarised by its first
    3: the summary must list what plan.json's placement row (and the report) lists."""
    from autopar_opt.cli.fleet import summary
    code, text = run_cli("solve", _write(tmp_path, BASE), "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    row = doc["placement"][0]
    row["strategies"] = ["dp1·tp1·z0", "dp1·tp1·z3", "dp1·tp1·z0·rc-full", "dp1·tp1·z3·rc-full"]
    line = next(x for x in summary(doc).splitlines() if f"stage {row['index']} on" in x)
    assert line.endswith("[" + ", ".join(row["strategies"]) + "]")


def test_a_stage_memory_against_a_reserve_says_usable(tmp_path: Path) -> None:
    """Each stage's capacity is its group's memory less training.memory_reserve_gib: said as
    solve's summary says it (the fleet printed 'peak memory x/79.0 GiB' for an 80 GiB H100)."""
    data = copy.deepcopy(BASE)
    data["training"]["memory_reserve_gib"] = 1.0
    code, text = run_cli("solve", _write(tmp_path, data), "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    hbm = {g["name"]: g["hbm_gib"] for g in doc["fleet"]["groups"]}
    row = doc["placement"][0]
    assert row["capacity_gib"] == pytest.approx(hbm[row["group"]] - 1.0)
    assert (f"/{row['capacity_gib']:.1f} GiB usable ({hbm[row['group']]:.4g} GiB less the 1 GiB of "
            "training.memory_reserve_gib)") in " ".join(text.split())


def test_estimate_of_a_fleet_plan_under_a_one_cluster_spec_names_the_fleet_it_needs(
        tmp_path: Path) -> None:
    """``estimate SPEC --plan`` on the plan.json a fleet solve wrote, SPEC a plain cluster:
    refused (exit 2, no traceback) naming the file, the ``fleet`` key and the groups, the fix
    the fleet spec (QA round 36: under its fleet spec the plan is re-priced,
    tests/cli/test_estimate_fleet_plan.py)."""
    spec = _write(tmp_path, BASE)
    assert run_cli("solve", spec, "--out", tmp_path / "out", "--quiet")[0] == 0
    plan = tmp_path / "out" / "plan.json"
    plain = _write(tmp_path, {**BASE, "cluster": {"nodes": 1, "gpus_per_node": 2,
                                                  "device": "A100-80GB"}}, "plain.yaml")
    code, text = run_cli("estimate", plain, "--plan", plan, "--json")
    assert code == 2 and "Traceback" not in text
    problem = json.JSONDecoder().raw_decode(text, text.index("{"))[0]["error"]["problems"][0]
    assert problem["file"] == str(plan) and problem["key"] == "fleet"
    assert "fleet of several groups (a100, h100)" in problem["rule"]
    assert "give the fleet spec it was solved with" in problem["fix"]
