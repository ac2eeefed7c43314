"""Layer-graph IR: the model as a topologically ordered DAG of layers.

Every node carries *per-sample* quantities (FLOPs, bytes) so that the cost
model can scale them by the micro-batch size and divide them by parallel
degrees. The zoo builders compute these numbers from model dimensions and cite
the formulas; the cost model never looks at model dimensions directly.

Glossary
--------
layer
    A node of this graph (a transformer block, an embedding, a conv, ...).
stage
    A contiguous group of layers placed on one pipeline device group.
degree
    The size of a parallel group (``tp=4``: four devices share one layer).
"""

from __future__ import annotations

import functools
import math

from dataclasses import dataclass, field, asdict, replace
from enum import Enum
from typing import Iterable, Iterator

from typing import TYPE_CHECKING

if TYPE_CHECKING:         # networkx is imported on first use of LayerGraph.nx
    from autopar_opt.ir.arch import ModelArch
    import networkx as nx


class LayerKind(str, Enum):
    """What a layer is; decides which intra-layer strategies apply."""

    transformer_block = "transformer_block"
    moe_block = "moe_block"
    attention = "attention"
    mlp = "mlp"
    embedding = "embedding"
    lm_head = "lm_head"
    norm = "norm"
    conv = "conv"
    pool = "pool"
    linear = "linear"
    concat = "concat"
    generic = "generic"


#: 16-bit bytes per score the builders count in ``Layer.act_attn_bytes`` of an unfused
#: attention core, (without, with) attention dropout (``Layer.attn_dropout``): one softmax
#: output; with dropout also its mask and output (sources:
#: :func:`autopar_opt.model_zoo.transformer.kept_per_score`). The runtime's softmax rescales
#: from this count (:func:`autopar_opt.cost.scores.score_bytes`).
COUNTED_SCORE_BYTES = (2, 5)


@dataclass(frozen=True)
class MeasuredCost:
    """Measured time of one layer at one tensor-parallel degree.

    Replaces the analytical compute model for that layer ("profile table").
    Times are per sample on each device of the tensor-parallel group, so that
    a strategy with data-parallel degree ``dp`` and micro-batch ``b`` costs
    ``(fwd_ms + bwd_ms) * b / dp``.
    """

    tp: int
    fwd_ms_per_sample: float
    bwd_ms_per_sample: float
    act_bytes_per_sample: float | None = None


