"""``autopar model SPEC_OR_CONFIG``: what a model import built.

Lets a user check an import against the model card: layers by kind, total
and active parameter counts (MoE: a token uses ``top_k`` of the routed
experts), per-layer FLOPs and activation bytes per sample.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopar_opt.core import limits
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.ir.arch import describe, positions_notice
from autopar_opt.ir.window import windows_text

#: Sequence length for a bare config.json that states no maximum length of its own.
DEFAULT_SEQ_LEN = 4096


def load_graph(path: str, seq_len: int | None) -> tuple[LayerGraph, str]:
    """The graph of a spec file, or of a Hugging Face config (file or directory, or
    the name of a bundled one: :mod:`autopar_opt.model_zoo.hf_bundled`).

    Returns the graph and a note on where its sequence length came from.
    Raises :class:`~autopar_opt.spec.SpecError` for a bad spec and
    :class:`~autopar_opt.model_zoo.hf_config.HfConfigError` for a bad config.
    """
    from autopar_opt.model_zoo.hf_config import (HfConfigError, build_hf_graph, load_hf_config,
                                                 max_positions)

    from autopar_opt.model_zoo.hf_bundled import is_bare_name, is_hub_id, is_url, resolve

    from autopar_opt.model_zoo.registry import list_models
    from autopar_opt.core.reading import refuse_empty_path

    refuse_empty_path(path)     # "" was "config.json: no such file" (QA round 12)
    zoo = tuple(m.name for m in list_models())
    p, label, problem = resolve(path, Path(path), zoo)   # a bare name: a bundled config
    if problem is not None and is_bare_name(path):     # a missing path: the spec reader says so
        if path in zoo:                                # or a zoo model
            return _zoo_graph(path, seq_len)
        raise HfConfigError(problem)
    if problem is not None and (is_hub_id(path) or is_url(path)):   # not a spec '.5-7B'
        raise HfConfigError(problem)
    if p.is_dir() or (p.suffix == ".json" and _is_hf_config(p)):
        config, origin = load_hf_config(p)
        origin = label or origin
        if config.get("model_type") == "vit":     # tokens come from the image, not a length
            if seq_len is not None:               # QA round 10: ignored without a word
                _refuse_seq_len(seq_len, f"{path} is a vision transformer: its token count "
                                "is its image's (patches and the class token)")
            graph = build_hf_graph(config, None, origin=str(origin))
            return graph, f"seq_len {graph.seq_len} (patches of the image, and the class token)"
        own = max_positions(config)
        s = seq_len or (own[1] if own else DEFAULT_SEQ_LEN)
        note = (f"seq_len {s}" if seq_len else
                f"seq_len {s} (the model's own maximum, {own[0]}; --seq-len to change)" if own
                else f"seq_len {s} (default: the config states no maximum; --seq-len to change)")
        if label and path in zoo:      # both: say which was built (QA round 10)
            note += (f"; this is the bundled config {label}: the zoo model {path!r} of the same "
                     "name (model: {zoo: " + path + "}) takes its own default length")
        return build_hf_graph(config, s, origin=str(origin)), note
    from autopar_opt.spec import load_spec

    spec = load_spec(p)
    if seq_len is not None:         # else silently ignored: the spec's own length is used
        _refuse_seq_len(seq_len, f"applies to a bare config.json; {path} is a spec (its "
                        f"sequence length is {spec.graph.seq_len})",
                        "set training.seq_len in the spec, or drop --seq-len")
    training = spec.raw.get("training") if isinstance(spec.raw, dict) else None
    stated = training.get("seq_len") if isinstance(training, dict) else None
    # the spec may state none: the model's own is then taken (QA round 10: "(from the spec)")
    if spec.graph.seq_len is None:         # QA round 10: "seq_len None (from the spec)"
        return spec.graph, "no sequence length (the model states none, nor the spec)"
    return spec.graph, (f"seq_len {spec.graph.seq_len} (training.seq_len)" if stated is not None
                        else f"seq_len {spec.graph.seq_len} (the model's own; the spec states "
                             "no training.seq_len)")


def _refuse_seq_len(seq_len: int, rule: str, fix: str = "drop --seq-len") -> None:
    """Exit 2 naming ``--seq-len`` with ``rule`` and ``fix`` (the option does not apply)."""
    from autopar_opt.cli.options import raise_if_any
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    raise_if_any([SpecProblem(COMMAND_LINE, "--seq-len", seq_len, rule, fix)])


def _zoo_graph(name: str, seq_len: int | None) -> tuple[LayerGraph, str]:
    """The zoo model ``name`` (``autopar zoo list``'s Models, as ``model: {zoo: NAME}``
    builds it)."""
    from autopar_opt.model_zoo.registry import build_model

    try:
        # seq_len=, not overrides: only then does the build keep the model's published
        # length as its context, so that a longer one is said (registry.build_model)
        graph = build_model(name, seq_len=seq_len)
    except ValueError as exc:       # a vision model's token count is its image's (QA round 10)
        if not seq_len or "seq_len" not in str(exc):
            raise
        _refuse_seq_len(seq_len, f"zoo model {name!r} has no sequence length to set (its input "
                        "is an image, or it has none)")
        raise
    return graph, (f"seq_len {graph.seq_len}" if seq_len else
                   f"seq_len {graph.seq_len} (the zoo model's; --seq-len to change)")


def _is_hf_config(path: Path) -> bool:
    """Whether ``path`` holds a Hugging Face config (a JSON object with ``model_type``);
    a file the bounded reader refuses counts as one, so that load_hf_config says why."""
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    try:
        data = reading.read_json(path, reading.HF_CONFIG, parse_int=limits.read_int)
    except SpecError as exc:      # a config.json with a syntax error is still a config
        return "JSON syntax error" not in exc.problems[0].rule or path.name == "config.json"
    if not isinstance(data, dict):
        return False
    # a config without model_type is still one (QA round 9: it was read as a spec with 25
    # unknown keys): its architecture keys and none of a spec's sections
    from autopar_opt.model_zoo.hf_other_files import other_file

    # a tokenizer's, generation or adapter config from a model repository: said as one by
    # the build (QA round 34: read as a spec with seven unknown keys)
    spec = bool({"model", "cluster", "training"} & set(data))
    return "model_type" in data or (not spec and (other_file(data) is not None
                                                  or bool(HF_SHAPE_KEYS & set(data))))


#: Keys only a Hugging Face config has at its top level (the sizes every family states).
HF_SHAPE_KEYS = frozenset(("hidden_size", "num_attention_heads", "num_hidden_layers", "n_embd",
                           "n_layer", "d_model", "architectures", "vocab_size"))


def _kind(layer: Any) -> str:
    return layer.kind.value if isinstance(layer.kind, LayerKind) else str(layer.kind)


def model_summary(graph: LayerGraph) -> dict[str, Any]:
    """A JSON-able summary: name, layers, by-kind counts, total/active params.

    ``params_active`` counts every parameter a token uses, embedding table
    included (the Mixtral/Qwen convention); ``params_active_no_embedding``
    leaves out the input embedding lookups (DeepSeek's convention).
    """
    layers, by_kind = [], {}
    for layer in graph.layers:
        kind = _kind(layer)
        entry = by_kind.setdefault(kind, {"count": 0, "params": 0, "params_active": 0.0})
        entry["count"] += 1
        entry["params"] += layer.params
        entry["params_active"] += layer.active_params
        row = {"name": layer.name, "kind": kind, "params": layer.params,
               "params_active": layer.active_params, "flops_fwd": layer.flops_fwd,
               "flops_bwd": layer.flops_bwd, "act_bytes": layer.act_bytes}
        if layer.is_moe:
            row.update(num_experts=layer.num_experts, top_k=layer.top_k,
                       expert_params=layer.expert_params, expert_load=layer.expert_load)
        layers.append(row)
    embed = sum(layer.params for layer in graph.layers if layer.kind is LayerKind.embedding)
    return {"name": graph.name, "source": graph.source, "seq_len": graph.seq_len,
            "is_chain": graph.is_chain(), "layers": layers, "by_kind": by_kind,
            "params_total": graph.total_params(), "params_active": graph.active_params(),
            "params_active_no_embedding": graph.active_params() - embed,
            # a tied output projection shares the embedding's table, so the figure without
            # it leaves out the projection too (QA round 11: the label said "input embedding")
            "tied_embeddings": any(layer.tied_to for layer in graph.layers),
            "flops_per_sample": graph.flops_per_sample(),
            "attention_windows": windows_text(graph.attention_windows()),
            "architecture": describe(graph.arch) if graph.arch else None,
            "assumed": list(graph.assumed),
            # a sequence beyond the model's stated context, said as solve and estimate say it
            # (QA round 11: `autopar model llama3-8b --seq-len 32768` said nothing)
            "notices": positions_notice(graph.arch, graph.seq_len) if graph.seq_len else [],
            "not_priced": list(graph.arch.unpriced) if graph.arch else []}


def _fmt(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3f} {unit}"
    return f"{x:.0f}"


def summary_lines(summary: dict[str, Any], note: str) -> list[str]:
    """Human-readable lines of :func:`model_summary`."""
    s = summary
    lines = [f"model:   {s['name']}  ({len(s['layers'])} layers, {note})",
             f"source:  {s['source']}",
             f"params:  total {_fmt(s['params_total'])}, active per token "
             f"{_fmt(s['params_active'])} ("
             + ("without the embedding table, which the tied output projection shares, "
                if s.get("tied_embeddings") else "without input embedding ")
             + f"{_fmt(s['params_active_no_embedding'])})",
             f"FLOPs per sample (fwd+bwd): {_fmt(s['flops_per_sample'])}",
             *([f"arch:    {s['architecture']}"] if s.get("architecture") else []),
             *([f"attention: {s['attention_windows']}"] if s.get("attention_windows") else []),
             *[f"assumed: {a}" for a in s.get("assumed", [])],
             *[f"notice:  {n}" for n in s.get("notices", [])],
             *([f"not priced (small element-wise work): {'; '.join(s['not_priced'])}"]
               if s.get("not_priced") else []),
             "", "layers by kind:"]
    for kind, e in s["by_kind"].items():
        lines.append(f"  {kind:18s} x{e['count']:<4d} params {_fmt(e['params']):>12s}"
                     f"   active {_fmt(e['params_active']):>12s}")
    lines += ["", f"  {'layer':10s} {'kind':18s} {'params':>12s} {'FLOPs fwd':>12s} "
              f"{'act bytes':>12s}  experts"]
    for row in s["layers"]:
        moe = (f"{row['top_k']}/{row['num_experts']} (load {row['expert_load']:g})"
               if "num_experts" in row else "")
        lines.append(f"  {row['name']:10s} {row['kind']:18s} {_fmt(row['params']):>12s} "
                     f"{_fmt(row['flops_fwd']):>12s} {_fmt(row['act_bytes']):>12s}  {moe}")
    return lines


def config_error_parts(message: str, origin: str) -> tuple[str, Any, str, str]:
    """(key, value, rule, fix) of a :class:`~autopar_opt.model_zoo.hf_config.HfConfigError`
    message, for the JSON form of the error (``--json``): its messages read ``FILE: KEY =
    VALUE ...rule... (fix: ...)``. The key and value are read where the rule starts with
    ``KEY = VALUE`` (else empty), the fix is the message's own. QA round 11: the JSON problem
    carried an empty key, a null value, the whole message (fix included) as its rule and a
    generic fix instead of the message's."""
    import re

    text = message
    for prefix in (f"{origin}: ", f"{Path(origin)}: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    rule, fix = text, "use the model's published config.json"
    cut = text.rfind(" (fix: ")
    if cut >= 0 and text.endswith(")"):
        rule, fix = text[:cut], text[cut + len(" (fix: "):-1]
    found = re.match(r"([A-Za-z_][\w.\[\]]*) = (\[[^\]]*\]|\{[^}]*\}|\"[^\"]*\"|'[^']*'|"
                     r"[^\s:,;(]+)", rule)
    if found is None:        # "needs key 'vocab_size', which is missing", "key 'x' is not ..."
        named = re.search(r"(?:needs key|^key) '([^']+)'", rule)
        return (named.group(1) if named else ""), None, rule, fix
    value: Any = found.group(2)
    try:
        value = json.loads(value)
    except ValueError:
        value = value.strip("'")
    return found.group(1), value, rule, fix

