"""The Hugging Face configs shipped with autopar-opt (``model_zoo/hf/NAME.json``), by name.

A spec's ``model: {hf_config: NAME}`` and ``autopar model NAME`` take a bundled config by
its name when no file or directory of that name exists where the path points (a path
always wins, so a local ``config.json`` is never shadowed); the build's source then
says "bundled". Each config's published parameter count and where its values come
from are in ``hf/SOURCES.yaml`` (checked by ``tests/unit/spec/test_hf_import.py``);
``autopar zoo list`` shows them.
"""

from __future__ import annotations

import difflib
import re

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

_PACKAGE = "autopar_opt.model_zoo"


@lru_cache(maxsize=1)
def bundled_names() -> tuple[str, ...]:
    """The names (file stems) of the bundled configs, sorted."""
    root = resources.files(_PACKAGE).joinpath("hf")
    return tuple(sorted(e.name[: -len(".json")] for e in root.iterdir()
                        if e.name.endswith(".json")))


def bundled_path(name: str) -> Path | None:
    """The file of the bundled config ``name`` (None: no such bundled config, or
    ``name`` is a path rather than a bare name)."""
    if not isinstance(name, str) or name not in bundled_names():
        return None
    return Path(str(resources.files(_PACKAGE).joinpath("hf", f"{name}.json")))


def resolve(text: str, path: Path, zoo: tuple[str, ...] = ()) -> tuple[Path, str | None, str | None]:
    """(the file to read, its label when it is a bundled config, the problem when there
    is nothing to read) for a config named by ``text`` and resolved to ``path``: ``path``
    itself where it exists, else the bundled config of that name (label ``bundled
    hf/NAME.json``), else ``path`` and the message naming the bundled names (and the
    zoo models ``zoo`` where the caller also takes those), with the closest name."""
    try:
        if path.exists():
            return path, None, None
    except (OSError, ValueError):
        pass
    found = bundled_path(text)
    if found is not None:
        return found, f"bundled hf/{text}.json", None
    names = ", ".join(bundled_names())
    if is_hub_id(text) or is_url(text):
        return path, None, hub_id_problem(text, str(path), names)
    if is_bare_name(text):
        close = closest_name(str(text), list(bundled_names()) + list(zoo))
        hint = f"did you mean {close[0]!r}? " if close else ""
        zoo_part = f", or a zoo model's name: {', '.join(zoo)}" if zoo else ""
        return path, None, (
            f"{str(path)[:200]}: no such file or directory, and {str(text)[:80]!r} is not "
            f"the name of a bundled config{' or a zoo model' if zoo else ''} (fix: {hint}give "
            f"a config.json, a directory holding one, or a bundled config's name: {names}"
            f"{zoo_part}; autopar zoo list)")
    return path, None, (
        f"{str(path)[:200]}: no such file or directory (fix: give a config.json or a "
        f"directory holding one, or a bundled config's name: {names}; autopar zoo list)")


#: A model size in a name: ``70b``, ``8x22b``, ``2.7b``, ``350m`` (not followed by a letter).
_SIZE = re.compile(r"(?:\d+x)?\d+(?:\.\d+)?[bm](?![a-z])")


def sizes(name: str) -> tuple[str, ...]:
    """The model sizes a name states (``qwen3-30b-a3b``: ``30b``, ``3b``)."""
    return tuple(_SIZE.findall(name.lower()))


def closest_name(text: str, names: list[str]) -> list[str]:
    """The closest of ``names`` to ``text`` (difflib, case aside), as a list of at most
    one; where ``text`` states a model size, only a name stating the same sizes: QA round
    34, ``llama-3.1-70b`` got "did you mean 'llama-3.1-405b'?", ``qwen3-32b``
    'qwen3-8b' and ``gemma-3-4b`` 'gemma-3-1b', another model than the one asked for."""
    asked = sizes(text)
    pool = [n for n in names if not asked or sizes(n) == asked]
    return difflib.get_close_matches(text.lower(), pool, n=1, cutoff=0.6)


#: File suffixes that make a name a path (a config or a spec), not a bundled config's name.
FILE_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


