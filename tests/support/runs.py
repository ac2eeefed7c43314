"""Published-run files for the calibration tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from support.paths import DATA

#: the shipped in-sample calibration records (a copy of the shared calibration data)
PUBLISHED_RUNS = DATA / "published_runs.yaml"


def write_runs(tmp_path: Path, records) -> Path:
    """Write ``records`` as a run file ``tmp_path/runs.yaml`` and return its path."""
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records))
    return path


def tiny_record(**changes) -> dict:
    """A one-layer GPT (h=64) on one A100 measured at 1 ms, the smallest record the
    reader models; ``changes`` set dotted keys (``section__key``), a None value
    removes the key."""
    rec = {"id": "r1", "record_type": "end_to_end_training_throughput",
           "model": {"arch": "GPT dense decoder", "num_layers": 1, "hidden_size": 64,
                     "num_attention_heads": 4, "num_kv_heads": 4, "ffn_hidden_size": 256,
                     "vocab_size": 128, "seq_len": 32},
           "hardware": {"gpu_type": "A100-SXM4", "gpu_memory_gb": 80, "num_gpus": 1,
                        "gpus_per_node": 8},
           "parallelism": {"tp": 1, "pp": 1, "dp": 1, "cp": 1, "sequence_parallel": False,
                           "vp_chunks": 1, "zero_stage": 0, "fsdp": "none"},
           "training": {"precision": "bf16", "micro_batch_size": 1, "global_batch_size": 1,
                        "recompute": "none", "framework": "Megatron-LM"},
           "measured": {"iteration_time_s": 1e-3}}
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        if value is None:
            rec[section].pop(key, None)
        else:
            rec[section][key] = value
    return rec
