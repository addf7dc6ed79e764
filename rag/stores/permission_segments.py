"""Each permission key's chunks and vectors, side by side, written in proportion to each write: `append`, `settle`.

Chroma's permission file (`rag.stores.chroma_permitted`) answers a principal by scoring the vectors of
the chunks its keys grant. Those are kept per key in **segments** (``key_segments``: a key, how many
entries, their chunk numbers as int64, and their normalised vectors quantized to int8 with a float32
scale each: a quarter of the bytes to read and score, and a bound on each cosine that lets
`rag.stores.permission_vectors` re-rank exactly from the chunks' float32 vectors), so a search reads a
few rows per key, not one row per chunk. A write appends one segment per key it gave a chunk (only
that write's chunks), then `settle` merges the key's newest two segments while the older holds at
most `RATIO` times the newer's entries: each segment is more than twice the next, so a key holds at
most log2(n) of them, and each entry is rewritten O(log n) times in all, so a write costs in
proportion to what it writes, times that logarithm, whatever the key already holds (simulated: 11
writes per entry over 2,000 writes of ~10 chunks per key, 4 over 20; rewriting each touched key's
whole pack on every write made a 100,000-chunk build at 384 dimensions take 48 minutes).

An entry is **dead** when its chunk was deleted or lost the key: it stays in its segment until a
merge drops it (the reader maps numbers to live chunks, and every returned chunk is checked against
Chroma's own metadata, so a dead entry costs a little reading, never a wrong answer). Chunk numbers
are never reused (``AUTOINCREMENT``) and a number's vector never changes, so a live number's entry
is its current vector. ``key_dead`` counts each key's dead entries (an estimate); a key whose dead
entries pass `PURGE` times its live ones is rewritten whole at the end of the write that passed it.

Example:
    >>> import sqlite3
    >>> db = sqlite3.connect(":memory:", isolation_level=None)
    >>> _ = db.executescript("CREATE TABLE acl_keys (key, value, n);" + SCHEMA)
    >>> vec = np.ones(2, dtype=np.float32).tobytes()
    >>> for n in range(4):   # four writes of one chunk each
    ...     append(db, {"acl_g_a": ([n], [vec])}); settle(db, ["acl_g_a"])
    >>> db.execute("SELECT size FROM key_segments").fetchall()   # (1 + 1, 2 + 1, then 3 and 1)
    [(3,), (1,)]
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from rag.base.errors import StoreError

__all__ = ["PURGE", "RATIO", "SCHEMA", "append", "clear", "forget", "insert", "keys_of", "lose", "old_rows", "quantize",
           "read", "relabel", "settle"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS key_segments (id INTEGER PRIMARY KEY, key TEXT NOT NULL, size INTEGER NOT NULL,
                                         numbers BLOB NOT NULL, scales BLOB NOT NULL, codes BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS key_segments_by_key ON key_segments (key, id);
CREATE TABLE IF NOT EXISTS key_dead (key TEXT PRIMARY KEY, dead INTEGER NOT NULL) WITHOUT ROWID;
"""
#: the newest two segments of a key are merged while the older holds at most `RATIO` times the newer's entries (1 would
#: keep a segment per write when each write gives a key fewer chunks than the one before)
RATIO = 2.0
#: a key is rewritten whole when its dead entries pass this share of its live ones (and `_PURGE_FLOOR`)
PURGE = 0.5
_PURGE_FLOOR = 64
_BATCH = 500


