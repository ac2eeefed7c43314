"""A torchtitan 0.2 job file (TOML) read back as a plan (``plan: {torchtitan: FILE}``).

The file :func:`autopar_opt.export.torchtitan.torchtitan_toml` writes (``export --to
torchtitan --framework-version 0.2``) holds the whole plan in torchtitan's own keys:
``[parallelism]`` (replicate and shard degrees, tp, cp, pp, the FSDP reshard policy, the
schedule, the pipeline micro-batch and the stages as ``module_fqns_per_model_part``),
``[training]`` (batch sizes, sequence) and ``[activation_checkpoint]``; it is read by
:func:`~autopar_opt.export.torchtitan.plan_from_torchtitan`, the inverse of the export.
Checked here first, each problem naming the file's key: the model it names
(``[model] name/flavor``) must be the flavour of the spec's model
(:func:`~autopar_opt.export.torchtitan.flavour`), the batch, sequence and precision the
spec's training, the degrees whole numbers multiplying to the cluster's devices, and the
stages' module names the model's. torchtitan 0.3's job file is a Python module: reading it
would mean running it, so it is refused with the way to write a TOML instead.

A key the file leaves out takes torchtitan 0.2's own default (``torchtitan/config/job_config.py``
at v0.2.2, the dataclasses ``Training``, ``Parallelism``, ``ActivationCheckpoint``), and the
reading says which (:func:`torchtitan_defaults`): ``activation_checkpoint.mode`` "selective"
with ``selective_ac_option`` "2" (every second block), ``pipeline_parallel_microbatch_size``
1, ``training.local_batch_size`` 8, ``data_parallel_shard_degree`` -1 (the devices the other
degrees leave, ``ParallelDims._validate``) and ``training.global_batch_size`` -1 (local batch
x dp, ``Trainer.__init__`` in ``torchtitan/train.py``); a pipeline without
``module_fqns_per_model_part`` is split as torchtitan splits it
(:func:`~autopar_opt.export.torchtitan_split.torchtitan_split`, its
``generate_llm_fqn_per_model_part``), said with the layers per stage. What the reading
cannot resolve without running torchtitan is refused: a schedule other than 1F1B or GPipe,
``mode = "memory_budget"``.
"""

from __future__ import annotations

from typing import Any

from autopar_opt.export.megatron import MegatronArgsError
from autopar_opt.export.mxfp8 import mxfp8_reading
from autopar_opt.export.torchtitan_split import torchtitan_split
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.training import Training

#: ``[parallelism]`` degrees (torchtitan's defaults: 1; ``data_parallel_shard_degree`` -1
#: means "the rest", which the export never writes and is refused here).
DEGREES = ("data_parallel_replicate_degree", "data_parallel_shard_degree",
           "tensor_parallel_degree", "context_parallel_degree", "pipeline_parallel_degree",
           "pipeline_parallel_microbatch_size", "expert_parallel_degree",
           "expert_tensor_parallel_degree")
#: torchtitan 0.2's schedule names the reading takes (torch's ``Schedule1F1B``, ``ScheduleGPipe``).
SCHEDULES = ("1F1B", "GPipe")
#: ``activation_checkpoint.mode`` values the reading takes ("memory_budget" is refused).
AC_MODES = ("none", "full", "selective")
#: torchtitan 0.2's ``training.mixed_precision_param`` -> the spec's ``training.dtype`` it trains.
PARAM_DTYPES = {"bfloat16": ("bf16", "fp8"), "float16": ("fp16",), "float32": ("fp32",)}


def _section(config: dict, name: str, problems: list[str]) -> dict:
    part = config.get(name, {})
    if not isinstance(part, dict):
        problems.append(f"[{name}] is not a table")
        return {}
    return part


