"""Transitional alias: the DP moved to :mod:`autopar_opt.solvers.dp` (``solvers/dp/``).

``autopar_opt.dp`` and ``autopar_opt.dp.<module>`` resolve to the same module
objects as ``autopar_opt.solvers.dp[.<module>]`` (so monkeypatching either
name patches both). Kept only so that branches written before the move keep
importing; new code imports ``autopar_opt.solvers.dp``. Remove once no
branch uses this path.
"""

import importlib
import sys

_NEW = "autopar_opt.solvers.dp"
for _name in ("chain", "common", "completion", "dag"):
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"{_NEW}.{_name}")
sys.modules[__name__] = importlib.import_module(_NEW)
