from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.retrieval.budget import MAX_CHARS_PER_TOKEN, TokenCounter, apply_budget, token_counter

PROSE = ("In fiscal 2023 Acme's total revenue was $4.9 billion, up 17% from 2022. Gross margin fell to 38% "
         "because steel prices rose sharply. Capital expenditure was $520 million, including a plant in Mexico.")


def test_approx_counts_punctuation_digits_and_long_words():
    counter = TokenCounter("approx")
    assert counter.name == "approx"
    assert counter.count("a, b.") == 4
    assert counter.count("1234567") == 3          # runs of up to 3 digits
    assert counter.count("internationalisation") == 4   # letters in pieces of up to 5


@pytest.mark.integration
def test_minilm_counter_matches_the_model_tokenizer_and_approx_is_close():
    minilm = TokenCounter("minilm")
    assert minilm.name == "minilm"
    from transformers import AutoTokenizer

    from rag.models.embeddings import minilm_model_path

    hf = AutoTokenizer.from_pretrained(str(minilm_model_path()))
    assert minilm.count(PROSE) == len(hf.tokenize(PROSE))
    # the approximation counts a little more, so a context sized with it stays within budget
    assert minilm.count(PROSE) <= TokenCounter("approx").count(PROSE) <= 1.3 * minilm.count(PROSE)


def test_budget_keeps_order_cuts_the_overflowing_document_and_drops_the_rest():
    counter = TokenCounter("approx")
    docs = [Document(page_content=PROSE, metadata={"n": i}) for i in range(3)]
    per_doc = counter.count(PROSE)
    out = apply_budget(docs, per_doc + 20, counter=counter, min_tokens=10)
    assert [d.metadata["n"] for d in out] == [0, 1]
    assert out[0].page_content == PROSE and out[1].metadata["truncated"]
    assert PROSE.startswith(out[1].page_content)
    assert sum(d.metadata["tokens"] for d in out) <= per_doc + 20
    assert "tokens" not in docs[0].metadata


def test_small_remainder_is_dropped_and_no_budget_keeps_everything():
    counter = TokenCounter("approx")
    docs = [Document(page_content=PROSE)] * 2
    assert len(apply_budget(docs, counter.count(PROSE) + 5, counter=counter, min_tokens=32)) == 1
    assert len(apply_budget(docs, None, counter=counter)) == 2


def test_bad_budget_and_counter_are_rejected():
    with pytest.raises(ConfigError, match="max_tokens must be a positive integer"):
        apply_budget([], 0)
    with pytest.raises(ConfigError, match="valid: auto, minilm, approx"):
        TokenCounter("tiktoken")


# ---------------------------------------------------------------- characters are bounded too (long words)
_ALPHABETS = {"base64": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
              "code": "abcdefghijklmnopqrstuvwxyz(){};=.,+-*/<>!&|'\"",
              "url": "abcdefghijklmnopqrstuvwxyz0123456789/:?&=%.-_#",
              "unicode": "αβγδεζηθλμνξπρστφχψωабвгдеёжзийклмн漢字仮名"}


@st.composite
def _long_word_texts(draw: st.DrawFn) -> str:
    """Text made of generated long words (base64, minified code, URLs, other scripts) and some prose."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        alphabet = _ALPHABETS[draw(st.sampled_from(sorted(_ALPHABETS)))]
        parts.append(draw(st.text(alphabet=alphabet, min_size=1, max_size=3000)))
        if draw(st.booleans()):
            parts.append(PROSE[: draw(st.integers(0, len(PROSE)))])
    return draw(st.sampled_from([" ", "", "\n"])).join(parts)


@settings(max_examples=120, deadline=None)
@given(texts=st.lists(_long_word_texts(), min_size=1, max_size=12), max_tokens=st.integers(1, 600),
       method=st.sampled_from(["approx", "chars"]))
def test_a_budget_bounds_the_characters_of_any_words(texts, max_tokens, method):
    docs = [Document(page_content=t) for t in texts]
    out = apply_budget(docs, max_tokens, counter=token_counter(method), min_tokens=1)
    assert sum(len(d.page_content) for d in out) <= MAX_CHARS_PER_TOKEN * max_tokens
    assert sum(d.metadata["tokens"] for d in out) <= max_tokens
    assert all(d.page_content for d in out)


@pytest.mark.integration
@settings(max_examples=25, deadline=None)
@given(texts=st.lists(_long_word_texts(), min_size=1, max_size=8), max_tokens=st.integers(1, 600))
def test_a_minilm_budget_bounds_the_characters_of_long_words(texts, max_tokens):
    """MiniLM counts a word over 100 characters as one [UNK]: the reported case (64 chunks under 4,000)."""
    out = apply_budget([Document(page_content=t) for t in texts], max_tokens, counter=TokenCounter("minilm"),
                       min_tokens=1)
    assert sum(len(d.page_content) for d in out) <= MAX_CHARS_PER_TOKEN * max_tokens


def test_the_reported_case_64_chunks_of_1600_characters_do_not_fit_in_4000_tokens():
    docs = [Document(page_content="x" * 1600, metadata={"n": i}) for i in range(64)]
    out = apply_budget(docs, 4000, counter=TokenCounter("auto"))
    assert sum(len(d.page_content) for d in out) <= 32_000 and len(out) <= 20


def test_ordinary_prose_is_counted_by_the_tokenizer_alone():
    counter = TokenCounter("approx")
    (doc,) = apply_budget([Document(page_content=PROSE)], 4000, counter=counter)
    assert doc.metadata["tokens"] == counter.count(PROSE)
