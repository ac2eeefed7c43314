"""Each row of issue 33's tables, as a regression test (small versions of the inputs).

Rows: 1 a Piper file nested 200k deep; 2 a PaSE gzip bomb (also under a 1.5 GiB
address-space cap); 3-4 ``place`` phases stop at the deadline and a run out of time
answers exit 4 with its bound (timings of 10^5-10^6 nodes are a benchmark:
benchmarks/robustness/DEADLINES.md); 5-6 MoE configs; 7 Piper devices; 8 plan.json
fields; 9 plan.json size; 10 --workers; 11 SIGHUP (tests/cli/test_robustness.py);
12 two runs into one --out. Then the weak messages, one test each.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from autopar_opt.cli.lock import OutputLock
from autopar_opt.core.deadline import PhaseDeadline
from autopar_opt.placement import DeviceType, PlacementProblem
from autopar_opt.placement.coarsen import coarsen_chains
from autopar_opt.placement.condense import condense
from autopar_opt.placement.heuristics import topo_split
from autopar_opt.placement.solve import solve_placement
from support import paths
from support.cli import run_cli

HF = paths.REPO / "model_zoo" / "hf"
PIPER = paths.DATA / "peers" / "piper" / "gnmt.json"


def _peer_spec(tmp_path: Path, problem: dict) -> Path:
    path = tmp_path / "peer.yaml"
    path.write_text(yaml.safe_dump({"problem": problem, "solver": {"name": "dp"}}))
    return path


def _config(tmp_path: Path, name: str, **changes) -> Path:
    data = json.loads((HF / name).read_text())
    data.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


def _subprocess(args: list[str], address_space: int | None = None, timeout: float = 120):
    """``autopar ARGS`` in a fresh process (optionally under an address-space cap)."""
    def cap():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, preexec_fn=cap)


# ------------------------------------------------------------------ rows 1-2: peer files
def test_row1_piper_file_nested_200k_deep_is_exit_2(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"maxMemoryPerDevice": 1, "maxDevices": 8, "bandwidth": 1, "mbsInBatch": 1, '
                    '"nodes": ' + "[" * 200_000 + "]" * 200_000 + ', "edges": []}')
    code, text = run_cli("solve", _peer_spec(tmp_path, {"format": "piper", "file": "deep.json",
                                                        "devices": 8}))
    assert code == 2 and "deep.json" in text and "nested too deeply" in text


def _bomb(path: Path, unpacked: int) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b'{"a": "')
        chunk = b" " * (1 << 20)
        for _ in range(unpacked >> 20):
            f.write(chunk)
        f.write(b'"}')
    return path


def test_row2_pase_gzip_bomb_stops_at_the_expansion_limit(tmp_path):
    bomb = _bomb(tmp_path / "bomb.json.gz", 96 << 20)          # 96 MiB from about 100 KB
    assert bomb.stat().st_size < 200_000
    code, text = run_cli("solve", _peer_spec(tmp_path, {"format": "pase", "file": "bomb.json.gz"}))
    assert code == 2 and "bomb.json.gz" in text and "unpacks to more than" in text


def test_row2_bomb_under_a_memory_cap_is_exit_2_not_a_memory_error(tmp_path):
    _bomb(tmp_path / "bomb.json.gz", 96 << 20)
    spec = _peer_spec(tmp_path, {"format": "pase", "file": "bomb.json.gz"})
    proc = _subprocess(["solve", spec], address_space=3 << 30)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr


def _pase_numbers_gz(path: Path, count: int) -> Path:
    """A PaSE-shaped table whose one vertex has ``count`` costs ``0,1,0,0,...`` (a 1 MiB
    random pattern repeated: packed about 15 times, within the gzip ratio guard, as a
    hostile table of real size would be)."""
    rng = np.random.default_rng(0)
    pattern = np.full(1 << 20, ord(","), dtype=np.uint8)
    pattern[0::2] = ord("0") + (rng.random(1 << 19) < 0.1)
    chunk = pattern.tobytes()
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"vertices": [{"id": 0, "configs": [[1]], "cost": [')
        left = 2 * count - 1                       # "0,0,...,0": count digits, count-1 commas
        while left > len(chunk):
            f.write(chunk)
            left -= len(chunk)
        f.write(chunk[:left])
        f.write(b']}], "edges": []}')
    return path


def test_row2_pase_256_mib_of_numbers_is_refused_by_its_count_within_2_gib(tmp_path):
    """256 MiB of ``0,0,0,...`` (issue 35: read by ``json.loads`` it took 2.8 GiB): the
    values are counted before anything is parsed, and the command says so, under a 2 GiB
    address-space cap."""
    table = _pase_numbers_gz(tmp_path / "zeros.json.gz", (256 << 20) // 2 - 64)
    assert table.stat().st_size < 64 << 20
    spec = _peer_spec(tmp_path, {"format": "pase", "file": "zeros.json.gz"})
    proc = _subprocess(["solve", spec], address_space=2 << 30)
    assert proc.returncode == 2, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    count = (256 << 20) // 2 - 64
    shown = re.search(r"holds up to ([\d,]+) JSON values", out)
    assert "zeros.json.gz" in out and shown and count <= int(shown[1].replace(",", "")) <= count + 8
    assert "over the limit of 40,000,000" in out and "Traceback" not in out


def test_row2_the_largest_pase_table_the_count_admits_is_read_within_2_gib(tmp_path):
    """39 million costs (under the 40 million cap): read into float64, then refused by
    the table's own check (one configuration for 39 million costs), under 2 GiB."""
    _pase_numbers_gz(tmp_path / "big.json.gz", 39_000_000)
    spec = _peer_spec(tmp_path, {"format": "pase", "file": "big.json.gz"})
    proc = _subprocess(["solve", spec], address_space=2 << 30)
    assert proc.returncode == 2, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "vertices[0].configs" in out and "39000000 costs" in out and "Traceback" not in out


