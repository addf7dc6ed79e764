"""`QdrantSide`: a Qdrant knowledge base's manifest, records and writer lock, in a payload-only collection.

Beside the collection of its chunks (``docs``), a knowledge base on Qdrant keeps the rest of
itself in a collection without vectors, ``<collection>_rag_kb`` (`SIDE_SUFFIX`): one point per
entry of `rag.stores.kb_side` (the manifest, each document's record, a change stamp, the writer
lock), its id a UUID derived from the entry's key and its payload ``{key, kind, doc_id, value}``.
A server gets keyword payload indexes on ``kind`` and ``doc_id`` (local mode has none to make).

The writer lock's point is claimed with a compare-and-set (`QdrantCell`): an upsert with
``update_filter`` (replace it only when its heartbeat is stale; insert it when absent), a renewal
with ``update_mode=update_only`` and a filter on the holder, a delete by the same filter; each in
the shard leader's order (``ordering=strong``). See `rag.stores.lease_lock`. Local mode (one
process per folder) checks a condition and applies an update in two steps that threads can
interleave: there the cell's operations are also serialized by a lock of the process, per client.

Example:
    >>> from qdrant_client import QdrantClient
    >>> side = QdrantSide(QdrantClient(location=":memory:"), "docs")
    >>> side.get(["manifest"])
    {}
    >>> side.put([("manifest", "kb", "", '{"name": "docs"}')])
    >>> side.get(["manifest"]), side.name
    ({'manifest': '{"name": "docs"}'}, 'docs_rag_kb')
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["SIDE_SUFFIX", "QdrantCell", "QdrantSide"]

#: the side collection's name: the chunks' collection's, and this
SIDE_SUFFIX = "_rag_kb"
_NAMESPACE = uuid.UUID("5a0b2d8e-36c1-4c7e-9f25-0d1b6f3a9e42")
_BATCH = 256
LOCK_KEY = "lock"


def point_id(key: str) -> str:
    """The point id of an entry: a UUID derived from its key."""
    return str(uuid.uuid5(_NAMESPACE, key))


def _is_local(client: Any) -> bool:
    from qdrant_client.local.qdrant_local import QdrantLocal

    return isinstance(getattr(client, "_client", None), QdrantLocal)


class QdrantSide:
    """The side collection of the chunks' collection `collection`, through `client` (a `QdrantClient`)."""

    def __init__(self, client: Any, collection: str) -> None:
        self.client, self.name = client, f"{collection}{SIDE_SUFFIX}"
        #: how messages name the knowledge base
        self.where = f"Qdrant (collection {collection}, with {self.name})"
        self.cell = QdrantCell(self)
        self._ready = False

    def _exists(self) -> bool:
        if not self._ready:
            self._ready = bool(self.client.collection_exists(self.name))
        return self._ready

    def ensure(self) -> None:
        """Create the side collection when missing (payload only, no vectors)."""
        from qdrant_client import models

        if self._exists():
            return
        self.client.create_collection(self.name, vectors_config={})
        if not _is_local(self.client):
            for field in ("kind", "doc_id"):
                self.client.create_payload_index(self.name, field, models.PayloadSchemaType.KEYWORD)
        self._ready = True

    def _filter(self, **match: str) -> Any:
        from qdrant_client import models

        return models.Filter(must=[models.FieldCondition(key=k, match=models.MatchValue(value=v))
                                   for k, v in match.items()])

    @staticmethod
    def _entry(point: Any) -> tuple[str, str] | None:
        payload = point.payload or {}
        key, value = payload.get("key"), payload.get("value")
        return (key, value) if isinstance(key, str) and isinstance(value, str) else None

    # ------------------------------------------------------------------ entries
    def get(self, keys: Sequence[str]) -> dict[str, str]:
        """The values of the entries `keys` that exist."""
        if not keys or not self._exists():
            return {}
        wanted, out = set(keys), {}
        for start in range(0, len(keys), _BATCH):
            for point in self.client.retrieve(self.name, ids=[point_id(k) for k in keys[start:start + _BATCH]],
                                              with_payload=True, with_vectors=False):
                entry = self._entry(point)
                if entry is not None and entry[0] in wanted:
                    out[entry[0]] = entry[1]
        return out

    def put(self, entries: Sequence[tuple[str, str, str, str]]) -> None:
        """Write entries (key, kind, doc_id, value), replacing those with the same keys."""
        from qdrant_client import models

        self.ensure()
        for start in range(0, len(entries), _BATCH):
            points = [models.PointStruct(id=point_id(key), vector={},
                                         payload={"key": key, "kind": kind, "doc_id": doc_id, "value": value})
                      for key, kind, doc_id, value in entries[start:start + _BATCH]]
            self.client.upsert(self.name, points=points, wait=True)

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the entries `keys` (those that exist)."""
        from qdrant_client import models

        if keys and self._exists():
            for start in range(0, len(keys), _BATCH):
                self.client.delete(self.name, points_selector=models.PointIdsList(
                    points=[point_id(k) for k in keys[start:start + _BATCH]]), wait=True)

    def scan(self, kind: str, doc_id: str | None = None) -> Iterator[str]:
        """The values of every entry of `kind` (of `doc_id`, when given), read a page at a time."""
        if not self._exists():
            return
        flt = self._filter(kind=kind) if doc_id is None else self._filter(kind=kind, doc_id=doc_id)
        offset = None
        while True:
            points, offset = self.client.scroll(self.name, scroll_filter=flt, limit=1000, offset=offset,
                                                with_payload=True, with_vectors=False)
            for point in points:
                if (entry := self._entry(point)) is not None:
                    yield entry[1]
            if offset is None:
                return


_LOCAL_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCAL_LOCKS_LOCK = threading.Lock()


def _serialized(client: Any) -> Any:
    """A lock of this process for the cell operations on a local-mode `client`; a no-op context on a server."""
    if not _is_local(client):
        return contextlib.nullcontext()
    with _LOCAL_LOCKS_LOCK:
        return _LOCAL_LOCKS.setdefault(client._client, threading.Lock())


class QdrantCell:
    """The writer lock's point of a `QdrantSide`, claimed with a compare-and-set (`rag.stores.lease_lock`)."""

    exact = True

    def __init__(self, side: QdrantSide) -> None:
        self.side, self.id = side, point_id(LOCK_KEY)

    def holder(self) -> tuple[str, float] | None:
        if not self.side._exists():
            return None
        found = self.side.client.retrieve(self.side.name, ids=[self.id], with_payload=True, with_vectors=False)
        payload = (found[0].payload or {}) if found else {}
        owner, beat = payload.get("owner"), payload.get("beat")
        if not isinstance(owner, str) or not isinstance(beat, int | float):
            return None if not found else ("(unreadable)", 0.0)   # a damaged point: stale, taken over
        return owner, float(beat)

    def _write(self, owner: str, now: float, **conditions: Any) -> None:
        from qdrant_client import models

        self.side.ensure()
        point = models.PointStruct(id=self.id, vector={}, payload={"key": LOCK_KEY, "kind": "lock", "doc_id": "",
                                                                  "value": "", "owner": owner, "beat": now})
        with _serialized(self.side.client):
            self.side.client.upsert(self.side.name, points=[point], wait=True, ordering=models.WriteOrdering.STRONG,
                                    **conditions)

    def claim(self, owner: str, now: float, stale_before: float) -> None:
        from qdrant_client import models

        stale = models.Filter(should=[models.FieldCondition(key="beat", range=models.Range(lt=stale_before)),
                                      models.IsEmptyCondition(is_empty=models.PayloadField(key="beat"))])
        self._write(owner, now, update_filter=stale)

    def renew(self, owner: str, now: float) -> None:
        from qdrant_client import models

        self._write(owner, now, update_filter=self.side._filter(owner=owner), update_mode=models.UpdateMode.UPDATE_ONLY)

    def clear(self, owner: str) -> None:
        from qdrant_client import models

        if self.side._exists():
            held = models.Filter(must=[models.HasIdCondition(has_id=[self.id]), self.side._filter(owner=owner)])
            with _serialized(self.side.client):
                self.side.client.delete(self.side.name, points_selector=models.FilterSelector(filter=held),
                                        wait=True, ordering=models.WriteOrdering.STRONG)
