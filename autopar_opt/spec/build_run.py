"""Build the cluster, training, search space, solver options and cost parameters.

Each builder turns one validated section into the core object and records
cross-field problems (a dtype the device has no peak for, degrees that do not
divide the device count, HiGHS asked for an MIQP, ...) with their fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from autopar_opt.cost.params import CostParams, default_params, params_body
from autopar_opt.solvers.registry import backend_names
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import DEVICE_CATALOG, Cluster, DeviceType, LinkTier, make_cluster
from autopar_opt.core import limits
from autopar_opt.core.errors import ProblemList, SpecError, SpecProblem, did_you_mean
from autopar_opt.spec.schema import (CostModelSection, ExplicitClusterSpec, LinkSpec, SearchSection,
                                     SolverSection, TrainingSection, ZooClusterSpec)
from autopar_opt.spec.cp_rule import cp_refusal
from autopar_opt.spec.power_limit import apply_power_limit
from autopar_opt.ir.strategies import divisors, tp_degree_ok
from autopar_opt.ir.runtime import CAPABILITIES, CHOICES, RUNTIMES, Runtime, runtime_named
from autopar_opt.ir.target import (TE_RING_WINDOW, TORCHTITAN_VERSIONS, Target,
                                   framework_model_problem, model_problem, pricing_notice,
                                   target_for_runtime)
from autopar_opt.ir.training import (AUTOCAST_DTYPES, BF16_WEIGHT_DTYPES, FP32_DTYPES, FP32_OPTIMIZERS,
                                  Recompute, Schedule, SearchSpace, Training, autocast_problem,
                                  SIXTEEN_BIT_OPTIMIZERS)


@dataclass(frozen=True)
class SolverOptions:
    """Which backend solves, its limits, and the formulation (``auto`` lets the search pick)."""

    name: str = "highs"
    time_limit_s: float = 60.0
    rel_gap: float = 1e-3
    form: str = "auto"


def _link(spec: LinkSpec | None, default_name: str) -> LinkTier | None:
    if spec is None:
        return None
    return LinkTier(spec.name or default_name, spec.bandwidth_gb_per_s, spec.latency_us)


def build_cluster(section: ZooClusterSpec | ExplicitClusterSpec, out: ProblemList) -> Cluster | None:
    """The cluster, from the zoo or from explicit nodes/device/links."""
    if isinstance(section, ZooClusterSpec):
        from autopar_opt.model_zoo import registry

        names = registry.cluster_names()
        if section.zoo not in names:
            out.add("cluster.zoo", section.zoo, "unknown zoo cluster",
                    f"use one of: {', '.join(names)}{did_you_mean(section.zoo, names)}")
            return None
        return registry.get_cluster(section.zoo)
    device = section.device
    if isinstance(device, str):
        if device not in DEVICE_CATALOG:
            out.add("cluster.device", device, "unknown catalog device",
                    f"use one of: {', '.join(DEVICE_CATALOG)}{did_you_mean(device, DEVICE_CATALOG)}"
                    ", or give {name, peak_tflops, hbm_gib, hbm_gb_per_s}")
            return None
        dev: DeviceType = DEVICE_CATALOG[device]
    else:
        if device.name in DEVICE_CATALOG:
            # the catalog's calibration and links are keyed by name: they would price this
            # part while the output called it unknown (QA round 10)
            out.add("cluster.device.name", device.name, "is the name of a catalog device; a "
                    "device described in the spec needs a name of its own",
                    f"rename it (e.g. my-{device.name.lower()}), or write device: "
                    f"{device.name} for the catalog part")
            return None
        dev = DeviceType(device.name, dict(device.peak_tflops), device.hbm_gib, device.hbm_gb_per_s,
                         source="spec file")
    if section.nodes * section.gpus_per_node > limits.MAX_DEVICES:
        out.add("cluster.nodes", section.nodes, f"{section.nodes} nodes x {section.gpus_per_node} "
                f"GPUs = {section.nodes * section.gpus_per_node:,} devices exceed the limit of "
                f"{limits.MAX_DEVICES:,} devices", "use fewer nodes or GPUs per node")
        return None
    if section.device_memory_gib is not None:
        dev = replace(dev, hbm_gib=float(section.device_memory_gib),
                      memory_gb=float(section.device_memory_gib))
    if section.power_limit_w is not None:
        capped = apply_power_limit(dev, section.power_limit_w, "cluster.power_limit_w", out)
        if capped is None:
            return None
        dev = capped
    cluster = make_cluster(section.name, section.nodes, section.gpus_per_node, dev,
                           _link(section.intra_node, "intra"), _link(section.inter_node, "inter"),
                           source="spec file", nics_per_node=section.nics_per_node,
                           nodes_per_leaf=section.nodes_per_leaf,
                           oversubscription=float(section.oversubscription),
                           nvlink_mesh=stated_mesh(section.intra_node_topology, section.nvlink_board_gpus),
                           board_gpus=section.nvlink_board_gpus)
    if not topology_problems("cluster", section.intra_node_topology, section.nvlink_board_gpus,
                             cluster, out):
        return None
    return cluster


def topology_problems(where: str, topology: str | None, board: int | None, cluster: Cluster,
                      out: ProblemList) -> bool:
    """Whether a stated ``intra_node_topology: mesh`` or ``nvlink_board_gpus`` describes
    ``cluster`` (False, with the problem recorded under ``where``, when not): a
    point-to-point board splits NVLinks between three or more GPUs, so a board on a PCIe
    link or of 1-2 GPUs would be priced as something it is not (PCIe) or silently change
    nothing (a pair has all its links); a board holds at least the node's GPUs and is not
    an NVSwitch node."""
    if board is not None:
        key = f"{where}.nvlink_board_gpus"
        if board < cluster.gpus_per_node:
            out.add(key, board, f"a board of {board} GPUs cannot hold the node's "
                    f"{cluster.gpus_per_node}", f"use at least {cluster.gpus_per_node}, or drop it")
            return False
        if topology == "switch":
            out.add(key, board, "a point-to-point board, with intra_node_topology: switch (NVSwitch)",
                    "drop one of the two")
            return False
    if topology != "mesh" and board is None:
        return True
    key = f"{where}.{'intra_node_topology' if board is None else 'nvlink_board_gpus'}"
    value = topology if board is None else board
    tier = cluster.intra_node
    if tier.name.lower().startswith("pcie"):
        out.add(key, value, f"a point-to-point board splits NVLinks between its GPUs; device "
                f"{cluster.device.name}'s intra-node link is {tier.name} "
                f"({tier.bandwidth_gb_per_s:g} GB/s), not NVLink",
                "drop it (PCIe is priced as its own link)")
        return False
    if max(cluster.gpus_per_node, board or 0) <= 2:
        out.add(key, value, f"a node of {cluster.gpus_per_node} GPU(s) has no NVLinks to split: "
                "a pair already has all of them, so a board of 2 changes nothing",
                "drop it, or state the whole board: nvlink_board_gpus: 4 for 2 GPUs of a "
                "4-GPU HGX board")
        return False
    return True


def stated_mesh(topology: str | None, board: int | None = None) -> bool | None:
    """``cluster.intra_node_topology`` (and ``nvlink_board_gpus``, which implies a board) as
    :func:`~autopar_opt.ir.hardware.make_cluster`'s ``nvlink_mesh``: None (not stated) lets
    the device and node size decide."""
    if board is not None and topology != "switch":
        return True
    return None if topology is None else topology == "mesh"


def build_training(section: TrainingSection, graph: LayerGraph | None, cluster: Cluster | None,
                   out: ProblemList, check_device: bool = True) -> Training:
    """Training settings; ``seq_len`` defaults to the model's own. ``check_device=False``: the
    caller checks the dtype and the memory reserve against the device itself (a fleet of
    several groups, :mod:`autopar_opt.spec.build_fleet`, naming the group)."""
    seq_len = section.seq_len if section.seq_len is not None else (graph.seq_len if graph else None)
    if cluster is not None:
        peaks = cluster.device.peak_tflops
        if check_device and section.dtype not in peaks:
            # a default the spec did not write is said to be one
            stated = "dtype" in section.model_fields_set
            out.add("training.dtype", section.dtype,
                    f"device {cluster.device.name} has no {section.dtype} peak"
                    + ("" if stated else " (training.dtype not stated: its default is bf16)"),
                    f"{'use' if stated else 'state'} one of its dtypes: {', '.join(peaks)}"
                    + ("" if stated else f", e.g. training: {{dtype: {next(iter(peaks))}}}"))
        if check_device and section.memory_reserve_gib >= cluster.device.hbm_gib:
            out.add("training.memory_reserve_gib", section.memory_reserve_gib,
                    f"reserve is not below the {cluster.device.hbm_gib:.4g} GiB of device memory",
                    "expected a few GiB, e.g. 2")
    if graph is not None and section.seq_len and graph.seq_len and graph.seq_len != section.seq_len:
        out.add("training.seq_len", section.seq_len,
                f"differs from the model's seq_len ({graph.seq_len})",
                f"drop training.seq_len or set it to {graph.seq_len}")
    why = autocast_problem(section.dtype, section.autocast, section.optimizer)
    if why:
        out.add("training.autocast", section.autocast, why,
                f"set training.dtype to {' or '.join(AUTOCAST_DTYPES)}, or drop autocast "
                "(16-bit weights with an fp32 master copy: the default)"
                if section.optimizer not in SIXTEEN_BIT_OPTIMIZERS else
                "drop autocast, or use optimizer adam_mixed (16-bit weights with an fp32 "
                "master copy) or adam_fp32")
    # whether the device computes in a dtype a bf16-weight optimizer trains in (a V100 does not)
    has_bf16 = cluster is None or any(d in cluster.device.peak_tflops for d in BF16_WEIGHT_DTYPES)
    if section.optimizer in SIXTEEN_BIT_OPTIMIZERS and section.dtype not in BF16_WEIGHT_DTYPES:
        # named at the dtype: a capacity sweep's dtype axis is then the value it points at;
        # on a device with neither dtype (a V100) the fix offers the optimizer only; the
        # text is the same for every device that has one (a fleet lists it once)
        other = ("adam_fp32 (fp32 weights and moments) or adam_mixed" if section.dtype == "fp32"
                 else "adam_mixed")
        out.add("training.dtype", section.dtype,
                f"training.optimizer {section.optimizer} keeps bf16 weights and moments, which "
                f"dtype {section.dtype} does not compute in",
                # every device with an fp8 peak has a bf16 one: bf16 is the dtype to name
                (f"set training.dtype: bf16, or use training.optimizer: {other}"
                 if has_bf16 else f"use training.optimizer: {other} (device {cluster.device.name} "
                 f"has no {' or '.join(BF16_WEIGHT_DTYPES)} peak)"))
    elif section.optimizer in SIXTEEN_BIT_OPTIMIZERS and not has_bf16:
        # the dtype is refused above for the device; said here too, so that following that
        # fix (fp16) does not lead to this refusal next
        out.add("training.optimizer", section.optimizer,
                f"keeps bf16 weights and moments, and device {cluster.device.name} has no "
                f"{' or '.join(BF16_WEIGHT_DTYPES)} peak", "use training.optimizer: adam_mixed")
    optimizer, stated = section.optimizer, "optimizer" in section.model_fields_set
    if section.dtype in FP32_DTYPES and optimizer in FP32_OPTIMIZERS and not section.autocast:
        if stated:
            # named at the dtype, as the bf16 optimizer's check: a sweep's dtype axis is the value
            out.add("training.dtype", section.dtype,
                    f"training.optimizer {optimizer} keeps 16-bit weights and gradients beside an "
                    f"fp32 master copy, which dtype {section.dtype} training does not have",
                    f"use training.optimizer: {FP32_OPTIMIZERS[optimizer]} (fp32 weights and "
                    "gradients), or a 16-bit dtype")
        optimizer = FP32_OPTIMIZERS[optimizer]      # not stated: fp32 training's own
    return Training(section.global_batch_size, seq_len, section.dtype, optimizer,
                    section.memory_reserve_gib, _runtime(section, out),
                    activation_offload=section.activation_offload, autocast=section.autocast,
                    optimizer_stated=stated)


def _runtime(section: TrainingSection, out: ProblemList) -> Runtime:
    """``training.runtime`` with its ``runtime_options`` (see autopar_opt.ir.runtime)."""
    key = section.runtime.strip().lower().replace("_", "-")
    if key not in RUNTIMES:
        out.add("training.runtime", section.runtime, "unknown runtime",
                f"use one of: {', '.join(RUNTIMES)}{did_you_mean(section.runtime, list(RUNTIMES))}")
        return RUNTIMES["megatron-core"]
    bad = [k for k in section.runtime_options if k not in CAPABILITIES]
    for k in bad:
        out.add(f"training.runtime_options.{k}", k, "unknown runtime capability",
                f"use one of: {', '.join(CAPABILITIES)}{did_you_mean(k, list(CAPABILITIES))}")
    good = {}
    for k, v in section.runtime_options.items():
        if k in bad:
            continue
        if k in CHOICES and v not in CHOICES[k]:
            out.add(f"training.runtime_options.{k}", v, f"not a value of {k}",
                    f"use one of: {', '.join(CHOICES[k])}")
        elif k not in CHOICES and not isinstance(v, bool):
            out.add(f"training.runtime_options.{k}", v, "must be true or false",
                    "write true or false")
        else:
            good[k] = v
    return runtime_named(key, **good)


def _check_divides(key: str, values: list[int] | None, total: int, what: str,
                   out: ProblemList) -> None:
    for i, v in enumerate(values or []):
        if total % v:
            out.add(f"{key}[{i}]", v, f"does not divide the {total} {what}",
                    f"use divisors of {total}: {', '.join(map(str, divisors(total)))}")


def _check_cp_seq(cps: list[int], seq_len: int | None, graph: LayerGraph | None,
                  out: ProblemList) -> None:
    """Every listed cp > 1 cuts ``seq_len`` into ``2·cp`` chunks
    (:func:`~autopar_opt.ir.strategies.cp_degree_ok`; words: :mod:`autopar_opt.spec.cp_rule`);
    refused like a degree that does not divide the devices, not dropped without a word."""
    for i, cp in enumerate(cps):
        refused = cp_refusal(cp, seq_len, graph, listed=True)
        if refused:
            out.add(f"search.cp_degrees[{i}]", cp, *refused)


def _check_tp(section: SearchSection, cluster: Cluster, graph: LayerGraph | None,
              out: ProblemList) -> None:
    n = cluster.num_devices
    tps = section.tp_degrees or divisors(n)
    if section.tp_within_node:
        for i, tp in enumerate(section.tp_degrees or []):
            if tp > cluster.gpus_per_node:
                out.add(f"search.tp_degrees[{i}]", tp,
                        f"exceeds the {cluster.gpus_per_node} GPUs per node while "
                        "tp_within_node is true", "lower it, or set search.tp_within_node: false")
    if graph is None:
        return
    stuck = [layer for layer in graph.layers if not any(tp_degree_ok(layer, t) for t in tps)]
    if stuck:
        shown = ", ".join(f"{layer.name} (max_tp={layer.max_tp})" for layer in stuck[:3])
        out.add("search.tp_degrees", section.tp_degrees, f"no degree is valid for layer(s) {shown}",
                "include 1, or degrees that divide every layer's max_tp (e.g. its head count)")


def _check_free(section: SearchSection, cluster: Cluster, graph: LayerGraph | None,
                out: ProblemList) -> None:
    """Free stage sizes: pp at most the devices; the shapes to enumerate within the limit."""
    from autopar_opt.ir.pipeline import MAX_FREE_SHAPES, count_free_shapes

    n = cluster.num_devices
    bad = False
    for i, pp in enumerate(section.pp_degrees or []):
        if pp > n:
            out.add(f"search.pp_degrees[{i}]", pp, f"more stages than the {n} devices",
                    f"use pp <= {n}")
            bad = True
    if graph is None or bad:
        return
    pps = None if section.pp_degrees is None else tuple(section.pp_degrees)
    if count_free_shapes(len(graph.layers), cluster, pps) > MAX_FREE_SHAPES:
        out.add("search.stage_devices", "free", f"more than {MAX_FREE_SHAPES} stage-size vectors "
                f"to search on {n} devices with pp in {section.pp_degrees or 'every value'}",
                "list a few pipeline degrees in search.pp_degrees (e.g. [2, 4]), or use "
                "stage_devices: congruent")


def build_target(value, graph: LayerGraph | None, training: Training, section: SearchSection,
                 out: ProblemList) -> tuple[Target, str]:
    """The target (:mod:`autopar_opt.ir.target`) and a notice (empty when none).

    ``value`` is the spec's ``target`` (None: the framework of
    ``training.runtime``). A model no framework can build (a DAG, convolutions)
    keeps the free space when the target was only derived from the runtime,
    and says so; a stated target is then an error."""
    if value is None:
        target = target_for_runtime(training.runtime.name)
        stated = False
    else:
        fw = value if isinstance(value, str) else value.framework
        version = "" if isinstance(value, str) else (value.version or "")
        if fw == "torchtitan":
            version = version or "0.3"
            if version not in TORCHTITAN_VERSIONS:
                out.add("target.version", version, "unknown torchtitan version",
                        f"use one of: {', '.join(TORCHTITAN_VERSIONS)}")
                version = "0.3"
        elif version:
            out.add("target.version", version, f"{fw} takes no version here",
                    "remove target.version")
        target, stated = Target(fw, version if fw == "torchtitan" else "", "target"), True
    if target.free:
        return target, ""
    priced = pricing_notice(target.framework, training.runtime.name, "target") if stated else ""
    if section.stage_devices == "free":
        if stated:
            out.add("search.stage_devices", "free", f"{target.framework} gives every pipeline "
                    "stage the same devices", "use stage_devices: congruent, or target: none")
            return Target("none", "", "target"), ""
        # the free space comes from the stage sizes, not from training.runtime (which names
        # a framework): said so where the schedules' source is (QA round 12), as a fleet's
        # fallback names cluster.groups
        return Target("none", "", "search.stage_devices"), (
            f"search.stage_devices: free gives stages their own device counts, which "
            f"{target.framework} (training.runtime {training.runtime.name}) cannot run; the "
            "search is the free per-layer space (target: none)")
    windows = graph.attention_windows() if graph is not None else []
    why = (model_problem(graph.layers, graph.is_chain()) if graph is not None else None) \
        or framework_model_problem(target.framework, graph, windows)
    if why and stated:
        out.add("target", target.framework, f"{target.framework} cannot run this model: {why}",
                "use target: none (the free per-layer space)")
        return Target("none", "", "target"), ""
    if why:
        return Target("none", "", "model"), (
            f"training.runtime {training.runtime.name} names {target.framework}, which cannot run "
            f"this model ({why}); the search is the free per-layer space (target: none)")
    if any(windows) and target.framework == "megatron" and training.runtime.cp_comm_type == "p2p" \
            and any(cp > 1 for cp in section.cp_degrees or ()):
        # the same rule as export/megatron.py model_rules (ir/target.TE_RING_WINDOW)
        out.add("search.cp_degrees", list(section.cp_degrees), f"Megatron-Core: "
                f"{TE_RING_WINDOW}, and training.runtime prices the ring exchange (p2p)",
                "set training.runtime_options.cp_comm_type to all_gather or a2a, or "
                "cp_degrees [1]")
        return Target("none", "", "target"), ""
    if target.framework == "torchtitan" and training.runtime.cp_splits_heads \
            and any(cp > 1 for cp in section.cp_degrees or ()):
        # torchtitan's context parallelism shards the sequence and exchanges K/V around
        # every head; Ulysses' head split has no torchtitan form (export/torchtitan.py)
        out.add("training.runtime_options.cp_comm_type", "a2a", "torchtitan has no Ulysses "
                "context parallelism (its context parallelism keeps every head and exchanges "
                "K/V)", "use cp_comm_type all_gather, target megatron, or cp_degrees [1]")
        return Target("none", "", "target"), ""
    if target.framework == "deepspeed" and training.runtime.moe_dispatcher == "deepep" \
            and graph is not None and any(layer.is_moe for layer in graph.layers):
        # DeepSpeed's MoE layer dispatches with its own all-to-all (export/deepspeed.py)
        out.add("training.runtime_options.moe_dispatcher", "deepep", "DeepSpeed has no DeepEP "
                "token dispatch (its MoE layer runs its own all-to-all)",
                "use moe_dispatcher alltoall, or target megatron or torchtitan")
        return Target("none", "", "target"), ""
    if target.framework == "deepspeed" and False not in section.hybrid_sharding:
        # DeepSpeed 0.19 removed MiCS, its hybrid sharding (export/deepspeed.py): a space of
        # hybrid-sharded plans only would be searched as something else
        out.add("search.hybrid_sharding", list(section.hybrid_sharding), "DeepSpeed has no "
                "hybrid sharding (MiCS was removed in DeepSpeed 0.19)",
                "add false (ZeRO over the whole data-parallel group), or target megatron or "
                "torchtitan")
        return Target("none", "", "target"), ""
    priced = "; ".join(x for x in (priced, _flavour_notice(target, graph)) if x)
    allowed = target.schedules()
    dropped = [Schedule(x).value for x in section.schedules or ()
               if allowed is not None and Schedule(x).value not in allowed]
    if dropped and (stated or len(dropped) == len(section.schedules)):
        for i, sched in enumerate(section.schedules):
            if Schedule(sched).value in dropped:
                out.add(f"search.schedules[{i}]", sched, f"{target.framework} does not run the "
                        f"{sched} schedule", f"use {' / '.join(a for a in allowed if a != 'interleaved')}, "
                        "or target: none")
    if dropped and not stated:
        return target, "; ".join(x for x in (
            f"training.runtime {training.runtime.name} runs on {target.framework}, which does "
            f"not run the {', '.join(dropped)} schedule: searched without it (target: none "
            "searches the free per-layer space)", priced) if x)
    return target, priced


def _flavour_notice(target: Target, graph: LayerGraph | None) -> str:
    """What a torchtitan target says of a model none of the export's flavours builds
    (:func:`autopar_opt.export.torchtitan.flavour_notice`); empty for other targets."""
    if target.framework != "torchtitan":
        return ""
    from autopar_opt.export.torchtitan import flavour_notice
    return flavour_notice(graph, "target torchtitan")


def _check_shard_nodes(section: SearchSection, cluster: Cluster | None, out: ProblemList) -> None:
    """``search.hybrid_shard_nodes`` that no plan could use is an error, not a silent
    drop: the list with hybrid sharding off, or a node count that is not below the
    cluster's nodes (a group of every node is plain ZeRO)."""
    if "hybrid_zero_levels" in section.model_fields_set and True not in section.hybrid_sharding:
        out.add("search.hybrid_zero_levels", list(section.hybrid_zero_levels),
                "hybrid ZeRO levels only matter with hybrid sharding, and search.hybrid_sharding "
                "is [false]", "add true to search.hybrid_sharding, or remove "
                "search.hybrid_zero_levels")       # as hybrid_shard_nodes (QA round 5, W4)
    if list(section.hybrid_shard_nodes) == [1]:
        return
    if True not in section.hybrid_sharding:
        out.add("search.hybrid_shard_nodes", list(section.hybrid_shard_nodes),
                "shard groups only matter with hybrid sharding, and search.hybrid_sharding "
                "is [false]", "add true to search.hybrid_sharding, or remove "
                "search.hybrid_shard_nodes")
        return
    if cluster is None:
        return
    for i, k in enumerate(section.hybrid_shard_nodes):
        if k >= cluster.nodes:
            out.add(f"search.hybrid_shard_nodes[{i}]", k, f"a shard group of {k} node(s) is not "
                    f"smaller than the cluster's {cluster.nodes} node(s): sharding over every "
                    "node is plain ZeRO, which hybrid_sharding false already searches",
                    f"list node counts below {cluster.nodes}")


