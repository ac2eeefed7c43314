"""``torch.fx`` importer (optional extra ``learn``/torch): an ``nn.Module`` -> operator graph.

The module is traced with ``torch.fx.symbolic_trace`` and its tensor shapes
propagated with ``torch.fx.passes.shape_prop.ShapeProp`` on an example input.
Every ``call_module`` / ``call_function`` / ``call_method`` node becomes an
operator (placeholders, attributes and the output are not placed). FLOPs from
shapes: ``nn.Linear`` ``2·numel(out)·in_features``; ``nn.Conv{1,2,3}d``
``2·numel(out)·(C_in/groups)·Πkernel``; ``matmul``/``bmm``/``@``
``2·numel(out)·K``; one operation per output element otherwise. Parameters:
the called module's own parameters. Costs then follow :mod:`autopar_opt.placement.zoo`.
"""

from __future__ import annotations

import operator
from typing import Any

from autopar_opt.model_zoo.op_graphs import OpGraph


def _require_torch():
    try:
        import torch
        import torch.fx  # noqa: F401
    except ImportError as exc:
        from autopar_opt.spec.errors import SpecError, SpecProblem
        raise SpecError([SpecProblem("<torch>", "graph", None,
                                     "the torch.fx importer needs PyTorch",
                                     "pip install 'autopar-opt[learn]' (PyTorch CPU)")]) from exc
    return torch


def _meta_bytes(node) -> float:
    meta = node.meta.get("tensor_meta")
    # TensorMetadata is itself a NamedTuple: test for a shape before treating it as a list
    metas = [meta] if hasattr(meta, "shape") or meta is None else list(meta)
    total = 0.0
    for m in metas:
        if m is not None and hasattr(m, "shape"):
            numel = 1
            for d in m.shape:
                numel *= int(d)
            total += numel * m.dtype.itemsize
    return total


def _numel(node) -> float:
    m = node.meta.get("tensor_meta")
    if m is None or not hasattr(m, "shape"):
        return 0.0
    n = 1
    for d in m.shape:
        n *= int(d)
    return float(n)


def _flops(node, modules: dict[str, Any]) -> tuple[float, bool, float]:
    """(flops, is_gemm, parameter bytes) of one fx node."""
    torch = _require_torch()
    out = _numel(node)
    if node.op == "call_module":
        mod = modules[node.target]
        params = float(sum(p.numel() * p.element_size() for p in mod.parameters(recurse=False)))
        if isinstance(mod, torch.nn.Linear):
            return 2.0 * out * mod.in_features, True, params
        if isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
            k = 1
            for d in mod.kernel_size:
                k *= int(d)
            return 2.0 * out * (mod.in_channels // mod.groups) * k, True, params
        return out, False, params
    if node.target in (torch.matmul, torch.bmm, operator.matmul, "matmul", "bmm"):
        a = node.args[0]
        m = a.meta.get("tensor_meta") if hasattr(a, "meta") else None
        k = int(m.shape[-1]) if m is not None else 1
        return 2.0 * out * k, True, 0.0
    return out, False, 0.0


def fx_op_graph(module: Any, *example_inputs: Any) -> OpGraph:
    """Trace ``module`` with ``example_inputs`` into an :class:`OpGraph`."""
    _require_torch()
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp
    gm = torch.fx.symbolic_trace(module)
    ShapeProp(gm).propagate(*example_inputs)
    modules = dict(gm.named_modules())
    g = OpGraph()
    index: dict[Any, int] = {}
    for node in gm.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        inputs = sorted({index[a] for a in node.all_input_nodes if a in index})
        flops, gemm, params = _flops(node, modules)
        index[node] = g.add(node.name, inputs, flops=flops, out=_meta_bytes(node), params=params,
                            gemm=gemm)
    return g
