"""One truth for a spec's attention core: the kernel its runtime runs on its GPU.

A zoo or Hugging Face decoder is built with FlashAttention's activations (no
``5·a·s²`` score matrix kept) unless its section says otherwise, while the cost
model prices the attention core the runtime runs on the cluster's GPU
(:func:`autopar_opt.cost.attention.kernel_for`): unfused under ``megatron-lm``
and ``deepspeed`` by default, and on a GPU without fused kernels (Volta). The
two disagreed (QA round 10): the compute priced the unfused core and the
assumptions said "scores stored" while the memory left the scores out (8 GiB
per device for Llama-3.1-8B at 4k tokens, tp 8), so a plan could be called
fitting that would not; and a stated ``flash_attention`` that the runtime
contradicted was dropped without a word.

Here the graph follows the kernel. Where the runtime runs no fused kernel on the
GPU, the model is rebuilt with its score activations, and the runtime's
``flash_attention`` is off (what :mod:`autopar_opt.cost.memory` reads), so
compute, memory and the assumptions agree. A stated ``flash_attention`` (the
Hugging Face section's key, a zoo override) that the runtime contradicts is
refused, with the runtime option that would make it true.

A fleet's groups may differ (a flash runtime on A100 and V100 groups): the
model is then built with its scores and each stage's context keeps them only on
a GPU that runs no fused kernel (:class:`autopar_opt.cost.context.StageContext`);
a stated ``flash_attention`` is true of some groups only and is refused.
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.core.errors import ProblemList
from autopar_opt.cost import attention
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.training import Training
from autopar_opt.spec.schema import HfModelSpec, ZooModelSpec


def runs_fused(training: Training, cluster: Cluster) -> bool:
    """Whether the runtime runs a fused attention kernel on the cluster's GPU."""
    rt = training.runtime
    arch = cluster.device.arch or attention.UNKNOWN_ARCH
    return attention.runtime_kernel(rt, arch) is not None


def stated_flash(section) -> bool | None:
    """The model section's own ``flash_attention`` (None when it does not state it)."""
    if isinstance(section, HfModelSpec) and "flash_attention" in section.model_fields_set:
        return bool(section.flash_attention)
    if isinstance(section, ZooModelSpec) and "flash_attention" in section.overrides:
        value = section.overrides["flash_attention"]
        return value if isinstance(value, bool) else None
    return None


def _stated_key(section) -> str:
    """Where a model section states ``flash_attention`` (:func:`stated_flash`)."""
    return ("model.flash_attention" if isinstance(section, HfModelSpec)
            else "model.overrides.flash_attention")


def scores_left_out(graph: LayerGraph) -> bool:
    """Whether ``graph`` has an attention core built without its score activations."""
    return any(layer.flops_recompute_selective > 0 and layer.act_attn_bytes <= 0
               for layer in graph.layers)


def reconcile(section, graph: LayerGraph, training: Training, cluster: Cluster,
              out: ProblemList) -> tuple[bool, Training]:
    """(whether to rebuild the graph with its score activations, the training whose
    runtime states the kernel actually run). Records a refusal in ``out`` where a stated
    ``flash_attention`` contradicts the runtime."""
    fused = runs_fused(training, cluster)
    stated = stated_flash(section)
    rt = training.runtime
    key = _stated_key(section)
    if stated is True and not fused:
        why = (f"runtime {rt.name} runs no fused attention kernel" if not rt.flash_attention
               else f"{cluster.device.name} has no fused attention kernel")
        fix = ("set training.runtime_options: {flash_attention: true} (Megatron-LM "
               "--use-flash-attn, DeepSpeed's flash kernels), or drop the key"
               if not rt.flash_attention else "drop the key (the GPU runs no fused kernel)")
        out.add(key, True, f"the model is said to keep no score matrix, but {why}: the "
                "attention core is priced unfused, which keeps its scores", fix)
        return False, training
    if stated is False and fused:
        out.add(key, False, f"the model is said to keep its score matrix, but runtime {rt.name} "
                "runs a fused attention kernel on this GPU, which keeps none",
                "set training.runtime_options: {flash_attention: false} for unfused attention "
                "(Megatron-Core --attention-backend unfused), or drop the key")
        return False, training
    if fused:
        return False, training
    if rt.flash_attention:      # a flash runtime on a GPU without the kernel: none runs
        training = replace(training, runtime=replace(rt, flash_attention=False))
    return stated is None and scores_left_out(graph), training


def reconcile_fleet(section, graph: LayerGraph, training: Training, fleet: Fleet,
                    out: ProblemList) -> tuple[bool, Training]:
    """:func:`reconcile` over a fleet's groups: as for one cluster when every group's
    GPU agrees (all fused or none); otherwise the graph is rebuilt with its scores
    (unless the section states ``flash_attention``, which is then refused: it holds on
    some groups only) and the runtime is kept, each stage pricing its own GPU's kernel."""
    groups = list(fleet.groups)
    fused = [runs_fused(training, g) for g in groups]
    if all(fused) or not any(fused):
        return reconcile(section, graph, training, groups[0], out)
    stated = stated_flash(section)
    if stated is not None:
        key = _stated_key(section)
        yes = sorted({g.device.name for g, f in zip(groups, fused) if f})
        no = sorted({g.device.name for g, f in zip(groups, fused) if not f})
        out.add(key, stated, f"the fleet's groups run different attention kernels under runtime "
                f"{training.runtime.name} ({', '.join(yes)}: fused, keeps no score matrix; "
                f"{', '.join(no)}: unfused, keeps it), so the key is true of some groups only",
                "drop the key: each group's memory then follows its own GPU's kernel")
        return False, training
    return scores_left_out(graph), training
