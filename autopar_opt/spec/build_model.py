"""Build the :class:`LayerGraph` of a validated ``model`` section.

Zoo models go through :mod:`autopar_opt.model_zoo.registry`; explicit models
are checked (unique names, edges between known layers, edges forward in the
layer order) before :class:`LayerGraph` is constructed, so that each mistake
is reported with its key path. Measured costs (a profile table) are attached
to their layers as :class:`MeasuredCost` tuples.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from autopar_opt.cost.compute import MEMORY_BOUND_KINDS
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind, MeasuredCost, tie_problem
from autopar_opt.core import limits
from autopar_opt.core.errors import ProblemList, did_you_mean
from autopar_opt.spec.schema import (ExplicitModelSpec, HfModelSpec, LayerSpec, MeasuredSpec,
                                     ZooModelSpec)


def _split_fix(message: str) -> tuple[str, str]:
    """Split a registry message ``"... (fix: ...)"`` into (rule, fix)."""
    if "(fix:" in message:
        rule, _, fix = message.partition("(fix:")
        return rule.strip().rstrip(";"), fix.rstrip(") ").strip()
    return message, "see `autopar zoo list` and the model's dimensions"


#: Zoo dimensions that count layers (their sum is bounded by limits.MAX_LAYERS).
LAYER_COUNT_KEYS = ("num_layers", "encoder_layers", "decoder_layers", "depths")
#: Largest value of any other zoo dimension (hidden size, vocabulary, image size, ...).
MAX_DIMENSION = limits.MAX_SEQ_LEN


def _override_limits(overrides: dict, out: ProblemList) -> bool:
    """Check the override sizes before the zoo builder runs (a builder asked for
    10^9 layers would take hours); True when they are within the limits."""
    ok = True
    layers = 0
    for key, value in overrides.items():
        values = value if isinstance(value, list) else [value]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if any(v > MAX_DIMENSION for v in ints):
            out.add(f"model.overrides.{key}", value, f"exceeds the limit of {MAX_DIMENSION} for a "
                    "model dimension", "use a realistic dimension")
            ok = False
        if key in LAYER_COUNT_KEYS:
            layers += sum(ints)
    if ok and layers > limits.MAX_LAYERS:
        out.add("model.overrides", dict(overrides), f"{layers} layers exceed the limit of "
                f"{limits.MAX_LAYERS} layers", f"use at most {limits.MAX_LAYERS} layers in total")
        ok = False
    return ok


def _zoo_graph(section: ZooModelSpec, seq_len: int | None, out: ProblemList,
               flash_attention: bool | None = None) -> LayerGraph | None:
    from autopar_opt.model_zoo import registry

    names = registry.model_names()
    if section.zoo not in names:
        out.add("model.zoo", section.zoo, "unknown zoo model",
                f"use one of: {', '.join(names)}{did_you_mean(section.zoo, names)}")
        return None
    if not _override_limits(section.overrides, out):
        return None
    stated = section.overrides.get("seq_len")
    if seq_len is not None and stated is not None and stated != seq_len:
        # the training's length won without a word (QA round 10); the explicit form refuses it
        out.add("training.seq_len", seq_len, f"differs from model.overrides.seq_len ({stated})",
                "state the sequence length once: drop one of the two, or make them equal")
        return None
    try:
        return registry.build_model(section.zoo, seq_len=seq_len, overrides=dict(section.overrides),
                                    flash_attention=flash_attention)
    except (ValueError, TypeError) as exc:
        rule, fix = _split_fix(str(exc))
        if seq_len is not None and "seq_len" in rule and "override" not in rule:
            out.add("training.seq_len", seq_len, rule, fix)
        else:
            out.add("model.overrides", dict(section.overrides), rule, fix)
        return None


def _folder(base: Path) -> str:
    """``base`` as an absolute path for a message (itself when it cannot be resolved)."""
    try:
        return str(base.resolve())
    except (OSError, RuntimeError):
        return str(base)


def _hf_graph(section: HfModelSpec, seq_len: int | None, base: Path,
              out: ProblemList, flash_attention: bool | None = None) -> LayerGraph | None:
    """Build from a Hugging Face config; a relative path is relative to ``base``; a
    bare name with no such file there is a bundled config
    (:mod:`autopar_opt.model_zoo.hf_bundled`)."""
    from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph, load_hf_config

    from autopar_opt.model_zoo.hf_bundled import hub_repo, is_url, resolve

    path = Path(section.hf_config)
    relative = not path.is_absolute()
    if relative:
        path = base / path
    path, label, problem = resolve(section.hf_config, path)   # a bare name: a bundled config
    if problem is not None:
        rule, fix = _split_fix(problem)
        remote = is_url(section.hf_config) or hub_repo(section.hf_config) is not None
        if relative and not remote:  # QA round 12: "../x.json: no such file" said not where
            fix += f"; a relative path is read from the spec file's folder, {_folder(base)}"
        out.add("model.hf_config", section.hf_config, rule, fix)
        return None
    try:
        config, origin = load_hf_config(path)
        origin = label or origin
        return build_hf_graph(config, seq_len, name=section.name, origin=str(origin),
                              flash_attention=section.flash_attention
                              if flash_attention is None else flash_attention,
                              capacity_factor=section.capacity_factor,
                              load_imbalance=section.load_imbalance)
    except HfConfigError as exc:
        rule, fix = _split_fix(str(exc))
        key = "training.seq_len" if "sequence length" in rule or "seq_len" in rule \
            else "model.hf_config"
        fix = fix.replace(", or --seq-len", "")   # the option is a bare config's, not a spec's
        out.add(key, seq_len if key == "training.seq_len" else section.hf_config, rule, fix)
        return None


def _layer(spec: LayerSpec) -> Layer:
    """A :class:`Layer` from its validated spec (the field names are the same)."""
    return Layer(**spec.model_dump())


def _explicit_graph(section: ExplicitModelSpec, seq_len: int | None,
                    out: ProblemList) -> LayerGraph | None:
    names: list[str] = []
    ok = True
    for i, spec in enumerate(section.layers):
        if spec.name in names:
            out.add(f"model.layers[{i}].name", spec.name, "duplicate layer name",
                    "give every layer a unique name, e.g. block7")
            ok = False
        names.append(spec.name)
    position = {name: i for i, name in enumerate(names)}
    edges = section.edges
    if edges is None:
        edges = [(a, b) for a, b in zip(names, names[1:])]
    first: dict[tuple[str, str], int] = {}
    for j, (u, v) in enumerate(edges):
        if (u, v) in first:
            # QA round 11: a repeated edge was kept, which made a chain a DAG (is_chain false:
            # the DAG search path) and counted the transfer twice, without a word
            out.add(f"model.edges[{j}]", [u, v], f"repeats model.edges[{first[(u, v)]}]",
                    "list each edge once")
            ok = False
            continue
        first[(u, v)] = j
        for end in (u, v):
            if end not in position:
                out.add(f"model.edges[{j}]", [u, v], f"edge names unknown layer {end!r}",
                        f"use a layer name from model.layers{did_you_mean(end, names)}")
                ok = False
        if ok and u in position and v in position and position[u] >= position[v]:
            out.add(f"model.edges[{j}]", [u, v], "edge goes backwards (or to itself) in the "
                    "layer order", "list layers in a topological order: every edge [u, v] "
                    "needs u listed before v")
            ok = False
    for i, spec in enumerate(section.layers):
        experts, top_k = getattr(spec, "num_experts", 0) or 0, getattr(spec, "top_k", 0) or 0
        if experts and not 1 <= top_k <= experts:   # a token is routed to 1..num_experts experts
            out.add(f"model.layers[{i}].top_k", top_k, f"must be from 1 to num_experts "
                    f"({experts}): each token is routed to top_k of the layer's experts",
                    "give the router's k, e.g. top_k: 2")
            ok = False
        elif top_k and not experts:
            out.add(f"model.layers[{i}].top_k", top_k, "is set on a layer without experts "
                    "(num_experts is 0)", "add num_experts, or drop top_k")
            ok = False
        elif not experts and getattr(spec, "kind", None) is LayerKind.moe_block:
            # QA round 11: a moe_block without experts was priced as a dense block (no
            # expert parallelism, no all-to-all, every parameter active) without a word
            out.add(f"model.layers[{i}].num_experts", experts, "a moe_block needs its routed "
                    "experts: without num_experts it would be priced as a dense block (every "
                    "parameter active, no expert parallelism or all-to-all)",
                    "state num_experts, top_k and expert_params (the routed experts' part of "
                    "params), or use kind: transformer_block")
            ok = False
        ok = _gemm_kernels_ok(spec, i, out) and ok
        ok = _parts_ok(spec, i, out) and ok
    if not ok:
        return None
    layers = [_layer(spec) for spec in section.layers]
    bad = tie_problem(layers)
    if bad is not None:
        i, rule, fix = bad
        out.add(f"model.layers[{i}].tied_to", layers[i].tied_to, rule, fix)
        return None
    return LayerGraph(section.name, layers, [tuple(e) for e in edges],
                      seq_len=section.seq_len or seq_len, source="spec file")


#: (part, total) pairs of a layer's fields (:class:`autopar_opt.ir.graph.Layer` documents
#: each part as "the part of" / "part of" its total).
LAYER_PARTS = (("act_replicated_bytes", "act_bytes"), ("act_attn_bytes", "act_bytes"),
               ("act_gemm_input_bytes", "act_bytes"), ("expert_act_bytes", "act_bytes"),
               ("act_gemm_input_replicated_bytes", "act_gemm_input_bytes"),
               ("gemm_output_replicated_bytes", "gemm_output_bytes"),
               ("expert_params", "params"), ("expert_flops_fwd", "flops_fwd"))


def _parts_ok(spec: Any, i: int, out: ProblemList) -> bool:
    """A part is at most its total (QA round 10: ``act_attn_bytes`` above ``act_bytes``
    priced -3.44 GiB of memory per device, ``expert_params`` above ``params`` -0.725 B
    active parameters)."""
    ok = True
    for part, total in LAYER_PARTS:
        a, b = getattr(spec, part, 0) or 0, getattr(spec, total, 0) or 0
        if a > b:
            out.add(f"model.layers[{i}].{part}", a, f"is part of {total} ({b:g}) and cannot "
                    "exceed it", f"give {part} at most {total}, or raise {total} to include it")
            ok = False
    return ok


def _gemm_kernels_ok(spec: Any, i: int, out: ProblemList) -> bool:
    """A layer that does GEMM work (a kind outside
    :data:`~autopar_opt.cost.compute.MEMORY_BOUND_KINDS` with forward FLOPs)
    runs at least one GEMM kernel per forward pass: ``gemm_kernels`` and
    ``gemm_kernels_unfused``, where given, are at least 1 (0 would price its
    FLOPs without the per-kernel latency; the schema already rejects < 0)."""
    kind = LayerKind(getattr(spec, "kind", LayerKind.generic))
    if kind in MEMORY_BOUND_KINDS or (getattr(spec, "flops_fwd", 0.0) or 0.0) <= 0:
        return True
    ok = True
    for key in ("gemm_kernels", "gemm_kernels_unfused"):
        value = getattr(spec, key, None)
        if value is not None and value < 1:
            out.add(f"model.layers[{i}].{key}", value, f"must be at least 1 on a "
                    f"{kind.value} layer with flops_fwd > 0: its FLOPs run as GEMM kernels",
                    f"give the GEMM kernels of one forward pass (e.g. {key}: 4 for a "
                    "transformer block), or drop the key for the kind's count")
            ok = False
    return ok


def _attach_measured(graph: LayerGraph, measured: list[MeasuredSpec],
                     out: ProblemList) -> LayerGraph | None:
    """Return ``graph`` with measured costs attached to the named layers."""
    names = [layer.name for layer in graph.layers]
    table: dict[str, dict[int, MeasuredCost]] = {}
    ok = True
    for i, m in enumerate(measured):
        key = f"model.measured[{i}]"
        if m.layer not in names:
            out.add(f"{key}.layer", m.layer, "measurement for an unknown layer",
                    f"use a layer name of the model{did_you_mean(m.layer, names)}")
            ok = False
            continue
        if m.tp in table.setdefault(m.layer, {}):
            out.add(f"{key}.tp", m.tp, f"second measurement of layer {m.layer!r} at tp={m.tp}",
                    "keep one measurement per (layer, tp)")
            ok = False
            continue
        table[m.layer][m.tp] = MeasuredCost(m.tp, m.fwd_ms_per_sample, m.bwd_ms_per_sample,
                                            m.act_bytes_per_sample)
    if not ok:
        return None
    if not table:
        return graph
    layers = [replace(layer, measured=tuple(sorted(table[layer.name].values(), key=lambda c: c.tp)))
              if layer.name in table else layer for layer in graph.layers]
    return LayerGraph(graph.name, layers, list(graph.edges), seq_len=graph.seq_len,
                      source=graph.source, causal=graph.causal, fixed_tokens=graph.fixed_tokens)


def build_graph(section: ZooModelSpec | HfModelSpec | ExplicitModelSpec, seq_len: int | None,
                out: ProblemList, flash_attention: bool | None = None) -> LayerGraph | None:
    """The model's layer graph, or None after recording the problems in ``out``;
    ``flash_attention`` (zoo and Hugging Face models) overrides the model's own
    (:mod:`autopar_opt.spec.attention_rule`)."""
    if isinstance(section, ZooModelSpec):
        graph = _zoo_graph(section, seq_len, out, flash_attention)
    elif isinstance(section, HfModelSpec):
        graph = _hf_graph(section, seq_len, Path(out.file_of("model")).parent, out,
                          flash_attention)
    else:
        graph = _explicit_graph(section, seq_len, out)
    if graph is None:
        return None
    if len(graph.layers) > limits.MAX_LAYERS:
        out.add("model", graph.name, f"{len(graph.layers)} layers exceed the limit of "
                f"{limits.MAX_LAYERS} layers", "use a smaller model (fewer layers)")
        return None
    if not any(layer.is_moe for layer in graph.layers):
        for key, unset in (("capacity_factor", None), ("load_imbalance", 1.0)):
            value = getattr(section, key, unset)
            if value != unset:          # a dense model routes no token: it would change nothing
                out.add(f"model.{key}", value, f"is set on a model without experts ({graph.name} "
                        "is dense): it sets the load of a mixture-of-experts router and would "
                        "change nothing", f"drop {key}, or use a mixture-of-experts model")
                return None
    capacity = getattr(section, "capacity_factor", None)
    imbalance = getattr(section, "load_imbalance", 1.0)
    if capacity is not None and imbalance != 1.0:
        # MoeDims.load_factor takes the padded capacity; the imbalance was dropped without a
        # word (QA round 11: capacity_factor 1.25 with load_imbalance 1.5 priced a load of 1.25)
        out.add("model.load_imbalance", imbalance, f"is set together with capacity_factor = "
                f"{capacity:g}: a capacity factor pads every expert to that load (tokens above "
                "it are dropped), so the busiest rank's load is the capacity factor and "
                "load_imbalance (the load of a dropless router) would be ignored",
                "state one of them: capacity_factor for a token-dropping router, "
                "load_imbalance for a dropless one")
        return None
    graph = _attach_measured(graph, section.measured, out)
    if graph is not None and not _has_work(graph):
        out.add("model.layers", None, "every layer has zero FLOPs and no measured time: the model "
                "has no work to plan (and its throughput would divide by zero)",
                "give the layers' FLOPs per sample, e.g. flops_fwd: 1.2e12, flops_bwd: 2.4e12")
        return None
    return graph


def _has_work(graph: LayerGraph) -> bool:
    """True when some layer has FLOPs or a positive measured time."""
    return any(layer.flops_fwd + layer.flops_bwd > 0
               or any(m.fwd_ms_per_sample + m.bwd_ms_per_sample > 0 for m in layer.measured)
               for layer in graph.layers)
