"""The JSON Schema of a run file (``autopar schema --runs``): what a user writes
to compare the cost model with their own measured runs (``autopar calibrate``).

Built from the typed sections of :mod:`.schema` (each declared field with its
description) plus the keys other readers take from a section's extras: the
throughput keys of :mod:`.measured` with their units, the Mixture-of-Experts
and MLA spellings of :mod:`.moe`, expert parallelism and ``hardware.intra_node``.
Every section keeps extra keys (a record may carry ``derived`` notes and its
source's own fields); an extra key that is a near-spelling of a declared one is
said when the record is read. The schema checks types and the shape of the
file; the rules between fields (``tp·pp·dp·cp = num_gpus``, heads divisible by
``tp``, the published parameter count within 3%) are the reader's, which names
the record, the key and the rule.
"""

from __future__ import annotations

from autopar_opt.calibration.reading.architecture import TYING_KEYS
from autopar_opt.calibration.reading.measured import MEASURES, OTHER_TOO, RANKS, THROUGHPUT_UNITS
from autopar_opt.calibration.reading.moe import EP_KEYS, ETP_KEYS, MOE_MODEL_KEYS
from autopar_opt.calibration.reading.schema import SECTIONS, RawRecord

_INT = {"type": "integer", "minimum": 0}
_NUM = {"type": "number"}

#: Top-level keys of a record, described.
RECORD_KEYS = {
    "id": "A name no other record of the file uses (numbers are read as text). Its first "
          "'_'-separated token names the record's source family, the unit `calibrate "
          "--cross-validate family` leaves out (two tokens for megatron_* ids; every bloom* id "
          "is one family): give the runs of one source one prefix.",
    "record_type": "end_to_end_training_throughput (the default) or per_layer_time ... "
                   "(one layer's time: measured.other.combined_ms or forward_ms + backward_ms).",
    "flops_counting": "How a TFLOP/s or MFU figure counts FLOPs, when the record gives one: PaLM / "
                      "torchtitan 6·N + 12·l·h·s, Megatron-Core num_floating_point_operations, 6·N·D, "
                      "or Narayanan et al. 2021's 96·B·s·l·h² (which counts the recomputed forward).",
    "notes": "Free text. Read for one thing only, when parallelism.pp_partition and "
             "pp_stage_layers are unstated: words naming an embedding-slot partition ('own pp "
             "slot', 'embeddings as own slots', type:transformer|embedding, "
             "account-for-embedding-in-pipeline-split) split the stages as embedding_slots, said "
             "in the record's assumptions.",
}
#: Each section, described.
SECTION_TEXT = {
    "source": "Where the run was published (cited in every table that shows it).",
    "model": "The model trained: dimensions, architecture fields (each beats the arch text), "
             "Mixture-of-Experts and MLA fields in the spellings real configs use.",
    "hardware": "The GPUs and their network.",
    "parallelism": "The published layout (tp·pp·dp·cp = num_gpus).",
    "training": "Batch, precision, recomputation and the training stack.",
    "measured": "What was measured: one throughput figure (the first stated of iteration_time_s, "
                "tokens_per_sec_per_gpu, a total token rate, samples_per_sec, mfu_pct, "
                "tflops_per_gpu, aggregate_pflops), and the peak memory where published; a record "
                "with memory and every throughput key null is compared on memory alone.",
}


def _nullable(schema: dict) -> dict:
    """``schema`` or null (a stated null is "not stated"), its description outside."""
    body = {k: v for k, v in schema.items() if k != "description"}
    out: dict = {"anyOf": [body, {"type": "null"}]}
    if "description" in schema:
        out["description"] = schema["description"]
    return out


def _throughput_keys() -> dict:
    out = {}
    for key, unit in THROUGHPUT_UNITS.items():
        body = {"type": "number", "exclusiveMinimum": 0,
                "description": f"Measured throughput, {unit}."}
        if key == "mfu_pct":
            body["maximum"] = 100
        out[key] = _nullable(body)
    out["hfu_pct"] = _nullable({"type": "number", "description": (
        "Hardware FLOPs utilisation, percent: kept, not used alone (hardware FLOPs count the "
        "recomputation each framework counts its own way).")})
    out["other"] = _nullable({"type": "object", "additionalProperties": True, "description": (
        "Further figures: " + ", ".join(OTHER_TOO) + " are read here too; a per-layer record's "
        "combined_ms, or forward_ms and backward_ms (ms per layer, forward + backward).")})
    return out


def run_file_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a run file: a non-empty list of records."""
    record = RawRecord.model_json_schema(ref_template="#/$defs/{model}")
    defs = record.pop("$defs")
    props = record["properties"]
    for key, text in RECORD_KEYS.items():
        props[key] = {"type": ["string", "null"], "description": text}
    props["id"] = {"type": ["string", "integer", "number"], "description": RECORD_KEYS["id"]}
    for name, cls in SECTIONS.items():
        ref = props[name]
        ref.pop("default", None)
        props[name] = {"anyOf": [{"$ref": f"#/$defs/{cls.__name__}"}, {"type": "null"}],
                       "description": SECTION_TEXT[name]}
    measured = defs["Measured"]["properties"]
    measured.update(_throughput_keys())
    measured["memory_measure"] = _nullable({"enum": list(MEASURES),
                                            "description": measured["memory_measure"]["description"]})
    measured["memory_rank"] = _nullable({"enum": list(RANKS),
                                         "description": measured["memory_rank"]["description"]})
    model = defs["Model"]["properties"]
    for key, (kind, text) in MOE_MODEL_KEYS.items():
        model[key] = _nullable({**({"integer": _INT, "number": _NUM}.get(kind, {})),
                                "description": text})
    for key, (_, text) in TYING_KEYS.items():
        model[key] = _nullable({"type": "boolean", "description": text})
    parallel = defs["Parallelism"]["properties"]
    for keys, text in ((EP_KEYS, "Expert-parallel degree (carved out of dp·cp, Megatron-Core)."),
                       (ETP_KEYS, "The experts' tensor-parallel degree; unstated: tp "
                                  "(Megatron-Core's default).")):
        for key in keys:
            parallel[key] = _nullable({**_INT, "description": text})
    defs["Hardware"]["properties"]["intra_node"] = _nullable({"description": (
        "The node's GPU interconnect as text; naming NVSwitch makes a 4-GPU SXM board switched "
        "(else it is read as point-to-point NVLink, said).")})
    for name, cls in SECTIONS.items():
        defs[cls.__name__]["description"] = SECTION_TEXT[name]
        for key in cls.POSITIVE:           # a physical size: stated positive, or null
            defs[cls.__name__]["properties"][key]["anyOf"][0]["exclusiveMinimum"] = 0
        for key in cls.INTEGERS:           # a count: the reader's positive-integer rule
            defs[cls.__name__]["properties"][key]["anyOf"][0]["minimum"] = 1
    # the reader refuses memory outside (0, 1.1 x the GPU's HBM]; the bound below is the schema's
    measured["memory_gib_per_gpu"]["anyOf"][0]["exclusiveMinimum"] = 0
    record["required"] = ["id"]
    record["description"] = "One measured run."
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "autopar-opt run file (autopar calibrate RUNS.yaml)",
            "description": "A list of measured runs, each with a unique id. The schema checks "
                           "types and shape; the rules between fields are the reader's, which "
                           "names the record, the key and the rule.",
            "type": "array", "minItems": 1, "items": record, "$defs": defs}
