"""The rules every chunk obeys, on generated markdown and text: headings travel with their text,
chunks are bounded in tokens and characters, and nothing is lost or repeated beyond the overlap."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.indexing.chunking import TokenChunker, split_sections
from rag.indexing.loaders import load_directory
from rag.indexing.tokens import ApproximateTokenizer, default_tokenizer

APPROX = ApproximateTokenizer()
HEADING = re.compile(r"^#{1,6}[ \t]+\S")
ROOT = Path(__file__).resolve().parents[3]

_word = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzAZ0123456789.,;:!?()'é漢"), min_size=1, max_size=12)
_words = st.lists(_word, min_size=1, max_size=60).map(" ".join)
_heading = st.tuples(st.integers(1, 6), st.lists(_word, min_size=1, max_size=80).map(" ".join)).map(
    lambda h: "#" * h[0] + " " + h[1])
_run = st.integers(1, 3000).map(lambda n: "x" * n)  # letters without a space: one token for word pieces
_paragraph = st.one_of(_words, _words.map(lambda w: w + "."), _run)
_block = st.one_of(_heading, _heading, _paragraph, st.lists(_heading, min_size=2, max_size=6).map("\n".join))
markdown = st.lists(_block, min_size=1, max_size=25).flatmap(
    lambda blocks: st.lists(st.sampled_from(["\n", "\n\n"]), min_size=len(blocks), max_size=len(blocks)).map(
        lambda seps: "".join(b + s for b, s in zip(blocks, seps, strict=True))))
sizes = st.integers(16, 254).flatmap(lambda size: st.tuples(
    st.just(size), st.integers(0, size // 2), st.one_of(st.none(), st.integers(64, 3000))))


def _heading_lines(text: str) -> list[bool]:
    return [bool(HEADING.match(line)) for line in text.splitlines()]


def _chunks(text: str, size: int, overlap: int, max_chars: int | None, source: str = "doc.md") -> tuple[
        TokenChunker, list[Document]]:
    chunker = TokenChunker(chunk_size=size, chunk_overlap=overlap, max_chars=max_chars, tokenizer=APPROX)
    return chunker, chunker.split_documents([Document(page_content=text, metadata={"source": source})])


def _heading_run(text: str, start: int, end: int) -> str:
    """The run of heading (and blank) lines around `[start, end)` of `text`."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    inside = [n for n in range(len(lines)) if offsets[n] < end and offsets[n + 1] > start]
    first, last = inside[0], inside[-1]
    while first > 0 and (HEADING.match(lines[first - 1]) or not lines[first - 1].strip()):
        first -= 1
    while last + 1 < len(lines) and (HEADING.match(lines[last + 1]) or not lines[last + 1].strip()):
        last += 1
    return "".join(lines[first:last + 1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdown, bounds=sizes)
def test_a_heading_never_forms_a_chunk_alone_unless_its_run_is_longer_than_a_chunk(text, bounds):
    size, overlap, max_chars = bounds
    chunker, chunks = _chunks(text, size, overlap, max_chars)
    has_text = not all(_heading_lines(line)[0] for line in text.splitlines() if line.strip())
    for chunk in chunks:
        flags = [flag for flag, line in zip(_heading_lines(chunk.page_content), chunk.page_content.splitlines(),
                                            strict=True) if line.strip()]
        if not all(flags) or not has_text:
            continue
        start = chunk.metadata["start_index"]
        rest = text[start + len(chunk.page_content):]
        if all(_heading_lines(line)[0] for line in rest.splitlines() if line.strip()):
            continue   # trailing headings: no text follows them to travel with (e.g. "...\n0\n# 0 0\n", size 16)
        run = _heading_run(text, start, start + len(chunk.page_content))
        assert APPROX.count(run) >= size or len(run) >= chunker.max_chars - 8, chunk.page_content


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdown, bounds=sizes, source=st.sampled_from(["doc.md", "doc.txt"]))
def test_chunks_are_bounded_and_cover_the_text_without_repeating_more_than_the_overlap(text, bounds, source):
    size, overlap, max_chars = bounds
    chunker, chunks = _chunks(text, size, overlap, max_chars, source)
    covered = [False] * len(text)
    previous_end = {}
    for chunk in chunks:
        body, start = chunk.page_content, chunk.metadata["start_index"]
        assert text[start:start + len(body)] == body
        assert len(body) <= chunker.max_chars
        assert chunk.metadata["token_count"] == APPROX.count(body) <= size
        section = chunk.metadata.get("section")
        if section in previous_end:  # the next chunk of the same section overlaps by at most the overlap
            repeated = text[start:previous_end[section]]
            assert APPROX.count(repeated) <= overlap
            assert len(repeated) <= chunker.max_chars * overlap // size
        previous_end[section] = start + len(body)
        covered[start:start + len(body)] = [True] * len(body)
    assert all(c or ch.isspace() for c, ch in zip(covered, text, strict=True))


def test_headings_join_the_text_they_head_and_stay_in_the_section():
    text = "# Models\n\n## Default\n\nMiniLM embeds every chunk.\n\n# Notes\n\n# Appendix\n"
    _, chunks = _chunks(text, 64, 8, None)
    assert [c.page_content for c in chunks] == [text.strip()]
    assert chunks[0].metadata["section"] == "Models / Default"


def test_a_heading_longer_than_half_a_chunk_still_takes_text_with_it():
    heading = "# " + " ".join(f"w{i}" for i in range(20))
    text = heading + "\n\n" + "Body sentence here. " * 30
    _, chunks = _chunks(text, 48, 0, None)
    assert chunks[0].page_content.startswith(heading) and "Body" in chunks[0].page_content


def test_carriage_return_lines_end_headings_too():
    text = "# Title\rBody text under the title.\r# Other\rMore text."
    _, chunks = _chunks(text, 64, 0, None)
    assert [c.metadata["section"] for c in chunks] == ["Title", "Other"]


def test_a_run_of_400000_letters_is_cut_to_the_character_bound_in_real_word_pieces():
    text = "Intro words.\n" + "a" * 400_000 + "\nOutro words."
    chunker = TokenChunker(tokenizer=default_tokenizer())
    chunks = chunker.split_documents([Document(page_content=text, metadata={"source": "blob.txt"})])
    assert len(chunks) >= 400_000 // chunker.max_chars
    assert max(len(c.page_content) for c in chunks) <= chunker.max_chars
    assert sum(c.page_content.count("a") for c in chunks) >= 400_000  # nothing lost (overlap may repeat)


def test_the_project_docs_have_no_chunk_made_of_headings_only():
    report = load_directory(ROOT / "docs", include="**/*.md")
    chunks = TokenChunker(tokenizer=default_tokenizer()).split_documents(report.documents)
    assert len(chunks) > 50
    lonely = [c.page_content for c in chunks
              if all(HEADING.match(line) for line in c.page_content.splitlines() if line.strip())]
    assert lonely == []
    models = [c for c in chunks if c.page_content.startswith("# Models")]
    assert models and all(len(c.page_content) > len("# Models") + 20 for c in models)


def test_split_sections_still_gives_one_span_per_heading():
    assert [s[0] for s in split_sections("# A\n# B\ntext")] == ["A", "B"]
