"""The two ways reading a run file can fail."""

from __future__ import annotations


class RunFileError(ValueError):
    """The run file cannot be read as a list of records (names file, record, key). ``key``,
    ``value`` and ``fix`` name the offending entry and what to write where known."""

    def __init__(self, message: str, key: str = "", value=None, fix: str = "") -> None:
        super().__init__(message)
        self.key, self.value, self.fix = key, value, fix


class Unmodelable(ValueError):
    """A record the cost model cannot price; the message is the reason."""