# ------------------------------------------------------------------ rows 3-4: place deadlines
def _chain(n: int) -> PlacementProblem:
    return PlacementProblem("chain", [f"n{i}" for i in range(n)], list(range(n)),
                            np.stack([np.arange(n - 1), np.arange(1, n)], axis=1),
                            {"acc": 1.0 + np.arange(n) % 7}, np.full(n, 1000.0), np.full(n, 0.5),
                            np.arange(n), np.zeros(n, bool), [DeviceType("acc", 8, 1e12)])


def _raise_after(calls: int):
    count = [0]

    def check() -> None:
        count[0] += 1
        if count[0] > calls:
            raise PhaseDeadline()
    return check


def test_rows3_4_every_place_phase_stops_at_its_deadline():
    p = _chain(5000)
    with pytest.raises(PhaseDeadline):
        condense(p, check=_raise_after(0))
    cond = condense(p)
    coarse, rep = coarsen_chains(cond, contiguous=True, check=_raise_after(0))
    assert rep.stopped_early or rep.passes == 0
    assert coarse.num_units <= cond.num_units
    assert topo_split(cond, check=_raise_after(0)) == (np.inf, None)   # no sweep finished
    value, assign = topo_split(cond, check=_raise_after(3))            # some sweeps did
    assert assign is not None and assign.shape == (cond.num_units,)


def test_rows3_4_a_solve_out_of_time_answers_with_its_bound():
    res = solve_placement(_chain(3000), time_limit_s=0.0)
    assert res.status == "no_solution" and res.assignment is None
    assert res.lower_bound == pytest.approx(float(np.sum(1.0 + np.arange(3000) % 7)) / 8)
    assert "time limit" in res.details["stopped"]


