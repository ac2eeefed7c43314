"""The ``problem: {format: operator_sharding}`` spec of ``autopar solve``, read once into types.

```yaml
problem:
  format: operator_sharding
  graph: {zoo: alexnet, batch: 128}          # PaSE's graphs: alexnet, inception3, rnnlm, transformer
  # graph: {model: gpt-1.7b, layers: 2, batch: 8, embeddings: false}   # a zoo transformer LM
  # graph: {onnx: model.onnx}   or   {torch: model.py:Net, inputs: [[8, 16]], kwargs: {}}
  cluster: {zoo: 4x8-a100-80}                # or {nodes: 1, gpus_per_node: 8, device: A100-80GB}
  devices: 16                                # default: the whole cluster
  dtype: bf16
  memory_gib: 20                             # modelled bytes per device (default: HBM − reserves)
  space: {split: alpa, reduce_scatter: true}  # or split: pase (1-D mesh, any factors)
  pipeline: {pp: [1, 2], microbatches: [1, 2, 4], schedule: 1f1b}   # optional
solver: {name: auto, time_limit_s: 60}       # auto | dp | highs | gurobi | scip
```

Every mistake is a :class:`~autopar_opt.core.errors.SpecError` naming the file, the key,
the value, the rule and the fix; paths are relative to the spec file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from pydantic import ValidationError

from autopar_opt.core.errors import ProblemList, SpecError, SpecProblem, did_you_mean, one_of
from autopar_opt.cost.context import StageContext, user_reserve_for
from autopar_opt.ir.hardware import DEVICE_CATALOG, Cluster, make_cluster
from autopar_opt.ir.operators import OperatorGraph
from autopar_opt.ir.training import DTYPE_BYTES, Schedule, Training
from autopar_opt.spec.schema import Section, documented_field
from autopar_opt.spec.translate import problems_from_validation

FORMAT = "operator_sharding"
#: Zoo model families that :func:`~autopar_opt.model_zoo.operator_graphs.transformer_lm` builds.
LM_FAMILIES = ("decoder_lm", "encoder_lm")


class GraphSection(Section):
    """Where the operator graph comes from: exactly one of zoo, model, onnx, torch."""

    zoo: Optional[str] = documented_field("PaSE's graphs: alexnet, inception3, rnnlm, transformer.",
                                          "alexnet", default=None)
    model: Optional[str] = documented_field("A zoo transformer LM (model_zoo/models), built at "
                                            "operator granularity.", "gpt-1.7b", default=None)
    onnx: Optional[str] = documented_field("An ONNX file (needs the onnx extra).", "model.onnx", default=None)
    torch: Optional[str] = documented_field("A torch.fx-traceable module: file.py:Name or package.module:name.",
                                            "model.py:Net", default=None)
    batch: Optional[int] = documented_field("Global batch (samples); default: the graph's own.", 128,
                                            default=None, gt=0)
    layers: Optional[int] = documented_field("Blocks of a zoo LM (default: the model's).", 2, default=None, gt=0)
    seq_len: Optional[int] = documented_field("Sequence length of a zoo LM (default: the model's).", 1024,
                                              default=None, gt=0)
    embeddings: bool = documented_field("A zoo LM with embedding, final LN, LM head and loss.", True,
                                        default=True)
    inputs: Optional[list[list[int]]] = documented_field("torch: input shapes, batch first.", [[8, 16]],
                                                         default=None)
    kwargs: dict[str, Any] = documented_field("torch: arguments of the callable.", {}, default_factory=dict)


class ClusterSection(Section):
    """A zoo cluster or nodes of one device type."""

    zoo: Optional[str] = documented_field("A zoo cluster name.", "4x8-a100-80", default=None)
    nodes: Optional[int] = documented_field("Nodes.", 1, default=None, gt=0)
    gpus_per_node: Optional[int] = documented_field("Devices per node.", 8, default=None, gt=0)
    device: Optional[str] = documented_field("A device of the catalog.", "A100-80GB", default=None)


class SpaceSection(Section):
    """The configuration rule set (autopar_opt.ir.mesh)."""

    split: Literal["alpa", "pase"] = documented_field(
        "alpa: every logical 2-D mesh, each axis given whole to one dimension; pase: a 1-D mesh, "
        "any split factor per dimension.", "alpa", default="alpa")
    reduce_scatter: bool = documented_field("Allow reduce-scattering partial sums onto an output "
                                            "dimension (Megatron's sequence parallelism).", True, default=True)


class PipelineSection(Section):
    """Pipeline stages (the operator space inside each); omitted: one stage."""

    pp: list[int] = documented_field("Stage counts to try.", [1, 2], default_factory=lambda: [1], min_length=1)
    microbatches: list[int] = documented_field("Micro-batch counts to try.", [1, 2, 4],
                                               default_factory=lambda: [1], min_length=1)
    schedule: Literal["1f1b", "gpipe"] = documented_field("Schedule.", "1f1b", default="1f1b")


class OpSolverSection(Section):
    """Solver options."""

    name: Literal["auto", "dp", "highs", "gurobi", "scip"] = documented_field(
        "auto: the DP, the MILP where memory binds on large tables.", "auto", default="auto")
    time_limit_s: float = documented_field("Wall-time limit, s.", 60.0, default=60.0, gt=0)
    rel_gap: float = documented_field("Relative gap at which a MILP stops.", 1e-9, default=1e-9, ge=0, lt=1)


class OpProblem(Section):
    """An operator-sharding problem."""

    format: Literal["operator_sharding"] = documented_field("Problem kind.", FORMAT)
    graph: GraphSection = documented_field("The operator graph.", {"zoo": "alexnet"})
    cluster: ClusterSection = documented_field("The devices.", {"zoo": "1x8-a100-40"})
    devices: Optional[int] = documented_field("Devices used (default: the whole cluster).", 8, default=None, gt=0)
    dtype: str = documented_field("Compute dtype.", "bf16", default="bf16")
    memory_gib: Optional[float] = documented_field("Modelled bytes per device, GiB (default: HBM minus "
                                                   "the reserves).", 20.0, default=None, gt=0)
    space: SpaceSection = documented_field("Configuration rules.", {"split": "alpa"},
                                           default_factory=SpaceSection)
    pipeline: Optional[PipelineSection] = documented_field("Pipeline stages.", {"pp": [1, 2]}, default=None)


class OpSpecFile(Section):
    """A spec whose problem is operator-level sharding."""

    description: Optional[str] = documented_field("Free text.", "AlexNet on 8 GPUs", default=None)
    problem: OpProblem = documented_field("The problem.", {"format": FORMAT, "graph": {"zoo": "alexnet"}})
    solver: OpSolverSection = documented_field("Solver options: the DP or a MILP backend, time limit, gap.",
                                               {"name": "auto"},
                                               default_factory=OpSolverSection)


@dataclass
class OpSpec:
    """A loaded operator-sharding spec: the graph at a batch size, the context, the options."""

    path: Path
    name: str
    graph_for: Callable[[int], OperatorGraph]
    batch: int
    context: StageContext
    rule: str
    reduce_scatter: bool
    pipeline: PipelineSection | None
    solver: OpSolverSection
    settings: dict[str, Any]

    @property
    def graph(self) -> OperatorGraph:
        return self.graph_for(self.batch)


def _cluster(sec: ClusterSection, devices: int | None, out: ProblemList) -> Cluster | None:
    from autopar_opt.model_zoo.registry import cluster_names, get_cluster

    if sec.zoo is not None:
        beside = [k for k in ("nodes", "gpus_per_node", "device") if getattr(sec, k) is not None]
        if beside:       # the zoo cluster won without a word (QA round 10)
            out.add(f"problem.cluster.{beside[0]}", getattr(sec, beside[0]),
                    f"is given beside zoo {sec.zoo!r}, which states its own nodes and device",
                    "give zoo alone, or nodes, gpus_per_node and device without zoo")
            return None
        if sec.zoo not in cluster_names():
            out.add("problem.cluster.zoo", sec.zoo, "unknown zoo cluster",
                    f"use one of {one_of(cluster_names())}{did_you_mean(sec.zoo, cluster_names())}")
            return None
        base = get_cluster(sec.zoo)
    else:
        missing = [k for k in ("nodes", "gpus_per_node", "device") if getattr(sec, k) is None]
        if missing:
            out.add("problem.cluster", None, f"needs zoo, or nodes, gpus_per_node and device (missing "
                    f"{', '.join(missing)})", "write cluster: {nodes: 1, gpus_per_node: 8, device: A100-80GB}")
            return None
        if sec.device not in DEVICE_CATALOG:
            out.add("problem.cluster.device", sec.device, "not in the device catalog",
                    f"use one of {one_of(DEVICE_CATALOG)}{did_you_mean(sec.device, DEVICE_CATALOG)}")
            return None
        base = make_cluster("cluster", sec.nodes, sec.gpus_per_node, sec.device)
    if devices is None or devices == base.num_devices:
        return base
    gpn = base.gpus_per_node
    if devices > base.num_devices or (devices > gpn and devices % gpn) or (devices < gpn and gpn % devices):
        out.add("problem.devices", devices, f"must be at most the cluster's {base.num_devices} devices and "
                f"whole nodes of {gpn} or a divisor of {gpn}",
                "use e.g. " + " or ".join(str(x) for x in dict.fromkeys((gpn, base.num_devices))))
        return None
    return make_cluster(base.name, max(1, devices // gpn), min(devices, gpn), base.device,
                        base.intra_node, base.inter_node, base.source)


def _graph_for(sec: GraphSection, base: Path, file: str, out: ProblemList):
    """(graph_for(batch), default batch, name) or None after recording the problems."""
    from autopar_opt.model_zoo import operator_graphs as og

    given = [k for k in ("zoo", "model", "onnx", "torch") if getattr(sec, k) is not None]
    if len(given) != 1:
        out.add("problem.graph", given or None, "needs exactly one of zoo, model, onnx, torch",
                "write graph: {zoo: alexnet} (or model:, onnx:, torch:)")
        return None
    kind = given[0]
    # keys that shape only some graph kinds: stated for another, they changed nothing
    # without a word (QA round 10)
    applies = {"layers": ("model",), "seq_len": ("model",), "embeddings": ("model",),
               "inputs": ("torch",), "kwargs": ("torch",)}
    for key, kinds in applies.items():
        if key in sec.model_fields_set and kind not in kinds:
            out.add(f"problem.graph.{key}", getattr(sec, key), f"applies to graph."
                    f"{' or graph.'.join(kinds)} only, not to graph.{kind}", f"drop {key}")
            return None
    if kind == "zoo":
        if sec.zoo not in og.OPERATOR_GRAPHS:
            out.add("problem.graph.zoo", sec.zoo, "unknown operator graph",
                    f"use one of {one_of(og.OPERATOR_GRAPHS)}{did_you_mean(sec.zoo, og.OPERATOR_GRAPHS)}")
            return None
        fn = og.OPERATOR_GRAPHS[sec.zoo]
        default = {"alexnet": 128, "inception3": 128, "rnnlm": 64, "transformer": 64}[sec.zoo]
        return (lambda b: fn(batch=b)), default, sec.zoo
    if kind == "model":
        from autopar_opt.model_zoo.registry import list_models, model_dims
        fams = {m.name: m.family for m in list_models()}
        lms = [n for n, f in fams.items() if f in LM_FAMILIES]
        if sec.model not in lms:
            out.add("problem.graph.model", sec.model, "not a zoo transformer language model",
                    f"use one of {one_of(lms)}{did_you_mean(sec.model, lms)}")
            return None
        d = model_dims(sec.model)
        if int(d.get("kv_heads", d["heads"])) != int(d["heads"]):
            out.add("problem.graph.model", sec.model, f"grouped-query attention ({d['kv_heads']} key/value "
                    f"heads for {d['heads']} query heads) is not built at operator granularity",
                    "use a model with as many key/value heads as query heads (gpt-*, bert-*, llama-7b)")
            return None
        layers = sec.layers or int(d["num_layers"])
        seq = sec.seq_len or int(d["seq_len"])

        def build(b: int) -> OperatorGraph:
            return og.transformer_lm(b, seq, int(d["hidden"]), int(d["heads"]), int(d["ffn_hidden"]),
                                     int(d["vocab"]), layers, name=sec.model, embeddings=sec.embeddings,
                                     source=f"model_zoo/models/{sec.model}.yaml",
                                     gated_mlp=bool(d.get("gated_mlp", False)))
        return build, 8, sec.model
    from autopar_opt.opspace.importers import graph_from_file
    g = graph_from_file(kind, getattr(sec, kind), sec.inputs, sec.kwargs, base, file)
    batch = g.ops[0].sizes.get("b", 1) if g.ops else 1
    return (lambda b, g=g: g), batch, Path(str(getattr(sec, kind))).stem


def build_op_spec(data: dict[str, Any], path: Path) -> OpSpec:
    """Validate an operator-sharding spec and build its types; SpecError with every problem."""
    out = ProblemList(str(path))
    try:
        model = OpSpecFile.model_validate(data)
    except ValidationError as exc:
        out.extend(problems_from_validation(OpSpecFile, exc, out.file_of))
        out.raise_if_any()
        raise
    prob = model.problem
    if prob.dtype not in DTYPE_BYTES:
        out.add("problem.dtype", prob.dtype, "unknown dtype", f"use one of {one_of(DTYPE_BYTES)}")
    cluster = _cluster(prob.cluster, prob.devices, out)
    built = _graph_for(prob.graph, path.parent, str(path), out)
    out.raise_if_any()
    assert cluster is not None and built is not None
    graph_for, default_batch, name = built
    batch = prob.graph.batch or default_batch
    if prob.graph.onnx is not None or prob.graph.torch is not None:
        if prob.graph.batch not in (None, default_batch):
            out.add("problem.graph.batch", prob.graph.batch, f"an imported graph has the batch of its "
                    f"input shapes ({default_batch})", "drop batch, or change the input shapes")
    if prob.dtype not in cluster.device.peak_tflops:
        out.add("problem.dtype", prob.dtype, f"{cluster.device.name} has no peak for it",
                f"use one of {one_of(cluster.device.peak_tflops)}")
    if prob.pipeline is not None:
        for k in ("pp", "microbatches"):
            vals = getattr(prob.pipeline, k)
            bad = [x for x in vals if x < 1 or (cluster.num_devices if k == "pp" else batch) % x]
            if bad:
                what = f"the {cluster.num_devices} devices" if k == "pp" else f"the batch of {batch}"
                out.add(f"problem.pipeline.{k}", bad, f"every value must divide {what}", f"use divisors of {what}")
    out.raise_if_any()
    from autopar_opt.cost.params import default_params
    params = default_params()
    reserve = 0.0 if prob.memory_gib is None else user_reserve_for(prob.memory_gib, cluster.device.hbm_gib, params)
    if reserve < 0:     # more modelled bytes than the device holds (QA round 10: 500 GiB on an A100-80GB)
        most = (cluster.device.hbm_gib - params.memory_reserve_gib) / (1.0 + params.memory_fragmentation)
        raise SpecError([SpecProblem(
            str(path), "problem.memory_gib", prob.memory_gib,
            f"is more than the {cluster.device.name} holds for modelled bytes: {most:.1f} GiB "
            f"({cluster.device.hbm_gib:.4g} GiB less the runtime's reserve and the allocator's "
            "fragmentation allowance)", f"use at most {most:.1f}, or drop it (the default)")])
    training = Training(global_batch_size=batch, dtype=prob.dtype, memory_reserve_gib=reserve)
    ctx = StageContext(cluster, training, params, cluster.num_devices, batch)
    graph = graph_for(batch)
    errors = graph.problems()
    if errors:
        raise SpecError([SpecProblem(str(path), "problem.graph", name, e, "fix the graph") for e in errors[:10]])
    if prob.pipeline is not None:
        _check_stage_counts(prob.pipeline.pp, graph, str(path))
    settings = {"graph": name, "batch": batch, "operators": len(graph.ops), "edges": len(graph.edges()),
                "devices": cluster.num_devices, "nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node,
                "device": cluster.device.name, "dtype": prob.dtype, "split": prob.space.split,
                "reduce_scatter": prob.space.reduce_scatter,
                "capacity_gib": ctx.capacity_bytes / 2**30, "source": graph.source}
    return OpSpec(path, name, graph_for, batch, ctx, prob.space.split, prob.space.reduce_scatter,
                  prob.pipeline, model.solver, settings)


def _check_stage_counts(pp: list[int], graph: OperatorGraph, file: str) -> None:
    """Refuse stage counts no split of ``graph`` at layer boundaries reaches: the search would
    find no configuration for them and answer "proven infeasible" with a memory reason that
    is not the cause (QA round 35: a 2-layer graph with ``pp: [4]``)."""
    from autopar_opt.opspace.pipeline import layer_starts

    most = max(1, len(layer_starts(graph)))
    bad = [x for x in pp if x > most]
    if bad:
        unnamed = not any(op.layer for op in graph.ops)     # ONNX / torch.fx: no layer names
        raise SpecError([SpecProblem(
            file, "problem.pipeline.pp", bad,
            f"every value must be at most the graph's {most} layer(s): stages are split at layer "
            "boundaries" + (" (an imported graph names no layers: one stage)" if unnamed else ""),
            f"use pp values of at most {most}, or a graph with more layers")])


def schedule_of(sec: PipelineSection) -> Schedule:
    return Schedule(sec.schedule)
