"""Hypothesis strategies for every input kind and every command (issue 33).

A :class:`FuzzCase` is a set of files to write into a fresh folder, the ``autopar``
arguments that read them, the exit codes the command may answer with and its time
limit. Each kind starts from a shipped, valid file and mutates it the way
:mod:`support.fuzz_specs` mutates specs (extreme values at random key paths, keys
deleted or added, the text damaged), plus the hostile forms each kind invites:

* ``piper``: a Piper instance and its peer spec (``solve``);
* ``pase``: PaSE tables, plain or gzip-packed, sometimes a small gzip bomb (``solve``);
* ``placement``: a public-format graph or a placement spec of a zoo graph (``place``);
* ``expert``: a human-expert split of a shipped graph (``place --expert``);
* ``runs``: a run file of two published records (``calibrate``, sometimes ``--fit``);
* ``sweep``: a capacity sweep of the debug model (``capacity``);
* ``plan``: a plan.json (``report``, ``export``);
* ``hf``: a Hugging Face config.json (``model``);
* ``fleet``: a spec whose cluster is several groups joined by links (``solve``);
* ``opspace``: an operator-sharding spec (``problem: {format: operator_sharding}``) of a
  zoo CNN, a zoo transformer with pipeline stages, or an ONNX file that is damaged bytes,
  a directory, a device or missing (``solve``);
* ``torch``: a torch.fx graph, the file kind the CLI reads for it: a placement spec
  ``graph: {torch: model.py:Net, inputs, kwargs}`` (``place``) or an operator-sharding spec
  with the same entry (``solve``), beside a small module file that is sometimes damaged
  (its shapes and arguments mutated; without PyTorch, the "needs PyTorch" refusal);
* ``documents``: a capacity.json of ``autopar capacity`` and a placement.json of
  ``autopar place`` (``report``, sometimes ``--json``; and ``export``, which refuses them).

``tests/cli/test_fuzz_commands.py`` runs them in-process (fast profile) and
``benchmarks/robustness/fuzz_commands.py`` as subprocesses with their peak memory.
"""

from __future__ import annotations

import copy
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from support import paths
from support.fleets import TINY_MIX_CLUSTER
from support.fuzz_specs import EXTREMES, key_paths, set_at, text_damage

KINDS = ("piper", "pase", "placement", "expert", "runs", "sweep", "plan", "hf", "fleet", "opspace",
         "torch", "documents")
#: The exit codes each command may answer with (2 bad input, 3 infeasible, 4 no result
#: within the limits); anything else, or a traceback, is a failure.
ALLOWED = {"solve": {0, 2, 3, 4}, "place": {0, 2, 3, 4}, "calibrate": {0, 2, 4},
           "capacity": {0, 2, 4}, "report": {0, 2}, "export": {0, 2}, "model": {0, 2}}


@dataclass
class FuzzCase:
    """Files to write, the command line reading them, and its contract."""

    kind: str
    files: dict[str, bytes]
    args: list[str]
    time_limit_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def command(self) -> str:
        return self.args[0]

    @property
    def allowed(self) -> set[int]:
        return ALLOWED[self.command]

    def write(self, folder: Path) -> list[str]:
        """Write the files into ``folder``; the arguments with ``{dir}`` filled in."""
        for name, data in self.files.items():
            (folder / name).write_bytes(data)
        return [a.replace("{dir}", str(folder)) for a in self.args]


def _load(path: Path) -> Any:
    if path.suffix == ".gz":
        return json.loads(gzip.decompress(path.read_bytes()))
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return yaml.safe_load(path.read_text())


