"""Which chunks carry which permission key, in SQLite tables beside a store's chunks: `PermissionKeys`.

A principal's permission filter (`rag.base.acl`) is one `$or` of ``key $eq true``: its user key, one
key per group, ``acl_public``. A store whose own filter evaluates that `$or` over every chunk (Chroma,
FTS5's JSON metadata) pays for the whole corpus on every search, however few chunks the principal may
read. The tables here answer "which chunks may this principal read" by index lookups:

- ``acl_keys (key, value, n)``: one row per chunk ``n`` and permission key it holds with a boolean
  value (``value`` 1 for true, 0 for false; other values are neither, as `rag.base.filters.matches`
  reads them);
- ``acl_counts (key, count)``: how many chunks hold each key as true, kept by triggers, and under the
  key ``''`` how many chunks the table named at creation holds: what the plan weighs a principal by
  before reading anything (`share`).

They are written by triggers on the chunks' table, in the statement that writes a chunk, so a reader
never sees chunks without their keys; a store written before them gets them once (`build`). The
answers are permission keys only: each store still checks the whole filter on every chunk it returns.

Example:
    >>> import sqlite3
    >>> db = sqlite3.connect(":memory:", isolation_level=None)
    >>> _ = db.executescript("CREATE TABLE chunks (n INTEGER PRIMARY KEY, md TEXT); CREATE TABLE settings (key, value);"
    ...                  + schema("chunks", "md"))
    >>> for md in ('{"acl_public": false, "acl_g_ops": true}', '{"acl_public": true}', '{"acl_g_ops": 1}'):
    ...     _ = db.execute("INSERT INTO chunks (md) VALUES (?)", (md,))
    >>> keys = granted_keys({"$or": [{"acl_public": {"$eq": True}}, {"acl_g_ops": {"$eq": True}}]})
    >>> share(db, keys), sorted(allowed(db, keys))
    ((2, 3), [1, 2])
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from rag.base.acl import ACL_PREFIX

__all__ = ["EXACT_SHARE", "VERSION", "allowed", "allowed_sql", "build", "granted_keys", "ready", "schema", "share"]

#: what the tables' settings row says (another value, or none: built again from the chunks)
VERSION = "rag-acl-keys/1"
#: the largest share of the chunks a principal may read (by the sum of its keys' counts) for which a store searches
#: exactly over the permitted chunks (`rag.stores.fts_permitted`, `rag.stores.chroma_permitted`); above it, the plan's
#: lists (`rag.stores.permission_plan`). Measured at 100,000 chunks: docs/benchmarks.md "Document permissions".
EXACT_SHARE = 0.25


_KEYS_OF = ("SELECT j.key, j.type = 'true', {n} FROM {rows}json_each(CASE WHEN json_valid({md}) THEN {md} ELSE '{{}}' END) "
            "AS j WHERE j.parent IS NULL AND substr(j.key, 1, 4) = 'acl_' AND j.type IN ('true', 'false')")


def schema(table: str, metadata: str) -> str:
    """The tables and triggers, for the chunks of `table` (numbered by its integer primary key ``n``, their metadata
    a JSON object in the column `metadata`): whoever inserts or deletes a chunk there (any version of any process)
    writes its keys in the same statement."""
    keys = _KEYS_OF.format(n="new.n", md=f"new.{metadata}", rows="")
    return f"""
