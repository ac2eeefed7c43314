"""What the cost model assumed for one case, one sentence each (issue 28,
point 1: "say in outputs what was assumed").

Every figure a plan is priced with either comes from the case (the spec or
the record: the device, its memory and power cap, the NICs, the runtime's
options) or from a documented default of the cost model: the GEMM
efficiency of the device's die and where it comes from (fitted on published
runs of that die, measured by a microbenchmark, or transferred from the fitted
dies: :mod:`autopar_opt.calibration.fit`), the attention
kernel's published efficiency and the fallbacks that found it
(:mod:`autopar_opt.cost.attention`), the NCCL model and its pinned
efficiencies (:mod:`autopar_opt.cost.nccl`), the framework's gradient buckets,
the overlap mechanism (:mod:`autopar_opt.cost.overlap`), the context-parallel
variant and the FSDP resharding rule. :func:`cost_assumptions` lists them for
``plan.json`` (``cost_model.case``), ``autopar estimate`` and the report.
"""

from __future__ import annotations

from autopar_opt.cost import attention
from autopar_opt.cost.chips import chip_of
from autopar_opt.cost.comm import UNKNOWN_GENERATION
from autopar_opt.cost.compute import DEFAULT_HEAD_DIM, DEFAULT_SEQ
from autopar_opt.cost.params import CostParams, default_params, shipped_fit
from autopar_opt.cost.scores import score_rule
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.power_limits import unsourced_minimum_note
from autopar_opt.ir.hardware import (CUBE_MESH_DEVICES, DEFAULT_INTRA_NODE, Cluster,
                                     default_nvlink_mesh)
from autopar_opt.ir.training import (OPTIMIZER_STEP_BYTES, OPTIMIZER_WORDS, Training,
                                     param_state_bytes)
from autopar_opt.ir.window import window_counts, window_share

#: Runtime names whose gradient buckets follow Megatron-Core's rule.
_MCORE = ("megatron-core", "megatron-bridge")


def _device(cluster: Cluster) -> list[str]:
    dev = cluster.device
    out = [f"device {dev.name}" + (f" ({dev.arch}, {dev.form})" if dev.arch and dev.form else "")
           + f": {dev.hbm_gib:.4g} GiB, datasheet peaks"
           + (f" ({dev.source})" if dev.source else "")]
    if dev.capped:
        out.append(f"power cap {dev.power_limit_w:g} W of {dev.tdp_w:g} W rated: sustained clock "
                   f"and peaks x{dev.clock_factor:.3f} ((P_cap/P_rated)^(1/3), exponent not "
                   "measured: ir.hardware.DeviceType.clock_factor)")
    elif dev.power_limit_w and dev.tdp_w:      # stated, and without effect (QA round 10)
        out.append(f"power limit {dev.power_limit_w:g} W at or above the {dev.tdp_w:g} W "
                   "rating: no effect (the part runs at its rated power; nvidia-smi refuses "
                   "a limit above it)")
    if dev.power_limit_w and (note := unsourced_minimum_note(dev.name, dev.tdp_w,
                                                             dev.power_limit_w)):
        out.append(note)      # the range it was checked against has no minimum (QA round 37)
    if not dev.arch:
        out.append(f"architecture of {dev.name} not known: attention priced as "
                   f"{attention.UNKNOWN_ARCH}, NCCL's tuning constants of the "
                   f"{UNKNOWN_GENERATION} generation")
    return out


#: FP8 over 16-bit large-GEMM efficiency measured on H100 (calibration.fit.FP8_OVER_BF16).
_FP8_RATIO_TEXT = "0.867, the FP8/bf16 ratio measured on H100 (benchmarks/kernels)"


