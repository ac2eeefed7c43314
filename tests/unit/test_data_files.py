"""Every YAML file the repository ships (data tables, record files, examples, CI)
states each key once per mapping.

PyYAML keeps a repeated key's last value without a word, so a second entry replaces the
first: QA round 11 found ``model_zoo/hf/SOURCES.yaml`` listing Qwen3-235B-A22B twice, the
second entry dropping the first's rounding rule for the active count. Spec files refuse a
repeated key (``autopar_opt/spec/loader.py``); the project's own data files are read by
``yaml.safe_load`` in places, so they are checked here, all at once. Oracle: PyYAML's
composed node tree (the keys as written, before a dict keeps the last)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".venv", "build", ".git", "node_modules", "out"}


def _shipped_yaml() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.y*ml")
                  if not any(part in SKIP or part.endswith(".egg-info")
                             for part in p.relative_to(ROOT).parts))


def _repeated_keys(path: Path) -> list[str]:
    """``where.key (line N)`` for each key given twice in one mapping of ``path``."""
    try:
        docs = [d for d in yaml.compose_all(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
                if d is not None]
    except yaml.YAMLError:          # deliberately malformed test inputs: not data
        return []
    out, todo = [], [(d, "") for d in docs]
    while todo:
        node, where = todo.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(getattr(key, "value", "?"))
                if isinstance(key, yaml.ScalarNode) and not key.tag.endswith(":merge"):
                    if name in seen:
                        out.append(f"{where}.{name} (line {key.start_mark.line + 1})")
                    seen.add(name)
                todo.append((value, f"{where}.{name}"))
        elif isinstance(node, yaml.SequenceNode):
            todo += [(v, f"{where}[{i}]") for i, v in enumerate(node.value)]
    return out


def test_the_scan_finds_a_repeated_key(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: {b: 1, c: [{d: 1, d: 2}]}\n")
    assert _repeated_keys(path) == [".a.c[0].d (line 1)"]


def test_no_shipped_yaml_file_repeats_a_key():
    files = _shipped_yaml()
    assert len(files) > 50          # the data tables, record files and examples are found
    bad = {str(p.relative_to(ROOT)): r for p in files if (r := _repeated_keys(p))}
    assert bad == {}
