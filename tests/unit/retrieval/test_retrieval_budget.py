from __future__ import annotations

import pytest
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.retrieval.budget import TokenCounter, apply_budget

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
