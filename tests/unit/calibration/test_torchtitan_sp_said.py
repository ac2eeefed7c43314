"""A torchtitan record with tensor parallelism that states sequence_parallel: false is
priced as stated and says that torchtitan's TP always shards the norms' sequence (QA round
11: it was priced without sequence parallelism and without a word; the unstated case
already said the default). Oracle: the reading's notes for the two statements."""

from __future__ import annotations

from autopar_opt.calibration.reading.parallel import read_parallelism
from autopar_opt.calibration.reading.schema import Parallelism
from autopar_opt.ir.runtime import runtime_named


def _notes(sp, runtime: str = "torchtitan", tp: int = 2) -> tuple[bool, list[str]]:
    notes: list[str] = []
    facts = read_parallelism(Parallelism(tp=tp, pp=1, dp=4, sequence_parallel=sp), 4 * tp,
                             runtime_named(runtime), notes)
    return facts.sp, notes


def test_a_stated_false_is_priced_as_stated_and_said():
    sp, notes = _notes(False)
    assert sp is False
    assert any("torchtitan's tensor parallelism always shards" in n for n in notes)


def test_other_statements_say_nothing_of_it():
    for sp, runtime, tp in ((True, "torchtitan", 2), (False, "megatron-core", 2),
                            (False, "torchtitan", 1)):
        assert not any("always shards" in n for n in _notes(sp, runtime, tp)[1])
