"""Each chunk's scalar metadata values in an indexed SQLite table beside its JSON: `schema`, `build`, `where_sql`.

The embedded default's lexical index (`rag.stores.fts_index`) keeps a chunk's metadata as one JSON
object. A filter evaluated on that JSON (`rag.stores.sqlite_where`) parses every matching chunk's
metadata, and reading it reads the chunk's row, text included: at 100,000 chunks a five-term query
filtered to one document cost five times the unfiltered one. Here each chunk's top-level values are
also rows of ``meta_values (n, key, kind, value)``, keyed by chunk and key, so a condition on a
matching chunk is one B-tree lookup:

- ``kind`` is ``'t'`` for text, ``'n'`` for a number (integer or real: 1 equals 1.0), ``'b'`` for
  a boolean (``value`` 1 or 0): kinds never mix, as in `rag.base.filters.matches`;
- lists, objects and nulls have no row (no comparison but ``$ne`` / ``$nin`` is true on them), and
  neither has text longer than `MAX_TEXT` characters (it equals no operand up to that length; a filter
  comparing with a longer operand is evaluated on the JSON instead: `where_sql` says None);
- an index on ``(key, kind, value)`` answers "which chunks may a filter allow" (`candidates_sql`): a
  set of chunks holding every chunk the filter allows, read from the index alone; a statement testing
  more rows than that checks membership in it first (`narrowed_sql`).

The rows are written by triggers on the chunks' table in the statement that writes a chunk, so a
reader never sees a chunk without them; a file written before them gets them once (`build`).
`where_sql` translates a canonical filter with the semantics of `rag.stores.sqlite_where` (the
tests compare the two on generated filters and metadata).

Example:
    >>> import sqlite3
    >>> from rag.base.filters import validate_filter
    >>> db = sqlite3.connect(":memory:", isolation_level=None)
    >>> _ = db.executescript("CREATE TABLE chunks (n INTEGER PRIMARY KEY, md TEXT); CREATE TABLE settings (key, value);"
    ...                      + schema("chunks", "md"))
    >>> for md in ('{"year": 2024, "tags": ["a"]}', '{"year": 2023.0, "public": true}', '{"year": "2024"}'):
    ...     _ = db.execute("INSERT INTO chunks (md) VALUES (?)", (md,))
    >>> sql, params = where_sql(validate_filter({"year": {"$gte": 2024}}), "chunks.n")
    >>> [n for n, in db.execute(f"SELECT n FROM chunks WHERE {sql}", params)]
    [1]
    >>> sql, params = where_sql(validate_filter({"public": {"$ne": True}}), "chunks.n")
    >>> [n for n, in db.execute(f"SELECT n FROM chunks WHERE {sql}", params)]
    [1, 3]
"""

from __future__ import annotations

import sqlite3
from typing import Any

from rag.base.filters import Comparison, normal_form
from rag.stores.sqlite_where import ORDER, boolean_sql, exists_sql
from rag.stores.sqlite_where import where_sql as json_where_sql

__all__ = ["MAX_TEXT", "VERSION", "build", "candidates_sql", "filter_sql", "narrowed_sql", "ready", "schema",
           "where_sql"]

#: what the table's settings row says (another value, or none: built again from the chunks)
VERSION = "rag-metadata-values/1"
#: the longest text value with a row (longer ones are long prose, not what a filter names)
MAX_TEXT = 256

_VALUES_OF = ("SELECT {n}, j.key, CASE j.type WHEN 'text' THEN 't' WHEN 'true' THEN 'b' WHEN 'false' THEN 'b' "
              "ELSE 'n' END, j.atom FROM {rows}json_each(CASE WHEN json_valid({md}) THEN {md} ELSE '{{}}' END) AS j "
              "WHERE j.parent IS NULL AND (j.type IN ('integer', 'real', 'true', 'false') "
              f"OR (j.type = 'text' AND length(j.atom) <= {MAX_TEXT}))")


def schema(table: str, metadata: str) -> str:
    """The table, its index and the triggers, for the chunks of `table` (numbered by its integer primary key ``n``,
    their metadata a JSON object in the column `metadata`)."""
    values = _VALUES_OF.format(n="new.n", md=f"new.{metadata}", rows="")
    return f"""
CREATE TABLE IF NOT EXISTS meta_values (n INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, value NOT NULL,
                                        PRIMARY KEY (n, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS meta_values_by_value ON meta_values (key, kind, value);
CREATE TRIGGER IF NOT EXISTS meta_chunk_added AFTER INSERT ON {table} BEGIN
  INSERT OR IGNORE INTO meta_values (n, key, kind, value) {values}; END;
CREATE TRIGGER IF NOT EXISTS meta_chunk_removed AFTER DELETE ON {table} BEGIN
  DELETE FROM meta_values WHERE n = old.n; END;
CREATE TRIGGER IF NOT EXISTS meta_chunk_changed AFTER UPDATE OF {metadata} ON {table} BEGIN
  DELETE FROM meta_values WHERE n = old.n;
  INSERT OR IGNORE INTO meta_values (n, key, kind, value) {values}; END;
"""


