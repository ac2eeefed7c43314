"""``torch.fx`` importer (optional extra ``torch``): an ``nn.Module`` -> operator graph.

The module is traced with ``torch.fx.symbolic_trace`` and its tensor shapes
propagated with ``torch.fx.passes.shape_prop.ShapeProp`` on an example input.
Every ``call_module`` / ``call_function`` / ``call_method`` node becomes an
operator (placeholders, attributes and the output are not placed). FLOPs from
shapes: ``nn.Linear`` ``2·numel(out)·in_features``; ``nn.Conv{1,2,3}d``
``2·numel(out)·(C_in/groups)·Πkernel``; ``matmul``/``bmm``/``@``
``2·numel(out)·K``; one operation per output element otherwise. Parameters:
the called module's own parameters. Costs then follow :mod:`autopar_opt.placement.importers.zoo`.

Spec entry (``autopar place SPEC``; :func:`spec_op_graph`)::

    placement:
      graph:
        torch: torchvision.models:resnet18     # or model.py:Net (a file next to the spec)
        kwargs: {num_classes: 10}              # optional, passed to the callable
        inputs: [[1, 3, 224, 224]]             # one shape per forward argument (float32 zeros)
      devices: [{type: A100-80GB, count: 4}]

The reference is imported and called (this runs the named code, as loading any
PyTorch model does); ``torch.export``-style inputs are not needed: fx traces
the module symbolically.
"""

from __future__ import annotations

import contextlib
import io
import math
import operator
from pathlib import Path
from typing import Any

from autopar_opt.model_zoo.op_graphs import OpGraph


#: The most elements the example inputs of a trace may hold together: ``torch.zeros`` of
#: each shape is allocated and the module run on it (ShapeProp), so a spec's shape of
#: 10^9 would take gigabytes before any check could run (issue 33, every reader bounded).
INPUT_ELEMENTS_AT_MOST = 2**27


TOO_LARGE_FIX = ("trace with a small example (batch 1 or 2): the operator graph and its FLOPs "
                 "scale with the shapes you then set in the spec")


def too_large(inputs: list[list[int]]) -> str | None:
    """Why the example inputs are too large to trace (None when they are not): more than
    :data:`INPUT_ELEMENTS_AT_MOST` elements together."""
    total = sum(math.prod(shape) for shape in inputs)
    if total <= INPUT_ELEMENTS_AT_MOST:
        return None
    shown = f"{total:.3g}" if total < 10**300 else "over 10^300"
    return (f"holds {shown} elements, more than the {INPUT_ELEMENTS_AT_MOST:,} (512 MiB of "
            "float32 zeros) the trace allocates at most")


def _require_torch():
    from autopar_opt.core.errors import require_module
    return require_module(("torch", "torch.fx"), "<torch>", "graph",
                          "the torch.fx importer needs PyTorch",
                          "pip install 'autopar-opt[torch]' (PyTorch CPU)")


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
    with contextlib.redirect_stderr(io.StringIO()):   # ShapeProp prints a traceback itself
        ShapeProp(gm).propagate(*example_inputs)      # before re-raising; the caller reports it
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


def load_callable(ref: str, base: Path, file: str, key: str = "placement.graph.torch") -> Any:
    """``pkg.module:name`` or ``file.py:name`` (relative to the spec's folder) -> the object."""
    import importlib
    import importlib.util

    from autopar_opt.core.errors import SpecError, SpecProblem

    mod_name, _, attr = ref.partition(":")
    bad = lambda rule, fix: SpecError([SpecProblem(file, key, ref, rule, fix)])  # noqa: E731
    if not mod_name or not attr:
        raise bad("must be 'package.module:callable' or 'file.py:callable'",
                  "write torch: torchvision.models:resnet18 or torch: model.py:Net")
    try:
        if mod_name.endswith(".py"):
            path = base / mod_name
            if not path.exists():
                raise bad(f"file not found ({path})", "give a .py file next to the spec")
            spec = importlib.util.spec_from_file_location(f"_autopar_torch_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except SpecError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code: any error, or an
        # exit it calls, becomes a spec problem (an exit would end autopar without a word)
        raise bad(f"cannot be imported ({type(exc).__name__}: {exc})",
                  "check the module path and that its dependencies are installed; a module "
                  "autopar imports must not exit (no sys.exit at import)") from None
    if not hasattr(module, attr):
        raise bad(f"{mod_name} has no attribute {attr!r}", "name a class or function defined there")
    return getattr(module, attr)


def trace_reason(exc: BaseException) -> str:
    """One line on why user code failed (the root cause; fx wraps it with a traceback text)."""
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    lines = [ln.strip() for ln in str(root).splitlines()
             if ln.strip() and not ln.startswith((" ", "Traceback", "File ", "While executing"))]
    return f"{type(root).__name__}: {(lines[-1] if lines else '')[:200]}"


def spec_op_graph(graph: dict, base: Path, file: str) -> tuple[OpGraph, str]:
    """The spec entry of the module docstring -> (operator graph, name)."""
    from autopar_opt.core.errors import SpecError, SpecProblem

    try:
        torch = _require_torch()
    except SpecError:
        raise SpecError([SpecProblem(file, "placement.graph.torch", graph.get("torch"),
                                     "the torch.fx importer needs PyTorch, which is not installed",
                                     "pip install 'autopar-opt[torch]' (PyTorch CPU), or export "
                                     "the model to ONNX and use graph: {onnx: model.onnx}")]) from None
    inputs, kwargs = graph.get("inputs"), graph.get("kwargs", {})
    probs = []
    if not (isinstance(inputs, list) and inputs and all(
            isinstance(s, list) and s and all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                              for d in s) for s in inputs)):
        probs.append(SpecProblem(file, "placement.graph.inputs", inputs,
                                 "must be a list of input shapes (lists of positive integers)",
                                 "write inputs: [[1, 3, 224, 224]]"))
    elif too_large(inputs):
        probs.append(SpecProblem(file, "placement.graph.inputs", inputs, too_large(inputs) or "",
                                 TOO_LARGE_FIX))
    if not isinstance(kwargs, dict):
        probs.append(SpecProblem(file, "placement.graph.kwargs", kwargs, "must be a mapping",
                                 "write kwargs: {num_classes: 10} or leave it out"))
    if not isinstance(graph.get("torch"), str):
        probs.append(SpecProblem(file, "placement.graph.torch", graph.get("torch"),
                                 "must be a string", "write torch: model.py:Net"))
    if probs:
        raise SpecError(probs)
    ref = graph["torch"]
    factory = load_callable(ref, base, file)
    try:
        module = factory(**kwargs)
        module.eval()
        with torch.no_grad():
            g = fx_op_graph(module, *(torch.zeros(*shape) for shape in inputs))
    except SpecError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - tracing user code (an exit too)
        raise SpecError([SpecProblem(file, "placement.graph.torch", ref,
                                     f"cannot be built and traced by torch.fx ({trace_reason(exc)})",
                                     "check kwargs/inputs; fx needs a module without data-dependent "
                                     "control flow")]) from None
    if not g.names:
        raise SpecError([SpecProblem(file, "placement.graph.torch", ref, "traced to an empty graph",
                                     "name a module that computes something")])
    return g, ref.rpartition(":")[2]
