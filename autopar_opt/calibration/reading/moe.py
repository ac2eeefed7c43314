"""Mixture-of-Experts records: the expert fields, read once.

A published run of an MoE model (Mixtral, DeepSeek-V2/V3, Qwen-MoE, DBRX,
...) priced as a dense decoder is wrong in every term: parameters (all
experts), FLOPs (only ``top_k`` experts per token), memory (expert state
sharded over the expert-data-parallel group) and the token all-to-alls.
This module reads what an MoE record states, in the spellings real configs
use, and says precisely what is missing (:class:`Unmodelable`) instead of
falling back to a dense model. The record reading
(:func:`autopar_opt.calibration.reading.read_record`) calls it; the graph, the
plan's ``ep`` and the MoE FLOP count are :mod:`autopar_opt.calibration.moe_build`'s.
A dense record is untouched.

Spellings accepted in the record's ``model`` section (first stated wins; two
spellings with different values are refused):

* routed experts: ``num_experts`` (Megatron ``--num-experts``),
  ``num_moe_experts`` (Megatron-Core ``TransformerConfig``),
  ``num_local_experts`` (Hugging Face Mixtral), ``n_routed_experts``
  (DeepSeek), ``moe_num_experts`` (MegaBlocks / llm-foundry),
  ``num_routed_experts``, ``n_experts``;
* experts per token: ``top_k``, ``moe_router_topk``, ``num_experts_per_tok``,
  ``moe_top_k``, ``experts_per_token``, ``num_experts_per_token``;
* expert width: ``moe_ffn_hidden_size``, ``moe_intermediate_size``,
  ``expert_ffn_hidden_size``, ``expert_intermediate_size``; unstated, ``ffn_hidden_size`` (Megatron-Core:
  ``moe_ffn_hidden_size`` defaults to ``ffn_hidden_size``; Hugging Face
  Mixtral's ``intermediate_size`` is the expert width);
* shared experts: total width ``moe_shared_expert_intermediate_size`` /
  ``shared_expert_intermediate_size``, or a count ``n_shared_experts`` /
  ``num_shared_experts`` of expert-wide experts (DeepSeekMoE);
* dense layers: ``first_k_dense_replace`` / ``num_dense_layers`` /
  ``first_dense_layers`` (the first k layers), ``moe_layer_freq`` (Megatron:
  layer i is MoE when ``i % freq == 0``, or a 0/1 list, or the string
  ``([0]*3+[1]*58)``), ``decoder_sparse_step`` / ``mlp_only_layers``
  (Qwen-MoE; distinct integer indices of layers, checked by
  :func:`~autopar_opt.model_zoo.layer_index.layer_index_problem`);
* load: ``moe_expert_capacity_factor`` with ``moe_pad_expert_input_to_capacity``
  (padded capacity), ``moe_load_imbalance`` (stated busiest/average);
* MLA attention (DeepSeek-V2/V3): ``kv_lora_rank``, ``q_lora_rank``,
  ``qk_nope_head_dim`` (Megatron ``qk_head_dim``), ``qk_rope_head_dim``
  (``qk_pos_emb_head_dim``), ``v_head_dim``.

Parallelism: ``parallelism.ep`` (or ``expert_model_parallel_size``) is carved
out of ``dp·cp`` as in Megatron-Core (:mod:`autopar_opt.ir.strategies`), so
``tp·pp·dp·cp = num_gpus`` still holds; the experts' tensor-parallel degree
is ``etp`` / ``expert_tensor_parallel_size`` where stated (MoE parallel
folding, Liu et al. 2025, arXiv 2504.14960: the expert ranks of a stage are
its ``tp·cp·dp`` ranks regrouped as ``etp·ep·edp``,
:attr:`autopar_opt.ir.strategies.Strategy.edp`), else ``tp`` (Megatron-Core's
default ``expert_tensor_parallel_size`` = ``tensor_model_parallel_size``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.model import gated_mlp
from autopar_opt.calibration.reading.schema import (Model, Parallelism, RawRecord, flag_value,
                                                     number_problem)
from autopar_opt.model_zoo.blocks import AttentionDims, MoeDims
from autopar_opt.ir.runtime import Runtime
from autopar_opt.model_zoo.layer_index import layer_index_problem

_EXPERTS = ("num_experts", "num_moe_experts", "num_local_experts", "n_routed_experts",
            "moe_num_experts", "num_routed_experts", "n_experts")
_TOP_K = ("top_k", "moe_router_topk", "num_experts_per_tok", "moe_top_k", "experts_per_token",
          "num_experts_per_token")
_EXPERT_FFN = ("moe_ffn_hidden_size", "moe_intermediate_size", "expert_ffn_hidden_size",
               "expert_intermediate_size")
_SHARED_WIDTH = ("moe_shared_expert_intermediate_size", "shared_expert_intermediate_size")
_SHARED_COUNT = ("n_shared_experts", "num_shared_experts")
_FIRST_DENSE = ("first_k_dense_replace", "num_dense_layers", "first_dense_layers")
EP_KEYS = ("ep", "expert_model_parallel_size")
ETP_KEYS = ("etp", "expert_tensor_parallel_size")
_MLA = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_head_dim", "qk_rope_head_dim",
        "qk_pos_emb_head_dim", "v_head_dim")

#: Every extra key of a record's ``model`` section this module reads: key -> (JSON
#: type: "integer", "number" or "" for any, what it means), for the run file's schema
#: (:mod:`autopar_opt.calibration.reading.run_schema`).
MOE_MODEL_KEYS: dict[str, tuple[str, str]] = {
    **{k: ("integer", "Routed experts per MoE layer.") for k in _EXPERTS},
    **{k: ("integer", "Experts per token (router top-k).") for k in _TOP_K},
    **{k: ("integer", "One expert's MLP width; unstated: ffn_hidden_size.") for k in _EXPERT_FFN},
    **{k: ("integer", "Total width of the shared experts.") for k in _SHARED_WIDTH},
    **{k: ("integer", "Shared experts, each expert-wide (DeepSeekMoE).") for k in _SHARED_COUNT},
    **{k: ("integer", "The first k layers are dense.") for k in _FIRST_DENSE},
    "moe_layer_freq": ("", "Megatron: layer i is MoE when i % freq == 0; or a 0/1 list per layer, "
                           "or a string such as ([0]*3+[1]*58)."),
    "decoder_sparse_step": ("integer", "Qwen-MoE: every step-th layer is MoE."),
    "mlp_only_layers": ("", "Qwen-MoE: indices of the dense layers (distinct integers)."),
    "moe_expert_capacity_factor": ("number", "Expert capacity factor (priced when the input is "
                                             "padded to capacity)."),
    "moe_pad_expert_input_to_capacity": ("", "true: experts run at the padded capacity."),
    "moe_load_imbalance": ("number", "Stated busiest/average expert load (at least 1)."),
    **{k: ("integer", "MLA (DeepSeek-V2/V3) dimension.") for k in _MLA},
    "active_param_count_b": ("number", "Published active parameters, billions: kept, not read "
                                       "(the built active count is reported)."),
}

#: Words in a record's model name or ``arch`` that mean Mixture-of-Experts.
MOE_WORDS = re.compile(r"\bmoe\b|mixture[- ]of[- ]experts|\bexperts?\b|mixtral|deepseek[- _]?v[23]"
                       r"|deepseekmoe|\bdbrx\b|\bolmoe\b|\bgrok|\bswitch[- ]transformer"
                       r"|\barctic\b|\bjamba\b|llama[- ]?4\b|\bmaverick\b|gpt-oss|kimi[- ]k2"
                       r"|\b\d+x\d+(\.\d+)?b\b|-a\d+(\.\d+)?b\b|\b\d+b-\d+e\b", re.IGNORECASE)


@dataclass(frozen=True)
class MoeSpec:
    """What an MoE record states: the zoo's :class:`MoeDims`, which layers are
    MoE (``pattern[i]``), the dense-layer width and the MLA dimensions."""

    dims: MoeDims
    pattern: tuple[bool, ...]
    dense_ffn: int | None
    mla: dict

    @property
    def moe_layers(self) -> int:
        return sum(self.pattern)


def first_stated(sec, keys: tuple[str, ...], where: str) -> tuple[str | None, int | None]:
    """(key, positive integer) of the first stated spelling of a record section
    (:class:`~autopar_opt.calibration.reading.schema.Model` or ``Parallelism``);
    differing spellings are refused."""
    found = [(k, _positive(sec, k, where)) for k in keys if not _unstated(sec.raw(k))]
    if len({v for _, v in found}) > 1:
        shown = ", ".join(f"{where}.{k} = {v}" for k, v in found)
        raise Unmodelable(f"{shown} disagree: state the value once")
    return found[0] if found else (None, None)


def _unstated(value: object) -> bool:
    """Null, or a placeholder text ("none", "n/a", "-"): the field is not stated."""
    return value is None or (isinstance(value, str)
                             and value.strip().lower() in ("", "none", "n/a", "na", "-", "null"))


def _positive(sec, key: str, where: str) -> int:
    raw = sec.raw(key)
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    value = _number(sec, key, where)
    if value is None or value != int(value) or value < 0:
        raise Unmodelable(f"{where}.{key} = {sec.raw(key)!r} must be a non-negative integer")
    return int(value)


def _number(sec, key: str, where: str) -> float | None:
    """A numeric field as :func:`~autopar_opt.calibration.reading.schema.number_problem`
    reads it (``None`` when null)."""
    bad = number_problem(sec.raw(key), where, key)
    if bad:
        raise Unmodelable(bad)
    value = sec.raw(key)
    return None if value is None else float(value)


def names_moe(m: Model) -> bool:
    """Whether the record's model name or ``arch`` text says Mixture-of-Experts."""
    return bool(MOE_WORDS.search(f"{m.text('name')} {m.text('arch')}"))


