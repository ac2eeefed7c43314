"""Loading ``autopar place SPEC``: a public-format JSON file, or a placement spec.

A placement spec (YAML or JSON) names an operator graph and the devices::

    placement:
      graph: {file: bert.json}                       # public format, relative to the spec
      # or: graph: {zoo: synthetic_transformer, nodes: 10000}
      # or: graph: {onnx: model.onnx}                # needs the 'onnx' extra
      # or: graph: {torch: model.py:Net, inputs: [[8, 16]]}   # torch.fx; the 'torch' extra
      devices:                                       # optional with a file (it has its own)
        - {type: A100-80GB, count: 8, memory_gib: 40}   # zoo graphs: device catalog names
        # a file graph: the types it has times for, e.g. {type: accelerator, count: 4} and
        # {type: cpu, count: 1, pays_comm: false}; memory as memory_gib or memory_bytes
      objective: max-load                            # or latency
      contiguous: true

The keys, types and defaults are the typed model's (:mod:`.spec_schema`, printed by
``autopar schema --placement``); the checks here report every mistake with its file, key,
value, rule and fix. Every mistake is reported in one :class:`~autopar_opt.spec.SpecError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopar_opt.spec.doc_kinds import wrong_input
from autopar_opt.placement.problem import DeviceType, PlacementProblem
from autopar_opt.placement.importers.public_json import (CPU, is_public_format, load_public,
                                                         problem_from_public)
from autopar_opt.core.errors import MISSING, SpecError, SpecProblem, did_you_mean
from autopar_opt.placement.importers.spec_schema import (FileGraph, OnnxGraph, PlacementDevice,
                                                         PlacementSection, PlacementSpecFile,
                                                         TorchGraph)


def _parse(path: Path) -> Any:
    """A ``.json`` file (a public-format graph or a spec) within the placement-graph
    limits of :mod:`autopar_opt.core.reading`; any other file as a spec (YAML, TOML),
    within the spec limits (size, nesting, aliases expanded, duplicate keys)."""
    from autopar_opt.core import reading

    if path.suffix.lower() == ".json":     # JSON (the public format): no YAML parser to load
        return reading.read_json(path, reading.PLACEMENT)
    from autopar_opt.spec.loader import read_document

    return read_document(path)


def load_placement(path: str | Path) -> tuple[PlacementProblem, dict]:
    """(problem, options from the spec: objective, contiguous) for ``autopar place``."""
    from autopar_opt.core.reading import refuse_empty_path

    refuse_empty_path(path)
    path = Path(path)
    data = _parse(path)
    if is_public_format(data):
        return problem_from_public(data, name=path.stem, file=str(path)), {}
    wrong = wrong_input(data, path, "a placement spec (placement:) or a public-format graph",
                        ("placement", "graph"))
    if wrong:
        raise SpecError([wrong])
    if not isinstance(data, dict) or not isinstance(data.get("placement"), dict):
        raise SpecError([SpecProblem(str(path), "placement", data.get("placement", MISSING)
                                     if isinstance(data, dict) else data,
                                     "a placement spec needs a 'placement' mapping",
                                     "write placement: {graph: {file: g.json}} or give a "
                                     "public-format JSON file directly")])
    spec = data["placement"]
    probs: list[SpecProblem] = _top_problems(data, str(path))
    for key in spec:
        if key not in PLACEMENT_KEYS:
            probs.append(SpecProblem(str(path), f"placement.{key}", spec[key], f"unknown key {key!r}",
                                     f"remove it{did_you_mean(key, PLACEMENT_KEYS)}; known keys: "
                                     f"{', '.join(PLACEMENT_KEYS)}"))
    graph = spec.get("graph", MISSING)
    options = {k: spec[k] for k in ("objective", "contiguous") if k in spec}
    if options.get("objective", "max-load") not in ("max-load", "latency"):
        probs.append(SpecProblem(str(path), "placement.objective", options["objective"],
                                 "must be max-load or latency", "write objective: max-load"))
    if not isinstance(options.get("contiguous", True), bool):     # bool("no") is True
        probs.append(SpecProblem(str(path), "placement.contiguous", options["contiguous"],
                                 "must be true or false", "write contiguous: true"))
    if not isinstance(graph, dict) or not ({"file", "zoo", "onnx", "torch"} & set(graph)):
        probs.append(SpecProblem(str(path), "placement.graph", graph,
                                 "must be {file: PATH}, {onnx: PATH}, {torch: REF, inputs: [...]} "
                                 "or {zoo: NAME, ...}",
                                 "write graph: {file: model.json}"))
    sources = [k for k in ("file", "zoo", "onnx", "torch") if isinstance(graph, dict) and k in graph]
    if len(sources) > 1:       # the first won, the others dropped without a word (QA round 10)
        probs.append(SpecProblem(str(path), "placement.graph", {k: graph[k] for k in sources},
                                 f"names {len(sources)} sources ({', '.join(sources)}); a graph "
                                 "comes from one", f"keep one of {', '.join(sources)}"))
    elif sources:
        probs.extend(_graph_problems(graph, sources[0], str(path)))
    if probs:
        raise SpecError(probs)
    devices = _devices(spec.get("devices"), path, required=bool({"zoo", "onnx", "torch"} & set(graph)))
    if "file" in graph:
        graph_path = path.parent / str(graph["file"])
        if not graph_path.is_file():      # named at the spec's key, as an ONNX path is (QA round 12)
            raise SpecError([SpecProblem(str(path), "placement.graph.file", graph["file"],
                                         f"file not found ({graph_path}; a relative path is read "
                                         "from the spec's folder)", "give the path of a graph in "
                                         "the public placement format")])
        problem = load_public(graph_path)
        if devices:
            problem = problem.with_devices(_with_times(problem, devices, path))
        return problem, options
    from autopar_opt.placement.importers.zoo import build_op_graph, op_problem
    if "onnx" in graph:
        from autopar_opt.placement.importers.onnx import onnx_op_graph
        onnx_path = path.parent / str(graph["onnx"])
        if not onnx_path.exists():
            raise SpecError([SpecProblem(str(path), "placement.graph.onnx", graph["onnx"],
                                         "file not found", "give the path of an .onnx file")])
        build_op_graph("onnx", devices, file=str(path), _check_only=True)
        return op_problem(_read_onnx(onnx_op_graph, onnx_path, path, graph["onnx"]), devices,
                          onnx_path.stem), options
    if "torch" in graph:
        from autopar_opt.placement.importers.torch_fx import spec_op_graph
        build_op_graph("torch", devices, file=str(path), _check_only=True)
        g, name = spec_op_graph(graph, path.parent, str(path))
        return op_problem(g, devices, name), options
    params = {k: v for k, v in graph.items() if k != "zoo"}
    return build_op_graph(str(graph["zoo"]), devices, file=str(path), **params), options


def _read_onnx(reader: Any, onnx_path: Path, path: Path, shown: Any) -> Any:
    """``reader(onnx_path)`` (the ONNX importer), with a file that is not an ONNX
    model, or one without operators, reported at ``placement.graph.onnx``.
    Before: protobuf's DecodeError (corrupt bytes) or an OverflowError further
    on (an empty file parses as an empty model) as tracebacks."""
    def problem(rule: str) -> SpecError:
        return SpecError([SpecProblem(str(path), "placement.graph.onnx", shown, rule,
                                      "give an .onnx model file as torch.onnx.export or "
                                      "onnx.save writes it")])
    try:
        graph = reader(onnx_path)
    except SpecError as exc:      # onnx not installed ('<onnx>'), or the read (reading.ONNX)
        raise SpecError([SpecProblem(str(path), p.key, shown, p.rule, p.fix) if p.file == "<onnx>"
                         else SpecProblem(str(path), "placement.graph.onnx", shown,
                                          f"{p.file}: {p.rule}", p.fix)
                         for p in exc.problems]) from None
    except Exception as exc:   # protobuf DecodeError, onnx's InferenceError: not a model
        raise problem(f"{onnx_path} is not a readable ONNX model ({exc.__class__.__name__}: "
                      f"{str(exc)[:160]})") from None
    if not graph.names:
        raise problem(f"{onnx_path} holds no operator nodes")
    return graph


def _devices(raw: Any, path: Path, *, required: bool) -> list[dict]:
    if raw is None and not required:
        return []
    probs = []
    if not isinstance(raw, list) or not raw:
        raise SpecError([SpecProblem(str(path), "placement.devices", raw if raw is not None else MISSING,
                                     "must be a non-empty list of {type, count}",
                                     "write devices: [{type: A100-80GB, count: 8}]")])
    out = []
    file = str(path)
    for i, d in enumerate(raw):
        key = f"placement.devices[{i}]"
        if not isinstance(d, dict) or "type" not in d:
            probs.append(SpecProblem(file, key, d, "needs a 'type'", "write {type: A100-80GB, count: 8}"))
            continue
        probs.extend(_device_problems(d, key, file))
        out.append(d)
    if not probs and sum(d.get("count", 1) for d in out) == 0:
        probs.append(SpecProblem(file, "placement.devices", raw, "every count is 0: no device "
                                 "to place the nodes on", "give at least one device a count >= 1"))
    if probs:
        raise SpecError(probs)
    return out


#: Keys of a placement spec's top level, of ``placement:`` and of one ``placement.devices``
#: entry: the fields of the typed model (:mod:`.spec_schema`, ``autopar schema
#: --placement``), so the hand checks and the schema list the same keys.
SPEC_KEYS = tuple(PlacementSpecFile.model_fields)
PLACEMENT_KEYS = tuple(PlacementSection.model_fields)
DEVICE_KEYS = tuple(PlacementDevice.model_fields)
#: The keys a graph of each source takes (None: any, a zoo generator's arguments,
#: checked against its signature by :func:`~.zoo.build_op_graph`).
GRAPH_KEYS = {"file": tuple(FileGraph.model_fields), "onnx": tuple(OnnxGraph.model_fields),
              "torch": tuple(TorchGraph.model_fields), "zoo": None}
#: An example value of each source key (the fixes).
_EXAMPLE = {"file": "g.json", "onnx": "model.onnx", "torch": "model.py:Net",
            "zoo": "synthetic_transformer"}
#: Why a key does not apply to a graph of that source.
_NOT_FOR = {"file": "does not apply to a public-format file (it states its nodes itself)",
            "onnx": "does not apply to an ONNX graph (its nodes and shapes come from the file)",
            "torch": "is not a key of a torch.fx graph"}


def _top_problems(data: dict, file: str) -> list[SpecProblem]:
    """Keys beside ``placement`` (only ``description``, text), which were ignored without a
    word before the schema (QA round 13)."""
    probs = [SpecProblem(file, str(k), v, f"unknown key {k!r}",
                         f"remove it{did_you_mean(str(k), SPEC_KEYS)}; a placement spec's keys: "
                         f"{', '.join(SPEC_KEYS)}") for k, v in data.items() if k not in SPEC_KEYS]
    if not isinstance(data.get("description", ""), str):
        probs.append(SpecProblem(file, "description", data["description"], "must be text",
                                 "write description: BERT-24 on 4 accelerators"))
    return probs


def _graph_problems(graph: dict, source: str, file: str) -> list[SpecProblem]:
    """Problems of a graph naming one source: its value is text (a path, a name, a
    reference), and a file, ONNX or torch graph has only its own keys (an ONNX or torch
    graph's other keys were ignored without a word before the schema, QA round 13)."""
    probs = []
    if not isinstance(graph[source], str):
        probs.append(SpecProblem(file, f"placement.graph.{source}", graph[source],
                                 "must be text (a path, a zoo name or a module reference)",
                                 f"write e.g. {source}: {_EXAMPLE[source]}"))
    known = GRAPH_KEYS[source]
    extra = [k for k in graph if known is not None and k not in known]
    if extra:
        fix = (f"drop {', '.join(map(str, extra))}" if source != "torch" else
               f"remove it{did_you_mean(str(extra[0]), known)}; known keys: {', '.join(known)}")
        probs.append(SpecProblem(file, f"placement.graph.{extra[0]}", graph[extra[0]],
                                 _NOT_FOR[source], fix))
    return probs


def _device_problems(d: dict, key: str, file: str) -> list[SpecProblem]:
    """Problems of one device entry: known keys, a text type, a whole count within
    :data:`autopar_opt.core.limits.MAX_PLACEMENT_DEVICES`, a positive finite memory, a
    boolean ``pays_comm``."""
    import math

    from autopar_opt.core import limits

    probs = [SpecProblem(file, f"{key}.{k}", v, f"unknown key {k!r}",
                         f"remove it{did_you_mean(str(k), DEVICE_KEYS)}; known keys: "
                         f"{', '.join(DEVICE_KEYS)}") for k, v in d.items() if k not in DEVICE_KEYS]
    if not isinstance(d["type"], str):
        probs.append(SpecProblem(file, key + ".type", d["type"], "must be a device name (text)",
                                 "write e.g. type: A100-80GB"))
    cnt = d.get("count", 1)
    if isinstance(cnt, bool) or not isinstance(cnt, int) or not 0 <= cnt <= limits.MAX_PLACEMENT_DEVICES:
        probs.append(SpecProblem(file, key + ".count", cnt, "must be an integer from 0 to "
                                 f"{limits.MAX_PLACEMENT_DEVICES:,}", "write count: 8"))
    for mem in ("memory_bytes", "memory_gib"):
        val = d.get(mem, 1.0)
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val) \
                or val <= 0:
            probs.append(SpecProblem(file, f"{key}.{mem}", val, "must be a positive, finite number"
                                     + yaml_text_number(val),
                                     f"write e.g. {mem}: {80 if mem == 'memory_gib' else 8.6e10:g}"))
    if "memory_bytes" in d and "memory_gib" in d:
        probs.append(SpecProblem(file, key + ".memory_gib", d["memory_gib"], "the entry also "
                                 f"gives memory_bytes ({d['memory_bytes']!r}): one device "
                                 "memory, two values", "keep one of memory_bytes and memory_gib"))
    if not isinstance(d.get("pays_comm", True), bool):
        probs.append(SpecProblem(file, key + ".pays_comm", d["pays_comm"], "must be true or false",
                                 "write pays_comm: true"))
    return probs


