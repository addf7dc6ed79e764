"""OCR of PDF pages without text and of image files (Tesseract), and the path when no engine is installed."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.base.errors import ConfigError, LoaderError
from rag.indexing.loaders import LoadLimits, load_directory, load_file
from rag.indexing.ocr import ocr_engine
from rag.testing.financebench import write_pdf
from rag.testing.scans import scanned_copy

PAGE_ONE = "Quarterly Report\nNet revenue increased to 4,250 million dollars.\nThe board approved a dividend."
PAGE_TWO = "Risk Factors\nCompetition in the widget market remains intense."


@pytest.fixture(scope="module")
def engine() -> str:
    """The Tesseract program; a failure (not a skip) when RAG_REQUIRE_OCR=1 (as in CI, which installs it)."""
    ocr_engine.cache_clear()
    found = ocr_engine()
    if found is None:
        message = "Tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng)"
        if os.environ.get("RAG_REQUIRE_OCR") == "1":
            pytest.fail(message + "; RAG_REQUIRE_OCR=1 makes this a failure")
        pytest.skip(message)
    return found


@pytest.fixture
def no_engine(monkeypatch, tmp_path):
    """No `tesseract` on the PATH: the program is truly not found."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    ocr_engine.cache_clear()
    yield
    monkeypatch.undo()
    ocr_engine.cache_clear()


def _png(pixels: bytes, width: int, height: int) -> bytes:
    """An 8-bit grey PNG (written here: the test needs no imaging library)."""
    raw = b"".join(b"\x00" + pixels[row * width:(row + 1) * width] for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> Path:
    """A text PDF, its image-only copy, a PDF with one text page and one scanned page, and a PNG."""
    import pypdfium2 as pdfium

    folder = tmp_path_factory.mktemp("scans")
    write_pdf(folder / "text.pdf", [PAGE_ONE, PAGE_TWO])
    scanned_copy(folder / "text.pdf", folder / "scan.pdf", dpi=200)
    mixed = pdfium.PdfDocument(str(folder / "text.pdf"))
    scan = pdfium.PdfDocument(str(folder / "scan.pdf"))
    mixed.del_page(1)
    mixed.import_pages(scan, [1])
    mixed.save(str(folder / "mixed.pdf"))
    page = scan[0]
    bitmap = page.render(scale=200 / 72, grayscale=True)
    pixels = bitmap.to_numpy()
    (folder / "page.png").write_bytes(_png(pixels.tobytes(), pixels.shape[1], pixels.shape[0]))
    for doc in (mixed, scan):
        doc.close()
    return folder


def test_a_scanned_pdf_is_read_by_ocr_with_its_page_numbers_and_marked(engine, scans):
    docs = load_file(scans / "scan.pdf")
    assert [d.metadata["page"] for d in docs] == [0, 1]
    assert "dividend" in docs[0].page_content and "4,250" in docs[0].page_content
    assert "widget market" in docs[1].page_content
    for doc in docs:
        assert doc.metadata["ocr"] is True and doc.metadata["ocr_engine"] == "tesseract"
        assert 0.5 < doc.metadata["ocr_confidence"] <= 1.0


def test_only_the_page_without_text_is_read_by_ocr(engine, scans):
    docs = load_file(scans / "mixed.pdf")
    assert [(d.metadata["page"], d.metadata.get("ocr", False)) for d in docs] == [(0, False), (1, True)]
    assert docs[0].page_content.startswith("Quarterly Report")
    assert "widget market" in docs[1].page_content


def test_a_png_is_read_by_ocr(engine, scans):
    [doc] = load_file(scans / "page.png")
    assert "Quarterly Report" in doc.page_content and "dividend" in doc.page_content
    assert doc.metadata["file_type"] == "png" and doc.metadata["ocr"] is True


def test_without_an_engine_a_scan_is_skipped_with_the_install_line(no_engine, scans):
    report = load_directory(scans)
    reasons = {Path(s.path).name: s.reason for s in report.skipped}
    assert set(reasons) == {"scan.pdf", "page.png"}
    assert all("apt-get install tesseract-ocr" in reason for reason in reasons.values())
    assert "scanned PDF without a text layer" in reasons["scan.pdf"]
    # the mixed file keeps its text page; its scanned page is noted as not read
    assert {(Path(n.path).name, n.note.split(":")[0]) for n in report.notes} == {("mixed.pdf", "page 2")}
    assert sorted(d.metadata["page"] for d in report.documents if d.metadata["source"].endswith("mixed.pdf")) == [0]


def test_ocr_turned_off_leaves_scanned_pages_out(engine, scans):
    docs = load_file(scans / "mixed.pdf", limits=LoadLimits(ocr=False))
    assert [d.metadata["page"] for d in docs] == [0]
    with pytest.raises(LoaderError, match="turned off"):
        load_file(scans / "page.png", limits=LoadLimits(ocr=False))


def test_an_image_announcing_too_many_pixels_is_refused_before_ocr(tmp_path):
    bomb = tmp_path / "bomb.png"
    header = _png(b"\x00", 1, 1)
    ihdr = struct.pack(">II", 100_000, 100_000) + header[24:29]
    bomb.write_bytes(header[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + header[33:])
    with pytest.raises(LoaderError, match="pixel OCR limit"):
        load_file(bomb)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=2048), suffix=st.sampled_from([".png", ".jpg", ".tiff"]))
def test_any_bytes_named_as_an_image_are_read_or_skipped_with_a_reason(engine, tmp_path, data, suffix):
    path = tmp_path / f"x{suffix}"
    path.write_bytes(data)
    report = load_directory(path)
    assert report.files == 1 and len(report.documents) + len(report.skipped) >= 1
    assert all(s.reason.startswith(str(path)) for s in report.skipped)


@pytest.mark.parametrize(("field", "value"), [("ocr_dpi", 10), ("table_seconds", -1.0), ("table_max_chars", -5)])
def test_limits_out_of_range_say_what_is_valid(field, value):
    with pytest.raises(ConfigError, match=f"{field}=.*valid"):
        LoadLimits(**{field: value})