def read_moe(rec: RawRecord, layers: int, notes: list[str]) -> MoeSpec | None:
    """The record's MoE description, or None for a dense record.

    Raises :class:`Unmodelable` when the text says MoE (or ``parallelism.ep``
    > 1) but no expert count is stated, or when a needed field is missing.
    """
    m = rec.model
    key, experts = first_stated(m, _EXPERTS, "model")
    if not experts:
        ep = first_stated(rec.parallelism, EP_KEYS, "parallelism")[1]
        if names_moe(m):
            raise Unmodelable(
                f"model {m.text('name') or m.text('arch')!r} is a Mixture-of-Experts model but "
                f"no expert count is stated (model.{' / '.join(_EXPERTS)}): pricing it as dense "
                "would be wrong in parameters, FLOPs, memory and all-to-all")
        if ep and ep > 1:
            raise Unmodelable(f"parallelism.ep = {ep} but the model states no routed experts "
                              f"(model.{' / '.join(_EXPERTS)})")
        return None
    k_key, k = first_stated(m, _TOP_K, "model")
    if k == 0:
        # QA round 11: a stated 0 was reported as "not stated"
        raise Unmodelable(f"model.{k_key} = 0: a router sends each token to at least one expert "
                          f"(fix: state the run's top-k, 1 to {experts})")
    if not k:
        raise Unmodelable(f"model.{key} = {experts} but the experts per token are not stated "
                          f"(model.{' / '.join(_TOP_K)})")
    if k > experts:
        raise Unmodelable(f"model top_k = {k} exceeds the {experts} routed experts")
    ffn = first_stated(m, ("ffn_hidden_size",), "model")[1]
    f_e = first_stated(m, _EXPERT_FFN, "model")[1]
    if not f_e:
        if not ffn:
            raise Unmodelable(f"the expert width is not stated (model.{' / '.join(_EXPERT_FFN)} "
                              "or ffn_hidden_size)")
        f_e = ffn
        notes.append(f"expert width not stated: ffn_hidden_size = {ffn} (Megatron-Core "
                     "moe_ffn_hidden_size default)")
    shared = _shared_width(m, f_e, notes)
    pattern = _pattern(m, layers, notes)
    if not all(pattern) and not ffn:
        raise Unmodelable(f"{pattern.count(False)} dense layers but their width "
                          "model.ffn_hidden_size is not stated")
    dims = MoeDims(num_experts=experts, top_k=k, expert_ffn=f_e, shared_ffn=shared,
                   capacity_factor=_capacity(m, notes), load_imbalance=_imbalance(m, notes))
    notes.append(f"MoE: {experts} routed experts, top-{k}, expert width {f_e}, shared width "
                 f"{shared}, {sum(pattern)} of {layers} layers MoE")
    return MoeSpec(dims, pattern, ffn, _mla(m))