def _efficiency_source(device: str, fp8: bool, value: float, shipped: CostParams,
                       fit: tuple[frozenset[str], str]) -> str:
    """Where the large-GEMM efficiency ``value`` of ``device`` comes from, given the
    shipped parameters and the shipped fit's (free parameters, date)."""
    if abs(value - shipped.efficiency_for(device, fp8=fp8)) > 1e-9:
        return "from the spec's cost-model parameters, not the shipped calibration"
    free, fitted_on = fit
    chip = chip_of(device)
    if chip is None:
        return (f"{device} is built on no die of the catalog: the calibrated dies' median "
                "(fitted, or pinned by a sustained GEMM microbenchmark)"
                + (" times " + _FP8_RATIO_TEXT if fp8 else ""))
    if f"{'fp8' if fp8 else 'eff'}:{chip}" in free:
        return f"fitted on published {chip}-die runs{' in FP8' if fp8 else ''} (calibrated.yaml, {fitted_on})"
    from autopar_opt.cost.gemm_kernels import (measured_efficiency,   # numpy: only when asked
                                               sustained_efficiency, sustained_sources)

    dtype = "fp8" if fp8 else "bf16"
    sustained = sustained_efficiency(chip, dtype)
    if sustained is not None and abs(sustained - value) < 1e-6:
        return (f"measured: the {chip}-die GEMM microbenchmark run back to back at the power "
                f"limit ({', '.join(sustained_sources(chip, dtype))} in cost/data/gemm_kernels.yaml), "
                "not fitted")
    measured = measured_efficiency(chip, dtype)
    if measured is not None and abs(measured - value) < 1e-6:
        return (f"measured: the {chip}-die GEMM microbenchmarks (cost/data/gemm_kernels.yaml), "
                "not fitted")
    if fp8:
        return (f"no published FP8 run or FP8 microbenchmark of the {chip} die: its 16-bit "
                f"efficiency times {_FP8_RATIO_TEXT}")
    return (f"no published run or microbenchmark of the {chip} die: the median of the fitted "
            "dies' efficiencies")


def _gemm(cluster: Cluster, training: Training, params: CostParams) -> list[str]:
    """The GEMM efficiencies the case is priced with, and their sources."""
    dev = cluster.device
    kinds = [(False, "16-bit")]
    if training.dtype == "fp8" and "fp8" in dev.peak_tflops:
        kinds.append((True, "FP8"))
    shipped, fit = default_params(), shipped_fit()      # calibrated.yaml read once per call
    parts = []
    for fp8, label in kinds:
        value = params.efficiency_for(dev.name, fp8=fp8)
        parts.append(f"{label} {value:.3f} of the {label} peak "
                     f"({_efficiency_source(dev.name, fp8, value, shipped, fit)})")
    if abs(params.efficiency_half_us - shipped.efficiency_half_us) > 1e-9:
        half_src = "from the spec's cost-model parameters"
    elif "efficiency_half_us" in fit[0]:
        half_src = "fitted on the published runs of every die"
    else:
        half_src = "the cost model's prior"
    out = [f"GEMMs on {dev.name}: large-GEMM efficiency " + "; ".join(parts)
           + f"; each GEMM kernel's efficiency halves at {params.efficiency_half_us:.1f} µs of "
           f"work at peak ({half_src})"]
    if training.dtype == "fp8":
        from autopar_opt.cost.fp8_casts import COPY_BANDWIDTH_FRACTION
        out.append("FP8 casts: Transformer Engine's layout taken (the norm-fused first GEMMs' "
                   "input transposed, every other GEMM input and every output gradient cast "
                   "and transposed: cost/fp8_casts.py), priced as HBM traffic at the copy "
                   f"bandwidth measured on one H200, {COPY_BANDWIDTH_FRACTION:.3f} of the "
                   "datasheet's, for every GPU; the weights' casts (once per iteration, "
                   "cached across micro-batches) are not priced")
    return out


