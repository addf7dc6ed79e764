from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import ConfigError
from rag.indexing.autocontext import AutoContext, _trim, _trim_section, extractive_summary
from rag.indexing.tokens import ApproximateTokenizer

FILING = ("Table of Contents. ACME CORPORATION ANNUAL REPORT ON FORM 10-K for the fiscal year 2023. "
          "Acme Corporation designs and sells anvils, rockets and traps to customers worldwide. "
          "Revenue grew 4% in 2023. Costs fell. 1,234 5,678 9,012. "
          "Acme anvils remain the largest product line by revenue.")


def _chunks(doc_id: str = "d1", title: str = "ACME_2023_10K", section: str | None = "Results") -> list[Document]:
    meta = {"doc_id": doc_id, "title": title, **({"section": section} if section else {})}
    return [Document(page_content=part, metadata={**meta, "chunk_index": i})
            for i, part in enumerate(FILING.split(". "))]


def test_embedded_text_has_title_section_summary_then_the_chunk():
    chunks = _chunks()
    texts = AutoContext().embedding_texts(chunks)
    head, body = texts[2].split("\n\n", 1)
    title_line, summary = head.split("\n")
    assert title_line == "ACME 2023 10K / Results"
    assert "ACME" in summary.upper()
    assert body == chunks[2].page_content


def test_stored_chunks_are_not_modified():
    chunks = _chunks()
    before = [c.model_copy(deep=True) for c in chunks]
    AutoContext().embedding_texts(chunks)
    assert chunks == before


def test_header_without_section_is_title_only():
    text = AutoContext().embedding_texts(_chunks(section=None), summaries={"d1": "A summary."})[0]
    assert text.startswith("ACME 2023 10K\nA summary.\n\n")


def test_disabled_autocontext_embeds_the_chunk_alone():
    chunks = _chunks()
    ctx = AutoContext(enabled=False)
    assert ctx.embedding_texts(chunks) == [c.page_content for c in chunks]
    assert ctx.settings()["enabled"] is False


def test_extractive_summary_names_the_document_from_its_title_words():
    summary = extractive_summary(FILING, title="ACME_2023_10K")
    assert "ACME" in summary.upper() and len(summary.split()) <= 31


def test_extractive_summary_skips_number_rows_and_is_capped():
    text = "1,234 5,678 9,012 3,456. " * 5 + "The bank lends money to small firms across the region " * 10 + "."
    summary = extractive_summary(text, max_words=12)
    assert summary.startswith("The bank lends") and summary.endswith(" ...") and len(summary.split()) == 13


def test_llm_summary_is_used_when_a_model_is_given():
    llm = FakeListChatModel(responses=["Acme's 2023 annual report.", "Beta's quarterly report."])
    ctx = AutoContext(llm=llm)
    chunks = _chunks("a") + _chunks("b", title="BETA")
    assert ctx.summaries(chunks) == {"a": "Acme's 2023 annual report.", "b": "Beta's quarterly report."}
    assert ctx.settings()["summary"] == "llm:FakeListChatModel"


def test_empty_llm_summary_falls_back_to_extractive():
    ctx = AutoContext(llm=FakeListChatModel(responses=["   "]))
    assert "ACME" in ctx.summaries(_chunks())["d1"].upper()


def test_header_is_trimmed_to_its_token_budget():
    ctx = AutoContext(max_header_tokens=20)
    long_title = "Very_Long_Title_" * 10
    head = ctx.header({"title": long_title, "section": "Section " * 20}, "word " * 100)
    assert ApproximateTokenizer().count(head) <= 20 + 4
    assert head.split("\n")[0].endswith("...")


def test_one_summary_per_document():
    chunks = _chunks("x") + _chunks("y", title="OTHER_CO")
    assert set(AutoContext().summaries(chunks)) == {"x", "y"}


@pytest.mark.parametrize(("kwargs", "match"), [({"enabled": "yes"}, "enabled"), ({"max_header_tokens": 2}, ">= 8"),
                                               ({"llm": "gpt"}, "chat model")])
