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
    no word, as one a moment later does, instead of a Python ``KeyboardInterrupt`` traceback
    (QA round 34: SIGINT 0.08 s after start)."""
    try:
        from autopar_opt.cli.commands import main as run
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    run()


def __getattr__(name: str) -> Any:
    if name == "app":
        from autopar_opt.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