def test_rows3_4_place_out_of_time_exits_4_and_writes_the_bound(tmp_path):
    graph = tmp_path / "chain.json"
    n = 2000
    graph.write_text(json.dumps({
        "maxSizePerFPGA": 1e12, "maxFPGAs": 8, "maxCPUs": 0,
        "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 10.0, "fpgaLatency": 1.0,
                   "isBackwardNode": 0, "size": 1.0} for i in range(n)],
        "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(n - 1)]}))
    out = tmp_path / "out"
    proc = _subprocess(["place", graph, "--time-limit", "0.01", "--out", out, "--json"])
    assert proc.returncode == 4, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "no_solution" and summary["lower_bound"] == pytest.approx(n / 8)
    assert json.loads((out / "placement.json").read_text())["lower_bound"] == pytest.approx(n / 8)


# ------------------------------------------------------------------ rows 5-7: imports
def test_row5_qwen3_moe_with_no_experts_is_refused(tmp_path):
    code, text = run_cli("model", _config(tmp_path, "qwen3-30b-a3b.json", num_experts=0),
                         "--seq-len", "512")
    assert code == 2 and "num_experts = 0" in text and "at least one routed expert" in text


def test_row6_top_k_above_the_experts_is_refused(tmp_path):
    code, text = run_cli("model", _config(tmp_path, "mixtral-8x7b-v0.1.json",
                                          num_experts_per_tok=16), "--seq-len", "512")
    assert code == 2 and "num_experts_per_tok = 16" in text and "num_local_experts = 8" in text


def test_row7_piper_devices_beyond_the_limit(tmp_path):
    spec = _peer_spec(tmp_path, {"format": "piper", "file": str(PIPER), "devices": 10**9})
    code, text = run_cli("solve", spec)
    assert code == 2 and "problem.devices" in text and "1,048,576" in text


# ------------------------------------------------------------------ rows 8-9: plan.json
@pytest.fixture(scope="module")
def runnable_plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--runnable-by",
                         "megatron", "--out", out, "--quiet")
    assert code == 0, text
    return json.loads((out / "plan.json").read_text())


@pytest.mark.parametrize("field,value,words", [
    ("pp", "two", "'plan.pp' input should be a valid integer"),
    ("pp", 64, "pp = 64 but the plan lists"),
    ("microbatches", float("nan"), "'plan.microbatches'"),
    ("schedule", "zigzag", "'plan.schedule'"),
    ("vp_chunks", 7, "vp_chunks = 7 with the 1f1b schedule"),
])
def test_row8_every_plan_field_export_reads_is_checked(tmp_path, runnable_plan, field, value, words):
    doc = json.loads(json.dumps(runnable_plan))
    doc["plan"][field] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    code, text = run_cli("export", path, "--to", "megatron")
    assert code == 2 and "the plan is malformed" in text and words in text, text
    assert "KeyError" not in text and "ValueError" not in text and "--spec" not in text


@pytest.mark.parametrize("edit,words", [
    (lambda plan: plan["stages"][0]["strategies"][0].update(tp=-2), "'plan.stages[0].strategies[0].tp'"),
    (lambda plan: plan.pop("stages"), "missing key 'plan.stages'"),
], ids=["tp_minus_2", "no_stages"])
def test_message_malformed_plan_is_named_before_an_unreadable_spec(tmp_path, edit, words):
    """The spec path inside plan.json is not on disk (the plan was copied from another
    machine): a malformed plan is still reported on its own key, not as a missing spec."""
    doc = json.loads((paths.DATA / "report" / "plan_feasible.json").read_text())
    assert not Path(doc["spec"]["path"]).exists()       # 'specs/debug.yaml', relative
    edit(doc["plan"])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    code, text = run_cli("export", path, "--to", "megatron")
    assert code == 2 and "the plan is malformed" in text and words in text, text
    assert "--spec" not in text and "not readable" not in text
    # with --json, the error object names the same key (not the spec)
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, ["export", str(path), "--to", "megatron", "--json"])
    problems = json.loads(result.stdout)["error"]["problems"]
    assert result.exit_code == 2 and [p["key"] for p in problems] == [words.split("'")[1]]


