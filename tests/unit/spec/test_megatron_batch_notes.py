"""A Megatron-LM command line as the spec's plan that leaves out ``--micro-batch-size``
(Megatron-LM's ``validate_args`` asserts it) or ``--global-batch-size`` (the run then takes
``micro_batch_size · data_parallel_size``, ``validate_args``) is priced with a micro-batch
of 1 and the spec's global batch; QA round 11: both silently. Each is now said with the
flag to add. Oracle: Megatron-LM's rule by hand, 16 GPUs at tp 2 x pp 2 = dp 4."""

from __future__ import annotations

import yaml

from autopar_opt.spec import load_spec


def _notes(tmp_path, flags: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"zoo": "llama3-8b"}, "cluster": {"zoo": "2x8-h100"},
        "training": {"global_batch_size": 64, "seq_len": 8192, "dtype": "bf16",
                     "runtime": "megatron-core"},
        "plan": {"megatron_args": "--tensor-model-parallel-size 2 "
                                  "--pipeline-model-parallel-size 2 --sequence-parallel --bf16 "
                                  + flags}}))
    return [n for n in load_spec(path).notices if "batch-size" in n]


def test_left_out_batch_flags_are_said(tmp_path):
    both = _notes(tmp_path, "")
    assert any("--micro-batch-size is not given" in n and "priced with 1" in n for n in both)
    assert any("micro-batch-size x dp = 1 x 4 = 4 samples" in n
               and "add --global-batch-size 64" in n for n in both)
    assert _notes(tmp_path, "--micro-batch-size 2") == [
        "plan.megatron_args: --global-batch-size is not given: Megatron-LM then runs "
        "micro-batch-size x dp = 2 x 4 = 8 samples per iteration (validate_args), but the "
        "price is training.global_batch_size 64's: add --global-batch-size 64"]
    # Megatron's own global batch is the spec's: nothing to say
    assert _notes(tmp_path, "--micro-batch-size 16") == []
    assert _notes(tmp_path, "--micro-batch-size 2 --global-batch-size 64") == []
