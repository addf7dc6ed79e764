"""Where an FTS5 query's time goes: one statement at a time over an index `bench/scale_query.py --lexical-only` built.

CPU time (`time.process_time()`, p50 of the first 30 of `scale_query`'s questions) of statements that
do part of what the lexical search does: iterating the matches, returning their row ids, reading each
one's length, `bm25()` over 1% of them (a condition on the row id), `bm25()` over all of them with the
top 20 kept (what `FTSIndex` runs), and the same through FTS5's `rank` column. `--detail N` also
copies the first N chunks' tokens into three scratch tables (``detail=full``, ``column``, ``none``)
and compares their CPU time and top 20.

    python bench/fts_profile.py /tmp/lex/n-1000000/lexical.sqlite [--detail 50000]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STATEMENTS = {
    "iterate the matches (count)": "SELECT count(*) FROM terms WHERE terms MATCH ?",
    "return their row ids": "SELECT rowid FROM terms WHERE terms MATCH ?",
    "read each one's length": "SELECT sum(length(d.sz)) FROM terms JOIN terms_docsize AS d ON d.id = terms.rowid "
                              "WHERE terms MATCH ?",
    "bm25() over 1% of them, top 20": "SELECT rowid, bm25(terms) AS r FROM terms WHERE terms MATCH ? "
                                      "AND (+rowid) % 100 = 0 ORDER BY r LIMIT 20",
    "bm25() over all, top 20 (the search)": "SELECT rowid, bm25(terms) AS r FROM terms WHERE terms MATCH ? "
                                            "ORDER BY r, rowid LIMIT 20",
    "the rank column, top 20": "SELECT rowid, rank FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT 20",
}


def cpu_p50(db: sqlite3.Connection, sql: str, matches: list[str]) -> tuple[float, list]:
    times, last = [], []
    for match in matches:
        started = time.process_time()
        last = db.execute(sql, [match]).fetchall()
        times.append((time.process_time() - started) * 1000)
    return round(statistics.median(times), 2), last


def main(argv: list[str] | None = None) -> int:
    from bench.scale_query import _questions
    from rag.stores.fts_index import FTSIndex

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path")
    parser.add_argument("--detail", type=int, default=0, help="compare detail= settings over this many chunks")
    args = parser.parse_args(argv)
    index = FTSIndex(args.path)
    matches = [m for m in (index._match(q) for q in _questions()[:30]) if m]
    db = index._db()
    for label, sql in STATEMENTS.items():
        ms, rows = cpu_p50(db, sql, matches)
        print(f"{label:40s} {ms:8.2f} ms  ({len(rows)} rows for the last question)")
    print(f"chunks holding a term of the last question: {db.execute(STATEMENTS['iterate the matches (count)'], [matches[-1]]).fetchone()[0]}")
    if args.detail:
        rows = db.execute("SELECT id, c0 FROM terms_content ORDER BY id LIMIT ?", [args.detail]).fetchall()
        scratch = sqlite3.connect(Path(tempfile.mkdtemp()) / "detail.sqlite", isolation_level=None)
        tokenizer = "tokenize = \"unicode61 remove_diacritics 0 tokenchars '.,'\""
        top: dict[str, list] = {}
        for name, option in (("full", ""), ("column", ", detail=column"), ("none", ", detail=none")):
            scratch.execute(f"CREATE VIRTUAL TABLE t_{name} USING fts5 (tokens, {tokenizer}{option})")
            scratch.execute("BEGIN")
            scratch.executemany(f"INSERT INTO t_{name} (rowid, tokens) VALUES (?, ?)", rows)
            scratch.execute("COMMIT")
            sql = f"SELECT rowid, bm25(t_{name}) AS r FROM t_{name} WHERE t_{name} MATCH ? ORDER BY r, rowid LIMIT 20"
            times, top[name] = [], []
            for match in matches:
                started = time.process_time()
                top[name].append([r for r, _ in scratch.execute(sql, [match])])
                times.append((time.process_time() - started) * 1000)
            size = scratch.execute(f"SELECT sum(length(block)) FROM t_{name}_data").fetchone()[0] / 2**20
            same = sum(a == b for a, b in zip(top[name], top["full"], strict=True))
            print(f"detail={name:6s} {statistics.median(times):8.2f} ms  index {size:.0f} MB  "
                  f"same top 20 as detail=full: {same}/{len(matches)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
