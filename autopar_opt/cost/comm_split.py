"""Each kind of communication's transfer time, the part hidden behind compute and the part
exposed, per stage and per iteration (plan.json ``metrics.communication``).

The cost model prices every collective whole (``total``) and leaves on the critical path
what no compute window hides (:mod:`autopar_opt.cost.layer_cost`); the breakdown
(:func:`autopar_opt.cost.evaluate.iteration_breakdown`) states the exposed part alone. An
exposed figure also carries the slowdown that overlapped traffic charges to the compute it
overlaps (``comm_interference`` x the NCCL time hidden on the compute's SMs,
:attr:`~autopar_opt.cost.params.CostParams.comm_interference`; Transformer Engine's SM
margin under TP user buffers), so per kind::

    exposed = total - hidden + interference

Nothing here enters an objective: the solvers read ``time_s``/``sync_s`` and the
iteration time is :func:`~autopar_opt.cost.evaluate.pipeline_latency`'s; these figures
only say what the exposed terms are made of. Pipeline sends between stages are not a kind
here: they sit in the breakdown's ``pipeline_bubble_s`` (they are on the critical path only
where they outlast a stage, :func:`~autopar_opt.cost.evaluate.pipeline_latency`).
"""

from __future__ import annotations

from typing import Any, Sequence

#: Kinds, as in the breakdown: tp, cp, zero (per micro-batch ZeRO-3/FSDP gathers and
#: reduce-scatters, ZeRO-2 reductions), ep (MoE all-to-all), offload (CPU activation
#: copies), reshard (layout changes inside a stage), dp (once per iteration: the gradient
#: reduction and parameter all-gather, ZeRO-3's once-per-iteration gathers and
#: reduce-scatters, the tied-embedding all-reduce).
KINDS = ("tp", "cp", "zero", "ep", "offload", "reshard", "dp")
#: Kinds a :class:`~autopar_opt.cost.context.LayerCost` carries (reshard is the plan's).
LAYER_KINDS = ("tp", "cp", "zero", "ep", "offload", "dp")
#: Figures a LayerCost carries per kind (``<kind>_<part>_s``); exposed is ``*_exposed_s``.
PARTS = ("total", "hidden", "interference")
#: Per kind, the StageMetrics field of its exposed time.
STAGE_EXPOSED = {"tp": "tp_s", "cp": "cp_s", "zero": "zero_s", "ep": "ep_s",
                 "offload": "offload_s", "reshard": "reshard_s", "dp": "dp_s"}
#: Per kind, the breakdown term equal to its exposed time (:func:`iteration_communication`).
BREAKDOWN_TERM = {"tp": "tp_comm_s", "cp": "cp_comm_s", "zero": "zero_comm_s",
                  "ep": "ep_comm_s", "offload": "offload_comm_s", "reshard": "reshard_s",
                  "dp": "dp_comm_s"}
#: The figures of one kind, in the order plan.json writes them.
FIGURES = ("total_s", "hidden_s", "exposed_s", "interference_s")


def new_accumulator(pp: int) -> dict[tuple[str, str], list[float]]:
    """Per (kind, part) a running sum per stage, all zero."""
    return {(kind, part): [0.0] * pp for kind in KINDS for part in PARTS}


def add_layer(acc: dict[tuple[str, str], list[float]], stage: int, n: int, cost: Any) -> None:
    """Add ``n`` layers of ``cost`` (a LayerCost) to ``stage``'s sums, as ``evaluate`` adds
    their exposed terms."""
    for kind in LAYER_KINDS:
        for part in PARTS:
            acc[kind, part][stage] += n * getattr(cost, f"{kind}_{part}_s")


def stage_split(acc: dict[tuple[str, str], list[float]], stage: int, exposed: dict[str, float]
                ) -> dict[str, dict[str, float]]:
    """One stage's figures per kind (per micro-batch; dp per iteration), ``exposed`` being its
    exposed time per kind (the StageMetrics fields)."""
    return {kind: {"total_s": acc[kind, "total"][stage], "hidden_s": acc[kind, "hidden"][stage],
                   "exposed_s": exposed[kind], "interference_s": acc[kind, "interference"][stage]}
            for kind in KINDS}


def critical_stages(stages: Sequence[Any]) -> tuple[Any, Any]:
    """(bottleneck stage, slowest once-per-iteration stage): the stage of the largest
    per-micro-batch time and the one of the largest ``sync_s``, the two the breakdown reads."""
    return max(stages, key=lambda st: st.time_s), max(stages, key=lambda st: st.sync_s)


def iteration_communication(stages: Sequence[Any], microbatches: int
                            ) -> dict[str, dict[str, float]]:
    """Per kind, per iteration, along the breakdown's critical path: the bottleneck stage's
    ``microbatches`` micro-batches for the per-micro-batch kinds, the slowest
    once-per-iteration stage's figures for dp (:func:`critical_stages`); each kind's
    ``exposed_s`` is the breakdown's term (:data:`BREAKDOWN_TERM`), to the bit."""
    if not stages:
        return {}
    b, g = critical_stages(stages)
    out = {}
    for kind in KINDS:
        st, n = (g, 1) if kind == "dp" else (b, microbatches)
        got = st.communication.get(kind) or {}
        out[kind] = {name: (getattr(st, STAGE_EXPOSED[kind]) if name == "exposed_s"
                            else got.get(name, 0.0)) * n for name in FIGURES}
    return out
