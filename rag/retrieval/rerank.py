"""Rerankers: re-score retrieved chunks against the question, with adapters to LangChain compressors.

A `Reranker` has one method to implement, ``rerank(query, docs) -> [(doc, score)]`` (best first;
a reranker may also drop documents). Implementations:

- `EmbeddingReranker` (offline default): cosine similarity of the question and each chunk under
  an embedding model (all-MiniLM-L6-v2 by default), optionally with metadata such as the title
  prefixed to the chunk text. Useful after fusion, where BM25-only hits have no dense score.
  With ``by_sentence=True`` a chunk scores its best cosine over the question and each of its
  sentences that says enough on its own (`rag.retrieval.rephrase.sub_queries`): a question that
  names a metric and then defines it matches the chunk holding the definition's line items.
- `CrossEncoderReranker`: a sentence-transformers ``CrossEncoder`` loaded from a local path
  (nothing is downloaded); raises an error naming the path and the fix when it is unavailable.
- `LLMFilterReranker`: asks a chat model YES/NO per chunk and keeps the YES ones in their order.
- `CompressorReranker`: any LangChain ``BaseDocumentCompressor`` as a Reranker.

Reranking is one stage of the retrieval pipeline (`RetrievalSettings.reranker`); there is no
wrapper retriever or compressor doing it a second way.

Returned documents are copies with ``metadata["score"]`` and ``metadata["scores"]["rerank"]``
set to the reranker's score (``relevance_score`` too, as LangChain compressors do).

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> reranker = EmbeddingReranker(embedding=DeterministicFakeEmbedding(size=8), top_n=1)
    >>> len(reranker.rerank("q", [Document(page_content="a"), Document(page_content="b")]))
    1
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseLanguageModel

from rag.base.errors import ConfigError, MissingDependencyError, removed_names
from rag.models.embeddings import default_embeddings
from rag.retrieval.fusion import doc_key, minmax, with_scores
from rag.retrieval.rephrase import sub_queries
from rag.stores.chunk_store import Capability
from rag.stores.registry import chunks_of, having

__all__ = [
    "CompressorReranker",
    "CrossEncoderReranker",
    "EmbeddingReranker",
    "LLMFilterReranker",
    "Reranker",
    "blend_rerank",
]

__getattr__ = removed_names(__name__, {"RerankerCompressor": (
    "reranking is a stage of the retrieval pipeline: RAG(..., retrieval={'reranker': reranker}); "
    "CompressorReranker brings any LangChain document compressor into it")})

Scored = list[tuple[Document, float]]


def _check_top_n(top_n: int | None) -> int | None:
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise ConfigError(f"top_n must be a positive integer or None, got {top_n!r}")
    return top_n


def _scored(docs: Sequence[Document], scores: Sequence[float], top_n: int | None) -> Scored:
    order = sorted(range(len(docs)), key=lambda i: -scores[i])
    out = []
    for i in order[:top_n] if top_n else order:
        score = float(scores[i])
        doc = with_scores(docs[i], score, {"rerank": score})
        doc.metadata["relevance_score"] = score
        out.append((doc, score))
    return out


class Reranker(ABC):
    """Re-score documents for a query. Subclasses implement `rerank`.

    Args:
        top_n: keep only the best `top_n` (None keeps all).
    """

    def __init__(self, *, top_n: int | None = None) -> None:
        self.top_n = _check_top_n(top_n)

    @abstractmethod
    def rerank(self, query: str, docs: Sequence[Document]) -> Scored:
        """Return (document copy, score) pairs, best first (possibly fewer than given)."""

    async def arerank(self, query: str, docs: Sequence[Document]) -> Scored:
        """Async `rerank` (runs the sync one in a worker thread unless overridden)."""
        return await asyncio.to_thread(self.rerank, query, docs)


class EmbeddingReranker(Reranker):
    """Cosine similarity of query and chunk embeddings (offline default).

    Args:
        embedding: the model (default: `rag.models.embeddings.default_embeddings()`, loaded lazily).
        metadata_prefix: metadata keys whose values are prefixed to the chunk text before embedding.
        store: a vector store holding the chunks' vectors (same model; its chunk store declares
            `Capability.STORED_VECTORS`, see `rag.stores.registry.having`): chunks with an id found
            there are scored from their stored vector instead of being embedded again, which
            makes reranking a few milliseconds instead of one model pass per chunk. Not used
            with `metadata_prefix` (stored vectors were made without the prefix).
        by_sentence: score each chunk by its best cosine over the question and its sentences
            (`sub_queries`) instead of the whole question only.
        top_n: keep the best `top_n`.
    """

    def __init__(self, *, embedding: Embeddings | None = None, metadata_prefix: Sequence[str] = (),
                 store: Any = None, by_sentence: bool = False, top_n: int | None = None) -> None:
        super().__init__(top_n=top_n)
        if isinstance(metadata_prefix, str):
            raise ConfigError("metadata_prefix must be a list of keys, not a single string")
        chunks = chunks_of(store) if store is not None else None
        if store is not None and (chunks is None or Capability.STORED_VECTORS not in chunks.capabilities):
            raise ConfigError(f"store must be a vector store whose chunk store declares the "
                              f"{Capability.STORED_VECTORS.value!r} capability (reads stored vectors by id; "
                              f"of the shipped backends: {', '.join(having(Capability.STORED_VECTORS))}), "
                              f"got {type(store).__name__}")
        self._embedding = embedding
        self.metadata_prefix = tuple(metadata_prefix)
        self.store, self._chunks = store, chunks
        self.by_sentence = bool(by_sentence)

    @property
    def embedding(self) -> Embeddings:
        if self._embedding is None:

            self._embedding = default_embeddings()
        return self._embedding

    def text_of(self, doc: Document) -> str:
        prefix = " ".join(str(doc.metadata[k]) for k in self.metadata_prefix if doc.metadata.get(k) is not None)
        return f"{prefix}\n{doc.page_content}" if prefix else doc.page_content

    def rerank(self, query: str, docs: Sequence[Document]) -> Scored:
        if not docs:
            return []
        stored = self._stored_vectors(docs)
        missing = [i for i, d in enumerate(docs) if d.id not in stored]
        fresh = self.embedding.embed_documents([self.text_of(docs[i]) for i in missing]) if missing else []
        by_index = dict(zip(missing, fresh, strict=True))
        m = np.asarray([stored[d.id] if d.id in stored else by_index[i] for i, d in enumerate(docs)], dtype=np.float32)
        norms = np.linalg.norm(m, axis=1)
        sims = None
        for part in sub_queries(query) if self.by_sentence else [query]:
            q = np.asarray(self.embedding.embed_query(part), dtype=np.float32)
            part_sims = (m @ q) / np.maximum(norms * np.linalg.norm(q), 1e-12)
            sims = part_sims if sims is None else np.maximum(sims, part_sims)
        return _scored(docs, sims.tolist(), self.top_n)


    def _stored_vectors(self, docs: Sequence[Document]) -> dict[str, Any]:
        if self.store is None or self.metadata_prefix:
            return {}
        ids = [d.id for d in docs if d.id]
        if not ids:
            return {}
        return self._chunks.get_vectors(ids)


class CrossEncoderReranker(Reranker):
    """A sentence-transformers CrossEncoder from a local directory (loaded on first use).

    Args:
        model_path: a local directory holding a CrossEncoder model (config, weights, tokenizer).
        batch_size: pairs scored per forward pass.
        max_length: truncation length in word pieces.
        top_n: keep the best `top_n`.
    """

    def __init__(self, model_path: str | Path, *, batch_size: int = 16, max_length: int = 512,
                 top_n: int | None = None) -> None:
        super().__init__(top_n=top_n)
        self.model_path = Path(model_path)
        self.batch_size, self.max_length = batch_size, max_length
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            if not (self.model_path / "config.json").exists():
                raise ConfigError(f"no cross-encoder model at {self.model_path} (config.json missing); give the path "
                                  "of a local sentence-transformers CrossEncoder directory - models are never "
                                  "downloaded - or use EmbeddingReranker, the offline default")
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise MissingDependencyError.for_extra("sentence-transformers", "local", "CrossEncoderReranker") from exc
            self._model = CrossEncoder(str(self.model_path), device="cpu", max_length=self.max_length,
                                       local_files_only=True)
        return self._model

    def rerank(self, query: str, docs: Sequence[Document]) -> Scored:
        model = self._load()
        if not docs:
            return []
        scores = model.predict([(query, d.page_content) for d in docs], batch_size=self.batch_size,
                               show_progress_bar=False)
        return _scored(docs, np.asarray(scores, dtype=np.float32).reshape(len(docs), -1)[:, -1].tolist(), self.top_n)


_FILTER_PROMPT = ("Does the passage contain information that helps answer the question? Answer YES or NO only.\n\n"
                  "Question: {question}\n\nPassage:\n{passage}\n\nAnswer:")
_YES = re.compile(r"^\W*(yes|y|true|relevant)\b", re.IGNORECASE)


class LLMFilterReranker(Reranker):
    """Keep the chunks a chat model judges relevant (YES/NO per chunk, asked in one batch).

    Kept chunks keep their input order and score 1.0; a chunk is dropped unless the answer starts
    with YES. With `keep_all_if_none`, the input is returned unchanged when every answer is NO.

    Args:
        llm: a LangChain chat or text model.
        prompt: a template with ``{question}`` and ``{passage}``.
    """

    def __init__(self, llm: BaseLanguageModel, *, prompt: str = _FILTER_PROMPT, keep_all_if_none: bool = False,
                 top_n: int | None = None) -> None:
        super().__init__(top_n=top_n)
        missing = [f for f in ("{question}", "{passage}") if f not in prompt]
        if missing:
            raise ConfigError(f"the LLM filter prompt must contain {missing}")
        self.llm, self.prompt, self.keep_all_if_none = llm, prompt, keep_all_if_none

    def rerank(self, query: str, docs: Sequence[Document]) -> Scored:
        if not docs:
            return []
        prompts = [self.prompt.format(question=query, passage=d.page_content) for d in docs]
        answers = [getattr(a, "content", a) for a in self.llm.batch(prompts)]
        keep = [1.0 if _YES.match(str(a)) else 0.0 for a in answers]
        if not any(keep):
            return _scored(docs, [0.0] * len(docs), self.top_n) if self.keep_all_if_none else []
        kept = [d for d, k in zip(docs, keep, strict=True) if k]
        ranks = [1.0 - i / (10 * len(kept)) for i in range(len(kept))]  # keep input order, all near 1
        return _scored(kept, ranks, self.top_n)


class CompressorReranker(Reranker):
    """Any LangChain `BaseDocumentCompressor` as a Reranker.

    Scores are the compressor's ``metadata["relevance_score"]`` when it sets one, else
    ``1 / (1 + position)`` in its output.
    """

    def __init__(self, compressor: BaseDocumentCompressor, *, top_n: int | None = None) -> None:
        super().__init__(top_n=top_n)
        self.compressor = compressor

    def rerank(self, query: str, docs: Sequence[Document]) -> Scored:
        out = list(self.compressor.compress_documents(list(docs), query))
        scores = [float(d.metadata.get("relevance_score", 1.0 / (1 + i))) for i, d in enumerate(out)]
        return _scored(out, scores, self.top_n)


def blend_rerank(first: Sequence[tuple[Document, float]], reranked: Sequence[tuple[Document, float]], *,
                 weight: float) -> list[tuple[Document, float]]:
    """Fuse a reranker's scores with the first-stage scores: ``weight * rerank + (1 - weight) * first``.

    Both are min-max normalised over the candidates first. A reranker that sees only the chunk
    text (an embedding or cross-encoder model) then refines the first stage instead of replacing
    what the first stage knew (AutoContext headers, routing, BM25). Candidates the reranker dropped
    keep their first-stage place below the others.

    Example:
        >>> a, b = Document(page_content="a", id="a"), Document(page_content="b", id="b")
        >>> first, reranked = [(a, 1.0), (b, 0.0)], [(b, 0.9), (a, 0.1)]
        >>> [d.id for d, _ in blend_rerank(first, reranked, weight=0.3)]
        ['a', 'b']
        >>> [d.id for d, _ in blend_rerank(first, reranked, weight=1.0)]
        ['b', 'a']
    """

    if not 0.0 <= weight <= 1.0:
        raise ConfigError(f"rerank weight must be between 0 and 1, got {weight!r}")

    def normalised(pairs: Sequence[tuple[Document, float]]) -> dict[str, float]:
        return dict(zip((doc_key(d) for d, _ in pairs), minmax([float(sc) for _, sc in pairs]), strict=True))

    stage_one, stage_two = normalised(first), normalised(reranked)
    docs = {doc_key(d): d for d, _ in first} | {doc_key(d): d for d, _ in reranked}
    blended = {key: weight * stage_two[key] + (1 - weight) * stage_one.get(key, 0.0) for key in stage_two}
    out = sorted(((docs[key], score) for key, score in blended.items()), key=lambda pair: -pair[1])
    floor = min((score for _, score in out), default=0.0)
    out += [(d, floor - 1e-6 * (i + 1)) for i, (d, _) in enumerate(first) if doc_key(d) not in blended]
    return out