@dataclass(frozen=True)
class Layer:
    """One node of the layer graph; all sizes are per sample, in FLOPs or bytes.

    Attributes
    ----------
    name : unique name inside the graph.
    kind : :class:`LayerKind`.
    flops_fwd, flops_bwd : forward / backward FLOPs per sample (backward is
        usually 2x forward: Narayanan et al. 2021, Sec. 5.1).
    params : number of trainable parameters.
    act_bytes : bytes of activations kept for the backward pass per sample, with
        no tensor parallelism and no recomputation (Korthikanti et al. 2022,
        Eq. 1 for a transformer block: ``s*h*(34 + 5*a*s/h)``).
    act_replicated_bytes : the part of ``act_bytes`` that tensor parallelism does
        *not* split unless sequence parallelism is on (the ``10*s*h`` of
        Korthikanti Eq. 2).
    act_attn_bytes : the part of ``act_bytes`` that selective recomputation
        drops (the ``5*a*s^2`` attention-core term of Korthikanti Eq. 1).
    attn_dropout : how the builder counted ``act_attn_bytes``: with one 16-bit
        softmax output kept per score (Megatron's fused softmax), plus the
        attention dropout's mask and output (True: ``5`` bytes per score,
        Korthikanti Eq. 1) or without dropout (False: ``2``). The runtime's
        softmax then rescales it (:func:`autopar_opt.cost.scores.score_bytes`:
        an fp32 softmax keeps ``7`` or ``6``). None: not stated (a layer list's
        own figure), taken as it is on every runtime.
    flops_recompute_selective : forward FLOPs per sample re-executed by
        selective recomputation (the attention core).
    act_gemm_input_bytes : the part of ``act_bytes`` that is 16-bit GEMM
        inputs kept for the weight-gradient GEMMs; FP8 training with
        Transformer Engine keeps their FP8 cast instead (1 byte per element:
        ``te.Linear``/``LayerNormLinear`` save ``inputmat``/``ln_out`` after
        the FP8 cast), half these bytes.
    act_gemm_input_replicated_bytes : the part of ``act_gemm_input_bytes``
        inside ``act_replicated_bytes`` (the norm outputs feeding the QKV and
        first MLP GEMMs).
    gemm_output_bytes : 16-bit bytes per sample of the outputs of the layer's
        GEMMs, i.e. of the output gradients their backward GEMMs read; FP8
        training casts and transposes each (Transformer Engine's
        ``cast_transpose`` of ``grad_output``: :mod:`autopar_opt.cost.fp8_casts`).
        0 where the builder does not state it.
    gemm_output_replicated_bytes : the part of ``gemm_output_bytes`` a
        tensor-parallel rank holds whole: the outputs of the row-parallel GEMMs
        (attention output projection, second MLP GEMM), whose gradient every
        rank reads whole (gathered under sequence parallelism).
    input_bytes : bytes of the layer's input per sample (what full
        recomputation keeps: Korthikanti Sec. 4.1, ``2*s*h``).
    output_bytes : bytes of the output per sample (sent to the next stage or
        resharded for the next layer).
    tp_comm_bytes : bytes all-reduced per sample by tensor parallelism in the
        forward pass (Megatron block: two all-reduces of ``2*s*h`` bytes; the
        backward pass does the same amount: Shoeybi et al. 2019, Fig. 4). On an
        ``embedding`` or ``lm_head`` layer the ``2*s*h`` hidden state, reduced once per
        micro-batch (forward for the embedding, backward for the output layer), and
        gathered the other way under sequence parallelism
        (:func:`autopar_opt.cost.comm.vocab_layer_tp_time`).
    cp_comm_bytes : bytes of keys/values per sample that context parallelism
        all-gathers in the forward pass (ring attention, Liu et al. 2023).
    max_tp : largest tensor-parallel degree (e.g. attention heads); 1 = none.
    supports_sp, supports_cp : sequence / context parallelism apply.
    measured : optional measured costs that replace the analytical compute model.
    num_experts, top_k : routed experts of a Mixture-of-Experts layer and the
        experts each token is sent to (0 = not an MoE layer; Shazeer et al.
        2017; Fedus et al. 2022).
    expert_params : the routed experts' parameters (part of ``params``);
        expert parallelism shards them over the ``ep`` group.
    expert_flops_fwd : the routed experts' forward FLOPs per sample at
        perfect balance (part of ``flops_fwd``); backward is 2x.
    expert_act_bytes : the routed experts' activations per sample at perfect
        balance (part of ``act_bytes``).
    a2a_bytes : bytes per sample one all-to-all moves (token dispatch to the
        ``top_k`` experts; the combine moves as many back).
    expert_load : the load-imbalance factor: tokens routed to the busiest
        expert-parallel rank over the average (1.0 = perfect balance; with a
        capacity factor and padding, the capacity factor). Scales the routed
        experts' compute, activations and all-to-all volume.
    tied_params : parameters this layer shares with the layer named ``tied_to``
        (an output layer tied to the input word embedding). On the copy
        holder (``tied_owner`` false) they are not in ``params``: while both
        layers share a pipeline stage they are counted once, in the owner; on
        different stages the holder keeps its own copy with its gradient and
        optimizer state, and the two copies' gradients are all-reduced between
        the two stages once per iteration after the backward pass
        (Megatron-Core ``LanguageModule.setup_embeddings_and_output_layer``:
        "a second copy of word_embeddings on the last stage"; the all-reduce
        in ``finalize_model_grads._allreduce_word_embedding_grads``; DeepSpeed
        ``TiedLayerSpec`` in ``deepspeed/runtime/pipe/module.py``, reduced by
        ``PipelineEngine._exec_reduce_tied_grads``). A tie joins the first and
        the last layer of the order (:func:`tie_problem`), so the two are on
        different stages exactly when ``pp > 1``.
    tied_to : name of the tie partner (empty: no tie).
    tied_owner : this layer owns the shared parameters (they are in its
        ``params``); set on the partner by :class:`LayerGraph` from the
        holder's declaration.
    gemm_kernels : GEMM kernels of one forward pass (each pays the per-kernel
        latency ``efficiency_half_us``); ``None``: the kind's count,
        :data:`autopar_opt.cost.compute.GEMM_KERNELS`. Builders set it where a
        block runs more (cross-attention, MLA projections, a router, shared experts).
    gemm_kernels_unfused : GEMM kernels of one forward pass on a runtime without
        fused projections (:attr:`autopar_opt.ir.runtime.Runtime.fused_projections`
        off: the model code runs Q, K and V, and a gated MLP's gate and up, as
        separate GEMMs, e.g. Hugging Face ``modeling_llama.py`` and torchtitan's
        Llama); ``None``: the same as the fused count. Builders set it from the
        model's structure (a Llama block: 7 against 4).
    tp_collectives : tensor-parallel collectives per pass that share
        ``tp_comm_bytes`` (each a separate message, so each pays the
        collective's latency); 0: the kind's count
        (:func:`autopar_opt.cost.comm.tp_collectives`: 2 for a transformer block).
    head_dim : width of one attention head (the attention kernel's efficiency
        depends on it: :mod:`autopar_opt.cost.attention`); 0: not known (128
        taken, stated).
    attn_heads : query heads of the attention core (the attention kernel's
        call size: :func:`autopar_opt.cost.compute.call_batch_heads`); 0: not
        stated, recovered from ``flops_recompute_selective`` as multi-head
        attention's ``4·heads·s²·head_dim``, which is wrong where the value
        width differs from ``head_dim`` (MLA: ``2·s²·heads·(d_qk + d_v)``).
    attn_causal : whether the attention core has a causal mask (decoders: True;
        encoders: False); None: not known (causal taken, stated).
    attn_flops_halved : ``flops_recompute_selective`` already counts the
        causal core at half (the masked half skipped, as fused kernels
        execute it); False with a causal mask: the kernel executes half of the
        counted attention FLOPs.
    attn_window : keys each query of a causal attention core sees, itself
        included (sliding-window or local attention: Hugging Face
        ``sliding_window``, Megatron-Core ``window_size=(w-1, 0)``); 0: the whole
        causal prefix. ``flops_recompute_selective`` then counts only the
        window's pairs (:func:`autopar_opt.ir.window.window_share` of the causal
        core), which fused kernels compute; an unfused core computes the whole
        score matrix and masks it.
    tp_gemm_shares : the forward GEMM FLOPs of the four tensor-parallel
        collective-GEMM pairs of a block (QKV, output projection, MLP up, MLP
        down), which overlap mechanisms pair collectives with
        (:mod:`autopar_opt.cost.overlap`); empty: an even split.
    act_op_saved_bytes : bytes per sample a block keeps under op-level
        selective checkpointing (:attr:`~autopar_opt.ir.training.Recompute.op`:
        its input, the attention kernel's output and log-sum-exp, every
        odd-numbered GEMM's output; ``model_zoo/transformer.py``
        ``op_sac_terms``) with no tensor parallelism; 0: the mode is not
        offered for this layer.
    act_op_saved_replicated_bytes : the part of ``act_op_saved_bytes`` that
        tensor parallelism splits only under sequence parallelism (the input).
    act_op_saved_unsplit_bytes : the part of ``act_op_saved_bytes`` every
        tensor-parallel rank keeps whole (a row-parallel GEMM's partial sums).
    flops_recompute_op : forward GEMM FLOPs per sample re-run in the backward
        pass under op-level selective checkpointing (the even-numbered GEMMs;
        the element-wise forward re-runs too).
    pool_index_bytes : bytes per sample of the arg-max indices a max pool
        writes in the forward pass and reads in the backward pass: one int64
        per output element (PyTorch ``max_pool2d_with_indices``,
        ``aten/src/ATen/native/cuda/DilatedMaxPool2d.cu``:
        ``max_pool_forward_nchw`` writes ``int64_t* top_mask``, the backward
        kernel reads it); 0 for an average pool or any other layer. Priced as
        HBM traffic (:func:`autopar_opt.cost.compute.memory_bound_bytes`)
        and, being saved for the backward (``max_pool2d_with_indices``:
        ``self: max_pool2d_with_indices_backward(grad, self, ..., result1)``,
        ``tools/autograd/derivatives.yaml``), included in ``act_bytes`` by
        the builder (``model_zoo/cnn.py``), so time and memory count it alike.
    """

    name: str
    kind: LayerKind = LayerKind.generic
    flops_fwd: float = 0.0
    flops_bwd: float = 0.0
    params: int = 0
    act_bytes: float = 0.0
    act_replicated_bytes: float = 0.0
    act_attn_bytes: float = 0.0
    attn_dropout: bool | None = None
    act_gemm_input_bytes: float = 0.0
    act_gemm_input_replicated_bytes: float = 0.0
    gemm_output_bytes: float = 0.0
    gemm_output_replicated_bytes: float = 0.0
    flops_recompute_selective: float = 0.0
    input_bytes: float = 0.0
    output_bytes: float = 0.0
    tp_comm_bytes: float = 0.0
    cp_comm_bytes: float = 0.0
    max_tp: int = 1
    supports_sp: bool = False
    supports_cp: bool = False
    measured: tuple[MeasuredCost, ...] = ()
    num_experts: int = 0
    top_k: int = 0
    expert_params: int = 0
    expert_flops_fwd: float = 0.0
    expert_act_bytes: float = 0.0
    a2a_bytes: float = 0.0
    expert_load: float = 1.0
    tied_params: int = 0
    tied_to: str = ""
    tied_owner: bool = False
    gemm_kernels: int | None = None
    gemm_kernels_unfused: int | None = None
    pool_index_bytes: float = 0.0
    tp_collectives: int = 0
    head_dim: int = 0
    attn_heads: int = 0
    attn_causal: bool | None = None
    attn_flops_halved: bool = False
    attn_window: int = 0
    tp_gemm_shares: tuple[float, ...] = ()
    act_op_saved_bytes: float = 0.0
    act_op_saved_replicated_bytes: float = 0.0
    act_op_saved_unsplit_bytes: float = 0.0
    flops_recompute_op: float = 0.0

    @property
    def holds_tied_copy(self) -> bool:
        """Whether this layer keeps its own copy of tied parameters when its
        tie partner is on another pipeline stage."""
        return self.tied_params > 0 and not self.tied_owner

    @property
    def is_moe(self) -> bool:
        """Whether this layer has routed experts (expert parallelism applies)."""
        return self.num_experts > 0

    @property
    def active_params(self) -> float:
        """Parameters one token uses: the routed experts count ``top_k / num_experts``."""
        if not self.is_moe:
            return float(self.params)
        return self.params - self.expert_params * (1.0 - self.top_k / self.num_experts)

    def measured_for(self, tp: int) -> MeasuredCost | None:
        """The measured cost at tensor-parallel degree ``tp``, if any."""
        for entry in self.measured:
            if entry.tp == tp:
                return entry
        return None

    def signature(self) -> tuple:
        """Everything but the name: identical layers share a signature."""
        data = asdict(self)
        data.pop("name")
        return tuple(sorted((k, repr(v)) for k, v in data.items()))


