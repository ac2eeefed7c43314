"""The commands' rich console: a reader that closes the pipe early (``autopar ... | head``)
ends the command with the shell's SIGPIPE status, as ``cat`` or ``git`` do, where rich's
own ``Console.on_broken_pipe`` exits 1 with no word (rich documents the method as the
place to change that). Imported where rich is (the commands import rich lazily)."""

from __future__ import annotations

from rich.console import Console as _RichConsole

from autopar_opt.cli.guard import closed_pipe


class Console(_RichConsole):
    """:class:`rich.console.Console` that exits with :data:`~autopar_opt.cli.guard.EXIT_PIPE`
    on a closed pipe."""

    def on_broken_pipe(self) -> None:
        closed_pipe()
