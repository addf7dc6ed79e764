"""Definition lists reach the chunks as structure: each term tied to its description, in the text and the metadata."""

from __future__ import annotations

import html
import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.indexing.chunking import split_documents
from rag.indexing.definitions import (
    DEFINITIONS_KEY,
    MAX_DEFINITIONS,
    MAX_DESCRIPTION_CHARS,
    MAX_TERM_CHARS,
    chunk_definitions,
    definitions,
    piece_definitions,
)
from rag.indexing.html_text import html_to_text
from rag.indexing.loaders import load_file
from rag.indexing.tokens import ApproximateTokenizer


def _flat(text: str) -> str:
    return " ".join(text.split())


def _pairs(chunks: list[Document]) -> list[tuple[str, str]]:
    return [(d["term"], d["description"]) for c in chunks for d in definitions(c.metadata)]


def _chunks(text: str, source: str = "page.html", **kwargs) -> list[Document]:
    kwargs.setdefault("tokenizer", ApproximateTokenizer())
    return split_documents([Document(page_content=text, metadata={"source": source})], **kwargs)


def test_a_term_is_printed_directly_above_its_description():
    page = ("<dl><dt>-l</dt>\n<dt>--local</dt>\n<dd>\n<p>\n  Copy the repository from a local path.\n</p>\n"
            "<p>A second paragraph.</p></dd>\n<dt>--depth &lt;n&gt;</dt><dd><p>Create a <em>shallow</em> clone."
            "</p></dd></dl><p>After the list.</p>")
    text, _ = html_to_text(page)
    assert text.splitlines() == ["-l, --local", ": Copy the repository from a local path.", "", "A second paragraph.",
                                 "", "--depth <n>", ": Create a shallow clone.", "", "After the list."]


def test_man_page_lists_without_end_tags_nested_lists_and_terms_alone():
    text, _ = html_to_text("<DL COMPACT><DT><B>-c</B><DD>Read commands from the string.<DT>-i<DD>Interactive."
                           "</DL>after")
    assert text == "-c\n: Read commands from the string.\n\n-i\n: Interactive.\n\nafter"
    text, _ = html_to_text("<dl><dt>outer</dt><dd><dl><dt>inner</dt><dd>The inner one.</dd></dl></dd></dl>")
    assert text == "outer\n:\n\ninner\n: The inner one."
    assert html_to_text("<dl><dt>Alone</dt></dl><p>Text.</p>")[0] == "Alone\n\nText."
    assert html_to_text("<dl><dt>x</dt><dd><pre>code</pre><p>Then prose.</p></dd></dl>")[0] == \
        "x\n:\n\n```\ncode\n```\n\nThen prose."
    # a list inside a table cell stays in its cell
    assert html_to_text("<table><tr><td><dl><dt>a</dt><dd>b</dd></dl></td><td>c</td></tr></table>")[0] == "a b | c"


def test_the_chunker_keeps_each_term_with_its_description_in_the_metadata():
    text, _ = html_to_text("<h2>Options</h2><dl><dt>-q, --quiet</dt><dd>Print nothing at all.</dd>"
                           "<dt>Timeout:</dt><dd>Seconds to wait.\nThen give up.</dd></dl><p>See also.</p>")
    (chunk,) = _chunks(text)
    assert json.loads(chunk.metadata[DEFINITIONS_KEY]) == [
        {"term": "-q, --quiet", "description": "Print nothing at all.", "lines": ["-q, --quiet", ": Print nothing at all."]},
        {"term": "Timeout", "description": "Seconds to wait. Then give up.",
         "lines": ["Timeout", ": Seconds to wait.", "Then give up."]}]
    assert "definitions" not in _chunks("Plain prose.\nNo: a colon inside a line is not a list.")[0].metadata


def test_markdown_definition_lists_read_the_same_and_code_is_never_one(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\nwork_area\n: Memory for one sort.\n: A second description.\n\n"
                    "```\nnot a term\n: inside code\n```\n", encoding="utf-8")
    chunks = split_documents(load_file(path))
    assert _pairs(chunks) == [("work_area", "Memory for one sort."), ("work_area", "A second description.")]
    assert piece_definitions("\n: after a blank line there is no term\n") == []


def test_a_description_cut_over_chunks_gives_every_part_its_term():
    text = "the-term\n: " + " ".join(f"Sentence number {i} says a thing." for i in range(80)) + "\n"
    chunks = _chunks(text, chunk_size=40, chunk_overlap=5)
    assert len(chunks) > 3
    parts = [definitions(c.metadata) for c in chunks]
    assert all(len(p) == 1 and p[0]["term"] == "the-term" for p in parts)
    joined = _flat(" ".join(p[0]["description"] for p in parts))
    assert "Sentence number 0 says" in joined and "Sentence number 79 says a thing." in joined


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
_TERM = st.lists(_WORD, min_size=1, max_size=3).map(lambda ws: "--" + "-".join(ws))
_DESCRIPTION = st.lists(_WORD, min_size=2, max_size=40).map(lambda ws: " ".join(ws).capitalize() + ".")


