"""Zoo operator graphs as placement problems (costs: :mod:`autopar_opt.model_zoo.op_graphs`).

Node time: roofline (Williams, Waterman & Patterson, CACM 2009),
``max(flops / (peak · eff), bytes / hbm_bw)`` with the cost model's GEMM
efficiency for matmul/conv nodes; transfer: α–β (Hockney 1994) on the device's
intra-node link (:data:`~autopar_opt.ir.hardware.DEFAULT_INTRA_NODE`); size: parameters
plus output activation.

Several device types: the placement model (Tarnawski et al., NeurIPS 2020, §3) gives a
node's output ONE transfer cost, paid by its sender and by every device that reads it,
whichever devices they are, so a per-pair price would need a per-pair weight in every
solver (the DP, the MILP, the bounds). Every transfer is priced on the SLOWEST intra-node
link of the device types with devices (lowest bandwidth, then highest latency;
:func:`transfer_link`): a transfer runs at the rate of its slower endpoint's link, so no
transfer that touches the slowest type is priced below it, and one between two faster
devices is priced high (a pessimistic model: loads and the optimum are upper estimates of
a per-pair model's). Before (QA round 13) every transfer took the FIRST type's link, so
listing the fast type first priced PCIe transfers at NVLink speed; the rule is said in the
output (``meta["transfers"]``, printed by ``autopar place``).
"""

from __future__ import annotations

import numpy as np

from autopar_opt.ir.hardware import DEFAULT_INTRA_NODE, DEVICE_CATALOG, LinkTier
from autopar_opt.model_zoo.op_graphs import OP_GRAPHS, OpGraph
from autopar_opt.placement.problem import DeviceType, PlacementProblem


def transfer_link(types: list[str]) -> tuple[LinkTier, str]:
    """The intra-node link every transfer is priced on, and the sentence that says so
    (module docstring): the slowest link (lowest bandwidth, then highest latency) of the
    catalog device types ``types`` (those with devices)."""
    names = list(dict.fromkeys(types))
    slowest = min(names, key=lambda t: (DEFAULT_INTRA_NODE[t].bandwidth_gb_per_s,
                                        -DEFAULT_INTRA_NODE[t].latency_us))
    link = DEFAULT_INTRA_NODE[slowest]
    said = (f"every node output priced alpha + bytes / bandwidth on {slowest}'s intra-node link "
            f"{link.name} ({link.bandwidth_gb_per_s:g} GB/s, {link.latency_us:g} us)")
    if len(names) > 1:
        others = ", ".join(f"{t}: {DEFAULT_INTRA_NODE[t].name} "
                           f"{DEFAULT_INTRA_NODE[t].bandwidth_gb_per_s:g} GB/s"
                           for t in names if t != slowest)
        said += (f", the slowest of the device types given ({others}): the placement model "
                 "has one transfer cost per node output, so transfers between faster devices "
                 "are priced high")
    return link, said


def op_problem(g: OpGraph, devices: list[dict], name: str) -> PlacementProblem:
    """Costs from the device catalog (module docstring); ``devices`` as in the spec."""
    from autopar_opt.cost.params import default_params
    from autopar_opt.placement.importers.spec import device_memory_bytes
    params = default_params()
    flops = np.array(g.flops)
    mem = np.array(g.mem_bytes)
    gemm = np.array(g.gemm)
    times, types = {}, []
    for d in devices:
        dev = DEVICE_CATALOG[d["type"]]
        eff = np.where(gemm, params.efficiency_for(dev.name), 1.0)
        t = np.maximum(flops / (dev.peak_flops("bf16") * eff), mem / (dev.hbm_gb_per_s * 1e9))
        times[dev.name] = t * 1e3
        types.append(DeviceType(dev.name, int(d.get("count", 1)),
                                device_memory_bytes(d, dev.hbm_gib * 2**30), True))
    link, said = transfer_link([t.name for t in types if t.count > 0] or [t.name for t in types])
    comm = (link.latency_s + np.array(g.out_bytes) / link.bytes_per_s) * 1e3
    n = len(g.names)
    return PlacementProblem(name=name, node_names=list(g.names), node_ids=list(range(n)),
                            edges=np.array(g.edges, dtype=np.int64).reshape(-1, 2), time=times,
                            size_bytes=np.array(g.param_bytes) + np.array(g.out_bytes),
                            comm=comm,
                            color=np.array(g.color) if g.color else np.arange(n),
                            is_backward=np.array(g.backward, bool) if g.backward else np.zeros(n, bool),
                            device_types=types,
                            meta={"format": "zoo", "units": "ms", "transfers": said})


