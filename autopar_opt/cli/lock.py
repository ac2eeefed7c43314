"""One run's exclusive hold on its output folder (issue 33).

Two runs writing into one ``--out`` folder would each rename their own complete
files over the other's (:func:`autopar_opt.core.files.write_atomic` is atomic per
file, not per run), so the folder would end with a mix, or the last writer's
results, without a word. :class:`OutputLock` refuses the second run at once instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from autopar_opt.cli.options import OptionError
from autopar_opt.core.errors import SpecProblem
from autopar_opt.core.files import COMMAND_LINE, current_umask, hidden_sibling

#: Name of the lock file a run holds in its output folder.
LOCK_NAME = ".autopar.lock"


class OutputLock:
    """One run's exclusive hold on an output folder (or a single output file's name).

    A run takes this lock before its work: a
    kernel lock (``fcntl.flock``) on ``OUT/.autopar.lock`` (``.NAME.autopar.lock``
    beside a single output file), held until the outputs are written. A second run
    into the same place is refused at once, naming the run that holds it. The kernel
    drops the lock when its process dies, even by SIGKILL, so a crashed run never
    blocks the next one. The lock file is removed on release (and the folder too when
    this run created it and wrote nothing into it).
    """

    def __init__(self, target: str | os.PathLike, option: str, single_file: bool = False) -> None:
        target = Path(target)
        self.option, self.shown = option, str(target)
        self.folder = target.parent if single_file else target
        self.path = self.folder / (hidden_sibling(target.name, LOCK_NAME) if single_file
                                   else LOCK_NAME)
        self._fd: int | None = None
        self._made: list[Path] = []

    def acquire(self) -> None:
        """Take the lock; :class:`~autopar_opt.cli.options.OptionError` (exit 2) when another
        run holds it."""
        import fcntl

        missing = []
        probe = self.folder
        while not probe.exists() and probe.parent != probe:
            missing.append(probe)
            probe = probe.parent
        self.folder.mkdir(parents=True, exist_ok=True)
        self._made = missing
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~current_umask())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                self._forget_folders()
                raise OptionError([SpecProblem(
                    COMMAND_LINE, self.option, self.shown, f"another autopar run ({holder}) is "
                    "writing there now; two runs into one place would overwrite each other's "
                    "results", f"wait for it to finish, or choose another {self.option}")]) from None
            try:                 # the file we locked may have been unlinked by a releasing run
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        import sys
        import time

        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, started {time.strftime('%H:%M:%S')}: "
                     f"{' '.join(sys.argv)[:300]}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Drop the lock and its file (and the folders this run created, when empty)."""
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None
        self._forget_folders()

    def _forget_folders(self) -> None:
        for folder in self._made:                 # deepest first
            try:
                folder.rmdir()                    # only when empty
            except OSError:
                break
        self._made = []

    def __enter__(self) -> "OutputLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 400, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "its pid is not recorded yet"


def output_lock(target: str | os.PathLike | None, option: str, single_file: bool = False):
    """A context manager holding :class:`OutputLock` on ``target`` (none when ``target`` is None)."""
    import contextlib

    return OutputLock(target, option, single_file) if target else contextlib.nullcontext()
