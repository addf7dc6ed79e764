"""`PGRecordStore`: a pgvector knowledge base's document records in PostgreSQL, beside its chunks.

The same records as `rag.indexing.records.RecordStore` (a row per source document: content hash,
size and modification time, chunk ids, state), in the table ``<table>_rag_records`` of the
chunks' database (`rag.stores.pg_tables`), so every process that opens the knowledge base by its
connection reads the same records. Rows are read as untrusted (each field's type checked), and a
group of changes is one transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from rag.base.errors import StoreError
from rag.indexing.records import _FIELDS, STATES, DocumentRecord, RecordStore
from rag.stores.pg_tables import PGTables

__all__ = ["PGRecordStore"]


class PGRecordStore(RecordStore):
    """Document records in the ``<table>_rag_records`` table of `tables` (see the module docstring)."""

    def __init__(self, tables: PGTables) -> None:   # (no SQLite file: nothing of RecordStore's __init__)
        self.tables, self.path = tables, tables.where
        self.table = tables.table("rag_records")

    def _damaged(self, cause: str) -> StoreError:
        return StoreError(f"the records in {self.path} are damaged ({cause}). Delete the table {self.table} and "
                          "index the documents again with cleanup='full'; unchanged chunks are reused")

    def close(self) -> None:
        """Nothing to close: the store's engine holds the connections."""

    def _select(self, where: str = "", params: dict[str, Any] | None = None) -> list[DocumentRecord]:
        rows = self.tables.rows(f"SELECT {', '.join(_FIELDS)} FROM {self.table} {where} ORDER BY source", params)
        return [self._row(tuple(row[f] for f in _FIELDS)) for row in rows]

    def all(self) -> dict[str, DocumentRecord]:
        return {r.source: r for r in self._select()}

    def get(self, source: str) -> DocumentRecord | None:
        found = self._select("WHERE source = :source", {"source": source})
        return found[0] if found else None

    def find(self, key: str) -> DocumentRecord | None:
        found = self.get(key)
        if found is None:
            rows = self._select("WHERE doc_id = :key", {"key": key})
            found = rows[0] if rows else None
        return found

    def _values(self, records: Iterable[DocumentRecord]) -> list[dict[str, Any]]:
        out, now = [], time.time()
        for rec in records:
            if rec.state not in STATES:
                raise StoreError(f"unknown record state {rec.state!r}; valid: {', '.join(STATES)}")
            values = {f: getattr(rec, f) for f in _FIELDS}
            values["chunk_ids"], values["updated_at"] = json.dumps(rec.chunk_ids), now
            out.append(values)
        return out

    def _upsert(self) -> str:
        columns = ", ".join(_FIELDS)
        updates = ", ".join(f"{f} = excluded.{f}" for f in _FIELDS if f != "source")
        return (f"INSERT INTO {self.table} ({columns}) VALUES ({', '.join(':' + f for f in _FIELDS)}) "
                f"ON CONFLICT (source) DO UPDATE SET {updates}")

    def put_many(self, records: Iterable[DocumentRecord]) -> None:
        rows = self._values(records)
        if rows:
            self.tables.run([(self._upsert(), rows)])

    def delete(self, *sources: str) -> None:
        self.tables.run([(f"DELETE FROM {self.table} WHERE source = :source", [{"source": s} for s in sources])])

    def rename(self, old_source: str, record: DocumentRecord) -> None:
        self.tables.run([(f"DELETE FROM {self.table} WHERE source = :source", [{"source": old_source}]),
                         (self._upsert(), self._values([record]))])
