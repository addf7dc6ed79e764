"""annotate_support: best chunk, score in [0, 1], labels, and the lexical + embedding combination."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.checks.support import SupportScorer, annotate_support, support_summary

CHUNKS = ["The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair.",
          "The Colosseum is in Rome. It could hold about 50,000 spectators."]


def test_verbatim_sentence_is_fully_supported_by_its_chunk():
    [item] = annotate_support("It could hold about 50,000 spectators. [2]", CHUNKS, embedding=None)
    assert (item.chunk, item.score, item.label, item.citations) == (2, 1.0, "supported", [2])


def test_a_table_row_quoted_as_a_unit_counts_as_verbatim():
    table = "| city | landmark |\n|---|---|\n| Rome | Colosseum |"
    [item] = annotate_support("Rome; Colosseum [1]", [table], embedding=None)
    assert (item.chunk, item.score) == (1, 1.0)


def test_sentence_with_no_shared_terms_is_unsupported_and_has_no_chunk():
    [item] = annotate_support("Bananas are yellow.", CHUNKS, embedding=None)
    assert (item.chunk, item.score, item.label) == (None, 0.0, "unsupported")


def test_partly_matching_sentence_is_partial():
    [item] = annotate_support("The Eiffel Tower was repainted in 2019.", CHUNKS, embedding=None)
    assert item.chunk == 1 and 0.3 <= item.score < 0.6 and item.label == "partial"


def test_best_chunk_is_the_one_sharing_the_rarest_terms():
    items = annotate_support("The Colosseum is in Rome. The Eiffel Tower is in Paris.", CHUNKS, embedding=None)
    assert [i.chunk for i in items] == [2, 1]


def test_i_dont_know_is_not_a_claim():
    items = annotate_support("I don't know. The Colosseum is in Rome.", CHUNKS, embedding=None)
    assert [i.label for i in items] == ["no_answer", "supported"]
    assert support_summary(items)["score"] == 1.0


def test_embedding_similarity_is_combined_with_lexical_overlap():
    emb = DeterministicFakeEmbedding(size=64)
    sentence = "Completed in 1889 it was."          # fake vectors: only identical texts are similar
    [lexical_only] = annotate_support(sentence, CHUNKS, embedding=None)
    [combined] = annotate_support(sentence, CHUNKS, embedding=emb, lexical_weight=0.25)
    vectors = np.array(emb.embed_documents(["The Eiffel Tower is in Paris.", "It was completed in 1889 for the World's Fair."]))
    query = np.array(emb.embed_query(sentence))
    cosine = max(0.0, float(np.max(vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)))))
    assert combined.semantic == pytest.approx(cosine, abs=1e-3)
    assert combined.score == pytest.approx(0.25 * lexical_only.lexical + 0.75 * cosine, abs=1e-3)
    assert 0.0 <= combined.score <= 1.0


def test_documents_and_strings_are_both_accepted_as_context():
    docs = [Document(page_content=c) for c in CHUNKS]
    assert annotate_support("The Colosseum is in Rome.", docs, embedding=None) == \
        annotate_support("The Colosseum is in Rome.", CHUNKS, embedding=None)


def test_bad_thresholds_are_rejected_with_the_values():
    with pytest.raises(ValueError, match="0.9 and 0.5"):
        annotate_support("x", CHUNKS, embedding=None, threshold=0.5, partial_threshold=0.9)


def test_default_embedding_is_not_loaded_until_scoring():
    scorer = SupportScorer(CHUNKS, embedding="default")
    assert scorer.uses_embedding and scorer._sentence_vectors is None


def test_unknown_embedding_spec_lists_the_choices():
    with pytest.raises(ValueError, match="'default' or None"):
        SupportScorer(CHUNKS, embedding="minilm").scores("The Colosseum is in Rome.")
