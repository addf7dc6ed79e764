"""FTS5's ranking of the chunks one principal may read, computed over those chunks only: `permitted_ranking`.

FTS5 ranks every chunk that matches a query before a filter on JSON metadata can drop one: at 100,000
chunks a principal who may read 2% of them pays that ranking plus a `json_each` per match and group.
Asking FTS5 for the permitted rows one by one (``rowid IN (...)``) is worse: each lookup loads the
query's whole doclists (seconds). So for a principal whose permitted set is small
(`rag.stores.permission_index`), the ranking is computed here, over the permitted chunks' stored
tokens, with FTS5's own statistics and FTS5's own formula (``fts5_aux.c``, `bm25()`: k1 = 1.2,
b = 0.75; the phrase idf ``log((N - n + 0.5) / (n + 0.5))``, at least 1e-6; the document length and
average over every token; the same operations in the same order, in IEEE doubles):

- N and the total token count: FTS5's averages record (``terms_data``, id 1);
- each query token's document count: ``fts5vocab`` (a temporary table of the connection);
- each permitted chunk's tokens: FTS5's content table, split on spaces: exactly FTS5's tokens when
  they hold only lowercase letters, digits, ``.`` and ``,`` (`_plain`); any other token (a
  character the ``unicode61`` tokenizer splits on or folds) and the whole search goes back to FTS5
  (None).

The scores are FTS5's to the bit (the tests compare them with FTS5's own filtered search), and the
order is FTS5's (score, then row). Everything is read in one read transaction.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rag.base.filters import matches_canonical
from rag.stores import permission_index

__all__ = ["permitted_ranking"]

_K1, _B = 1.2, 0.75
_READ = 256


def _plain(tokens: str) -> bool:
    """Whether `tokens` (space-joined) split on spaces is what FTS5's unicode61 (tokenchars '.,') makes of it."""
    bare = tokens.replace(" ", "").replace(".", "").replace(",", "")   # (isalnum: letters and digits only)
    return (not bare or bare.isalnum()) and tokens == tokens.lower() and tokens.isprintable()


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (what FTS5 writes its averages record in)."""
    out, at = [], 0
    while at < len(blob):
        value = 0
        for i in range(9):
            byte = blob[at]
            at += 1
            if i == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _statistics(db: sqlite3.Connection, terms: Sequence[str]) -> tuple[float, list[float]] | None:
    """(average document length, each term's idf) as FTS5's bm25() computes them, or None (an empty index)."""
    row = db.execute("SELECT block FROM terms_data WHERE id = 1").fetchone()
    numbers = _varints(row[0]) if row and row[0] else []
    if len(numbers) < 2 or numbers[0] <= 0:
        return None
    rows, tokens = numbers[0], sum(numbers[1:])
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.rag_term_rows USING fts5vocab(main, terms, row)")
    idf = []
    for term in terms:
        found = db.execute("SELECT doc FROM temp.rag_term_rows WHERE term = ?", (term,)).fetchone()
        hits = found[0] if found else 0
        value = math.log((rows - hits + 0.5) / (hits + 0.5))
        idf.append(value if value > 0.0 else 1e-6)
    return float(tokens) / float(rows), idf


def _scores(rows: Sequence[tuple[int, str]], terms: Sequence[str], avgdl: float,
            idf: Sequence[float]) -> list[tuple[float, int]] | None:
    """(rank = -score, n) of the rows that hold a term, or None when the rows' tokens are not plain (FTS5 must rank
    them). The score depends only on the terms' counts and the length: computed once per distinct pair."""
    if not _plain(" ".join(text for _, text in rows)):
        return None
    out, known = [], {}
    for n, text in rows:
        tokens = text.split()
        freqs = tuple(map(tokens.count, terms))
        if not any(freqs):
            continue
        key = (freqs, len(tokens))
        rank = known.get(key)
        if rank is None:
            rank = known[key] = _rank(freqs, len(tokens), avgdl, idf)
        out.append((rank, n))
    return out


def _rank(freqs: Sequence[int], length: int, avgdl: float, idf: Sequence[float]) -> float:
    """FTS5's bm25() of one row (fts5Bm25Function: the same operations in the same order)."""
    size = float(length)
    score = 0.0
    for weight, count in zip(idf, freqs, strict=True):
        freq = float(count)
        score += weight * ((freq * (_K1 + 1.0)) / (freq + _K1 * (1 - _B + _B * size / avgdl)))
    return -1.0 * score


def permitted_ranking(db: sqlite3.Connection, terms: Sequence[str], keys: Sequence[str], k: int, *,
                      keep: Callable[[Mapping[str, Any]], bool],
                      rest: dict[str, Any] | None) -> list[tuple[str, str, str, float]] | None:
    """The top `k` chunks holding one of the permission `keys` as true that match one of `terms` (the query's
    distinct tokens, FTS5's phrases in order), whose metadata `keep` (the whole permission check) and `rest` (the
    request's own conditions) allow: (id, text, metadata JSON, score = -bm25), best first; None when FTS5 must
    rank them itself (a term or a chunk's tokens FTS5 would read otherwise)."""
    if not terms or not all(_plain(term) and " " not in term for term in terms):
        return None
    sql, params = permission_index.allowed_sql(keys)
    db.execute("BEGIN")
    try:
        stats = _statistics(db, terms)
        if stats is None:
            return []
        rows = db.execute(f"SELECT a.n, t.c0 FROM ({sql}) AS a JOIN terms_content AS t ON t.id = a.n", params).fetchall()
        ranked = _scores(rows, terms, *stats)
        if ranked is None:
            return None
        ranked.sort()
        return _read(db, ranked, k, keep, rest)
    finally:
        db.execute("COMMIT")


def _read(db: sqlite3.Connection, ranked: list[tuple[float, int]], k: int,
          keep: Callable[[Mapping[str, Any]], bool], rest: dict[str, Any] | None) -> list[tuple[str, str, str, float]]:
    """The ranked rows' chunks, read in their order in batches, the first `k` whose metadata passes."""
    out: list[tuple[str, str, str, float]] = []
    for start in range(0, len(ranked), max(k, _READ)):
        part = ranked[start:start + max(k, _READ)]
        found = {n: (id_, text, md) for n, id_, text, md in db.execute(
            f"SELECT n, id, text, metadata FROM chunks WHERE n IN ({','.join('?' * len(part))})", [n for _, n in part])}
        for rank, n in part:
            if n not in found:
                continue
            id_, text, md = found[n]
            metadata = json.loads(md)
            if isinstance(metadata, dict) and keep(metadata) and (rest is None or matches_canonical(metadata, rest)):
                out.append((id_, text, md, -rank))
                if len(out) >= k:
                    return out
    return out