def _attention(graph: LayerGraph, training: Training, arch: str) -> list[str]:
    rt = training.runtime
    kernel = attention.runtime_kernel(rt, arch)
    cores = sorted({(layer.head_dim, layer.attn_causal) for layer in graph.layers
                    if layer.flops_recompute_selective > 0}, key=str)
    if not cores:
        return []
    seq = training.seq_len or DEFAULT_SEQ
    windows = _windows(graph, seq, kernel is not None, rt.cp_comm_type)
    if kernel is None:
        return ["attention core unfused (no fused kernel on this runtime/GPU): two batched "
                "GEMMs at the GEMM efficiency, scores stored; " + score_rule(training)] + windows
    out = []
    for head_dim, causal in cores:
        look = attention.lookup(kernel, arch, True if causal is None else causal,
                                head_dim or DEFAULT_HEAD_DIM, seq)
        mask = "causal" if causal or causal is None else "non-causal"
        line = (f"attention core: {look.kernel} on {look.arch} ({mask}, head dim "
                f"{head_dim or DEFAULT_HEAD_DIM}, {seq:g} tokens per rank at cp=1): "
                f"{look.fwd:.0%} forward, {look.bwd:.0%} backward of the 16-bit peak "
                f"(cost/data/attention_kernels.yaml), measured with {attention.REF_TOKENS:,} tokens "
                f"x {attention.REF_HIDDEN:,} hidden per call; a plan's smaller calls (heads/tp of "
                "its micro-batch) run at the "
                "measured fill ratio (cost/data/attention_fill.yaml, one H200: "
                f"{_fill_source(look.kernel, causal, head_dim)})")
        notes = list(look.notes)
        if not head_dim:
            notes.append(f"head dim not known: {DEFAULT_HEAD_DIM} taken")
        if causal is None:
            notes.append("mask not known: causal taken")
        if not training.seq_len:
            notes.append(f"sequence length not stated: {DEFAULT_SEQ} taken")
        out.append(line + ("; " + "; ".join(notes) if notes else ""))
    if rt.name == "torchtitan":
        out.append(TORCHTITAN_FLEX)
    return out + windows


def _windows(graph: LayerGraph, seq: int, fused: bool, cp_comm_type: str) -> list[str]:
    """One sentence per sliding window of the model: where it comes from, the
    share of the causal core it computes and the kernel efficiency it takes; with
    the ring exchange of context parallelism, how a plan with cp > 1 is priced."""
    windows = graph.attention_windows()
    out = []
    for window, count in window_counts(windows).items():
        share = window_share(seq, window)
        line = (f"sliding-window attention: {window:,} keys per query on {count} of "
                f"{len(windows)} attention layers ({graph.source or 'the model'}), "
                f"{share:.1%} of the causal core's query-key pairs at {seq:,} tokens "
                "(ir/window.py)")
        if fused:
            line += (f"; the fused kernel taken at its measured causal efficiency for "
                     f"{min(seq, window):,} tokens (assumed: no windowed-kernel rows; Mistral "
                     "7B's published 2x at 16k tokens with a 4,096-key window is met within "
                     "5% on A100, cost/compute.py window_length)")
        else:
            line += "; the unfused core computes the whole score matrix and masks it"
        if cp_comm_type == "p2p":
            line += ("; context parallelism (cp > 1) over it is priced with the whole ring "
                     "exchange of K/V and its overlap as for full attention: no catalog "
                     "framework runs ring attention with a window (Transformer Engine refuses "
                     "it; cp_comm_type all_gather or a2a do run)")
        out.append(line)
    return out


#: What the torchtitan runtime assumes of its attention kernel (ir/runtime.py's source).
TORCHTITAN_FLEX = ("torchtitan 0.3 runs its language models' attention with block-causal "
                   "document masks, by default in FlexAttention (sdpa is refused for them); "
                   "the torchtitan export asks for its varlen backend (the flash-attention "
                   "kernel priced above) for Llama 3 and Qwen3 without context parallelism, "
                   "and keeps FlexAttention otherwise, priced as the kernel above: no "
                   "FlexAttention measurement is in cost/data/attention_kernels.yaml; whole "
                   "causal sequences are priced, and documents shorter than the sequence "
                   "would do less attention work")


def _fill_source(kernel: str, causal: bool | None, head_dim: int) -> str:
    """Which measured fill curves a call takes (:func:`attention.fill_curve_for`)."""
    (kern, masked, dim), _ = attention.fill_curve_for(kernel, True if causal is None else causal,
                                                       head_dim or DEFAULT_HEAD_DIM)
    return f"{kern}, {'causal' if masked else 'non-causal'}, head dim {dim}"


