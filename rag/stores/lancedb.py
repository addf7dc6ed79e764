"""`LanceStore`: an embedded LanceDB table as a vector store, with the portable filter as its SQL `where`.

LangChain has no LanceDB store with metadata filters (`langchain-lancedb` 0.1 keeps metadata as a
JSON string and takes no filter), and Lance's SQL JSON functions cannot test a value's kind, so
this store keeps, beside the exact metadata (a JSON column, returned as stored), one typed
column per metadata key and kind of value: ``md__<key in hex>__s`` (strings), ``__n`` (numbers,
as doubles) and ``__b`` (booleans). A key holding strings in some chunks and numbers in others
fills both; a missing key is NULL in all three. The portable filter then becomes a plain SQL
`where` on those columns, exact as the Python matcher:

    $eq / $in         COALESCE(md__..__s = 'x', false)   (the column of the value's kind; none: false)
    $gt ...           COALESCE(md__..__n > 2.5, false)
    $ne / $nin        NOT (the $eq / $in above)          (true on a missing key, as in Chroma)

String literals are single-quoted with quotes doubled, column names are hex: no value can become
SQL. Numbers compare as doubles, so an integer beyond +-2**53 in a filter raises `FilterError`.
A search is a LanceDB prefiltered, exact cosine search (`where(..., prefilter=True)`): the filter
selects the rows before they are ranked, so `k` matching chunks come back whenever `k` exist.

Example:
    >>> import tempfile
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> store = LanceStore(DeterministicFakeEmbedding(size=8), uri=tempfile.mkdtemp())
    >>> store.add_texts(["a", "b", "c"], metadatas=[{"n": 1}, {"n": "x"}, {}], ids=["p", "q", "r"])
    ['p', 'q', 'r']
    >>> sorted(d.id for d in store.similarity_search("a", k=5, filter={"n": {"$ne": 1}}))
    ['q', 'r']
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError, MissingDependencyError
from rag.base.filters import Comparison, normal_form, validate_filter
from rag.stores.chunk_store import unsupported
from rag.stores.in_store_lexical import chunk_tokens
from rag.stores.vector_store_chunks import VectorStoreChunks

__all__ = ["open_store", "scratch_store", "STORE", "TOKENS", "LanceChunks", "LanceStore", "where_clause"]

BACKEND = "lancedb"
#: the column of a lexical table holding each chunk's tokens (`rag.stores.lance_lexical`)
TOKENS = "rag_tokens"
_EXACT = 2**53
_ORDER = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_SQL_TYPES = {"s": "STRING", "n": "DOUBLE", "b": "BOOLEAN"}
_ALWAYS = timedelta(0)   # every read sees the latest version, also writes made through another handle


def _lancedb() -> Any:
    try:
        import lancedb
        import pyarrow
    except ImportError as exc:
        raise MissingDependencyError.for_extra(exc.name or "lancedb", "stores", "LanceStore") from exc
    return lancedb, pyarrow


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int | float):
        return "n"
    return "s" if isinstance(value, str) else None


def column(key: str, kind: str) -> str:
    """The typed column of metadata key `key` for values of `kind` ("s", "n" or "b")."""
    return f"md__{key.encode('utf-8').hex()}__{kind}"


def _literal(value: Any, op: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, int) and abs(value) > _EXACT:
        raise unsupported(BACKEND, op, f"{value} is beyond +-2**53, where LanceDB's double columns are inexact")
    return repr(float(value))


def where_clause(canon: dict[str, Any], columns: set[str]) -> str:
    """The SQL `where` for the canonical portable filter `canon` on a table with these columns."""
    return _node(normal_form(canon), columns)


def _node(node: Any, columns: set[str]) -> str:
    if isinstance(node, Comparison):
        return _comparison(node, columns)
    (op, parts), = node.items()
    return "(" + f" {op[1:].upper()} ".join(_node(part, columns) for part in parts) + ")"


def _comparison(cmp: Comparison, columns: set[str]) -> str:
    if cmp.op in _ORDER:
        name = column(cmp.field, "n")
        literal = _literal(cmp.value, cmp.op)
        return f"COALESCE({name} {_ORDER[cmp.op]} {literal}, false)" if name in columns else "false"
    values = [cmp.value] if cmp.op in ("$eq", "$ne") else cmp.value
    tests = []
    for value in values:
        name = column(cmp.field, _kind(value))
        literal = _literal(value, cmp.op)
        if name in columns:
            tests.append(f"COALESCE({name} = {literal}, false)")
    either = "(" + " OR ".join(tests) + ")" if tests else "false"
    return f"(NOT {either})" if cmp.op in ("$ne", "$nin") else either


class LanceStore(VectorStore):
    """A LanceDB table of chunks (id, text, vector, metadata, typed filter columns); see the module docstring.

    Args:
        embedding: embeds texts and queries.
        uri: the LanceDB database (a directory for embedded use, or a LanceDB URI).
        table: the table name.
    """

    def __init__(self, embedding: Embeddings, *, uri: str | Path, table: str = "chunks", lexical: bool = False) -> None:
        self._embedding = embedding
        self._uri = str(uri)
        self._name = table
        self._table: Any = None
        self._lexical = lexical

    @property
    def lexical(self) -> bool:
        """Whether each row holds its chunk's lexical tokens in `TOKENS` (`rag.stores.lance_lexical`): a table this
        store creates with `lexical=True`, or an existing table that has the column."""
        table = self.table()
        return self._lexical if table is None else TOKENS in table.schema.names

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def table_name(self) -> str:
        """The LanceDB table holding the chunks."""
        return self._name

    def table(self) -> Any:
        """The LanceDB table, opened on first use (None while nothing was added)."""
        if self._table is None:
            lancedb, _ = _lancedb()
            db = lancedb.connect(self._uri, read_consistency_interval=_ALWAYS)
            if self._name in db.table_names():
                self._table = db.open_table(self._name)
        return self._table

    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Embed and add texts; an id already stored is replaced."""
        texts = list(texts)
        return self.add_embeddings(texts, self._embedding.embed_documents(texts) if texts else [],
                                   metadatas=metadatas, ids=ids)

    def add_embeddings(self, texts: Sequence[str], vectors: Sequence[Sequence[float]], *,
                       metadatas: Sequence[dict] | None = None, ids: Sequence[str] | None = None) -> list[str]:
        """Add chunks whose vectors were computed elsewhere; an id already stored is replaced."""
        texts = list(texts)
        ids = [str(i) for i in ids] if ids is not None else [uuid.uuid4().hex for _ in texts]
        metadatas = [dict(m or {}) for m in metadatas] if metadatas is not None else [{} for _ in texts]
        vectors = list(vectors)
        if not len(ids) == len(metadatas) == len(texts) == len(vectors):
            raise ConfigError(f"{len(texts)} texts, {len(vectors)} vectors, {len(metadatas)} metadatas and "
                              f"{len(ids)} ids: give one each")
        if not texts:
            return []
        lexical = self.lexical
        rows = [_row(id_, text, vector, md, lexical) for id_, text, vector, md in zip(ids, texts, vectors, metadatas,
                                                                                       strict=True)]
        self._write(rows, len(rows[0]["vector"]))
        return ids

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id in one `merge_insert` (vectors and texts kept)."""
        table = self.table()
        if table is None or not ids:
            return
        new = dict(zip(ids, metadatas, strict=True))
        where = "id IN (" + ", ".join(_literal(str(i), "$in") for i in new) + ")"
        old = table.search().where(where).select(["id", "text", "vector"]).limit(len(new)).to_list()
        lexical = self.lexical   # (reads the table's schema: once, not per row)
        rows = [_row(r["id"], r["text"], r["vector"], new[r["id"]], lexical) for r in old]
        if not rows:
            return
        self._add_columns(table, rows)
        schema = table.schema
        lancedb, pa = _lancedb()
        (table.merge_insert("id").when_matched_update_all()
         .execute(pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema=schema)))

    def count(self) -> int:
        """How many chunks the table holds (0 before the first add)."""
        table = self.table()
        return 0 if table is None else int(table.count_rows())

    def _write(self, rows: list[dict[str, Any]], dimension: int) -> None:
        lancedb, pa = _lancedb()
        wanted = {name for row in rows for name in row if name.startswith("md__")}
        table = self.table()
        if table is None:
            fields = [pa.field("id", pa.string()), pa.field("text", pa.string()),
                      pa.field("vector", pa.list_(pa.float32(), dimension)), pa.field("metadata", pa.string())]
            fields += [pa.field(TOKENS, pa.string())] if self._lexical else []
            fields += [pa.field(name, _ARROW[name[-1]](pa)) for name in sorted(wanted)]
            self._table = table = lancedb.connect(self._uri, read_consistency_interval=_ALWAYS).create_table(self._name, schema=pa.schema(fields))
        else:
            self._add_columns(table, rows)
            self.delete([row["id"] for row in rows])
        schema = table.schema
        table.add(pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows],
                                       schema=schema))

    @staticmethod
    def _add_columns(table: Any, rows: list[dict[str, Any]]) -> None:
        """Add the typed filter columns that `rows` need and the table lacks (NULL in existing rows)."""
        missing = sorted({name for row in rows for name in row if name.startswith("md__")} - set(table.schema.names))
        if missing:
            table.add_columns({name: f"CAST(NULL AS {_SQL_TYPES[name[-1]]})" for name in missing})

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id (all of them when `ids` is None)."""
        table = self.table()
        if table is not None and (ids is None or ids):
            table.delete("true" if ids is None else "id IN (" + ", ".join(_literal(str(i), "$in") for i in ids) + ")")
        return True

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, *,
                   ids: list[str] | None = None, uri: str | Path = "lancedb", **kwargs: Any) -> LanceStore:
        """A store in `uri` holding `texts` (embedded now)."""
        store = cls(embedding, uri=uri, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The chunks with these ids (unknown ids are skipped)."""
        table = self.table()
        if table is None or not ids:
            return []
        where = "id IN (" + ", ".join(_literal(str(i), "$in") for i in ids) + ")"
        found = {row["id"]: row for row in table.search().where(where).select(["id", "text", "metadata"])
                 .limit(len(ids)).to_list()}
        return [_document(found[i]) for i in ids if i in found]

    def search_by_vector(self, vector: Sequence[float], *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The `k` chunks most similar to `vector` among those the filter allows: (document, cosine)."""
        flt = validate_filter(filter)
        table = self.table()
        if table is None:
            return []
        query = (table.search(list(vector)).distance_type("cosine")
                 .select(["id", "text", "metadata", "_distance"]).limit(k))
        if flt is not None:
            query = query.where(where_clause(flt, set(table.schema.names)), prefilter=True)
        return [(_document(row), 1.0 - float(row["_distance"])) for row in query.to_list()]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """(chunk, cosine similarity) pairs, best first; `filter` is a portable filter."""
        return self.search_by_vector(self._embedding.embed_query(query), k=k, filter=filter)

    def similarity_search(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                          **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k=k, filter=filter)]

    def _select_relevance_score_fn(self):
        return lambda score: score   # cosine similarities already


