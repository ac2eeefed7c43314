"""torchtitan's own pipeline split, for a job file that does not list its stages.

A pipelined torchtitan job without ``parallelism.module_fqns_per_model_part`` is split by
torchtitan itself: ``pipeline_llm`` in ``torchtitan/distributed/pipeline_parallel.py``
(v0.2.2, the job-file format read here; torchtitan 0.3.0, which
requirements-frameworks.lock pins, runs the same rule in ``_get_pipeline_metadata`` and
``_generate_llm_fqn_per_model_part`` and names the head ``lm_head`` instead of ``output``).
The number of stages: ``pipeline_parallel_degree`` for a one-stage-per-rank schedule (1F1B,
GPipe), or ``ceil((layers + first_stage_less_layers + last_stage_less_layers) /
pipeline_parallel_layers_per_stage)`` when that key is given (torchtitan refuses a count
that is not one stage per rank). The layers: the embedding counts as
``pipeline_parallel_first_stage_less_layers`` layers and the norm + output as
``pipeline_parallel_last_stage_less_layers`` (both 1 by default, ``job_config.py``
``Parallelism``), the ``layers + both weights`` are dealt evenly, the first ``remainder``
stages one more, in order. :func:`default_model_parts` is that rule line for line, with
torchtitan's own refusals (as :class:`ValueError`)."""

from __future__ import annotations

import math
from typing import Any

#: torchtitan 0.2's defaults of the split's keys (``Parallelism`` in ``job_config.py``).
WEIGHT_DEFAULT = 1


def default_model_parts(num_stages: int, num_layers: int, input_weight: int = 1,
                        output_weight: int = 1) -> list[list[str]]:
    """The module names of each stage as torchtitan v0.2.2's
    ``generate_llm_fqn_per_model_part`` returns them (``torchtitan/distributed/
    pipeline_parallel.py``); raises :class:`ValueError` with torchtitan's reasons."""
    if num_stages < 1:
        raise ValueError("Number of stages must be at least 1")
    if num_stages == 1:
        return [["tok_embeddings"] + [f"layers.{i}" for i in range(num_layers)]
                + ["norm", "output"]]
    effective = num_layers + input_weight + output_weight
    if num_stages > effective:
        raise ValueError(f"the number of stages ({num_stages}) cannot be greater than the "
                         f"effective layers ({effective} = {num_layers} layers + first-stage "
                         f"weight {input_weight} + last-stage weight {output_weight})")
    per, extra = divmod(effective, num_stages)
    for name, weight in (("first", input_weight), ("last", output_weight)):
        if weight > per:
            raise ValueError(f"pipeline_parallel_{name}_stage_less_layers {weight} exceeds the "
                             f"fewest layers per stage ({per}), which torchtitan refuses")
    parts, layer = [], 0
    for stage in range(num_stages):
        count = per + (1 if stage < extra else 0)
        names = ["tok_embeddings"] if stage == 0 else []
        if stage == 0:
            count -= input_weight
        elif stage == num_stages - 1:
            count -= output_weight
        for _ in range(max(count, 0)):
            if layer < num_layers:
                names.append(f"layers.{layer}")
                layer += 1
        if stage == num_stages - 1:
            names += ["norm", "output"]
        parts.append(names)
    return parts


def _int_key(par: dict[str, Any], key: str, default: Any, least: int) -> Any:
    value = par.get(key, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"parallelism.{key} = {value!r}: give a whole number of at least "
                         f"{least}")
    return value


def torchtitan_split(par: dict[str, Any], num_layers: int) -> tuple[list[list[str]], str]:
    """The stages torchtitan runs for ``[parallelism]`` ``par`` (a one-stage-per-rank
    schedule, no ``module_fqns_per_model_part``) on a model of ``num_layers`` transformer
    blocks, and one line saying which split that is and why; raises :class:`ValueError`
    (naming the key) where torchtitan would refuse the file or a key is not a number."""
    pp = par["pipeline_parallel_degree"]
    first = _int_key(par, "pipeline_parallel_first_stage_less_layers", WEIGHT_DEFAULT, 0)
    last = _int_key(par, "pipeline_parallel_last_stage_less_layers", WEIGHT_DEFAULT, 0)
    per_stage = _int_key(par, "pipeline_parallel_layers_per_stage", None, 1)
    stages = pp
    if per_stage is not None:
        stages = math.ceil((num_layers + first + last) / per_stage)
        if stages != pp:
            raise ValueError(
                f"parallelism.pipeline_parallel_layers_per_stage {per_stage} makes "
                f"ceil(({num_layers} layers + {first} + {last}) / {per_stage}) = {stages} "
                f"stages on pipeline_parallel_degree {pp}: torchtitan's 1F1B/GPipe need "
                f"exactly one stage per rank (give pipeline_parallel_layers_per_stage "
                f"{math.ceil((num_layers + first + last) / pp)}, or list the stages as "
                "module_fqns_per_model_part)")
    parts = default_model_parts(stages, num_layers, first, last)
    sizes = [sum(1 for n in p if n.startswith("layers.")) for p in parts]
    how = (f"pipeline_parallel_layers_per_stage {per_stage}" if per_stage is not None
           else f"pipeline_parallel_degree {pp}")
    said = (f"parallelism.module_fqns_per_model_part is not given: torchtitan 0.2's own split "
            f"(generate_llm_fqn_per_model_part; {stages} stages from {how}, the embedding "
            f"weighted as {first} layer(s) and norm + output as {last}): transformer layers "
            f"per stage {sizes}")
    return parts, said