def _shared_width(m: Model, f_e: int, notes: list[str]) -> int:
    width = first_stated(m, _SHARED_WIDTH, "model")[1]
    count = first_stated(m, _SHARED_COUNT, "model")[1]
    if width is not None and count is not None and width != count * f_e:
        raise Unmodelable(f"shared expert width {width} != {count} shared experts x {f_e}")
    if width is None and count is None:
        notes.append("shared experts not stated: none")
        return 0
    return width if width is not None else count * f_e


def _pattern(m: Model, layers: int, notes: list[str]) -> tuple[bool, ...]:
    """Which layers are MoE (see the module docstring for the keys)."""
    first = first_stated(m, _FIRST_DENSE, "model")[1] or 0
    freq = m.raw("moe_layer_freq")
    if isinstance(freq, str):
        freq = _parse_pattern(freq)
    if isinstance(freq, list):
        if len(freq) != layers or any(v not in (0, 1) for v in freq):
            raise Unmodelable(f"model.moe_layer_freq {m.raw('moe_layer_freq')!r} is not a 0/1 list "
                              f"of {layers} layers")
        pat = [bool(v) for v in freq]
    elif freq is None:
        pat = [True] * layers
    else:
        step = _positive(m, "moe_layer_freq", "model")
        pat = [i % step == 0 for i in range(layers)] if step else [True] * layers
    sparse = _positive(m, "decoder_sparse_step", "model") if m.raw("decoder_sparse_step") else 1
    only = None if _unstated(m.raw("mlp_only_layers")) else m.raw("mlp_only_layers")
    problem = layer_index_problem(only, layers)
    if problem is not None:
        rule, fix = problem
        raise Unmodelable(f"model.mlp_only_layers = {only!r}: {rule} (fix: {fix})")
    only = only or []
    pat = [p and i >= first and (i + 1) % sparse == 0 and i not in only for i, p in enumerate(pat)]
    if not any(pat):
        raise Unmodelable("no layer is an MoE layer under the stated layer pattern")
    if not all(pat):
        notes.append(f"dense layers: {[i for i, p in enumerate(pat) if not p]}")
    return tuple(pat)


