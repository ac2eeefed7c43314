"""Which command a file belongs to, so a command given another's file says so.

Outputs: a solve's plan.json, a peer problem's plan.json, a placement.json,
the JSON of ``autopar estimate --json`` (``report`` and ``export`` read a
plan.json and ask these first). Inputs: a model spec, a peer-problem spec, a
placement spec or public-format graph, a capacity sweep (:func:`input_kind`,
:func:`wrong_input`, used by every command that reads one). Each is known by
keys only it has; a file is answered for what it is (its own report, or the
command to run), not with the keys the expected file would have.
"""

from __future__ import annotations

#: ``spec.problem.format`` of a peer problem's plan.json
#: (:mod:`autopar_opt.cli.peers`) -> the peer's name and what its plan is made of.
PEER_FORMATS = {"piper": ("Piper", "stages of graph nodes with their TMPCs"),
                "pase": ("PaSE", "one configuration per graph vertex")}


def peer_format(doc: object) -> str | None:
    """The peer format of a peer-problem plan.json, else None (any other document)."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    problem = spec.get("problem") if isinstance(spec, dict) else None
    fmt = problem.get("format") if isinstance(problem, dict) else None
    return fmt if fmt in PEER_FORMATS else None


def is_operator_sharding(doc: object) -> bool:
    """A plan.json of an operator-sharding solve (:mod:`autopar_opt.opspace.document`):
    ``spec.problem.format`` is ``operator_sharding``."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    problem = spec.get("problem") if isinstance(spec, dict) else None
    return isinstance(problem, dict) and problem.get("format") == "operator_sharding"


def is_placement(doc: object) -> bool:
    """A placement.json of ``autopar place`` (:func:`autopar_opt.cli.place.placement_document`):
    an operator graph's nodes on devices, with its bound; no training plan."""
    return isinstance(doc, dict) and "plan" not in doc and \
        all(k in doc for k in ("instance", "objective", "devices", "lower_bound"))


def is_fleet(doc: object) -> bool:
    """A plan.json of ``autopar solve`` on a fleet of several groups
    (:mod:`autopar_opt.search.fleet_document`): groups, links, a plan whose stages
    or replica classes run on them."""
    return isinstance(doc, dict) and "fleet" in doc and "shape" in doc


def is_capacity(doc: object) -> bool:
    """A capacity.json of ``autopar capacity`` (:mod:`autopar_opt.capacity.run`): many
    scenarios, each with its own plan.json under ``scenarios/ID/``."""
    return isinstance(doc, dict) and all(k in doc for k in ("sweep", "scenarios", "answers"))


def is_estimate(doc: object) -> bool:
    """The JSON of ``autopar estimate --json``: the spec's path, its plan, the
    plan's metrics and what the model assumed; no search, certificate or baselines."""
    return isinstance(doc, dict) and {"spec", "plan", "metrics"} <= set(doc) \
        <= {"spec", "plan", "recompute", "metrics", "assumed", "notices", "plan_file",
            "repriced"} \
        and isinstance(doc["spec"], str)


# ------------------------------------------------------------------ input files
#: The input files of the commands: kind -> (what it is, the command that reads it).
INPUT_KINDS = {
    "placement": ("a placement spec (placement:)", "`autopar place {path}`"),
    "graph": ("a public-format operator graph (nodes, edges)", "`autopar place {path}`"),
    "sweep": ("a capacity sweep (base, axes, planning)", "`autopar capacity {path}`"),
    "spec": ("a model spec (model, cluster, training)",
             "`autopar solve {path}` (or estimate, model)"),
    "hf_config": ("a Hugging Face config.json (model_type)",
                  "`autopar model {path}` to see the model, or put it in a spec as "
                  "model: {{hf_config: {path}}} with a cluster and training"),
}


def _autopar_result(data: dict) -> bool:
    tool = data.get("tool")
    return isinstance(tool, dict) and tool.get("name") == "autopar-opt"


def input_kind(data: object) -> str | None:
    """Which input a top-level mapping is, by the keys only it has: ``result``
    (a file autopar wrote), ``peer`` (``problem:``), or a key of
    :data:`INPUT_KINDS`; None when it looks like none of them."""
    if not isinstance(data, dict):
        return None
    if _autopar_result(data) or is_placement(data) or is_estimate(data):
        return "result"
    if "model" not in data:
        if "problem" in data:
            return "peer"
        if "placement" in data:
            return "placement"
        if "nodes" in data and "edges" in data:
            return "graph"
        if "base" in data and "axes" in data:
            return "sweep"
        if isinstance(data.get("model_type"), str) and "cluster" not in data:
            return "hf_config"
        return None
    return "spec" if "cluster" in data or "training" in data else None


def describe(kind: str) -> str:
    """Words for a kind of :func:`input_kind`."""
    return {"result": "a result file autopar wrote", "peer": "a peer-problem spec"}.get(
        kind) or INPUT_KINDS[kind][0]


def wrong_input(data: object, path: object, reads: str, accepted: tuple[str, ...]):
    """A :class:`~autopar_opt.core.errors.SpecProblem` saying what the file is and
    which command reads it, when it is a known kind the command does not take
    (``reads``: what the command does read); None otherwise."""
    from autopar_opt.core.errors import SpecProblem

    kind = input_kind(data)
    if kind is None or kind in accepted:
        return None
    if kind == "result":
        spec = data.get("spec")
        origin = spec if isinstance(spec, str) else spec.get("path") if isinstance(spec, dict) else None
        shown = f" ({origin})" if isinstance(origin, str) and origin else ""
        key = "tool" if "tool" in data else ""
        return SpecProblem(str(path), key, data.get("tool"), "this is a result file autopar wrote "
                           f"(plan.json, placement.json, capacity.json, ...), not {reads}",
                           f"give the spec it came from{shown}; `autopar report` and `autopar "
                           "export` read a plan.json")
    if kind == "peer":
        problem = data["problem"]
        fmt = problem.get("format") if isinstance(problem, dict) else None
        return SpecProblem(str(path), "problem", fmt, f"a peer-problem spec (problem: "
                           f"{fmt or '...'}) holds a Piper or PaSE instance or an operator-sharding problem, not {reads}; only "
                           "`autopar solve` reads it", f"run `autopar solve {path}`, or give {reads}")
    what, command = INPUT_KINDS[kind]
    return SpecProblem(str(path), "", None, f"this is {what}, not {reads}",
                       f"run {command.format(path=path)}, or give {reads}")
