"""`EngineRecordStore`: a Qdrant or Milvus knowledge base's document records in its engine, beside its chunks.

The same records as `rag.indexing.records.RecordStore` (one per source document: content hash,
size and modification time, chunk ids, state), kept as entries of the knowledge base's side
collection (`rag.stores.kb_side`): key ``record:<source>``, kind ``record``, its ``doc_id`` for
lookups, and the record's fields as JSON. Every process that opens the knowledge base by its
connection reads the same records. Entries are read as untrusted (each field's type checked); each
change writes a new change stamp after it (`SideTables.touch`), which serving processes compare.

A group of changes is not one transaction here (the engines have none): each entry is written
whole, and the write path's order (records marked ``pending`` / ``deleting`` before the chunks
change, ``ok`` after) leaves a write cut short for the next writer to finish, as on disk. A moved
document's old record is deleted before its new one is written: cut short between the two, the
next sync indexes it as new and reuses its chunks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from rag.base.errors import StoreError
from rag.indexing.records import _FIELDS, STATES, DocumentRecord, RecordStore
from rag.stores.kb_side import SideTables

__all__ = ["EngineRecordStore"]

KIND = "record"


def _key(source: str) -> str:
    return f"{KIND}:{source}"


class EngineRecordStore(RecordStore):
    """Document records in the side collection of `tables` (see the module docstring)."""

    def __init__(self, tables: SideTables) -> None:   # (no SQLite file: nothing of RecordStore's __init__)
        self.tables, self.side, self.path = tables, tables.side, tables.where

    def _damaged(self, cause: str) -> StoreError:
        return StoreError(f"the records in {self.path} are damaged ({cause}). Delete the collection {self.side.name} "
                          "and index the documents again with cleanup='full'; unchanged chunks are reused")

    def close(self) -> None:
        """Nothing to close: the store's client holds the connection."""

    def _parse(self, text: str) -> DocumentRecord:
        try:
            values = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise self._damaged(f"an entry is not JSON: {str(exc)[:200]}") from exc
        if not isinstance(values, dict) or set(values) != set(_FIELDS):
            raise self._damaged(f"an entry does not hold the fields {', '.join(_FIELDS)}")
        return self._row(tuple(values[f] for f in _FIELDS))

    def all(self) -> dict[str, DocumentRecord]:
        found = sorted((self._parse(text) for text in self.side.scan(KIND)), key=lambda r: r.source)
        return {r.source: r for r in found}

    def get(self, source: str) -> DocumentRecord | None:
        text = self.side.get([_key(source)]).get(_key(source))
        return None if text is None else self._checked(self._parse(text), source)

    def _checked(self, record: DocumentRecord, source: str) -> DocumentRecord:
        if record.source != source:
            raise self._damaged(f"the entry of {source[:200]!r} holds the record of {record.source[:200]!r}")
        return record

    def find(self, key: str) -> DocumentRecord | None:
        found = self.get(key)
        if found is None:
            found = next((self._parse(text) for text in self.side.scan(KIND, key)), None)
        return found

    def _entry(self, record: DocumentRecord, now: float) -> tuple[str, str, str, str]:
        if record.state not in STATES:
            raise StoreError(f"unknown record state {record.state!r}; valid: {', '.join(STATES)}")
        values = {f: getattr(record, f) for f in _FIELDS}
        values["chunk_ids"], values["updated_at"] = json.dumps(record.chunk_ids), now
        return _key(record.source), KIND, record.doc_id, json.dumps(values)

    def put_many(self, records: Iterable[DocumentRecord]) -> None:
        now = time.time()
        entries = [self._entry(r, now) for r in records]
        if entries:
            self.side.put(entries)
            self.tables.touch()

    def delete(self, *sources: str) -> None:
        if sources:
            self.side.delete([_key(s) for s in sources])
            self.tables.touch()

    def rename(self, old_source: str, record: DocumentRecord) -> None:
        entry = self._entry(record, time.time())
        if old_source != record.source:
            self.side.delete([_key(old_source)])
        self.side.put([entry])
        self.tables.touch()
