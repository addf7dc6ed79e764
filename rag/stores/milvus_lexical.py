"""`MilvusLexical`: a Milvus knowledge base's lexical index in its own collection, as Milvus' BM25 full-text search.

A collection that rag creates for a knowledge base (`rag.stores.milvus.open_store(create=True)`)
has, beside the dense vector, a VARCHAR field of each chunk's tokens (rag's tokens, written so
Milvus' analyzer keeps each whole: `rag.stores.milvus_schema`), written in the same insert as the
vector, and Milvus' BM25 function deriving a sparse vector from it, under a BM25 index with k1 =
1.2, b = 0.75. A search is one Milvus search on that vector: the question's distinct tokens as its
text, the caller's filter as the search's boolean expression (the dense search's,
`rag.stores.milvus.translate`), applied by the engine before ranking. Nothing is read whole and
nothing is rebuilt after a change; every client of the collection, on any machine, searches the
same index, and a chunk is never written without its tokens (the field is required).

**Scores** are Okapi BM25 (idf ``ln(1 + (N - n + 0.5) / (n + 0.5))``, the mean length) over the
statistics Milvus keeps. Milvus Lite keeps them per segment (its own note: "each segment currently
uses its own IDF statistics"), and each process that writes leaves a segment when it closes the
file (four of a size are merged into one): in one segment the scores are Okapi's to float
precision; across segments each row is scored with its own segment's statistics (measured in
docs/stores.md). Milvus Lite also reports a BM25 score as a negative distance; the score is its
absolute value on every engine.

**Milvus Lite's memory table.** Lite scores the rows it has not yet written to a segment by
brute force at every search: 5,000 such rows made a search take 292 ms, 11 ms once flushed
(`bench/milvus_lexical.py`'s chunks, 2026-11-29). So on Lite (a ``.db`` file) a process that has
written `FLUSH_ROWS` rows since its last flush flushes them at the end of that write (0.17 s for
5,000 rows); a Milvus server seals its segments itself and is never asked to.

A collection made elsewhere or by an earlier version, without these fields, keeps an SQLite FTS5
index beside its knowledge base's records (`rag.stores.lexical_chunks.lexical_beside`).

Example:
    >>> import tempfile, pathlib
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.stores.milvus import MilvusChunks, open_store
    >>> store = open_store("notes", DeterministicFakeEmbedding(size=4), create=True,
    ...                    uri=str(pathlib.Path(tempfile.mkdtemp()) / "m.db"))
    >>> chunks = MilvusChunks(store)
    >>> chunks.add(["a" * 32, "b" * 32], [[1.0, 0, 0, 0]] * 2, ["Paris is in France.", "Rome is in Italy."],
    ...            [{"doc_id": "d1"}, {"doc_id": "d2"}])
    >>> [d.page_content for d, _ in MilvusLexical(chunks).search("paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.filters import validate_filter
from rag.base.portable import check_k
from rag.stores.in_store_lexical import InStoreLexical
from rag.stores.milvus import MilvusChunks, _json_field, _primary_key, translate
from rag.stores.milvus_schema import SPARSE, TOKENS, query_text

__all__ = ["FLUSH_ROWS", "MilvusLexical"]

#: rows a process writes to a Milvus Lite file before it flushes them into a segment (see the module docstring)
FLUSH_ROWS = 1_000


class MilvusLexical(InStoreLexical):
    """The lexical index of the `MilvusChunks` `chunks`, in its own collection (see the module docstring).

    The tokens are written by the store with each row; this class searches them.
    """

    def __init__(self, chunks: MilvusChunks) -> None:
        super().__init__(chunks)
        self.store = chunks.store
        #: how messages name it
        self.where = f"Milvus' BM25 full-text search ({self.store.collection_name}.{TOKENS})"
        uri = str((getattr(self.store, "_connection_args", None) or {}).get("uri", ""))
        #: a Milvus Lite file (flushed by its writers), not a server
        self.lite = uri.endswith(".db")
        self._unflushed = 0

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """The rows' tokens were written with them; on Milvus Lite, flush once `FLUSH_ROWS` wait."""
        self._written(len(ids))

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """The store wrote the new tokens with the new metadata (rows re-written: counted as `add`'s)."""
        self._written(len(ids))

    def _written(self, rows: int) -> None:
        self._unflushed += rows
        if self.lite and self._unflushed >= FLUSH_ROWS:
            self.store.client.flush(self.store.collection_name)
            self._unflushed = 0

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        """How many chunks have their tokens written: all of them (a row cannot be written without)."""
        return self.chunks.count()

    def ids(self) -> list[str]:
        """The ids of the chunks that have their tokens written (all)."""
        return self.chunks.get_ids({})

    def _hits(self, query: str, *, k: int, canon: dict[str, Any] | None, fields: list[str]) -> list[dict]:
        text = query_text(query)
        if not text or self.store.col is None:
            return []
        expr = "" if canon is None else translate(canon, _json_field(self.store))
        return self.store.client.search(self.store.collection_name, data=[text], anns_field=SPARSE,
                                        limit=min(k, MilvusChunks.max_k), filter=expr, output_fields=fields,
                                        search_params={"metric_type": "BM25"})[0]

    def search(self, query: str, *, k: int = 4,
               filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The top-`k` chunks for `query` among those the portable `filter` allows, BM25-scored, best first;
        ``metadata["scores"] == {"bm25": score}``."""
        k = check_k(k)
        canon = validate_filter(filter)
        store = self.store
        out = []
        for hit in self._hits(query, k=k, canon=canon, fields=[store._text_field, store._metadata_field]):
            entity = hit["entity"]
            score = abs(float(hit["distance"]))   # (Milvus Lite: the negated score)
            metadata = {**(entity.get(store._metadata_field) or {}), "score": score, "scores": {"bm25": score}}
            id_ = str(_primary_key(hit, store._primary_field))
            out.append((Document(page_content=entity[store._text_field], metadata=metadata, id=id_), score))
        return out

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word` (of the best 16,384: Milvus' most hits a search)."""
        field = self.store._metadata_field
        hits = self._hits(word, k=MilvusChunks.max_k, canon=None, fields=[field])
        return Counter((hit["entity"].get(field) or {}).get("doc_id") for hit in hits)
