"""Write a torchtitan 0.2 job file from an ``autopar estimate --json`` document, for the
tests that read such a file back as a plan (``plan: {torchtitan: job.toml}``): the FP8 and
MXFP8 import tests wrote the same estimate-then-export steps each."""

from __future__ import annotations

from pathlib import Path

from support.cli import export_estimate

#: A plan torchtitan runs as written (no TP, two GPipe stages, ZeRO-2), estimated before
#: the export.
JOB_PLAN = "{tp: 1, pp: 2, microbatches: 8, zero: 2, schedule: gpipe}"


def export_torchtitan_job(folder: Path, estimate: dict) -> str:
    """``estimate`` (a successful estimate --json document) written to ``folder/est.json``
    and exported with ``autopar export --to torchtitan --framework-version 0.2`` to
    ``folder/job.toml``; the job file's text. Fails the test if the export does."""
    return export_estimate(folder, estimate, "torchtitan", "job.toml", "--framework-version", "0.2")