def _wiring(cluster: Cluster) -> list[str]:
    """How the node's GPUs share their NVLinks, where it is not the plain NVSwitch node
    of 8-GPU boards: a point-to-point board (stated, or the default for 3-4 SXM GPUs per
    node), or an NVSwitch node stated where that default would have been a board."""
    board = cluster.nvlink_board
    if cluster.nvlink_mesh:
        why = ("stated: intra_node_topology: mesh or nvlink_board_gpus" if cluster.nvlink_stated else
               f"not stated: the default for {board} SXM GPUs per node, as HGX 4-GPU boards; "
               "intra_node_topology: switch states an NVSwitch node")
        return [f"intra-node: NVLink point to point, no NVSwitch, a {board}-GPU board ({why}): a "
                f"group of m GPUs of a node gets (m-1)/{board - 1} of a GPU's NVLink bandwidth, "
                f"a pair {cluster.intra_share(2):.2f}"]
    if cluster.nvlink_stated and default_nvlink_mesh(cluster.device, cluster.gpus_per_node):
        return ["intra-node: NVSwitch (stated: intra_node_topology: switch), every group of a "
                "node at a GPU's full NVLink bandwidth"]
    if (not cluster.nvlink_stated and cluster.device.name in CUBE_MESH_DEVICES
            and 4 < cluster.gpus_per_node <= 8):
        # QA round 12: an 8-GPU V100 node (DGX-1) was priced as NVSwitch without a word
        return [f"intra-node: priced as NVSwitch, every group of a node at a GPU's full NVLink "
                f"bandwidth (not stated); {cluster.gpus_per_node}-GPU {cluster.device.name} "
                "SXM2 nodes (DGX-1, HGX-1) have no NVSwitch: a hybrid cube-mesh where a pair "
                "of GPUs shares 1 or 2 of a GPU's 6 NVLinks, so groups of fewer than 8 GPUs "
                "run slower than priced; intra_node_topology: mesh prices a point-to-point "
                "board (a pair at 1/7), switch states an NVSwitch node"]
    return []


def _intra_link(cluster: Cluster) -> list[str]:
    """The intra-node tier priced, always (QA round 10: the NVLink tier, or a custom
    device's 300 GB/s fallback, was never said), with where it comes from."""
    if cluster.gpus_per_node <= 1:
        return []
    tier = cluster.intra_node
    default = DEFAULT_INTRA_NODE.get(cluster.device.name)
    if default is None:
        source = ("not stated, and the device is not in the catalog: a generic fallback; "
                  "state cluster.intra_node")
    elif (tier.bandwidth_gb_per_s, tier.latency_us) == (default.bandwidth_gb_per_s,
                                                         default.latency_us):
        source = f"the {cluster.device.name}'s catalog link, not stated"
    else:
        source = "stated"
    return [f"intra-node link: {tier.name}, {tier.bandwidth_gb_per_s:g} GB/s per GPU and direction, "
            f"{tier.latency_us:g} µs per hop ({source})"]


