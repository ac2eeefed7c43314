"""ONNX and torch.fx models as operator graphs with iteration spaces.

Each node of the imported graph becomes an :class:`~autopar_opt.ir.operators.Operator`
whose iteration space follows from its kind and the tensor shapes (ONNX shape
inference; ``torch.fx`` ``ShapeProp``):

* MatMul / Gemm / ``nn.Linear`` / ``matmul`` / ``bmm``: the output's dimensions (the first
  named ``b``) plus the reduction ``k``; the weight a parameter;
* Conv (``nn.Conv2d``): ``(b, c, h, w, r, s, n)`` as PaSE models it, spatial and filter
  dimensions fixed (no halo exchange); grouped convolutions keep channels whole;
* BatchNorm / LayerNorm: a normalisation with its statistics dimensions; Softmax: its axis;
* pooling: ``(b, c, h, w)``, spatial fixed; flatten / reshape that merges trailing axes: a
  view with the merged axis split only on its outer dimension;
* element-wise operators (Add, Mul, Relu, GELU, Sigmoid, Tanh, Dropout, ...): the output's
  dimensions, broadcast operands aligned on trailing axes;
* anything else is *opaque*: it runs whole on every device (all its dimensions fixed) and
  reads its inputs whole — the search can still shard everything around it, and the
  output says how many operators were opaque.

Element size: the training dtype's (the model's own fp32 shapes say nothing about the
precision it trains in). FLOPs: ``2·numel(out)·K`` for GEMMs and convolutions, one per
output element otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from autopar_opt.ir.operators import Operand, Operator, OperatorGraph, OpKind

#: element-wise operator names (ONNX op types and torch function / module names, lower case)
ELEMENTWISE = {"add", "sub", "mul", "div", "relu", "gelu", "sigmoid", "tanh", "dropout", "identity",
               "silu", "leakyrelu", "elu", "erf", "sqrt", "pow", "neg", "iadd", "truediv", "hardtanh",
               "relu6", "clip", "cast", "exp", "log"}


def _names(rank: int, lead: str = "b") -> list[str]:
    """Dimension names of a tensor: the first ``b`` (the batch), then ``a1, a2, ...``."""
    return [lead] + [f"a{i}" for i in range(1, rank)]


class GraphBuilder:
    """Turns (kind, shapes, sources) into operators; tracks tensors by name."""

    def __init__(self, name: str, source: str) -> None:
        self.g = OperatorGraph(name, source=source)
        self.tensors: dict[str, tuple[int | None, tuple[int, ...]]] = {}
        self.opaque = 0

    def value(self, name: str) -> tuple[int | None, tuple[int, ...]] | None:
        return self.tensors.get(name)

    def _add(self, out: str, op: Operator) -> None:
        v = self.g.add(op)
        self.tensors[out] = (v, op.out_shape)

    def gemm(self, name: str, out: str, x: str, w_shape: tuple[int, ...] | None, y: str | None,
             out_shape: tuple[int, ...], transposed_weight: bool = False, bias: bool = False) -> None:
        """``out = x @ W`` (W a parameter of ``w_shape``) or ``x @ y`` (both produced)."""
        src, xs = self.tensors[x]
        k = xs[-1]
        lead = list(out_shape[:-1])
        n = out_shape[-1]
        names = _names(len(lead)) if lead else []
        dims = list(zip(names, lead)) + [("n", n), ("k", k)]
        ins = [Operand(xs, tuple(names[len(names) - (len(xs) - 1):]) + ("k",) if len(xs) > 1 else ("k",), src)]
        if w_shape is not None:
            ins.append(Operand((n, k), ("n", "k"), None, True) if transposed_weight
                       else Operand((k, n), ("k", "n"), None, True))
            if bias:
                ins.append(Operand((n,), ("n",), None, True))
        else:
            ysrc, ys = self.tensors[y]
            yb = names[len(names) - (len(ys) - 2):] if len(ys) > 2 else []
            ins.append(Operand(ys, tuple(yb) + ("k", "n"), ysrc))
        self._add(out, Operator(name, OpKind.gemm, tuple(dims), tuple(ins), tuple(out_shape),
                                tuple(names) + ("n",), 2.0 * math.prod(out_shape) * k))

    def conv(self, name: str, out: str, x: str, w_shape: tuple[int, ...], out_shape: tuple[int, ...],
             groups: int) -> None:
        src, (b, c, h, w) = self.tensors[x]
        n, cg, kh, kw = w_shape
        _, _, ho, wo = out_shape
        fixed = {"h", "w", "r", "s"} | ({"c", "n"} if groups > 1 else set())
        dims = (("b", b), ("c", c), ("h", ho), ("w", wo), ("r", kh), ("s", kw), ("n", n))
        ins = (Operand((b, c, h, w), ("b", "c", None, None), src),
               Operand(w_shape, ("n", None if groups > 1 else "c", "r", "s"), None, True))
        self._add(out, Operator(name, OpKind.conv, dims, ins, tuple(out_shape), ("b", "n", "h", "w"),
                                2.0 * b * ho * wo * n * cg * kh * kw, frozenset(fixed)))

    def pointwise(self, name: str, out: str, kind: OpKind, inputs: list[str], out_shape: tuple[int, ...],
                  stats: tuple[int, ...] = (), params: tuple[int, ...] = (), fixed_axes: tuple[int, ...] = ()
                  ) -> None:
        """An operator over the output's dimensions (element-wise, norms, softmax, pooling)."""
        names = _names(len(out_shape)) if out_shape else []
        ins = []
        for x in inputs:
            got = self.tensors.get(x)
            if got is None:
                continue
            src, xs = got
            off = len(out_shape) - len(xs)
            axes = tuple(names[off + i] if 0 <= off + i < len(names) and xs[i] == out_shape[off + i]
                         else None for i in range(len(xs)))
            if kind is OpKind.pool:
                axes = tuple(a if i < 2 else None for i, a in enumerate(axes))
            ins.append(Operand(tuple(xs), axes, src))
        if params:
            ins.append(Operand(tuple(out_shape[i] for i in params), tuple(names[i] for i in params), None, True))
        self._add(out, Operator(name, kind, tuple(zip(names, out_shape)), tuple(ins), tuple(out_shape),
                                tuple(names), float(math.prod(out_shape) if out_shape else 1),
                                frozenset(names[i] for i in fixed_axes), tuple(names[i] for i in stats)))

    def reshape(self, name: str, out: str, x: str, out_shape: tuple[int, ...]) -> None:
        """A flatten of trailing axes as a view; any other reshape is opaque."""
        src, xs = self.tensors[x]
        k = len(out_shape) - 1
        if len(xs) > len(out_shape) and tuple(xs[:k]) == tuple(out_shape[:k]) and \
                math.prod(xs[k:]) == out_shape[k]:
            names = _names(len(xs))
            out_axes = tuple(names[:k]) + (tuple(names[k:]),)
            self._add(out, Operator(name, OpKind.reshape, tuple(zip(names, xs)),
                                    (Operand(tuple(xs), tuple(names), src),), tuple(out_shape), out_axes,
                                    0.0, frozenset(names[k + 1:])))
            return
        self.opaque_op(name, out, [x], out_shape)

    def opaque_op(self, name: str, out: str, inputs: list[str], out_shape: tuple[int, ...]) -> None:
        """Runs whole on every device, reading its inputs whole."""
        self.opaque += 1
        names = _names(len(out_shape)) if out_shape else []
        ins = tuple(Operand(tuple(self.tensors[x][1]), (None,) * len(self.tensors[x][1]), self.tensors[x][0])
                    for x in inputs if x in self.tensors)
        self._add(out, Operator(name, OpKind.elementwise, tuple(zip(names, out_shape)), ins,
                                tuple(out_shape), tuple(names), float(math.prod(out_shape) if out_shape else 1),
                                frozenset(names), role="opaque"))