def params_summary(total: float, active: float | None = None) -> str:
    """A model's parameter count as the tool prints it, total and active per
    token (an MoE's differ), e.g. ``6.738 B parameters (all active)``."""
    active = total if active is None else active
    text = f"{total / 1e9:.3f} B parameters"
    return text + (f" ({active / 1e9:.3f} B active per token)" if active != total
                   else " (all active)")


def tie_problem(layers: list[Layer]) -> tuple[int, str, str] | None:
    """The first tie a layer list cannot have, as (layer index, rule, fix);
    None when every tie is well formed.

    A layer with ``tied_params`` names a partner in ``tied_to``; the holder is
    the last layer and the partner the first (an output layer tied to the
    input embedding): contiguous stages then put them on different stages
    exactly when ``pp > 1``, which keeps the copy a per-configuration constant
    of the cost tables (docs/DESIGN.md §3).
    """
    names = [layer.name for layer in layers]
    by_name = dict(zip(names, layers))
    for i, layer in enumerate(layers):
        if layer.tied_to and layer.tied_params <= 0:
            return (i, f"tied_to {layer.tied_to!r} without tied_params",
                    "give tied_params (the shared parameter count) or drop tied_to")
        if layer.tied_params <= 0:
            continue
        if layer.tied_owner:
            holder = by_name.get(layer.tied_to)
            if holder is None or not holder.holds_tied_copy or holder.tied_to != layer.name:
                return (i, f"tied_owner with tied_to {layer.tied_to!r}, which holds no copy "
                           "tied to this layer",
                        "declare the tie on the output layer (tied_params, tied_to) and "
                        "leave tied_owner false: the owner is marked from it")
            continue
        if layer.tied_to not in names:
            return (i, f"tied_to {layer.tied_to!r} names no layer",
                    "name the layer that owns the shared parameters (the input embedding)")
        if i != len(layers) - 1 or names.index(layer.tied_to) != 0:
            return (i, "a tie must join the last layer (holding the copy) and the first "
                       "(owning the parameters)",
                    "tie the output layer to the input embedding, or count the "
                    "parameters in params and drop the tie")
    return None


