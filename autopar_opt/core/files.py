"""Writing output files safely: checked before the work, written atomically.

Every command that writes files (``solve``, ``report``, and the commands
added later) should use these two steps, so that a user's mistake costs no
search time and a killed run never leaves a half-written file:

1. :func:`check_output_dir` / :func:`check_output_file` **before** the work
   starts: the path is not an existing file of the wrong kind, and its
   folder exists or can be created and is writable. Problems are returned as
   :class:`~autopar_opt.core.errors.SpecProblem` s naming the option, so they
   are reported with every other option mistake (exit code 2).
2. :func:`write_atomic` to write: a temporary file in the same folder,
   flushed and synced, then :func:`os.replace` onto the name (atomic on
   POSIX). The file gets the permissions ``open()`` would give a new file
   (``0o666`` minus the umask), the same for every output, whereas
   ``tempfile.mkstemp`` alone would leave it ``0o600``.

>>> from autopar_opt.core.files import check_output_dir, write_atomic   # doctest: +SKIP
>>> problems = check_output_dir("out/run1", option="--out")           # doctest: +SKIP
>>> write_atomic("out/run1/plan.json", text)                          # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from autopar_opt.core.errors import SpecProblem

#: The "file" named by problems with command-line options.
COMMAND_LINE = "command line"


def current_umask() -> int:
    """The process umask (read without changing it for longer than one call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The longest file name, in bytes, of the file systems a run writes to (ext4, xfs, btrfs,
#: tmpfs, APFS: 255).
NAME_MAX = 255


def hidden_sibling(name: str, suffix: str, limit: int = NAME_MAX) -> str:
    """``.NAME<suffix>``: the hidden file a run keeps beside the output ``NAME`` (its lock,
    its temporary file), at most ``limit`` bytes long. A ``NAME`` too long for that (an
    output name of 242-255 bytes: QA round 34, ``report --out`` of 250 characters was
    exit 70, "File name too long" on its lock) is cut and tagged with a hash of the whole
    name, so that one output name always gets the same sibling and two get two."""
    full = f".{name}{suffix}"
    if len(full.encode("utf-8", "surrogateescape")) <= limit:
        return full
    import hashlib

    raw = name.encode("utf-8", "surrogateescape")
    tag = "~" + hashlib.sha1(raw).hexdigest()[:12]
    room = max(0, limit - len(f".{tag}{suffix}".encode("utf-8", "surrogateescape")))
    head = raw[:room].decode("utf-8", "ignore")
    return f".{head}{tag}{suffix}"


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (or ``bytes``, e.g. a saved policy) to ``path`` atomically, with
    umask-respecting permissions.

    The folder is created if missing. On any failure (or an interrupt) the
    temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp adds 8 random characters between the prefix and ".tmp"
    prefix = hidden_sibling(path.name, ".", NAME_MAX - 8 - len(".tmp"))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        binary = isinstance(text, bytes)
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _problem(option: str, value: str, rule: str, fix: str) -> SpecProblem:
    return SpecProblem(COMMAND_LINE, option, value, rule, fix)


def _creatable_dir(folder: Path, option: str, shown: str) -> list[SpecProblem]:
    """Problems unless ``folder`` is, or can be created as, a writable directory."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return [_problem(option, shown, f"{probe} is a file, not a directory",
                         "name a path whose folders are directories")]
    if not os.access(probe, os.W_OK | os.X_OK):
        return [_problem(option, shown, f"the directory {probe} is not writable",
                         "choose a directory you can write to")]
    try:        # access() says yes to root everywhere (/proc, read-only mounts): try it
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".autopar-probe.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return [_problem(option, shown, f"cannot create files in {probe} "
                         f"({exc.strerror or exc})", "choose a directory you can write to")]
    return []


#: ``-``, the usual name of standard output: an ``--out -`` wrote a file (or a folder) named
#: "-" in the current directory (QA round 12), which a user meant as "print it".
STDOUT_NAME = "-"
STDOUT_RULE = ("is '-', which names standard output in most tools; autopar writes no output "
               "there through --out")


def check_output_dir(path: str | os.PathLike, option: str = "--out",
                     files: tuple[str, ...] = ("plan.json", "report.html")) -> list[SpecProblem]:
    """Problems with writing ``files`` into directory ``path`` (empty when fine)."""
    shown = str(path)
    if not shown:       # an empty --out "" was taken for "no --out" and nothing was written
        return [_problem(option, shown, "is an empty path",
                         f"name a directory for {' and '.join(files)}, or drop {option}")]
    if shown == STDOUT_NAME:
        return [_problem(option, shown, STDOUT_RULE, f"name a directory for "
                         f"{' and '.join(files)} (./- if a folder named '-' is meant)")]
    try:
        folder = Path(path)
        if "\x00" in shown:
            return [_problem(option, shown.replace("\x00", "\\x00"), "the path contains a NUL "
                             "character", "name a directory")]
        if folder.exists() and not folder.is_dir():
            return [_problem(option, shown, "exists and is not a directory",
                             f"name a directory for {' and '.join(files)} (it is created if "
                             "missing), or remove the file")]
        problems = _creatable_dir(folder, option, shown)
        for name in files:
            if (folder / name).is_dir():
                problems.append(_problem(option, shown, f"{folder / name} is a directory",
                                         f"remove it or choose another {option}"))
        return problems
    except OSError as exc:      # name too long, permission denied on a parent, ...
        return [_problem(option, shown[:200], f"cannot be used ({exc.strerror or exc})",
                         "name a shorter or accessible directory")]


def check_output_file(path: str | os.PathLike, option: str = "--output",
                      inputs: tuple[str | os.PathLike | None, ...] = ()) -> list[SpecProblem]:
    """Problems with writing the file ``path`` (empty when fine); ``inputs``: the
    files the command reads, which the output must not overwrite."""
    shown = str(path)
    if not shown:
        return [_problem(option, shown, "is an empty path", f"name a file, or drop {option}")]
    if shown == STDOUT_NAME:
        return [_problem(option, shown, STDOUT_RULE, f"drop {option} where the command prints "
                         "without it (export), or name a file (./- if a file named '-' is "
                         "meant)")]
    try:
        target = Path(path)
        if "\x00" in shown:
            return [_problem(option, shown.replace("\x00", "\\x00"), "the path contains a NUL "
                             "character", "name a file")]
        if target.is_dir():
            return [_problem(option, shown, "is a directory", "name a file (a new name inside "
                             "that directory is fine)")]
        if shown.endswith(("/", os.sep)):   # QA round 12: "new/" was written as a file "new"
            return [_problem(option, shown, "ends in a path separator, so it names a directory, "
                             "not a file", "name a file, e.g. " + shown.rstrip("/" + os.sep)
                             + "/NAME (a missing directory is created)")]
        if target.exists() and not os.access(target, os.W_OK):
            return [_problem(option, shown, "exists and is not writable",
                             "choose another file name")]
        same = [str(i) for i in inputs if i and target.exists() and Path(i).exists()
                and os.path.samefile(target, i)]
        if same:
            return [_problem(option, shown, f"is the input file {same[0]}: writing the output "
                             "would overwrite it", "name another file for the output")]
        return _creatable_dir(target.parent if str(target.parent) else Path("."), option, shown)
    except OSError as exc:
        return [_problem(option, shown[:200], f"cannot be used ({exc.strerror or exc})",
                         "name a shorter or accessible path")]
