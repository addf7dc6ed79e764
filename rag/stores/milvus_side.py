"""`MilvusSide`: a Milvus knowledge base's manifest, records and writer lock, in a collection of their own.

Beside the collection of its chunks (``docs``), a knowledge base on Milvus keeps the rest of itself
in ``<collection>_rag_kb`` (`SIDE_SUFFIX`), made with strong consistency (a read sees every write
before it, from any client). Milvus wants a vector field in every collection: this one has a 2-d
vector of zeros, never searched. Each entry of `rag.stores.kb_side` (the manifest, each document's
record, a change stamp, the writer lock) is one or more rows: its value is written as ASCII JSON and
cut into parts of at most `PART_CHARS` characters (a VARCHAR holds 65,535 bytes; a document of
thousands of chunks lists more ids than that), the rows ``grp`` (a hash of the key), ``part``,
``parts`` and ``value``, with ``kind`` and ``doc`` (a hash of the document id) to find records by.
Literals in expressions are hex digests and fixed words, never text from a document.

Milvus has no conditional write, so the writer lock is Fischer's timed mutual exclusion
(`MilvusCell`, ``exact = False``; what that guarantees is in `rag.stores.lease_lock`).

Example:
    >>> import tempfile
    >>> from pymilvus import MilvusClient
    >>> side = MilvusSide(MilvusClient(uri=tempfile.mkdtemp() + "/kb.db"), "docs")
    >>> side.put([("manifest", "kb", "", "x" * 70_000)])
    >>> len(side.get(["manifest"])["manifest"]), side.name
    (70000, 'docs_rag_kb')
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["PART_CHARS", "SIDE_SUFFIX", "MilvusCell", "MilvusSide"]

SIDE_SUFFIX = "_rag_kb"
#: the longest piece of a value one row holds
PART_CHARS = 60_000
_BATCH = 64
LOCK_KEY = "lock"
_FIELDS = ["grp", "part", "parts", "value"]
#: the most rows one Milvus query returns
_WINDOW = 16_384


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _listed(values: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"   # (hex digests only)


class MilvusSide:
    """The side collection of the chunks' collection `collection`, through `client` (a `MilvusClient`)."""

    def __init__(self, client: Any, collection: str) -> None:
        self.client, self.name = client, f"{collection}{SIDE_SUFFIX}"
        #: how messages name the knowledge base
        self.where = f"Milvus (collection {collection}, with {self.name})"
        self.cell = MilvusCell(self)
        self._ready = False

    def _exists(self) -> bool:
        if not self._ready and self.client.has_collection(self.name):
            self.client.load_collection(self.name)   # (a collection reopened is released until loaded)
            self._ready = True
        return self._ready

    def ensure(self) -> None:
        """Create the side collection when missing."""
        from pymilvus import DataType, MilvusClient

        if self._exists():
            return
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("pk", DataType.VARCHAR, is_primary=True, max_length=64)
        for name, length in (("grp", 40), ("kind", 16), ("doc", 40)):
            schema.add_field(name, DataType.VARCHAR, max_length=length)
        schema.add_field("part", DataType.INT64)
        schema.add_field("parts", DataType.INT64)
        schema.add_field("value", DataType.VARCHAR, max_length=65_535)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
        index = self.client.prepare_index_params()
        index.add_index("vec", index_type="FLAT", metric_type="L2")
        self.client.create_collection(self.name, schema=schema, index_params=index, consistency_level="Strong")
        self._exists()

    def _rows(self, expr: str) -> list[dict[str, Any]]:
        return list(self.client.query(self.name, filter=expr, output_fields=_FIELDS))

    @staticmethod
    def _values(rows: list[dict[str, Any]]) -> dict[str, str]:
        """grp -> value, for the groups whose parts are all there and whose value reads back as text."""
        groups: dict[str, dict[int, str]] = {}
        sizes: dict[str, int] = {}
        for row in rows:
            groups.setdefault(row["grp"], {})[int(row["part"])] = row["value"]
            if int(row["part"]) == 0:
                sizes[row["grp"]] = int(row["parts"])
        out = {}
        for grp, parts in groups.items():
            n = sizes.get(grp, -1)
            if n < 1 or any(i not in parts for i in range(n)):
                continue   # a write cut short: the entry is missing, as if never written
            try:
                value = json.loads("".join(parts[i] for i in range(n)))
            except ValueError:
                continue
            if isinstance(value, str):
                out[grp] = value
        return out

    # ------------------------------------------------------------------ entries
    def get(self, keys: Sequence[str]) -> dict[str, str]:
        """The values of the entries `keys` that exist."""
        if not keys or not self._exists():
            return {}
        by_hash, out = {_hash(k): k for k in keys}, {}
        hashes = list(by_hash)
        for start in range(0, len(hashes), _BATCH):
            found = self._values(self._rows(f"grp in {_listed(hashes[start:start + _BATCH])}"))
            out.update({by_hash[grp]: value for grp, value in found.items()})
        return out

    def put(self, entries: Sequence[tuple[str, str, str, str]]) -> None:
        """Write entries (key, kind, doc_id, value), replacing those with the same keys."""
        self.ensure()
        rows, shorter = [], {}
        for key, kind, doc_id, value in entries:
            text, grp = json.dumps(value), _hash(key)
            pieces = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)]
            rows += [{"pk": f"{grp}:{i}", "grp": grp, "kind": kind, "doc": _hash(doc_id), "part": i,
                      "parts": len(pieces), "value": piece, "vec": [0.0, 0.0]} for i, piece in enumerate(pieces)]
            shorter.setdefault(len(pieces), []).append(grp)
        for start in range(0, len(rows), _BATCH):
            self.client.upsert(self.name, data=rows[start:start + _BATCH])
        for n, grps in shorter.items():   # the parts a longer value of the same key left behind
            for start in range(0, len(grps), _BATCH):
                self.client.delete(self.name, filter=f"grp in {_listed(grps[start:start + _BATCH])} and part >= {n}")

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the entries `keys` (those that exist)."""
        if keys and self._exists():
            hashes = [_hash(k) for k in keys]
            for start in range(0, len(hashes), _BATCH):
                self.client.delete(self.name, filter=f"grp in {_listed(hashes[start:start + _BATCH])}")

    def scan(self, kind: str, doc_id: str | None = None) -> Iterator[str]:
        """The values of every entry of `kind` (of `doc_id`, when given)."""
        if not self._exists():
            return
        if not kind.isalpha():
            raise ValueError(f"an entry kind is a word, got {kind!r}")
        expr = f'kind == "{kind}"' + ("" if doc_id is None else f' and doc == "{_hash(doc_id)}"')
        rows = list(self.client.query(self.name, filter=expr, limit=_WINDOW, output_fields=_FIELDS))
        if len(rows) >= _WINDOW:   # more than one query may return: page through them all
            iterator = self.client.query_iterator(self.name, batch_size=1000, filter=expr, output_fields=_FIELDS)
            rows = []
            try:
                while batch := iterator.next():
                    rows += batch
            finally:
                iterator.close()
        yield from self._values(rows).values()


class MilvusCell:
    """The writer lock's row of a `MilvusSide`: a blind write checked after a wait (`rag.stores.lease_lock`)."""

    exact = False

    def __init__(self, side: MilvusSide) -> None:
        self.side = side

    def holder(self) -> tuple[str, float] | None:
        raw = self.side.get([LOCK_KEY]).get(LOCK_KEY)
        if raw is None:
            return None
        try:
            found = json.loads(raw)
            return str(found["owner"]), float(found["beat"])
        except (ValueError, TypeError, KeyError):
            return "(unreadable)", 0.0   # a damaged row: stale, taken over

    def claim(self, owner: str, now: float, stale_before: float) -> None:
        self.side.put([(LOCK_KEY, "lock", "", json.dumps({"owner": owner, "beat": now}))])

    def renew(self, owner: str, now: float) -> None:
        found = self.holder()
        if found is not None and found[0] == owner:
            self.claim(owner, now, now)

    def clear(self, owner: str) -> None:
        found = self.holder()
        if found is not None and found[0] == owner:
            self.side.delete([LOCK_KEY])
