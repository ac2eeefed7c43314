"""Range checks on a Hugging Face config's real-valued keys, before anything is built:
the RoPE base and scaling, the rotary share, the normalisation epsilon, Gemma's
logit soft-capping, and the scalars of OLMoE (``clip_qkv``), Granite (its multipliers) and
Cohere (``logit_scale``). A value out of range here would be priced silently, or written
into a launch file (``--rotary-base``, ``--rope-scaling-factor``, ``--norm-epsilon``),
so each is refused naming the key, the value, the rule and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The RoPE types transformers builds (``modeling_rope_utils.ROPE_INIT_FUNCTIONS``,
#: v4.4x-4.5x: ``default``, ``linear``, ``dynamic``, ``yarn``, ``longrope``, ``llama3``);
#: a model built with another name fails there with a KeyError.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")
#: The keys each type needs besides its name (``modeling_rope_utils``
#: ``_validate_*_rope_parameters`` ``required_keys``; a missing one raises KeyError).
ROPE_REQUIRED = {"linear": ("factor",), "dynamic": ("factor",), "yarn": ("factor",),
                 "longrope": ("short_factor", "long_factor"),
                 "llama3": ("factor", "original_max_position_embeddings", "low_freq_factor",
                            "high_freq_factor")}
#: Phi-3's first configs name LongRoPE ``su``; ``Phi3Config`` reads it as ``longrope``
#: (its ``_rope_scaling_adjustment``, transformers 4.43 and later).
PHI3_ROPE_ALIASES = {"su": "longrope"}
#: The keys a config states its normalisation epsilon with, by family (Llama's
#: ``rms_norm_eps``, GPT-2's and BLOOM's ``layer_norm_epsilon``, GPT-NeoX's
#: ``layer_norm_eps``, StarCoder2's ``norm_epsilon``, Nemotron's ``norm_eps``).
NORM_EPS_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps")
#: Gemma 2's soft-capping of the attention scores and the output logits: ``cap *
#: tanh(x / cap)``, null where off (0 divides by zero).
SOFTCAP_KEYS = ("attn_logit_softcapping", "final_logit_softcapping")
#: The keys stating the share of each head's channels RoPE rotates: ``partial_rotary_factor``
#: (Phi, Phi-3/Phi-4, Nemotron, StableLM, Persimmon, GLM) and GPT-NeoX's ``rotary_pct``.
ROTARY_SHARE_KEYS = ("partial_rotary_factor", "rotary_pct")

FIX = "use the value of the model's published config.json"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and abs(value) != float("inf")


def _shown(value: Any) -> str:
    return repr(value)[:60]


def rope_type(config: dict[str, Any]) -> str | None:
    """The RoPE type a config's ``rope_scaling`` names (``rope_type``, or the older
    ``type``; Phi-3's aliases read as transformers reads them), None without scaling."""
    scaling = config.get("rope_scaling")
    if not isinstance(scaling, dict):
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    if config.get("model_type") == "phi3" and kind in PHI3_ROPE_ALIASES:
        return PHI3_ROPE_ALIASES[kind]
    return kind


def _positive(v: float) -> bool:
    return v > 0


def _ranges() -> tuple:
    """(keys, the value's rule, its words, an example) of every range :func:`value_problems`
    checks, in its order."""
    return ((("rope_theta",), _positive, "a positive number, the RoPE base", "10000 or 1000000"),
            (("query_pre_attn_scalar",), _positive, "a positive number, Gemma's attention scale "
             "is its inverse square root", "256"),
            (NORM_EPS_KEYS, lambda v: 0 < v < 1, "a number in (0, 1), the normalisation epsilon",
             "1e-05 or 1e-06"),
            (SOFTCAP_KEYS, _positive, "a positive number (the soft cap of cap * tanh(x / cap)) "
             "or null (no capping)", "30.0"),
            (ROTARY_SHARE_KEYS, lambda v: 0 < v <= 1, "a number in (0, 1], the share of each "
             "head RoPE rotates", "0.5"))


#: Granite's scalar multipliers: ``GraniteConfig`` (and ``GraniteMoeConfig``) types each
#: ``float | int`` with no ``None`` (transformers ``configuration_granite.py``, main at
#: 008e5743); ``GraniteForCausalLM`` divides the logits by ``logits_scaling``.
_GRANITE = (("embedding_multiplier", False, lambda v: True, "a number (GraniteConfig types it "
             "float | int), the embedding output's multiplier", "12.0"),
            ("residual_multiplier", False, lambda v: True, "a number (GraniteConfig types it "
             "float | int), each residual branch's multiplier", "0.22"),
            ("attention_multiplier", False, lambda v: True, "a number (GraniteConfig types it "
             "float | int), the attention's softmax scale", "0.015625"),
            ("logits_scaling", False, lambda v: v != 0, "a non-zero number (GraniteForCausalLM "
             "divides the output logits by it)", "8.0"))
#: Cohere's ``logit_scale``: ``CohereConfig`` types it ``float | None``, ``Cohere2Config``
#: ``float`` (``configuration_cohere.py`` / ``configuration_cohere2.py``, main at 008e5743);
#: ``CohereForCausalLM.forward`` multiplies the logits by it, so null fails there.
_COHERE = (("logit_scale", False, lambda v: True, "a number (the CausalLM multiplies the output "
            "logits by it: null fails its forward; Cohere2Config types it float)", "0.0625"),)
