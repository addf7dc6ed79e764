"""Hostile files in an indexed folder: symlinks out of it, names and headings that are not UTF-8, HTML (issue 13)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import LoaderError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.html_text import html_to_text
from rag.indexing.loaders import iter_files, load_directory, load_file

_SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _kb(store: Path) -> KnowledgeBase:
    return KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=8))


# ---------------------------------------------------------------- symlinks leaving the folder
@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A folder with a real file, links to a file and a folder outside it, an inner link and a loop."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text("The secret outside the folder.")
    (outside / "sub" / "deep.txt").write_text("A deep secret outside the folder.")
    folder = tmp_path / "folder"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "own.txt").write_text("Our own document.")
    (folder / "to-file.txt").symlink_to(outside / "secret.txt")
    (folder / "to-dir").symlink_to(outside / "sub")
    (folder / "inner-link.txt").symlink_to(folder / "inner" / "own.txt")
    (folder / "inner" / "loop").symlink_to(folder)
    return folder


def test_symlinks_leaving_the_folder_are_skipped_with_a_reason(linked, tmp_path):
    kb = _kb(tmp_path / "store")
    report = kb.add_documents(str(linked))
    texts = " ".join(d.page_content for d in kb.get_documents())
    assert "secret" not in texts and "Our own document." in texts
    assert len(report.added) == 1  # the inner link and the loop lead back to the same file
    reasons = {Path(s.path).name: s.reason for s in report.skipped}
    assert set(reasons) == {"to-file.txt", "to-dir"}
    assert all("outside" in r and "--follow-symlinks" in r for r in reasons.values())
    loaded = load_directory(linked)
    assert {Path(s.path).name for s in loaded.skipped} == {"to-file.txt", "to-dir"}
    assert "secret" not in " ".join(d.page_content for d in loaded.documents)


def test_follow_symlinks_indexes_what_they_point_to_without_looping(linked, tmp_path):
    kb = _kb(tmp_path / "store")
    report = kb.add_documents(str(linked), follow_symlinks=True)
    texts = " ".join(d.page_content for d in kb.get_documents())
    assert "The secret outside" in texts and "A deep secret" in texts and not report.skipped
    assert len(report.added) == 3


@_SLOW
@given(depth=st.integers(0, 3), kind=st.sampled_from(["file", "dir"]), relative=st.booleans())
def test_any_link_out_of_the_folder_is_not_followed(tmp_path_factory, depth, kind, relative):
    root = tmp_path_factory.mktemp("case")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nsecret words")
    folder = root / "folder"
    here = folder.joinpath(*[f"d{i}" for i in range(depth)])
    here.mkdir(parents=True)
    (folder / "ok.md").write_text("# Fine\n\nfine words")
    target = outside / "secret.md" if kind == "file" else outside
    link = here / ("link.md" if kind == "file" else "link")
    link.symlink_to(os.path.relpath(target, here) if relative else target)
    skipped: list = []
    files = [f.name for f, _ in iter_files(folder, skipped=skipped)]
    assert files == ["ok.md"] and [Path(s.path).name for s in skipped] == [link.name]


# ---------------------------------------------------------------- names and headings that are not UTF-8
_NAME = st.binary(min_size=1, max_size=40).map(lambda b: bytes(c for c in b if c not in (0, 0x2F))).filter(
    lambda b: b and not b.startswith(b"."))
_HEADING = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ").replace(b"\r", b" ").replace(b"\x00", b""))


@_SLOW
@given(names=st.lists(_NAME, min_size=1, max_size=4, unique=True), heading=_HEADING)
def test_names_and_headings_that_are_not_utf8_never_stop_a_run(tmp_path_factory, names, heading):
    root = tmp_path_factory.mktemp("case")
    folder = root / "docs"
    folder.mkdir()
    good = folder / "good.md"
    good.write_text("# Good\n\nThe good file is indexed.")
    written = []
    for n, name in enumerate(names):
        raw = os.fsencode(folder) + b"/" + name + b".md"
        if raw.endswith(b"/good.md"):
            continue
        with open(raw, "wb") as fh:
            fh.write(b"# " + heading + b"\n\nBody " + str(n).encode() + b" with words.\n")
        written.append(raw)
    kb = _kb(root / "store")
    first = kb.add_documents(str(folder))
    assert str(good) in first.added  # the good file is always indexed
    assert len(first.added) + len(first.skipped) == len(written) + 1
    for skipped in first.skipped:
        skipped.reason.encode("utf-8")  # every reason can be printed
    for doc in kb.get_documents():
        doc.page_content.encode("utf-8")
        str(doc.metadata).encode("utf-8")
    second = kb.add_documents(str(folder))  # later runs work and change nothing
    assert not second.changed and len(second.unchanged) == len(first.added)


def test_minilm_tokenizer_never_sees_a_surrogate(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    with open(os.fsencode(folder) + b"/caf\xe9.md", "wb") as fh:
        fh.write(b"# Men\xed \xed\xa0\x80 heading\n\nText of the menu.")  # latin-1 byte, encoded lone surrogate
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))  # default chunker
    report = kb.add_documents(str(folder))
    assert len(report.added) == 1 and report.added[0].endswith("caf\\xe9.md")
    assert kb.get_documents()[0].metadata["source"].endswith("caf\\xe9.md")


# ---------------------------------------------------------------- HTML in linear time, correctly
_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
_BLOCK = st.sampled_from(["p", "div", "li", "span", "b", "i", "td"])


@st.composite
def _page(draw: st.DrawFn) -> tuple[str, list[str], list[str], list[tuple[int, str]]]:
    """A page of generated words in generated tags, with hidden script/style text and headings."""
    visible, hidden, headings, parts = [], [], [], []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["text", "tag", "script", "style", "heading", "comment", "noise"]))
        words = draw(st.lists(_WORD, min_size=1, max_size=5))
        if kind == "text":
            visible += words
            parts.append(" " + " ".join(words) + " ")
        elif kind == "tag":
            tag = draw(_BLOCK)
            visible += words
            parts.append(f" <{tag} class=\"x\">{' '.join(words)}</{tag}> ")  # spaced: <b>a</b><b>b</b> reads "ab"
        elif kind in ("script", "style"):
            hidden += [f"hidden{w}" for w in words]
            parts.append(f"<{kind}>{' '.join(f'hidden{w}' for w in words)} if (a < b) {{}}</{kind}>")
        elif kind == "comment":
            hidden += [f"hidden{w}" for w in words]
            parts.append(f"<!-- {' '.join(f'hidden{w}' for w in words)} -->")
        elif kind == "heading":
            level = draw(st.integers(1, 6))
            visible += words
            headings.append((level, " ".join(words)))
            parts.append(f"<h{level}>{' '.join(words)}</h{level}>")
        else:  # characters that end a tag or entity early: text to a browser, never a crash here
            noise = draw(st.sampled_from(["&lt;", "&amp;", " < ", " &#60; ", " &#; ", " &;", "<>", "</>"]))
            parts.append(noise)
    return "<html><body>" + "".join(parts) + "</body></html>", visible, hidden, headings


@settings(max_examples=200, deadline=None)
@given(page=_page())
def test_generated_html_keeps_visible_words_in_order_and_drops_hidden_ones(page):
    raw, visible, _hidden, headings = page
    text, _ = html_to_text(raw)
    words = re.findall(r"[a-z]+", text)
    assert [w for w in words if not w.startswith("hidden")] == [w for w in visible]
    assert not any(w.startswith("hidden") for w in words)
    lines = text.splitlines()
    for level, heading in headings:
        assert "#" * level + " " + heading in lines


_NASTY = st.text(alphabet="<>/!-&#;=\"' abcp\n[]?", max_size=400)


@settings(max_examples=300, deadline=None)
@given(raw=_NASTY)
def test_any_html_fragment_gives_text_without_raising(raw):
    text, title = html_to_text(raw)
    assert isinstance(text, str) and (title is None or isinstance(title, str))
    assert set(text) <= set(raw) | {"\n", "#", " ", "\ufffd"}


@pytest.mark.parametrize(("unit", "count"), [("<", 200_000), ("</", 200_000), ("&#", 200_000), ("<div>", 100_000),
                                             ("<a", 200_000), ("<!--", 200_000), ("<a b=\"", 100_000)])
def test_pathological_html_loads_with_the_right_text(tmp_path, unit, count):
    path = tmp_path / "nasty.html"
    path.write_text("<title>T</title>" + unit * count + "<p>end marker</p>")
    if unit in ("<a", "<!--", "<a b=\""):  # a tag, comment or attribute that never ends may swallow the rest
        try:
            text = load_file(path)[0].page_content
        except LoaderError as exc:
            assert "no text found" in str(exc)
        else:
            assert text.endswith("end marker") and "<a" not in text
        return
    docs = load_file(path)
    assert docs[0].metadata["title"] == "T"
    text = docs[0].page_content
    assert text.endswith("end marker")
    if unit in ("<", "&#"):  # a lone "<" or "&#" is text
        assert text.startswith(unit * count)


def test_ten_megabyte_html_file_loads_whole(tmp_path):
    path = tmp_path / "big.html"
    paragraph = "<p>alpha <b>beta</b> gamma &amp; delta</p>\n"
    path.write_text("<h1>Big</h1>" + paragraph * (10_000_000 // len(paragraph)))
    text = load_file(path)[0].page_content
    assert text.count("alpha beta gamma & delta") == 10_000_000 // len(paragraph)


def test_file_with_an_undecodable_name_is_found_again_deleted_and_not_taken_for_moved(tmp_path):
    folder, other = tmp_path / "docs", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    raw = os.fsencode(folder) + b"/r\xe9sum\xe9.md"
    with open(raw, "wb") as fh:
        fh.write(b"# CV\n\nThe same bytes in two places.")
    kb = _kb(tmp_path / "store")
    assert len(kb.add_documents(str(folder)).added) == 1
    (other / "copy.md").write_bytes(open(raw, "rb").read())
    report = kb.add_documents(str(other))
    assert not report.moved and len(report.added) == 1  # the original still exists: a copy, not a move
    assert not kb.add_documents(str(folder)).changed
    assert kb.delete_document(os.fsdecode(raw)) > 0
    assert len(kb.list_documents()) == 1
