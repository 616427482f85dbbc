"""Scanned versions of real PDFs, and how far recognised text is from the real one.

    pdf = scanned_pdf(MANUALS / "R-intro.pdf", [12, 30], tmp_path / "scan.pdf", skew_deg=2.5, noise=12)
    character_error_rate(recognised, reference)   # 0.0 is a perfect match

`scanned_pdf` renders pages with pypdfium2 in grayscale, optionally turns them by a few degrees
(as a sheet laid crooked on a scanner glass, white outside the page) and adds Gaussian noise, and
writes an image-only PDF with Pillow: no text layer, one image per page, in the order given.
"""

from __future__ import annotations

import re
from pathlib import Path

_SPACES = re.compile(r"\s+")


def scanned_pdf(source_pdf: str | Path, pages: list[int], out: str | Path, *, dpi: int = 150,
                skew_deg: float = 0.0, noise: float = 0.0, seed: int = 0) -> Path:
    """An image-only PDF of physical `pages` (1-based) of `source_pdf`, numbered 1..n in that
    order. `noise` is the standard deviation of the Gaussian noise in grey levels (0-255)."""
    import numpy as np
    import pypdfium2

    if not pages:
        raise ValueError("scanned_pdf: give at least one page number")
    rng = np.random.default_rng(seed)
    images = []
    document = pypdfium2.PdfDocument(str(source_pdf))
    try:
        for number in pages:
            if not 1 <= number <= len(document):
                raise ValueError(f"scanned_pdf: {source_pdf} has no page {number} (it has {len(document)})")
            page = document[number - 1]
            image = page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")
            page.close()
            images.append(_scan_effects(image, skew_deg, noise, rng))
    finally:
        document.close()
    out = Path(out)
    images[0].save(out, "PDF", save_all=True, append_images=images[1:], resolution=float(dpi))
    return out


def _scan_effects(image, skew_deg: float, noise: float, rng):
    import numpy as np
    from PIL import Image

    if skew_deg:
        image = image.rotate(skew_deg, resample=Image.BICUBIC, expand=False, fillcolor=255)
    if noise:
        pixels = np.asarray(image, dtype=np.float32)
        pixels = pixels + rng.normal(0.0, noise, pixels.shape)
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "L")
    return image


def normalise(text: str) -> str:
    """Whitespace runs (newlines included) become one space; no space at the ends."""
    return _SPACES.sub(" ", text).strip()


def character_error_rate(recognised: str, reference: str) -> float:
    """Levenshtein distance between the two texts over the reference's length, after each
    whitespace run became one space. An empty reference gives 0.0 when nothing was
    recognised and 1.0 otherwise."""
    recognised, reference = normalise(recognised), normalise(reference)
    if not reference:
        return 0.0 if not recognised else 1.0
    return edit_distance(recognised, reference) / len(reference)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions cost 1), one row at a time
    over `b` with numpy: each row is the previous plus the costs, then a running minimum
    carries the insertions along."""
    import numpy as np

    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    codes_b = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    columns = np.arange(len(b) + 1, dtype=np.int64)
    previous = columns.copy()
    for i, char in enumerate(a, start=1):
        substitute = previous[:-1] + (codes_b != ord(char))
        delete = previous[1:] + 1
        current = np.empty_like(previous)
        current[0] = i
        current[1:] = np.minimum(substitute, delete)
        # insertion: current[j] = min(current[j], current[j-1] + 1), i.e. a running minimum of
        # current[j] - j, shifted back by j
        current = np.minimum.accumulate(current - columns) + columns
        previous = current
    return int(previous[-1])
