"""The regime of a priced plan: what makes two training runs comparable.

Issue 28 groups the cost model's out-of-sample errors by regime (framework
family, context length, sharding at scale, precision, Mixture-of-Experts, GPU
generation): the model errs differently in each, so the error bar of a
prediction is taken from published runs of the same regime
(:mod:`autopar_opt.cost.interval`). :func:`regime_of` computes the regime
from the objects the cost model prices, the same function for a published run
(calibration) and for a user's plan (``estimate``, ``solve``, capacity), so
"comparable" means one thing everywhere.

Boundaries (the issue's): long context is a sequence of at least
:data:`LONG_CONTEXT_TOKENS` tokens; sharding at scale is ZeRO-3/FSDP on a job
of at least :data:`SHARDED_AT_SCALE_GPUS` GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training

#: Sequence length from which a run is long-context (issue 28: "context >= 32k").
LONG_CONTEXT_TOKENS = 32_768
#: GPUs from which ZeRO-3/FSDP counts as sharding at scale (issue 28: ">= 256 GPUs").
SHARDED_AT_SCALE_GPUS = 256

#: Runtime name -> framework family: the runtimes of :data:`autopar_opt.ir.runtime.RUNTIMES`
#: and the variants the calibration's readers name after the stack a published
#: run used (``autopar_opt.calibration.reading.stacks``: NeMo, FairScale FSDP,
#: DeepSpeed ZeRO without Megatron, Colossal-AI).
FRAMEWORK_FAMILY = {
    "megatron-lm": "megatron", "megatron-core": "megatron", "megatron-bridge": "megatron",
    "nemo": "megatron", "nemo-megatron": "megatron",
    "deepspeed": "deepspeed", "deepspeed-zero": "deepspeed",
    "pytorch-fsdp": "fsdp", "torchtitan": "fsdp", "fairscale-fsdp": "fsdp",
    "pytorch-ddp": "pytorch", "colossalai": "pytorch",
}
#: GPU generation of a catalog device name (first match wins).
_GENERATIONS = (("blackwell", re.compile(r"^g?b\d{3}", re.I)),
                ("hopper", re.compile(r"^g?h\d{2,3}", re.I)),
                ("ampere", re.compile(r"^a(100|800|40|30|10)", re.I)),
                ("volta", re.compile(r"^v100", re.I)))

#: The regime labels, in the order a search for comparable runs gives them up
#: when too few runs share all of them (:func:`autopar_opt.cost.interval.comparable`):
#: the GPU generation first, the risky regimes (FP8, MoE, sharding at scale,
#: long context) last, and last of all whether the part ran under a power limit below its
#: rated power: the capped clock is priced by a formula no uncapped run measures
#: (:attr:`~autopar_opt.ir.hardware.DeviceType.clock_factor`), so a capped run's error says
#: nothing of an uncapped plan's and is kept out of its interval as long as any label is
#: kept (session 37: the first capped run, CARAML's GH200 at 680 W, 62-78% off out of
#: sample, had widened every Hopper Megatron interval, 4,096 H100's from 66 to 85 days).
LABELS = ("generation", "framework", "fp8", "moe", "sharded_at_scale", "long_context",
          "power_limited")
#: A label's value for a run of a residual file written before the label existed (every
#: such run ran at its part's rated power).
LABEL_DEFAULTS = {"power_limited": "false"}


def generation(device_name: str) -> str:
    """``volta`` / ``ampere`` / ``hopper`` / ``blackwell`` of a device name, else ``other``."""
    for name, pattern in _GENERATIONS:
        if pattern.search(device_name):
            return name
    return "other"


@dataclass(frozen=True)
class Regime:
    """The seven regime labels of a priced plan (module docstring)."""

    framework: str
    long_context: bool
    sharded_at_scale: bool
    fp8: bool
    moe: bool
    generation: str
    #: a stated power limit below the part's rated power
    power_limited: bool = False

    def labels(self) -> dict[str, str]:
        """Label -> value as text (the keys of :data:`LABELS`)."""
        return {"framework": self.framework, "long_context": str(self.long_context).lower(),
                "sharded_at_scale": str(self.sharded_at_scale).lower(),
                "fp8": str(self.fp8).lower(), "moe": str(self.moe).lower(),
                "generation": self.generation, "power_limited": str(self.power_limited).lower()}

    def describe(self, keys: tuple[str, ...] = LABELS) -> str:
        """Short words for the given labels, e.g. ``megatron, hopper, long context``."""
        words = []
        for key in LABELS:
            if key not in keys:
                continue
            value = getattr(self, key)
            if key == "power_limited" and not value:
                continue            # rated power is every run's but one: said only when capped
            if isinstance(value, bool):
                if value:
                    words.append({"long_context": "long context", "fp8": "FP8", "moe": "MoE",
                                  "sharded_at_scale": "ZeRO-3/FSDP at scale",
                                  "power_limited": "power-limited"}[key])
                else:
                    words.append({"long_context": "context < 32k", "fp8": "16-bit",
                                  "moe": "dense",
                                  "sharded_at_scale": "no ZeRO-3/FSDP at scale"}[key])
            else:
                words.append(value)
        return ", ".join(words)


def _strategies(plan: Plan | None, strategy: Strategy | None) -> list[Strategy]:
    if plan is not None:
        return [s for st in plan.stages for s in st.strategies]
    return [strategy] if strategy is not None else []


def regime_of(graph: LayerGraph, cluster: Cluster, training: Training, plan: Plan | None,
              strategy: Strategy | None = None, devices: int | None = None) -> Regime:
    """The regime of ``plan`` (or, for a per-layer measurement, of ``strategy``)
    for ``graph`` on ``cluster`` trained with ``training``; ``devices``: the GPUs the
    plan runs on when not the cluster's (a fleet plan's groups together)."""
    runtime = training.runtime.name
    strategies = _strategies(plan, strategy)
    sharded = any(s.zero == 3 for s in strategies)
    return Regime(
        framework=FRAMEWORK_FAMILY.get(runtime, runtime),
        long_context=(training.seq_len or 0) >= LONG_CONTEXT_TOKENS,
        sharded_at_scale=sharded and (devices or cluster.num_devices) >= SHARDED_AT_SCALE_GPUS,
        fp8=training.dtype == "fp8",
        moe=any(layer.is_moe for layer in graph.layers),
        generation=generation(cluster.device.name),
        power_limited=cluster.device.capped)
