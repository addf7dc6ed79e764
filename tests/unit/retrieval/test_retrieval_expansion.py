from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_text_splitters import RecursiveCharacterTextSplitter

from rag.base.errors import ConfigError
from rag.indexing.chunking import split_documents
from rag.indexing.neighbours import chunk_range, neighbours
from rag.retrieval.expansion import expand_neighbours, merge_chunk_texts
from rag.retrieval.lexical import BM25Index
from rag.stores import PartitionedChroma
from rag.stores.chroma import new_chroma

TEXT = " ".join(f"Sentence number {i} talks about topic {i % 7} in the annual report." for i in range(60))


def _chroma(chunks):
    store = new_chroma("neighbours", DeterministicFakeEmbedding(size=8))
    store.add_documents(chunks, ids=[c.id for c in chunks])
    return store


def test_neighbours_from_chroma_are_in_chunk_order(chunks):
    store = _chroma(chunks)
    got = neighbours(store, "ACME_2023_10K", 1, window=2)
    assert [c.metadata["chunk_index"] for c in got] == [0, 1, 2, 3]
    assert {c.metadata["doc_id"] for c in got} == {"ACME_2023_10K"}
    assert chunk_range(store, "ACME_2023_10K", 3, 99)[-1].page_content.startswith("Acme repurchased")


def test_all_chunk_sources_agree(chunks):
    part = PartitionedChroma("n", DeterministicFakeEmbedding(size=8), partition_key="doc_name")
    part.add_texts([c.page_content for c in chunks], [c.metadata for c in chunks], ids=[c.id for c in chunks])
    sources = [_chroma(chunks), part, BM25Index.from_documents(chunks)]
    texts = [[c.page_content for c in neighbours(s, "GLOBEX_2023_10K", 4, window=1)] for s in sources]
    assert texts[0] == texts[1] == texts[2] and len(texts[0]) == 2


def test_unsupported_source_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid chunk sources"):
        chunk_range(object(), "d", 0, 3)


def test_overlapping_windows_of_one_document_do_not_repeat_text(chunks):
    index = BM25Index.from_documents(chunks)
    hits = [chunks[1], chunks[3], chunks[11]]  # ACME_2022 #1 and #3 (windows overlap), GLOBEX #1
    out = expand_neighbours(hits, index, window=1)
    assert len(out) == 2
    first = out[0]
    assert (first.metadata["chunk_start"], first.metadata["chunk_end"]) == (0, 5)
    assert first.metadata["hits"] == [1, 3]
    for chunk in chunks[:5]:
        assert first.page_content.count(chunk.page_content) == 1
    assert out[1].metadata["doc_id"] == "GLOBEX_2023_10K" and out[1].metadata["chunk_indices"] == [0, 1, 2]


def test_windows_follow_the_rank_of_their_best_hit(chunks):
    index = BM25Index.from_documents(chunks)
    hit_a = Document(page_content=chunks[12].page_content, metadata={**chunks[12].metadata, "score": 0.9})
    hit_b = Document(page_content=chunks[2].page_content, metadata={**chunks[2].metadata, "score": 0.4})
    raw = Document(page_content="no provenance")
    out = expand_neighbours([hit_a, raw, hit_b], index, window=0)
    assert [d.page_content for d in out] == [chunks[12].page_content, "no provenance", chunks[2].page_content]
    assert out[0].metadata["score"] == 0.9


def test_character_overlap_is_removed_by_offsets():
    splitter = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=60, add_start_index=True)
    pieces = splitter.create_documents([TEXT])
    assert pieces[1].metadata["start_index"] < pieces[0].metadata["start_index"] + len(pieces[0].page_content)
    merged = merge_chunk_texts(pieces[:4])
    assert merged == TEXT[:pieces[3].metadata["start_index"] + len(pieces[3].page_content)]


def test_character_overlap_is_removed_by_text_when_offsets_are_missing():
    chunks = split_documents([Document(page_content=TEXT, metadata={"source": "r.txt"})],
                             chunk_size=40, chunk_overlap=10)
    merged = merge_chunk_texts(chunks[:5])
    assert merged.count("Sentence number 3 ") == 1 and "Sentence number 0 " in merged
    assert " ".join(merged.split()) in " ".join(TEXT.split())


def test_expansion_reads_neighbours_from_real_chroma():
    chunks = split_documents([Document(page_content=TEXT, metadata={"source": "r.txt", "page": 3})],
                             chunk_size=40, chunk_overlap=10)
    store = _chroma([Document(page_content=c.page_content, metadata=c.metadata, id=f"c{i}")
                     for i, c in enumerate(chunks)])
    out = expand_neighbours([chunks[5]], store, window=2)
    assert out[0].metadata["chunk_indices"] == [3, 4, 5, 6, 7] and out[0].metadata["pages"] == [3]
    assert " ".join(out[0].page_content.split()) in " ".join(TEXT.split())
