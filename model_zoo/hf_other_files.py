"""The other JSON files a Hugging Face model repository holds beside its ``config.json``,
told apart by their keys, so that a user who gives one is told which file it is and to
give the model's ``config.json`` (QA round 34: a ``tokenizer_config.json`` was "missing
model_type (fix: add it ... e.g. llama)", a fix that leads to one missing key after
another, and ``autopar model`` read it as a spec with seven unknown keys).

Keys from the files ``transformers`` and ``peft`` write: ``tokenizer_config.json``
(``PreTrainedTokenizerBase.save_pretrained``: ``tokenizer_class``,
``model_max_length``, ``added_tokens_decoder``), ``generation_config.json``
(``GenerationConfig``: ``do_sample``, ``temperature``, ``max_new_tokens``, ...),
``special_tokens_map.json``, a processor's ``preprocessor_config.json``
(``image_processor_type``, ``feature_extractor_type``), PEFT's ``adapter_config.json``
(``peft_type``, ``base_model_name_or_path``), and Meta's native ``params.json`` of the
original Llama checkpoints (``dim``, ``n_layers``, ``n_heads``)."""

from __future__ import annotations

from typing import Any

#: (what the file is, keys any one of which marks it), in the order they are tried.
OTHER_FILES = (
    ("a PEFT adapter's adapter_config.json (its base model's config.json is what autopar "
     "reads)", ("peft_type",)),
    ("a tokenizer's tokenizer_config.json", ("tokenizer_class", "model_max_length",
                                             "added_tokens_decoder")),
    ("a special_tokens_map.json", ("additional_special_tokens",)),
    ("a generation_config.json (decoding settings)", ("do_sample", "temperature", "top_p",
                                                      "max_new_tokens", "num_beams")),
    ("a processor's preprocessor_config.json", ("image_processor_type",
                                                 "feature_extractor_type", "processor_class")),
    ("Meta's native params.json (the original checkpoint's format, not transformers')",
     ("n_layers",)),
)
#: Keys a model's config.json states that none of :data:`OTHER_FILES` does.
MODEL_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "n_embd", "d_model")


def other_file(data: Any) -> str | None:
    """Which repository file other than the model's ``config.json`` ``data`` is (a
    phrase), or None: a JSON object without ``model_type`` or any model size key that
    has one of :data:`OTHER_FILES`' keys."""
    if not isinstance(data, dict) or "model_type" in data or any(k in data for k in MODEL_KEYS):
        return None
    for what, keys in OTHER_FILES:
        if any(k in data for k in keys):
            return what
    return None
