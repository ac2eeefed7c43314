"""An explicit plan (``plan: {stages: ...}``) with ``vp_chunks > 1`` and a schedule other
than interleaved (QA round 34).

Before: accepted, priced as one chunk per stage (the iteration time of ``vp_chunks: 1``)
and echoed as ``vp_chunks: 2`` in ``estimate --json``. The Megatron form of the same plan
(``plan: {pp: 2, vp_chunks: 2}`` under 1f1b) was refused. Oracle: that form's own rule and
words; the price of the same stages with ``vp_chunks: 1`` stays what it was.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from autopar_opt.spec import SpecError, load_spec
from support import paths

QUICKSTART = yaml.safe_load((paths.REPO / "examples" / "quickstart.yaml").read_text())
STRATEGY = {"dp": 4, "tp": 1, "cp": 1, "sp": False, "zero": 1, "recompute": "none"}


def _write(tmp_path, plan: dict, name: str = "spec.yaml"):
    spec = copy.deepcopy(QUICKSTART)
    spec["plan"] = plan
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def _stages() -> list[dict]:
    names = ["embed"] + [f"block{i:03d}" for i in range(24)] + ["head"]
    return [{"layers": names[:13], "strategies": [STRATEGY]},
            {"layers": names[13:], "strategies": [STRATEGY]}]


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_virtual_chunks_without_the_interleaved_schedule_are_refused(tmp_path, schedule):
    path = _write(tmp_path, {"stages": _stages(), "microbatches": 8, "vp_chunks": 2,
                             "schedule": schedule})
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert (problem.key, problem.value) == ("plan.vp_chunks", 2)
    assert problem.rule == "virtual chunks need the interleaved schedule"
    with pytest.raises(SpecError) as megatron:      # the same rule as the Megatron form's
        load_spec(_write(tmp_path, {"pp": 2, "vp_chunks": 2, "microbatches": 8,
                                    "schedule": schedule}, "megatron.yaml"))
    assert megatron.value.problems[0].rule == problem.rule


def test_one_chunk_and_the_interleaved_schedule_still_load(tmp_path):
    one = load_spec(_write(tmp_path, {"stages": _stages(), "microbatches": 8}))
    assert one.plan.vp_chunks == 1 and one.plan.pp == 2
    two = load_spec(_write(tmp_path, {"stages": _stages(), "microbatches": 8, "vp_chunks": 2,
                                      "schedule": "interleaved"}, "interleaved.yaml"))
    assert two.plan.vp_chunks == 2
