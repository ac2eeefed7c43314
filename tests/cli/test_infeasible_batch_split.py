"""A space that is infeasible because the batch splits over no data-parallel degree
says so, with the fix (found by a new user, session 24: "no valid strategy for
layer(s) embed, block000, block001 with 16 devices per stage and 1 samples per
micro-batch", and a price of runnability "not priced (the free space's search was
given 5 s ...)" for two spaces both proven infeasible)."""

from __future__ import annotations

import yaml

from support.cli import run_cli


def test_a_batch_no_data_parallel_degree_divides(tmp_path):
    spec = tmp_path / "gbs3.yaml"
    spec.write_text(yaml.safe_dump({
        "model": {"zoo": "debug"}, "cluster": {"zoo": "debug-2x4"},
        "training": {"global_batch_size": 3, "seq_len": 128},
        "search": {"pp_degrees": [1], "tp_degrees": [1, 2]}}))
    code, text = run_cli("solve", spec, "--out", tmp_path / "o")
    assert code == 3, text
    assert ("sample(s) split over none of the data-parallel degrees the space allows "
            "(8, 4 = devices per stage / (tp x cp)); use a global batch whose micro-batches "
            "hold a multiple of 4 samples") in text
    assert "price of runnability not priced (the free per-layer space is proven infeasible " \
           "too)" in text
