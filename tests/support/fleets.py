"""Tiny mixed fleets for the issue-34 tests: two groups of one node each, and a search
space small enough for brute force."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.cost.params import CostParams, default_params
from autopar_opt.ir.fleet import Fleet, GroupLink
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.training import Recompute, SearchSpace

#: A spec's ``cluster:`` of two one-node groups (2 A100 + 2 H100 joined by a 12.5 GB/s link) that
#: the fleet command tests and the fuzzer solve with the debug model (a solve: about 1 s). Users
#: copy it (``copy.deepcopy``) before changing it.
TINY_MIX_CLUSTER = {"name": "tiny-mix", "groups": [
    {"name": "a100", "device": "A100-40GB", "nodes": 1, "gpus_per_node": 2},
    {"name": "h100", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 2,
     "nics_per_node": 1, "nic_gb_per_s": 50.0}],
    "links": [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 12.5, "latency_us": 20}]}

#: The space of the brute-force tests: two ZeRO levels, two recompute modes, few micro-batch counts.
SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    microbatches=(1, 2, 4), schedules=("1f1b", "gpipe"))

#: No fixed per-iteration cost, so that splitting the batch over groups can pay off on tiny models.
NO_OVERHEAD: CostParams = replace(default_params(), iteration_overhead_s=0.0)


def two_groups(slow: tuple[int, int] = (1, 2), fast: tuple[int, int] = (1, 2),
               slow_device: str = "A100-80GB", fast_device: str = "H100-SXM-80GB",
               link_gb_per_s: float = 25.0, slow_inter_gb_per_s: float | None = None) -> Fleet:
    """Group 0 ``slow`` = (nodes, GPUs per node) of ``slow_device``, group 1 ``fast``, one link."""
    inter = None if slow_inter_gb_per_s is None else LinkTier("ib", slow_inter_gb_per_s, 10.0)
    a = make_cluster("slow", *slow, slow_device, inter_node=inter)
    h = make_cluster("fast", *fast, fast_device)
    return Fleet("mix", (a, h), (GroupLink("slow", "fast", LinkTier("dc", link_gb_per_s, 20.0)),))