CREATE TABLE IF NOT EXISTS acl_keys (key TEXT NOT NULL, value INTEGER NOT NULL, n INTEGER NOT NULL,
                                     PRIMARY KEY (key, value, n)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS acl_keys_by_chunk ON acl_keys (n);
CREATE TABLE IF NOT EXISTS acl_counts (key TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS acl_key_added AFTER INSERT ON acl_keys WHEN new.value = 1 BEGIN
  INSERT INTO acl_counts (key, count) VALUES (new.key, 1) ON CONFLICT (key) DO UPDATE SET count = count + 1; END;
CREATE TRIGGER IF NOT EXISTS acl_key_removed AFTER DELETE ON acl_keys WHEN old.value = 1 BEGIN
  UPDATE acl_counts SET count = count - 1 WHERE key = old.key; END;
CREATE TRIGGER IF NOT EXISTS acl_chunk_added AFTER INSERT ON {table} BEGIN
  INSERT INTO acl_counts (key, count) VALUES ('', 1) ON CONFLICT (key) DO UPDATE SET count = count + 1;
  INSERT OR IGNORE INTO acl_keys (key, value, n) {keys}; END;
CREATE TRIGGER IF NOT EXISTS acl_chunk_removed AFTER DELETE ON {table} BEGIN
  UPDATE acl_counts SET count = count - 1 WHERE key = '';
  DELETE FROM acl_keys WHERE n = old.n; END;
CREATE TRIGGER IF NOT EXISTS acl_chunk_changed AFTER UPDATE OF {metadata} ON {table} BEGIN
  DELETE FROM acl_keys WHERE n = old.n;
  INSERT OR IGNORE INTO acl_keys (key, value, n) {keys}; END;
"""


def build(db: sqlite3.Connection, table: str, metadata: str, *, settings: str = "settings") -> bool:
    """Fill the tables from the chunks of `table` when `settings` (key, value) does not say they are `VERSION`'s (a
    store written before them, or by a version that wrote none): in the caller's write transaction. Whether it did."""
    if ready(db, settings=settings):
        return False
    db.execute("DELETE FROM acl_keys")
    db.execute("DELETE FROM acl_counts")
    db.execute(f"INSERT INTO acl_counts (key, count) SELECT '', count(*) FROM {table}")
    db.execute(f"INSERT OR IGNORE INTO acl_keys (key, value, n) "
               f"{_KEYS_OF.format(n='c.n', md=f'c.{metadata}', rows=f'{table} AS c, ')}")
    db.execute(f"INSERT OR REPLACE INTO {settings} (key, value) VALUES ('permission_keys', ?)", (VERSION,))
    return True


def ready(db: sqlite3.Connection, *, settings: str = "settings") -> bool:
    """Whether the tables hold every chunk's keys (`build` ran with this `VERSION`)."""
    found = db.execute(f"SELECT value FROM {settings} WHERE key = 'permission_keys'").fetchone()
    return found is not None and found[0] == VERSION


def granted_keys(permission: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """The keys of a permission filter that reads "any of these keys is the boolean true" (a principal's, without
    `public_by_default`), or None for any other shape (a missing key that passes, two conjuncts, a `$not`...)."""
    if not permission:
        return None
    (op, clauses), = permission.items()
    clauses = clauses if op == "$or" else [permission]
    keys = []
    for clause in clauses:
        (key, cond), = clause.items()
        if key.startswith("$") or not key.startswith(ACL_PREFIX) or not isinstance(cond, Mapping) or len(cond) != 1:
            return None
        (cmp, value), = cond.items()
        if cmp != "$eq" or value is not True:
            return None
        keys.append(key)
    return tuple(dict.fromkeys(keys))


def share(db: sqlite3.Connection, keys: Sequence[str]) -> tuple[int, int]:
    """(at most how many chunks hold one of `keys` as true: the sum of their counts, how many chunks there are)."""
    found = dict(db.execute(f"SELECT key, count FROM acl_counts WHERE key IN ('', {','.join('?' * len(keys))})",
                            list(keys)).fetchall())
    return sum(count for key, count in found.items() if key), found.get("", 0)


def allowed_sql(keys: Sequence[str]) -> tuple[str, list[str]]:
    """A statement selecting the chunk numbers ``n`` holding one of `keys` as true (each once), and its parameters."""
    return f"SELECT DISTINCT n FROM acl_keys WHERE key IN ({','.join('?' * len(keys))}) AND value = 1", list(keys)


def allowed(db: sqlite3.Connection, keys: Sequence[str]) -> list[int]:
    """The chunk numbers holding one of `keys` as true."""
    sql, params = allowed_sql(keys)
    return [n for n, in db.execute(sql, params)]
