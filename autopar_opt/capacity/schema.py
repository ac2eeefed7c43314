"""The sweep file schema (pydantic v2): a base spec, axes, and the planning inputs.

A sweep file asks the capacity-planning question: the base spec (any valid
spec, inline or as a path) is solved once per combination of the axes' values
(the scenarios), and the planning inputs turn every certified plan into a
time-to-train and a cost. Like the spec schema, every field carries its
description (shown by ``autopar schema --sweep``) and an example that feeds
the "fix" text of error messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, Union

from pydantic import Field

from autopar_opt.spec.schema import Dtype, LinkSpec, PosInt, documented_field, Section


class InterconnectOption(Section):
    """One value of the ``interconnect`` axis: link tiers that replace the base cluster's."""

    name: str = documented_field("Label of this option (used in scenario ids).", "ib-ndr-400")
    intra_node: Optional[LinkSpec] = documented_field("Intra-node link; default: the base cluster's or the "
                                        "device's.", {"bandwidth_gb_per_s": 450.0, "latency_us": 5.0},
                                        default=None)
    inter_node: Optional[LinkSpec] = documented_field("Inter-node link; default: the base cluster's or the "
                                        "device's.", {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0},
                                        default=None)


class AxesSection(Section):
    """The values each scenario dimension takes; scenarios are their Cartesian product
    (in this field order). An omitted axis keeps the base spec's value."""

    device: Optional[list[str]] = documented_field("Catalog device names (cluster.device).",
                                     ["A100-80GB", "H100-SXM-80GB"], default=None, min_length=1)
    gpus: Optional[list[PosInt]] = documented_field("Total GPU counts (cluster.nodes = gpus / gpus_per_node).",
                                      [64, 128, 256], default=None, min_length=1)
    nodes: Optional[list[PosInt]] = documented_field("Node counts (cluster.nodes); give gpus or nodes, not both.",
                                       [8, 16], default=None, min_length=1)
    interconnect: Optional[list[InterconnectOption]] = documented_field(
        "Link tiers (cluster.intra_node / cluster.inter_node).",
        [{"name": "ib-ndr", "inter_node": {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0}}],
        default=None, min_length=1)
    global_batch_size: Optional[list[PosInt]] = documented_field("Global batch sizes, samples "
                                                   "(training.global_batch_size).", [512, 1024],
                                                   default=None, min_length=1)
    seq_len: Optional[list[PosInt]] = documented_field("Sequence lengths, tokens (training.seq_len).", [4096, 8192],
                                         default=None, min_length=1)
    dtype: Optional[list[Dtype]] = documented_field("Compute precisions (training.dtype).",  # type: ignore[valid-type]
                                      ["bf16", "fp8"], default=None, min_length=1)
    group_nodes: Optional[dict[str, list[Annotated[int, Field(ge=0)]]]] = documented_field(
        "Node counts per group of a fleet base spec (cluster.groups[NAME].nodes); 0 leaves the "
        "group out. One scenario dimension per group.", {"a100": [0, 32, 64], "h100": [0, 64]},
        default=None, min_length=1)
    runtime: Optional[list[Any]] = documented_field("Training runtimes (training.runtime: catalog "
                                      "names such as megatron-core, deepspeed, torchtitan).",
                                      ["megatron-core", "deepspeed"], default=None, min_length=1)


PositiveFloat = Annotated[float, Field(gt=0)]


class PricesSection(Section):
    """Prices per GPU-hour, user-supplied; state where they come from and when."""

    currency: str = documented_field("Currency of the prices.", "USD", default="USD")
    per_gpu_hour: dict[str, PositiveFloat] = documented_field(
        "Device name -> price of one GPU for one hour.", {"H100-SXM-80GB": 2.99}, min_length=1)
    source: str = documented_field("Where the prices come from and when they were read (shown in reports).",
                     "on-demand list prices of provider X, read 2026-11-01", min_length=1)


class PlanningSection(Section):
    """What the planner asks: train this many tokens by this deadline at these prices."""

    token_budget: PositiveFloat = documented_field("Tokens to train on.", 15.0e12)
    deadline_days: PositiveFloat = documented_field("Wall-clock days the training may take.", 60.0)
    target_tokens_per_s: Optional[PositiveFloat] = documented_field(
        "Optional throughput a scenario must reach, tokens/s (all GPUs together).", 5.0e6,
        default=None)
    prices: PricesSection = documented_field("Price per GPU-hour per device type.",
                               {"per_gpu_hour": {"H100-SXM-80GB": 2.99}, "source": "..."})


class SweepFile(Section):
    """An ``autopar capacity`` sweep: base spec x axes, and the planning inputs."""

    description: Optional[str] = documented_field("Free text shown in the capacity report.",
                                    "Llama-3-70B: which cluster trains 15T tokens in 60 days?",
                                    default=None)
    base: Union[str, dict[str, Any]] = documented_field(
        "The base spec: a path to a spec file (relative to the sweep file) or the spec itself; "
        "its solver.time_limit_s is the search time limit of every scenario.",
        "llama3_70b_1024_h100.yaml")
    axes: AxesSection = documented_field("Scenario dimensions.", {"device": ["H100-SXM-80GB"], "gpus": [512]})
    planning: PlanningSection = documented_field("Token budget, deadline, prices, optional throughput target.",
                                   {"token_budget": 15.0e12, "deadline_days": 60})
