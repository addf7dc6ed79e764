from __future__ import annotations

import math

import pytest
from langchain_core.documents import Document

from rag import Resource, retrieve
from rag.base.errors import ConfigError
from rag.retrieval.lexical import BM25Index, BM25Retriever
from rag.retrieval.rse import (
    RSE_PRESETS,
    calibrate,
    relevant_segments,
    segment_documents,
)


def _doc(doc_id: str, n: int, page_every: int = 4) -> list[Document]:
    return [Document(page_content=f"{doc_id} sentence {i}.", metadata={"doc_id": doc_id, "chunk_index": i,
                                                                        "page": i // page_every}) for i in range(n)]


A, B = _doc("A", 40), _doc("B", 40)
SOURCE = BM25Index.from_documents(A + B)


def test_logistic_calibration_is_half_at_median_and_point_nine_at_p90():
    scores = [0.62, 0.55, 0.41, 0.40, 0.38, 0.33, 0.30, 0.29, 0.25, 0.21, 0.2]
    out = calibrate(scores)
    median_i = scores.index(0.33)
    assert out[median_i] == pytest.approx(0.5)
    p90 = 0.55  # numpy's linear percentile of these 11 values
    t = (p90 - 0.33) / math.log(9)
    assert out[1] == pytest.approx(1 / (1 + math.exp(-(0.55 - 0.33) / t)))
    assert out[1] == pytest.approx(0.9)
    assert calibrate([3.0, 1.0, 2.0], "rank") == pytest.approx([1.0, 1 / 3, 2 / 3])
    with pytest.raises(ConfigError, match="valid: logistic, rank, none"):
        calibrate([1.0], "sigmoid")


def test_values_follow_relevance_rank_decay_and_penalty():
    # uncalibrated: chunk 10 worth 0.9 - 0.18, chunk 11 worth 0.8*exp(-1/30) - 0.18, chunk 12 missing (-0.18)
    hits = [(A[10], 0.9), (A[11], 0.8), (A[13], 0.7)]
    segs = relevant_segments([hits], SOURCE, calibration="none", minimum_value=0.0)
    v13 = 0.7 * math.exp(-2 / 30) - 0.18
    expected = (0.9 - 0.18) + (0.8 * math.exp(-1 / 30) - 0.18) - 0.18 + v13
    assert [(s.start, s.end) for s in segs] == [(10, 14)]
    assert segs[0].score == pytest.approx(expected)


def test_clusters_in_two_documents_become_two_segments_and_gaps_split_them():
    hits = [(A[5], .9), (A[6], .85), (B[20], .84), (A[7], .8), (B[21], .8), (A[30], .3), (B[2], .2),
            (A[18], .1), (B[35], .1), (A[25], .05)]
    segs = relevant_segments([hits], SOURCE)
    spans = {(s.doc_id, s.start, s.end) for s in segs}
    assert ("A", 5, 8) in spans and ("B", 20, 22) in spans
    assert all(not (s.doc_id == "A" and s.start <= 30 < s.end) for s in segs)


def test_segments_never_overlap_and_respect_the_overall_budget():
    hits = [(c, 1.0 - i / 100) for i, c in enumerate(A[:30] + B[:30])]
    segs = relevant_segments([hits], SOURCE, preset="balanced", calibration="none")
    assert sum(s.end - s.start for s in segs) <= RSE_PRESETS["balanced"].overall_max_length
    assert all(s.end - s.start <= RSE_PRESETS["balanced"].max_length for s in segs)
    for doc_id in "AB":
        taken = [i for s in segs if s.doc_id == doc_id for i in range(s.start, s.end)]
        assert len(taken) == len(set(taken))


def test_each_query_gets_its_own_segment():
    q1 = [(A[3], .9), (A[4], .9), (B[30], .1), (A[20], .1), (B[1], .1)]
    q2 = [(B[12], .9), (B[13], .9), (A[30], .1), (B[25], .1), (A[15], .1)]
    segs = relevant_segments({"q1": q1, "q2": q2}, SOURCE)
    assert [(s.doc_id, s.start, s.end) for s in segs][:2] == [("A", 3, 5), ("B", 12, 14)]


def test_weak_candidates_give_no_segment():
    assert relevant_segments([[(A[3], 0.1)]], SOURCE, calibration="none") == []


def test_segment_text_and_pages_come_from_the_chunk_source():
    segs = relevant_segments([[(A[6], .9), (A[8], .9), (B[1], 0.0), (B[9], 0.0)]], SOURCE, calibration="none")
    doc = segment_documents(segs)[0]
    assert doc.page_content == "\n".join(f"A sentence {i}." for i in range(6, 9))
    assert doc.metadata["pages"] == [1, 2] and doc.metadata["hits"] == [6, 8]


def test_unknown_preset_and_field_are_rejected():
    with pytest.raises(ConfigError, match="valid: balanced, precision, find_all"):
        relevant_segments([[(A[1], 1.0)]], SOURCE, preset="recall")
    with pytest.raises(ValueError, match="max_len"):
        relevant_segments([[(A[1], 1.0)]], SOURCE, max_len=3)


def test_find_all_allows_longer_segments_than_precision():
    hits = [(c, 0.9) for c in A[:35]] + [(c, 0.1) for c in B[:35]]
    longest = {p: max(s.end - s.start for s in relevant_segments([hits], SOURCE, preset=p, calibration="none"))
               for p in ("precision", "find_all")}
    assert longest["find_all"] > longest["precision"]


def test_the_rse_stage_returns_segments_of_real_text(chunks):
    index = BM25Index.from_documents(chunks)
    resource = Resource.from_retriever("filings", BM25Retriever(index=index))
    docs = retrieve("Acme 2023 revenue gross margin capital expenditure", resource, rse="balanced", fetch_k=10,
                    filter={"doc_name": "ACME_2023_10K"}).context
    assert docs and docs[0].metadata["doc_id"] == "ACME_2023_10K"
    assert len(docs[0].metadata["chunk_indices"]) >= 2
