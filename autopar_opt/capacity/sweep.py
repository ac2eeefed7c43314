"""``load_sweep(path) -> Sweep``: read a sweep file, expand its axes, validate every scenario.

One pass collects every problem: the sweep file's own schema, axis values
that cannot apply (unknown device, GPU count that is not whole nodes), and
every scenario's spec problems (each scenario is built with
:func:`autopar_opt.spec.build_spec`, the same validation ``autopar solve``
applies). A problem caused by an axis value is reported at that value
(``axes.gpus[3]``), one caused by the base spec at ``base.<key>``, each once.

Every scenario carries a content hash of its normalised form (the built
model layers, cluster, training, search space and solver options, not the
text that described them) together with the tool version and the cost-model
parameters: the key of the results store.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
import math
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autopar_opt import __version__
from autopar_opt.core import limits
from autopar_opt.core.files import NAME_MAX
from autopar_opt.capacity.fleet_axes import (apply_group_nodes, base_devices, drop_empty, group_axis_names,
                                             group_axis_problems, group_label, is_group_axis,
                                             scenario_devices)
from autopar_opt.capacity.schema import PlanningSection, SweepFile
from autopar_opt.ir.hardware import DEVICE_CATALOG, default_nvlink_mesh
from autopar_opt.spec import Spec, SpecError, SpecProblem, build_spec
from autopar_opt.core.errors import did_you_mean, one_of
from autopar_opt.spec.doc_kinds import wrong_input
from autopar_opt.spec.loader import read_mapping, resolve_includes
from autopar_opt.spec.translate import problems_from_validation

#: Axis name -> the spec key it sets (problems at that key are reported at the axis).
AXIS_KEYS: dict[str, tuple[str, ...]] = {
    "device": ("cluster.device",), "gpus": ("cluster.nodes", "cluster.gpus_per_node"),
    "nodes": ("cluster.nodes",), "interconnect": ("cluster.intra_node", "cluster.inter_node"),
    "global_batch_size": ("training.global_batch_size",), "seq_len": ("training.seq_len",),
    "dtype": ("training.dtype",), "runtime": ("training.runtime",)}

CLUSTER_AXES = ("device", "gpus", "nodes", "interconnect")

#: Said of a scenario whose model has no sequence length (a CNN): the planning inputs count
#: tokens, and such a sample is priced as one token (:attr:`Scenario.tokens_per_iteration`).
NO_SEQUENCE_NOTE = ("the model has no sequence length: each sample counts as one token, so "
                    "planning.token_budget, target_tokens_per_s and tokens/s count samples")

#: The key of a base cluster whose gpus_per_node cannot size the scenarios' clusters.
BAD_GPUS_PER_NODE = "base.cluster.gpus_per_node"

#: At most this many scenario problems are listed (the same mistake repeats per scenario).
MAX_PROBLEMS = 50


@dataclass(frozen=True)
class Scenario:
    """One point of the sweep: its id, axis values, spec mapping, built spec and store key."""

    id: str
    axes: dict[str, Any]
    data: dict[str, Any]
    spec: Spec
    key: str
    #: what the sweep left out of the base spec for this scenario, said with its answer
    #: (a search degree that does not divide its devices: :func:`_trim_degrees`)
    notes: tuple[str, ...] = ()

    @property
    def devices(self) -> dict[str, int]:
        """GPUs per device type (a fleet scenario's groups added up)."""
        return scenario_devices(self.spec)

    @property
    def device(self) -> str:
        """The device type, or the types of a fleet scenario joined by '+'."""
        return "+".join(sorted(self.devices))

    @property
    def gpus(self) -> int:
        return sum(self.devices.values())

    @property
    def tokens_per_iteration(self) -> int:
        """Global batch x sequence length; a model without a sequence counts each sample as
        one token (said in the scenario's notes: :data:`NO_SEQUENCE_NOTE`)."""
        return self.spec.training.global_batch_size * self.spec.training.tokens_per_sample


#: The status of a scenario the sweep cannot build (:class:`InvalidScenario`).
INVALID = "invalid"


def _whole(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


@dataclass(frozen=True)
class InvalidScenario:
    """A combination of axis values the spec's rules reject while other combinations with
    the same values run (QA round 36: device [A100, H100] x dtype [bf16, fp8] refused the
    whole sweep because fp8 has no A100 peak). It is a row of status :data:`INVALID` with
    the rules that rejected it; nothing is searched or stored for it. A value rejected in
    every combination still refuses the sweep (:func:`load_sweep`)."""

    id: str
    axes: dict[str, Any]
    data: dict[str, Any]
    #: each rule that rejected it: "axes.dtype[1] = 'fp8': <rule> (at training.dtype); <fix>"
    reasons: tuple[str, ...]

    @property
    def devices(self) -> dict[str, int]:
        """GPUs per device type as the spec mapping states them (a fleet's groups added
        up; None-valued keys left out: the mapping was not built)."""
        cluster = self.data.get("cluster") if isinstance(self.data.get("cluster"), dict) else {}
        groups = cluster.get("groups") if isinstance(cluster.get("groups"), list) else [cluster]
        out: dict[str, int] = {}
        for g in groups:
            if not isinstance(g, dict) or not isinstance(g.get("device"), str):
                continue
            n = (_whole(g.get("nodes")) or 1) * (_whole(g.get("gpus_per_node")) or 0)
            out[g["device"]] = out.get(g["device"], 0) + n
        return out

    @property
    def reason(self) -> str:
        """What its row says (the ``reason`` column)."""
        return "invalid combination of the axes' values: " + " | ".join(self.reasons)


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file: its scenarios (axis order) and planning inputs."""

    path: Path
    description: str | None
    scenarios: list[Scenario]
    planning: PlanningSection
    axis_names: list[str]
    #: combinations the spec's rules reject (rows of status ``invalid``, not searched)
    invalid: list[InvalidScenario] = dataclasses.field(default_factory=list)
    #: every scenario id, valid or not, in the axes' order (empty: ``scenarios``' order)
    order: list[str] = dataclasses.field(default_factory=list)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


#: Packages whose files decide a scenario's result (code, zoo data, calibrated parameters).
SOURCE_PACKAGES = ("autopar_opt", "autopar_opt.solvers", "autopar_opt.formulations",
                   "autopar_opt.model_zoo", "autopar_opt.reports")


@functools.lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """sha256 of the tool's own source and data files.

    The version number alone does not change between commits of a development
    install; with this in the key, a store never serves a row computed by
    other code (a changed formula, zoo file or calibration recomputes)."""
    h = hashlib.sha256()
    for name in SOURCE_PACKAGES:
        found = importlib.util.find_spec(name)      # locates without importing (Pyomo is slow)
        root = Path(next(iter(found.submodule_search_locations))).resolve()
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".j2") and "__pycache__" not in path.parts:
                h.update(f"{name}/{path.relative_to(root)}".encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def scenario_key(spec: Spec) -> str:
    """sha256 of the normalised scenario + tool version (and source fingerprint) +
    cost-model parameters."""
    g = spec.graph
    normalised = {"model": {"name": g.name, "layers": _jsonable(g.layers), "edges": _jsonable(g.edges),
                            "seq_len": g.seq_len},
                  "cluster": _jsonable(spec.cluster), "training": _jsonable(spec.training),
                  "space": _jsonable(spec.space), "solver": _jsonable(spec.solver)}
    if spec.fleet is not None:          # homogeneous keys stay as they were (stored rows reused)
        normalised["fleet"] = _jsonable(spec.fleet)
    payload = {"scenario": normalised, "tool_version": __version__, "source": source_fingerprint(),
               "cost_model": _jsonable(spec.cost_params.to_dict())}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def spec_notices(spec: Spec) -> list[str]:
    """What ``autopar solve`` says it assumed of this spec (its plan.json ``notices``): the
    spec's own notices (a sequence past the model's positions, links from the device's
    defaults, ...) and, on a plain cluster, the pipeline degrees the target's rules and
    ``search.vp_chunks`` leave out (:func:`~autopar_opt.search.configs.target_dropped`,
    :func:`~autopar_opt.search.configs.vp_dropped`; as cli/solve.py adds them). A sweep
    said none of them (QA round 35: tiny.yaml's "training.seq_len 512 exceeds the model's
    max_position_embeddings 128: priced at 512 as asked" was in the standalone solve's
    plan.json only)."""
    from autopar_opt.search.configs import target_dropped, vp_dropped

    out = list(spec.notices)
    if spec.fleet is None:
        out += [said for said in (target_dropped(spec.graph, spec.cluster, spec.space),
                                  vp_dropped(spec.graph, spec.cluster, spec.space)) if said]
    return out


def _label(axis: str, value: Any) -> str:
    """Short, file-name-safe label of one axis value (scenario ids join them)."""
    if is_group_axis(axis):
        return re.sub(r"[^A-Za-z0-9._-]+", "-", group_label(axis, value)).strip("-") or "x"
    text = {"gpus": f"{value}gpu", "nodes": f"{value}node", "global_batch_size": f"gbs{value}",
            "seq_len": f"seq{value}", "interconnect": getattr(value, "name", str(value)),
            "runtime": f"rt-{value}"}.get(axis, str(value))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _partial_node(cluster: dict[str, Any], value: int) -> str:
    """Make ``cluster`` (a base cluster mapping, mutated) one partial node of ``value`` of
    its ``gpus_per_node`` GPUs, keeping the node's NVLink wiring; returns the note that says
    so. Without this the partial node was priced as a node of ``value`` GPUs, whose default
    wiring may differ (:func:`~autopar_opt.ir.hardware.default_nvlink_mesh`): QA round 35,
    4 GPUs of an 8-GPU A100 node (NVSwitch) were priced as a 4-GPU HGX board (point to
    point, a pair on a third of the links: 0.1970 s against 0.1897 s with tp2 pp2 on a
    hidden-4096 model), and 2 GPUs of a 4-GPU A100 board as a switched pair (all links,
    where a pair of such a board has a third: ``make_cluster``'s ``board_gpus``, "a 2-GPU
    run on a 4-GPU HGX board"). A stated wiring is kept as stated; a stated ``mesh`` gets
    its board size, which a node of 1-2 GPUs needs."""
    gpn = int(cluster["gpus_per_node"])
    cluster["nodes"], cluster["gpus_per_node"] = 1, value
    name = cluster.get("device")
    device = DEVICE_CATALOG.get(name) if isinstance(name, str) else None
    topology = cluster.get("intra_node_topology")
    whole = f"{value} GPUs: one partial node of the base's {gpn}-GPU nodes"
    if cluster.get("nvlink_board_gpus") is not None or topology == "switch":
        return whole + ", its stated NVLink wiring kept"
    if topology == "mesh" or (topology is None and device is not None
                              and default_nvlink_mesh(device, gpn)):
        cluster["nvlink_board_gpus"] = gpn
        return whole + f", priced on their point-to-point NVLink board of {gpn} GPUs"
    if device is not None and default_nvlink_mesh(device, value):
        cluster["intra_node_topology"] = "switch"
        return whole + ", priced on their NVSwitch (not as a point-to-point board of " \
            f"{value})"
    return whole


def _apply(base: dict[str, Any], axis: str, value: Any) -> str | None:
    """Set the spec key(s) of ``axis`` to ``value`` in ``base`` (mutated); returns what the
    scenario's notes must say of it (a partial node: :func:`_partial_node`), else None."""
    if is_group_axis(axis):
        apply_group_nodes(base, axis, value)
        return None
    cluster, training = base.setdefault("cluster", {}), base.setdefault("training", {})
    if axis == "device":
        cluster["device"] = value
    elif axis == "gpus":
        gpn = int(cluster.get("gpus_per_node", 8))
        if value < gpn:
            return _partial_node(cluster, value)
        cluster["nodes"] = value // gpn
    elif axis == "nodes":
        cluster["nodes"] = value
    elif axis == "interconnect":
        for tier in ("intra_node", "inter_node"):
            link = getattr(value, tier)
            if link is not None:
                cluster[tier] = link.model_dump(exclude_none=True)
    else:
        training[axis] = value
    return None


def _axis_problems(sweep: SweepFile, base: dict[str, Any], file: str) -> list[SpecProblem]:
    """Axis values that cannot apply to the base spec, each at its ``axes.<name>[i]`` key."""
    out: list[SpecProblem] = []
    axes = sweep.axes
    for name in AXIS_KEYS:        # two values with one label are one scenario id: one was dropped
        first: dict[str, int] = {}
        for i, value in enumerate(getattr(axes, name) or []):
            label = _label(name, value)
            if label in first:
                out.append(SpecProblem(file, f"axes.{name}[{i}]", getattr(value, "name", value),
                                       f"gives the same scenario id ({label!r}) as "
                                       f"axes.{name}[{first[label]}]", "give each value once "
                                       "(interconnect options: a distinct name each)"))
            first.setdefault(label, i)
    cluster = base.get("cluster")
    used = [a for a in CLUSTER_AXES if getattr(axes, a) is not None]
    if used and isinstance(cluster, dict) and "groups" in cluster:
        out.append(SpecProblem(file, "base.cluster", cluster,
                               f"is a fleet of groups, and the axes {one_of(used)} set a plain "
                               "cluster's device, size or links",
                               "sweep a fleet's node counts with axes.group_nodes (e.g. "
                               "{a100: [0, 32], h100: [0, 64]}), or give the base a plain "
                               "cluster: {nodes: 1, gpus_per_node: 8, device: A100-80GB}"))
        return out
    if used and not (isinstance(cluster, dict) and "gpus_per_node" in cluster):
        out.append(SpecProblem(file, "base.cluster", cluster, f"the axes {one_of(used)} need an explicit "
                               "base cluster", "write cluster: {nodes: 1, gpus_per_node: 8, device: "
                               "A100-80GB} in the base spec (not {zoo: ...})"))
        return out
    gpn = cluster.get("gpus_per_node") if used else 8
    if isinstance(gpn, bool) or not isinstance(gpn, int) or gpn < 1:
        # the gpus axis divides by it (QA round 11: 'four', null or 0 raised in int() or %)
        out.append(SpecProblem(file, BAD_GPUS_PER_NODE, gpn, "must be a positive whole number "
                               f"of GPUs per node: the axes {one_of(used)} build every "
                               "scenario's cluster on it", "write e.g. gpus_per_node: 8 in the "
                               "base cluster"))
        return out
    if axes.gpus is not None and axes.nodes is not None:
        out.append(SpecProblem(file, "axes.nodes", axes.nodes, "gpus and nodes both given",
                               "give the cluster size once: axes.gpus or axes.nodes"))
    for i, name in enumerate(axes.device or []):
        if name not in DEVICE_CATALOG:
            out.append(SpecProblem(file, f"axes.device[{i}]", name, "unknown device"
                                   + did_you_mean(name, DEVICE_CATALOG),
                                   f"use a catalog device: {one_of(DEVICE_CATALOG)}"))
    for i, n in enumerate(axes.gpus or []):
        if n > gpn * limits.MAX_NODES:      # gpn: a positive integer, checked above
            # QA round 11: the limit was reported at cluster.nodes, with the node count's
            # limit and example, for a GPU count the user wrote
            out.append(SpecProblem(file, f"axes.gpus[{i}]", n, f"more GPUs than "
                                   f"{limits.MAX_NODES:,} nodes of {gpn} (the limit of "
                                   "cluster.nodes) hold", f"use at most {gpn * limits.MAX_NODES:,} "
                                   "GPUs"))
        elif n % gpn and gpn % n:
            out.append(SpecProblem(file, f"axes.gpus[{i}]", n, f"not whole nodes of {gpn} GPUs "
                                   "(base cluster.gpus_per_node)",
                                   f"use a multiple of {gpn} (e.g. {max(gpn, n // gpn * gpn)}) "
                                   f"or a divisor of {gpn} for one partial node"))
    names = [o.name for o in axes.interconnect or []]
    for i, name in enumerate(names):
        if set(_label("interconnect", name)) <= {"."}:   # "." or "..": a folder of its own
            out.append(SpecProblem(file, f"axes.interconnect[{i}].name", name,
                                   "is dots only: as a scenario id ('.', '..') its plan folder "
                                   "scenarios/ID/ is the scenarios folder or the --out folder "
                                   "itself", "give the option a name with a letter or "
                                   "digit, e.g. ib-ndr-400"))
        if names.index(name) != i:
            out.append(SpecProblem(file, f"axes.interconnect[{i}].name", name, "duplicate name",
                                   "give every interconnect option its own name"))
    return out


def _price_problems(sweep: SweepFile, devices: set[str], file: str) -> list[SpecProblem]:
    prices = sweep.planning.prices.per_gpu_hour
    return [SpecProblem(file, "planning.prices.per_gpu_hour", dict(prices),
                        f"no price for device {d!r}",
                        f"add '{d}: <price per GPU-hour>' (every device of the sweep needs a price)")
            for d in sorted(devices) if d not in prices]


#: A search degree list of the base spec, and the words of the rule a degree can break in
#: one scenario of a sweep only (its device count is an axis value).
_DEGREE_KEY = re.compile(r"^search\.((?:pp|tp|cp)_degrees|microbatches)\[(\d+)\]$")
_DEVICE_RULES = ("does not divide the", "more stages than the", "GPUs per node while tp_within_node")


def _unswept_groups(group_nodes: dict[str, list[int]] | None, base: dict[str, Any]
                    ) -> tuple[str, ...]:
    """A note per group of a fleet base that ``axes.group_nodes`` does not sweep: it keeps
    the base's node count in every scenario, which the scenario ids do not show (QA round 9:
    "a100x1n" also held the base's H100 node)."""
    if not group_nodes:
        return ()
    groups = (base.get("cluster") or {}).get("groups") or []
    return tuple(f"group {g.get('name')} is not in axes.group_nodes: its {g.get('nodes')} "
                 "node(s) from the base are in every scenario"
                 for g in groups if isinstance(g, dict) and g.get("name") not in group_nodes)


#: Keys of a base cluster that describe the device's own hardware (its NVLink, memory,
#: power cap, board): a stated one is priced for every device of the device axis.
DEVICE_BOUND_KEYS = ("intra_node", "intra_node_topology", "nvlink_board_gpus",
                     "device_memory_gib", "power_limit_w")


def _device_bound_notes(devices: list[str] | None, base: dict[str, Any]) -> tuple[str, ...]:
    """A note per key of :data:`DEVICE_BOUND_KEYS` the base cluster states while the sweep
    varies the device: every device gets the stated value, not its own default (QA round 35:
    a base stating the A100's intra_node of 600 GB/s priced B200 scenarios on it, NVLink 5
    notwithstanding, without a word; an axis keeps the base's value, which is the rule, but
    here the value describes one device)."""
    cluster = base.get("cluster")
    if not devices or len(devices) < 2 or not isinstance(cluster, dict):
        return ()
    return tuple(f"base cluster.{key} = {json.dumps(cluster[key], default=str)} is stated: "
                 f"every device of axes.device ({', '.join(devices)}) is priced with it, not "
                 "with its own default" for key in DEVICE_BOUND_KEYS if key in cluster)


def _trim_degrees(data: dict[str, Any], problems: list[SpecProblem],
                  batch_axis: bool = False) -> tuple[str, ...]:
    """Leave out of ``data`` (one scenario's spec mapping) the search degrees that do not
    fit its devices, and the micro-batch counts that do not divide its global batch, when
    those are all its problems and every list keeps a value: a sweep over GPU counts lists
    the degrees of its largest scenarios (a degree of 4 cannot run on 2 GPUs), a sweep over
    batch sizes the micro-batch counts of its largest batch (only when ``batch_axis``: the
    sweep varies the global batch; otherwise the base's own list is wrong, and said so).
    Returns what was left out (empty: nothing to do, or a problem of another kind,
    reported as it is)."""
    drop: dict[str, set[int]] = {}
    for p in problems:
        m = _DEGREE_KEY.match(p.key)
        if m is None or not any(words in p.rule for words in _DEVICE_RULES) \
                or (m.group(1) == "microbatches" and not batch_axis):
            return ()
        drop.setdefault(m.group(1), set()).add(int(m.group(2)))
    search = data.get("search") or {}
    notes = []
    for key, idx in drop.items():
        values = list(search.get(key) or [])
        kept = [v for i, v in enumerate(values) if i not in idx]
        if not kept:
            return ()
        gone = [values[i] for i in sorted(idx)]
        search[key] = kept
        what = "global batch" if key == "microbatches" else "devices"
        notes.append(f"search.{key} {gone} left out: "
                     f"{'they do' if len(gone) > 1 else 'it does'} not fit this scenario's {what}")
    return tuple(notes)


def _shown(value: Any) -> str:
    """A problem's value as the row's reason writes it (short)."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _scenario_problem(p: SpecProblem, axes: dict[str, Any], index: dict[str, int],
                      file: str, sid: str) -> SpecProblem:
    """Re-address one scenario's spec problem at the axis value (or base key) that caused it."""
    for axis, keys in AXIS_KEYS.items():
        if axis in axes and any(p.key == k or p.key.startswith(k + ".") for k in keys):
            value = axes[axis]
            shown = getattr(value, "name", value)
            return SpecProblem(file, f"axes.{axis}[{index[axis]}]", shown,
                               f"{p.rule} (first in scenario {sid}, at {p.key})", p.fix)
    return SpecProblem(p.file, f"base.{p.key}" if p.file == file else p.key, p.value, p.rule, p.fix)


def _same_scenario(first: tuple[str, dict[str, int]], later: tuple[str, dict[str, int]],
                   shown: dict[str, Any], file: str) -> SpecProblem:
    """The problem of a scenario whose built spec is another's (the same store key): at the
    first axis value in which the two differ (QA round 11: runtime: [megatron-core,
    megatron_core] or two interconnect options with the same links ran one scenario twice,
    listed as two)."""
    (first_id, first_idx), (sid, idx) = first, later
    axis = next((n for n in idx if idx[n] != first_idx.get(n)), None)
    key = f"axes.{axis}[{idx[axis]}]" if axis else "axes"
    return SpecProblem(file, key, shown.get(axis) if axis else None,
                       f"gives the same scenario as {first_id} (scenario {sid}: the built model, "
                       "cluster, training, search space and solver are identical)",
                       "give each value once (one spelling of a runtime; interconnect options "
                       "with different links)")


def _read(path: Path) -> tuple[SweepFile | None, dict[str, Any], list[SpecProblem]]:
    """The validated sweep model, the base spec mapping (includes inlined), problems."""
    data = read_mapping(path, ("base:, axes: and planning:, e.g. start from "
                               "examples/capacity_llama3_70b.yaml", "description:, base:, axes:, "
                               "planning:"))
    wrong = wrong_input(data, path, "a capacity sweep (base, axes, planning)", ("sweep",))
    if wrong:
        return None, {}, [wrong]
    problems: list[SpecProblem] = []
    try:
        sweep = SweepFile.model_validate(data)
    except ValidationError as exc:     # the sweep's schema is `autopar schema --sweep`
        return None, {}, [dataclasses.replace(p, fix=p.fix.replace("see `autopar schema`",
                                                                   "see `autopar schema --sweep`"))
                          for p in problems_from_validation(SweepFile, exc, lambda _s: str(path))]
    base_raw = sweep.base
    base_file = path
    if isinstance(base_raw, str):
        base_file = path.parent / base_raw
        if not base_file.exists():       # the mistake is the sweep's key, read from its folder
            return sweep, {}, [SpecProblem(str(path), "base", base_raw,
                                           f"names no file ({base_file} does not exist; a base "
                                           "path is read from the sweep file's folder, not the "
                                           "current directory)",
                                           f"write the base spec's path relative to {path.parent}, "
                                           "or the spec itself as a mapping under base:")]
        try:
            named, base_raw = base_raw, read_mapping(base_file)
        except SpecError as exc:
            return sweep, {}, [SpecProblem(p.file, "base", base_raw, p.rule, p.fix) for p in exc.problems]
        wrong = wrong_input(base_raw, base_file, "a model spec (model, cluster, training)",
                            ("spec",))
        if wrong:                 # a plan.json, a peer problem, another sweep, ...
            return sweep, {}, [SpecProblem(str(path), "base", named,
                                           wrong.rule, wrong.fix)]
    base, _files, include_problems = resolve_includes(dict(base_raw), base_file)
    # an inline base's keys sit under base: in the sweep file (QA round 11: "training = 'x'")
    problems.extend(dataclasses.replace(p, key=f"base.{p.key}")
                    if base_file == path and p.file == str(path) else p for p in include_problems)
    return sweep, base, problems


def is_group_axis_scenario(axes: dict[str, Any]) -> bool:
    """Whether a scenario's axes include a group node count."""
    return any(is_group_axis(n) for n in axes)


def _failing_value(failing: list[dict[str, int]], tried: list[dict[str, int]]
                   ) -> tuple[str, int] | None:
    """An axis value (name, index) that every failing scenario has and with which every
    scenario of the sweep fails: that value cannot run in any combination, and the sweep is
    refused at it (the problem is not a combination's, :class:`InvalidScenario`)."""
    for name in failing[0] if failing else ():
        for i in {f[name] for f in failing}:
            if all(f[name] == i for f in failing) and \
                    sum(t.get(name) == i for t in tried) == len(failing):
                return name, i
    return None


def _only_some(p: SpecProblem, failing: list[dict[str, int]], tried: list[dict[str, int]],
               accepting: int, values: dict[str, list], ids: list[str]) -> SpecProblem:
    """A problem at a key of the base spec that only some scenarios have, said with them:
    the axis value every one of them shares and no other scenario has, when there is one,
    else their ids (QA round 35: "base.training.dtype = 'bf16': device V100-32GB has no bf16
    peak" refused a sweep over A100 and V100 without naming the axis value, and
    base.training.memory_reserve_gib named "the device's 79.6475 GiB" of the one device of
    three it did not fit). ``failing`` and ``tried``: the axis indices of the scenarios with
    the problem and of every scenario built (for a problem at an axis value, of every one
    built with that value); ``accepting``: how many of ``tried`` have no problem at all at
    the key (leaving the others out is then a fix); ``values``: each axis's values as
    shown."""
    if len(failing) >= len(tried):
        return p
    cause = next(((name, i) for name in failing[0]
                  for i in {f[name] for f in failing}
                  if all(f[name] == i for f in failing)
                  and sum(t[name] == i for t in tried) == len(failing)), None)
    if cause is not None:
        name, i = cause
        where, drop = f"the {len(failing)} scenario(s) with axes.{name}[{i}] = {values[name][i]}", \
            f"leave {values[name][i]} out of axes.{name}"
    else:
        where, drop = (f"{len(failing)} of {len(tried)} scenarios: {', '.join(ids[:5])}"
                       + (" ..." if len(ids) > 5 else "")), "leave those scenarios' axis values out"
    if not accepting:           # every other scenario fails at this key too, another way
        return dataclasses.replace(p, rule=f"{p.rule} (in {where})")
    return dataclasses.replace(p, rule=f"{p.rule} (in {where}; {accepting} other scenario(s) "
                                        "accept this value)",
                               fix=f"{p.fix}; or {drop} (a sweep is every combination of its "
                                   "axes' values: split it into files to leave one out)")


class SweepError(SpecError):
    """A sweep file that cannot be used; carries every problem (exit code 2 in the CLI)."""

    def _message(self) -> str:
        return super()._message().replace("invalid spec:", "invalid sweep:", 1)


def _bad_values(problems: list[SpecProblem]) -> set[tuple[str, int]]:
    """(axis, index) of every axis value a problem was reported at."""
    out = set()
    for p in problems:
        m = re.match(r"axes\.(\w+)\[(\d+)\]", p.key)
        if m:
            out.add((m.group(1), int(m.group(2))))
    return out


def _sweep_devices(sweep: SweepFile, base: dict[str, Any]) -> set[str]:
    """Catalog devices the scenarios run on (the axis, else the base cluster's)."""
    if sweep.axes.device is not None:
        return {d for d in sweep.axes.device if d in DEVICE_CATALOG}
    if base_devices(base):
        return base_devices(base)
    cluster = base.get("cluster")
    device = cluster.get("device") if isinstance(cluster, dict) else None
    return {device} if isinstance(device, str) else set()


def load_sweep(path: str | Path) -> Sweep:
    """Load and validate the sweep at ``path``; raises :class:`SweepError` with every problem."""
    from autopar_opt.core.reading import refuse_empty_path

    try:
        refuse_empty_path(path)
    except SpecError as exc:
        raise SweepError(exc.problems) from None
    path = Path(path)
    try:
        sweep, base, problems = _read(path)
    except SpecError as exc:
        raise SweepError(exc.problems) from None
    file = str(path)
    if sweep is None or problems:
        raise SweepError(problems)
    problems.extend(_axis_problems(sweep, base, file))
    problems.extend(group_axis_problems(sweep.axes.group_nodes, base, file))
    if any(p.key in ("base.cluster", "axes.group_nodes", BAD_GPUS_PER_NODE) for p in problems):
        raise SweepError(problems)
    problems.extend(_price_problems(sweep, _sweep_devices(sweep, base), file))
    bad = _bad_values(problems)
    names = [name for name in AXIS_KEYS if getattr(sweep.axes, name) is not None]
    values = [list(enumerate(getattr(sweep.axes, name))) for name in names]
    for name, counts in zip(group_axis_names(sweep.axes.group_nodes),
                            (sweep.axes.group_nodes or {}).values()):
        names.append(name)
        values.append(list(enumerate(counts)))
    count = math.prod(len(v) for v in values)
    if count > limits.MAX_SCENARIOS:         # checked before any scenario is built
        sizes = " x ".join(f"{len(v)} {n}" for n, v in zip(names, values))
        raise SweepError(problems + [SpecProblem(file, "axes", sizes, f"{count:,} scenarios exceed "
                                                 f"the limit of {limits.MAX_SCENARIOS:,}",
                                                 "sweep fewer values per axis, or split the "
                                                 "sweep into several files")])
    scenarios: list[Scenario] = []
    seen: dict[tuple, SpecProblem] = {}
    tried: list[tuple[str, dict[str, int]]] = []      # id, axis indices of every scenario built
    failing: dict[tuple, list[tuple[str, dict[str, int]]]] = {}   # problem -> its scenarios
    first_of: dict[str, tuple[str, dict[str, int]]] = {}      # scenario key -> (id, indices)
    rejected: dict[str, list[tuple[tuple, str]]] = {}   # a scenario not built -> its problems
    rejected_data: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}   # its axes, mapping
    order: list[str] = []                                # every scenario id built or tried
    fixed = _unswept_groups(sweep.axes.group_nodes, base) \
        + _device_bound_notes(sweep.axes.device, base)
    if not names:          # QA round 9: `axes: {}` ran the base alone without a word
        fixed += ("axes sweeps nothing: the sweep is the base spec alone (add axes such as "
                  "gpus, device or global_batch_size to compare scenarios)",)
    for combo in itertools.product(*values):
        axes = {name: value for name, (_i, value) in zip(names, combo)}
        index = {name: i for name, (i, _v) in zip(names, combo)}
        if any((name, i) in bad for name, i in index.items()):
            continue
        data = copy.deepcopy(base)
        applied = tuple(said for name, value in axes.items()
                        if (said := _apply(data, name, value)) is not None)
        if is_group_axis_scenario(axes) and drop_empty(data):
            continue                             # every group left out: no GPU, no scenario
        sid = "_".join(_label(n, v) for n, v in axes.items()) or "base"
        if len(sid.encode()) > NAME_MAX:
            # its plans go to scenarios/ID/: refused after the whole sweep had run
            # (QA round 34: an interconnect option of 250 characters, exit 2 "File name too
            # long" once every scenario was solved)
            seen.setdefault(("id too long",), SpecProblem(
                file, "axes", sid[:80] + "...", f"a scenario id of {len(sid.encode())} bytes "
                f"(the axis values' labels joined by '_'), longer than a folder name may be "
                f"({NAME_MAX} bytes): each scenario's plan is written to scenarios/ID/",
                "shorten the longest names among the axis values (interconnect options' "
                "name, fleet group names)"))
            continue
        notes: tuple[str, ...] = ()
        tried.append((sid, index))
        try:
            try:
                spec = build_spec(data, path)
            except SpecError as exc:
                notes = _trim_degrees(data, exc.problems, "global_batch_size" in axes)
                if not notes:
                    raise
                spec = build_spec(data, path)      # the base's list less what cannot run here
        except SpecError as exc:
            for p in exc.problems:
                q = _scenario_problem(p, axes, index, file, sid)
                seen.setdefault((q.file, q.key, p.rule, q.fix), q)
                failing.setdefault((q.file, q.key, p.rule, q.fix), []).append((sid, index))
                rejected.setdefault(sid, []).append(
                    ((q.file, q.key, p.rule, q.fix), f"{q.key} = {_shown(q.value)}: {p.rule}"
                     + (f" (at {p.key})" if p.key != q.key else "") + f"; {p.fix}"))
            order.append(sid)
            rejected_data[sid] = ({n: getattr(v, "name", v) for n, v in axes.items()}, data)
            continue
        if spec.training.seq_len is None:
            notes += (NO_SEQUENCE_NOTE,)
        notes += applied + tuple(spec_notices(spec))
        shown = {n: getattr(v, "name", v) for n, v in axes.items()}
        key = scenario_key(spec)
        if key in first_of:       # two spellings of one value (megatron_core, megatron-core)
            q = _same_scenario(first_of[key], (sid, index), shown, file)
            seen.setdefault((q.file, q.key, "same scenario", q.fix), q)
            continue
        first_of[key] = (sid, index)
        order.append(sid)
        scenarios.append(Scenario(sid, shown, data, spec, key, notes + fixed))
    # the devices the built scenarios run on: a zoo cluster's or a custom device's too,
    # which the sweep file does not name (QA round 11: priced after every search, KeyError)
    priced = set(sweep.planning.prices.per_gpu_hour) | _sweep_devices(sweep, base)
    built = {d for s in scenarios for d in s.devices}
    problems.extend(_price_problems(sweep, built - priced, file))
    shown_values = {name: [getattr(v, "name", v) for _i, v in vals]
                    for name, vals in zip(names, values)}
    at_key: dict[tuple, set[str]] = {}        # (file, key) -> scenarios with a problem there
    for k, found in failing.items():
        at_key.setdefault(k[:2], set()).update(sid for sid, _i in found)
    partial: set[tuple] = set()   # problems some combinations with the same values do not have
    for k, q in seen.items():     # a problem that only some scenarios have: said with them
        if k not in failing:
            continue
        # a problem at an axis value: among the scenarios with that value (QA round 35:
        # device [A100, H100] x dtype [bf16, fp8] was refused at axes.dtype[1] = 'fp8',
        # "use one of its dtypes", without saying that fp8 fits the H100 scenarios)
        at = re.match(r"axes\.(\w+)\[(\d+)\]$", q.key)
        pool = [(sid, i) for sid, i in tried
                if at is None or i.get(at.group(1)) == int(at.group(2))]
        accepting = sum(sid not in at_key[k[:2]] for sid, _i in pool)
        if accepting and len(failing[k]) < len(pool) and \
                _failing_value([i for _s, i in failing[k]], [i for _s, i in tried]) is None:
            partial.add(k)       # other combinations with these values run: rows, not a refusal
        seen[k] = _only_some(q, [i for _s, i in failing[k]], [i for _s, i in pool],
                             accepting, shown_values, [sid for sid, _i in failing[k]])
    refusing = [q for k, q in seen.items() if k not in partial]
    if refusing or problems or (seen and not scenarios):   # nothing left to solve: said whole
        raise SweepError(problems + (refusing or list(seen.values()))[:MAX_PROBLEMS])
    invalid = [InvalidScenario(sid, *rejected_data[sid], tuple(words for _k, words in rejected[sid]))
               for sid in order if sid in rejected]
    return Sweep(path, sweep.description, scenarios, sweep.planning, names, invalid, order)
