"""Which command wrote a JSON document: a solve's plan.json, a peer problem's
plan.json, a placement.json, or ``autopar estimate --json``.

``report`` and ``export`` read a solve's plan.json; they ask this first, so
another command's output is answered for what it is (its own report, or the
command to run), not with a list of the keys a plan.json would have.
"""

from __future__ import annotations

#: ``spec.problem.format`` of a peer problem's plan.json
#: (:mod:`autopar_opt.peers.cli`) -> the peer's name and what its plan is made of.
PEER_FORMATS = {"piper": ("Piper", "stages of graph nodes with their TMPCs"),
                "pase": ("PaSE", "one configuration per graph vertex")}


def peer_format(doc: object) -> str | None:
    """The peer format of a peer-problem plan.json, else None (any other document)."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    problem = spec.get("problem") if isinstance(spec, dict) else None
    fmt = problem.get("format") if isinstance(problem, dict) else None
    return fmt if fmt in PEER_FORMATS else None


def is_placement(doc: object) -> bool:
    """A placement.json of ``autopar place`` (:func:`autopar_opt.placement.cli.placement_document`):
    an operator graph's nodes on devices, with its bound; no training plan."""
    return isinstance(doc, dict) and "plan" not in doc and \
        all(k in doc for k in ("instance", "objective", "devices", "lower_bound"))


def is_estimate(doc: object) -> bool:
    """The JSON of ``autopar estimate --json``: the spec's path, its plan and the
    plan's metrics; no search, certificate or baselines."""
    return isinstance(doc, dict) and set(doc) == {"spec", "plan", "metrics"} and \
        isinstance(doc["spec"], str)
