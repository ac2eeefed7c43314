"""Why a context-parallel degree cannot split a model's sequence, in the model's words.

The rule is :func:`autopar_opt.ir.strategies.cp_degree_ok`: Megatron-Core cuts
the sequence into ``2·cp`` chunks and gives rank ``r`` chunks ``r`` and
``2·cp-1-r`` (``get_batch_on_this_cp_rank``, for every model; the pairing
balances the work of causal attention). Only the message depends on the
model (:attr:`autopar_opt.ir.graph.LayerGraph.causal`, ``fixed_tokens``): it
says "causal" only for a causal model, and for a model whose token count is
not a training setting (a ViT: image and patch size) it names what fixes
the count and suggests a cp that fits, never another ``seq_len``.
"""

from __future__ import annotations

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.strategies import cp_degree_ok, cp_degrees_for


def cp_refusal(cp: int, seq_len: int | None, graph: LayerGraph | None,
               listed: bool) -> tuple[str, str] | None:
    """``(rule, fix)`` when ``cp`` cannot split ``seq_len`` tokens of ``graph``, else None.

    ``listed``: the degree is an entry of a list (``search.cp_degrees``), so the
    fix is to remove it; otherwise it is the plan's single degree.
    """
    if cp_degree_ok(seq_len, cp):
        return None
    fixed = graph.fixed_tokens if graph is not None else ""
    name = graph.name if graph is not None else "the model"
    one = "remove it, or list only cp 1" if listed else "use cp: 1"
    if not seq_len:
        if fixed:
            return (f"context parallelism splits a token sequence, and {name}'s token count "
                    f"is fixed by {fixed}", one)
        return ("context parallelism splits the sequence, but no seq_len is known",
                "set training.seq_len, or " + ("list only cp 1" if listed else "cp: 1"))
    how = "load-balanced causal context parallelism" if graph is not None and graph.causal \
        else "context parallelism"
    cut = f"Megatron-Core's {how} cuts the sequence into 2*cp chunks"
    good = ", ".join(str(c) for c in cp_degrees_for(seq_len)[:6])
    if fixed:
        rule = (f"{name}'s {seq_len} tokens are fixed by {fixed}, and {seq_len} is not a "
                f"multiple of 2*cp = {2 * cp} ({cut})")
        if good == "1":
            return rule, f"{one} (no cp > 1 splits {seq_len} tokens into 2*cp equal chunks)"
        if listed:
            return rule, f"remove it, or use cp degrees c with {seq_len} a multiple of 2*c: {good}"
        return rule, f"use a cp with {seq_len} a multiple of 2*cp: {good}"
    rule = f"seq_len {seq_len} is not a multiple of 2*cp = {2 * cp} ({cut})"
    if listed:
        return rule, f"remove it, or use cp degrees c with seq_len a multiple of 2*c: {good}"
    return rule, (f"use a cp with seq_len a multiple of 2*cp ({good}), or a seq_len that is a "
                  f"multiple of {2 * cp}")