def append(side: sqlite3.Connection, entries: Mapping[str, tuple[Sequence[int], Sequence[bytes]]]) -> None:
    """One new segment per key of `entries` (key -> (chunk numbers, their normalised float32 vectors' bytes)), its
    vectors quantized (`quantize`)."""
    rows = []
    for key, (numbers, vectors) in entries.items():
        if len(numbers):
            scales, codes = quantize(np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(numbers), -1))
            rows.append((key, len(numbers), np.asarray(numbers, dtype=np.int64).tobytes(), scales.tobytes(),
                         codes.tobytes()))
    side.executemany("INSERT INTO key_segments (key, size, numbers, scales, codes) VALUES (?, ?, ?, ?, ?)", rows)


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each vector as a scale (float32) and int8 codes, ``vector ~ scale * codes``: each component within half a
    scale of the truth (`rag.stores.permission_vectors.estimates` bounds a cosine by it)."""
    scales = (np.abs(vectors).max(axis=1) / 127).astype(np.float32) if vectors.size else np.zeros(len(vectors),
                                                                                                   dtype=np.float32)
    scales = np.where(scales > 0, scales, np.float32(1))
    codes = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return scales, codes


def lose(side: sqlite3.Connection, counts: Mapping[str, int]) -> None:
    """Count entries that died (key -> how many of its chunks were deleted or lost it)."""
    side.executemany("INSERT INTO key_dead (key, dead) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET dead = dead + ?",
                     [(key, count, count) for key, count in counts.items() if count])


def clear(side: sqlite3.Connection) -> None:
    side.execute("DELETE FROM key_segments")
    side.execute("DELETE FROM key_dead")


def settle(side: sqlite3.Connection, keys: Iterable[str], *, whole: bool = False) -> None:
    """Merge each of `keys`' newest segments (`RATIO`), or all of them when its dead entries passed `PURGE` (or
    `whole`: a file written whole, one segment per key)."""
    for key in dict.fromkeys(keys):
        segments = side.execute("SELECT id, size FROM key_segments WHERE key = ? ORDER BY id", (key,)).fetchall()
        dead = side.execute("SELECT dead FROM key_dead WHERE key = ?", (key,)).fetchone()
        dead = dead[0] if dead else 0
        if not segments:
            side.execute("DELETE FROM key_dead WHERE key = ?", (key,))
            continue
        live = sum(size for _, size in segments) - dead
        if whole or dead > max(_PURGE_FLOOR, PURGE * live):
            if len(segments) == 1 and not dead:
                continue
            _merge(side, key, [id_ for id_, _ in segments], dead > 0, whole=True)
            continue
        take, merged = 1, segments[-1][1]
        while take < len(segments) and segments[-take - 1][1] <= RATIO * merged:   # (the binary counter's carry)
            merged += segments[-take - 1][1]
            take += 1
        if take > 1:
            _merge(side, key, [id_ for id_, _ in segments[-take:]], dead > 0, whole=take == len(segments))


def _merge(side: sqlite3.Connection, key: str, ids: list[int], filter_dead: bool, whole: bool) -> None:
    rows = side.execute(f"SELECT numbers, scales, codes FROM key_segments WHERE id IN ({','.join('?' * len(ids))}) "
                        "ORDER BY id", ids).fetchall()
    numbers = np.concatenate([np.frombuffer(ns, dtype=np.int64) for ns, _, _ in rows])
    scales = np.concatenate([np.frombuffer(ss, dtype=np.float32) for _, ss, _ in rows])
    codes = b"".join(cs for _, _, cs in rows)
    keep = np.zeros(len(numbers), dtype=bool)
    _, first = np.unique(numbers, return_index=True)   # (a chunk that lost the key and got it again: once)
    keep[first] = True
    if filter_dead:
        live: set[int] = set()
        unique = numbers[first].tolist()
        for start in range(0, len(unique), _BATCH):
            part = unique[start:start + _BATCH]
            live.update(n for n, in side.execute(
                f"SELECT n FROM acl_keys WHERE key = ? AND value = 1 AND n IN ({','.join('?' * len(part))})",
                [key, *part]))
        keep &= np.isin(numbers, np.fromiter(live, dtype=np.int64, count=len(live)))
        removed = len(numbers) - int(keep.sum())
        if whole:
            side.execute("DELETE FROM key_dead WHERE key = ?", (key,))
        elif removed:
            side.execute("UPDATE key_dead SET dead = max(0, dead - ?) WHERE key = ?", (removed, key))
    side.execute(f"DELETE FROM key_segments WHERE id IN ({','.join('?' * len(ids))})", ids)
    if keep.any():
        matrix = np.frombuffer(codes, dtype=np.int8).reshape(len(numbers), -1)[keep]
        side.execute("INSERT INTO key_segments (key, size, numbers, scales, codes) VALUES (?, ?, ?, ?, ?)",
                     (key, int(keep.sum()), numbers[keep].tobytes(), scales[keep].tobytes(), matrix.tobytes()))


def keys_of(acl: str) -> list[str]:
    return [key for key, value in json.loads(acl).items() if value is True]


def forget(side: sqlite3.Connection, ids: list[str]) -> list[str]:
    """Delete the chunks `ids` (at most `_BATCH`): their entries in their keys' segments are dead. The keys."""
    marks = ",".join("?" * len(ids))
    dead = Counter(key for acl, in side.execute(f"SELECT acl FROM chunks WHERE id IN ({marks})", ids)
                   for key in keys_of(acl))
    side.execute(f"DELETE FROM chunks WHERE id IN ({marks})", ids)
    lose(side, dead)
    return list(dead)