def test_row9_a_plan_json_above_the_document_limit_is_refused_unread(tmp_path):
    path = tmp_path / "plan.json"
    with open(path, "wb") as f:               # sparse: the size is refused on stat
        f.truncate((64 << 20) + 1)
    code, text = run_cli("report", path, "-o", tmp_path / "r.html")
    assert code == 2 and "over the limit of 67,108,864 bytes" in text
    assert not (tmp_path / "r.html").exists()


# ------------------------------------------------- files of later merges: ONNX graphs, GDP policies
def _special(tmp_path: Path, kind: str, name: str, too_big: int) -> str:
    """A path that is not a usable file of its kind: too large (sparse: refused on stat,
    never read), a directory, a device, a FIFO (opening it would block forever)."""
    if kind == "device":
        return "/dev/zero"
    path = tmp_path / name
    if kind == "too_large":
        with open(path, "wb") as f:
            f.truncate(too_big)
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    return name


#: kind -> words of the rule (the limits: reading.ONNX 2 GiB - 1 byte, reading.POLICY 64 MiB).
SPECIAL = {"too_large": "over the limit of", "directory": "is a directory",
           "device": "is a device file", "fifo": "is a pipe (FIFO)"}
ONNX_TOO_BIG = 2 << 30                          # protobuf's limit + 1 byte


@pytest.mark.parametrize("kind", SPECIAL)
def test_files_onnx_graph_of_place_is_read_within_its_limits(tmp_path, kind):
    pytest.importorskip("onnx")
    ref = _special(tmp_path, kind, "m.onnx", ONNX_TOO_BIG)
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": {"onnx": ref},
                                                  "devices": [{"type": "A100-80GB", "count": 2}]}}))
    code, text = run_cli("place", spec, "--out", tmp_path / "o")
    assert code == 2 and "p.yaml: placement.graph.onnx" in text and SPECIAL[kind] in text, text
    assert "ONNX model" in text and "does not exist" not in text
    if kind == "too_large":
        assert "2,147,483,648 bytes, over the limit of 2,147,483,647 bytes for an ONNX model" in text
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", [*SPECIAL, "corrupt", "empty"])
def test_files_onnx_graph_of_an_operator_sharding_spec_is_read_within_its_limits(tmp_path, kind):
    """Before: a FIFO or device was 'does not exist', a corrupt file a DecodeError
    traceback, an empty file an empty graph solved with exit 0."""
    pytest.importorskip("onnx")
    if kind in ("corrupt", "empty"):
        (tmp_path / "m.onnx").write_bytes(b"garbage" if kind == "corrupt" else b"")
        ref = "m.onnx"
    else:
        ref = _special(tmp_path, kind, "m.onnx", ONNX_TOO_BIG)
    spec = tmp_path / "op.yaml"
    spec.write_text(yaml.safe_dump({"problem": {
        "format": "operator_sharding", "graph": {"onnx": ref},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "device": "A100-80GB"}}}))
    code, text = run_cli("solve", spec, "--out", tmp_path / "o")
    words = {"corrupt": "is not a readable ONNX model", "empty": "holds no operator nodes", **SPECIAL}
    assert code == 2 and "op.yaml: problem.graph.onnx" in text and words[kind] in text, text
    assert "does not exist" not in text and not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", SPECIAL)
def test_files_gdp_policy_is_read_within_its_limits(tmp_path, kind):
    pytest.importorskip("torch")
    ref = _special(tmp_path, kind, "policy.pt", (64 << 20) + 1)
    code, text = run_cli("place", paths.DATA / "placement" / "throughput" /
                         "OperatorGraphs_bert_l-3_training.json", "--searcher", "gdp",
                         "--policy", ref if kind == "device" else tmp_path / ref,
                         "--out", tmp_path / "o")
    assert code == 2 and "GDP policy" in text and SPECIAL[kind] in text, text
    assert "autopar pretrain" in text and not (tmp_path / "o").exists()
    if kind == "too_large":
        assert "67,108,865 bytes, over the limit of 67,108,864 bytes for a GDP policy" in text


