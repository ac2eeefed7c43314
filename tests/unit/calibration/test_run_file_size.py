"""A run file larger than a spec's 1 MiB limit is read (QA round 13: ``autopar calibrate``
read run files under the spec limit of 1 MiB, some 370 records of the shipped file's
2.8 kB each, less than a measurement campaign); above the run-file limit it is refused
with the limit's figure. Oracle: the records written, counted back."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.calibration.reading import load_run_file
from autopar_opt.calibration.reading.errors import RunFileError
from autopar_opt.core import limits
from support.runs import tiny_record

#: a comment as long as the shipped records' notes (a record is ~2.8 kB with them)
NOTE = "# " + "measured on the cluster's own nodes, three runs, median step time " * 30 + "\n"


def test_a_campaign_over_one_mib_is_read(tmp_path):
    runs = tmp_path / "campaign.yaml"
    base = tiny_record()
    records = [dict(base, id=f"run_{i}") for i in range(600)]
    runs.write_text("".join(NOTE + yaml.safe_dump([r], sort_keys=False) for r in records))
    assert limits.MAX_FILE_BYTES < runs.stat().st_size < 16 * 1024 * 1024
    assert [r["id"] for r in load_run_file(runs)] == [r["id"] for r in records]


def test_a_run_file_over_its_limit_is_refused_with_the_figure(tmp_path):
    cap = limits.MAX_RUN_FILE_BYTES
    runs = tmp_path / "huge.yaml"
    runs.write_text(yaml.safe_dump([tiny_record()]) + "#" * cap + "\n")
    with pytest.raises(RunFileError, match=f"over the limit of {cap:,} bytes"):
        load_run_file(runs)