def insert(side: sqlite3.Connection, rows: list[tuple[str, str, bytes]]) -> list[str]:
    """Insert chunk rows (id, permission keys, vector; ids not in the file) and one segment per key they hold as
    true, of them only. The keys."""
    side.executemany("INSERT INTO chunks (id, acl, vector) VALUES (?, ?, ?)", rows)
    numbers: dict[str, int] = {}
    for start in range(0, len(rows), _BATCH):
        part = [id_ for id_, _, _ in rows[start:start + _BATCH]]
        numbers.update(side.execute(f"SELECT id, n FROM chunks WHERE id IN ({','.join('?' * len(part))})", part))
    entries: dict[str, tuple[list[int], list[bytes]]] = {}
    for id_, acl, vector in rows:
        for key in keys_of(acl):
            entry = entries.setdefault(key, ([], []))
            entry[0].append(numbers[id_])
            entry[1].append(vector)
    append(side, entries)
    return list(entries)


def relabel(side: sqlite3.Connection, acls: Mapping[str, str],
             vectors_of: Callable[[list[str]], Mapping[str, bytes]]) -> list[str]:
    """Give chunks (id -> permission keys; at most `_BATCH`) their new keys: an entry for each key gained (the vector
    of a chunk that had none read by `vectors_of`: id -> normalised float32 bytes), a dead one for each lost. The
    keys."""
    ids = list(acls)
    before = side.execute(f"SELECT id, n, acl, vector FROM chunks WHERE id IN ({','.join('?' * len(ids))})",
                          ids).fetchall()
    bare = [id_ for id_, _, _, vector in before if not vector and acls[id_] != "{}"]
    found = vectors_of(bare) if bare else {}
    lost: Counter[str] = Counter()
    gained: dict[str, tuple[list[int], list[bytes]]] = {}
    updates = []
    for id_, n, acl, vector in before:
        if acls[id_] == "{}":
            vector = b""
        elif not vector:
            if id_ not in found:
                raise StoreError(f"{id_}: Chroma returned no vector")   # (the file stays stale: built again)
            vector = found[id_]
        old, new = set(keys_of(acl)), set(keys_of(acls[id_]))
        lost.update(old - new)
        for key in new - old:
            entry = gained.setdefault(key, ([], []))
            entry[0].append(n)
            entry[1].append(vector)
        updates.append((acls[id_], vector, id_))
    side.executemany("UPDATE chunks SET acl = ?, vector = ? WHERE id = ?", updates)
    lose(side, lost)
    append(side, gained)
    return [*lost, *gained]


def old_rows(path: Path, seq: int | None, old_format: str) -> Iterator[list[tuple[str, str, bytes]]] | None:
    """The chunk rows (id, permission keys, vector) of the file the versions before segments kept (`old_format`),
    page by page, when it is stamped with Chroma's current `seq` (else None: the collection is read instead)."""
    if seq is None or not path.is_file() or path.is_symlink():
        return None
    try:
        old = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5, isolation_level=None)
        old.execute("BEGIN")
        found = dict(old.execute("SELECT key, value FROM settings WHERE key IN ('format', 'chroma_seq')").fetchall())
    except sqlite3.Error:
        return None
    if found != {"format": old_format, "chroma_seq": str(seq)}:
        old.close()
        return None

    def pages() -> Iterator[list[tuple[str, str, bytes]]]:
        last = -1
        try:
            while rows := old.execute("SELECT n, id, acl, vector FROM chunks WHERE n > ? ORDER BY n LIMIT 5000",
                                      (last,)).fetchall():
                last = rows[-1][0]
                yield [(id_, acl, vector) for _, id_, acl, vector in rows]
        finally:
            old.close()
    return pages()


def read(side: sqlite3.Connection, keys: Sequence[str]) -> Iterator[tuple[bytes, bytes, bytes]]:
    """The (numbers, scales, codes) segments of `keys`, one at a time (a chunk of two keys, or a dead entry,
    included)."""
    for start in range(0, len(keys), _BATCH):
        part = list(keys[start:start + _BATCH])
        yield from side.execute("SELECT numbers, scales, codes FROM key_segments "
                                f"WHERE key IN ({','.join('?' * len(part))})", part)
