"""Shared pieces of the learned-searcher benchmarks: import set-up, parallel runs, summaries.

Every searcher run happens in its own worker process (one thread each), so
runs do not share CPU caches of torch state and peak memory is per run.
``value at B s`` is read from the trace of one run with the largest budget:
the searchers' schedules count samples, not seconds (autopar_opt/learn/base.py),
so the prefix of a 60 s run is what a 10 s run finds, up to timing noise.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def importable_without_install() -> None:
    """Let ``autopar_opt.*`` resolve from the checkout when the package is not
    installed (the benchmark machine has numpy/networkx/yaml/torch only): the
    mapped folders (model_zoo/, solvers/, ...) live at the repository root."""
    sys.path.insert(0, str(ROOT))
    import autopar_opt

    if str(ROOT) not in autopar_opt.__path__:
        autopar_opt.__path__.append(str(ROOT))


def stats(values: list[float | None]) -> tuple[float | None, float | None, int]:
    """(mean, sd, runs without a feasible plan)."""
    ok = [v for v in values if v is not None and math.isfinite(v)]
    missing = len(values) - len(ok)
    if not ok:
        return None, None, missing
    return statistics.fmean(ok), (statistics.stdev(ok) if len(ok) > 1 else 0.0), missing


def fmt_ratio(values: list[float | None]) -> str:
    mean, sd, missing = stats(values)
    if mean is None:
        return "none found"
    found = sum(1 for v in values if v is not None)
    text = f"{mean:.4f}" if found == 1 else f"{mean:.4f} ± {sd:.4f}"   # one run has no spread
    return text + (f" ({missing} none)" if missing else "")


def worker_init() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine_line() -> str:
    import platform

    load = os.getloadavg()
    try:
        import torch
        tv = torch.__version__
    except ImportError:
        tv = "absent"
    import numpy

    return (f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"numpy {numpy.__version__}, torch {tv}; load average at start "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