def _fqns_problems(parts: Any, graph: LayerGraph) -> list[str]:
    blocks = len(graph) - 2
    if not isinstance(parts, list) or not all(isinstance(p, list) and p for p in parts):
        return ["parallelism.module_fqns_per_model_part must be a list of non-empty lists "
                "of module names"]
    out = []
    for i, part in enumerate(parts):
        for fqn in part:
            ok = fqn in ("tok_embeddings", "norm", "output") or (
                isinstance(fqn, str) and fqn.startswith("layers.")
                and fqn[7:].isdigit() and int(fqn[7:]) < blocks)
            if not ok:
                out.append(f"parallelism.module_fqns_per_model_part[{i}] names {fqn!r}, not a "
                           f"module of the model (tok_embeddings, layers.0-{blocks - 1}, norm, "
                           "output)")
    return out


def torchtitan_defaults(config: Any, world: int,
                        blocks: int | None = None) -> tuple[Any, list[str]]:
    """``config`` with each key torchtitan 0.2 defaults (and each ``-1`` it resolves) filled
    in as torchtitan does, and one line per key filled: what the reading assumed. With
    ``blocks`` (the model's transformer layers), a pipeline without
    ``module_fqns_per_model_part`` gets torchtitan's own split. A config that is not a job
    file, or whose degrees are not whole numbers, comes back unchanged
    (:func:`torchtitan_problems` names the problem)."""
    if not isinstance(config, dict) or not all(
            isinstance(config.get(k, {}), dict)
            for k in ("parallelism", "training", "activation_checkpoint")) \
            or "parallelism" not in config:
        return config, []
    par, tr = dict(config["parallelism"]), dict(config.get("training", {}))
    ac = dict(config.get("activation_checkpoint", {}))
    said = []
    if "mode" not in ac:
        ac["mode"] = "selective"
        said.append('activation_checkpoint.mode is not given: torchtitan 0.2\'s default '
                    '"selective"')
    if ac["mode"] == "selective" and "selective_ac_option" not in ac:
        ac["selective_ac_option"] = "2"
        said.append('activation_checkpoint.selective_ac_option is not given: torchtitan 0.2\'s '
                    'default "2" (full checkpointing of every second block of a stage)')
    if "local_batch_size" not in tr:
        tr["local_batch_size"] = 8
        said.append("training.local_batch_size is not given: torchtitan 0.2's default 8")
    if par.get("pipeline_parallel_degree", 1) != 1 and "pipeline_parallel_microbatch_size" \
            not in par:
        par["pipeline_parallel_microbatch_size"] = 1
        said.append("parallelism.pipeline_parallel_microbatch_size is not given: torchtitan "
                    "0.2's default 1")
    pp = par.get("pipeline_parallel_degree", 1)
    if blocks is not None and isinstance(pp, int) and not isinstance(pp, bool) and pp > 1 \
            and "module_fqns_per_model_part" not in par \
            and par.get("pipeline_parallel_schedule", "1F1B") in SCHEDULES:
        try:
            par["module_fqns_per_model_part"], line = torchtitan_split(par, blocks)
            said.append(line)
        except ValueError:
            pass                    # torchtitan_problems says why
    others = [par.get(k, 1) for k in ("data_parallel_replicate_degree", "tensor_parallel_degree",
                                      "context_parallel_degree", "pipeline_parallel_degree")]
    whole = all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in others)
    if par.get("data_parallel_shard_degree", -1) == -1 and whole:
        rest, left = divmod(world, others[0] * others[1] * others[2] * others[3])
        if rest >= 1 and not left:
            par["data_parallel_shard_degree"] = rest
            said.append(f"parallelism.data_parallel_shard_degree is -1 (torchtitan 0.2's "
                        f"default): the {world} devices / (replicate x tp x cp x pp) = {rest}")
    local, shard = tr["local_batch_size"], par.get("data_parallel_shard_degree")
    if tr.get("global_batch_size", -1) == -1 and isinstance(local, int) \
            and isinstance(shard, int) and shard >= 1 and whole:
        tr["global_batch_size"] = local * others[0] * shard
        said.append(f"training.global_batch_size is -1 (torchtitan 0.2's default): "
                    f"local_batch_size {local} x dp {others[0] * shard} = "
                    f"{tr['global_batch_size']}")
    return {**config, "parallelism": par, "training": tr, "activation_checkpoint": ac}, said


