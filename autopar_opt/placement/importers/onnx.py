"""ONNX importer (optional extra ``onnx``): an ONNX model -> operator graph -> placement problem.

Shapes come from ONNX shape inference (``onnx.shape_inference.infer_shapes``);
every node becomes an operator whose output bytes are the inferred sizes of
its outputs, whose parameters are the initializers it reads, and whose FLOPs
are counted from the shapes for the compute-heavy operators (MatMul/Gemm:
``2·M·N·K`` per batch; Conv: ``2·N·C_out·H_out·W_out·C_in/groups·k_h·k_w``)
and as one operation per output element otherwise. Costs then follow the
zoo's roofline / α–β model (:mod:`autopar_opt.placement.importers.zoo`) on the devices
named in the spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from autopar_opt.model_zoo.op_graphs import OpGraph

if TYPE_CHECKING:
    from onnx import ModelProto

GEMM_OPS = {"MatMul", "Gemm", "Conv", "ConvTranspose", "MatMulInteger", "QLinearMatMul"}


def _require_onnx():
    from autopar_opt.core.errors import require_module
    return require_module(("onnx",), "<onnx>", "placement.graph.onnx",
                          "the ONNX importer needs the optional 'onnx' package",
                          "pip install 'autopar-opt[onnx]'")


def read_model(path: str | Path) -> ModelProto:
    """The ONNX ``ModelProto`` in ``path``, read within
    :data:`autopar_opt.core.reading.ONNX` (protobuf's 2 GiB; a directory, a device such as
    ``/dev/zero`` or a FIFO refused before any read) and parsed from those bytes. External
    weight files are never opened: the importers need the graph and the initializers'
    ``dims``, not their values. Raises SpecError (naming ``path``) for the read; protobuf's
    DecodeError for bytes that are not a model."""
    onnx = _require_onnx()
    from autopar_opt.core import reading

    return onnx.load_model_from_string(reading.read_bytes(path, reading.ONNX))


def _shapes(model) -> dict[str, tuple[list[int], int]]:
    """Tensor name -> (shape with unknown dims as 1, bytes per element)."""
    onnx = _require_onnx()
    out = {}
    infos = list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)
    for vi in infos:
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)).itemsize \
            if t.elem_type else 4
        out[vi.name] = (dims, itemsize)
    for init in model.graph.initializer:
        out[init.name] = (list(init.dims), np.dtype(
            onnx.helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize)
    return out


def _nbytes(shape: tuple[list[int], int] | None) -> float:
    return 0.0 if shape is None else float(np.prod(shape[0], dtype=float) * shape[1])


def _flops(node, shapes: dict) -> float:
    ins = [shapes.get(n) for n in node.input]
    outs = [shapes.get(n) for n in node.output]
    if node.op_type in ("MatMul", "Gemm") and ins[0] and outs[0]:
        k = ins[0][0][-1] if node.op_type == "MatMul" or not _attr(node, "transA") else ins[0][0][-2]
        return 2.0 * float(np.prod(outs[0][0], dtype=float)) * k
    if node.op_type == "Conv" and len(ins) > 1 and ins[1] and outs[0]:
        w = ins[1][0]                      # (C_out, C_in/groups, kh, kw)
        return 2.0 * float(np.prod(outs[0][0], dtype=float)) * float(np.prod(w[1:], dtype=float))
    return float(sum(np.prod(o[0], dtype=float) for o in outs if o))


def _attr(node, name: str) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return 0


def check_sorted(model, path: str | Path) -> None:
    """SpecError when a node reads a tensor that the same or a later node produces: ONNX
    requires topologically sorted nodes, and both importers (this module's placement graph,
    ``opspace.importers``' operator graph) link a node only to tensors already made, so such
    an input was dropped without a word and the operator priced as if it read nothing (QA
    round 35: a model listed out of order priced at about half its sorted twin's time; a
    cyclic one was solved as a DAG)."""
    from autopar_opt.core.errors import SpecError, SpecProblem

    made = {out: i for i, node in enumerate(model.graph.node) for out in node.output if out}
    for i, node in enumerate(model.graph.node):
        later = [(x, made[x]) for x in node.input if x and made.get(x, -1) >= i]
        if later:
            x, j = later[0]
            producer = model.graph.node[j]
            what = "itself" if j == i else f"node {j} ({producer.name or producer.op_type})"
            raise SpecError([SpecProblem(
                str(path), f"graph.node[{i}]", node.name or node.op_type,
                f"node {i} ({node.name or node.op_type}) reads tensor {x!r}, which {what} produces: "
                "ONNX nodes must be topologically sorted (this is a cycle or a node out of order)",
                "sort the nodes (torch.onnx.export and onnx.save of a valid model write them "
                "sorted), and remove any cycle")])


def onnx_op_graph(path: str | Path) -> OpGraph:
    """Read and shape-infer an ONNX file; one operator per ONNX node."""
    onnx = _require_onnx()
    model = onnx.shape_inference.infer_shapes(read_model(path))
    check_sorted(model, path)
    shapes = _shapes(model)
    params = {init.name for init in model.graph.initializer}
    producer: dict[str, int] = {}
    g = OpGraph()
    for i, node in enumerate(model.graph.node):
        inputs = sorted({producer[n] for n in node.input if n in producer})
        out_b = sum(_nbytes(shapes.get(n)) for n in node.output)
        par_b = sum(_nbytes(shapes.get(n)) for n in node.input if n in params)
        v = g.add(node.name or f"{node.op_type}_{i}", inputs, flops=_flops(node, shapes),
                  out=out_b, params=par_b, gemm=node.op_type in GEMM_OPS)
        for n in node.output:
            producer[n] = v
    return g
