"""The design ships with the code: every "DESIGN.md §N" reference in the code, the
tests and the README points at docs/DESIGN.md and at a section it has, and no
tracked file names a path outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from support import paths

ROOT = paths.REPO


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split() if p.endswith((".py", ".md", ".yaml", ".toml"))]


def test_design_references_point_at_the_shipped_design():
    sections = {int(n) for n in re.findall(r"^## (\d+)\.", (ROOT / "docs" / "DESIGN.md").read_text(), re.M)}
    assert sections >= {1, 2, 3, 4, 5, 6, 7}
    bad = []
    for path in _tracked():
        text = path.read_text(errors="replace")
        for m in re.finditer(r"([\w./-]*)DESIGN\.md §(\d+)", text):
            prefix, section = m.group(1), int(m.group(2))
            inside_docs = path.parent.name == "docs" and prefix == ""
            if not (prefix.endswith("docs/") or inside_docs) or section not in sections:
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert bad == []


def test_no_tracked_file_names_a_path_outside_the_repository():
    bad = [str(p.relative_to(ROOT)) for p in _tracked()
           if p.name != Path(__file__).name and re.search(r"/work/|\.\./shared/", p.read_text(errors="replace"))]
    assert bad == []
