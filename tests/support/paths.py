"""Where the tests find the repository and their data, wherever a test file sits."""

from __future__ import annotations

from pathlib import Path

#: the ``tests/`` folder
TESTS = Path(__file__).resolve().parents[1]
#: the repository root (examples/, model_zoo/, benchmarks/, docs/)
REPO = TESTS.parent
#: ``tests/data``
DATA = TESTS / "data"