#: The scalar keys a model's configuration class types as a number, by ``model_type``:
#: (key, whether null is its 'off', the value's rule, its words, an example). OLMoE's
#: ``clip_qkv`` (``OlmoeConfig``: ``float | None``, "elements of query, key and value ... are
#: clipped so that their absolute value does not exceed this value", applied as
#: ``clamp(-clip_qkv, clip_qkv)``): a bound on an absolute value, so positive, or null.
SCALAR_KEYS = {
    "olmoe": (("clip_qkv", True, _positive, "a positive number (Q, K and V are clamped to "
               "[-clip_qkv, clip_qkv]: a bound on their absolute value) or null (no clipping)",
               "8.0"),),
    "granite": _GRANITE, "granitemoe": _GRANITE, "cohere": _COHERE, "cohere2": _COHERE}


def _scalar_problem(data: dict[str, Any], path: Path | str) -> str | None:
    """The first key of :data:`SCALAR_KEYS` for ``data``'s model type that is stated and not
    a value its configuration class takes and its model runs (QA round 37: ``clip_qkv: -1``
    was said as a clamp to -1, ``embedding_multiplier: "abc"`` and ``logit_scale: null``
    were dropped without a word), as an error message; an absent key is the class's
    default."""
    for key, nullable, ok, words, example in SCALAR_KEYS.get(str(data.get("model_type")), ()):
        if key not in data or (data[key] is None and nullable):
            continue
        value = data[key]
        if not _number(value) or not ok(value):
            shown = "null" if value is None else _shown(value)
            return f"{path}: {key} = {shown} must be {words} (fix: {FIX}, e.g. {example})"
    return None


def value_problems(data: dict[str, Any], path: Path | str) -> str | None:
    """The first out-of-range value of ``data`` as an error message, or None."""
    for keys, ok, words, example in _ranges():
        for key in keys:
            value = data.get(key)
            if value is not None and (not _number(value) or not ok(value)):
                return (f"{path}: {key} = {_shown(value)} must be {words} (fix: {FIX}, e.g. "
                        f"{example})")
    return _scalar_problem(data, path) or _rope_scaling_problem(data, path)


def _rope_scaling_problem(data: dict[str, Any], path: Path | str) -> str | None:
    """``rope_scaling``: null or an object naming one of :data:`ROPE_TYPES` with the keys
    that type needs, its ``factor`` at least 1 (``_validate_*_rope_parameters``: "factor
    field must be a float >= 1"; below 1 the scaling shrinks the positions it extends)."""
    scaling = data.get("rope_scaling")
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        return (f"{path}: rope_scaling = {_shown(scaling)} must be an object such as "
                "{\"rope_type\": \"yarn\", \"factor\": 4.0} or null (no scaling) (fix: "
                f"{FIX}, or null for plain RoPE)")
    kind = rope_type(data)
    if kind not in ROPE_TYPES:
        said = "states no rope_type" if kind is None else \
            f"rope_type = {_shown(kind)} is not a RoPE type transformers builds"
        return (f"{path}: rope_scaling {said} (its ROPE_INIT_FUNCTIONS would refuse the model) "
                f"(fix: one of {', '.join(ROPE_TYPES)}, as the model's published config.json "
                "states it)")
    for key in ROPE_REQUIRED.get(kind, ()):
        if scaling.get(key) is None:
            return (f"{path}: rope_scaling of rope_type {kind!r} needs key {key!r}, which is "
                    f"missing (transformers refuses the config without it) (fix: {FIX})")
    factor = scaling.get("factor")
    if kind != "default" and factor is not None and (not _number(factor) or factor < 1):
        return (f"{path}: rope_scaling.factor = {_shown(factor)} must be a number of at least 1 "
                f"for rope_type {kind!r} (the factor the context is extended by) (fix: {FIX}, "
                "or drop rope_scaling for plain RoPE)")
    for key in ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
                "attention_factor", "beta_fast", "beta_slow"):
        value = scaling.get(key)
        if value is not None and (not _number(value) or value <= 0):
            return (f"{path}: rope_scaling.{key} = {_shown(value)} must be a positive number "
                    f"(fix: {FIX})")
    # Equal factors are published (Llama 4 Scout and Maverick: 1.0 and 1.0; transformers'
    # _validate_llama3_parameters only warns, and its band between them is then empty):
    # read. Below the low factor the band is upside down: refused (QA round 34: equal
    # factors were refused with a fix to change the published values).
    if kind == "llama3" and scaling["high_freq_factor"] < scaling["low_freq_factor"]:
        return (f"{path}: rope_scaling.high_freq_factor = {scaling['high_freq_factor']!r} must "
                f"be at least low_freq_factor = {scaling['low_freq_factor']!r} (Llama 3's "
                f"scaling interpolates between them) (fix: {FIX}, e.g. 4.0 and 1.0)")
    for key in ("short_factor", "long_factor"):
        value = scaling.get(key)
        if value is not None and (not isinstance(value, list)
                                  or not all(_number(v) and v > 0 for v in value)):
            return (f"{path}: rope_scaling.{key} must be a list of positive numbers, one per "
                    f"rotated channel pair (fix: {FIX})")
    return None