def test_bad_settings_are_rejected(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        AutoContext(**kwargs)


@pytest.mark.integration
def test_default_chunk_plus_header_fits_minilm_256_word_pieces():
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.tokens import WordPieceTokenizer

    wordpiece = WordPieceTokenizer()
    text = ("Unaffordable hyperinflationary counterparties renegotiated EBITDA-linked covenants in FY2023; "
            "net revenues were $4,512.3 million (up 12.4% y/y). ") * 80
    doc = Document(page_content="# Management's Discussion and Analysis of Financial Condition and Results\n\n" + text,
                   metadata={"source": "x.md", "title": "CONSOLIDATED_EDISON_COMPANY_OF_NEW_YORK_2022_10K_AMENDED"})
    chunks = TokenChunker().split_documents([doc])
    texts = AutoContext().embedding_texts(chunks)
    assert max(wordpiece.count(t) + 2 for t in texts) <= 256  # + [CLS] and [SEP]


def test_a_long_heading_path_keeps_its_innermost_heading():
    chunk = Document(page_content="Revenue 61,502", metadata={
        "doc_id": "d", "title": "Microsoft 2016 10-K",
        "section": "ITEM 8. FINANCIAL STATEMENTS AND SUPPLEMENTARY DATA OF THE REGISTRANT AND ITS "
                   "CONSOLIDATED SUBSIDIARIES / INCOME STATEMENTS"})
    header = AutoContext().header(chunk.metadata, "")
    assert header == "Microsoft 2016 10-K / INCOME STATEMENTS"


def test_the_section_may_take_half_the_header_before_the_summary():
    meta = {"doc_id": "d", "title": "PepsiCo 2022 10-K",
            "section": "Consolidated Statement of Income / PepsiCo, Inc. and Subsidiaries"}
    header = AutoContext().header(meta, "PepsiCo makes snacks and drinks sold in more than 200 countries.")
    first, summary = header.split("\n")
    assert first == "PepsiCo 2022 10-K / Consolidated Statement of Income / PepsiCo, Inc. and Subsidiaries"
    assert summary.startswith("PepsiCo makes")


# ---------------------------------------------------------------- issue 37: trimming in linear time


def _trim_by_words(text: str, max_tokens: int, counter) -> str:
    """The definition `_trim` keeps (the old quadratic code): drop the last word until it fits, then characters."""
    text = " ".join(text.split())
    if counter.count(text) <= max_tokens:
        return text
    words = text.split()
    while len(words) > 1 and counter.count(" ".join(words) + " ...") > max_tokens:
        words.pop()
    kept = " ".join(words)
    while kept and counter.count(kept + " ...") > max_tokens:
        kept = kept[: len(kept) * 3 // 4]
    return kept + " ..." if kept else ""


def _section_by_parts(section: str, max_tokens: int, counter) -> str:
    parts = [p for p in (" ".join(part.split()) for part in section.split(" / ")) if p]
    while len(parts) > 1 and counter.count(" / ".join(parts)) > max_tokens:
        parts.pop(0)
    return _trim_by_words(" / ".join(parts), max_tokens, counter)


_HEADING = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300) | st.lists(
    st.sampled_from(["Revenue", "2023", "/", " / ", "10-K", "x" * 200, "\t", "\u00a0", "é", "_", "...", "3M"]),
    max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_HEADING, max_tokens=st.integers(0, 60))
def test_trimming_gives_what_dropping_a_word_at_a_time_gave(text, max_tokens):
    counter = ApproximateTokenizer()
    assert _trim(text, max_tokens, counter) == _trim_by_words(text, max_tokens, counter)
    assert _trim_section(text, max_tokens, counter) == _section_by_parts(text, max_tokens, counter)


@pytest.mark.parametrize("words", [2_000, 200_000])
def test_a_huge_heading_costs_linear_time(words):
    """The issue's 11 KB markdown heading of 2,000 words cost 174 s of CPU; 200,000 words now take well under one."""
    title = " ".join(f"word{i}" for i in range(words))
    chunks = [Document(page_content="Body.", metadata={"doc_id": "d", "title": title, "section": title,
                                                      "chunk_index": i}) for i in range(200)]
    start = time.process_time()
    texts = AutoContext().embedding_texts(chunks, summaries={"d": "A summary."})
    assert time.process_time() - start < 2
    assert texts[0].startswith("word0 word1") and len(texts[0]) < 400
