"""Engines that run :func:`~autopar_opt.capacity.worker.solve_scenario` over many scenarios.

* ``local`` (default, needs nothing): a process pool of ``workers``
  processes (default: the cores this process may use). Workers come from a
  fork server that has already imported the solver stack, so a worker starts
  in milliseconds rather than re-importing Pyomo and SciPy. With one worker
  (or one scenario) the scenarios run in this process, one after the other:
  a pool of one only added a fork server that imported the solver stack and
  the report renderer a second time (about 1.5 s of wall clock on the 2-core
  development machine, CPU the command's own rusage did not even show).
* ``ray``: one Ray task per scenario, on the cluster named by ``RAY_ADDRESS``
  or on a local Ray started (and shut down) for the sweep. Ray is the
  optional extra ``autopar-opt[ray]``.

Both yield each row as soon as its scenario finishes (completion order), so
the caller can store it at once; both run the same worker function, so the
rows are the same.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Iterator

from autopar_opt.capacity.worker import solve_scenario

ENGINES = ("local", "ray")
#: Imported once by the fork server, so every worker starts with the solver stack loaded.
PRELOAD = ["autopar_opt.capacity.worker", "autopar_opt.reports.render", "autopar_opt.formulations.direct",
           "autopar_opt.solvers.highs", "autopar_opt.solvers.registry"]
RAY_INSTALL = "pip install 'autopar-opt[ray]'  (or: pip install ray==2.60.0)"


class EngineUnavailable(RuntimeError):
    """The engine asked for cannot run here (message says how to install it)."""


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _ignore_interrupts() -> None:
    """Initializer of every pool worker: SIGINT ignored. A terminal's Ctrl-C reaches the
    whole process group; the command's own process answers it (it stores what finished,
    writes the answers and terminates the workers: :func:`run_local`). A worker that raised
    KeyboardInterrupt itself either broke the pool or, idle, printed multiprocessing's
    "Process ForkServerProcess-2:" into the command's stderr as the parent terminated it
    (QA round 35, one run in three on a sweep with an idle worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(tasks: list[dict[str, Any]], workers: int) -> Iterator[dict[str, Any]]:
    """Solve ``tasks`` on a local process pool; yields rows in completion order.

    On an interrupt (Ctrl-C) the pending scenarios are cancelled and the
    running ones are stopped before the interrupt propagates.
    """
    if not tasks:
        return
    if min(workers, len(tasks)) <= 1:
        for task in tasks:           # an interrupt propagates from here like from the pool
            yield solve_scenario(task)
        return
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    pool = ProcessPoolExecutor(max_workers=max(1, min(workers, len(tasks))), mp_context=ctx,
                               initializer=_ignore_interrupts)
    try:
        pending = {pool.submit(solve_scenario, task) for task in tasks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _ray():
    try:
        import ray  # noqa: PLC0415 - optional extra
    except ImportError:
        raise EngineUnavailable(f"--engine ray needs Ray, an optional extra: {RAY_INSTALL}") from None
    return ray


def run_ray(tasks: list[dict[str, Any]], workers: int | None) -> Iterator[dict[str, Any]]:
    """Solve ``tasks`` as Ray tasks; yields rows in completion order.

    Connects to ``RAY_ADDRESS`` when it is set; otherwise starts a local Ray
    with ``workers`` CPUs (default: the available cores) and shuts it down
    afterwards. A Ray that was already initialised by the caller is used as
    is and left running.
    """
    ray = _ray()
    if not tasks:
        return
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
        if not os.environ.get("RAY_ADDRESS"):
            kwargs["num_cpus"] = workers or available_cores()
        ray.init(**kwargs)
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(solve_scenario)
    refs = [remote.remote(task) for task in tasks]
    try:
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield ray.get(ref)
    except BaseException:
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a finished task cannot be cancelled
                pass
        raise
    finally:
        if started:
            ray.shutdown()


def run_engine(engine: str, tasks: list[dict[str, Any]], workers: int | None) -> Iterator[dict[str, Any]]:
    """Dispatch to :func:`run_local` or :func:`run_ray`."""
    if engine == "ray":
        _ray()                      # fail before any work when Ray is not installed
        return run_ray(tasks, workers)
    return run_local(tasks, workers or available_cores())
