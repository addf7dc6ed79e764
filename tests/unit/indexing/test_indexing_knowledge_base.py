from __future__ import annotations

import json
import os

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError, StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.manifest import list_knowledge_bases
from rag.indexing.tokens import ApproximateTokenizer

TEXT = ("The central bank raised interest rates to 4% in 2025. Inflation slowed in the second half. "
        "Mortgage demand fell as borrowing costs rose. ")


@pytest.fixture
def corpus(tmp_path, make_pdf):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "rates.md").write_text("# Rates\n\n" + TEXT * 8 + "\n\n## Outlook\n\nRates may fall in 2026.\n")
    (root / "stocks.txt").write_text("The stock market reached a record high in 2024. " * 30)
    make_pdf(root / "filing.pdf", ["Page zero talks about revenue.", "Page one talks about costs and margins."])
    return root


def _kb(tmp_path, embedding, **kwargs) -> KnowledgeBase:
    kwargs.setdefault("chunker", TokenChunker(chunk_size=64, chunk_overlap=8, tokenizer=ApproximateTokenizer()))
    return KnowledgeBase("docs", tmp_path / "store", embedding=embedding, **kwargs)


def _store_state(kb: KnowledgeBase) -> dict[str, tuple[str, str]]:
    got = kb.chunks.collection.get(include=["documents", "metadatas"])
    return {i: (d, json.dumps(m, sort_keys=True)) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}


def _assert_consistent(kb: KnowledgeBase) -> None:
    records = kb.list_documents()
    ids = [cid for r in records for cid in r.chunk_ids]
    assert len(ids) == len(set(ids)) == kb.count() == len(kb.chunks.collection.get(include=[])["ids"])
    for r in records:
        assert [c.id for c in kb.get_chunks(r.doc_id)] == r.chunk_ids
        assert [c.metadata["chunk_index"] for c in kb.get_chunks(r.doc_id)] == list(range(len(r.chunk_ids)))


