"""The bounded reader of every input kind (autopar_opt/core/reading.py, issue 33).

Oracles: the bytes written (what a correct read returns), the kind's limits (what a
refusal names), and what the path is (a device, a directory, a FIFO).
"""

from __future__ import annotations

import gzip
import os

import pytest

from autopar_opt.core import reading
from autopar_opt.core.errors import SpecError

SMALL = reading.ReadLimits("test file", 1000, "a small test file", max_unpacked_bytes=5000,
                           max_ratio=10)


def _refusal(path, limits=SMALL) -> str:
    with pytest.raises(SpecError) as info:
        reading.read_bytes(path, limits)
    return info.value.problems[0].rule


def test_plain_and_packed_files_read_back_exactly(tmp_path):
    data = b'{"a": [1, 2, 3]}'
    (tmp_path / "p.json").write_bytes(data)
    (tmp_path / "z.json.gz").write_bytes(gzip.compress(data))
    assert reading.read_bytes(tmp_path / "p.json", SMALL) == data
    assert reading.read_bytes(tmp_path / "z.json.gz", SMALL) == data
    # several gzip members, as gzip.open reads them
    (tmp_path / "m.gz").write_bytes(gzip.compress(data[:5]) + gzip.compress(data[5:]))
    assert reading.read_bytes(tmp_path / "m.gz", SMALL) == data
    assert reading.read_json(tmp_path / "z.json.gz", SMALL) == {"a": [1, 2, 3]}


def test_sizes_raw_unpacked_and_ratio(tmp_path):
    (tmp_path / "big").write_bytes(b" " * 1001)
    assert "1,001 bytes, over the limit of 1,000 bytes for a test file" in _refusal(tmp_path / "big")
    # the ratio: 17 MB from ~17 KB stops at max(10 x packed, 16 MiB) = 16 MiB, long before
    # the kind's own 1 GB
    limits = reading.ReadLimits("t", 100_000, "x", max_unpacked_bytes=10**9, max_ratio=10)
    (tmp_path / "bomb.gz").write_bytes(gzip.compress(b" " * 17_000_000))
    assert f"unpacks to more than {16 << 20:,} bytes" in _refusal(tmp_path / "bomb.gz", limits)
    # the kind's own unpacked limit (5,000 bytes) when it is the lower one
    (tmp_path / "over.gz").write_bytes(gzip.compress(b"x" * 6000))
    assert "unpacks to more than 5,000 bytes" in _refusal(tmp_path / "over.gz")


def test_damaged_or_cut_gzip(tmp_path):
    packed = gzip.compress(b"x" * 500)
    (tmp_path / "cut.gz").write_bytes(packed[:-12])
    assert "cut short" in _refusal(tmp_path / "cut.gz") or "not a valid gzip" in _refusal(tmp_path / "cut.gz")
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 30)
    assert "not a valid gzip file" in _refusal(tmp_path / "bad.gz")


def test_paths_that_are_not_files_are_named_for_what_they_are(tmp_path):
    assert reading.describe_path(tmp_path / "missing") == "does not exist"
    assert reading.describe_path(tmp_path) == "is a directory"
    assert reading.describe_path("/dev/zero") == "is a device file (such as /dev/zero), not a regular file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert reading.describe_path(fifo) == "is a pipe (FIFO), not a file"
    assert reading.describe_path("a\x00b") == "name contains a NUL character"
    (tmp_path / "runs.yaml").write_text("[]")
    with pytest.raises(SpecError) as info:
        reading.read_bytes(tmp_path, SMALL)
    assert "is a directory" in info.value.problems[0].rule and "runs.yaml" in info.value.problems[0].fix


def test_json_failures_are_messages(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    limits = reading.ReadLimits("t", 10**6, "x")
    with pytest.raises(SpecError, match="nested too deeply"):
        reading.read_json(tmp_path / "deep.json", limits)
    (tmp_path / "digits.json").write_text('{"a":\n ' + "9" * 5000 + "}")
    with pytest.raises(SpecError, match="more than 4,300 digits at line 2"):
        reading.read_json(tmp_path / "digits.json", limits)
    (tmp_path / "syntax.json").write_text('{"a": }')
    with pytest.raises(SpecError, match="JSON syntax error at line 1, column 7"):
        reading.read_json(tmp_path / "syntax.json", limits)
    (tmp_path / "latin.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(SpecError, match="not UTF-8 text"):
        reading.read_json(tmp_path / "latin.json", limits)
