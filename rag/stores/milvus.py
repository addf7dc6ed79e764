"""Milvus access: the portable filter as a Milvus boolean expression, searched with the store's client.

`translate(canon, field)` writes a canonical filter (`rag.base.filters.validate_filter`) as a Milvus
expression on the JSON field that `langchain_milvus.Milvus(metadata_field="metadata")` keeps
metadata in (or on `$meta`, the dynamic field, for a store created with `enable_dynamic_field`).
Negations are pushed down first (`normal_form`), then:

    $eq $gt $gte $lt $lte      m["key"] == value, >, >=, <, <=
    $in                        (m["key"] == v1 or m["key"] == v2 ...)   (Milvus' `in` takes no JSON path)
    $ne / $nin                 (not exists m["key"] or not (m["key"] == v ...))   true on a missing key

**Injection-proof literals.** Keys and string values are written as double-quoted literals with
every backslash and double quote escaped (and newline, tab, carriage return as `\\n`, `\\t`, `\\r`),
so no value can close its literal and add to the expression; a string holding any other control
character raises `FilterError` (Milvus' lexer has no escape for it). Numbers are written with
`repr` (exact for floats), booleans as `true` / `false`.

**What differs (measured on Milvus Lite).** Milvus compares JSON booleans with numbers as 1 and 0
(`m["a"] == 1` matches `true`), where the Python matcher keeps them apart: keep one kind of value
per metadata key. Everything else, missing keys included, agrees with the Python matcher.

Example:
    >>> from rag.base.filters import validate_filter
    >>> translate(validate_filter({"topic": 'say "hi"', "year": {"$ne": 2024}}), "metadata")
    '(metadata["topic"] == "say \\\\"hi\\\\"" and (not exists metadata["year"] or not (metadata["year"] == 2024)))'
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import MissingDependencyError, StoreError
from rag.base.filters import Comparison, normal_form
from rag.stores.chunk_store import unsupported
from rag.stores.milvus_schema import SPARSE, TOKENS, create_collection, has_lexical_field, row_tokens
from rag.stores.vector_store_chunks import BATCH, VectorStoreChunks

__all__ = ["scratch_store", "STORE", "MilvusChunks", "get_by_ids", "literal", "open_store", "translate", "update_metadatas"]

BACKEND = "milvus"
_OPS = {"$eq": "==", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def literal(value: Any, op: str = "$eq") -> str:
    """A Milvus literal for a filter value: a quoted, escaped string, a number or a boolean.

    Raises:
        FilterError: a string with a control character Milvus cannot escape.

    Example:
        >>> print(literal('a"b\\\\c'), literal(2.5), literal(True))
        "a\\"b\\\\c" 2.5 true
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    bad = [c for c in value if (ord(c) < 32 or ord(c) == 127) and c not in _ESCAPES]
    if bad:
        raise unsupported(BACKEND, op, f"the string {value!r} holds the control character {bad[0]!r}, which a "
                                       "Milvus string literal cannot escape")
    return '"' + "".join(_ESCAPES.get(c, c) for c in value) + '"'


def translate(canon: dict[str, Any], field: str = "metadata") -> str:
    """The Milvus expression equivalent to the canonical portable filter `canon` on JSON field `field`."""
    return _node(normal_form(canon), field)


def _node(node: Any, field: str) -> str:
    if isinstance(node, Comparison):
        return _comparison(node, field)
    (op, parts), = node.items()
    return "(" + f" {op[1:]} ".join(_node(part, field) for part in parts) + ")"


def _comparison(cmp: Comparison, field: str) -> str:
    key = f"{field}[{literal(cmp.field, cmp.op)}]"
    if cmp.op in _OPS:
        return f"{key} {_OPS[cmp.op]} {literal(cmp.value, cmp.op)}"
    values = [cmp.value] if cmp.op == "$ne" else cmp.value
    either = " or ".join(f"{key} == {literal(v, cmp.op)}" for v in values)
    if cmp.op == "$in":
        return f"({either})"
    return f"(not exists {key} or not ({either}))"