def test_first_add_indexes_every_file_with_provenance(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    report = kb.add_documents(corpus)
    assert sorted(os.path.basename(p) for p in report.added) == ["filing.pdf", "rates.md", "stocks.txt"]
    assert report.pages == 4 and report.chunks_added == kb.count()
    # repeated sentences give identical chunks: each distinct text is embedded once
    assert report.embedded == len(recording_embedding.embedded) == len(set(recording_embedding.embedded)) < kb.count()
    _assert_consistent(kb)
    pdf = next(r for r in kb.list_documents() if r.source.endswith("filing.pdf"))
    assert [c.metadata["page"] for c in kb.get_chunks(pdf.doc_id)] == [0, 1]
    md = next(r for r in kb.list_documents() if r.source.endswith("rates.md"))
    assert {c.metadata.get("section") for c in kb.get_chunks(md.doc_id)} == {"Rates", "Outlook"}


def test_unchanged_corpus_embeds_and_writes_nothing(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    before, batches = _store_state(kb), len(recording_embedding.batches)
    report = kb.add_documents(corpus)
    assert len(report.unchanged) == 3 and not report.changed
    assert len(recording_embedding.batches) == batches and _store_state(kb) == before


def test_touched_but_identical_file_is_unchanged(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    batches = len(recording_embedding.batches)
    os.utime(corpus / "stocks.txt", ns=(1, 1))
    report = kb.add_documents(corpus)
    assert len(report.unchanged) == 3 and len(recording_embedding.batches) == batches
    assert kb.add_documents(corpus).unchanged  # the new mtime was recorded: fast path again


def test_changed_file_replaces_exactly_its_chunks(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    before = _store_state(kb)
    stocks = next(r for r in kb.list_documents() if r.source.endswith("stocks.txt"))
    (corpus / "stocks.txt").write_text("Bond yields fell sharply in 2024. " * 5)
    embedded_before = len(recording_embedding.embedded)
    report = kb.add_documents(corpus)
    assert [os.path.basename(p) for p in report.updated] == ["stocks.txt"] and len(report.unchanged) == 2
    after = _store_state(kb)
    assert {i: v for i, v in before.items() if i not in stocks.chunk_ids} == \
        {i: v for i, v in after.items() if i in before}
    assert not set(stocks.chunk_ids) & set(after)
    new = [c for c in kb.get_chunks(stocks.doc_id)]
    assert new and all("Bond yields" in c.page_content for c in new)
    assert len(recording_embedding.embedded) - embedded_before == len(new)
    _assert_consistent(kb)


def test_cleanup_modes_remove_vanished_documents(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    other = tmp_path / "other"
    other.mkdir()
    (other / "note.txt").write_text("A separate note about dividends.")
    kb.add_documents([corpus, other])
    (corpus / "stocks.txt").unlink()
    assert kb.add_documents(corpus).deleted == []  # cleanup=None keeps it
    report = kb.add_documents(corpus, cleanup="incremental")
    assert [os.path.basename(p) for p in report.deleted] == ["stocks.txt"]
    assert any(r.source.endswith("note.txt") for r in kb.list_documents())  # outside the folder: kept
    report = kb.add_documents(corpus, cleanup="full")
    assert [os.path.basename(p) for p in report.deleted] == ["note.txt"]
    _assert_consistent(kb)


def test_exclude_glob_with_incremental_cleanup_drops_excluded_files(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    report = kb.add_documents(corpus, exclude="*.pdf", cleanup="incremental")
    assert [os.path.basename(p) for p in report.deleted] == ["filing.pdf"]


def test_unreadable_files_are_skipped_with_reasons_and_the_rest_indexed(tmp_path, corpus, recording_embedding):
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4 nothing")
    (corpus / "empty.txt").write_text("")
    report = _kb(tmp_path, recording_embedding).add_documents(corpus)
    assert len(report.added) == 3
    assert {os.path.basename(s.path): ("damaged" in s.reason or "empty" in s.reason) for s in report.skipped} == {
        "broken.pdf": True, "empty.txt": True}


def test_autocontext_changes_the_embedding_but_not_the_stored_text(tmp_path):
    fake = DeterministicFakeEmbedding(size=16)
    kb = _kb(tmp_path, fake, cache=False)
    kb.add_documents([Document(page_content="Revenue grew 4%.", metadata={"source": "acme", "title": "ACME_2023"})])
    got = kb.chunks.collection.get(include=["documents", "embeddings"])
    assert got["documents"] == ["Revenue grew 4%."]
    expected = AutoContext().embedding_texts([Document(page_content="Revenue grew 4%.",
                                                       metadata={"doc_id": "x", "title": "ACME_2023"})])[0]
    assert expected.startswith("ACME 2023\n")
    assert list(got["embeddings"][0]) == pytest.approx(fake.embed_documents([expected])[0], rel=1e-5)


def test_manifest_records_components_and_reopens_with_them(tmp_path, corpus):
    kb = _kb(tmp_path, DeterministicFakeEmbedding(size=16), autocontext=AutoContext(enabled=False))
    kb.add_documents(corpus)
    manifest = json.loads(kb.manifest_path.read_text())
    assert manifest["embedding"] == {"id": "DeterministicFakeEmbedding(size=16)", "dimension": 16}
    assert manifest["chunking"]["chunk_size"] == 64 and manifest["autocontext"]["enabled"] is False
    assert manifest["store"] == {"type": "chroma", "collection": "docs", "space": "cosine"}
    again = KnowledgeBase.open("docs", tmp_path / "store")
    assert again.autocontext.enabled is False and again.chunker.chunk_size == 64
    assert again.count() == kb.count()
    assert list_knowledge_bases(tmp_path / "store") == ["docs"]


def test_reopening_with_another_embedding_model_is_a_config_error(tmp_path, corpus):
    _kb(tmp_path, DeterministicFakeEmbedding(size=16)).add_documents(corpus)
    with pytest.raises(ConfigError, match=r"built with the embedding model 'DeterministicFakeEmbedding\(size=16\)', "
                                          r"16-d; got 'DeterministicFakeEmbedding\(size=8\)'"):
        _kb(tmp_path, DeterministicFakeEmbedding(size=8))


def test_reopening_with_other_chunking_is_a_config_error(tmp_path):
    _kb(tmp_path, DeterministicFakeEmbedding(size=16)).create()
    with pytest.raises(ConfigError, match="chunk_size=64, got 100"):
        _kb(tmp_path, DeterministicFakeEmbedding(size=16), chunker=TokenChunker(chunk_size=100))


def test_open_missing_knowledge_base_lists_available(tmp_path):
    _kb(tmp_path, DeterministicFakeEmbedding(size=16)).create()
    with pytest.raises(StoreError, match="no knowledge base 'nope'.*existing: docs"):
        KnowledgeBase.open("nope", tmp_path / "store")


@pytest.mark.parametrize("name", ["", "has space", "-dash", "x" * 70, "a/b"])
def test_bad_names_are_rejected(tmp_path, name):
    with pytest.raises(ConfigError, match="not valid"):
        KnowledgeBase(name, tmp_path, embedding=DeterministicFakeEmbedding(size=4))


def test_documents_are_grouped_by_source_and_updated_in_place(tmp_path, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    docs = [Document(page_content=f"Part {i} of the guide.", metadata={"source": "guide", "page": i})
            for i in range(3)]
    assert kb.add_documents(docs).added == ["guide"]
    report = kb.update_document("guide", [Document(page_content="A rewritten guide.")])
    assert report.updated == ["guide"]
    (record,) = kb.list_documents()
    assert [c.page_content for c in kb.get_chunks(record.doc_id)] == ["A rewritten guide."]
    _assert_consistent(kb)


def test_update_document_reindexes_one_file(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    report = kb.update_document(corpus / "rates.md")
    assert [os.path.basename(p) for p in report.updated] == ["rates.md"] and report.chunks_added == 0


def test_delete_document_by_path_or_doc_id(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    records = {os.path.basename(r.source): r for r in kb.list_documents()}
    assert kb.delete_document(corpus / "rates.md") == len(records["rates.md"].chunk_ids)
    assert kb.delete_document(records["filing.pdf"].doc_id) == 2
    assert [os.path.basename(r.source) for r in kb.list_documents()] == ["stocks.txt"]
    _assert_consistent(kb)
    with pytest.raises(ConfigError, match="no document"):
        kb.delete_document("missing.txt")


def test_resource_applies_portable_filters_in_chroma(tmp_path, corpus):
    from langchain_core.language_models import FakeListChatModel

    from rag.compose.generator import RAG
    from rag.generation.rag_with_source import rag_chain_from_docs

    kb = _kb(tmp_path, DeterministicFakeEmbedding(size=16))
    kb.add_documents(corpus)
    resource = kb.as_resource()
    docs = resource.retrieve("costs", search_kwargs={"k": 10, "filter": {"page": {"$gte": 1}}})
    assert [d.metadata["page"] for d in docs] == [1]
    assert all(0 <= d.metadata["score"] <= 1.0001 for d in resource.retrieve("rates", search_kwargs={"k": 3}))
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(FakeListChatModel(responses=["4% [1]"])))
    out = rag.chain().invoke("What happened to interest rates?")
    assert out["context"] and all(d.metadata["resource"] == "docs" for d in out["context"])


def test_invalid_cleanup_lists_valid_modes(tmp_path):
    with pytest.raises(ConfigError, match="cleanup must be one of None, 'incremental', 'full'"):
        _kb(tmp_path, DeterministicFakeEmbedding(size=4)).add_documents([], cleanup="partial")


def test_get_documents_selects_a_run_of_chunks_for_neighbour_lookup(tmp_path, corpus, recording_embedding):
    kb = _kb(tmp_path, recording_embedding)
    kb.add_documents(corpus)
    md = next(r for r in kb.list_documents() if r.source.endswith("rates.md"))
    run = kb.get_documents({"doc_id": md.doc_id, "chunk_index": {"$gte": 1, "$lt": 3}})
    assert sorted(d.metadata["chunk_index"] for d in run) == [1, 2]
    assert sorted(d.id for d in run) == sorted(md.chunk_ids[1:3])
    assert len(kb.get_documents()) == kb.count()
    around = kb.neighbours(md.doc_id, 2, window=1)
    assert [d.metadata["chunk_index"] for d in around] == [1, 2, 3]
    assert [d.metadata["chunk_index"] for d in kb.neighbours(md.doc_id, 0, window=1)] == [0, 1]


def test_passthrough_chunker_keeps_prechunked_documents_and_reopens(tmp_path):
    from rag.indexing.chunking import PassthroughChunker

    kb = KnowledgeBase("pre", tmp_path, embedding=DeterministicFakeEmbedding(size=8), chunker=PassthroughChunker())
    text = "A long pre-made chunk. " * 100
    kb.add_documents([Document(page_content=text, metadata={"source": "s"})])
    assert [c.page_content for c in kb.get_chunks(kb.list_documents()[0].doc_id)] == [text]
    assert isinstance(KnowledgeBase.open("pre", tmp_path).chunker, PassthroughChunker)
    with pytest.raises(ConfigError, match="chunking type='passthrough'"):
        KnowledgeBase("pre", tmp_path, embedding=DeterministicFakeEmbedding(size=8), chunker=TokenChunker())


def test_a_reopened_knowledge_base_chunks_with_the_tokenizer_it_was_built_with(tmp_path, corpus):
    """The approximate tokenizer is recorded and rebuilt (reopened without a chunker, and on Ray's workers): a changed
    file is re-chunked as it was first, not with the word-piece tokenizer."""
    from rag.indexing.ray_chunking import component_settings

    first = _kb(tmp_path, DeterministicFakeEmbedding(size=8))
    first.add_documents(str(corpus))
    reopened = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    assert reopened.chunker.tokenizer.name == "approximate"
    assert json.loads(component_settings(reopened.storage))["chunking"]["tokenizer"] == "approximate"
    assert not reopened.add_documents(str(corpus)).changed   # the same chunks: nothing to redo
