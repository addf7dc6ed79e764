"""OCR for pages without a text layer (scans, faxes, image exports) and for image files.

The engine is Tesseract (Debian's `tesseract-ocr` and `tesseract-ocr-eng`, models included),
run as a program: a page is rendered by pypdfium2 to an 8-bit grey image, handed to `tesseract`
on its standard input, and its TSV output gives the words, their lines and paragraphs and a
confidence per word. Nothing is fetched at run time.

Tesseract's OpenMP threads are limited to one (`OMP_THREAD_LIMIT=1`): on a shared two-core
machine a page took 10.9 s with the default threads and 1.7 s with one (a 10-K page at 200 dpi).

When the program is not installed, `ocr_engine()` is None and `OCR_MISSING` says what to install;
the loaders then report such pages and files as skipped with that line.

Example:
    >>> result = ocr_image(Path("scan.png").read_bytes())   # doctest: +SKIP
    >>> result.text.splitlines()[0], result.confidence       # doctest: +SKIP
    ('Net sales rose 4%', 0.95)
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rag.base.errors import LoaderError
from rag.indexing.text_safety import path_text

__all__ = ["DEFAULT_OCR_DPI", "ENGINE", "MAX_OCR_PIXELS", "OCR_MISSING", "OCR_TIMEOUT", "OcrResult", "image_size_ok", "ocr_engine",
           "ocr_image", "render_page"]

ENGINE = "tesseract"
DEFAULT_OCR_DPI = 200   # 150 dpi loses small print in filings; 300 dpi costs ~2x for little gain
OCR_TIMEOUT = 120.0     # seconds for one page or image
OCR_MISSING = ("no OCR engine installed: apt-get install tesseract-ocr tesseract-ocr-eng "
               "(Debian/Ubuntu; `brew install tesseract` on macOS)")
MAX_OCR_PIXELS = 60_000_000  # a rendered page or image larger than this is refused (a 200 dpi A0 page is 53 M)


@dataclass(frozen=True)
class OcrResult:
    """Text read from an image: lines, blank lines between paragraphs; mean word confidence in [0, 1]."""

    text: str
    confidence: float
    words: int


@lru_cache(maxsize=1)
def ocr_engine() -> str | None:
    """The path of the `tesseract` program, or None when it is not installed (or has no English model).

    Example:
        >>> ocr_engine() in (None, shutil.which("tesseract"))
        True
    """
    path = shutil.which(ENGINE)
    if path is None:
        return None
    try:
        langs = subprocess.run([path, "--list-langs"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if "eng" in langs.stdout.split() else None


def _parse_tsv(tsv: str) -> OcrResult:
    """Words of Tesseract's TSV grouped back into lines and paragraphs."""
    lines: dict[tuple[int, int, int, int], list[str]] = {}
    confs: list[float] = []
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        word, conf = cols[11].strip(), float(cols[10])
        if not word or conf < 0:
            continue
        confs.append(conf)
        lines.setdefault((int(cols[1]), int(cols[2]), int(cols[3]), int(cols[4])), []).append(word)
    out: list[str] = []
    last_par: tuple[int, int, int] | None = None
    for (page, block, par, _), words in lines.items():
        if last_par is not None and (page, block, par) != last_par:
            out.append("")
        out.append(" ".join(words))
        last_par = (page, block, par)
    confidence = round(sum(confs) / len(confs) / 100, 3) if confs else 0.0
    return OcrResult("\n".join(out), confidence, len(confs))


def ocr_image(data: bytes, *, name: str = "image", timeout: float = OCR_TIMEOUT) -> OcrResult:
    """Read an image (PNG, JPEG, TIFF, PNM bytes) with Tesseract.

    Raises:
        LoaderError: no engine installed, the image cannot be read, or OCR took longer than `timeout`.
    """
    engine = ocr_engine()
    if engine is None:
        raise LoaderError(f"{name}: {OCR_MISSING}")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        run = subprocess.run([engine, "stdin", "stdout", "-l", "eng", "tsv"], input=data, capture_output=True,
                             timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise LoaderError(f"{name}: OCR took more than {timeout:g} s; not read") from exc
    if run.returncode != 0:
        why = run.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["unknown error"]
        raise LoaderError(f"{name}: OCR failed, the image cannot be read ({why[0]})")
    return _parse_tsv(run.stdout.decode("utf-8", "replace"))


def render_page(page: Any, *, dpi: int = DEFAULT_OCR_DPI) -> bytes:
    """A pypdfium2 page as an 8-bit grey PGM image at `dpi` (Tesseract reads PNM without a codec).

    Raises:
        LoaderError: the page would render larger than the pixel limit (a huge page size).
    """
    width, height = page.get_size()
    scale = dpi / 72
    if width * height * scale * scale > MAX_OCR_PIXELS:
        scale = (MAX_OCR_PIXELS / (width * height)) ** 0.5
        if scale * 72 < 50:  # too coarse to read: a page of absurd size
            raise LoaderError(f"page of {width:.0f} x {height:.0f} points is too large to render for OCR")
    bitmap = page.render(scale=scale, grayscale=True)
    pixels = bitmap.to_numpy()
    if pixels.ndim == 3:
        pixels = pixels[:, :, 0]
    rows, cols = pixels.shape
    return b"P5\n%d %d\n255\n" % (cols, rows) + pixels.tobytes()


def image_size_ok(path: Path, data: bytes, *, max_frames: int = 2_000) -> None:
    """Refuse an image file whose header announces more pixels than OCR would read (a decompression bomb), in any
    format, before Tesseract sees it.

    The header is read by Pillow (`Image.open` decodes no pixel): every frame of a multi-page TIFF is checked,
    and at most `max_frames` frames are read (`LoadLimits.ocr_max_pages`). Bytes that are no image Pillow knows
    (whose size therefore cannot be checked) are refused too: a 74 KB CCITT-G4 TIFF of 32,000 x 32,000 pixels
    took Tesseract near 1 GB, an 8-bit TIFF 3.7 GB, a JPEG 3.3 GB (issue 37).

    Raises:
        LoaderError: too many pixels in a frame, too many frames, or not an image whose size can be read.
    """
    import warnings

    from PIL import Image, UnidentifiedImageError

    name = path_text(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                for frame in range(max_frames + 1):
                    if frame == max_frames:
                        raise LoaderError(f"{name}: image of more than {max_frames:,} pages (ocr_max_pages); not read")
                    width, height = image.size
                    if width * height > MAX_OCR_PIXELS:
                        raise LoaderError(f"{name}: image of {width:,} x {height:,} pixels is larger than the "
                                          f"{MAX_OCR_PIXELS:,}-pixel OCR limit")
                    try:
                        image.seek(frame + 1)
                    except EOFError:
                        return
    except Image.DecompressionBombError as exc:
        raise LoaderError(f"{name}: image larger than the {MAX_OCR_PIXELS:,}-pixel OCR limit ({exc})") from exc
    except LoaderError:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed header raises anything: refused, with the reason
        why = "an unknown or damaged image format" if isinstance(exc, UnidentifiedImageError) else \
            f"{type(exc).__name__}: {exc}"
        raise LoaderError(f"{name}: not an image whose size can be read ({why}); not given to OCR") from exc