def build_space(section: SearchSection, cluster: Cluster | None, graph: LayerGraph | None,
                training: Training, out: ProblemList, target: Target | None = None) -> SearchSpace:
    """The search space; degrees must divide the devices, micro-batches the batch, and no
    list names a value twice (QA round 10: ``schedules: [1f1b, 1f1b]`` searched every
    configuration twice and listed it twice in the certificate)."""
    for name, values in section.model_dump(mode="json").items():
        if isinstance(values, list):
            seen = [v for i, v in enumerate(values) if v in values[:i]]
            if seen:
                out.add(f"search.{name}", values, f"lists {seen[0]!r} more than once",
                        "list each value once")
    if cluster is not None:
        n = cluster.num_devices
        if section.stage_devices == "congruent":
            _check_divides("search.pp_degrees", section.pp_degrees, n, "devices", out)
        else:
            _check_free(section, cluster, graph, out)
        _check_divides("search.tp_degrees", section.tp_degrees, n, "devices", out)
        _check_divides("search.cp_degrees", section.cp_degrees, n, "devices", out)
        _check_tp(section, cluster, graph, out)
    _check_cp_seq(section.cp_degrees, training.seq_len, graph, out)
    _check_divides("search.microbatches", section.microbatches, training.global_batch_size,
                   "samples of the global batch", out)
    if section.vp_chunks is not None and "interleaved" not in schedule_names(section, target):
        listed = ("search.schedules does not list it" if section.schedules is not None else
                  f"the default schedules of target {(target or Target()).framework} "
                  f"({', '.join(schedule_names(section, target))}) do not hold it")
        out.add("search.vp_chunks", section.vp_chunks, "virtual stages are the interleaved "
                f"schedule's, and {listed}",
                "add interleaved to search.schedules, or remove search.vp_chunks")
    _check_shard_nodes(section, cluster, out)
    if graph is not None and section.ep_degrees and not any(l.is_moe for l in graph.layers):
        for i, ep in enumerate(section.ep_degrees):      # else dropped silently by the search
            if ep > 1:
                out.add(f"search.ep_degrees[{i}]", ep, "expert parallelism needs MoE layers; "
                        "the model has none", "remove search.ep_degrees (or list only 1)")
    if graph is not None and section.etp_degrees and not any(l.is_moe for l in graph.layers):
        for i, etp in enumerate(section.etp_degrees):    # as ep_degrees (QA round 10: accepted)
            if etp > 1:
                out.add(f"search.etp_degrees[{i}]", etp, "expert tensor parallelism needs MoE "
                        "layers; the model has none", "remove search.etp_degrees")
    if "max_microbatches" in section.model_fields_set and section.microbatches:
        above = [c for c in section.microbatches if c > section.max_microbatches]
        if above:      # the list won without a word (QA round 10)
            out.add("search.max_microbatches", section.max_microbatches,
                    f"caps the default micro-batch counts, but search.microbatches lists "
                    f"{above} above it", "drop one of the two, or list counts within the cap")
    experts = sorted({layer.num_experts for layer in graph.layers if layer.is_moe}) \
        if graph is not None else []
    for i, ep in enumerate(section.ep_degrees or []):   # else every plan dropped: "infeasible"
        if experts and ep > 1 and any(e % ep for e in experts):
            fits = [d for d in divisors(experts[0]) if all(e % d == 0 for e in experts)]
            out.add(f"search.ep_degrees[{i}]", ep,
                    f"does not divide the {'/'.join(map(str, experts))} experts of the MoE "
                    "layers (each expert-parallel rank holds whole experts)",
                    f"list degrees that divide them: {', '.join(map(str, fits))}")

    def tup(values):
        return None if values is None else tuple(values)
    return SearchSpace(
        pp_degrees=tup(section.pp_degrees), tp_degrees=tup(section.tp_degrees),
        cp_degrees=tuple(section.cp_degrees), sequence_parallel=tuple(section.sequence_parallel),
        zero_levels=tuple(section.zero_levels),
        hybrid_sharding=tuple(section.hybrid_sharding),
        hybrid_zero_levels=tuple(section.hybrid_zero_levels),
        hybrid_shard_nodes=tuple(section.hybrid_shard_nodes),
        recompute=tuple(Recompute(r) for r in section.recompute),
        schedules=_target_schedules(section, target), schedules_source=schedules_source(section, target),
        microbatches=tup(section.microbatches), max_microbatches=section.max_microbatches,
        tp_within_node=section.tp_within_node, ep_degrees=tup(section.ep_degrees),
        stage_devices=section.stage_devices, etp_degrees=tup(section.etp_degrees),
        vp_chunks=tup(section.vp_chunks), target=target)