def is_bare_name(text: str) -> bool:
    """Whether ``text`` names a config rather than a path: no directory part and no
    file suffix (``granite-3.1-2b-base`` is a name)."""
    return isinstance(text, str) and bool(text) and Path(text).name == text \
        and "\\" not in text and not text.lower().endswith(FILE_SUFFIXES)


#: A Hugging Face Hub repository id, ``owner/name`` (the Hub's characters: letters,
#: digits, ``-``, ``_``, ``.``; neither part starting with a dot).
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def is_hub_id(text: str) -> bool:
    """Whether ``text`` reads as a Hub repository id (``Qwen/Qwen2.5-7B``) rather than a
    file: ``owner/name`` with no file suffix. Only asked of a path that does not exist."""
    return isinstance(text, str) and _HUB_ID.fullmatch(text) is not None \
        and not text.lower().endswith(FILE_SUFFIXES)


#: A URL (``https://...``, ``hf://...``), and a Hub page's or file's URL with its repository.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_HUB_URL = re.compile(r"(?:https?://(?:www\.)?huggingface\.co/|hf://)"
                      r"([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(?:[/?#].*)?")


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (QA round 34: ``https://huggingface.co/.../config.json``
    was read as the local path ``https:/huggingface.co/...``, "no such file")."""
    return isinstance(text, str) and _URL.match(text) is not None


def hub_repo(text: str) -> str | None:
    """The Hub repository ``text`` names: a repository id, or a huggingface.co (or
    ``hf://``) URL of the repository or one of its files; None otherwise."""
    if is_hub_id(text):
        return text
    found = _HUB_URL.fullmatch(text) if isinstance(text, str) else None
    return found.group(1) if found else None


def bundled_copy_of(repo: str) -> str | None:
    """The bundled config transcribed from the Hub repository ``repo`` (its
    ``hf/SOURCES.yaml`` ``config`` URL names it; letter case aside), or None."""
    for name, entry in bundled_sources().items():
        url = str((entry or {}).get("config") or "")
        if url.lower().startswith(f"https://huggingface.co/{repo.lower()}/"):
            return name
    return None


def hub_id_problem(text: str, path: str, names: str) -> str:
    """Why a Hub repository id names no config: autopar reads files and downloads
    nothing (QA round 34: ``autopar model Qwen/Qwen2.5-7B`` was called a spec with an
    unsupported file extension '.5-7B'); the fix names the config.json to save and, where
    one is bundled, the bundled copy of that repository's config."""
    repo = hub_repo(text)
    if repo is None:                   # another URL
        return (f"{text[:200]}: a URL, and autopar downloads nothing (it reads a config.json "
                "from disk) (fix: download the file and give its path, or a bundled config's "
                f"name: {names}; autopar zoo list)")
    copy = bundled_copy_of(repo)
    bundled = (f"; or the bundled copy of that repository's config: {copy!r}" if copy else
               f"; or a bundled config's name: {names}; autopar zoo list")
    said = "a Hugging Face Hub repository id" if repo == text else \
        f"a URL of the Hugging Face Hub repository {repo!r}"
    where = f"{path[:200]}: no such file or directory; " if repo == text else ""
    return (f"{where}{text[:120]!r} reads as {said}, and autopar downloads nothing (it reads "
            "a config.json from disk) (fix: save "
            f"https://huggingface.co/{repo[:120]}/blob/main/config.json and give its path"
            f"{bundled})")


@lru_cache(maxsize=1)
def bundled_sources() -> dict[str, Any]:
    """``hf/SOURCES.yaml``: each bundled config's source and published counts."""
    import yaml

    text = resources.files(_PACKAGE).joinpath("hf", "SOURCES.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text) or {}


def bundled_summary() -> list[dict[str, Any]]:
    """One row per bundled config: name, model_type, published total (and active)
    parameters, the config's source URL (``autopar zoo list``)."""
    import json

    sources = bundled_sources()
    rows = []
    for name in bundled_names():
        config = json.loads(resources.files(_PACKAGE).joinpath("hf", f"{name}.json")
                            .read_text(encoding="utf-8"))
        entry = sources.get(name, {})
        rows.append({"name": name, "model_type": config.get("model_type"),
                     "params_total": entry.get("params_total"),
                     "params_active": entry.get("params_active"),
                     "config": entry.get("config"), "published": entry.get("published")})
    return rows