# ------------------------------------------------------------------ rows 10, 12: resources
def test_row10_workers_are_capped_at_the_cores(monkeypatch, tmp_path):
    from autopar_opt.cli import capacity

    monkeypatch.setattr("autopar_opt.capacity.engines.available_cores", lambda: 2)
    assert capacity.cap_workers(10**9, "local") == 2
    assert capacity.cap_workers(1, "local") == 1 and capacity.cap_workers(None, "local") is None
    assert capacity.cap_workers(10**9, "ray") == 10**9        # Ray's workers live elsewhere


def test_row12_a_second_run_into_the_same_out_is_refused(tmp_path):
    out = tmp_path / "out"
    with OutputLock(out, "--out"):
        code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--out", out)
        assert code == 2 and "another autopar run" in text and "is writing there now" in text
        assert not (out / "plan.json").exists()
    assert not (out / ".autopar.lock").exists()
    code, _ = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--out", out, "--quiet")
    assert code == 0 and (out / "plan.json").exists() and not (out / ".autopar.lock").exists()


# ------------------------------------------------------------------ weak messages
def test_message_piper_file_that_is_a_device(tmp_path):
    code, text = run_cli("solve", _peer_spec(tmp_path, {"format": "piper", "file": "/dev/zero",
                                                        "devices": 8}))
    assert code == 2 and "/dev/zero is a device file" in text and "does not exist" not in text


def test_message_list_as_model_type(tmp_path):
    code, text = run_cli("model", _config(tmp_path, "llama-3.1-8b.json", model_type=["llama"]))
    assert code == 2 and "model_type = ['llama'] is not a string" in text
    assert "unhashable" not in text


def test_message_calibrate_on_a_directory_names_its_run_files(tmp_path):
    (tmp_path / "runs.yaml").write_text((paths.DATA / "published_runs.yaml").read_text())
    code, text = run_cli("calibrate", tmp_path)
    assert code == 2 and "is a directory" in text and "runs.yaml" in text
    assert "unsupported file extension" not in text


def test_message_six_thousand_digit_integer_names_its_key(tmp_path):
    text = (HF / "llama-3.1-8b.json").read_text().replace('"hidden_size": 4096',
                                                          '"hidden_size": ' + "9" * 6000)
    path = tmp_path / "config.json"
    path.write_text(text)
    code, out = run_cli("model", path)
    assert code == 2 and "hidden_size" in out and "6,000 digits" in out
    assert "set_int_max_str_digits" not in out


def test_message_unknown_gpu_suggests_the_same_vendor_and_generation(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"model": {"zoo": "debug"}, "training": {"global_batch_size": 16},
                                    "cluster": {"nodes": 1, "gpus_per_node": 8,
                                                "device": "H100-80GB"}}))
    code, text = run_cli("solve", spec)
    assert code == 2 and "did you mean 'H100-SXM-80GB'" in text


def test_message_needs_at_least_a_real_figure(tmp_path):
    """Qwen3-235B-A22B (the published shape) on 8 x A100-40GB: the least memory any plan
    needs is hundreds of GiB per device, not 0.00."""
    config = _config(tmp_path, "qwen3-30b-a3b.json", hidden_size=4096, num_hidden_layers=94,
                     num_attention_heads=64, num_key_value_heads=4, head_dim=128, num_experts=128,
                     num_experts_per_tok=8, moe_intermediate_size=1536, vocab_size=151936)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"model": {"hf_config": config.name},
                                    "cluster": {"zoo": "1x8-a100-40"},
                                    "training": {"global_batch_size": 64, "seq_len": 4096}}))
    code, text = run_cli("solve", spec, "--json", "--time-limit", "60")
    assert code == 3
    doc = json.loads(text[text.index("{"):])
    least = doc["infeasibility"]["least_memory_gib"]
    assert least > 100 and f"{least:.2f} GiB per device" in doc["infeasibility"]["reason"]