_ARROW = {"s": lambda pa: pa.string(), "n": lambda pa: pa.float64(), "b": lambda pa: pa.bool_()}


def _row(id_: str, text: str, vector: Sequence[float], md: dict[str, Any], lexical: bool = False) -> dict[str, Any]:
    """A table row: id, text, vector, the metadata as JSON, one typed filter column per key and, in a lexical
    table, the chunk's tokens joined by spaces."""
    row = {"id": id_, "text": text, "vector": [float(x) for x in vector], "metadata": json.dumps(md)}
    if lexical:
        row[TOKENS] = " ".join(chunk_tokens(text, md))
    # numbers are doubles in their filter column (an integer past 2**53 approximately; filters cannot
    # name such integers), exact in the JSON metadata
    row.update({column(key, _kind(v)): float(v) if _kind(v) == "n" else v for key, v in md.items()
                if _kind(v) is not None})
    return row


def _document(row: dict[str, Any]) -> Document:
    return Document(page_content=row["text"], metadata=json.loads(row["metadata"]), id=row["id"])


class LanceChunks(VectorStoreChunks):
    """The `ChunkStore` of a `LanceStore`."""

    backend = BACKEND

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` matching chunks closest to `vector`: (document, cosine similarity)."""
        return self.store.search_by_vector(vector, k=k, filter=flt)

    def count(self) -> int:
        return self.store.count()


STORE = LanceChunks


def open_store(table: str, embedding: Embeddings, *, uri: str | Path, create: bool = False) -> LanceStore:
    """The `LanceStore` table `table` at `uri` (a directory or e.g. s3://...); with `create` it may be new.

    Raises:
        ConfigError: the table is missing and not `create`.
    """
    store = LanceStore(embedding, uri=uri, table=table, lexical=create)   # (a new table gets its tokens' column)
    if store.table() is None and not create:
        raise ConfigError(f"no LanceDB table {store.table_name!r} in {uri}; create: true makes an empty one")
    return store


def scratch_store(embedding: Embeddings, workdir: str | Path, name: str, *, url: str | None = None) -> LanceStore:
    """A new, empty `LanceStore` table under `workdir` (for tests and benchmarks)."""
    return LanceStore(embedding, uri=Path(workdir) / "lance", table=name, lexical=True)
