"""What a framework needs to know about a plan: its uniform settings, or why none exist.

Megatron-LM, torchtitan and DeepSpeed take *one* tensor-, context-, expert-
and data-parallel degree, one sharding level and one recomputation setting
for the whole model; only the pipeline split (and, in Megatron-LM, block-wise
recomputation) may vary. :func:`plan_view` reads those settings off a
:class:`~autopar_opt.ir.plan.Plan`, ignoring a setting on the layers where it
means nothing (ZeRO on a layer without parameters or without data
parallelism, sequence parallelism at ``tp = 1``, recomputation of the
embedding and head, ``ep`` on dense layers), and lists every non-uniformity
with the layers involved, so an exporter can refuse with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from autopar_opt.ir.arch import ModelArch
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule, Training

#: Layer kinds that count as transformer layers in the frameworks' layer counts.
BLOCK_KINDS = (LayerKind.transformer_block, LayerKind.moe_block)


class ExportError(ValueError):
    """The plan cannot be expressed by the target framework; lists every reason."""

    def __init__(self, target: str, reasons: list[str]) -> None:
        self.target, self.reasons = target, reasons
        lines = "\n".join(f"  - {r}" for r in reasons)
        super().__init__(f"{target} cannot run this plan:\n{lines}")


@dataclass
class PlanView:
    """A plan as the uniform settings a launcher takes (see module docstring)."""

    world: int
    gpus_per_node: int
    pp: int
    tp: int
    cp: int
    dp: int
    ep: int
    sp: bool
    zero: int
    recompute: Recompute
    microbatches: int
    micro_batch_size: int          # samples per data-parallel replica per micro-batch
    global_batch_size: int
    seq_len: int | None
    schedule: Schedule
    vp_chunks: int
    stage_layers: list[list[str]]  # layer names per stage
    stage_kinds: list[list[str]]   # "E" embedding, "t" block, "L" head, "?" other
    block_recompute: list[list[Recompute]]   # per stage, per block
    has_moe: bool
    max_tp: int                    # gcd-like bound: tp must divide every layer's max_tp
    num_experts: int
    problems: list[str] = field(default_factory=list)
    etp: int = 1                   # expert tensor-parallel degree (the MoE layers')
    dtype: str = "bf16"
    arch: ModelArch | None = None
    tied_pipeline: bool = False    # an output layer tied to the embedding, pp > 1
    #: ZeRO-3/FSDP frees gathered parameters after the forward pass, as the cost
    #: model priced it (:meth:`~autopar_opt.ir.runtime.Runtime.reshards_after_forward`)
    reshard_after_forward: bool = True
    #: the local experts as grouped GEMMs, as the cost model priced them (runtime
    #: ``moe_grouped_gemm``; off: one expert after the other, Megatron-Core's default)
    moe_grouped_gemm: bool = True
    #: one kernel per grouped expert GEMM (runtime ``moe_expert_kernels`` ``grouped``)
    moe_one_kernel: bool = False
    #: context parallelism's exchange as priced (runtime ``cp_comm_type``)
    cp_comm_type: str = "p2p"
    #: the token dispatcher as priced (runtime ``moe_dispatcher``)
    moe_dispatcher: str = "alltoall"
    #: copies of each ZeRO shard under hybrid sharding (1: ZeRO over the whole dp·cp
    #: group; :mod:`autopar_opt.ir.strategies`)
    replicas: int = 1
    #: the overlaps the plan was priced with (runtime ``grad_reduce_overlap``,
    #: ``param_gather_overlap``; ``tp_comm_overlap`` through Transformer Engine's user
    #: buffers, ``tp_overlap`` ``te_userbuffers``): a launch that leaves them off runs slower
    grad_reduce_overlap: bool = False
    param_gather_overlap: bool = False
    tp_comm_overlap: bool = False

    @property
    def zero_group(self) -> int:
        """Ranks of one ZeRO shard group: ``dp·cp / replicas``."""
        return self.dp * self.cp // self.replicas

    @property
    def blocks_per_stage(self) -> list[int]:
        return [kinds.count("t") for kinds in self.stage_kinds]


def _kind_code(layer: Layer) -> str:
    if layer.kind in BLOCK_KINDS:
        return "t"
    return {LayerKind.embedding: "E", LayerKind.lm_head: "L"}.get(layer.kind, "?")


def _ranges(names: list[str]) -> str:
    """The layers ``names`` (in model order, not necessarily adjacent): all of them up to
    three, else the first and the last with the count ("embed..head" read as the whole
    model where it meant the two ends)."""
    if len(names) <= 3:
        return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]
    return f"{len(names)} layers, {names[0]}, {names[1]}, ... {names[-1]}"


def _uniform(name: str, items: list[tuple[str, Any]], problems: list[str], default: Any) -> Any:
    """The single value of ``items`` ((layer, value) pairs), else record a problem."""
    values: dict[Any, list[str]] = {}
    for layer, value in items:
        values.setdefault(value, []).append(layer)
    if not values:
        return default
    if len(values) > 1:
        shown = "; ".join(f"{name}={_show(v)} on {_ranges(ls)}" for v, ls in values.items())
        problems.append(f"{name} differs between layers ({shown})")
    return max(values, key=lambda v: len(values[v]))


def _show(value: Any) -> str:
    return value.value if isinstance(value, Recompute) else str(value)


def plan_view(plan: Plan, graph: LayerGraph, cluster: Cluster, training: Training) -> PlanView:
    """Read the uniform settings of ``plan``; non-uniformities go to ``problems``."""
    layers = {layer.name: layer for layer in graph.layers}
    rows = [(name, layers[name], s) for st in plan.stages for name, s in zip(st.layers, st.strategies)]
    problems: list[str] = []

    def pick(label: str, keep: Callable[[Layer, Strategy], bool],
             get: Callable[[Strategy], Any], default: Any) -> Any:
        return _uniform(label, [(n, get(s)) for n, l, s in rows if keep(l, s)], problems, default)

    tp = pick("tp", lambda l, s: True, lambda s: s.tp, 1)
    cp = pick("cp", lambda l, s: True, lambda s: s.cp, 1)
    sp = pick("sequence parallelism", lambda l, s: s.tp > 1 and l.supports_sp, lambda s: s.sp, False)
    zero = pick("ZeRO level", lambda l, s: l.params > 0 and s.dp * s.cp > 1, lambda s: s.zero, 0)
    replicas = pick("hybrid-sharding replicas", lambda l, s: l.params > 0 and s.dp * s.cp > 1,
                    lambda s: s.replicas, 1)
    ep = pick("ep", lambda l, s: l.is_moe, lambda s: s.ep, 1)
    etp = pick("etp (expert tensor parallelism)", lambda l, s: l.is_moe, lambda s: s.expert_tp, tp)
    odd = [n for n, l, s in rows if l.kind not in BLOCK_KINDS and s.recompute is not Recompute.none]
    if odd:
        problems.append(f"recomputation of {_ranges(odd)}: the frameworks recompute transformer "
                        "layers only")
    # recomputation may vary per block (Megatron's block method); each target judges it
    rc = _uniform("recomputation", [(n, s.recompute) for n, l, s in rows
                                    if l.kind in BLOCK_KINDS], [], Recompute.none)
    d = cluster.num_devices // plan.pp
    dp = d // (tp * cp)
    b = training.global_batch_size // plan.microbatches
    return PlanView(
        world=cluster.num_devices, gpus_per_node=cluster.gpus_per_node, pp=plan.pp, tp=tp,
        cp=cp, dp=dp, ep=ep, sp=sp, zero=zero, recompute=rc, microbatches=plan.microbatches,
        micro_batch_size=b // dp if dp and b % dp == 0 else 0,
        global_batch_size=training.global_batch_size, seq_len=training.seq_len,
        schedule=plan.schedule, vp_chunks=plan.vp_chunks,
        stage_layers=[list(st.layers) for st in plan.stages],
        stage_kinds=[[_kind_code(layers[n]) for n in st.layers] for st in plan.stages],
        block_recompute=[[s.recompute for n, s in zip(st.layers, st.strategies)
                          if layers[n].kind in BLOCK_KINDS] for st in plan.stages],
        has_moe=any(layer.is_moe for layer in graph.layers),
        max_tp=min((layer.max_tp for layer in graph.layers if layer.kind in BLOCK_KINDS),
                   default=1),
        num_experts=max((layer.num_experts for layer in graph.layers), default=0),
        problems=problems, etp=etp, dtype=training.dtype, arch=graph.arch,
        tied_pipeline=plan.pp > 1 and any(layer.tied_to for layer in graph.layers),
        reshard_after_forward=training.runtime.reshards_after_forward(plan.pp > 1),
        moe_grouped_gemm=training.runtime.moe_grouped_gemm,
        moe_one_kernel=training.runtime.moe_expert_kernels == "grouped",
        cp_comm_type=training.runtime.cp_comm_type,
        moe_dispatcher=training.runtime.moe_dispatcher, replicas=replicas,
        grad_reduce_overlap=training.runtime.grad_reduce_overlap,
        param_gather_overlap=training.runtime.param_gather_overlap,
        tp_comm_overlap=training.runtime.tp_comm_overlap
        and training.runtime.tp_overlap == "te_userbuffers")


def common_rules(view: PlanView, target: str, chain: bool) -> list[str]:
    """Rules every target shares: a chain model, tp dividing the heads/kv-heads,
    ``dp·tp·cp·pp`` = world size, ``ep`` dividing the experts."""
    out = list(view.problems)
    if not chain:
        # what the graph is, not a guess at why (it said "an encoder-decoder" of every DAG,
        # Inception-v3's branches included)
        out.append(f"{target} pipelines a chain of layers; this model's layer graph is a DAG "
                   "(a layer with several inputs or outputs): export supports decoder/encoder "
                   "chains only")
    if view.max_tp % view.tp:
        out.append(f"tp={view.tp} must divide the attention heads / key-value heads "
                   f"({view.max_tp})")
    if view.dp * view.tp * view.cp * view.pp != view.world:
        out.append(f"dp*tp*cp*pp = {view.dp * view.tp * view.cp * view.pp} must equal the "
                   f"world size {view.world}")
    if view.ep > 1 and view.num_experts % view.ep:
        out.append(f"ep={view.ep} must divide the {view.num_experts} experts")
    if view.has_moe and (view.dp * view.tp * view.cp) % (view.etp * view.ep):
        out.append(f"etp*ep = {view.etp * view.ep} must divide tp*cp*dp = "
                   f"{view.dp * view.tp * view.cp} (the experts fold into a stage's ranks)")
    if not view.micro_batch_size:
        out.append("the micro-batch does not split evenly over the data-parallel replicas")
    return out