def _communication(cluster: Cluster, training: Training, params: CostParams) -> list[str]:
    rt = training.runtime
    nics = (f"{cluster.nics_per_node} NICs per node (stated)" if cluster.nics_per_node
            else f"one NIC per GPU ({cluster.gpus_per_node} per node; not stated)")
    shipped = default_params()
    # the values priced, not the shipped ones (QA round 10: a spec's 0.05 was priced and
    # 0.80 printed)
    changed = (abs(params.comm_efficiency - shipped.comm_efficiency) > 1e-12
               or abs(params.inter_comm_efficiency - shipped.inter_comm_efficiency) > 1e-12)
    source = ("from the spec's cost-model parameters, not the pinned nccl-tests values"
              if changed else "nccl-tests, pinned: cost/nccl.py")
    out = ["collectives: NCCL's own cost model (ring and tree, LL/LL128/Simple, tuning.cc "
           f"latencies per hop), bus bandwidth at {params.comm_efficiency:.2f} of NVLink and "
           f"{params.inter_comm_efficiency:.2f} of the NIC line rate ({source})"]
    out += _intra_link(cluster) + _wiring(cluster)
    if cluster.nodes > 1:
        fabric = ("one non-blocking fabric (not stated)" if cluster.nodes_per_leaf is None
                  else f"{cluster.nodes_per_leaf} nodes per leaf, {cluster.oversubscription:g}:1 "
                       "above (stated; groups taken on consecutive nodes)")
        out.append(f"inter-node: {cluster.inter_node.bandwidth_gb_per_s:g} GB/s per NIC, {nics}; "
                   f"{fabric}; a group uses only its own members' NICs; NVLink SHARP/SHARP "
                   "in-network reductions not modelled")
    if rt.name in _MCORE:
        bucket = "Megatron-Core buckets of max(40M, 1M x dp) parameters"
    elif rt.name.startswith("deepspeed"):
        bucket = "DeepSpeed reduce_bucket_size 5e8 elements"
    else:
        bucket = "PyTorch DDP 25 MiB buckets (FSDP: one unit per layer)"
    out.append(f"gradient reduction in {bucket}, each bucket paying the collective latency")
    if rt.tp_comm_overlap:
        mech = {"te_userbuffers": "Transformer Engine userbuffers (ring-exchange, 4-split "
                                  "pipeline, bulk; 16 SMs to communication)",
                "async_tp": "PyTorch async TP (per-rank micro-pipelined collective matmuls)"}
        out.append(f"tensor-parallel overlap: {mech.get(rt.tp_overlap, rt.tp_overlap)}, exposed "
                   "time computed per collective-GEMM pair (cost/overlap.py)")
    else:
        out.append("tensor-parallel collectives not overlapped (runtime)")
    cp = {"p2p": "ring K/V exchange per step behind the step's attention, log-sum-exp merges "
                 "at HBM bandwidth", "all_gather": "K/V all-gathered (and the gradients "
                 "reduce-scattered) before the local attention, exposed", "a2a": "Ulysses "
          "all-to-alls of Q, K, V and the output (and their gradients) around the attention, "
          "exposed; the kernel runs the whole sequence on heads/(tp·cp) heads"}
    out.append(f"context parallelism (if used): {rt.cp_comm_type}: {cp.get(rt.cp_comm_type, '')}")
    policy = {"default": "the framework's default" + (
        " (torchtitan: kept under pipelining)" if rt.name == "torchtitan" else " (always)"),
        "always": "always", "never": "never"}[rt.reshard_after_forward]
    out.append(f"ZeRO-3/FSDP reshards after forward: {policy}; sharded over dp x cp, or (a "
               "strategy labelled shardN, hybrid sharding) over N ranks of one node with the "
               "gradient shard all-reduced across the replicas")
    if rt.fsdp2_copies:
        out.append("FSDP2 (fully_shard): each gathered unit copied out into the parameters and "
                   "each gradient copied into the reduce-scatter buffer (or kept unsharded in "
                   "the reduce dtype with gradient sync off) on the compute stream, priced as "
                   "HBM traffic at the measured copy bandwidth (cost/fsdp_copies.py)")
    elif rt.zero2_forward_gather:
        out.append("PyTorch FSDP taken as the FlatParameter FSDP (FSDP1: it gathers into the flat "
                   "parameter in place, no copies on the compute stream); for FSDP2 (fully_shard) "
                   "set training.runtime_options.fsdp2_copies: true")
    return out


