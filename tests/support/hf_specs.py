"""A spec around a Hugging Face config written in a test's folder: the config on two
8-H100 nodes, global batch 32, sequence 4,096, and the plan given (the scaffold the
config-reading and export tests share)."""

from __future__ import annotations

import json
from pathlib import Path


def write_hf_spec(folder: Path, config: dict, plan: str) -> Path:
    """``config.json`` and ``spec.yaml`` in ``folder``; ``plan``: the plan section's flow
    mapping without its braces (``"tp: 2, micro_batch_size: 1"``). Returns the spec's path."""
    (folder / "config.json").write_text(json.dumps(config))
    path = folder / "spec.yaml"
    path.write_text("model: {hf_config: config.json}\ncluster: {zoo: 2x8-h100}\n"
                    "training: {global_batch_size: 32, seq_len: 4096}\n"
                    f"plan: {{{plan}}}\n")
    return path