# ---------------------------------------------------------------- torch.fx
def fx_operator_graph(module: Any, *inputs: Any, name: str = "module") -> OperatorGraph:
    """Trace ``module`` (torch.fx) with example ``inputs`` into an operator graph."""
    import contextlib
    import io
    import operator as pyop

    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    gm = torch.fx.symbolic_trace(module)
    with contextlib.redirect_stderr(io.StringIO()):
        ShapeProp(gm).propagate(*inputs)
    mods = dict(gm.named_modules())
    b = GraphBuilder(name, "torch.fx trace")

    def shape(node) -> tuple[int, ...]:
        m = node.meta.get("tensor_meta")
        return tuple(int(d) for d in m.shape) if m is not None and hasattr(m, "shape") else ()

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            b.tensors[node.name] = (None, shape(node))
            continue
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        out = shape(node)
        args = [a.name for a in node.all_input_nodes if a.name in b.tensors]
        if not out:
            b.opaque_op(node.name, node.name, args, out)
            continue
        target = node.target
        mod = mods.get(target) if node.op == "call_module" else None
        tname = (type(mod).__name__ if mod is not None else getattr(target, "__name__", str(target))).lower()
        if isinstance(mod, torch.nn.Linear):
            b.gemm(node.name, node.name, args[0], tuple(mod.weight.shape), None, out, True, mod.bias is not None)
        elif isinstance(mod, torch.nn.Conv2d):
            b.conv(node.name, node.name, args[0], tuple(mod.weight.shape), out, mod.groups)
        elif isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
            b.pointwise(node.name, node.name, OpKind.norm, args, out, stats=(0,) + tuple(range(2, len(out))),
                        params=(1,))
        elif isinstance(mod, torch.nn.LayerNorm):
            nd = len(mod.normalized_shape)
            last = tuple(range(len(out) - nd, len(out)))
            b.pointwise(node.name, node.name, OpKind.norm, args, out, stats=last, params=last)
        elif isinstance(mod, (torch.nn.MaxPool2d, torch.nn.AvgPool2d, torch.nn.AdaptiveAvgPool2d)):
            b.pointwise(node.name, node.name, OpKind.pool, args, out, fixed_axes=tuple(range(2, len(out))))
        elif isinstance(mod, torch.nn.Softmax) or tname == "softmax":
            dim = mod.dim if mod is not None else node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else -1)
            b.pointwise(node.name, node.name, OpKind.softmax, args, out, stats=(int(dim) % len(out),))
        elif isinstance(mod, torch.nn.Flatten) or tname in ("flatten", "view", "reshape"):
            b.reshape(node.name, node.name, args[0], out)
        elif target in (torch.matmul, torch.bmm, pyop.matmul) or tname in ("matmul", "bmm"):
            b.gemm(node.name, node.name, args[0], None, args[1], out)
        elif tname in ELEMENTWISE or target in (pyop.add, pyop.mul, pyop.sub, pyop.truediv):
            b.pointwise(node.name, node.name, OpKind.elementwise, args, out)
        else:
            b.opaque_op(node.name, node.name, args, out)
    b.g.source = f"torch.fx trace of {name}; {b.opaque} opaque operator(s)"
    return b.g


