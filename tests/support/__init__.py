"""Shared test helpers, imported as ``support.<module>`` (``pythonpath = ["tests"]``
in pyproject.toml): instance builders, brute-force oracles, solver-agreement checks."""
