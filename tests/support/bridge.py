"""Validate Megatron-Bridge override files with Megatron-Bridge's own code (issue 29).

Megatron-Bridge 0.3.1 (the newest release) needs megatron-core < 0.17, while the
Megatron-LM validation (tests/support/frameworks.py) needs megatron-core 0.17.1, the
first release shipping Megatron-LM's ``megatron/training``. So Bridge lives apart:
``dev.py`` installs ``requirements-bridge.lock`` with ``pip install --no-deps --target
.venv/megatron-bridge`` (Bridge, megatron-core 0.16.1, transformers 4.x and the few
pure-Python packages its configuration code imports), and :func:`validate_bridge` runs
the checks (tests/support/bridge_check.py) in a subprocess with that folder first on
``PYTHONPATH``: ``megatron`` is a namespace package, so ``megatron.core`` and
``megatron.bridge`` come from there and torch, numpy, ... from ``.venv``. One
subprocess checks a batch of files (importing Bridge takes ~10 s).

Transformer Engine cannot be installed without CUDA; tests/support/te_shim.py stands in
for the two module-level imports of it in Bridge's PEFT modules, and raises on any use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.paths import REPO, TESTS

#: where dev.py installs requirements-bridge.lock
BRIDGE_DIR = REPO / ".venv" / "megatron-bridge"


def bridge_missing() -> str | None:
    """Why Bridge cannot be validated here (a skip reason), or None when it can."""
    if not (BRIDGE_DIR / "megatron" / "bridge" / "training" / "config.py").is_file():
        return ("Megatron-Bridge is not installed: `python3 dev.py test` installs "
                "requirements-bridge.lock into .venv/megatron-bridge")
    try:
        import torch  # noqa: F401  (Bridge runs on .venv's PyTorch: requirements-learn.lock)
    except ImportError:
        return "PyTorch is not installed (requirements-learn.lock)"
    return None


def validate_bridge(cases: list[dict], timeout: float = 600) -> tuple[dict[str, str], dict[str, dict]]:
    """Run Bridge's launch-time checks on each case ``{"name", "path", "world",
    "gpus_per_node", "recipe"}`` in one subprocess; returns ``{name: result}``, each
    ``{"ok": True, "derived": {...}}`` or ``{"ok": False, "error": "Type: message"}``
    (tests/support/bridge_check.py), and the versions the subprocess ran (megatron-bridge,
    megatron-core and where megatron.core came from). A crash of the subprocess raises."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BRIDGE_DIR), str(TESTS)])}
    env.pop("WORLD_SIZE", None)
    proc = subprocess.run([sys.executable, "-m", "support.bridge_check"], cwd=TESTS, env=env,
                          input=json.dumps([{**c, "path": str(Path(c["path"]))} for c in cases]),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the Megatron-Bridge check process failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout)
    return out["versions"], {c["name"]: r for c, r in zip(cases, out["results"], strict=True)}
