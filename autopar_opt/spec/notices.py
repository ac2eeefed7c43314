"""What reading a spec says without refusing it: a value priced as given that the hardware
does not run (a NIC above 800 Gb/s, an intra-node link above the device's NVLink), and what
a Megatron-LM command line (``plan.megatron_args``) runs that the price does not. Each
sentence goes to the spec's notices, which every output prints (QA round 10).
"""

from __future__ import annotations


#: The fastest network interface shipping, GB/s per direction (800 Gb/s: ConnectX-8, the
#: Quantum-X800 and Spectrum-X800 ports).
FASTEST_NIC_GB_PER_S = 100.0


def link_notices(cluster) -> list[str]:
    """A sentence per link bandwidth beyond what the hardware runs: a NIC above 800 Gb/s (a
    Gb/s figure written as GB/s?), an intra-node link above the device's own NVLink per
    direction (a datasheet's both-directions figure?). Priced as given (QA round 10: 400 and
    900 were taken without a word)."""
    from autopar_opt.ir.hardware import DEFAULT_INTRA_NODE

    out = []
    nic = cluster.inter_node.bandwidth_gb_per_s
    if cluster.nodes > 1 and nic > FASTEST_NIC_GB_PER_S:
        out.append(f"cluster.inter_node.bandwidth_gb_per_s = {nic:g} GB/s per NIC is above the "
                   f"fastest shipping NIC ({FASTEST_NIC_GB_PER_S:g} GB/s = 800 Gb/s): a Gb/s "
                   f"figure written as GB/s? ({nic:g} Gb/s = {nic / 8:g} GB/s); priced as given")
    own = DEFAULT_INTRA_NODE.get(cluster.device.name)
    intra = cluster.intra_node.bandwidth_gb_per_s
    if own is not None and cluster.gpus_per_node > 1 and intra > own.bandwidth_gb_per_s:
        out.append(f"cluster.intra_node.bandwidth_gb_per_s = {intra:g} GB/s is above the "
                   f"{cluster.device.name}'s NVLink per GPU and direction "
                   f"({own.bandwidth_gb_per_s:g} GB/s): a datasheet's both-directions figure? "
                   "priced as given")
    return out


def precision_notes(plan) -> list[str]:
    """What reading a launch file assumed of its precision (``plan.notes["precision"]``,
    each naming the file's key: an MXFP8 recipe priced as per-tensor FP8,
    :mod:`autopar_opt.export.mxfp8`)."""
    return list(plan.notes.get("precision", [])) if plan is not None else []


def command_line_notes(plan_section, training, plan=None, graph=None) -> list[str]:
    """What a Megatron-LM command line (``plan.megatron_args``) runs that the price does
    not (:func:`autopar_opt.export.megatron_import.runtime_flag_notes`), and the batch flags
    it leaves out (:func:`~autopar_opt.export.megatron_import.batch_notes`; ``plan``: the
    plan built from it, for its data-parallel degree)."""
    from autopar_opt.spec.schema import MegatronArgsPlanSpec, MegatronBridgePlanSpec

    said = list(plan.notes.get("said", [])) if plan is not None else []
    if said:                 # what reading a framework's file assumed (spec.build_plan)
        return said
    if isinstance(plan_section, MegatronBridgePlanSpec) and plan is not None \
            and "argv" in plan.notes:
        argv, key = plan.notes["argv"], "plan.megatron_bridge"     # its settings as flags
    elif isinstance(plan_section, MegatronArgsPlanSpec):
        argv, key = plan_section.megatron_args, "plan.megatron_args"
    else:
        return []
    from autopar_opt.export.megatron import parse_megatron_args
    from autopar_opt.export.megatron_import import batch_notes, exchange_notes, runtime_flag_notes

    args = parse_megatron_args(argv)     # read once before: it parses
    moe = graph is not None and any(layer.is_moe for layer in graph.layers)
    notes = runtime_flag_notes(args, training) + exchange_notes(args, training, moe)
    if plan is not None and plan.stages and plan.stages[0].strategies:
        notes = batch_notes(args, training, plan.stages[0].strategies[0].dp) + notes
    return [f"{key}: {note}" for note in notes]
