"""Which reader a Hugging Face ``model_type`` autopar does not know has the architecture of,
and how to plan it: a refusal that names the reader and the fix, instead of "not supported"
and the list of every family (:mod:`.hf_config`).

Two cases, each recognised by its ``model_type`` and checked against the keys it states:

* Kimi K2 (``kimi_k2``) publishes DeepSeek-V3's configuration (its ``architectures`` is
  ``DeepseekV3ForCausalLM`` and its keys are ``DeepseekV3Config``'s: MLA's
  ``kv_lora_rank``/``q_lora_rank``, ``n_routed_experts``, ...). The reader is
  ``deepseek_v3``'s; the config is not read as one silently, because the name is not
  that reader's: the fix says to set the type in a copy and state it as an assumption.
* Qwen2-VL and Qwen2.5-VL (``qwen2_vl``, ``qwen2_5_vl``) are image-text models whose
  language model is Qwen2's (its keys top-level, or under ``text_config`` in
  configs written by newer ``transformers``, typed ``qwen2_vl_text``/``qwen2_5_vl_text``)
  and whose vision tower (``vision_config``) the importer does not model. Refused, never
  planned without the tower unsaid: the fix plans the language model alone, saying so.
"""

from __future__ import annotations

from typing import Any, Mapping

#: Keys a DeepSeek-V3 configuration states (DeepseekV3Config) that no other reader reads.
DEEPSEEK_V3_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "n_routed_experts")
#: Keys the Qwen2 reader needs of a language model.
QWEN2_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
#: model_type -> the published model's name, for the image-text Qwen models.
QWEN_VL = {"qwen2_vl": "Qwen2-VL", "qwen2_5_vl": "Qwen2.5-VL"}


def lookalike_refusal(model_type: str, config: Mapping[str, Any]) -> str | None:
    """The refusal (after ``origin: ``) for an unknown ``model_type`` whose architecture a
    reader handles (module doc), naming that reader and the fix; None for any other."""
    if model_type == "kimi_k2":
        stated = [k for k in DEEPSEEK_V3_KEYS if k in config]
        if len(stated) == len(DEEPSEEK_V3_KEYS):
            return (f"model_type 'kimi_k2' (Kimi K2) is not a type autopar reads, but the "
                    f"config states DeepSeek-V3's architecture keys ({', '.join(stated)}), "
                    "which model_type deepseek_v3 reads (fix: to plan it as DeepSeek-V3's "
                    "architecture, set \"model_type\": \"deepseek_v3\" in a copy of the config, "
                    "and state that as an assumption of the plan)")
        return None
    if model_type in QWEN_VL:
        text = config.get("text_config")
        where = ("its text_config object" if isinstance(text, Mapping)
                 and all(k in text for k in QWEN2_KEYS) else "its top-level keys without "
                 "vision_config" if all(k in config for k in QWEN2_KEYS) else None)
        if where is None:
            return None
        return (f"model_type {model_type!r} is {QWEN_VL[model_type]}, an image-text model: its "
                "language model has Qwen2's architecture, which model_type qwen2 reads, but its "
                "vision tower (vision_config) is not modelled, so it is not planned as a whole "
                f"(fix: to plan the language model alone, use {where} as the config with "
                "\"model_type\": \"qwen2\", and state that the vision tower's compute, memory "
                "and parameters are left out)")
    return None
