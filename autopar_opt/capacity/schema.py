"""The sweep file schema (pydantic v2): a base spec, axes, and the planning inputs.

A sweep file asks the capacity-planning question: the base spec (any valid
spec, inline or as a path) is solved once per combination of the axes' values
(the scenarios), and the planning inputs turn every certified plan into a
time-to-train and a cost. Like the spec schema, every field carries its
description (shown by ``autopar capacity --schema``) and an example that feeds
the "fix" text of error messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, Union

from pydantic import Field

from autopar_opt.spec.schema import Dtype, LinkSpec, PosInt, _f, _Section


class InterconnectOption(_Section):
    """One value of the ``interconnect`` axis: link tiers that replace the base cluster's."""

    name: str = _f("Label of this option (used in scenario ids).", "ib-ndr-400")
    intra_node: Optional[LinkSpec] = _f("Intra-node link; default: the base cluster's or the "
                                        "device's.", {"bandwidth_gb_per_s": 450.0, "latency_us": 5.0},
                                        default=None)
    inter_node: Optional[LinkSpec] = _f("Inter-node link; default: the base cluster's or the "
                                        "device's.", {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0},
                                        default=None)


class AxesSection(_Section):
    """The values each scenario dimension takes; scenarios are their Cartesian product
    (in this field order). An omitted axis keeps the base spec's value."""

    device: Optional[list[str]] = _f("Catalog device names (cluster.device).",
                                     ["A100-80GB", "H100-SXM-80GB"], default=None, min_length=1)
    gpus: Optional[list[PosInt]] = _f("Total GPU counts (cluster.nodes = gpus / gpus_per_node).",
                                      [64, 128, 256], default=None, min_length=1)
    nodes: Optional[list[PosInt]] = _f("Node counts (cluster.nodes); give gpus or nodes, not both.",
                                       [8, 16], default=None, min_length=1)
    interconnect: Optional[list[InterconnectOption]] = _f(
        "Link tiers (cluster.intra_node / cluster.inter_node).",
        [{"name": "ib-ndr", "inter_node": {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0}}],
        default=None, min_length=1)
    global_batch_size: Optional[list[PosInt]] = _f("Global batch sizes, samples "
                                                   "(training.global_batch_size).", [512, 1024],
                                                   default=None, min_length=1)
    seq_len: Optional[list[PosInt]] = _f("Sequence lengths, tokens (training.seq_len).", [4096, 8192],
                                         default=None, min_length=1)
    dtype: Optional[list[Dtype]] = _f("Compute precisions (training.dtype).",  # type: ignore[valid-type]
                                      ["bf16", "fp8"], default=None, min_length=1)
    runtime: Optional[list[Any]] = _f("Training runtimes (training.runtime, when the spec "
                                      "schema has that setting).", ["megatron"], default=None,
                                      min_length=1)


PositiveFloat = Annotated[float, Field(gt=0)]


class PricesSection(_Section):
    """Prices per GPU-hour, user-supplied; state where they come from and when."""

    currency: str = _f("Currency of the prices.", "USD", default="USD")
    per_gpu_hour: dict[str, PositiveFloat] = _f(
        "Device name -> price of one GPU for one hour.", {"H100-SXM-80GB": 2.99}, min_length=1)
    source: str = _f("Where the prices come from and when they were read (shown in reports).",
                     "on-demand list prices of provider X, read 2026-11-01", min_length=1)


class PlanningSection(_Section):
    """What the planner asks: train this many tokens by this deadline at these prices."""

    token_budget: PositiveFloat = _f("Tokens to train on.", 15.0e12)
    deadline_days: PositiveFloat = _f("Wall-clock days the training may take.", 60.0)
    target_tokens_per_s: Optional[PositiveFloat] = _f(
        "Optional throughput a scenario must reach, tokens/s (all GPUs together).", 5.0e6,
        default=None)
    prices: PricesSection = _f("Price per GPU-hour per device type.",
                               {"per_gpu_hour": {"H100-SXM-80GB": 2.99}, "source": "..."})


class SweepFile(_Section):
    """An ``autopar capacity`` sweep: base spec x axes, and the planning inputs."""

    description: Optional[str] = _f("Free text shown in the capacity report.",
                                    "Llama-3-70B: which cluster trains 15T tokens in 60 days?",
                                    default=None)
    base: Union[str, dict[str, Any]] = _f(
        "The base spec: a path to a spec file (relative to the sweep file) or the spec itself; "
        "its solver.time_limit_s is the search time limit of every scenario.",
        "llama3_70b_1024_h100.yaml")
    axes: AxesSection = _f("Scenario dimensions.", {"device": ["H100-SXM-80GB"], "gpus": [512]})
    planning: PlanningSection = _f("Token budget, deadline, prices, optional throughput target.",
                                   {"token_budget": 15.0e12, "deadline_days": 60})