def schedule_names(section: SearchSection, target: Target | None) -> tuple[str, ...]:
    """The schedules the spec states, or the target's default when it states none
    (:meth:`~autopar_opt.ir.target.Target.default_schedules`; megatron: 1f1b and
    interleaved)."""
    if section.schedules is not None:
        return tuple(Schedule(x).value for x in section.schedules)
    return (target or Target()).default_schedules()


def schedules_source(section: SearchSection, target: Target | None) -> str:
    """Where the searched schedules came from, for the outputs: ``search.schedules``, or
    the target's default (``default of target megatron (from training.runtime)``)."""
    if section.schedules is not None:
        return "search.schedules"
    target = target or Target("none", "", "default")
    return f"default of target {target.framework} (from {target.source})"


def _target_schedules(section: SearchSection, target: Target | None) -> tuple[Schedule, ...]:
    """The spec's schedules (the target's default when it states none) less those the
    target does not run (:func:`build_target` reports them)."""
    listed = tuple(Schedule(x) for x in schedule_names(section, target))
    allowed = None if target is None or target.free else target.schedules()
    kept = tuple(x for x in listed if allowed is None or x.value in allowed)
    return kept or listed


def build_solver(section: SolverSection, out: ProblemList) -> SolverOptions:
    """Solver options; a form the backend does not declare in ``accepts`` is refused
    (HiGHS cannot solve the MIQP: docs/DESIGN.md §5). The backend module is
    imported only when a form is named: importing HiGHS's (scipy.sparse, highspy)
    cost ``autopar estimate`` about a third of its start-up (issue 18)."""
    from autopar_opt.core.result import ProblemClass
    from autopar_opt.solvers.registry import backend_class

    if section.name == "dp" and section.form != "auto":
        out.add("solver.form", section.form, "chooses the MIP formulation, and the dp solver "
                "builds none (it solves the tables exactly)",
                "drop solver.form, or use name: highs (or scip, gurobi)")
    if section.form == "auto" or section.name == "auto":    # auto resolves by the form
        return SolverOptions(section.name, section.time_limit_s, section.rel_gap, section.form)
    accepts = backend_class(section.name).accepts
    if (ProblemClass.tables not in accepts
            and ProblemClass(section.form.upper()) not in accepts):
        takers = [n for n in backend_names() if ProblemClass(section.form.upper())
                  in backend_class(n).accepts]
        out.add("solver.form", section.form, f"{section.name} cannot solve "
                f"{section.form.upper()} problems",
                f"use form: milp (the exact linearisation) or name: {' / '.join(takers)}")
    return SolverOptions(section.name, section.time_limit_s, section.rel_gap, section.form)