def build_op_graph(name: str, devices: list[dict], *, file: str = "<spec>",
                   _check_only: bool = False, **params) -> PlacementProblem | None:
    """A zoo operator graph as a placement problem; SpecError for unknown names/devices."""
    from autopar_opt.core.errors import SpecError, SpecProblem, did_you_mean
    probs = []
    if name not in OP_GRAPHS and not _check_only:
        probs.append(SpecProblem(file, "placement.graph.zoo", name, "unknown operator graph",
                                 f"choose one of {', '.join(sorted(OP_GRAPHS))}"
                                 f"{did_you_mean(name, OP_GRAPHS)}"))
    for i, d in enumerate(devices):
        if d["type"] not in DEVICE_CATALOG:
            probs.append(SpecProblem(file, f"placement.devices[{i}].type", d["type"],
                                     "not in the device catalog",
                                     f"choose one of {', '.join(DEVICE_CATALOG)}"
                                     f"{did_you_mean(d['type'], DEVICE_CATALOG)}"))
        elif "bf16" not in DEVICE_CATALOG[d["type"]].peak_tflops:
            with_bf16 = [k for k, v in DEVICE_CATALOG.items() if "bf16" in v.peak_tflops]
            probs.append(SpecProblem(file, f"placement.devices[{i}].type", d["type"],
                                     "has no bf16 peak, and the zoo's operator graphs are costed "
                                     "in bf16",
                                     f"choose one of {', '.join(with_bf16)}"))
    if not _check_only and name in OP_GRAPHS:
        probs.extend(_param_problems(name, params, file))
    if probs:
        raise SpecError(probs)
    if _check_only:
        return None
    try:
        g = OP_GRAPHS[name](**params)
    except TypeError as exc:
        raise SpecError([SpecProblem(file, "placement.graph", params, f"bad parameter ({exc})",
                                     "see model_zoo/op_graphs.py for the generator's arguments")]) from None
    return op_problem(g, devices, name)


#: The values a zoo generator's text argument takes (``model_zoo/op_graphs.py``).
TEXT_CHOICES: dict[str, tuple[str, ...]] = {"granularity": ("op", "layer")}


def _param_problems(name: str, params: dict, file: str) -> list:
    """Problems of a zoo generator's arguments, checked before it runs: a known
    argument (with a "did you mean"), of its default's type, sizes positive (``mem_len``
    may be 0: no memory segment) and
    within :mod:`autopar_opt.core.limits` (``nodes`` <= MAX_OP_NODES, ``layers`` <=
    MAX_LAYERS, other dimensions <= MAX_SEQ_LEN). Before: ``nodes: 0`` was an
    OverflowError, a negative count silently became one layer, 10^12 hung."""
    import inspect

    from autopar_opt.core import limits
    from autopar_opt.model_zoo import op_graphs
    from autopar_opt.core.errors import SpecProblem, did_you_mean

    func = op_graphs.transformer if name == "transformer_xl" else OP_GRAPHS[name]
    defaults = {k: p.default for k, p in inspect.signature(func).parameters.items()
                if k != "xl" or name != "transformer_xl"}
    caps = {"nodes": limits.MAX_OP_NODES, "layers": limits.MAX_LAYERS}
    #: Arguments that may be 0: Transformer-XL without a memory segment.
    floors = {"mem_len": 0}
    probs = []
    for key, val in params.items():
        where = f"placement.graph.{key}"
        if key not in defaults:
            probs.append(SpecProblem(file, where, val, f"not an argument of the {name!r} graph",
                                     f"use {', '.join(defaults)}{did_you_mean(str(key), defaults)}"))
            continue
        default = defaults[key]
        if isinstance(default, bool):
            if not isinstance(val, bool):
                probs.append(SpecProblem(file, where, val, "must be true or false",
                                         f"write {key}: {str(default).lower()}"))
        elif isinstance(default, int):
            cap, floor = caps.get(key, limits.MAX_SEQ_LEN), floors.get(key, 1)
            if isinstance(val, bool) or not isinstance(val, int) or not floor <= val <= cap:
                probs.append(SpecProblem(file, where, val,
                                         f"must be an integer from {floor} to {cap:,}",
                                         f"write e.g. {key}: {default}"))
        elif isinstance(default, str) and not isinstance(val, str):
            probs.append(SpecProblem(file, where, val, "must be text", f"write {key}: {default}"))
        elif key in TEXT_CHOICES and val not in TEXT_CHOICES[key]:
            # QA round 35: granularity: bogus built the layer graph without a word (the
            # generator tests == "op")
            probs.append(SpecProblem(file, where, val, f"must be one of {', '.join(TEXT_CHOICES[key])}",
                                     f"write {key}: {default}{did_you_mean(str(val), TEXT_CHOICES[key])}"))
    if not probs:
        probs.extend(_size_problems(name, {**defaults, **params}, file))
    return probs


def _size_problems(name: str, args: dict, file: str) -> list:
    """Unrolled graphs (GNMT's steps, Transformer-XL's segments) grow with the product
    of their arguments: refuse one estimated above ``limits.MAX_OP_NODES`` operators
    before building it (``seq: 10**6`` would otherwise run for hours)."""
    from autopar_opt.core import limits
    from autopar_opt.core.errors import SpecProblem

    factor = 2 if args.get("training") else 1
    if name == "gnmt":
        ops, key = 2 * args["seq"] * (33 * args["layers"] + 12) * factor, "seq"
    elif name == "transformer_xl":
        ops, key = args["segments"] * args["layers"] * 20 * factor, "segments"
    else:
        return []
    if ops <= limits.MAX_OP_NODES:
        return []
    return [SpecProblem(file, f"placement.graph.{key}", args[key],
                        f"gives about {ops:,} operators, above the limit of "
                        f"{limits.MAX_OP_NODES:,}", f"use a smaller {key} or fewer layers")]