def _parse_pattern(value: str) -> list[int]:
    """Megatron's ``--moe-layer-freq`` string, e.g. ``([0]*3+[1]*58)``."""
    terms = re.findall(r"\[([01](?:\s*,\s*[01])*)\]\s*(?:\*\s*(\d+))?", value)
    flat = "".join(ch for ch in value if ch not in " ()")
    rebuilt = "+".join(f"[{a.replace(' ', '')}]" + (f"*{n}" if n else "") for a, n in terms)
    if not terms or rebuilt != flat:
        raise Unmodelable(f"model.moe_layer_freq {value!r} is not a list or a '([0]*k+[1]*n)' "
                          "pattern")
    return [int(v) for a, n in terms for _ in range(int(n or 1)) for v in a.split(",")]


def _capacity(m: Model, notes: list[str]) -> float | None:
    cf = _number(m, "moe_expert_capacity_factor", "model")
    if cf is None:
        return None
    if flag_value(m.raw("moe_pad_expert_input_to_capacity"), "model.moe_pad_expert_input_to_capacity"):
        return cf
    notes.append(f"capacity factor {cf:g} without padding: each expert takes at most that share "
                 "(drops); load priced as balanced")
    return None


def _imbalance(m: Model, notes: list[str]) -> float:
    load = _number(m, "moe_load_imbalance", "model")
    if load is None:
        notes.append("MoE load imbalance not stated: 1.0 (balanced router)")
        return 1.0
    if load < 1.0:
        raise Unmodelable(f"model.moe_load_imbalance = {load:g} is below 1 (busiest/average)")
    return load