def build(db: sqlite3.Connection, table: str, metadata: str, *, settings: str = "settings") -> bool:
    """Fill the table from the chunks of `table` unless `settings` says it holds `VERSION`'s rows (a file written
    before them): in the caller's write transaction. Whether it did."""
    if ready(db, settings=settings):
        return False
    db.execute("DELETE FROM meta_values")
    db.execute(f"INSERT OR IGNORE INTO meta_values (n, key, kind, value) "
               f"{_VALUES_OF.format(n='c.n', md=f'c.{metadata}', rows=f'{table} AS c, ')}")
    db.execute(f"INSERT OR REPLACE INTO {settings} (key, value) VALUES ('metadata_values', ?)", (VERSION,))
    return True


def ready(db: sqlite3.Connection, *, settings: str = "settings") -> bool:
    """Whether the table holds every chunk's values (`build` ran with this `VERSION`)."""
    found = db.execute(f"SELECT value FROM {settings} WHERE key = 'metadata_values'").fetchone()
    return found is not None and found[0] == VERSION


def filter_sql(db: sqlite3.Connection, canon: dict[str, Any], row: str) -> tuple[str, list[Any]]:
    """The filter on the chunk numbered `row` of the table ``chunks (n, metadata)``: by its values (a lookup per
    comparison), or on its metadata's JSON where they are not written (a read-only file of before them) or cannot say
    (`where_sql` None)."""
    found = where_sql(canon, row) if ready(db) else None
    json = f"(SELECT own.metadata FROM chunks AS own WHERE own.n = {row})"   # (`row` may name the outer chunks)
    return found if found is not None else json_where_sql(canon, json)


def narrowed_sql(db: sqlite3.Connection, canon: dict[str, Any], row: str, most: int) -> tuple[str, list[Any]]:
    """`filter_sql`, preceded by membership in the filter's candidates when they are at most `most` chunks (counted
    on the index, reading at most `most` + 1 entries; `most`: how many rows the statement will test). SQLite builds
    that set once per statement, and each row outside it then costs one lookup in memory instead of the filter's
    lookups on disk (FTS5 at 1M chunks, a filter to 1%: 96 ms of CPU to 16). The ``+`` keeps a virtual table such as
    FTS5 from being asked for each candidate by row number (which reads a query's whole doclists every time)."""
    sql, params = filter_sql(db, canon, row)
    found = candidates_sql(canon) if ready(db) else None
    if found is None or db.execute(f"SELECT count(*) FROM (SELECT 1 FROM ({found[0]}) LIMIT ?)",
                                   [*found[1], most + 1]).fetchone()[0] > most:
        return sql, params
    return f"+{row} IN ({found[0]}) AND {sql}", [*found[1], *params]


def where_sql(canon: dict[str, Any], row: str) -> tuple[str, list[Any]] | None:
    """The SQL condition for the canonical filter `canon` on the chunk numbered by the expression `row` (the caller's
    own column, never user input), and its parameters; None when a text operand is longer than `MAX_TEXT` (evaluate
    the JSON: `rag.stores.sqlite_where`)."""
    params: list[Any] = []
    try:
        return _node(normal_form(canon), row, params), params
    except _TooLong:
        return None


class _TooLong(Exception):
    pass


def _node(node: Any, row: str, params: list[Any]) -> str:
    return boolean_sql(node, lambda cmp: exists_sql(cmp, params, rows="meta_values AS m", key=f"m.n = {row} AND m.key",
                                                    number="m.kind = 'n' AND m.value", same=_same))


def _same(value: Any, params: list[Any]) -> str:
    """The value is `value`, of the same kind (booleans are not numbers)."""
    if isinstance(value, bool):
        return f"(m.kind = 'b' AND m.value = {int(value)})"
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise _TooLong
        params.append(value)
        return "(m.kind = 't' AND m.value = ?)"
    params.append(value)
    return "(m.kind = 'n' AND m.value = ?)"


def candidates_sql(canon: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """A statement selecting, each once, the numbers ``n`` of chunks among which are all those the canonical filter
    allows (by the index on values: its ``$eq``, ``$in`` and orderings; a ``$ne`` / ``$nin`` narrows nothing), and its
    parameters; None when nothing narrows (every chunk is a candidate). The caller checks the filter on each."""
    return _candidates(normal_form(canon))


def _candidates(node: Any) -> tuple[str, list[Any]] | None:
    if isinstance(node, Comparison):
        return _candidate_rows(node)
    (op, parts), = node.items()
    found = [_candidates(part) for part in parts]
    known = [f for f in found if f is not None]
    if not known or (op == "$or" and len(known) < len(found)):
        return None
    joint = " INTERSECT " if op == "$and" else " UNION "
    return joint.join(f"SELECT n FROM ({sql})" for sql, _ in known), [p for _, params in known for p in params]


def _candidate_rows(cmp: Comparison) -> tuple[str, list[Any]] | None:
    if cmp.op in ("$ne", "$nin"):
        return None
    if cmp.op in ORDER:
        return f"SELECT n FROM meta_values WHERE key = ? AND kind = 'n' AND value {ORDER[cmp.op]} ?", [cmp.field,
                                                                                                         cmp.value]
    values = list(cmp.value) if cmp.op == "$in" else [cmp.value]   # (one kind per list: validate_filter)
    if any(isinstance(v, str) and len(v) > MAX_TEXT for v in values):
        return None   # (a value that long has no row: it may still be some chunk's)
    kind = "b" if isinstance(values[0], bool) else "t" if isinstance(values[0], str) else "n"
    values = [int(v) if isinstance(v, bool) else v for v in values]
    return (f"SELECT n FROM meta_values WHERE key = ? AND kind = '{kind}' AND value IN ({','.join('?' * len(values))})",
            [cmp.field, *values])
