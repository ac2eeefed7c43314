"""Why a Hugging Face ``model_type`` autopar does not read cannot be built: the families a
user brings most often whose layers the cost model has no form for (state-space and
recurrent layers, linear or chunked attention), by ``model_type``, each in a few words
from the family's ``transformers`` configuration class. A family not listed is refused
as not supported, without a reason of its own (:mod:`.hf_config`). QA round 34: Jamba,
Nemotron-H and Llama 4 got "not supported" and the list of supported types, nothing
saying what in the model is not modelled."""

from __future__ import annotations

_SSM = "the cost model has no form for a state-space (Mamba) layer"
#: model_type -> (what the model's layers are, why autopar cannot price them).
UNMODELLED = {
    "jamba": ("Mamba (selective state-space) layers between its attention layers "
              "(JambaConfig attn_layer_period / attn_layer_offset)", _SSM),
    "nemotron_h": ("Mamba-2 layers beside its attention and MLP layers "
                   "(NemotronHConfig hybrid_override_pattern)", _SSM),
    "falcon_h1": ("Mamba-2 heads in parallel with attention in every layer", _SSM),
    "bamba": ("Mamba-2 layers beside its attention layers", _SSM),
    "granitemoehybrid": ("Mamba-2 layers beside its attention layers (layer_types)", _SSM),
    "zamba": ("Mamba layers with a shared attention block", _SSM),
    "zamba2": ("Mamba-2 layers with shared attention blocks", _SSM),
    "mamba": ("Mamba (selective state-space) layers and no attention", _SSM),
    "mamba2": ("Mamba-2 layers and no attention", _SSM),
    "falcon_mamba": ("Mamba (selective state-space) layers and no attention", _SSM),
    "qwen3_next": ("Gated DeltaNet linear-attention layers beside gated attention "
                   "(layer_types)", "the cost model has no form for linear attention"),
    "recurrent_gemma": ("RG-LRU recurrent layers beside local attention",
                        "the cost model has no form for a recurrent layer"),
    "rwkv": ("RWKV recurrent time-mixing layers and no attention",
             "the cost model has no form for a recurrent layer"),
    "lfm2": ("short-convolution layers beside its attention layers (layer_types)",
             "the cost model has no form for a convolution block in a decoder"),
    "llama4_text": ("chunked attention (attention_chunk_size, every layer but each fourth) "
                    "and MoE layers with a shared expert (interleave_moe_layer_step)",
                    "autopar prices full or sliding-window attention, not chunked attention"),
}


def unmodelled_reason(model_type: str, inner: str | None = None) -> str | None:
    """What in a ``model_type`` (or, for a multimodal wrapper, its ``text_config``'s
    ``inner`` type) the cost model cannot price, as a clause; None for a family not in
    :data:`UNMODELLED`."""
    if model_type in UNMODELLED:
        what, why = UNMODELLED[model_type]
        return f"its {what}: {why}"
    if inner in UNMODELLED:
        what, why = UNMODELLED[inner]
        return (f"a multimodal model whose language model (text_config, model_type "
                f"{inner!r}) has {what}: {why}")
    return None
