from __future__ import annotations

import pytest
from pypdf import PdfWriter

from rag.base.errors import LoaderError
from rag.indexing.loaders import clean_text, iter_files, load_directory, load_file


def test_pdf_gives_one_document_per_page_with_zero_based_page(tmp_path, make_pdf):
    path = tmp_path / "report.pdf"
    make_pdf(path, ["Revenue grew in 2023", "", "Costs fell (slightly)"])
    docs = load_file(path)
    assert [d.metadata["page"] for d in docs] == [0, 2]  # the blank page has no text
    assert docs[0].page_content == "Revenue grew in 2023"
    assert docs[1].page_content == "Costs fell (slightly)"
    assert docs[0].metadata == {"source": str(path), "page": 0, "title": "report", "file_type": "pdf"}


def test_encrypted_pdf_is_reported_as_encrypted(tmp_path, make_pdf):
    plain = tmp_path / "plain.pdf"
    make_pdf(plain, ["secret numbers"])
    writer = PdfWriter(clone_from=plain)
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    with pytest.raises(LoaderError, match="encrypted"):
        load_file(locked)


def test_pdf_encrypted_with_empty_user_password_still_loads(tmp_path, make_pdf):
    plain = tmp_path / "plain.pdf"
    make_pdf(plain, ["readable anyway"])
    writer = PdfWriter(clone_from=plain)
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    path = tmp_path / "owner-only.pdf"
    writer.write(path)
    assert load_file(path)[0].page_content == "readable anyway"


@pytest.mark.parametrize("content", [b"%PDF-1.4\n1 0 obj garbage", b"not a pdf at all", b"\x89PNG\r\n\x1a\n" * 10])
def test_corrupt_pdf_is_a_loader_error(tmp_path, content):
    path = tmp_path / "broken.pdf"
    path.write_bytes(content)
    with pytest.raises(LoaderError, match="damaged or not a PDF"):
        load_file(path)


def test_truncated_pdf_is_a_loader_error(tmp_path, make_pdf):
    path = tmp_path / "cut.pdf"
    make_pdf(path, ["some text"])
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(LoaderError):
        load_file(path)


def test_binary_file_with_text_suffix_is_refused(tmp_path):
    path = tmp_path / "image.txt"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(LoaderError, match="binary"):
        load_file(path)


@pytest.mark.parametrize("content", [b"", b"   \n\t\n  "])
def test_empty_and_blank_files_are_refused(tmp_path, content):
    path = tmp_path / "empty.md"
    path.write_bytes(content)
    with pytest.raises(LoaderError, match="empty|no text"):
        load_file(path)


