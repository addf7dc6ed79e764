from __future__ import annotations

import pytest
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.indexing.chunking import (
    TokenChunker,
    document_id,
    split_documents,
    split_sections,
)
from rag.indexing.tokens import ApproximateTokenizer, WordPieceTokenizer

APPROX = ApproximateTokenizer()
PARAGRAPH = ("The company reported revenue of $4,512.3 million in fiscal 2023, up 12% from the prior year. "
             "Operating margin improved because of lower freight costs and favourable currency effects. ")


def _doc(text: str, **meta) -> Document:
    return Document(page_content=text, metadata={"source": "reports/annual.md", **meta})


def test_chunks_never_exceed_chunk_size_in_tokens():
    chunks = split_documents([_doc(PARAGRAPH * 40)], chunk_size=60, chunk_overlap=10, tokenizer=APPROX)
    assert len(chunks) > 5
    assert all(APPROX.count(c.page_content) <= 60 for c in chunks)
    assert all(c.metadata["token_count"] == APPROX.count(c.page_content) for c in chunks)


def test_chunks_prefer_sentence_ends_and_cover_the_text_in_order():
    chunks = split_documents([_doc(PARAGRAPH * 20)], chunk_size=80, chunk_overlap=0, tokenizer=APPROX)
    assert all(c.page_content.endswith(".") for c in chunks[:-1])
    assert " ".join(c.page_content for c in chunks) == (PARAGRAPH * 20).strip()


def test_overlap_repeats_the_end_of_the_previous_chunk_from_a_word_start():
    text = " ".join(f"word{i}" for i in range(400))
    chunks = split_documents([_doc(text)], chunk_size=50, chunk_overlap=10, tokenizer=APPROX)
    for prev, nxt in zip(chunks, chunks[1:]):
        first_word = nxt.page_content.split()[0]
        assert first_word in prev.page_content.split()
        assert APPROX.count(prev.page_content[prev.page_content.index(first_word):]) <= 12


def test_metadata_has_provenance_and_continues_index_across_pages():
    pages = [Document(page_content=PARAGRAPH * 6, metadata={"source": "f.pdf", "page": p, "title": "Filing"})
             for p in range(3)]
    chunks = split_documents(pages, chunk_size=60, chunk_overlap=0, tokenizer=APPROX)
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    assert {c.metadata["doc_id"] for c in chunks} == {document_id("f.pdf")}
    assert [c.metadata["page"] for c in chunks] == sorted(c.metadata["page"] for c in chunks)
    assert {c.metadata["page"] for c in chunks} == {0, 1, 2}
    assert all(c.metadata["title"] == "Filing" and c.metadata["source"] == "f.pdf" for c in chunks)
    assert "section" not in chunks[0].metadata


def test_title_falls_back_to_the_file_name():
    chunk = split_documents([Document(page_content="short text", metadata={"source": "dir/q3-results.txt"})],
                            tokenizer=APPROX)[0]
    assert chunk.metadata["title"] == "q3-results"


def test_markdown_sections_label_chunks_and_are_not_crossed():
    text = "Preface text.\n\n# Install\n\nRun the installer.\n\n## Linux\n\n" + PARAGRAPH * 5 + "\n# Usage\n\nCall it."
    chunks = split_documents([_doc(text, file_type="md")], chunk_size=60, chunk_overlap=0, tokenizer=APPROX)
    sections = [c.metadata.get("section") for c in chunks]
    assert sections[0] is None and sections[1] == "Install" and sections[-1] == "Usage"
    assert "Linux" in sections
    assert chunks[-1].page_content == "# Usage\n\nCall it."
    assert not any("Run the installer" in c.page_content and "## Linux" in c.page_content for c in chunks)


def test_hash_lines_in_code_fences_and_plain_text_are_not_headings():
    assert [s[0] for s in split_sections("# Real\n```\n# comment\n```\nafter")] == ["Real"]
    chunks = split_documents([Document(page_content="# not a header\nbody", metadata={"source": "x.txt"})],
                             tokenizer=APPROX)
    assert "section" not in chunks[0].metadata


def test_a_long_word_without_spaces_is_cut_at_the_size():
    chunks = split_documents([_doc("x" * 1000)], chunk_size=20, chunk_overlap=0, tokenizer=APPROX)
    assert "".join(c.page_content for c in chunks) == "x" * 1000
    assert all(c.metadata["token_count"] <= 20 for c in chunks)


def test_blank_and_empty_documents_give_no_chunks():
    assert split_documents([_doc(""), _doc("  \n\n ")], tokenizer=APPROX) == []


def test_right_to_left_and_surrogate_text_is_chunked():
    text = ("שלום עולם. זהו מסמך בעברית עם הרבה מילים. " * 30) + "bad \ud800 end"
    chunks = split_documents([_doc(text)], chunk_size=40, chunk_overlap=5, tokenizer=APPROX)
    joined = "".join(c.page_content for c in chunks)
    assert "שלום" in joined and "\ufffd" in chunks[-1].page_content
    for c in chunks:
        c.page_content.encode("utf-8")


@pytest.mark.parametrize(("size", "overlap", "match"), [
    (4, 0, "chunk_size must be between 8 and 254"), (300, 0, "chunk_size"), (100, 60, "chunk_overlap"),
    (100, -1, "chunk_overlap"), (10.5, 0, "integer")])
def test_invalid_sizes_are_rejected_with_the_valid_range(size, overlap, match):
    with pytest.raises(ConfigError, match=match):
        TokenChunker(chunk_size=size, chunk_overlap=overlap)


@pytest.mark.integration
def test_default_chunks_fit_the_minilm_window_in_real_word_pieces():
    wordpiece = WordPieceTokenizer()
    text = (PARAGRAPH + "Unaffordable hyperinflationary counterparties renegotiated EBITDA-linked covenants. ") * 60
    chunks = TokenChunker().split_documents([_doc(text)])
    counts = [wordpiece.count(c.page_content) for c in chunks]
    assert max(counts) <= 200 and min(counts) > 50
    assert all(c.metadata["token_count"] == n for c, n in zip(chunks, counts))


def test_approximate_tokenizer_over_counts_word_pieces_on_english():
    text = PARAGRAPH * 3 + "Unaffordable hyperinflationary counterparties renegotiated covenants."
    try:
        real = WordPieceTokenizer().count(text)
    except ImportError:
        pytest.skip("MiniLM tokenizer not installed")
    assert APPROX.count(text) >= real