#: The model converters torchtitan 0.2.2 registers for low precision (register_model_converter
#: in components/quantization/float8.py and mx.py); another name fails at launch.
CONVERTERS = ("quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx",
              "quantize.grouped_mm.mx")


def mx_converters(config: Any) -> list[str]:
    """The file's MXFP8 converters (torchtitan 0.2.2's ``quantize.linear.mx`` and
    ``quantize.grouped_mm.mx``, ``components/quantization/mx.py``)."""
    model = config.get("model") if isinstance(config, dict) else None
    converters = model.get("converters", []) if isinstance(model, dict) else []
    return [c for c in converters if isinstance(c, str) and c.startswith("quantize.")
            and c.endswith(".mx")] if isinstance(converters, list) else []


def idle_converters(listed: Any, graph: LayerGraph) -> list[str]:
    """The converters of ``listed`` that convert nothing on ``graph``: the ``quantize.
    grouped_mm.*`` ones convert the MoE experts' grouped GEMMs only, so on a model without
    MoE layers the linear layers stay bfloat16 (the one rule the problems and the reading
    both apply)."""
    if not isinstance(listed, list) or any(layer.is_moe for layer in graph.layers):
        return []
    return [c for c in listed if isinstance(c, str) and c.startswith("quantize.grouped_mm.")]


def repeated_converters(listed: Any) -> list[str]:
    """A note per converter name ``model.converters`` lists more than once (QA round 37: taken
    without a word). torchtitan 0.2.2 does not refuse a repeat: ``ModelConvertersContainer``
    (``protocols/model_converter.py``) builds one converter per listed name and applies them
    in order. For ``quantize.linear.float8`` the second pass is a no-op in effect: torchao's
    ``swap_linear_layers`` converts every ``torch.nn.Linear`` subclass, so each
    ``Float8Linear`` is swapped for a new one over the same weight (``Float8Linear.from_float``);
    for another converter what a second application does is not modelled. Priced once."""
    if not isinstance(listed, list):
        return []
    out = []
    for name in dict.fromkeys(c for c in listed if isinstance(c, str) and listed.count(c) > 1):
        what = ("the second pass swaps each Float8Linear (a torch.nn.Linear subclass, which "
                "torchao's swap_linear_layers converts again) for a new one over the same "
                "weight: the same FP8 GEMMs (a weight wrapped for enable_fsdp_float8_all_gather "
                "would be wrapped twice: not modelled)" if name == "quantize.linear.float8" else
                "what a second application does is not modelled")
        out.append(f"model.converters lists {name!r} {listed.count(name)} times: torchtitan "
                   "0.2.2 builds and applies each listed name, repeats included "
                   f"(ModelConvertersContainer); {what}; priced as listed once (list it once)")
    return out


