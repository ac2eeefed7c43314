"""A value that fits no form of a key taking several (a plain union) is one problem naming
every form, not one per form with pydantic's type labels (QA round 9: a capacity sweep's
``base: 42`` read "base.str = 42: must be a valid string" and "base.dict[str,any] = 42")."""

from __future__ import annotations

from support.cli import run_cli


def _refused(tmp_path, command: str, text: str) -> str:
    """Write ``text`` as a YAML file, run ``command`` on it, and return its refusal (exit 2)
    with the whitespace flattened."""
    path = tmp_path / "input.yaml"
    path.write_text(text)
    code, out = run_cli(command, path)
    assert code == 2, out
    return " ".join(out.split())


def test_a_sweep_base_of_the_wrong_type_is_one_problem(tmp_path):
    flat = _refused(tmp_path, "capacity", "base: 42\naxes: {gpus: [8]}\n"
                    "planning: {token_budget: 1.0e+9, deadline_days: 1, "
                    "prices: {per_gpu_hour: {A100-80GB: 1}, source: x}}\n")
    assert "1 problem" in flat
    assert ("base = 42: is none of the forms this key takes; write a text string or a mapping "
            "of keys to values") in flat
    assert "base.str" not in flat and "dict[str,any]" not in flat


def test_a_plan_tp_above_the_kv_heads_names_the_valid_degrees(tmp_path):
    """QA round 9: tp 8 on Qwen3-235B (64 query heads, 4 key-value heads) was told to
    divide "e.g. the head count", which 8 does."""
    flat = _refused(tmp_path, "estimate", "model: {zoo: qwen3-235b-a22b}\n"
                    "cluster: {nodes: 32, gpus_per_node: 8, device: H100-SXM-80GB}\n"
                    "training: {global_batch_size: 512, seq_len: 4096}\n"
                    "plan: {tp: 8, pp: 8, ep: 8, micro_batch_size: 1}\n")
    assert "plan.tp = 8" in flat
    assert "(here 1, 2, 4; a transformer block's max_tp is its key-value head count" in flat