def yaml_text_number(val) -> str:
    """Why a number reached the spec as text, where it did: YAML 1.1 (PyYAML) reads an
    exponent without its sign (``8.6e10``) as a string, and a quoted number is text;
    '' for anything else."""
    if not isinstance(val, str):
        return ""
    try:
        number = float(val)
    except ValueError:
        return ""
    if "e" in val.lower() and not any(c in val.lower().split("e")[-1][:1] for c in "+-"):
        mantissa, exponent = val.lower().split("e")
        return (f" (YAML read {val} as text: its exponent needs a sign, "
                f"{mantissa}e+{exponent}, or write {number:.0f})")
    return f" (it is text: write {val} without quotes)"


def device_memory_bytes(d: dict, default: float) -> float:
    """One device entry's memory in bytes: ``memory_bytes``, or ``memory_gib`` x 2^30
    (either key, whatever the graph's source; both at once is refused by
    :func:`_device_problems`), else ``default``."""
    if "memory_bytes" in d:
        return float(d["memory_bytes"])
    if "memory_gib" in d:
        return float(d["memory_gib"]) * 2**30
    return float(default)


def _with_times(problem: PlacementProblem, devices: list[dict], path: Path) -> list[DeviceType]:
    """Device overrides for a public-format file: types must be ones the file has times for."""
    out = []
    for i, d in enumerate(devices):
        if d["type"] not in problem.time:
            raise SpecError([SpecProblem(str(path), f"placement.devices[{i}].type", d["type"],
                                         f"the graph file has times for {sorted(problem.time)} only",
                                         "use one of those types")])
        # a type the file has times for but no devices of (maxCPUs: 0 leaves out the CPU,
        # QA round 12: StopIteration) takes the format's defaults for that type
        base = next((t for t in problem.device_types if t.name == d["type"]),
                    DeviceType(d["type"], 0, float("inf"), d["type"] != CPU))
        mem = device_memory_bytes(d, base.memory_bytes)
        out.append(DeviceType(d["type"], int(d.get("count", 1)), mem,
                              bool(d.get("pays_comm", base.pays_comm))))
    return out