def _json_field(store: Any) -> str:
    if store._metadata_field:
        return store._metadata_field
    if getattr(store, "enable_dynamic_field", False) or getattr(store, "_enable_dynamic_field", False):
        return "$meta"
    raise unsupported(BACKEND, "a filter", "the store keeps metadata in typed columns; create it with "
                                           "metadata_field='metadata' (a JSON field) or enable_dynamic_field=True")


def _metric(store: Any) -> str:
    params = store.index_params if isinstance(store.index_params, dict) else {}
    if params.get("metric_type"):
        return str(params["metric_type"]).upper()
    info = store.client.describe_index(store.collection_name, index_name=store._vector_field)
    return str(info.get("metric_type", "L2")).upper()


def _primary_key(hit: Any, field: str) -> Any:
    raw = dict(hit)   # a pymilvus Hit reads unknown keys from its entity
    return raw[field] if field in raw else raw.get("id")


class MilvusChunks(VectorStoreChunks):
    """The `ChunkStore` of `langchain_milvus.Milvus` (one dense vector field).

    In a collection rag created (`rag.stores.milvus_schema`), each chunk's tokens are written in the same insert
    as its vector, and a metadata update writes the tokens its new title and section make.
    """

    backend = BACKEND
    #: Milvus returns at most this many hits per search (its `topk` limit)
    max_k = 16_384
    _tokens: bool | None = None

    @property
    def writes_tokens(self) -> bool:
        """Whether the collection has rag's tokens and Milvus' BM25 (`rag.stores.milvus_schema.has_lexical_field`;
        known once the collection exists)."""
        if self._tokens is None:
            if self.store.col is None:
                return False   # (not made yet: langchain-milvus makes it at the first write, without them)
            self._tokens = has_lexical_field(self.store)
        return self._tokens

    def _write(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        if not self.writes_tokens:
            super()._write(ids, vectors, texts, metadatas)
            return
        store = self.store
        rows = [{store._primary_field: id_, store._text_field: text, store._vector_field: vector,
                 store._metadata_field: md, TOKENS: row_tokens(text, md)}
                for id_, vector, text, md in zip(ids, vectors, texts, metadatas, strict=True)]
        for start in range(0, len(rows), BATCH):
            store.client.insert(store.collection_name, data=rows[start:start + BATCH])

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` entities closest to `vector` among those `flt` allows: (document, relevance)."""
        store = self.store
        if store.col is None:
            return []
        field = _json_field(store)
        expr = "" if flt is None else translate(flt, field)
        outputs = [store._text_field] + ([store._metadata_field] if store._metadata_field else ["*"])
        hits = store.client.search(store.collection_name, data=[list(vector)], anns_field=store._vector_field,
                                   limit=k, filter=expr, output_fields=outputs)[0]
        metric = _metric(store)
        out = []
        for hit in hits:
            entity = dict(hit["entity"])
            text = entity.pop(store._text_field, "")
            metadata = entity.get(store._metadata_field) if store._metadata_field else entity
            metadata = {key: v for key, v in (metadata or {}).items() if key not in (store._vector_field,
                                                                                  store._primary_field)}
            score = hit["distance"] if metric in ("COSINE", "IP") else 1.0 - hit["distance"] / 2.0
            out.append((Document(page_content=text, metadata=metadata, id=str(_primary_key(hit, store._primary_field))), float(score)))
        return out

    def count(self) -> int:
        store = self.store
        if store.col is None:   # created on the first write
            return 0
        return int(store.client.query(collection_name=store.collection_name, filter="",
                                      output_fields=["count(*)"])[0]["count(*)"])

    def _read(self, ids: list[str]) -> list[Document]:
        return get_by_ids(self.store, ids)   # (LangChain's Milvus has no get_by_ids)

    def _update(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        update_metadatas(self.store, ids, metadatas, lexical=self.writes_tokens)


STORE = MilvusChunks


def get_by_ids(store: Any, ids: list[str]) -> list[Document]:
    """The entities with these ids (`langchain_milvus.Milvus` has no `get_by_ids`): a primary-key query."""
    if not ids or store.col is None:
        return []
    rows = store.client.query(store.collection_name, filter=f"{store._primary_field} in {json.dumps(ids)}",
                              output_fields=[store._primary_field, store._text_field, store._metadata_field])
    return [Document(page_content=row[store._text_field], metadata=dict(row[store._metadata_field] or {}),
                     id=str(row[store._primary_field])) for row in rows]


def update_metadatas(store: Any, ids: list[str], metadatas: list[dict[str, Any]], *, lexical: bool = False) -> None:
    """Replace the metadata of entities by id: each entity is read whole and upserted with the new metadata (and,
    with `lexical`, the tokens it makes: `rag.stores.milvus_schema`; the BM25 function writes their vector)."""
    if not ids or store.col is None:
        return
    rows = store.client.query(store.collection_name, filter=f"{store._primary_field} in {json.dumps(ids)}",
                              output_fields=["*"])
    new = dict(zip(ids, metadatas, strict=True))
    for row in rows:
        row[store._metadata_field] = new[row[store._primary_field]]
        row.pop(SPARSE, None)   # (a function's output is not written)
        if lexical:
            row[TOKENS] = row_tokens(row[store._text_field], row[store._metadata_field])
    store.client.upsert(store.collection_name, data=rows)


def open_store(collection: str, embedding: Any, *, uri: str, token: str | None = None,
               create: bool = False) -> Any:
    """A `langchain_milvus.Milvus` store on `collection` at `uri` (a Milvus Lite file or a server URL).

    Metadata goes to one JSON field (``metadata``), ids to a string primary key, vectors are compared
    by cosine: the layout `translate` filters on. With `create`, a missing collection is made now
    (the embedding's size), with the fields of Milvus' BM25 full-text search its knowledge base's
    lexical search uses (`rag.stores.milvus_schema`); an engine that refuses them gets the
    collection without them at the first write.

    Raises:
        StoreError: the collection is missing and not `create` (the message lists the existing ones).
    """
    try:
        from langchain_milvus import Milvus
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise MissingDependencyError.for_extra(exc.name or "langchain-milvus", "stores", "Milvus") from exc
    args = {"uri": uri, **({"token": token} if token else {})}
    client = MilvusClient(**args)
    existing = client.list_collections()
    if collection not in existing:
        if not create:
            raise StoreError(f"milvus: no collection {collection!r} at {uri}; existing: "
                             f"{', '.join(sorted(existing)) or '(none)'}; create: true makes an empty one")
        create_collection(client, collection, len(embedding.embed_query("dimension")))
    langchain_log = logging.getLogger("langchain_milvus.vectorstores.milvus")
    if _drop_layout_note not in langchain_log.filters:
        langchain_log.addFilter(_drop_layout_note)
    return _milvus_class(Milvus)(embedding, connection_args=args, collection_name=collection, metadata_field="metadata",
                                 index_params={"metric_type": "COSINE", "index_type": "FLAT"}, auto_id=False,
                                 primary_field="pk")


def _drop_layout_note(record: logging.LogRecord) -> bool:   # (a logging filter, installed once)
    """Drop langchain-milvus' note that `metadata_field` is deprecated: rag's stores keep metadata in that JSON
    field on purpose (the field `translate` filters on), so the note asks nothing of the user."""
    return "`metadata_field` is about to be deprecated" not in record.getMessage()


@functools.cache
def _milvus_class(base: type) -> type:
    """`langchain_milvus.Milvus` writing each row's `TOKENS` where its collection has them, so its own writes
    (`add_texts`, `add_documents`, `upsert`: a store used as a plain LangChain vector store) fill them too."""

    class RagMilvus(base):   # type: ignore[misc,valid-type]
        def _prepare_insert_list(self, texts: Any, embeddings: Any, metadatas: Any = None, ids: Any = None,
                                 force_ids: bool = False) -> list[dict]:
            rows = super()._prepare_insert_list(texts, embeddings, metadatas, ids, force_ids)
            if TOKENS in self.fields:
                for row in rows:
                    row[TOKENS] = row_tokens(row[self._text_field], row.get(self._metadata_field) or {})
            return rows

    return RagMilvus


def scratch_store(embedding: Any, workdir: Any, name: str, *, url: str | None = None) -> Any:
    """A new, empty collection in a Milvus Lite file under `workdir` (for tests and benchmarks)."""
    from pathlib import Path

    return open_store(name, embedding, uri=str(Path(workdir) / f"milvus-{name}.db"), create=True)
