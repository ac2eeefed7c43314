"""A plan that fits with under 5% of its memory free is said to be tight in the solve
summary, as the report's badge says (it was only in the report). Oracle: the headroom by
hand."""

from __future__ import annotations

from autopar_opt.reports.formatting import NCCL_BUFFERS_WORDS, TIGHT_HEADROOM, tight_note


def test_tight_below_five_percent_headroom_only():
    assert TIGHT_HEADROOM == 0.05
    nccl = f"; {NCCL_BUFFERS_WORDS})"
    assert tight_note(75.8, 76.0) == " (tight: 0.2 GiB free, under 5% headroom" + nccl
    assert tight_note(72.3, 76.0) == " (tight: 3.7 GiB free, under 5% headroom" + nccl  # 4.87%
    assert tight_note(72.0, 76.0) == ""            # 5.26% free
    assert tight_note(80.0, 76.0) == ""            # over: the summary says it does not fit
    assert tight_note(1.0, 0.0) == ""


def test_a_tight_plan_is_told_nccl_buffers_are_outside_its_peak():
    """Session 32: the runtime reserve's messages said it held NCCL buffers; the measured
    0.763 GiB holds none (one GPU runs no NCCL ring), so a tight plan's headroom must, and the
    summary says so with the cited magnitude."""
    words = tight_note(75.8, 76.0)
    assert "NCCL's own buffers" in words and "nccl#964" in words
    assert "0.5-0.7 GiB per communicator" in words
