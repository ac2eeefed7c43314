"""Which layers of a Hugging Face config attend through a sliding window, and how wide.

Read as the ``transformers`` configuration classes resolve them (their
documented keys and defaults):

* ``layer_types`` (a list with one entry per layer, ``"full_attention"`` or
  ``"sliding_attention"``) decides where a config states it: ``transformers``
  builds each layer's mask from it (``masking_utils``);
* otherwise Mistral (``MistralConfig``: ``sliding_window``, default 4096),
  Mixtral, Phi-3, Phi-3.5-MoE and StarCoder2 (``sliding_window``, default null) put
  the window on every layer;
* Qwen2, Qwen2-MoE, Qwen3 and Qwen3-MoE have a window only with
  ``use_sliding_window`` true (default false; ``sliding_window`` is set to None
  otherwise), on the layers ``layer_types`` names or else from
  ``max_window_layers`` (default 28) on: ``layer_types = ["sliding_attention" if
  use_sliding_window and i >= max_window_layers else "full_attention"]``;
* Gemma 2 and gpt-oss window the even layers, Gemma 3 all but every sixth and
  Cohere2 all but every fourth (``sliding_window_pattern``) unless ``layer_types``
  says otherwise (``Gemma2Config``, ``GptOssConfig``, ``Gemma3TextConfig``,
  ``Cohere2Config``; window default 4096, gpt-oss 128);
* the other families have no window.

A window of ``w`` is the ``w`` keys each query sees, itself included
(:mod:`autopar_opt.ir.window`). Other layer types (chunked, linear or hybrid
attention: Llama 4, Qwen3-Next) are refused with the key named, not priced
as full attention.
"""

from __future__ import annotations

from typing import Any, Callable

#: ``sliding_window`` default of each family's configuration class (transformers).
WINDOW_DEFAULT = {"mistral": 4096, "mixtral": None, "qwen2": 4096, "qwen2_moe": 4096,
                  "qwen3": 4096, "qwen3_moe": 4096, "gemma2": 4096, "gemma3_text": 4096,
                  "gpt_oss": 128, "phi3": None, "starcoder2": None, "cohere2": 4096,
                  "phimoe": None}
#: Gemma 2 and 3 window every layer but each ``pattern``-th one by default
#: (``Gemma2Config``: ``"sliding_attention" if bool((i + 1) % 2)``; ``Gemma3TextConfig``:
#: ``(i + 1) % sliding_window_pattern``, default 6, a key older Hub configs keep), as
#: Cohere2 (Command R7B, Command A) does with its default 4 (``Cohere2Config``,
#: ``Cohere2Attention``: no window where ``(layer_idx + 1) % sliding_window_pattern == 0``).
PATTERN_DEFAULT = {"gemma2": 2, "gemma3_text": 6, "gpt_oss": 2, "cohere2": 4}
#: Families whose configs state the pattern (``sliding_window_pattern``).
PATTERN_KEYED = ("gemma3_text", "cohere2")
#: Families that window only the layers from ``max_window_layers`` on, with
#: ``use_sliding_window`` (default false and 28 in their configuration classes).
QWEN_RULE = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
MAX_WINDOW_LAYERS_DEFAULT = 28
LAYER_TYPES = ("full_attention", "sliding_attention")


def layer_windows(cfg: Callable[..., Any], model_type: str, layers: int,
                  error: Callable[[str, str], Exception]) -> list[int]:
    """Window of each of ``layers`` layers (0: full attention) from the config
    read by ``cfg`` (``cfg(key, default)``); ``error(rule, fix)`` builds the
    exception a bad value raises."""
    if model_type not in WINDOW_DEFAULT:
        return [0] * layers
    types = cfg("layer_types", None)
    if types is not None:           # checked wherever stated, a window or none (QA round 5)
        _layer_types(types, layers, error)
    if model_type in QWEN_RULE:
        use = cfg("use_sliding_window", False)
        if not isinstance(use, bool):
            raise error(f"use_sliding_window = {use!r} must be true or false",
                        "use the value of the model's published config.json")
        if not use:             # Qwen2Config: sliding_window = None unless use_sliding_window
            return [0] * layers
    if types is not None:
        kinds = _layer_types(types, layers, error)
        sliding = [k == "sliding_attention" for k in kinds]
    elif model_type in PATTERN_DEFAULT:
        every = PATTERN_DEFAULT[model_type] if model_type not in PATTERN_KEYED else \
            cfg("sliding_window_pattern", PATTERN_DEFAULT[model_type])
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise error(f"sliding_window_pattern = {every!r} must be a positive integer (every "
                        "n-th layer attends to the whole sequence)",
                        "use the value of the model's published config.json")
        sliding = [bool((i + 1) % every) for i in range(layers)]
    elif model_type in QWEN_RULE:
        start = cfg("max_window_layers", MAX_WINDOW_LAYERS_DEFAULT)
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise error(f"max_window_layers = {start!r} must be a non-negative integer (the "
                        "first layer index with a sliding window)",
                        "use the value of the model's published config.json")
        sliding = [i >= start for i in range(layers)]
    else:
        sliding = [True] * layers
    if not any(sliding):
        return [0] * layers
    window = cfg("sliding_window", WINDOW_DEFAULT[model_type])
    if window is None:
        if types is not None:
            raise error("layer_types names sliding_attention layers but sliding_window is null",
                        "state sliding_window as the model's published config.json does")
        return [0] * layers
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise error(f"sliding_window = {window!r} must be a positive integer (the keys each "
                    "query sees) or null (no window)",
                    "use the value of the model's published config.json")
    return [window if s else 0 for s in sliding]


def _layer_types(types: Any, layers: int, error: Callable[[str, str], Exception]) -> list[str]:
    if not isinstance(types, list) or len(types) != layers:
        n = len(types) if isinstance(types, list) else None
        raise error(f"layer_types must list one entry per layer ({layers}); it has "
                    f"{n if n is not None else 'no list'}",
                    "use the model's published config.json, or drop layer_types")
    for i, kind in enumerate(types):
        if kind not in LAYER_TYPES:
            raise error(f"layer_types[{i}] = {str(kind)[:40]!r} is not supported: only "
                        f"{' and '.join(LAYER_TYPES)} layers are modelled (chunked, linear "
                        "or hybrid attention would be priced as something it is not)",
                        "describe the model as an explicit layer list")
    return list(types)
