"""The model a record trained: its dimensions and the architecture its texts state.

:func:`read_model` reads the ``model`` section once into :class:`ModelFacts`:
the required dimensions, the defaults taken for unstated ones (written into
the notes), and what the ``arch`` text says about the blocks (gated MLP,
biases, dropout, learned positions, fused QKV, embedding tying) and whether
attention is a fused (flash) kernel. The builders
(:mod:`autopar_opt.calibration.build`, :mod:`~autopar_opt.calibration.moe_build`)
take these facts and never read the text again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.calibration.reading.architecture import Architecture, read_architecture
from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Model
from autopar_opt.ir.runtime import Runtime

#: Architectures whose own code fuses Q, K and V on every stack, so a runtime
#: without fused projections leaves their attention one GEMM: HF GPT-2
#: ``GPT2Attention.c_attn``, HF GPT-NeoX and BLOOM ``query_key_value``,
#: llm-foundry MPT ``Wqkv`` (``llmfoundry/models/layers/attention.py``).
FUSED_QKV_ARCHS = ("gpt-2", "gpt2", "gpt-neox", "gptneox", "bloom", "mpt")

#: A gated MLP named in an ``arch`` text: the GLU family (Shazeer 2020, "GLU
#: Variants Improve Transformer", Eq. 5-6: GLU, ReGLU, GEGLU, SwiGLU each have
#: three weight matrices, gate and up ``h x f`` and down ``f x h``) or "gated".
#: GLM-130B's "GeGLU MLP" is one (Zeng et al. 2023, App. B.3).
_GATED_MLP = re.compile(r"glu(?![a-z])|gated")


def gated_mlp(arch: str) -> bool:
    """Whether a record's ``arch`` text names a gated (GLU-family) MLP:
    SwiGLU, GeGLU, ReGLU, GLU or "gated" (:data:`_GATED_MLP`); "GeLU" is not one."""
    return bool(_GATED_MLP.search(arch.lower()))


def arch_dims(model: Model) -> dict:
    """The :class:`~autopar_opt.calibration.flops.Dims` fields of
    Megatron-Core's generalised FLOP count from a record's ``model`` section
    (``num_attention_heads``, ``num_kv_heads``, ``ffn_hidden_size``,
    SwiGLU/gated in ``arch``, MoE experts per token ``moe_router_topk`` /
    ``num_experts_per_tok``); 0 for what is not stated."""
    def pos_int(key: str) -> int:
        v = model.raw(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0

    return {"heads": pos_int("num_attention_heads"), "kv_heads": pos_int("num_kv_heads"),
            "ffn": pos_int("ffn_hidden_size"), "gated": gated_mlp(model.text("arch")),
            "topk": pos_int("moe_router_topk") or pos_int("num_experts_per_tok") or 1}


def resolve_tying(tied: bool | None, stated_params: float | None, tied_total: int, head: int,
                  notes: list[str]) -> bool:
    """The embedding tying the builders use: as read (``tied``,
    :func:`~autopar_opt.calibration.reading.architecture.read_architecture`), else the reading whose parameter count
    (``tied_total`` or ``tied_total + head``) is closer to the published count
    ``stated_params`` (in parameters), else tied (Megatron's default); the last
    two are written into ``notes``."""
    if tied is not None:
        return tied
    if stated_params:
        tied = abs(tied_total - stated_params) <= abs(tied_total + head - stated_params)
        notes.append(f"embedding tying not stated: {'tied' if tied else 'untied'} (closer to "
                     f"param_count_b {stated_params / 1e9:g})")
        return tied
    notes.append("embedding tying not stated: tied (Megatron default)")
    return True


@dataclass(frozen=True)
class ModelFacts:
    """What the builders need of a record's model (units: counts of elements).

    ``ffn`` is ``None`` only for an MoE model that states no dense width;
    ``tied`` is ``None`` when nothing states the embedding tying;
    ``param_count_b`` is the published count in billions, if stated;
    ``flop_dims`` holds the Megatron-Core FLOP-count fields (:func:`arch_dims`)."""

    name: str
    arch: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int | None
    kv_heads: int
    param_count_b: float | None
    gated: bool
    flash: bool
    learned_positions: bool
    biases: bool
    dropout: bool
    fuses_qkv: bool
    layer_norm: bool
    tied: bool | None
    flop_dims: dict
    architecture: Architecture
    published_params: float | None = None
    published_source: str = ""
    published_half_unit: float = 0.0


def required(model: Model, key: str) -> int:
    """A dimension the model cannot be built without."""
    value = model.raw(key)
    if value is None:
        raise Unmodelable(f"model.{key} is not stated (null)")
    return value


def read_dims(model: Model) -> tuple[int, int, int, int, int]:
    """(layers, hidden, heads, seq, vocab), each required."""
    return (required(model, "num_layers"), required(model, "hidden_size"),
            required(model, "num_attention_heads"), required(model, "seq_len"),
            required(model, "vocab_size"))


def read_model(model: Model, runtime: Runtime, moe: bool, notes: list[str]) -> ModelFacts:
    """The model facts of a record whose dimensions :func:`read_dims` read and
    whose MoE fields (``moe``: routed experts stated) :mod:`.moe` read."""
    layers, h, a, s, v = read_dims(model)
    ffn = model.ffn_hidden_size
    if ffn is None and not moe:
        ffn = 4 * h
        notes.append("ffn_hidden_size not stated: 4h (Megatron default)")
    kv = model.num_kv_heads
    if kv is None:
        kv = a
        notes.append("num_kv_heads not stated: = heads (multi-head attention)")
    arch = model.text("arch").lower()
    flash = "flash" in arch or runtime.flash_attention
    if flash and "flash" not in arch:
        notes.append(f"fused (flash) attention: runtime {runtime.name}")
    facts = read_architecture(model, runtime, notes, moe)
    published, published_source, half_unit = published_count(model)
    return ModelFacts(
        name=model.text("name"), arch=arch, layers=layers, hidden=h, heads=a, seq=s, vocab=v,
        ffn=ffn, kv_heads=kv, param_count_b=model.param_count_b, gated=facts.gated,
        flash=flash, learned_positions=facts.learned_positions, biases=facts.biases,
        dropout=facts.dropout, fuses_qkv=any(k in arch for k in FUSED_QKV_ARCHS),
        layer_norm=facts.layer_norm, tied=facts.tied, flop_dims={**arch_dims(model), "gated": facts.gated},
        architecture=facts, published_params=published, published_source=published_source,
        published_half_unit=half_unit)


def published_count(model: Model) -> tuple[float | None, str, float]:
    """(published parameter count, where it is from, half a unit of its last
    published digit), all in parameters: the record's ``param_count_b``, else
    the count its known family publishes for the size its name gives
    (:mod:`autopar_opt.model_zoo.families`), else ``(None, "", 0)``. A count
    published as "1.7B" stands for 1.65-1.75 B: the half unit, 0.05 B, says so."""
    if model.param_count_b:
        return (model.param_count_b * 1e9, "the record's param_count_b",
                _half_unit(model.param_count_b) * 1e9)
    from autopar_opt.model_zoo.families import family_named, model_size

    fam = family_named(model.text("family") or model.text("name"), model.text("arch").lower())
    count = fam.published(model_size(model.text("name"))) if fam else None
    if count is None:
        return None, "", 0.0
    half = _half_unit(count.params / 1e9) * 1e9 if count.rounded else 0.0
    return count.params, f"family {fam.key}: {count.source}", half


def _half_unit(billions: float) -> float:
    """Half a unit of the last digit of a count written in billions (1.7 -> 0.05)."""
    text = repr(float(billions)).rstrip("0").rstrip(".")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0 ** (-decimals)
