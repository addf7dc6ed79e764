"""`QdrantLexical`: a Qdrant knowledge base's lexical index in its own collection, as sparse BM25 vectors.

A collection that rag creates for a knowledge base (`rag.stores.qdrant.open_store(create=True)`)
has, beside its dense vectors, a sparse vector named `VECTOR` with Qdrant's IDF modifier. Each
point's sparse vector holds its chunk's tokens (title, section and text tokenised by
`rag.base.text.tokenize`, the tokens every lexical index of rag uses), each token's id a stable
32-bit hash of it and its value BM25's term-frequency part, ``tf * (k1 + 1) / (tf + k1 * (1 - b +
b * length / AVG_TOKENS))``. A query is the sparse vector of its distinct tokens, each valued 1;
Qdrant multiplies each by the term's inverse document frequency over the collection, ``ln(1 + (N -
n + 0.5) / (n + 0.5))``, kept by the engine itself as points change. So the score is Okapi BM25
(k1 = 1.2, b = 0.75) with one difference: the length of an average chunk is the constant
`AVG_TOKENS`, not the collection's mean. Two tokens whose hashes collide count as one term
(about one pair in a million for a vocabulary of 100,000 tokens).

Nothing is read whole and nothing is rebuilt after a change: the knowledge base writes the points
(`QdrantChunks`), then their sparse vectors (`LexicalChunks`, `rag.stores.lexical_chunks`); the
caller's filter is the dense search's Qdrant filter (`rag.stores.qdrant.translate`), in the same
query; every client of the collection, on any machine, searches the same index. A point whose
sparse vector was not written (a write cut short) is found by the count of points having one, and
the knowledge base writes it at its next search (`rag.indexing.lexical_sync`). A collection made
elsewhere, without `VECTOR`, cannot be given one (Qdrant adds no vector to an existing collection):
its knowledge base keeps an SQLite FTS5 index beside its records instead
(`rag.stores.lexical_chunks.lexical_beside`).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.stores.qdrant import QdrantChunks, open_store
    >>> chunks = QdrantChunks(open_store("notes", DeterministicFakeEmbedding(size=4), path=":memory:", create=True))
    >>> chunks.add(["a" * 32, "b" * 32], [[1.0, 0, 0, 0]] * 2, ["Paris is in France.", "Rome is in Italy."],
    ...            [{"doc_id": "d1"}, {"doc_id": "d2"}])
    >>> lexical = QdrantLexical(chunks)
    >>> lexical.add(["a" * 32, "b" * 32], ["Paris is in France.", "Rome is in Italy."], [{}, {}])
    >>> [d.page_content for d, _ in lexical.search("paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.filters import validate_filter
from rag.base.portable import check_k
from rag.base.text import tokenize
from rag.stores.fts_index import DEFAULT_FIELDS
from rag.stores.in_store_lexical import B, K1, InStoreLexical
from rag.stores.qdrant import LEXICAL_VECTOR, QdrantChunks, _document, translate

__all__ = ["AVG_TOKENS", "VECTOR", "QdrantLexical", "has_lexical_vector", "term_id"]

#: the sparse vector's name in a knowledge base's collection
VECTOR = LEXICAL_VECTOR
#: the chunk length (in tokens) BM25's length normalisation takes as average: about what rag's default chunker's
#: 200 word pieces leave after stop words, with a title and a section
AVG_TOKENS = 100.0
_BATCH = 256


def has_lexical_vector(store: Any) -> bool:
    """Whether the collection of the `QdrantVectorStore` `store` has `VECTOR`, with the IDF modifier."""
    from qdrant_client import models

    sparse = store.client.get_collection(store.collection_name).config.params.sparse_vectors or {}
    return VECTOR in sparse and sparse[VECTOR].modifier == models.Modifier.IDF


def term_id(token: str) -> int:
    """A token's index in the sparse vectors: the first 32 bits of its BLAKE2b hash (the same in every process)."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=4).digest(), "big")


def sparse_weights(tokens: Sequence[str]) -> dict[int, float]:
    """A chunk's sparse vector: term id -> BM25's term-frequency part (tokens whose ids collide count together)."""
    counts = Counter(term_id(t) for t in tokens)
    norm = K1 * (1 - B + B * len(tokens) / AVG_TOKENS)
    return {i: tf * (K1 + 1) / (tf + norm) for i, tf in counts.items()}


class QdrantLexical(InStoreLexical):
    """The lexical index of the `QdrantChunks` `chunks`, in its own collection (see the module docstring)."""

    def __init__(self, chunks: QdrantChunks, *, metadata_fields: Sequence[str] = DEFAULT_FIELDS) -> None:
        super().__init__(chunks, metadata_fields=metadata_fields)
        self.store = chunks.store
        #: how messages name it
        self.where = f"Qdrant sparse vectors ({self.store.collection_name}.{VECTOR})"

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Write the sparse vectors of points already written (by id)."""
        from qdrant_client import models

        rows = list(zip(ids, texts, metadatas, strict=True))
        for start in range(0, len(rows), _BATCH):
            points = []
            for id_, text, metadata in rows[start:start + _BATCH]:
                weights = sparse_weights(self.tokens(text, dict(metadata or {})))
                points.append(models.PointVectors(id=self.chunks.stored_id(str(id_)), vector={
                    VECTOR: models.SparseVector(indices=list(weights), values=list(weights.values()))}))
            self.store.client.update_vectors(self.store.collection_name, points=points, wait=True)

    # ------------------------------------------------------------------ reading
    def _having(self) -> Any:
        from qdrant_client import models

        return models.Filter(must=[models.HasVectorCondition(has_vector=VECTOR)])

    def count(self) -> int:
        """How many points have their sparse vector."""
        return int(self.store.client.count(self.store.collection_name, count_filter=self._having(), exact=True).count)

    def ids(self) -> list[str]:
        """The chunk ids of the points that have their sparse vector."""
        out, offset = [], None
        while True:
            points, offset = self.store.client.scroll(self.store.collection_name, scroll_filter=self._having(),
                                                      limit=1000, offset=offset, with_payload=False)
            out += [self.chunks._ours(Document(page_content="", id=str(p.id))).id for p in points]
            if offset is None:
                return out

    def _query(self, query: str) -> Any:
        from qdrant_client import models

        ids = sorted({term_id(t) for t in tokenize(query)})
        return models.SparseVector(indices=ids, values=[1.0] * len(ids)) if ids else None

    def search(self, query: str, *, k: int = 4,
               filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The top-`k` chunks for `query` among those the portable `filter` allows, BM25-scored, best first;
        ``metadata["scores"] == {"bm25": score}``."""
        k = check_k(k)
        canon = validate_filter(filter)
        sparse = self._query(query)
        if sparse is None:
            return []
        points = self.store.client.query_points(
            self.store.collection_name, query=sparse, using=VECTOR, limit=k, with_payload=True, with_vectors=False,
            query_filter=None if canon is None else translate(canon, self.store.metadata_payload_key)).points
        out = []
        for point in points:
            doc = self.chunks._ours(_document(self.store, point))
            score = float(point.score)
            doc.metadata.update(score=score, scores={"bm25": score})
            out.append((doc, score))
        return out

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word`."""
        sparse = self._query(word)
        if sparse is None:
            return Counter()
        key = self.store.metadata_payload_key
        points = self.store.client.query_points(
            self.store.collection_name, query=sparse, using=VECTOR, limit=max(self.count(), 1),
            with_payload=[f"{key}.doc_id"], with_vectors=False).points
        return Counter(((p.payload or {}).get(key) or {}).get("doc_id") for p in points)