def _mla(m: Model) -> dict:
    """MLA dimensions (DeepSeek-V2/V3 names or Megatron-Core's), {} when not MLA."""
    vals = {k: _positive(m, k, "model") for k in _MLA if m.raw(k) is not None}
    if "kv_lora_rank" not in vals:
        if "mla" in re.findall(r"[a-z]+", m.text("arch").lower()) \
                or "latent attention" in m.text("arch").lower():
            raise Unmodelable("multi-head latent attention (MLA) named but model.kv_lora_rank "
                              "is not stated")
        return {}
    out = {"kv_lora_rank": vals["kv_lora_rank"], "q_lora_rank": vals.get("q_lora_rank", 0),
           "qk_nope_dim": vals.get("qk_nope_head_dim", vals.get("qk_head_dim")),
           "qk_rope_dim": vals.get("qk_rope_head_dim", vals.get("qk_pos_emb_head_dim")),
           "v_head_dim": vals.get("v_head_dim")}
    missing = [k for k, v in out.items() if v is None]
    if missing:
        raise Unmodelable(f"MLA attention: model.{', '.join(missing)} not stated")
    return out


def moe_mlp_gated(arch: str, notes: list[str]) -> bool:
    """Dense-layer MLP gating of an MoE model (``arch`` lower case); refuses
    non-gated experts (the zoo's are SwiGLU)."""
    if gated_mlp(arch) or "silu" in arch:
        return True
    if "gelu" in arch or "relu" in arch:
        raise Unmodelable("non-gated (GeLU/ReLU) experts: the zoo's MoE block prices SwiGLU "
                          "experts only")
    notes.append("MoE MLP activation not stated: SwiGLU (Mixtral, DeepSeek, Qwen-MoE, DBRX)")
    return True


def attention_dims(m: Model, spec: MoeSpec, h: int, a: int, kv: int,
                   biases: bool) -> AttentionDims:
    """GQA attention (``head_dim`` / ``kv_channels`` if stated, else ``h/a``) or MLA."""
    if spec.mla:
        x = spec.mla
        return AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=0,
                             q_lora_rank=x["q_lora_rank"], kv_lora_rank=x["kv_lora_rank"],
                             qk_nope_dim=x["qk_nope_dim"], qk_rope_dim=x["qk_rope_dim"],
                             v_head_dim=x["v_head_dim"])
    d = first_stated(m, ("head_dim", "kv_channels"), "model")[1]
    if not d:
        if h % a:
            raise Unmodelable(f"hidden_size {h} is not a multiple of {a} heads and "
                              "model.head_dim is not stated")
        d = h // a
    if a % kv:
        raise Unmodelable(f"num_kv_heads = {kv} does not divide num_attention_heads = {a}")
    return AttentionDims(hidden=h, heads=a, kv_heads=kv, head_dim=d, qkv_bias=biases,
                         out_bias=biases)


def expert_tp(par: Parallelism, spec: MoeSpec | None, notes: list[str]) -> int:
    """The experts' tensor-parallel degree: ``etp`` where stated, else ``tp``
    (Megatron-Core's default); 0 when equal to ``tp`` or the model is dense."""
    etp = first_stated(par, ETP_KEYS, "parallelism")[1]
    if spec is not None and not etp and (par.tp or 1) > 1:
        # QA round 11: taken unsaid (etp 1 instead moved a Mixtral record by +10%)
        notes.append(f"parallelism.etp not stated: tp = {par.tp} (Megatron-Core "
                     "--expert-tensor-parallel-size defaults to the tensor-parallel size)")
    if spec is None or not etp or etp == par.tp:
        return 0
    notes.append(f"expert tensor parallelism {etp:g} apart from tp {par.tp:g} (MoE parallel "
                 f"folding: the stage's tp·cp·dp ranks regrouped as etp·ep·edp for the experts)")
    return int(etp)