def torchtitan_problems(config: Any, graph: LayerGraph, cluster: Cluster,
                        training: Training) -> list[str]:
    """Every reason ``config`` (a parsed torchtitan 0.2 TOML) is not a plan of this model
    and training on this cluster (empty: :func:`read_torchtitan` reads it)."""
    from autopar_opt.export.torchtitan import flavour

    if not isinstance(config, dict) or "parallelism" not in config:
        return ["not a torchtitan job file: it needs a [parallelism] table, as `autopar "
                "export --to torchtitan --framework-version 0.2` writes"]
    out: list[str] = []
    model = _section(config, "model", out)
    par = _section(config, "parallelism", out)
    tr = _section(config, "training", out)
    found = flavour(graph.arch)
    theirs = (model.get("name"), model.get("flavor"))
    if found is None:
        out.append(f"torchtitan registers no flavour of the spec's model {graph.name}: no "
                   "torchtitan job file runs it")
    elif theirs != found[:2]:
        out.append(f"model.name/flavor {theirs[0]!r}/{theirs[1]!r}, but the spec's model is "
                   f"torchtitan's {found[0]!r}/{found[1]!r}: the file is another model's")
    for key in DEGREES:
        value = par.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            out.append(f"parallelism.{key} = {value!r}: give a whole number of at least 1")
    for key, want in (("global_batch_size", training.global_batch_size),
                      ("seq_len", training.seq_len)):
        if tr.get(key) != want:
            out.append(f"training.{key} = {tr.get(key)!r}, but the spec's training.{key} is "
                       f"{want!r}")
    local = tr.get("local_batch_size")
    if isinstance(local, bool) or not isinstance(local, int) or local < 1:
        out.append(f"training.local_batch_size = {local!r}: give a whole number of at least 1")
    param = tr.get("mixed_precision_param", "bfloat16")
    if training.dtype not in PARAM_DTYPES.get(param, ()):
        out.append(f"training.mixed_precision_param = {param!r} does not train "
                   f"training.dtype {training.dtype} (the price is the spec's)")
    # FP8 GEMMs come from the model converters (torchtitan 0.2.2's registered names,
    # components/quantization/float8.py and mx.py): a file with them trains in FP8, one without
    # in bf16, whatever training.dtype says
    converters = model.get("converters", [])
    low = [c for c in converters if isinstance(c, str) and c.startswith("quantize.")] \
        if isinstance(converters, list) else []
    unknown = [c for c in low if c not in CONVERTERS]
    if unknown:
        # ModelConvertersContainer looks each name up in its registry (KeyError at launch);
        # read as FP8, "quantize.linear.MX" was priced as an FP8 run (QA round 36)
        out.append(f"model.converters {unknown}: not a converter torchtitan 0.2.2 registers "
                   f"({', '.join(CONVERTERS)}: components/quantization/float8.py, mx.py), so "
                   "its launch fails on the name (fix: one of those names)")
        low = [c for c in low if c in CONVERTERS]
    kinds = sorted({c.split(".")[-1] for c in low})
    if len(kinds) > 1:
        # QuantizationConverter._validate (components/quantization/__init__.py, v0.2.2)
        # asserts one quantization type across the quantize.* converters: "Cannot combine
        # model converters with different quantization types" (QA round 37: taken, exit 0)
        out.append(f"model.converters {low} combine quantization types {' and '.join(kinds)}, "
                   "which torchtitan 0.2.2 refuses at launch (QuantizationConverter._validate: "
                   "one type for the linear and grouped_mm converters) (fix: float8 for both, "
                   "or mx for both)")
    # a dense file with only grouped_mm converters was priced as FP8
    idle = idle_converters(low, graph)
    low = [c for c in low if c not in idle]
    mx = mx_converters(config)
    if mx:
        # whatever training.dtype and the model: torchtitan 0.2.2 builds every listed
        # converter at launch, and MXLinearConverter / MXGroupedMMConverter assert SM100 in
        # __init__ (components/quantization/mx.py), so an MX converter on Hopper fails before
        # any step (QA round 37: quantize.grouped_mm.mx on an H100 in bf16 was taken, exit 0)
        out += mxfp8_reading(f"model.converters {mx}", [cluster.device])[0]
    if low and training.dtype != "fp8":
        out.append(f"model.converters {low} train the linear layers in low precision, but "
                   f"training.dtype is {training.dtype} (the price is the spec's: set "
                   "training.dtype: fp8, or drop the converters)")
    elif not low and training.dtype == "fp8":
        out.append("model.converters has no quantize.linear.float8: the file trains in "
                   "bfloat16, but training.dtype is fp8 (the price is the spec's: set "
                   "training.dtype: bf16, or add the float8 converter)"
                   + (f"; {', '.join(idle)} converts the MoE experts' grouped GEMMs only, "
                      "and this model has none" if idle else ""))
    if out:
        return out
    sizes = [par.get(k, 1) for k in DEGREES[:5]]
    world = sizes[0] * sizes[1] * sizes[2] * sizes[3] * sizes[4]
    if world != cluster.num_devices:
        out.append(f"replicate*shard*tp*cp*pp = {world}, but the cluster has "
                   f"{cluster.num_devices} devices")
    if tr["global_batch_size"] % (tr["local_batch_size"] * sizes[0] * sizes[1]):
        out.append(f"training.local_batch_size {tr['local_batch_size']} x dp "
                   f"{sizes[0] * sizes[1]} does not divide the global batch")
    pp = sizes[4]
    schedule = par.get("pipeline_parallel_schedule", "1F1B")
    if pp > 1 and schedule not in SCHEDULES:
        out.append(f"parallelism.pipeline_parallel_schedule = {schedule!r}: the reading takes "
                   f"{' or '.join(SCHEDULES)} (one stage per rank), the schedules the export "
                   "writes")
    mode = config.get("activation_checkpoint", {}).get("mode", "selective")
    if mode not in AC_MODES:
        out.append(f"activation_checkpoint.mode = {mode!r}: the reading takes "
                   f"{', '.join(AC_MODES)}")
    micro = par.get("pipeline_parallel_microbatch_size", 1)
    if pp > 1 and tr["local_batch_size"] % micro:
        out.append(f"training.local_batch_size {tr['local_batch_size']} is not a multiple of "
                   f"parallelism.pipeline_parallel_microbatch_size {micro} (torchtitan's "
                   "build_pipeline_schedule refuses it)")
    if "module_fqns_per_model_part" in par:
        out += _fqns_problems(par["module_fqns_per_model_part"], graph)
        parts = par["module_fqns_per_model_part"]
        if not out and len(parts) != pp:
            out.append(f"parallelism.module_fqns_per_model_part has {len(parts)} parts for "
                       f"pipeline_parallel_degree {pp}: {schedule} runs one stage per rank")
    elif pp > 1 and schedule in SCHEDULES:
        try:
            torchtitan_split(par, len(graph) - 2)
        except ValueError as exc:
            out.append(f"parallelism.module_fqns_per_model_part is not given, and torchtitan's "
                       f"own split (generate_llm_fqn_per_model_part) cannot be taken: {exc}")
    return out