def _file_param_problems(body: dict, target: Path) -> list:
    """Problems of a parameters file's values, checked with the schema of the
    spec's ``cost_model`` overrides (known keys, types, physical bounds, finite):
    before, a text value was a TypeError traceback in the cost model and a NaN,
    a negative efficiency or a misspelt key were taken as they were."""
    from pydantic import ValidationError

    from autopar_opt.spec.translate import problems_from_validation

    if "file" in body:
        return [SpecProblem(str(target), "params.file", body["file"], "a parameters file cannot "
                            "name another one", "remove 'file'")]
    breaches = limits.structure_problems(body)      # NaN, inf, sizes: the spec's own limits
    if breaches:
        return [SpecProblem(str(target), f"params.{b.key}" if b.key else "params", b.value,
                            b.rule, b.fix) for b in breaches]
    try:
        CostModelSection.model_validate(body)
    except ValidationError as exc:
        return [SpecProblem(str(target), f"params.{p.key}", p.value, p.rule, p.fix)
                for p in problems_from_validation(CostModelSection, exc, lambda _s: str(target))]
    return []


def build_cost_params(section: CostModelSection | str | None, cluster: Cluster | None,
                      out: ProblemList, spec_dir: Path | None = None) -> CostParams:
    """The calibrated parameters (or those of ``cost_model.file``, a file
    written by ``autopar calibrate --fit --output``) with the spec's overrides."""
    base = default_params()
    if section is None:
        return base
    if isinstance(section, str):
        section = CostModelSection(file=section)
    changes = {k: v for k, v in section.model_dump().items() if v is not None}
    file = changes.pop("file", None)
    if file is not None:
        target = Path(file) if Path(file).is_absolute() else (spec_dir or Path(".")) / file
        from autopar_opt.spec.loader import read_document

        try:     # within the spec limits: size, nesting, YAML aliases, duplicate keys
            body = params_body(read_document(target))
        except SpecError as exc:
            out.extend(SpecProblem(p.file, "cost_model.file" if not p.key else p.key, p.value,
                                   p.rule, p.fix) for p in exc.problems)
            return default_params()
        except ValueError as exc:
            out.add("cost_model.file", file, f"cannot read cost-model parameters from {target} "
                    f"({getattr(exc, 'strerror', None) or exc})",
                    "name a file written by `autopar calibrate RUNS --fit --out FILE` "
                    "(relative to the spec file)")
            return default_params()
        bad = _file_param_problems(body, target)
        if bad:                  # the same keys and bounds as the spec's own overrides
            out.extend(bad)
            return default_params()
        # what the file states over the shipped calibration, as the inline keys are: a
        # one-key file reset every other parameter to its uncalibrated prior (QA round 10)
        base = base.updated_known(body)
    else:
        body = {}
    known = list(DEVICE_CATALOG) + ([cluster.device.name] if cluster else [])
    for where, given in (("cost_model", changes), (f"{file}", body)):
        for key in ("gemm_efficiency", "fp8_efficiency"):
            for name in (given.get(key) or {}):
                if name not in known:
                    out.add(f"{where}.{key}.{name}", name, "unknown device name",
                            f"use a device name: {', '.join(dict.fromkeys(known))}"
                            f"{did_you_mean(name, known)}")
    return base.updated(changes)