def expert_parallel(par: Parallelism, n: int, spec: MoeSpec | None,
                    notes: list[str]) -> tuple[int | None, int]:
    """(the attention layers' ``dp`` when the record's ``dp`` counts expert
    replicas, else ``None``; ``ep``).

    ``ep`` is carved out of ``dp·cp`` (``tp·pp·dp·cp = num_gpus``). A record
    whose stated ``dp`` satisfies ``tp·pp·dp·cp·ep = num_gpus`` instead counts
    the expert-data-parallel replicas: the attention layers' ``dp`` is then
    ``dp·ep``. ``ep`` unstated: 1 (Megatron-Core's default).
    """
    if spec is None:
        return None, 1
    ep = first_stated(par, EP_KEYS, "parallelism")[1]
    if not ep:
        notes.append("parallelism.ep not stated: 1 (Megatron-Core --expert-model-parallel-size "
                     "default)")
        return None, 1
    vals = [par.tp, par.pp, par.dp]
    cp = par.cp or 1
    if all(vals):
        tp, pp, dp = vals
        if tp * pp * dp * cp != n and tp * pp * dp * cp * ep == n:
            notes.append(f"stated dp = {dp:g} counts expert replicas (tp·pp·dp·cp·ep = {n}): "
                         f"attention dp = dp·ep = {dp * ep:g} (Megatron-Core carves ep out of dp)")
            return int(dp * ep), ep
    return None, ep


def check_ep(ep: int, dp: int, cp: int, spec: MoeSpec, tp: int = 1, etp: int = 0) -> None:
    """Megatron-Core's rules: ``etp·ep`` divides the stage's ``tp·cp·dp`` ranks
    (``ep`` divides ``dp·cp`` when ``etp = tp``) and ``ep`` the number of experts."""
    if etp and (tp * cp * dp) % (etp * ep):
        raise Unmodelable(f"etp·ep = {etp}·{ep} does not divide tp·cp·dp = {tp * cp * dp} "
                          "(Megatron-Core regroups a stage's ranks as etp·ep·edp)")
    if not etp and (dp * cp) % ep:
        raise Unmodelable(f"parallelism.ep = {ep} does not divide dp·cp = {dp * cp} "
                          "(Megatron-Core carves expert parallelism out of data parallelism)")
    if spec.dims.num_experts % ep:
        raise Unmodelable(f"parallelism.ep = {ep} does not divide the {spec.dims.num_experts} "
                          "routed experts (--num-experts % --expert-model-parallel-size)")


#: FLOP conventions with no stated MoE form (text key, label).
DENSE_ONLY_COUNTS = (("llm-foundry", "llm-foundry 6·N·s"), ("model_size_b*4*2", "BigScience 8·N·s·B"),
                     ("96*", "Narayanan 2021 Eq. 3"))


def check_counting(counting: str) -> None:
    """Refuse an MoE record whose FLOP convention (``flops_counting`` text) is a
    dense formula with no stated MoE form (:data:`DENSE_ONLY_COUNTS`)."""
    flat = counting.replace(" ", "").lower()
    for key, label in DENSE_ONLY_COUNTS:
        if key in flat:
            raise Unmodelable(f"flops_counting names {label}, a dense formula with no stated MoE "
                              "form: give iteration_time_s or tokens_per_sec_per_gpu")


