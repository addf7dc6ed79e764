"""`InStoreLexical`: what a lexical index kept in its chunks' own store has in common (pgvector, Qdrant, LanceDB,
Milvus).

Such an index lives with the chunks (`rag.stores.pg_lexical`: a column of the chunks' table;
`rag.stores.qdrant_lexical`: a sparse vector of the chunks' points), so a deleted chunk takes its
tokens with it and a rebuilt store writes them again; it reads chunks from the store, and a
chunk's tokens are its title, section and text tokenised by `rag.base.text.tokenize`. A subclass
writes the tokens of chunks already stored (`add`) and searches (`search`, `mentions`, `count`,
`ids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.text import tokenize
from rag.stores.fts_index import DEFAULT_FIELDS

__all__ = ["B", "K1", "InStoreLexical", "chunk_tokens"]

#: the BM25 parameters every engine index of rag ranks with (FTS5's `bm25()` and LanceDB's index have them built in;
#: pgvector's SQL, Qdrant's sparse weights and Milvus' BM25 index take them from here), so a question ranks the same
#: on each (pgvector with `BM25Index`'s k1 = 1.5 lost one question of FinanceBench's development row against the
#: embedded default)
K1, B = 1.2, 0.75


def chunk_tokens(text: str, metadata: dict[str, Any] | None = None,
                 fields: Sequence[str] = DEFAULT_FIELDS) -> list[str]:
    """The indexed tokens of a chunk: its metadata `fields` (title, section) first, then its text."""
    metadata = metadata or {}
    extra = " ".join(str(metadata[f]) for f in fields if metadata.get(f) is not None)
    return tokenize(f"{extra} {text}" if extra else text)


class InStoreLexical:
    """The part every lexical index kept in the chunks' own store shares (see the module docstring).

    Args:
        chunks: the `ChunkStore` of the chunks (its `get_by_ids` / `get_documents` answer reads).
        metadata_fields: metadata keys indexed with each chunk's text.
    """

    def __init__(self, chunks: Any, *, metadata_fields: Sequence[str] = DEFAULT_FIELDS) -> None:
        self.chunks, self.metadata_fields = chunks, tuple(metadata_fields)

    def tokens(self, text: str, metadata: dict[str, Any] | None = None) -> list[str]:
        """The indexed tokens of a chunk (its fields first)."""
        return chunk_tokens(text, metadata, self.metadata_fields)

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Write the tokens of chunks already stored (by id)."""
        raise NotImplementedError

    def delete(self, ids: Sequence[str]) -> None:
        """Nothing to do: a deleted chunk takes its tokens with it."""

    def clear(self) -> None:
        """Nothing to do: a rebuilt store's chunks are written again, with their tokens."""

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """The tokens follow the metadata (the title is indexed with the text)."""
        new = dict(zip(map(str, ids), metadatas, strict=True))
        found = self.chunks.get_by_ids(list(new))
        self.add([d.id for d in found], [d.page_content for d in found], [new[d.id] for d in found])

    def count(self) -> int:
        """How many chunks have their tokens written."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.count()

    def search(self, query: str, *, k: int = 4,
               filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        raise NotImplementedError

    def search_documents(self, query: str, *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """`search` (the name every lexical index of `rag.retrieval` answers to)."""
        return self.search(query, k=k, filter=filter)

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        return self.chunks.get_documents(filter)

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        return self.chunks.get_by_ids(ids)

    def close(self) -> None:
        """Nothing to close: the store holds the connections."""