@dataclass
class LayerGraph:
    """A DAG of :class:`Layer` nodes in a fixed topological order.

    ``order`` is the topological order used for pipeline stages: a stage is a
    contiguous range of this order, and every edge goes forward in it.

    Two descriptions, for messages only (no cost depends on them, and they do
    not enter equality): ``causal`` (True: decoder attention masks later
    tokens; False: bidirectional; None: mixed or unknown) and ``fixed_tokens``
    (for models whose token count is not a training setting, e.g. a ViT's
    image and patch size: what fixes it; empty when ``training.seq_len`` sets it);
    ``assumed`` lists what the import took by default or left out.
    """

    name: str
    layers: list[Layer]
    edges: list[tuple[str, str]]
    seq_len: int | None = None
    source: str = ""
    causal: bool | None = field(default=None, compare=False)
    fixed_tokens: str = field(default="", compare=False)
    #: the architecture as launchers spell it (:class:`~autopar_opt.ir.arch.ModelArch`);
    #: None for models built from a layer list; read by exports only
    arch: "ModelArch | None" = field(default=None, compare=False)
    #: what the import took without the input stating it, or left out, one sentence
    #: each (a Hugging Face config's absent architecture keys, an unbuilt module):
    #: said by ``autopar model`` and in every case's assumptions
    assumed: tuple[str, ...] = field(default=(), compare=False)
    _graph: "nx.DiGraph | None" = field(init=False, repr=False, default=None, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for i, layer in enumerate(self.layers):
            if layer.name in index:
                raise ValueError(f"duplicate layer name {layer.name!r} in model {self.name!r}")
            index[layer.name] = i
        bad = tie_problem(self.layers)
        if bad is not None:
            raise ValueError(f"layer {self.layers[bad[0]].name!r}: {bad[1]}")
        self._mark_tie_owners()
        for u, v in self.edges:
            if u not in index or v not in index:
                missing = u if u not in index else v
                raise ValueError(f"edge ({u!r}, {v!r}) names unknown layer {missing!r}")
            if index[u] >= index[v]:
                raise ValueError(
                    f"edge ({u!r}, {v!r}) goes backwards in the layer order; "
                    "list layers in a topological order")

    def _mark_tie_owners(self) -> None:
        """Mark each tie's partner (``tied_owner``, ``tied_params``, ``tied_to``)
        from the holder's declaration, so the owner's side of the gradient
        all-reduce is priced with its own strategy."""
        holders = [layer for layer in self.layers if layer.holds_tied_copy]
        if holders:
            self.layers = list(self.layers)      # the caller's list stays as given
        for holder in holders:
            i = next(j for j, layer in enumerate(self.layers) if layer.name == holder.tied_to)
            self.layers[i] = replace(self.layers[i], tied_params=holder.tied_params,
                                     tied_to=holder.name, tied_owner=True)

    @classmethod
    def chain(cls, name: str, layers: Iterable[Layer], seq_len: int | None = None,
              source: str = "", causal: bool | None = None,
              fixed_tokens: str = "") -> "LayerGraph":
        """A chain: every layer feeds the next one."""
        layers = list(layers)
        edges = [(a.name, b.name) for a, b in zip(layers, layers[1:])]
        return cls(name=name, layers=layers, edges=edges, seq_len=seq_len, source=source,
                   causal=causal, fixed_tokens=fixed_tokens)

    @property
    def nx(self) -> "nx.DiGraph":
        """The underlying networkx graph (read-only use), built on first use:
        importing networkx costs ~0.3 s of every command's start-up (issue 18)."""
        if self._graph is None:
            import networkx

            g = networkx.DiGraph()
            for layer in self.layers:
                g.add_node(layer.name, layer=layer)
            g.add_edges_from(self.edges)
            self._graph = g
        return self._graph

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def index(self, name: str) -> int:
        """Position of a layer in the topological order."""
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        raise KeyError(name)

    def edge_indices(self) -> list[tuple[int, int]]:
        """Edges as (u, v) positions in the order, u < v."""
        pos = {layer.name: i for i, layer in enumerate(self.layers)}
        return [(pos[u], pos[v]) for u, v in self.edges]

    def is_chain(self) -> bool:
        """True when the edges are exactly consecutive pairs of the order."""
        return self.edge_indices() == [(i, i + 1) for i in range(len(self.layers) - 1)]

    def total_params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @functools.cached_property
    def cost_classes(self) -> tuple[int, ...]:
        """Per layer, a class id shared by layers equal in every field but
        the name (they cost the same under the same strategy); computed
        once per graph (the graph is not mutated after construction)."""
        ids: dict[tuple, int] = {}
        return tuple(ids.setdefault(layer.signature(), len(ids)) for layer in self.layers)

    def active_params(self) -> float:
        """Parameters used per token (MoE: only the ``top_k`` routed experts)."""
        return sum(layer.active_params for layer in self.layers)

    def attention_windows(self) -> list[int]:
        """Each attention layer's sliding window in keys per query (0: full
        attention, also where the window covers the sequence: a layer list may state
        one; :mod:`autopar_opt.ir.window`), in layer order."""
        seq = self.seq_len or math.inf
        return [layer.attn_window if 0 < layer.attn_window < seq else 0
                for layer in self.layers if layer.flops_recompute_selective > 0]

    def flops_per_sample(self) -> float:
        """Model FLOPs (forward + backward, no recomputation) per sample."""
        return sum(layer.flops_fwd + layer.flops_bwd for layer in self.layers)