#: A framework text saying the experts ran without grouped GEMM.
_NO_GROUPED = re.compile(r"(no|without)\s+(the\s+)?(--moe-)?grouped[-_ ]gemm")
#: A framework text naming grouped GEMM.
_GROUPED = re.compile(r"grouped[-_ ]gemm")
#: One kernel per grouped GEMM: Megatron-Core 0.7 or earlier (the legacy ``GroupedMLP``
#: on the ``grouped_gemm`` CUTLASS package; ``TEGroupedMLP`` came with 0.8), the legacy
#: flag, or TE's CUTLASS grouped GEMM switched on.
_ONE_KERNEL = re.compile(r"core[_ ]?v?0\.[0-7](?!\d)|megatron-core 0\.[0-7](?!\d)"
                         r"|moe-use-legacy-grouped-gemm|nvte_use_cutlass_grouped_gemm\s*=\s*1")
#: DeepEP named as the token dispatcher (Megatron-Core ``--moe-token-dispatcher-type flex``
#: with ``--moe-enable-deepep``).
_DEEPEP = re.compile(r"deepep|dispatcher[-_ ]type[ =]*flex")
#: The all-to-all dispatcher named (Megatron-Core ``--moe-token-dispatcher-type alltoall``).
_ALLTOALL = re.compile(r"all-?to-?all|a2a")


def moe_stack(framework: str, runtime: Runtime, notes: list[str]) -> Runtime:
    """The runtime's MoE settings as an MoE record's framework text states them:

    * ``moe_grouped_gemm`` off where the text says the experts ran without grouped
      GEMM (Megatron-Core's ``SequentialMLP``, the default without
      ``--moe-grouped-gemm``); a text naming neither keeps the runtime's (on), said.
    * ``moe_expert_kernels`` ``grouped`` (one kernel per grouped GEMM) where the text
      names Megatron-Core 0.7 or earlier, the legacy flag or TE's CUTLASS grouped
      GEMM; else the runtime's ``per_expert`` (TE's multi-stream cuBLAS GEMMs), said.
    * ``moe_dispatcher`` ``deepep`` where the text names DeepEP (or the ``flex``
      dispatcher); else the runtime's ``alltoall``.
    """
    fw = framework.lower()
    if _NO_GROUPED.search(fw):
        notes.append("no grouped GEMM stated: the local experts run one after the other "
                     "(Megatron-Core SequentialMLP, two GEMM kernels per expert and pass; "
                     "moe_grouped_gemm off)")
        runtime = replace(runtime, moe_grouped_gemm=False)
    elif not _GROUPED.search(fw) and runtime.moe_grouped_gemm:
        notes.append("grouped GEMM not stated: taken (Megatron-Core --moe-grouped-gemm)")
    if runtime.moe_grouped_gemm and _ONE_KERNEL.search(fw):
        notes.append("grouped GEMM of Megatron-Core 0.7 or earlier (legacy GroupedMLP, the "
                     "grouped_gemm CUTLASS kernel) or TE's CUTLASS grouped GEMM: one kernel "
                     "per grouped GEMM (moe_expert_kernels grouped)")
        runtime = replace(runtime, moe_expert_kernels="grouped")
    elif runtime.moe_grouped_gemm and runtime.moe_expert_kernels == "per_expert":
        notes.append("grouped GEMM through Transformer Engine's GroupedLinear (Megatron-Core "
                     "0.8 and later): one cuBLAS GEMM per local expert on 4 streams "
                     "(moe_expert_kernels per_expert)")
    if _DEEPEP.search(fw):
        notes.append("DeepEP dispatcher: a token crosses the network once per target node "
                     "(moe_dispatcher deepep)")
        runtime = replace(runtime, moe_dispatcher="deepep")
    elif runtime.name in ("megatron-core", "megatron-lm") and not _ALLTOALL.search(fw):
        # Megatron-Core's TransformerConfig.moe_token_dispatcher_type defaults to "allgather"
        # (core_r0.6.0 to core_v0.17.1): said, since the all-to-all is what is priced
        notes.append("token dispatcher not stated: Megatron-Core's default is allgather "
                     "(moe_token_dispatcher_type); priced as alltoall (the all-gather "
                     "dispatcher's gather and reduce-scatter over tp x ep are not modelled; "
                     "with ep = 1 they are the tensor-parallel collectives already priced)")
    return runtime
