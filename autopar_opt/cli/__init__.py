"""The application layer: the ``autopar`` command line.

One module per command (``solve``, ``place``, ``calibrate``, ``capacity``, ``report``,
``export``, ``model``, ``peers``), the option checks (``options``) and the
whole-command time budget (``budget``); :mod:`autopar_opt.cli.commands` wires them
into the typer application. The library never imports this package: it parses,
calls the library and prints.
"""

from autopar_opt.cli.commands import app, main

__all__ = ["app", "main"]