# ---------------------------------------------------------------- ONNX
def onnx_operator_graph(path: str | Path) -> OperatorGraph:
    """Read and shape-infer an ONNX file into an operator graph."""
    import onnx

    from autopar_opt.placement.importers.onnx import check_sorted, read_model

    model = onnx.shape_inference.infer_shapes(read_model(path))   # within reading.ONNX
    check_sorted(model, path)
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = tuple(d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim)
    inits = {i.name: tuple(int(d) for d in i.dims) for i in model.graph.initializer}
    b = GraphBuilder(Path(str(path)).stem, f"ONNX {Path(str(path)).name}")
    for inp in model.graph.input:
        if inp.name not in inits and inp.name in shapes:
            b.tensors[inp.name] = (None, shapes[inp.name])
    used: set[str] = set()
    renamed = 0
    for i, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{i}"
        if name in used:      # ONNX names are for diagnostics only and may repeat (the checker
            renamed += 1      # accepts it); an operator graph needs unique names (QA round 35)
            name = _unique(f"{name}_{i}", used)
        used.add(name)
        out = shapes.get(node.output[0], ())
        acts = [x for x in node.input if x in b.tensors]
        op = node.op_type.lower()
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if not out or not acts:
            if acts or out:
                b.opaque_op(name, node.output[0], acts, out)
            continue
        if op in ("matmul", "gemm") and len(node.input) > 1 and node.input[1] in inits:
            w = inits[node.input[1]]
            trans = bool(attrs.get("transB", 0))
            b.gemm(name, node.output[0], acts[0], w, None, out, trans, len(node.input) > 2)
        elif op == "matmul" and len(acts) == 2:
            b.gemm(name, node.output[0], acts[0], None, acts[1], out)
        elif op == "conv" and node.input[1] in inits:
            b.conv(name, node.output[0], acts[0], inits[node.input[1]], out, int(attrs.get("group", 1)))
        elif op == "batchnormalization":
            b.pointwise(name, node.output[0], OpKind.norm, acts[:1], out, stats=(0,) + tuple(range(2, len(out))),
                        params=(1,))
        elif op == "layernormalization":
            axis = int(attrs.get("axis", -1)) % len(out)
            last = tuple(range(axis, len(out)))
            b.pointwise(name, node.output[0], OpKind.norm, acts[:1], out, stats=last, params=last)
        elif op in ("maxpool", "averagepool", "globalaveragepool"):
            b.pointwise(name, node.output[0], OpKind.pool, acts, out, fixed_axes=tuple(range(2, len(out))))
        elif op == "softmax":
            b.pointwise(name, node.output[0], OpKind.softmax, acts, out,
                        stats=(int(attrs.get("axis", -1)) % len(out),))
        elif op in ("flatten", "reshape"):
            b.reshape(name, node.output[0], acts[0], out)
        elif op in ELEMENTWISE:
            b.pointwise(name, node.output[0], OpKind.elementwise, acts, out)
        else:
            b.opaque_op(name, node.output[0], acts, out)
        for extra in node.output[1:]:
            b.tensors.setdefault(extra, b.tensors[node.output[0]])
    b.g.source = f"ONNX {Path(str(path)).name}; {b.opaque} opaque operator(s)" + (
        f"; {renamed} repeated node name(s) suffixed with the node's index" if renamed else "")
    return b.g


