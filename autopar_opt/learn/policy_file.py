"""Saving and loading a GDP placement policy (``autopar pretrain`` writes one,
``autopar place --searcher gdp --policy FILE`` reads it).

The file is ``torch.save`` of a plain dictionary: ``format`` (``"autopar-gdp-policy"``),
``version``, ``config`` (:class:`~autopar_opt.learn.gdp_policy.PolicyConfig` as a dict),
``state_dict`` (the weights) and ``meta`` (graphs trained on, iterations, seconds,
seed). It is read with ``weights_only=True``: no code in the file is ever run. A file
that is not such a dictionary, or whose version, configuration or weights do not match
this code, is refused with a :class:`PolicyFileError` naming the file, the key, the rule
and the fix. The bytes are read within :data:`autopar_opt.core.reading.POLICY` (64 MiB; a
directory, a device such as ``/dev/zero`` or a FIFO is refused before any read).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from autopar_opt.learn.gdp_policy import PlacementPolicy, PolicyConfig

FORMAT = "autopar-gdp-policy"
VERSION = 1
FIX = "write a policy with: autopar pretrain SPEC... --out FILE"


class PolicyFileError(ValueError):
    """A policy file that cannot be used: ``path``, ``key`` (empty: the whole file),
    ``value``, ``rule``; the message adds the fix (:data:`FIX`)."""

    def __init__(self, path: Path, key: str, value: Any, rule: str) -> None:
        self.path, self.key, self.value, self.rule = path, key, value, rule
        where = f"{path}: {key} = {value!r}" if key else str(path)
        super().__init__(f"{where}: {rule}; {FIX}")


def save_policy(policy: PlacementPolicy, path: str | Path, meta: dict | None = None) -> None:
    """Write ``policy`` (and ``meta``) to ``path`` atomically (temp file + rename)."""
    from autopar_opt.core.files import write_atomic

    buf = io.BytesIO()
    torch.save({"format": FORMAT, "version": VERSION, "config": policy.config.to_dict(),
                "state_dict": policy.state_dict(), "meta": dict(meta or {})}, buf)
    write_atomic(Path(path), buf.getvalue())


def _refuse(path: Path, key: str, value: Any, rule: str) -> PolicyFileError:
    shown = value if isinstance(value, (int, float, str, type(None))) else type(value).__name__
    return PolicyFileError(path, key, shown, rule)


def load_policy(path: str | Path) -> tuple[PlacementPolicy, dict]:
    """Read a policy file; returns the network (in eval mode) and its ``meta``."""
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    path = Path(path)
    if reading.describe_path(path) == "does not exist":
        raise PolicyFileError(path, "", None, "file not found")
    try:        # size, directories, devices, FIFOs: autopar_opt.core.reading's POLICY limits
        raw = reading.read_bytes(path, reading.POLICY)
    except SpecError as exc:
        raise PolicyFileError(path, "", None, "; ".join(p.rule for p in exc.problems)) from None
    try:
        doc = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:           # not a torch file, truncated, or holds objects
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise PolicyFileError(path, "", None, f"not a readable policy file "
                              f"({type(exc).__name__}: {first})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else doc
        raise _refuse(path, "format", got, f"must be {FORMAT!r}")
    if doc.get("version") != VERSION:
        raise _refuse(path, "version", doc.get("version"), f"this code reads version {VERSION}")
    raw = doc.get("config")
    fields = set(PolicyConfig.__dataclass_fields__)
    if not isinstance(raw, dict) or set(raw) != fields:
        raise _refuse(path, "config", raw, f"must hold exactly {sorted(fields)}")
    try:
        config = PolicyConfig(**raw)
        policy = PlacementPolicy(config)
        policy.load_state_dict(doc.get("state_dict"))
    except (TypeError, RuntimeError, ValueError) as exc:
        raise _refuse(path, "state_dict", None,
                      f"does not fit the configuration ({str(exc).splitlines()[0][:160]})") from None
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    policy.eval()
    return policy, meta
