"""Per-file OCR costs bounded in time and memory (issue 37, item 3): a time budget per file, and the pixel count of
every image format checked from its header before Tesseract sees the image.

The time budget runs a real program on the PATH named `tesseract` that takes a fixed time per image (the real
engine's time depends on the machine; this one's does not), through the same subprocess path as Tesseract.
"""

from __future__ import annotations

import io
import stat
import struct
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from rag.base.errors import LoaderError
from rag.indexing.loaders import LoadLimits, load_file
from rag.indexing.ocr import MAX_OCR_PIXELS, image_size_ok, ocr_engine
from rag.testing.financebench import write_pdf
from rag.testing.scans import scanned_copy

_SLOW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ---------------------------------------------------------------- image headers that announce their size
def _tiny(fmt: str) -> bytes:
    mode = "1" if fmt == "TIFF-G4" else "L"
    out = io.BytesIO()
    image = Image.new(mode, (8, 8), 255 if mode == "L" else 1)
    if fmt == "TIFF-G4":
        image.save(out, "TIFF", compression="group4")
    else:
        image.save(out, fmt)
    return out.getvalue()


def _tiff_with_size(data: bytes, width: int, height: int) -> bytes:
    """A TIFF whose first IFD's ImageWidth / ImageLength say `width` x `height` (as LONG values)."""
    order = "<" if data[:2] == b"II" else ">"
    ifd = struct.unpack(order + "I", data[4:8])[0]
    count = struct.unpack(order + "H", data[ifd:ifd + 2])[0]
    out = bytearray(data)
    for n in range(count):
        at = ifd + 2 + 12 * n
        tag = struct.unpack(order + "H", data[at:at + 2])[0]
        if tag in (256, 257):
            out[at + 2:at + 12] = struct.pack(order + "HII", 4, 1, width if tag == 256 else height)
    return bytes(out)


def _with_size(fmt: str, width: int, height: int) -> bytes:
    """A small real image of `fmt` whose header is rewritten to announce `width` x `height` pixels."""
    data = bytearray(_tiny(fmt))
    if fmt == "PNG":
        ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
        data[16:33] = ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    elif fmt == "JPEG":
        sof = next(i for i in range(2, len(data) - 9) if data[i] == 0xFF and data[i + 1] in (0xC0, 0xC1, 0xC2))
        data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    elif fmt.startswith("TIFF"):
        data = bytearray(_tiff_with_size(bytes(data), width, height))
    elif fmt == "BMP":
        data[18:26] = struct.pack("<ii", width, height)
    elif fmt == "GIF":
        data[6:10] = struct.pack("<HH", width, height)
    elif fmt == "PPM":
        data = bytearray(b"P5\n%d %d\n255\n" % (width, height) + bytes(64))
    return bytes(data)


_FORMATS = ("PNG", "JPEG", "TIFF", "TIFF-G4", "BMP", "GIF", "PPM")
_SIDE = {"JPEG": 65_535, "GIF": 65_535}   # the largest side the format can state


@_SLOW
@given(fmt=st.sampled_from(_FORMATS), width=st.integers(1, 2**31 - 1), height=st.integers(1, 2**31 - 1))
def test_every_format_is_refused_from_its_header_when_it_announces_too_many_pixels(fmt, width, height):
    width, height = min(width, _SIDE.get(fmt, width)), min(height, _SIDE.get(fmt, height))
    data = _with_size(fmt, width, height)
    start = time.process_time()
    if width * height > MAX_OCR_PIXELS:
        with pytest.raises(LoaderError, match="pixel OCR limit"):
            image_size_ok(Path(f"x.{fmt.lower()}"), data)
    else:
        image_size_ok(Path(f"x.{fmt.lower()}"), data)   # (its pixels are not decoded: they are not all there)
    assert time.process_time() - start < 2


@pytest.mark.parametrize("fmt", ["TIFF-G4", "TIFF", "JPEG"])
def test_the_issue_bombs_never_reach_tesseract(tmp_path, fmt):
    """A 74 KB CCITT-G4 TIFF of 32,000 x 32,000 pixels (near 1 GB in Tesseract), an 8-bit TIFF, a JPEG."""
    path = tmp_path / ("bomb.tiff" if fmt.startswith("TIFF") else "bomb.jpg")
    path.write_bytes(_with_size(fmt, 32_000, 32_000))
    with pytest.raises(LoaderError, match="pixel OCR limit"):
        load_file(path)


def test_a_tiff_of_more_pages_than_ocr_reads_is_refused(tmp_path):
    out = io.BytesIO()
    pages = [Image.new("L", (4, 4)) for _ in range(6)]
    pages[0].save(out, "TIFF", save_all=True, append_images=pages[1:])
    path = tmp_path / "many.tiff"
    path.write_bytes(out.getvalue())
    with pytest.raises(LoaderError, match="more than 5 pages"):
        load_file(path, limits=LoadLimits(ocr_max_pages=5))


@_SLOW
@given(data=st.binary(min_size=1, max_size=512))
def test_bytes_that_are_no_image_are_refused_before_ocr(data):
    try:
        image_size_ok(Path("x.png"), data)
    except LoaderError as exc:
        assert str(exc).startswith("x.png: ")


# ---------------------------------------------------------------- the time budget per file
@pytest.fixture
def slow_engine(monkeypatch, tmp_path):
    """A `tesseract` on the PATH that takes 0.4 s per image and reads one word."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "tesseract"
    program.write_text("#!/bin/sh\n"
                       'if [ "$1" = "--list-langs" ]; then echo "List of available languages (1):"; echo eng; exit 0; fi\n'
                       "/bin/cat > /dev/null\n/bin/sleep 0.4\n"
                       "printf 'level\\tpage_num\\tblock_num\\tpar_num\\tline_num\\tword_num\\tleft\\ttop\\twidth\\t"
                       "height\\tconf\\ttext\\n5\\t1\\t1\\t1\\t1\\t1\\t0\\t0\\t9\\t9\\t95\\tscanned\\n'\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    ocr_engine.cache_clear()
    yield
    monkeypatch.undo()
    ocr_engine.cache_clear()


def test_ocr_stops_at_the_files_time_budget_and_says_so(slow_engine, tmp_path):
    write_pdf(tmp_path / "text.pdf", [f"Page {n} of a long scanned book." for n in range(8)])
    scanned_copy(tmp_path / "text.pdf", tmp_path / "scan.pdf", dpi=50)
    notes: list[str] = []
    start = time.monotonic()
    docs = load_file(tmp_path / "scan.pdf", limits=LoadLimits(ocr_seconds=1.0, tables=False), notes=notes)
    assert time.monotonic() - start < 4   # 8 pages at 0.4 s would be 3.2 s of OCR alone
    assert 1 <= len(docs) < 8
    assert len(notes) == 1 and "not read by OCR (ocr_seconds=1 spent on this file)" in notes[0]
    everything = load_file(tmp_path / "scan.pdf", limits=LoadLimits(tables=False), notes=[])
    assert len(everything) == 8


def test_an_image_gets_no_more_than_the_budget(slow_engine, tmp_path):
    path = tmp_path / "page.png"
    path.write_bytes(_tiny("PNG"))
    with pytest.raises(LoaderError, match="OCR took more than 0.1 s"):
        load_file(path, limits=LoadLimits(ocr_seconds=0.1))
    assert load_file(path)[0].page_content == "scanned"
