"""Megatron's per-layer templates inside the operator space, and the template search.

The layer-level search of this project chooses, per transformer block, a template
``dp × tp`` (± sequence parallelism) from a fixed menu (:mod:`autopar_opt.ir.strategies`).
Each template *is* a configuration of every operator of the block
(Shoeybi et al. 2019, Sec. 3, Fig. 3; Korthikanti et al. 2022, Sec. 4.2.2):

* the batch on the data-parallel mesh axes, the tensor-parallel axes on:
* ``qkv``: the heads (column-parallel: the weight split on its output);
* ``scores``, ``softmax``, ``context``: the heads;
* ``out``: the heads, a reduction dimension (row-parallel: all-reduce; with sequence
  parallelism reduce-scattered onto the sequence);
* ``fc1``, ``gelu``: the ffn dimension (column-parallel); ``fc2``: the ffn dimension,
  a reduction (row-parallel, all-reduce / reduce-scatter onto the sequence);
* ``ln1``, ``ln2``, ``add1``, ``add2``: replicated in the tensor-parallel group, or split
  along the sequence with sequence parallelism;
* ``embedding``: the vocabulary (vocab-parallel embedding: a reduction, all-reduce /
  reduce-scatter), ``lm_head``: the vocabulary (column-parallel), ``loss``: the vocabulary
  (vocab-parallel cross entropy); a final ``ln`` as ``ln1``.

On a logical mesh ``(m0, m1)`` the data-parallel degree takes the mesh axes in ``dp_axes``
and tensor parallelism the others, so a template is ``(dp_axes, sp)``.

:func:`template_search` chooses one template per layer: a min-sum over the layers
(unary: the layer's operators and inner edges under the template; pairwise: the edges
between layers) solved by the same elimination (with Pareto labels under memory), an
independent route to the optimum of the *template space*. The operator space restricted
to templates — the MILP of :mod:`autopar_opt.formulations.opspace` with every operator
of a layer tied to the layer's template (``tie`` rows) — must give the same optimum;
the unrestricted operator space can only be better.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from autopar_opt.ir.operators import Operator
from autopar_opt.ir.mesh import Config
from autopar_opt.cost.operators.tables import OpTables

#: role -> (dimension the tensor-parallel axes split, sequence-parallel scatter target)
TP_DIM: dict[str, str] = {"qkv": "h", "q": "h", "kv": "h", "scores": "h", "softmax": "h",
                          "context": "h", "out": "h", "fc1": "f", "gelu": "f", "fc2": "f",
                          "embedding": "v", "lm_head": "v", "loss": "v"}
#: roles replicated in the tensor-parallel group (sequence-split with sequence parallelism)
NORM_ROLES = frozenset({"ln1", "ln2", "add1", "add2", "ln", "add", "norm"})
#: roles whose tensor-parallel split is a reduction: reduce-scattered onto the sequence under sp
ROW_ROLES = frozenset({"out", "fc2", "embedding"})


@dataclass(frozen=True)
class Template:
    """Megatron's layout on a mesh: the data-parallel mesh axes and sequence parallelism."""

    dp_axes: tuple[int, ...]
    sp: bool

    def degrees(self, shape: tuple[int, int]) -> tuple[int, int]:
        dp = math.prod(shape[a] for a in self.dp_axes)
        return dp, (shape[0] * shape[1]) // dp

    def label(self, shape: tuple[int, int]) -> str:
        dp, tp = self.degrees(shape)
        return f"dp{dp}·tp{tp}" + ("·sp" if self.sp else "") + f" (dp on mesh axes {list(self.dp_axes)})"


def templates_for(shape: tuple[int, int]) -> list[Template]:
    """Every template of a mesh: each subset of the (non-trivial) axes for data
    parallelism, with and without sequence parallelism where tensor parallelism exists."""
    axes = [a for a in (0, 1) if shape[a] > 1]
    out = []
    for r in range(len(axes) + 1):
        for dp_axes in itertools.combinations(axes, r):
            tp = any(a not in dp_axes for a in axes)
            out += [Template(dp_axes, False)] + ([Template(dp_axes, True)] if tp else [])
    return out


def template_config(op: Operator, tpl: Template, shape: tuple[int, int]) -> Config | None:
    """The configuration template ``tpl`` gives ``op`` (None: the template cannot apply:
    a dimension the sizes do not divide, or a role it does not know)."""
    names = op.dim_names
    sizes = op.sizes
    factors = [[1] * len(names) for _ in shape]
    role = op.role
    if role in NORM_ROLES:
        tp_dim = "l" if tpl.sp else None
    elif role in TP_DIM:
        tp_dim = TP_DIM[role]
    else:
        return None
    for a, m in enumerate(shape):
        if m == 1:
            continue
        dim = "b" if a in tpl.dp_axes else tp_dim
        if dim is None:
            continue
        if dim not in sizes:
            return None
        factors[a][names.index(dim)] = m
    tot = [math.prod(f[i] for f in factors) for i in range(len(names))]
    if any(sizes[d] % t for d, t in zip(names, tot)) or \
            any(t > 1 and d in op.fixed for d, t in zip(names, tot)):
        return None
    scatter = "l" if tpl.sp and role in ROW_ROLES and "l" in sizes else ""
    if scatter:
        tp = math.prod(shape[a] for a in (0, 1) if a not in tpl.dp_axes)
        if tp == 1 or sizes["l"] % (tot[names.index("l")] * tp):
            scatter = ""
    return Config(tuple(tuple(f) for f in factors), scatter)


