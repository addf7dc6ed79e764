"""`LexicalChunks`: a chunk store whose every write also goes to its engine's lexical index.

A knowledge base on the embedded default keeps its lexical index in SQLite FTS5
(`rag.stores.fts_index.FTSIndex`) beside the Chroma collection, and so does one on a Qdrant or
Milvus collection or a LanceDB table made elsewhere, beside its records (`lexical_beside`). Every
write of the library's one write path reaches the chunks through the knowledge base's `ChunkStore`;
this wrapper is that store: it writes the vectors first, then the same chunks' rows of the lexical
index (add, upsert, delete, metadata update, rebuild), and answers everything else from the store it
wraps. So the lexical index changes chunk by chunk with the vectors and is never rebuilt after a
change.

A write cut short between the two (a crash) leaves the index holding fewer or more chunks than
the store; the knowledge base compares the two counts when it opens its lexical index and fills it
again from the store once when they differ (`rag.indexing.lexical_sync`). That is also how the
chunks that parallel workers write straight into a server store (`rag.indexing.ray_executor`, a
store with a `connection_spec`) get their lexical rows: at the next search, read by id.

Example:
    >>> import tempfile, pathlib
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from rag.stores.fts_index import FTSIndex
    >>> from rag.stores.registry import chunks_of
    >>> lexical = FTSIndex(pathlib.Path(tempfile.mkdtemp()) / "lexical.sqlite")
    >>> chunks = LexicalChunks(chunks_of(InMemoryVectorStore(DeterministicFakeEmbedding(size=4))), lexical)
    >>> chunks.add(["a" * 32], [[1.0, 0.0, 0.0, 0.0]], ["Paris"], [{"doc_id": "d1", "chunk_index": 0}])
    >>> chunks.count(), lexical.count(), [d.page_content for d, _ in lexical.search("paris")]
    (1, 1, ['Paris'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.stores.fts_index import FTSIndex
from rag.stores.lance_lexical import LanceLexical, has_lexical_column
from rag.stores.lancedb import LanceChunks
from rag.stores.milvus import MilvusChunks
from rag.stores.milvus_lexical import MilvusLexical
from rag.stores.pg_lexical import PGLexical
from rag.stores.pgvector import PGVectorChunks, can_update_metadata
from rag.stores.qdrant import QdrantChunks
from rag.stores.qdrant_lexical import QdrantLexical, has_lexical_vector

__all__ = ["BESIDE", "LexicalChunks", "lexical_beside", "with_engine_lexical"]

#: backends whose knowledge bases keep their lexical index in SQLite FTS5 beside their records when the engine's
#: own cannot be used (a collection or table made elsewhere or by an earlier version; a Milvus engine without
#: BM25); FAISS and the in-memory stores keep the in-process index of one process
BESIDE = frozenset({"qdrant", "milvus", "lancedb"})


def with_engine_lexical(chunks: Any) -> Any:
    """`chunks` writing its engine's lexical index too, when its backend has one a knowledge base can use
    (pgvector with all metadata in its JSON column: `rag.stores.pg_lexical`; a Qdrant collection rag created, with
    its sparse BM25 vector: `rag.stores.qdrant_lexical`; a LanceDB table rag created, with its tokens' column:
    `rag.stores.lance_lexical`; a Milvus collection rag created, with its tokens and BM25 function:
    `rag.stores.milvus_lexical`); else `chunks` as it is."""
    if isinstance(chunks, PGVectorChunks) and can_update_metadata(chunks.store):
        return LexicalChunks(chunks, PGLexical(chunks))
    if isinstance(chunks, QdrantChunks) and has_lexical_vector(chunks.store):
        return LexicalChunks(chunks, QdrantLexical(chunks))
    if isinstance(chunks, LanceChunks) and has_lexical_column(chunks.store):
        return LexicalChunks(chunks, LanceLexical(chunks))
    if isinstance(chunks, MilvusChunks) and chunks.writes_tokens:
        return LexicalChunks(chunks, MilvusLexical(chunks))
    return chunks


def lexical_beside(chunks: Any, path: Any) -> Any:
    """`chunks` writing an SQLite FTS5 index in `path` too, when its backend is one of `BESIDE` and it has no
    engine lexical index of its own; else `chunks` as it is."""
    if isinstance(chunks, LexicalChunks) or getattr(chunks, "backend", None) not in BESIDE:
        return chunks
    return LexicalChunks(chunks, FTSIndex(path))


class LexicalChunks:
    """The `ChunkStore` `inner`, each write of which is also written to `lexical` (an `FTSIndex`)."""

    def __init__(self, inner: Any, lexical: Any) -> None:
        self.inner, self.lexical = inner, lexical

    def __getattr__(self, name: str) -> Any:   # reads, names, checks: the wrapped store's
        if name in ("inner", "lexical"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        self.inner.add(ids, vectors, texts, metadatas)
        self.lexical.add(ids, texts, metadatas)

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
        self.inner.upsert(ids, vectors, texts, metadatas)
        self.lexical.add(ids, texts, metadatas)

    def delete(self, ids: Sequence[str]) -> None:
        self.inner.delete(ids)
        self.lexical.delete(ids)

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        self.inner.update_metadatas(ids, metadatas)
        self.lexical.update_metadatas(ids, metadatas)

    def rebuild(self) -> None:
        self.inner.rebuild()
        self.lexical.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"
