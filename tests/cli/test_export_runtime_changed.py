"""``export`` of a solve's plan.json against a spec whose runtime changed since (QA round
31): the export writes the runtime's flags (Megatron-LM ``--overlap-grad-reduce``,
``--tp-comm-overlap``, ...), so a spec edited to ``runtime_options: {tp_comm_overlap:
false, grad_reduce_overlap: false}`` wrote a launch without them for a plan priced with
them, silently. Oracle: the runtime plan.json records (``spec.training.runtime``)."""

from __future__ import annotations

from support.cli import run_cli

SPEC = """\
model: {zoo: debug}
cluster: {zoo: debug-2x4}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16, runtime: megatron-core RUNTIME}
target: megatron
search: {pp_degrees: [1], tp_degrees: [2], sequence_parallel: [true], zero_levels: [1],
         recompute: [none], microbatches: [2]}
"""


def test_an_edited_runtime_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SPEC.replace(" RUNTIME", ""))
    code, text = run_cli("solve", "s.yaml", "--out", "o", "--quiet", "--time-limit", "20")
    assert code == 0, text
    code, text = run_cli("export", "o/plan.json", "--to", "megatron")
    assert code == 0 and "--tp-comm-overlap" in text and "--overlap-grad-reduce" in text, text
    (tmp_path / "s.yaml").write_text(SPEC.replace(" RUNTIME", ", runtime_options: "
                                                  "{tp_comm_overlap: false}"))
    code, text = run_cli("export", "o/plan.json", "--to", "megatron", "--out", "args.txt")
    assert code == 2, text
    assert "training.runtime tp_comm_overlap is False" in text and "solved for True" in text
    assert not (tmp_path / "args.txt").exists()