def check_room_left(cluster: Cluster, training: Training, cost: CostParams, out: ProblemList,
                    stated_gib: float | None) -> None:
    """The device must hold more than the runtime's reserve (CUDA context and cuBLAS/cuDNN
    workspaces: ``cost_model.memory_reserve_gib``) and the user's: a plan then has negative room, and
    the search answered "proven infeasible" with advice that cannot help (QA round 10:
    "-0.24 GiB usable" on a 0.5 GiB device, -0.61 with a 79.9 GiB reserve of 80)."""
    hbm, mine, runtime = cluster.device.hbm_gib, training.memory_reserve_gib, cost.memory_reserve_gib
    if hbm - mine - runtime > 0:
        return
    if mine > 0:
        out.add("training.memory_reserve_gib", mine, f"leaves no memory for the model: the "
                f"device's {hbm:g} GiB less the runtime's reserve of {runtime:.2f} GiB (CUDA "
                "context, library workspaces) is not above it", f"use less than {hbm - runtime:.2f}")
    else:
        key, value = (("cluster.device_memory_gib", stated_gib) if stated_gib is not None
                      else ("cluster.device", cluster.device.name))
        out.add(key, value, f"the device's {hbm:g} GiB do not exceed the "
                f"runtime's reserve of {runtime:.2f} GiB (CUDA context, library workspaces): no model "
                "fits", "use a device with more memory (cluster.device_memory_gib, device)")