def _unique(name: str, used: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``, ... whichever is not in ``used`` yet."""
    out, k = name, 1
    while out in used:
        k += 1
        out = f"{name}_{k}"
    return out


def graph_from_file(kind: str, ref: str, inputs: list[list[int]] | None, kwargs: dict, base: Path,
                    file: str) -> OperatorGraph:
    """``problem.graph.onnx`` / ``problem.graph.torch`` of a spec -> the operator graph
    (SpecError naming the key on a missing file, a missing extra or a failed trace)."""
    from autopar_opt.core.errors import SpecError, SpecProblem

    def bad(key: str, value: Any, rule: str, fix: str) -> SpecError:
        return SpecError([SpecProblem(file, key, value, rule, fix)])

    if kind == "onnx":
        from autopar_opt.core.reading import describe_path

        path = base / ref
        if describe_path(path) == "does not exist":       # a FIFO or a device: reading.ONNX's
            raise bad("problem.graph.onnx", ref, f"{path} does not exist", "give the ONNX file's path "
                      "relative to the spec")
        import importlib.util
        if importlib.util.find_spec("onnx") is None:
            raise bad("problem.graph.onnx", ref, "the ONNX importer needs the optional 'onnx' package",
                      "pip install 'autopar-opt[onnx]'")
        try:        # a directory, a device, a FIFO, over 2 GiB: refused by reading.ONNX
            graph = onnx_operator_graph(path)
        except SpecError as exc:
            raise SpecError([SpecProblem(file, "problem.graph.onnx", ref, f"{path}: {p.rule}", p.fix)
                             for p in exc.problems]) from None
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, onnx's InferenceError
            raise bad("problem.graph.onnx", ref, f"{path} is not a readable ONNX model "
                      f"({exc.__class__.__name__}: {str(exc)[:160]})",
                      "give an .onnx model file as torch.onnx.export or onnx.save writes it") from None
        if not graph.ops:           # an empty file parses as an empty model
            raise bad("problem.graph.onnx", ref, f"{path} holds no operator nodes",
                      "give an .onnx model file as torch.onnx.export or onnx.save writes it")
        return graph
    from autopar_opt.placement.importers.torch_fx import (TOO_LARGE_FIX, load_callable,
                                                          too_large, trace_reason)
    if not inputs:
        raise bad("problem.graph.inputs", inputs, "a torch graph needs its input shapes",
                  "write inputs: [[8, 16]] (batch first)")
    if any(d < 1 for shape in inputs for d in shape) or any(not shape for shape in inputs):
        raise bad("problem.graph.inputs", inputs, "every input shape must be a non-empty list of "
                  "positive integers", "write inputs: [[8, 16]] (batch first)")
    if too_large(inputs):          # torch.zeros of each shape is allocated before the trace
        raise bad("problem.graph.inputs", inputs, too_large(inputs) or "", TOO_LARGE_FIX)
    try:
        import torch
    except ImportError:
        raise bad("problem.graph.torch", ref, "the torch.fx importer needs PyTorch",
                  "pip install 'autopar-opt[torch]'") from None
    factory = load_callable(ref, base, file, "problem.graph.torch")
    try:
        module = factory(**kwargs)
        module.eval()
        with torch.no_grad():
            return fx_operator_graph(module, *(torch.zeros(*s) for s in inputs), name=ref.rpartition(":")[2])
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - tracing user code
        raise bad("problem.graph.torch", ref, f"cannot be built and traced by torch.fx ({trace_reason(exc)})",
                  "check kwargs/inputs; fx needs a module without data-dependent control flow") from None
