"""The results store: one SQLite row per solved scenario, keyed by its content hash.

The key (:func:`autopar_opt.capacity.sweep.scenario_key`) covers the
normalised scenario, the tool version and the cost-model parameters, so a
row is reused exactly when the same search would be run again, whatever
sweep file it came from. Each row is committed the moment its scenario
finishes, in WAL mode: a sweep stopped by Ctrl-C or ``kill -9`` loses at most
the scenarios that were still running, and the next run recomputes nothing
that finished. Planning inputs (budget, deadline, prices) are not part of the
key: changing them re-prices stored rows without solving again.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable

from autopar_opt import __version__

SCHEMA = """
CREATE TABLE IF NOT EXISTS scenario_results (
    key TEXT PRIMARY KEY,          -- sha256 of normalised scenario + tool version + cost model
    scenario_id TEXT NOT NULL,     -- id in the sweep that computed it (informative)
    tool_version TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    solve_wall_s REAL NOT NULL,
    row_json TEXT NOT NULL          -- the worker's row (summary + plan.json document)
)
"""


def default_store_path() -> Path:
    """``$XDG_CACHE_HOME/autopar-opt/capacity.sqlite`` (``~/.cache`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "autopar-opt" / "capacity.sqlite"


class ResultStore:
    """Scenario rows by key; safe to reopen after a crash (SQLite WAL, one commit per row)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SCHEMA)
        self._db.commit()

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Stored rows for ``keys`` (missing keys are absent from the result)."""
        out: dict[str, dict[str, Any]] = {}
        keys = list(keys)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for key, text in self._db.execute(
                    f"SELECT key, row_json FROM scenario_results WHERE key IN ({marks})", chunk):
                out[key] = json.loads(text)
        return out

    def put(self, key: str, row: dict[str, Any]) -> None:
        """Store (or replace) the row of ``key`` and commit at once."""
        created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._db.execute("INSERT OR REPLACE INTO scenario_results VALUES (?, ?, ?, ?, ?, ?)",
                         (key, row.get("id", ""), __version__, created,
                          float(row.get("solve_wall_s", 0.0)), json.dumps(row)))
        self._db.commit()

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM scenario_results").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
