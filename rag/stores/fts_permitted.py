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
  (None). Only the chunks whose tokens hold a query term as a substring are looked at: a chunk
  without one holds no such token, for FTS5's tokens are pieces of the stored tokens (which
  `rag.base.text.tokenize` wrote lowercase; FTS5 folds only case here, ``remove_diacritics 0``).

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
from rag.stores import metadata_values, permission_index

__all__ = ["FILTER_SHARE", "filtered_ranking", "permitted_ranking", "ranking_over"]

_K1, _B = 1.2, 0.75
#: a filter's candidates are ranked here when they are at most this share of the rows FTS5 would rank (the chunks
#: holding a query term, by FTS5's own counts): a candidate costs here about 12 times what a matching row costs FTS5
#: (CPU time at 100,000 chunks: ~7 us a candidate read and counted, ~0.7 us a row FTS5 iterates and ranks)
FILTER_SHARE = 0.08
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
    idf = []
    for term in terms:
        hits = _term_rows(db, term)
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
    sql, params = permission_index.allowed_sql(keys)
    return ranking_over(db, terms, sql, params, k,
                        keep=lambda md: keep(md) and (rest is None or matches_canonical(md, rest)))


def filtered_ranking(db: sqlite3.Connection, terms: Sequence[str], canon: dict[str, Any],
                     k: int) -> list[tuple[str, str, str, float]] | None:
    """The top `k` chunks the canonical filter allows that match one of `terms`, ranked here over the filter's
    candidates (`rag.stores.metadata_values.candidates_sql`) when they are few beside the rows FTS5 would rank;
    None otherwise (FTS5 ranks them, the filter inside its statement)."""
    found = metadata_values.candidates_sql(canon) if terms and metadata_values.ready(db) else None
    if found is None:
        return None
    sql, params = found
    holding = sum(_term_rows(db, term) for term in terms)
    most = int(holding * FILTER_SHARE)
    if db.execute(f"SELECT count(*) FROM (SELECT 1 FROM ({sql}) LIMIT ?)", [*params, most + 1]).fetchone()[0] > most:
        return None
    return ranking_over(db, terms, sql, params, k, keep=lambda md: matches_canonical(md, canon))


def _term_rows(db: sqlite3.Connection, term: str) -> int:
    """How many rows hold `term` (FTS5's own count)."""
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.rag_term_rows USING fts5vocab(main, terms, row)")
    found = db.execute("SELECT doc FROM temp.rag_term_rows WHERE term = ?", (term,)).fetchone()
    return found[0] if found else 0


def ranking_over(db: sqlite3.Connection, terms: Sequence[str], rows_sql: str, params: Sequence[Any], k: int, *,
                 keep: Callable[[Mapping[str, Any]], bool]) -> list[tuple[str, str, str, float]] | None:
    """The top `k` of the chunks numbered by `rows_sql` (a statement selecting ``n``, each once) that match one of
    `terms` and whose metadata `keep` allows, ranked as FTS5 ranks them: (id, text, metadata JSON, score = -bm25),
    best first; None when FTS5 must rank them itself."""
    if not terms or not all(_plain(term) and " " not in term for term in terms):
        return None
    db.execute("BEGIN")
    try:
        stats = _statistics(db, terms)
        if stats is None:
            return []
        rows = db.execute(f"SELECT a.n, t.c0 FROM ({rows_sql}) AS a JOIN terms_content AS t ON t.id = a.n",
                          list(params)).fetchall()
        spaced = [f" {term} " for term in terms]
        rows = [(n, text) for n, text in rows if any(term in padded for padded in (f" {text} ",) for term in spaced)]
        ranked = _scores(rows, terms, *stats)
        if ranked is None:
            return None
        ranked.sort()
        return _read(db, ranked, k, keep)
    finally:
        db.execute("COMMIT")


def _read(db: sqlite3.Connection, ranked: list[tuple[float, int]], k: int,
          keep: Callable[[Mapping[str, Any]], bool]) -> list[tuple[str, str, str, float]]:
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
            if isinstance(metadata, dict) and keep(metadata):
                out.append((id_, text, md, -rank))
                if len(out) >= k:
                    return out
    return out