@dataclass
class TemplateSpace:
    """Per layer, the templates that apply to all its operators, and their images."""

    layers: list[str]
    members: list[list[int]]                  # operator indices per layer
    templates: list[list[Template]]           # per layer
    images: list[list[list[int]]]             # per layer, per template: config index per member


def template_space(tables: OpTables) -> TemplateSpace:
    """The template space of the operators in ``tables`` (every operator must belong to a
    layer whose roles the templates know)."""
    g, shape = tables.graph, tables.mesh.shape
    layers = g.layers()
    members = [[v for v, op in enumerate(g.ops) if op.layer == name] for name in layers]
    loose = [op.name for op in g.ops if not op.layer]
    if loose:
        raise ValueError(f"operators without a layer cannot follow a template: {loose[:5]}")
    temps, images = [], []
    for mem in members:
        ok, imgs = [], []
        for tpl in templates_for(shape):
            idx = []
            for v in mem:
                cfg = template_config(g.ops[v], tpl, shape)
                if cfg is None or cfg not in tables.configs[v]:
                    break
                idx.append(tables.index_of(v, cfg))
            else:
                ok.append(tpl)
                imgs.append(idx)
        temps.append(ok)
        images.append(imgs)
    return TemplateSpace(layers, members, temps, images)


def layer_problem(tables: OpTables, space: TemplateSpace):
    """The template search as a min-sum over layers: (unary time, unary memory, layer
    pairs, pairwise tables)."""
    layer_of = {v: li for li, mem in enumerate(space.members) for v in mem}
    pos = {v: j for mem in space.members for j, v in enumerate(mem)}
    unary = [np.array([sum(float(tables.time[v][img[pos[v]]]) for v in mem) for img in imgs])
             for mem, imgs in zip(space.members, space.images)]
    memory = [np.array([sum(float(tables.memory[v][img[pos[v]]]) for v in mem) for img in imgs])
              for mem, imgs in zip(space.members, space.images)]
    pair: dict[tuple[int, int], np.ndarray] = {}
    for (u, v), mat in zip(tables.edges, tables.redistribution):
        lu, lv = layer_of[u], layer_of[v]
        iu = [img[pos[u]] for img in space.images[lu]]
        iv = [img[pos[v]] for img in space.images[lv]]
        if lu == lv:
            unary[lu] = unary[lu] + np.array([mat[a, b] for a, b in zip(iu, iv)])
            continue
        key, sub = ((lu, lv), mat[np.ix_(iu, iv)]) if lu < lv else ((lv, lu), mat[np.ix_(iu, iv)].T)
        pair[key] = pair.get(key, 0) + sub
    return unary, memory, list(pair), list(pair.values())


@dataclass
class TemplatePlan:
    """The template search's answer: one template per layer, its value and the per-op choice."""

    templates: list[Template]
    value: float
    choice: list[int]


def template_search(tables: OpTables, space: TemplateSpace | None = None) -> TemplatePlan | None:
    """Exact optimum of the template space under the tables' memory (None: nothing fits)."""
    from autopar_opt.solvers.dp.elimination import solve_min_sum
    from autopar_opt.solvers.dp.pareto_elimination import solve_min_sum_capacity

    space = space or template_space(tables)
    if any(not t for t in space.templates):
        return None
    unary, memory, pairs, mats = layer_problem(tables, space)
    res = solve_min_sum(unary, pairs, mats)
    pick = res.choice
    if sum(float(m[k]) for m, k in zip(memory, pick)) > tables.capacity_bytes * (1 + 1e-9):
        pr = solve_min_sum_capacity(unary, memory, pairs, mats, tables.capacity_bytes)
        if pr.choice is None:
            return None
        pick = pr.choice
    choice = [0] * len(tables.time)
    for mem, imgs, k in zip(space.members, space.images, pick):
        for v, c in zip(mem, imgs[k]):
            choice[v] = c
    return TemplatePlan([space.templates[li][k] for li, k in enumerate(pick)], tables.objective(choice), choice)


def tie_rows(space: TemplateSpace) -> list[tuple[list[int], list[list[int]]]]:
    """For the MILP restricted to templates: per layer its members and each template's
    configuration indices (:func:`autopar_opt.formulations.opspace.build_matrix` ``ties``)."""
    return [(mem, imgs) for mem, imgs in zip(space.members, space.images)]
