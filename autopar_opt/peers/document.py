"""Recognising the plan.json of a peer problem (:mod:`autopar_opt.peers.cli` writes it).

Its ``spec`` holds ``problem: {format: piper | pase, ...}`` instead of a
model, cluster and training, and its plan is in the peer's terms (Piper:
stages of graph nodes with TMPCs; PaSE: one configuration per vertex). The
commands that read our own plan.json (``report``, ``export``) ask this first,
so such a file is answered for what it is, not with a list of missing keys.
"""

from __future__ import annotations

#: ``spec.problem.format`` of the peer problems ``autopar solve`` reads -> the
#: peer's name and what its plan is made of.
PEER_FORMATS = {"piper": ("Piper", "stages of graph nodes with their TMPCs"),
                "pase": ("PaSE", "one configuration per graph vertex")}


def peer_format(doc: object) -> str | None:
    """The peer format of a peer-problem plan.json, else None (any other document)."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    problem = spec.get("problem") if isinstance(spec, dict) else None
    fmt = problem.get("format") if isinstance(problem, dict) else None
    return fmt if fmt in PEER_FORMATS else None
