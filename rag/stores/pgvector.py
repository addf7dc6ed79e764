"""Postgres + pgvector access: the portable filter as a SQL `WHERE` on a `PGVectorStore`'s table.

`langchain_postgres.PGVectorStore` keeps metadata in a JSON column (``langchain_metadata``) and,
optionally, in typed columns (`metadata_columns`). Its own dict filter casts the JSON text to the
type of the filter value, so a row holding another kind of value under that key (a string where a
number is filtered on) fails the whole query, the string ``"1"`` equals the number ``1``, and
``$ne`` is false on a missing key. This module therefore builds the `WHERE` itself, on ``jsonb``
values, and runs the same `ORDER BY embedding <op> query LIMIT k` the store runs:

    $eq             value = CAST(:p AS jsonb)           (jsonb equality: 1 = 1.0, "1" != 1, true != 1)
    $gt ...         jsonb_typeof(value) = 'number' AND value > CAST(:p AS jsonb)
    $in             one $eq per value, OR-ed
    $ne / $nin      NOT COALESCE($eq / $in, false)      (true on a missing key, as in Chroma)

A typed metadata column is read as `to_jsonb(column)`, so the same rules hold. Values and keys are
bound parameters (never spliced into the SQL); column and table names come from the store. Every
comparison is wrapped in `COALESCE(..., false)`, so a missing key is false and never NULL.

Results keep the row id as `Document.id` and the metadata as the store returns it; the score is the
store's relevance (cosine similarity, ``1 - distance``, in the default cosine strategy).

Example:
    >>> from rag.base.filters import validate_filter
    >>> sql, params = where_clause(validate_filter({"year": {"$gt": 2020}}), json_column="langchain_metadata")
    >>> print(sql)
    COALESCE((jsonb_typeof(CAST("langchain_metadata" -> :k0 AS jsonb)) = 'number' AND CAST("langchain_metadata" -> :k0 AS jsonb) > CAST(:v1 AS jsonb)), false)
    >>> params
    {'k0': 'year', 'v1': '2020'}
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, MissingDependencyError, StoreError, short_repr
from rag.base.filters import Comparison, normal_form
from rag.stores import pg_ann, pg_engines
from rag.stores.chunk_store import Capability, unsupported
from rag.stores.vector_store_chunks import BATCH, VectorStoreChunks

__all__ = ["scratch_store", "STORE", "PGVectorChunks", "can_update_metadata", "connection_of", "count_rows", "open_store", "table_of", "update_metadatas", "where_clause"]

BACKEND = "pgvector"
_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_ORDER = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _ident(name: str) -> str:
    """A quoted SQL identifier (the store's own column and table names)."""
    return '"' + name.replace('"', '""') + '"'


class _Where:
    """Builds one WHERE clause and its bound parameters."""

    def __init__(self, json_column: str | None, columns: tuple[str, ...]) -> None:
        self.json_column, self.columns, self.params = json_column, columns, {}

    def bind(self, prefix: str, value: Any) -> str:
        name = f"{prefix}{len(self.params)}"
        self.params[name] = value
        return f":{name}"

    def value(self, field: str, op: str) -> str:
        if field in self.columns:
            return f"to_jsonb({_ident(field)})"
        if self.json_column is None:
            raise unsupported(BACKEND, op, f"the field {field!r} is not a metadata column and the store keeps "
                                           "no JSON metadata column")
        # only the value is converted to jsonb, not the whole document (a JSON column is text inside)
        return f"CAST({_ident(self.json_column)} -> {self.bind('k', field)} AS jsonb)"

    def node(self, node: Any) -> str:
        if isinstance(node, Comparison):
            return self.comparison(node)
        (op, parts), = node.items()
        return "(" + f" {op[1:].upper()} ".join(self.node(part) for part in parts) + ")"

    def comparison(self, cmp: Comparison) -> str:
        value = self.value(cmp.field, cmp.op)
        if cmp.op in ("$eq", "$ne"):
            test = self.equal(value, cmp.value)
        elif cmp.op in ("$in", "$nin"):
            test = "(" + " OR ".join(self.equal(value, v) for v in cmp.value) + ")"
        else:
            test = (f"(jsonb_typeof({value}) = 'number' AND {value} {_ORDER[cmp.op]} "
                    f"CAST({self.bind('v', json.dumps(cmp.value))} AS jsonb))")
        test = f"COALESCE({test}, false)"
        return f"(NOT {test})" if cmp.op in ("$ne", "$nin") else test

    def equal(self, value: str, operand: Any) -> str:
        return f"{value} = CAST({self.bind('v', json.dumps(operand))} AS jsonb)"


def where_clause(canon: dict[str, Any], *, json_column: str | None = "langchain_metadata",
                 metadata_columns: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """The SQL condition for the canonical portable filter `canon`, and its parameters.

    Raises:
        FilterError: a field the store keeps nowhere (no JSON column and not a metadata column).
    """
    where = _Where(json_column, tuple(metadata_columns))
    return where.node(normal_form(canon)), where.params


def _query(vs: Any, vector: list[float], k: int, flt: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    columns = [vs.id_column, vs.content_column, *vs.metadata_columns]
    if vs.metadata_json_column:
        columns.append(vs.metadata_json_column)
    where, params = ("", {}) if flt is None else where_clause(
        flt, json_column=vs.metadata_json_column, metadata_columns=tuple(vs.metadata_columns))
    strategy = vs.distance_strategy
    embedding = _ident(vs.embedding_column)
    sql = (f"SELECT {', '.join(_ident(c) for c in columns)}, "
           f"{strategy.search_function}({embedding}, CAST(:query_vector AS vector)) AS distance "
           f"FROM {_ident(vs.schema_name)}.{_ident(vs.table_name)} {'WHERE ' + where if where else ''} "
           f"ORDER BY {embedding} {strategy.operator} CAST(:query_vector AS vector) LIMIT :limit_k")
    return sql, {**params, "query_vector": str([float(x) for x in vector]), "limit_k": k}


async def _rows(vs: Any, sql: str, params: dict[str, Any], settings: Sequence[tuple[str, str]] = ()) -> list[Any]:
    """The rows of `sql`, run after `settings` (name, value) made for its transaction only (one statement)."""
    from sqlalchemy import text

    async with vs.engine.connect() as conn:
        if settings:
            calls = ", ".join(f"set_config(:name{i}, :value{i}, true)" for i in range(len(settings)))
            bound = {f"{part}{i}": item for i, (name, value) in enumerate(settings)
                     for part, item in (("name", name), ("value", value))}
            await conn.execute(text(f"SELECT {calls}"), bound)
        result = await conn.execute(text(sql), params)
        return list(result.mappings().fetchall())


async def _in_one_transaction(vs: Any, statements: list[str]) -> None:
    """Run `statements` (no parameters) in one transaction on the store's engine, and commit."""
    from sqlalchemy import text

    async with vs.engine.connect() as conn:
        for sql in statements:
            await conn.execute(text(sql))
        await conn.commit()


def _documents(store: Any, vs: Any, rows: list[Any]) -> list[tuple[Document, float]]:
    relevance = store._select_relevance_score_fn()
    out = []
    for row in rows:
        metadata = dict(row[vs.metadata_json_column] or {}) if vs.metadata_json_column else {}
        metadata.update({column: row[column] for column in vs.metadata_columns})
        out.append((Document(page_content=row[vs.content_column], metadata=metadata, id=str(row[vs.id_column])),
                    float(relevance(row["distance"]))))
    return out


def _inner(store: Any) -> Any:
    # PGVectorStore wraps an AsyncPGVectorStore (table, columns, engine) and exposes no accessor
    return store._PGVectorStore__vs


class PGVectorChunks(VectorStoreChunks):
    """The `ChunkStore` of `langchain_postgres.PGVectorStore`: its table, queried with `where_clause`."""

    backend = BACKEND
    uuid_ids = True
    #: async search, worker connections, metadata updated in place; a table with typed metadata columns cannot
    #: update in place, and its store leaves `update_metadata` out (`__init__`)
    capabilities = frozenset({Capability.ASYNC_SEARCH, Capability.WORKER_CONNECTION, Capability.UPDATE_METADATA,
                              Capability.STORED_VECTORS})

    def __init__(self, store: Any, **options: Any) -> None:
        super().__init__(store, **options)
        self._version: tuple[int, ...] | None = None
        if not can_update_metadata(store):
            self.capabilities = type(self).capabilities - {Capability.UPDATE_METADATA}

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` rows closest to `vector` among those `flt` allows: (document, relevance); through the table's
        HNSW index where it has one (`rag.stores.pg_ann`: its settings are made for this search)."""
        vs = _inner(self.store)
        sql, params = _query(vs, vector, k, flt)
        settings = pg_ann.search_settings(self._pgvector(), k)
        return _documents(self.store, vs, self.store._engine._run_as_sync(_rows(vs, sql, params, settings)))

    async def _anative_search(self, vector: list[float], *, k: int,
                              flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """Async search, on the store's own event loop (as `PGVectorStore`'s async methods run)."""
        vs = _inner(self.store)
        sql, params = _query(vs, vector, k, flt)
        settings = pg_ann.search_settings(self._pgvector(), k)
        return _documents(self.store, vs, await self.store._engine._run_as_async(_rows(vs, sql, params, settings)))

    def _pgvector(self) -> tuple[int, ...]:
        """The database's pgvector version (asked once)."""
        if self._version is None:
            vs = _inner(self.store)
            found = self.store._engine._run_as_sync(_rows(
                vs, "SELECT extversion FROM pg_extension WHERE extname = 'vector'", {}))
            self._version = pg_ann.version(found[0]["extversion"] if found else None)
        return self._version

    def count(self) -> int:
        return count_rows(self.store)


    def _update(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        update_metadatas(self.store, ids, metadatas)

    def _write(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        """The rows `PGVectorStore.add_embeddings` writes (the same columns, values and upsert), but a batch in one
        statement and one transaction: it writes and commits each row on its own (36 rows/s at load 20,
        bench/pg_lexical_write.py). A table whose store computes a `tsvector` itself is left to the store."""
        vs = _inner(self.store)
        config = getattr(vs, "hybrid_search_config", None)
        if config is not None and getattr(config, "tsv_column", None):
            super()._write(ids, vectors, texts, metadatas)
            return
        sql = _insert_sql(vs)
        rows = [_insert_row(vs, id_, text, vector, md) for id_, text, vector, md in zip(ids, texts, vectors, metadatas,
                                                                                         strict=True)]
        for start in range(0, len(rows), BATCH):
            self.store._engine._run_as_sync(_execute(vs, sql, rows[start:start + BATCH]))

    def get_vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors by id (ids not stored are absent), read from the table in batches."""
        vs, found = _inner(self.store), {}
        sql = (f"SELECT CAST({_ident(vs.id_column)} AS text) AS id, CAST({_ident(vs.embedding_column)} AS text) AS v "
               f"FROM {_ident(vs.schema_name)}.{_ident(vs.table_name)} "
               f"WHERE CAST({_ident(vs.id_column)} AS text) = ANY(:ids)")
        ids = list(ids)
        for start in range(0, len(ids), BATCH):
            given = {form: i for i in ids[start:start + BATCH] for form in (i, _uuid_form(i))}
            for row in self.store._engine._run_as_sync(_rows(vs, sql, {"ids": list(given)})):
                if row["id"] in given:
                    found[given[row["id"]]] = [float(x) for x in json.loads(row["v"])]
        return found

    def upsert(self, ids: Any, vectors: Any, texts: Any, metadatas: Any) -> None:
        self.add(ids, vectors, texts, metadatas)   # PGVectorStore's insert is ON CONFLICT (id) DO UPDATE

    @property
    def name(self) -> str:
        return table_of(self.store)

    def connection_spec(self) -> dict[str, Any]:
        return {"backend": BACKEND, **connection_of(self.store)}

    @classmethod
    def from_connection(cls, spec: dict[str, Any], embedding: Any) -> PGVectorChunks:
        """The table a `connection_spec` names, opened in this process (it must exist)."""
        return cls(open_store(spec["url"], spec["table"], embedding, schema=spec["schema"]))


STORE = PGVectorChunks


def _uuid_form(id_: str) -> str:
    """A 32-hex chunk id as the table's UUID column holds it, as text (other ids as they are)."""
    try:
        return str(uuid.UUID(hex=id_)) if len(id_) == 32 else id_
    except ValueError:
        return id_


def _insert_sql(vs: Any) -> str:
    """The upsert `_insert_row`'s rows fill: id, text, vector, the typed metadata columns, the JSON column."""
    columns = [vs.id_column, vs.content_column, vs.embedding_column, *vs.metadata_columns]
    columns += [vs.metadata_json_column] if vs.metadata_json_column else []
    names = ", ".join(_ident(c) for c in columns)
    values = ", ".join(f":c{i}" for i in range(len(columns)))
    updates = ", ".join(f"{_ident(c)} = EXCLUDED.{_ident(c)}" for c in columns[1:])
    return (f"INSERT INTO {_ident(vs.schema_name)}.{_ident(vs.table_name)} ({names}) VALUES ({values}) "
            f"ON CONFLICT ({_ident(vs.id_column)}) DO UPDATE SET {updates}")


def _insert_row(vs: Any, id_: str, text: str, vector: list[float], metadata: dict[str, Any]) -> dict[str, Any]:
    """One row's parameters, as `PGVectorStore` writes them (a dict in a typed column as JSON, the rest of the
    metadata in the JSON column)."""
    row: dict[str, Any] = {"c0": id_, "c1": text, "c2": str([float(x) for x in vector])}
    extra = dict(metadata)
    for i, column in enumerate(vs.metadata_columns, start=3):
        value = extra.pop(column, None)
        row[f"c{i}"] = json.dumps(value) if isinstance(value, dict) else value
    if vs.metadata_json_column:
        row[f"c{3 + len(vs.metadata_columns)}"] = json.dumps(extra)
    return row


async def _execute(vs: Any, sql: str, rows: list[dict[str, Any]]) -> None:
    from sqlalchemy import text

    async with vs.engine.connect() as conn:
        await conn.execute(text(sql), rows)
        await conn.commit()


def can_update_metadata(store: Any) -> bool:
    """Whether `update_metadatas` can rewrite this store's metadata: all of it in the JSON column."""
    vs = _inner(store)
    return bool(vs.metadata_json_column) and not vs.metadata_columns


def update_metadatas(store: Any, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
    """Replace the metadata of rows by id, in one transaction (vectors and texts are kept)."""
    vs = _inner(store)
    sql = (f"UPDATE {_ident(vs.schema_name)}.{_ident(vs.table_name)} SET {_ident(vs.metadata_json_column)} = "
           f"CAST(:metadata AS json) WHERE {_ident(vs.id_column)} = :id")
    rows = [{"id": id_, "metadata": json.dumps(md)} for id_, md in zip(ids, metadatas, strict=True)]
    if rows:
        store._engine._run_as_sync(_execute(vs, sql, rows))


def table_of(store: Any) -> str:
    """The store's table as ``schema.table``."""
    vs = _inner(store)
    return f"{vs.schema_name}.{vs.table_name}"


def count_rows(store: Any) -> int:
    """How many rows the store's table holds."""
    vs = _inner(store)
    sql = f"SELECT count(*) AS n FROM {_ident(vs.schema_name)}.{_ident(vs.table_name)}"
    return int(store._engine._run_as_sync(_rows(vs, sql, {}))[0]["n"])


def open_store(url: str, table: str, embedding: Any, *, schema: str = "public", create: bool = False,
               vector_index: str = "hnsw") -> Any:
    """A `PGVectorStore` on `table` of the database at `url` (SQLAlchemy URL, e.g. ``postgresql+psycopg://...``).

    With `create`, a missing table is created (JSON metadata, UUID ids, vectors of the embedding's size) with
    an HNSW index on its vectors (`rag.stores.pg_ann`; `vector_index="none"` leaves it out, for a bulk load that
    creates it afterwards); an existing one is opened as it is.

    Raises:
        StoreError: the database cannot be reached, or the table is missing and not `create`.
    """
    if vector_index not in ("hnsw", "none"):
        raise ConfigError(f"pgvector: vector_index must be 'hnsw' or 'none', got {short_repr(vector_index)}")
    for what, name in (("table", table), ("schema", schema)):   # quoted into SQL by the client: names only
        if not isinstance(name, str) or not _SQL_NAME.fullmatch(name):
            raise ConfigError(f"pgvector: {short_repr(name)} is not a {what} name: use 1-63 letters, digits and "
                              "'_', not starting with a digit")
    scheme = url.split("://", 1)[0] if isinstance(url, str) and "://" in url else ""
    if not scheme.startswith("postgresql"):   # (the URL itself may hold a password: never quoted)
        raise ConfigError(f"pgvector needs a PostgreSQL URL (postgresql+psycopg://HOST:PORT/DB, with the user and password); "
                          f"got {'scheme ' + short_repr(scheme) if scheme else 'no scheme'}")
    try:
        from langchain_postgres import PGVectorStore
    except ImportError as exc:
        raise MissingDependencyError.for_extra("langchain-postgres", "stores", "pgvector") from exc
    engine = pg_engines.engine_for(url)
    try:
        return PGVectorStore.create_sync(engine=engine, table_name=table, schema_name=schema,
                                         embedding_service=embedding)
    except Exception as exc:
        if not create:
            raise StoreError(f"pgvector: cannot open the table {schema}.{table}: {_first_line(exc)}; create it "
                             "with create: true (or PGEngine.init_vectorstore_table)") from exc
    try:   # `create`: the table is missing (an existing one is opened above, never overwritten)
        engine.init_vectorstore_table(table, len(embedding.embed_query("dimension")), schema_name=schema,
                                      overwrite_existing=False)
        store = PGVectorStore.create_sync(engine=engine, table_name=table, schema_name=schema,
                                          embedding_service=embedding)
        if vector_index == "hnsw":
            vs = _inner(store)   # its HNSW index (rag.stores.pg_ann)
            engine._run_as_sync(_in_one_transaction(vs, [pg_ann.create_index_sql(vs)]))
        return store
    except Exception as exc:
        raise StoreError(f"pgvector: cannot create the table {schema}.{table}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    """A client error's type and first line (psycopg appends the SQL and its parameters: chunk text)."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


def connection_of(store: Any) -> dict[str, str]:
    """What another process needs to open the same table: the URL (with its password), schema and table."""
    vs = _inner(store)
    return {"url": vs.engine.url.render_as_string(hide_password=False), "schema": vs.schema_name,
            "table": vs.table_name}


def scratch_store(embedding: Any, workdir: Any, name: str, *, url: str | None = None) -> Any:
    """A new, empty table `name` in the database at `url` (`rag.testing.pg_server`; for tests and benchmarks)."""
    if url is None:
        raise ValueError("the pgvector backend needs a database url (rag.testing.pg_server.pg_server)")
    return open_store(url, name, embedding, create=True)
