from __future__ import annotations

import pytest
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import ConfigError
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.rerank import (
    CompressorReranker,
    CrossEncoderReranker,
    EmbeddingReranker,
    LLMFilterReranker,
    Reranker,
)


class KeywordReranker(Reranker):
    """Scores by how many times a keyword occurs: a minimal subclass, as users write them."""

    def __init__(self, word: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.word = word

    def rerank(self, query, docs):
        scored = sorted(((d, float(d.page_content.lower().count(self.word))) for d in docs), key=lambda p: -p[1])
        return scored[: self.top_n] if self.top_n else scored


class ReverseCompressor(BaseDocumentCompressor):
    def compress_documents(self, documents, query, callbacks=None):
        return list(reversed(documents))


def test_embedding_reranker_puts_the_exact_text_first(chunks):
    emb = DeterministicFakeEmbedding(size=32)
    reranked = EmbeddingReranker(embedding=emb).rerank(chunks[7].page_content, chunks)
    assert reranked[0][0].page_content == chunks[7].page_content
    assert reranked[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [s for _, s in reranked] == sorted((s for _, s in reranked), reverse=True)
    assert reranked[0][0].metadata["scores"]["rerank"] == reranked[0][1]
    assert "scores" not in chunks[7].metadata


def test_embedding_reranker_top_n_and_metadata_prefix(chunks):
    emb = DeterministicFakeEmbedding(size=32)
    reranker = EmbeddingReranker(embedding=emb, metadata_prefix=["title"], top_n=2)
    query = f"{chunks[0].metadata['title']}\n{chunks[0].page_content}"
    out = reranker.rerank(query, chunks)
    assert len(out) == 2 and out[0][0].id == chunks[0].id


def test_llm_filter_keeps_yes_answers_in_order(chunks):
    llm = FakeListChatModel(responses=["NO", "Yes, it does.", "no", "YES"])
    out = LLMFilterReranker(llm).rerank("capital expenditure?", chunks[:4])
    assert [d.id for d, _ in out] == [chunks[1].id, chunks[3].id]


def test_llm_filter_all_no_returns_nothing_or_everything(chunks):
    assert LLMFilterReranker(FakeListChatModel(responses=["NO"])).rerank("q", chunks[:3]) == []
    kept = LLMFilterReranker(FakeListChatModel(responses=["NO"]), keep_all_if_none=True).rerank("q", chunks[:3])
    assert len(kept) == 3


def test_cross_encoder_without_a_model_explains_the_fix(tmp_path):
    reranker = CrossEncoderReranker(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="no cross-encoder model at .*EmbeddingReranker"):
        reranker.rerank("q", [Document(page_content="x")])


@pytest.mark.slow
def test_tiny_local_cross_encoder_scores_every_pair(tmp_path, chunks):
    transformers = pytest.importorskip("transformers")
    from rag.models.embeddings import minilm_model_path

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_model_path()))
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32, num_labels=1)
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    out = CrossEncoderReranker(tmp_path, top_n=3).rerank("revenue", chunks[:6])
    assert len(out) == 3 and [s for _, s in out] == sorted((s for _, s in out), reverse=True)


def test_a_reranker_is_a_pipeline_stage_not_a_compressor(chunks):
    from rag import RAG, Resource
    from rag.base.errors import RemovedError

    assert not hasattr(KeywordReranker("acme"), "as_compressor")
    with pytest.raises(RemovedError, match="CompressorReranker"):
        from rag.retrieval.rerank import RerankerCompressor  # noqa: F401
    rag = RAG(resources=[Resource.from_retriever("f", BM25Retriever.from_documents(chunks, k=6))],
              retrieval={"reranker": KeywordReranker("acme", top_n=2), "k": 2})
    docs = rag.chain().invoke("revenue capital expenditure")["context"]
    assert len(docs) == 2 and all("acme" in d.page_content.lower() for d in docs)


def test_langchain_compressor_works_as_a_reranker(chunks):
    out = CompressorReranker(ReverseCompressor()).rerank("q", chunks[:3])
    assert [d.id for d, _ in out] == [chunks[2].id, chunks[1].id, chunks[0].id]
    assert out[0][1] == 1.0 and out[1][1] == 0.5


def test_bad_top_n_is_rejected():
    with pytest.raises(ConfigError, match="top_n must be a positive integer"):
        EmbeddingReranker(top_n=0)


@pytest.mark.parametrize("backend", ["chroma", "inmemory"])
def test_stored_vectors_give_the_same_scores_without_embedding_again(chunks, backend):
    """On every backend declaring `stored_vectors` (pgvector's: tests/unit/stores/test_store_contract.py)."""
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    from rag.stores.chroma import new_chroma

    class CountingEmbedding(Embeddings):
        def __init__(self):
            self.inner, self.documents = DeterministicFakeEmbedding(size=32), 0

        def embed_documents(self, texts):
            self.documents += len(texts)
            return self.inner.embed_documents(texts)

        def embed_query(self, text):
            return self.inner.embed_query(text)

    emb = CountingEmbedding()
    store = new_chroma("rerank", emb) if backend == "chroma" else InMemoryVectorStore(emb)
    store.add_documents(chunks[:5], ids=[c.id for c in chunks[:5]])
    emb.documents = 0
    extra = Document(page_content="not in the store")
    fresh = EmbeddingReranker(embedding=emb).rerank("gross margin", chunks[:5] + [extra])
    assert emb.documents == 6
    emb.documents = 0
    cached = EmbeddingReranker(embedding=emb, store=store).rerank("gross margin", chunks[:5] + [extra])
    assert emb.documents == 1   # only the chunk missing from the store is embedded
    assert [(d.page_content, pytest.approx(s, abs=1e-5)) for d, s in cached] == \
        [(d.page_content, s) for d, s in fresh]
