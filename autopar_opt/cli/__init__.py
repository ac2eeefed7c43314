"""The application layer: the ``autopar`` command line.

One module per command (``solve``, ``place``, ``calibrate``, ``capacity``, ``report``,
``export``, ``model``, ``peers``), the option checks (``options``) and the
whole-command time budget (``budget``); :mod:`autopar_opt.cli.commands` wires them
into the typer application. The library never imports this package: it parses,
calls the library and prints.

``app`` is loaded on first use (PEP 562) and :func:`main` imports the application
itself, so that the console script's ``from autopar_opt.cli import main`` is light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point (``autopar``): :func:`autopar_opt.cli.commands.main`.

    The application's import (typer, rich, the commands: about 70 ms) runs here, not at the
    script's ``from autopar_opt.cli import main``: a Ctrl-C during it ends with exit 130 and
    the interrupted message (with ``--json``, its error object), as one a moment later does,
    instead of a Python ``KeyboardInterrupt`` traceback (QA round 34: SIGINT 0.08 s after
    start); SIGTERM and SIGHUP likewise (exit 143, 129), not the default action's -15."""
    import signal
    import sys

    try:
        from autopar_opt.core.interrupts import stop_cleanly_outside_guards

        stop_cleanly_outside_guards()      # SIGTERM/SIGHUP during the import: said, not -15
        from autopar_opt.cli.commands import main as run
    except (KeyboardInterrupt, SystemExit) as exc:
        # said as every interrupted command says it (QA round 35: exit 130 and no word;
        # --json: an empty stdout); a SystemExit is ours only with a signal (StoppedBySignal)
        if isinstance(exc, SystemExit) and not hasattr(exc, "signum"):
            raise
        from autopar_opt.cli.stopped import say_stopped

        signum = int(getattr(exc, "signum", signal.SIGINT))
        say_stopped(signum, "--json" in sys.argv[1:])
        raise SystemExit(128 + signum) from None
    run()


def __getattr__(name: str) -> Any:
    if name == "app":
        from autopar_opt.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