@settings(max_examples=40, deadline=None)
@given(entries=st.lists(st.tuples(_TERM, _DESCRIPTION), min_size=1, max_size=30),
       size=st.integers(16, 120))
def test_every_definition_reaches_the_metadata_and_no_chunk_ends_on_a_term_it_could_avoid(entries, size):
    page = "<dl>" + "".join(f"<dt>{html.escape(t)}</dt><dd><p>{html.escape(d)}</p></dd>" for t, d in entries) + "</dl>"
    text, _ = html_to_text(page)
    chunks = _chunks(text, chunk_size=size, chunk_overlap=size // 4)
    found = {(t, _flat(d)) for t, d in _pairs(chunks)}
    for term, description in entries:   # each pair whole in some chunk, or its parts each under the term
        assert (term, description) in found or any(t == term and d in description for t, d in found)
    terms = {t for t, _ in entries}
    for chunk in chunks[:-1]:
        last = chunk.page_content.rstrip().splitlines()[-1]
        if last in terms and len(chunk.page_content) < 0.9 * 8 * size:   # not forced by the window
            raise AssertionError(f"a chunk ends on the term {last!r} while it could end before it")


@settings(max_examples=25, deadline=None)
@given(term_len=st.integers(1, 50_000), count=st.integers(1, 3_000), description=st.text(min_size=0, max_size=300))
def test_hostile_lists_give_bounded_json_safe_metadata(term_len, count, description):
    page = f"<dl><dt>{'t' * term_len}</dt><dd>{html.escape(description)}</dd></dl>" + \
        "".join(f"<dt>k{i}</dt><dd>v{i} is set.</dd>" for i in range(count))
    started = time.perf_counter()
    text, _ = html_to_text("<dl>" + page + "</dl>")
    chunks = _chunks(text)
    assert time.perf_counter() - started < 30
    for chunk in chunks:
        raw = chunk.metadata.get(DEFINITIONS_KEY)
        if raw is None:
            continue
        assert isinstance(raw, str) and json.loads(raw) == definitions(chunk.metadata)
        items = definitions(chunk.metadata)
        assert 1 <= len(items) <= MAX_DEFINITIONS
        assert all(len(d["term"]) <= MAX_TERM_CHARS and len(d["description"]) <= MAX_DESCRIPTION_CHARS for d in items)
        raw.encode("utf-8")   # no lone surrogates: every store keeps it


def test_deeply_nested_lists_are_read_in_linear_time():
    for depth in (2_000, 20_000):
        page = "<dl><dt>t</dt><dd>" * depth + "Deep." + "</dd></dl>" * depth
        started = time.perf_counter()
        text, _ = html_to_text(page)
        took = time.perf_counter() - started
        assert text.endswith("t\n: Deep.")
        if depth == 2_000:
            small = took
    assert took < max(5.0, 40 * small)


def test_non_utf8_pages_load_and_their_definitions_are_valid_text(tmp_path):
    path = tmp_path / "latin.html"
    path.write_bytes(b"<dl><dt>caf\xe9</dt><dd>A drink \xff\xfe served hot.</dd><dt>\xc3\x28</dt><dd>Bad bytes.</dd></dl>")
    chunks = split_documents(load_file(path))
    pairs = _pairs(chunks)
    assert len(pairs) == 2 and all(isinstance(t, str) and t for t, _ in pairs)
    json.dumps(pairs, ensure_ascii=False).encode("utf-8")


@given(st.one_of(st.none(), st.integers(), st.text(max_size=50),
                 st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
                              lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4),
                              max_leaves=20).map(json.dumps)))
def test_what_indexing_did_not_write_reads_as_no_definitions_or_well_formed_ones(raw):
    for item in definitions({DEFINITIONS_KEY: raw}):
        assert isinstance(item["term"], str) and isinstance(item["description"], str)
        assert all(isinstance(line, str) for line in item["lines"])


def test_chunk_definitions_is_none_without_a_description_in_the_span():
    text = "x\n: Described.\n\nProse after.\n"
    found = piece_definitions(text)
    assert chunk_definitions(found, text, text.index("Prose"), len(text)) is None
    assert json.loads(chunk_definitions(found, text, 0, len(text)))[0]["term"] == "x"