def test_ten_megabyte_file_loads_whole(tmp_path):
    path = tmp_path / "big.txt"
    line = "The quarterly revenue line item grew by four percent.\n"
    path.write_text(line * (10_500_000 // len(line) + 1), encoding="utf-8")
    assert path.stat().st_size > 10_000_000
    docs = load_file(path)
    assert len(docs[0].page_content) == path.stat().st_size


def test_file_over_max_bytes_is_refused_without_reading(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("x" * 2048)
    with pytest.raises(LoaderError, match="max_bytes=1,024"):
        load_file(path, max_bytes=1024)


def test_nul_bytes_inside_text_are_dropped(tmp_path):
    path = tmp_path / "nul.txt"
    path.write_bytes(b"revenue\x00 grew " * 50)
    text = load_file(path)[0].page_content
    assert "\x00" not in text and text.startswith("revenue grew revenue grew")


def test_encoded_lone_surrogate_becomes_replacement_character(tmp_path):
    path = tmp_path / "surrogate.md"
    # ED A0 80 is U+D800 encoded as if it were a character: invalid UTF-8.
    path.write_bytes("# Title\n\nbefore ".encode() + b"\xed\xa0\x80" + " after, café".encode())
    text = load_file(path)[0].page_content
    assert "café" in text and "\ufffd" in text
    text.encode("utf-8")  # storable


def test_clean_text_replaces_lone_surrogates_in_python_strings():
    assert clean_text("ok \udcff end") == "ok \ufffd end"
    assert clean_text("plain") == "plain"


def test_right_to_left_text_is_kept_exactly(tmp_path):
    rtl = "שלום עולם. זהו מסמך בעברית.\nمرحبا بالعالم، هذا مستند عربي."
    path = tmp_path / "rtl.txt"
    path.write_text(rtl, encoding="utf-8")
    assert load_file(path)[0].page_content == rtl


def test_utf16_file_with_bom_is_decoded(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_text("wide text é", encoding="utf-16")
    assert load_file(path)[0].page_content == "wide text é"


def test_legacy_cp1252_file_is_decoded(tmp_path):
    path = tmp_path / "old.txt"
    path.write_bytes("naïve café – “quoted”".encode("cp1252"))
    assert load_file(path)[0].page_content == "naïve café – “quoted”"


def test_markdown_title_is_the_first_top_heading(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("intro\n\n# Install Guide\n\n## Steps\n\ntext", encoding="utf-8")
    doc = load_file(path)[0]
    assert doc.metadata["title"] == "Install Guide" and doc.metadata["file_type"] == "md"


def test_html_is_visible_text_with_headings_as_markdown(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><head><title>The &amp; Page</title><style>p{}</style></head><body>"
                    "<script>var x=1;</script><h1>Main</h1><p>First para.</p><h2>Sub <b>part</b></h2>"
                    "<p>Second&nbsp;para.</p></body></html>", encoding="utf-8")
    doc = load_file(path)[0]
    assert doc.metadata["title"] == "The & Page"
    assert doc.page_content.split("\n\n") == ["# Main", "First para.", "## Sub part", "Second\xa0para."]


def test_html_without_title_uses_first_h1(tmp_path):
    path = tmp_path / "x.htm"
    path.write_text("<h1>Heading <i>One</i></h1><p>body</p>", encoding="utf-8")
    assert load_file(path)[0].metadata["title"] == "Heading One"


def test_unsupported_suffix_lists_supported_ones(tmp_path):
    path = tmp_path / "sheet.xlsx"
    path.write_bytes(b"PK")
    with pytest.raises(LoaderError, match=r"unsupported file type \.xlsx; supported: \.txt"):
        load_file(path)


def test_directory_walk_skips_bad_files_with_reasons_and_loads_the_rest(tmp_path, make_pdf):
    (tmp_path / "good.md").write_text("# Good\n\nfine text", encoding="utf-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "bin.txt").write_bytes(bytes(range(32)) * 100)
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.7 broken")
    (tmp_path / "sheet.xlsx").write_bytes(b"PK")
    make_pdf(tmp_path / "ok.pdf", ["page zero", "page one"])
    report = load_directory(tmp_path)
    assert sorted(d.metadata["source"].rsplit("/", 1)[-1] for d in report.documents) == [
        "good.md", "ok.pdf", "ok.pdf"]
    reasons = {s.path.rsplit("/", 1)[-1]: s.reason for s in report.skipped}
    assert set(reasons) == {"empty.txt", "bin.txt", "bad.pdf"}
    assert "empty" in reasons["empty.txt"] and "binary" in reasons["bin.txt"]
    assert report.files == 5 and report.unsupported == [str(tmp_path / "sheet.xlsx")]


def test_include_and_exclude_globs_select_files(tmp_path):
    for rel in ["a.md", "notes/b.md", "notes/c.txt", "drafts/d.md", ".hidden/e.md"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"text of {rel}", encoding="utf-8")
    names = lambda **kw: sorted(f.relative_to(tmp_path).as_posix() for f, _ in iter_files(tmp_path, **kw))  # noqa: E731
    assert names() == ["a.md", "drafts/d.md", "notes/b.md", "notes/c.txt"]
    assert names(include="**/*.md") == ["a.md", "drafts/d.md", "notes/b.md"]
    assert names(include=["*.txt", "a.md"]) == ["a.md", "notes/c.txt"]
    assert names(exclude=["drafts/*", "*.txt"]) == ["a.md", "notes/b.md"]
    report = load_directory(tmp_path, include="**/*.md", exclude="drafts/*")
    assert sorted(d.page_content for d in report.documents) == ["text of a.md", "text of notes/b.md"]


def test_missing_directory_is_a_loader_error(tmp_path):
    with pytest.raises(LoaderError, match="no such file"):
        load_directory(tmp_path / "nope")