BASES = {
    "piper": _load(paths.DATA / "peers" / "piper" / "gnmt.json"),
    "pase": _load(paths.DATA / "peers" / "pase" / "pase_alexnet_p4.json.gz"),
    "placement": _load(paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"),
    "runs": _load(paths.DATA / "published_runs.yaml")[:2],
    "sweep": _load(paths.DATA / "capacity" / "tiny.yaml"),
    "plan": _load(paths.DATA / "report" / "plan_feasible.json"),
    # every bundled Hugging Face config: each reader's keys get mutated (MPT's nested
    # attn_config, Nemotron's rotary share, Command R's switches, ...)
    "hf": [_load(p) for p in sorted((paths.REPO / "model_zoo" / "hf").glob("*.json"))],
    "capacity": _load(paths.DATA / "report" / "capacity_tiny.json"),      # capacity tiny.yaml
    "placement.json": _load(paths.DATA / "report" / "placement_bert24.json"),  # place bert24
}
PLACEMENT_FILE = "LayerGraphs_bert24_inference.json"
#: Two one-node groups of the debug model (support.fleets.TINY_MIX_CLUSTER; a solve: ~1 s).
BASES["fleet"] = {
    "model": {"zoo": "debug"},
    "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
    "training": {"global_batch_size": 16},
    "search": {"zero_levels": [0, 3], "recompute": ["none", "full"]},
    "solver": {"name": "dp", "time_limit_s": 3}}
#: Operator-sharding graphs small enough for a fuzz run (as tests/cli/test_opspace_cli.py).
OPSPACE_GRAPHS = ({"zoo": "alexnet", "batch": 32},
                  {"model": "debug", "layers": 2, "batch": 4, "embeddings": False, "seq_len": 64})


def _copy(tree: Any) -> Any:
    return json.loads(json.dumps(tree))


@st.composite
def mutated(draw, tree: Any, most: int = 3) -> Any:
    """``tree`` with 0..``most`` values set to extremes or deleted (at any key path)."""
    tree = _copy(tree)
    for _ in range(draw(st.integers(0, most))):
        where = key_paths(tree)
        if not where:
            break
        set_at(tree, draw(st.sampled_from(where)), draw(EXTREMES),
               draw(st.sampled_from([False, False, False, True])))
    return tree


def _json(tree: Any) -> str:
    return json.dumps(tree, allow_nan=True)


@st.composite
def piper_case(draw) -> FuzzCase:
    inst = draw(mutated(BASES["piper"]))
    text = draw(text_damage(_json(inst)))
    problem = {"format": "piper", "file": "piper.json", "devices": 8}
    problem = draw(mutated(problem, 1))
    if draw(st.booleans()):
        problem["file"] = draw(st.sampled_from(["piper.json", "/dev/zero", "missing.json", ".",
                                                "piper.json/x", "a" * 300]))
    spec = {"problem": problem, "solver": {"name": "dp"}}
    return FuzzCase("piper", {"piper.json": text.encode("utf-8", "surrogatepass"),
                              "peer.yaml": yaml.safe_dump(spec).encode()},
                    ["solve", "{dir}/peer.yaml", "--time-limit", "3", "--quiet"], 3.0)


@st.composite
def pase_case(draw) -> FuzzCase:
    tables = draw(mutated(BASES["pase"]))
    raw = draw(text_damage(_json(tables))).encode("utf-8", "surrogatepass")
    form = draw(st.sampled_from(["gz", "gz", "plain", "bomb", "bad_gzip"]))
    name = "t.json" if form == "plain" else "t.json.gz"
    if form == "bomb":                   # 64 MiB of spaces in ~64 KB: stops at the ratio limit
        data = gzip.compress(b'{"vertices": "' + b" " * (64 << 20) + b'"}', compresslevel=9)
    elif form == "bad_gzip":
        data = gzip.compress(raw)[: draw(st.integers(1, 40))]
    else:
        data = gzip.compress(raw) if form == "gz" else raw
    spec = {"problem": {"format": "pase", "file": name}, "solver": {"name": "dp"}}
    return FuzzCase("pase", {name: data, "peer.yaml": yaml.safe_dump(spec).encode()},
                    ["solve", "{dir}/peer.yaml", "--time-limit", "3", "--quiet"], 3.0)


@st.composite
def placement_case(draw) -> FuzzCase:
    if draw(st.booleans()):
        graph = draw(mutated(BASES["placement"]))
        text = draw(text_damage(_json(graph)))
        files = {"g.json": text.encode("utf-8", "surrogatepass")}
        target = "{dir}/g.json"
    else:
        spec = {"placement": {"graph": {"zoo": "synthetic_transformer", "nodes": 200},
                              "devices": [{"type": "A100-80GB", "count": 4}],
                              "objective": "max-load", "contiguous": True}}
        spec = draw(mutated(spec))
        files = {"p.yaml": draw(text_damage(yaml.safe_dump(spec, width=10**9)))
                 .encode("utf-8", "surrogatepass")}
        target = "{dir}/p.yaml"
    extra = draw(st.sampled_from([[], [], ["--objective", "latency"], ["--no-contiguous"],
                                  ["--solver", "dp"]]))
    return FuzzCase("placement", files, ["place", target, "--time-limit", "3", "--quiet",
                                         *extra], 3.0)


@st.composite
def expert_case(draw) -> FuzzCase:
    split = {"fpgas": [{"nodes": [1, 2, 3]}, {"nodes": [4, 5]}], "cpus": [{"nodes": [6]}]}
    split = draw(mutated(split))
    text = draw(text_damage(_json(split)))
    graph = paths.DATA / "placement" / "throughput" / PLACEMENT_FILE
    return FuzzCase("expert", {"e.json": text.encode("utf-8", "surrogatepass")},
                    ["place", str(graph), "--expert", "{dir}/e.json", "--time-limit", "3",
                     "--quiet"], 3.0)


@st.composite
def runs_case(draw) -> FuzzCase:
    runs = draw(mutated(BASES["runs"]))
    text = draw(text_damage(yaml.safe_dump(runs, width=10**9, allow_unicode=True)))
    extra = draw(st.sampled_from([[], [], ["--fit", "--out", "{dir}/fit.yaml"]]))
    return FuzzCase("runs", {"runs.yaml": text.encode("utf-8", "surrogatepass")},
                    ["calibrate", "{dir}/runs.yaml", "--time-limit", "4", "--quiet", *extra], 4.0)


@st.composite
def sweep_case(draw) -> FuzzCase:
    sweep = _copy(BASES["sweep"])
    sweep["axes"] = {"device": ["A100-80GB"], "gpus": [2]}          # one scenario: seconds
    sweep["base"]["solver"] = {"name": "dp", "time_limit_s": 2}
    sweep = draw(mutated(sweep))
    text = draw(text_damage(yaml.safe_dump(sweep, width=10**9, allow_unicode=True)))
    return FuzzCase("sweep", {"sweep.yaml": text.encode("utf-8", "surrogatepass")},
                    ["capacity", "{dir}/sweep.yaml", "--time-limit", "6", "--workers", "1",
                     "--quiet", "--store", "{dir}/store.sqlite"], 6.0)


@st.composite
def plan_case(draw) -> FuzzCase:
    doc = draw(mutated(BASES["plan"], 2))
    text = draw(text_damage(_json(doc)))
    args = draw(st.sampled_from([["report", "{dir}/plan.json", "--out", "{dir}/r.html"],
                                 ["export", "{dir}/plan.json", "--to", "megatron"],
                                 ["export", "{dir}/plan.json", "--to", "deepspeed"]]))
    return FuzzCase("plan", {"plan.json": text.encode("utf-8", "surrogatepass")}, args)


@st.composite
def hf_case(draw) -> FuzzCase:
    config = draw(mutated(draw(st.sampled_from(BASES["hf"])), 2))
    text = draw(text_damage(_json(config)))
    return FuzzCase("hf", {"config.json": text.encode("utf-8", "surrogatepass")},
                    ["model", "{dir}/config.json"])


@st.composite
def fleet_case(draw) -> FuzzCase:
    spec = draw(mutated(BASES["fleet"]))
    text = draw(text_damage(yaml.safe_dump(spec, width=10**9, allow_unicode=True)))
    return FuzzCase("fleet", {"fleet.yaml": text.encode("utf-8", "surrogatepass")},
                    ["solve", "{dir}/fleet.yaml", "--time-limit", "3", "--quiet"], 3.0)


@st.composite
def opspace_case(draw) -> FuzzCase:
    graph = _copy(draw(st.sampled_from([*OPSPACE_GRAPHS, {"onnx": "m.onnx"}])))
    problem: dict[str, Any] = {"format": "operator_sharding", "graph": graph,
                               "cluster": {"nodes": 1, "gpus_per_node": 4, "device": "A100-80GB"}}
    if "model" in graph:
        problem["pipeline"] = {"pp": [1, 2], "microbatches": [1, 2]}
    files: dict[str, bytes] = {}
    if "onnx" in graph:      # never a model: bytes, or a path that is no file (reading.ONNX)
        graph["onnx"] = draw(st.sampled_from(["m.onnx", "m.onnx", "/dev/zero", ".", "missing.onnx"]))
        files["m.onnx"] = draw(st.binary(max_size=64))
    spec = draw(mutated({"problem": problem, "solver": {"name": "auto", "time_limit_s": 3}}))
    text = draw(text_damage(yaml.safe_dump(spec, width=10**9, allow_unicode=True)))
    files["op.yaml"] = text.encode("utf-8", "surrogatepass")
    return FuzzCase("opspace", files, ["solve", "{dir}/op.yaml", "--time-limit", "3", "--quiet"], 3.0)


#: A module torch.fx traces in well under a second (two Linear layers, a residual add).
TORCH_MODULE = """import torch


class Net(torch.nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, hidden)
        self.fc2 = torch.nn.Linear(hidden, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) + x
"""


@st.composite
def torch_case(draw) -> FuzzCase:
    graph: dict[str, Any] = {"torch": "model.py:Net", "inputs": [[2, 8]]}
    module = TORCH_MODULE
    if draw(st.booleans()):
        module = draw(text_damage(TORCH_MODULE))
    if draw(st.booleans()):
        spec: dict[str, Any] = {"placement": {"graph": graph, "devices": [
            {"type": "A100-80GB", "count": 2}]}}
        args = ["place", "{dir}/t.yaml", "--time-limit", "3", "--quiet"]
    else:
        spec = {"problem": {"format": "operator_sharding", "graph": graph,
                            "cluster": {"nodes": 1, "gpus_per_node": 2, "device": "A100-80GB"}},
                "solver": {"name": "auto", "time_limit_s": 3}}
        args = ["solve", "{dir}/t.yaml", "--time-limit", "3", "--quiet"]
    spec = draw(mutated(spec))
    # the module's own arguments stay small: what the named code allocates is the user's
    # (the importer runs it, as loading any PyTorch model does), not an input to bound
    entry = (spec.get("placement") or spec.get("problem") or {}) if isinstance(spec, dict) else {}
    if isinstance(entry, dict) and isinstance(entry.get("graph"), dict):
        entry["graph"]["kwargs"] = {"hidden": draw(st.sampled_from([16, 4, 1]))}
    text = draw(text_damage(yaml.safe_dump(spec, width=10**9, allow_unicode=True)))
    return FuzzCase("torch", {"t.yaml": text.encode("utf-8", "surrogatepass"),
                              "model.py": module.encode("utf-8", "surrogatepass")}, args, 3.0)


@st.composite
def documents_case(draw) -> FuzzCase:
    which = draw(st.sampled_from(["capacity", "placement.json"]))
    doc = draw(mutated(BASES[which], 3))
    text = draw(text_damage(_json(doc)))
    name = "capacity.json" if which == "capacity" else "placement.json"
    args = draw(st.sampled_from([["report", "{dir}/" + name, "--out", "{dir}/r.html"],
                                 ["report", "{dir}/" + name, "--out", "{dir}/r.html", "--json"],
                                 ["export", "{dir}/" + name, "--to", "megatron", "--json"]]))
    return FuzzCase("documents", {name: text.encode("utf-8", "surrogatepass")}, args)


STRATEGIES = {"piper": piper_case, "pase": pase_case, "placement": placement_case,
              "expert": expert_case, "runs": runs_case, "sweep": sweep_case, "plan": plan_case,
              "hf": hf_case, "fleet": fleet_case, "opspace": opspace_case, "torch": torch_case,
              "documents": documents_case}


def any_case() -> st.SearchStrategy[FuzzCase]:
    """A case of any kind (each kind equally likely)."""
    return st.one_of(*(STRATEGIES[k]() for k in KINDS))