def read_torchtitan(config: Any, graph: LayerGraph, cluster: Cluster,
                    training: Training) -> tuple[Plan, list[str]]:
    """The plan of a torchtitan 0.2 job file and what its reading assumed (the torchtitan
    defaults it filled in); raises :class:`MegatronArgsError` (the importers' error: every
    problem listed) when it is not one of this case."""
    from autopar_opt.export.torchtitan import plan_from_torchtitan

    config, said = torchtitan_defaults(config, cluster.num_devices, len(graph) - 2)
    problems = torchtitan_problems(config, graph, cluster, training)
    if problems:
        raise MegatronArgsError("", problems)
    listed = config.get("model", {}).get("converters", [])
    idle = idle_converters(listed, graph)
    mx = [c for c in mx_converters(config) if c not in idle]
    if mx:      # priced as per-tensor FP8, said (refused above on a device that cannot run it)
        said += mxfp8_reading(f"model.converters {mx}", [cluster.device])[1]
    if idle:    # built, and converting nothing: the run is priced without them, said
        said.append(f"model.converters {idle} convert the MoE experts' grouped GEMMs only, and "
                    f"{graph.name} has no MoE layer: they change nothing, not priced")
    said += repeated_converters(listed)
    try:
        return plan_from_torchtitan(config, graph, cluster.num_devices), said
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise MegatronArgsError(f"cannot read the job file as a plan ({exc})") from None