def test_message_json_errors_are_json_on_stdout(tmp_path):
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, ["solve", str(tmp_path / "missing.yaml"), "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["exit_code"] == 2 and error["problems"][0]["file"].endswith("missing.yaml")
    assert error["problems"][0]["rule"] in result.stderr


def test_message_place_takes_quiet_like_solve(tmp_path):
    bert = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
    code, text = run_cli("place", bert, "--quiet")
    assert code == 0 and text.strip() == ""


def test_message_bare_gpt2_config_takes_its_own_positions():
    code, text = run_cli("model", HF / "gpt2-xl.json")
    assert code == 0 and "seq_len 1024 (the model's own maximum, n_positions" in text


def test_zoo_list_json_lists_models_clusters_devices():
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    result = CliRunner().invoke(app, ["zoo", "list", "--json"])
    doc = json.loads(result.stdout)
    assert {"llama-7b", "debug"} <= {m["name"] for m in doc["models"]}
    assert "H100-SXM-80GB" in {d["name"] for d in doc["devices"]} and doc["clusters"]


def test_common_flags_are_declared_by_every_command_that_honours_them():
    """The table of autopar_opt.cli.commands.COMMON_FLAGS against the typer app."""
    import typer.main

    from autopar_opt.cli.commands import COMMON_FLAGS, app

    group = typer.main.get_command(app)
    common = {"--json", "--quiet", "--out", "--time-limit", "--seed"}
    for name, flags in COMMON_FLAGS.items():
        cmd = group
        for part in name.split():
            cmd = cmd.commands[part]
        declared = {opt for p in cmd.params for opt in getattr(p, "opts", [])} & common
        assert declared == set(flags), (name, declared, flags)


def test_numbers_beyond_a_float_are_refused_not_an_overflow_error(tmp_path):
    """An integer of 400 digits in a Piper, PaSE or placement file: ``math.isfinite`` and
    ``float`` raise OverflowError on it; each reader refuses it with its key."""
    piper = json.loads(PIPER.read_text())
    piper["maxMemoryPerDevice"] = 10**400
    (tmp_path / "p.json").write_text(json.dumps(piper))
    code, text = run_cli("solve", _peer_spec(tmp_path, {"format": "piper", "file": "p.json",
                                                        "devices": 8}))
    assert code == 2 and "maxMemoryPerDevice" in text
    pase = json.loads(gzip.decompress((paths.DATA / "peers" / "pase" / "pase_alexnet_p4.json.gz")
                                      .read_bytes()))
    pase["vertices"][0]["cost"][0] = 10**400
    (tmp_path / "t.json").write_text(json.dumps(pase))
    code, text = run_cli("solve", _peer_spec(tmp_path, {"format": "pase", "file": "t.json"}))
    assert code == 2 and "vertices[0]" in text
    graph = json.loads((paths.DATA / "placement" / "throughput" /
                        "LayerGraphs_bert24_inference.json").read_text())
    graph["nodes"][0]["fpgaLatency"] = 10**400
    (tmp_path / "g.json").write_text(json.dumps(graph))
    code, text = run_cli("place", tmp_path / "g.json")
    assert code == 2 and "nodes[0].fpgaLatency" in text


def test_latency_bound_of_a_long_chain_allocates_no_quadratic_matrix():
    """The path DP of the latency bound is skipped before its (path length)^2 matrices
    (a 10^5-node chain asked numpy for 74.5 GiB)."""
    import tracemalloc

    from autopar_opt.placement.bounds.latency import latency_lower_bound

    p = _chain(20_000)
    tracemalloc.start()
    bound, info = latency_lower_bound(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200 << 20, peak
    assert bound == pytest.approx(float(np.sum(1.0 + np.arange(20_000) % 7)))  # the chain itself
    assert info["path_cheapest"] is None                                        # skipped
