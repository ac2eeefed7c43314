"""A tolerant comparison of a screenshot with its golden image (issue 33).

Byte equality would fail on every anti-aliasing or font-hinting difference between
two Chromium builds; what a reader notices is ink appearing or missing somewhere —
a cut legend, a lost label, a bar of another height. So both images are turned
grey and cut into cells of :data:`CELL` x :data:`CELL` pixels, and each cell's ink
(its mean darkness, 0 = white, 1 = black) is compared:

* the images have the same size within :data:`SIZE_TOLERANCE`, and
* at most :data:`MAX_CELLS` cells differ in ink by more than :data:`INK_STEP`.

Calibrated on the golden charts (``tests/unit/reports/test_chart_browser.py``): the
whole chart moved by one pixel changes about 5 cells, a removed word of the legend
13, a legend cut below the axes about 80. Pillow and numpy are already installed
with matplotlib; no new dependency.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

#: Largest relative difference of width or height.
SIZE_TOLERANCE = 0.02
#: Side of a comparison cell, pixels.
CELL = 8
#: Ink difference (of 1) above which a cell counts as changed.
INK_STEP = 0.1
#: Most changed cells.
MAX_CELLS = 8


@dataclass(frozen=True)
class Likeness:
    """How alike two images are (:func:`compare`)."""

    size_ok: bool
    changed_cells: int
    cells: int

    @property
    def alike(self) -> bool:
        return self.size_ok and self.changed_cells <= MAX_CELLS

    def __str__(self) -> str:
        return (f"size {'ok' if self.size_ok else 'differs'}, {self.changed_cells} of "
                f"{self.cells} cells of {CELL} px changed in ink by more than {INK_STEP} "
                f"(limit {MAX_CELLS})")


def _ink(png: bytes, size: tuple[int, int] | None = None) -> np.ndarray:
    """Mean darkness of each :data:`CELL`-pixel cell of the image (resized to ``size``)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("L")
    if size is not None and img.size != size:
        img = img.resize(size, Image.Resampling.BILINEAR)
    dark = (255.0 - np.asarray(img, dtype=float)) / 255.0
    h, w = (dark.shape[0] // CELL) * CELL, (dark.shape[1] // CELL) * CELL
    return dark[:h, :w].reshape(h // CELL, CELL, w // CELL, CELL).mean(axis=(1, 3))


def compare(actual: bytes, golden: bytes) -> Likeness:
    """How alike the PNG ``actual`` is to the PNG ``golden`` (module docstring)."""
    from PIL import Image

    size = Image.open(io.BytesIO(golden)).size
    other = Image.open(io.BytesIO(actual)).size
    size_ok = all(abs(p - q) <= SIZE_TOLERANCE * q for p, q in zip(other, size))
    a, b = _ink(actual, size), _ink(golden)
    changed = int(np.sum(np.abs(a - b) > INK_STEP))
    return Likeness(size_ok, changed, int(b.size))
