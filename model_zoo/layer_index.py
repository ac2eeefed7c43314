"""Lists of layer indices in model configs: one rule for every reader.

Qwen-MoE's ``mlp_only_layers`` (``transformers`` ``Qwen2MoeConfig`` /
``Qwen3MoeConfig``: "the layer indices that use a dense MLP instead of the MoE
block"; the modelling code tests ``layer_idx not in config.mlp_only_layers`` with
``layer_idx`` from 0 to ``num_hidden_layers - 1``) is read by the Hugging Face
importer (:mod:`.hf_config`) and by the calibration records
(``autopar_opt.calibration.reading.moe``). An entry that is not such an index
matches no layer in ``transformers``, so a typo (``"3"``, ``-1``, ``64`` of 48
layers) silently leaves the layer MoE; a repeated entry says the list was not
written as meant. Both readers refuse them with this module's rule and fix.
"""

from __future__ import annotations

from typing import Any


def layer_index_problem(value: Any, layers: int) -> tuple[str, str] | None:
    """(rule, fix) when ``value`` is not a list of distinct integer layer indices
    ``0 .. layers-1``; None when it is (null counts as the empty list)."""
    fix_range = f"list each dense layer once as an integer from 0 to {layers - 1}"
    if value is None:
        return None
    if not isinstance(value, list):
        return ("is not a list of layer indices",
                f"write the dense layers as a list, e.g. [0, {min(1, layers - 1)}]")
    seen: set[int] = set()
    for entry in value:
        if isinstance(entry, bool) or not isinstance(entry, int):
            return f"entry {entry!r} is not an integer layer index", fix_range
        if entry < 0:
            return f"entry {entry} is negative (layer indices count from 0)", fix_range
        if entry >= layers:
            return (f"entry {entry} is out of range: the model has {layers} layers "
                    f"(indices 0 to {layers - 1})", fix_range)
        if entry in seen:
            return f"entry {entry} is repeated", fix_range
        seen.add(entry)
    return None
