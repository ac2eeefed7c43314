"""A search space that holds no outer configuration is a spec error of solve (exit 2,
naming the key), not a search that ran out of time."""

from __future__ import annotations


EMPTY = """model: {zoo: debug}
cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}
training: {global_batch_size: 8}
search: {pp_degrees: [2], schedules: [interleaved], vp_chunks: [3]}
"""


def test_an_empty_search_space_is_a_spec_error(tmp_path):
    """No listed vp splits the debug model's blocks over 2 stages and no other schedule is
    listed: exit 2 naming search.vp_chunks (QA round 10: exit 4, 'no plan was found
    within the time limit', advising a longer one)."""
    from support.cli import run_cli

    spec = tmp_path / "empty.yaml"
    spec.write_text(EMPTY)
    code, text = run_cli("solve", spec, "--time-limit", "30")
    assert code == 2, text
    assert "search.vp_chunks = [3]" in text and "add 1f1b to search.schedules" in text
    assert not (tmp_path / "out").exists()
    spec.write_text(EMPTY.replace("schedules: [interleaved]", "schedules: [1f1b, interleaved]"))
    code, text = run_cli("solve", spec, "--time-limit", "30", "--quiet")
    assert code == 0, text