def _optimizer(training: Training, params: CostParams) -> list[str]:
    """The optimizer's state bytes and step traffic (the spec's ``training.optimizer``,
    ``adam_mixed`` unless stated; under ``autocast`` the fp32 parameters' own)."""
    w, g, o = param_state_bytes(training)
    what = ("fp32 weights and gradients under torch.autocast, the optimizer's moments"
            if training.autocast else OPTIMIZER_WORDS[training.optimizer])
    step = params.optimizer_step_bytes(training.optimizer)
    unfused = "" if training.runtime.fused_optimizer else (
        f", times {params.unfused_optimizer_factor:g} for the runtime's unfused (per-tensor) "
        f"optimizer: {step * params.unfused_optimizer_factor:.3g}")
    said = "" if training.optimizer_stated else (
        f" (training.optimizer not stated: the default for dtype {training.dtype})")
    return [f"optimizer {training.optimizer}{said}: {w:g} + {g:g} + {o:g} bytes per parameter of "
            f"weights, gradients and optimizer state before sharding ({what}), plus the "
            f"runtime's fp32 gradient buffer where it keeps one; the step moves "
            f"{OPTIMIZER_STEP_BYTES[training.optimizer]:g} bytes per local parameter, priced "
            f"as {step:.3g} at datasheet HBM bandwidth (fused Adam's measured figure, scaled by "
            f"the update's traffic){unfused}"]


#: Runtimes of PyTorch stacks that users commonly run under ``torch.compile``.
_COMPILABLE = ("torchtitan", "pytorch-fsdp", "pytorch-ddp")


def _elementwise(training: Training, params: CostParams) -> list[str]:
    """The element-wise traffic and, on PyTorch stacks, that torch.compile is not priced
    (docs/DESIGN.md, stated limitation)."""
    line = (f"element-wise kernels (norms, activations, residual adds, RoPE): "
            f"{params.elementwise_passes:.3g} HBM passes over each layer's stored activations "
            "(fitted across stacks)")
    if training.runtime.name in _COMPILABLE:
        line += ("; torch.compile's fusions are not priced (compiled runs run faster than "
                 "priced: docs/DESIGN.md, stated limitation)")
    return [line]


def _moe_load(graph: LayerGraph) -> list[str]:
    """The routing load the MoE layers are priced with (``Layer.expert_load``: the
    busiest expert-parallel rank's tokens over the average, from ``model.load_imbalance``
    or ``model.capacity_factor``), said because it moves the expert GEMMs and the
    all-to-all in proportion."""
    loads = sorted({layer.expert_load for layer in graph.layers if layer.is_moe})
    if not loads:
        return []
    shown = "/".join(f"{x:g}" for x in loads)
    if loads == [1.0]:
        return [f"{graph.name}: MoE routing priced perfectly balanced (expert load 1.0: every "
                "expert-parallel rank gets the average number of tokens, dropless); a measured "
                "busiest/average load goes in model.load_imbalance, a padded capacity in "
                "model.capacity_factor"]
    return [f"{graph.name}: MoE routing priced with the busiest expert-parallel rank at "
            f"{shown}x the average load (model.load_imbalance, or model.capacity_factor when "
            "padded): its expert GEMMs, activations and all-to-all scale with it"]


def cost_assumptions(graph: LayerGraph, cluster: Cluster, training: Training,
                     params: CostParams | None = None) -> list[str]:
    """The case's assumptions, one sentence each (module docstring), under
    ``params`` (the shipped calibration when None)."""
    arch = cluster.device.arch or attention.UNKNOWN_ARCH
    params = default_params() if params is None else params
    unpriced = graph.arch.unpriced if graph.arch is not None else ()
    dropout = graph.arch.dropout if graph.arch is not None else None
    measured = sum(1 for layer in graph.layers if layer.measured)
    said = ([f"model.measured: {measured} layer(s) priced from the spec's measured times, "
             f"taken as measured on this cluster's {cluster.device.name} (the table names no "
             "device)"] if measured else [])       # QA round 10: not said
    return (list(graph.assumed) + said + _moe_load(graph)
            + _device(cluster) + _gemm(cluster, training, params) + _optimizer(training, params)
            + _elementwise(training, params)
            + _attention(graph, training, arch) + _communication(cluster, training, params)
            + ([f"{graph.name}: not priced (small element-wise work): {'; '.join(unpriced)}"]
               if unpriced else [])
            + ([f"{graph.name}: dropout {dropout[0]:g} (hidden) and {dropout[1]:g} (attention) "
                "as its config trains it: " + ("dropout masks kept and priced"
                                               if any(dropout) else "no dropout masks kept")
                + "; the Megatron exports state both (Megatron-LM's defaults are 0.1)"]
               if dropout is not None else []))
