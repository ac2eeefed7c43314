"""The two ways reading a run file can fail."""

from __future__ import annotations


class RunFileError(ValueError):
    """The run file cannot be read as a list of records (names file, record, key)."""


class Unmodelable(ValueError):
    """A record the cost model cannot price; the message is the reason."""
