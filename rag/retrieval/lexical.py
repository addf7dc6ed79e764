"""A persisted BM25 (Okapi) index and its retriever, over `rag.base.text.tokenize`.

`BM25Index` keeps an inverted index in numpy arrays (term -> postings of chunk positions and
precomputed term-frequency weights), so a query costs one `np.bincount` over the postings of its
terms: a few milliseconds at 100k chunks. Tokens are lowercased, punctuation-stripped, stop-word
filtered and Snowball-stemmed by default. Metadata fields named in `metadata_fields` (for example
the document title) are indexed with each chunk's text, because chunks rarely repeat the name of
the filing they come from.

Scores: ``sum over query terms of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))``
with the non-negative idf ``log(1 + (N - df + 0.5) / (df + 0.5))``. Each query term counts once.

Persistence is data, never pickle: ``arrays.npz`` (postings, loaded with ``allow_pickle=False``)
plus ``index.json`` (settings, vocabulary, chunk texts, metadata and ids).

`BM25Retriever` is a `PortableRetriever`: it takes ``k`` and a portable ``filter``
at invoke time and applies the filter (with `rag.base.filters.matches`) before the top k, so a
selective filter never returns fewer than k matching chunks when k exist. Returned documents are
copies whose ``metadata["score"]`` is the BM25 score and ``metadata["scores"] == {"bm25": score}``.

Example:
    >>> from langchain_core.documents import Document
    >>> index = BM25Index.from_documents([Document(page_content="Revenue grew 5%.", metadata={"year": 2023}),
    ...                                   Document(page_content="Costs fell.", metadata={"year": 2024})])
    >>> retriever = BM25Retriever(index=index, k=1)
    >>> retriever.invoke("revenues")[0].page_content
    'Revenue grew 5%.'
    >>> retriever.invoke("revenue", filter={"year": 2024})
    []
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from langchain_core.documents import Document

from rag.base.errors import ConfigError, StoreError, short_repr
from rag.base.filters import matches_canonical, validate_filter
from rag.base.portable import ChunkSource, PortableRetriever, Scored
from rag.base.text import tokenize
from rag.retrieval.bm25_files import read_arrays, read_meta, write_index_files
from rag.stores.value_index import ValueIndex

__all__ = ["BM25Index", "BM25Retriever", "LexicalIndex"]

_FORMAT = "rag-bm25/1"


@runtime_checkable
class LexicalIndex(Protocol):
    """What lexical search needs of an index: the in-process `BM25Index`, or an engine's
    (`rag.stores.fts_index.FTSIndex`: SQLite FTS5 beside the embedded default's chunks)."""

    def search_documents(self, query: str, *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The top-`k` chunks the portable `filter` allows, as (copy with its scores, score), best first."""
        ...

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word`."""
        ...

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Every chunk the portable filter allows (a chunk source)."""
        ...

    def __len__(self) -> int: ...


class BM25Index:
    """An Okapi BM25 inverted index over chunks (see the module docstring).

    Args:
        k1: term-frequency saturation (>= 0), default 1.5.
        b: length normalisation in [0, 1], default 0.75.
        stem: Snowball-stem tokens.
        stop_words: drop English stop words.
        metadata_fields: metadata keys whose values are indexed with the chunk text (e.g. "title").
    """

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, stem: bool = True, stop_words: bool = True,
                 metadata_fields: Sequence[str] = ()) -> None:
        if not k1 >= 0:
            raise ConfigError(f"k1 must be >= 0, got {k1!r}")
        if not 0 <= b <= 1:
            raise ConfigError(f"b must be between 0 and 1, got {b!r}")
        if isinstance(metadata_fields, str):
            raise ConfigError("metadata_fields must be a list of keys, not a single string")
        self.k1, self.b, self.stem, self.stop_words = float(k1), float(b), stem, stop_words
        self.metadata_fields = tuple(metadata_fields)
        self.texts: list[str] = []
        self.metadatas: list[dict[str, Any]] = []
        self.ids: list[str | None] = []
        self._token_lists: list[list[str]] | None = []
        self._vocab: dict[str, int] = {}
        self._ptr = np.zeros(1, dtype=np.int64)
        self._docs = np.zeros(0, dtype=np.int32)
        self._weights = np.zeros(0, dtype=np.float32)
        self._idf = np.zeros(0, dtype=np.float32)
        self._values = ValueIndex(lambda: enumerate(self.metadatas))

    # ------------------------------------------------------------------ building
    @classmethod
    def from_documents(cls, documents: Sequence[Document], **settings: Any) -> BM25Index:
        """Build an index over documents (settings as in the constructor)."""
        index = cls(**settings)
        index.add_documents(documents)
        return index

    def tokens(self, text: str) -> list[str]:
        """Tokenise text with this index's settings (used for queries and chunks alike)."""
        return tokenize(text, stem=self.stem, stop_words=self.stop_words)

    def _chunk_tokens(self, text: str, metadata: dict[str, Any]) -> list[str]:
        extra = " ".join(str(metadata[f]) for f in self.metadata_fields if metadata.get(f) is not None)
        return self.tokens(f"{extra} {text}" if extra else text)

    def add_documents(self, documents: Sequence[Document]) -> None:
        """Add chunks and rebuild the postings (cost grows with the whole index)."""
        if self._token_lists is None:  # loaded from disk: re-tokenise once
            self._token_lists = [self._chunk_tokens(t, m) for t, m in zip(self.texts, self.metadatas, strict=True)]
        for doc in documents:
            self.texts.append(doc.page_content)
            self.metadatas.append(dict(doc.metadata))
            self.ids.append(doc.id)
            self._token_lists.append(self._chunk_tokens(doc.page_content, doc.metadata))
        self._build(self._token_lists)

    def _build(self, token_lists: list[list[str]]) -> None:
        flat = list(chain.from_iterable(token_lists))
        vocab = {term: t for t, term in enumerate(dict.fromkeys(flat))}
        lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
        term_ids = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
        doc_ids = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
        # one (term, chunk) key per token; unique keys sorted by term then chunk give the postings
        keys, tf = np.unique(term_ids * max(len(token_lists), 1) + doc_ids, return_counts=True)
        terms, docs = np.divmod(keys, max(len(token_lists), 1))
        tf = tf.astype(np.float32)
        lengths = lengths.astype(np.float32)
        avg = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
        norm = self.k1 * (1 - self.b + self.b * lengths[docs] / avg)
        self._weights = (tf * (self.k1 + 1) / (tf + norm)).astype(np.float32)
        self._docs = docs.astype(np.int32)
        self._ptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(vocab)), out=self._ptr[1:])
        df = np.diff(self._ptr).astype(np.float64)
        n = len(token_lists)
        self._idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        self._vocab = vocab
        self._values.clear()

    def __len__(self) -> int:
        return len(self.texts)

    # ------------------------------------------------------------------ search
    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for `query` (zeros for chunks sharing no term)."""
        out = np.zeros(len(self.texts), dtype=np.float32)
        for term in set(self.tokens(query)):
            t = self._vocab.get(term)
            if t is None:
                continue
            lo, hi = self._ptr[t], self._ptr[t + 1]
            out += np.bincount(self._docs[lo:hi], weights=self._weights[lo:hi] * self._idf[t],
                               minlength=len(out)).astype(np.float32)
        return out

    def search(self, query: str, *, k: int = 4, filter: dict[str, Any] | None = None) -> list[tuple[int, float]]:
        """Top-k (chunk position, score) pairs with a positive score, after the portable filter."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        flt = validate_filter(filter)
        scores = self.scores(query)
        exact = self._values.exact(flt)   # the index decides the whole filter: no per-chunk check
        pool = exact if exact is not None else self._values.candidates(flt)
        candidates = np.flatnonzero(scores > 0) if pool is None else pool[scores[pool] > 0]
        ranked = candidates[np.argsort(-scores[candidates], kind="stable")]
        out = []
        for i in ranked:
            if flt is None or exact is not None or matches_canonical(self.metadatas[i], flt):
                out.append((int(i), float(scores[i])))
                if len(out) == k:
                    break
        return out

    def search_documents(self, query: str, *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """`search`, as (copy of the chunk with its score, score) pairs."""
        return [(self.document(i, s), s) for i, s in self.search(query, k=k, filter=filter)]

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word` (document routing weighs a name by it)."""
        return Counter(self.metadatas[i].get("doc_id") for i in np.flatnonzero(self.scores(word) > 0))

    def value_positions(self, key: str) -> dict[Any, np.ndarray]:
        """Metadata value -> chunk positions having it, for `key` (built once per key, cached)."""
        return self._values.positions(key)

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Every chunk whose metadata matches the portable filter, in index order."""
        flt = validate_filter(filter)
        pool = self._values.candidates(flt)
        positions = range(len(self.texts)) if pool is None else pool
        return [self.document(int(i)) for i in positions if flt is None or matches_canonical(self.metadatas[i], flt)]

    def chunks_of(self, doc_id: Any, start: int, end: int) -> list[Document]:
        """Chunks of `doc_id` with ``start <= chunk_index < end``, in chunk order (neighbour lookups)."""
        found = []
        for pos in self.value_positions("doc_id").get(doc_id, ()):
            ci = self.metadatas[pos].get("chunk_index")
            if isinstance(ci, int) and start <= ci < end:
                found.append((ci, int(pos)))
        return [self.document(pos) for _, pos in sorted(found)]

    def document(self, position: int, score: float | None = None) -> Document:
        """A copy of the chunk at `position`, with the score on its metadata when given."""
        metadata = dict(self.metadatas[position])
        if score is not None:
            metadata["score"] = score
            metadata["scores"] = {"bm25": score}
        return Document(page_content=self.texts[position], metadata=metadata, id=self.ids[position])

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> Path:
        """Write ``index.json`` and ``arrays.npz`` into `directory` (created if needed), each through an
        fsynced temporary file renamed into place (`rag.retrieval.bm25_files`)."""
        path = Path(directory)
        vocab = [""] * len(self._vocab)
        for term, t in self._vocab.items():
            vocab[t] = term
        meta = {"format": _FORMAT, "k1": self.k1, "b": self.b, "stem": self.stem, "stop_words": self.stop_words,
                "metadata_fields": list(self.metadata_fields), "vocab": vocab, "texts": self.texts,
                "metadatas": self.metadatas, "ids": self.ids}
        write_index_files(path, meta, {"ptr": self._ptr, "docs": self._docs, "weights": self._weights,
                                       "idf": self._idf})
        return path

    @classmethod
    def load(cls, directory: str | Path) -> BM25Index:
        """Load an index written by `save`; a damaged or inconsistent one is a `StoreError` naming the file
        (sizes and shapes are checked before anything is allocated: `rag.retrieval.bm25_files`)."""
        path = Path(directory)
        if not (path / "index.json").exists() or not (path / "arrays.npz").exists():
            raise StoreError(f"no BM25 index in {path}: expected index.json and arrays.npz (written by BM25Index.save)")
        meta = read_meta(path)
        if meta.get("format") != _FORMAT:
            raise StoreError(f"{path}/index.json has format {short_repr(meta.get('format'))}; this version reads "
                             f"{_FORMAT!r}")
        try:
            index = cls(k1=meta["k1"], b=meta["b"], stem=meta["stem"], stop_words=meta["stop_words"],
                        metadata_fields=[str(f) for f in meta["metadata_fields"]])
        except ConfigError as exc:
            raise StoreError(f"{path}/index.json: {exc}") from None
        arrays = read_arrays(path, meta)
        index.texts, index.metadatas, index.ids = meta["texts"], meta["metadatas"], meta["ids"]
        index._vocab = {term: t for t, term in enumerate(meta["vocab"])}
        if len(index._vocab) != len(meta["vocab"]):
            raise StoreError(f"{path}/index.json: the vocabulary repeats a term")
        index._ptr, index._docs = arrays["ptr"], arrays["docs"]
        index._weights, index._idf = arrays["weights"], arrays["idf"]
        index._token_lists = None
        return index


class BM25Retriever(PortableRetriever):
    """Retrieve chunks from a `BM25Index`; takes `k` and a portable `filter` per call (ANDed with `filter`).

    Example:
        >>> from langchain_core.documents import Document
        >>> r = BM25Retriever.from_documents([Document(page_content="net income rose")], k=2)
        >>> r.invoke("income")[0].metadata["scores"]["bm25"] > 0
        True
    """

    index: LexicalIndex

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The lexical index: it holds every chunk, readable by filter."""
        return self.index

    @classmethod
    def from_documents(cls, documents: Sequence[Document], *, k: int = 4, **index_settings: Any) -> BM25Retriever:
        """Index documents and wrap the index (settings as in `BM25Index`)."""
        return cls(index=BM25Index.from_documents(documents, **index_settings), k=k)

    def search_with_scores(self, query: str, *, k: int | None = None,
                           filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """Top-k documents with their BM25 scores (`k` and `filter` checked as in `invoke`)."""
        k, flt, _ = self._call_settings(k, filter, {})
        return self._search(query, k=k, filter=flt, run_manager=None)

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any) -> Scored:
        return self.index.search_documents(query, k=k, filter=filter)
