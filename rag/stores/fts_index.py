"""`FTSIndex`: a knowledge base's lexical index in SQLite FTS5, written with its chunks, searched with `bm25()`.

The embedded default keeps its chunks in Chroma, which runs on SQLite; its lexical index lives next
to them, in one SQLite file of the knowledge base's folder (``lexical.sqlite``), and is written
chunk by chunk in the same write path as the vectors (`rag.stores.lexical_chunks`): adding a file
inserts its chunks' rows, deleting one deletes them. Nothing is rebuilt after a change and no
process reads every chunk's text to search or to start: a search is one SQL statement.

- **Tokens.** A chunk's text, with the metadata fields named in `metadata_fields` (title and
  section by default) before it, is tokenised by `rag.base.text.tokenize` (lowercase, stop words
  dropped, Snowball stems: the tokens of the in-process `BM25Index`), and the tokens, joined by
  spaces, are what FTS5 indexes (``unicode61`` with ``.`` and ``,`` as token characters, so a
  token such as ``1,234.5`` stays one). A query is tokenised the same way; its distinct tokens are
  OR-ed.
- **Ranking.** FTS5's ``bm25()`` (Okapi BM25, k1 = 1.2, b = 0.75, over the same tokens); the score
  is ``-bm25()`` (higher is better), ties broken by insertion order.
- **Filter.** The caller's portable filter is a condition of the same statement on each match, before
  `bm25()` ranks it: one index lookup per comparison in the chunk's metadata values, and first, when
  the filter's candidates are fewer than the matches, membership in them (`rag.stores.metadata_values`,
  written with the chunk; its JSON, `rag.stores.sqlite_where`, where they cannot say): a filtered
  search returns `k` matching chunks whenever `k` match.
- **Chunks.** Each row keeps the chunk's id, text and metadata, so the index is also a chunk
  source (`get_documents`, `chunks_of` for neighbours, by an index on ``(doc_id, chunk_index)``).

Readers and the writer are separate connections (one per thread, WAL journal): a process serving
questions sees another process's writes at its next query, without a restart.

Example:
    >>> import tempfile, pathlib
    >>> index = FTSIndex(pathlib.Path(tempfile.mkdtemp()) / "lexical.sqlite")
    >>> index.add(["a", "b"], ["Revenue grew 5%.", "Costs fell."], [{"year": 2023}, {"year": 2024}])
    >>> [d.page_content for d, _ in index.search("revenues", k=2)]
    ['Revenue grew 5%.']
    >>> index.search("revenue", k=2, filter={"year": 2024})
    []
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.base.filters import validate_filter
from rag.base.text import tokenize
from rag.stores import metadata_values, permission_index
from rag.stores.fts_file import count_in, open_index_file, transaction
from rag.stores.fts_permitted import permitted_ranking
from rag.stores.permission_plan import PermissionPlan, exact_too_many, note_exact, planned_search

__all__ = ["DEFAULT_FIELDS", "FORMAT", "FTSIndex"]

#: what a file written by this module says it is (another value: built again)
FORMAT = "rag-fts5/1"
#: the metadata fields indexed with each chunk's text by default (as knowledge bases' BM25 does)
DEFAULT_FIELDS = ("title", "section")
_BATCH = 500
#: `rag.stores.permission_plan.planned_search`'s candidate_cost here: reading one more ranked chunk (its text and
#: metadata) costs about as much as FTS5 checking N permission comparisons on one matching chunk inside the
#: statement (a `json_each` each). Measured at 100,000 chunks: see docs/benchmarks.md "Document permissions".
FTS_CANDIDATE_COST = 20
#: a deeper ranked list costs FTS5 one more ranking of every match (about what the plain search costs) and little per
#: row beyond it, and only the rows needed are read: ask for 3x what the share of permitted hits says (fewer rounds)
FTS_SLACK = 3.0
#: and each deeper list ranks every match again: about what checking 2 permission comparisons per chunk costs
#: (the plain search of bench/acl.py, ~175 ms at 100,000 chunks, and a principal of no group's native filter, +175 ms)
FTS_ROUND_COST = 2.0
#: a principal the search over its own chunks declined (it may read more than `EXACT_SHARE`) gets a first list deep
#: enough to hold `k` permitted chunks plus this many standard deviations of a random draw at its share: each further
#: list ranks every match again (+76 ms a request at 43% of 100,000 chunks, bench/acl.py), where a row more in the
#: first costs a read by row number (about 8 us)
FTS_FIRST_SIGMAS = 3.0
#: ... for a principal whose share is at least this (a smaller one's first list would be long: the plan's own rounds)
FTS_FIRST_MIN_SHARE = 0.25


class FTSIndex:
    """A lexical index of chunks in one SQLite file (see the module docstring).

    Args:
        path: the SQLite file (created with its tables on first use).
        metadata_fields: metadata keys whose values are indexed with each chunk's text.
        stem, stop_words: the tokenizer's settings (`rag.base.text.tokenize`).

    Raises:
        StoreError: (on first use) the file is a symlink or cannot be opened; `DamagedStoreError`: it is not
            an index of this format, or was built with other settings.
    """

    def __init__(self, path: str | Path, *, metadata_fields: Sequence[str] = DEFAULT_FIELDS, stem: bool = True,
                 stop_words: bool = True) -> None:
        if isinstance(metadata_fields, str):
            raise ConfigError("metadata_fields must be a list of keys, not a single string")
        self.path = Path(path)
        #: how messages name it
        self.where = f"SQLite FTS5 ({self.path.name})"
        self.metadata_fields, self.stem, self.stop_words = tuple(metadata_fields), bool(stem), bool(stop_words)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._shares: dict[int, tuple[Any, float]] = {}   # id(permission filter) -> (it, the share its keys hold)

    # ------------------------------------------------------------------ connections
    def settings(self) -> dict[str, Any]:
        """What the tokens depend on; a file built with other settings is not this index."""
        return {"format": FORMAT, "metadata_fields": list(self.metadata_fields), "stem": self.stem,
                "stop_words": self.stop_words}

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = open_index_file(self.path, self.settings(), self.where)
            with self._guard:
                self._connections.append(db)
        return db

    @staticmethod
    def count_in(db: sqlite3.Connection) -> int:
        return count_in(db)

    def close(self) -> None:
        """Close every connection this object opened (one per thread that used it)."""
        with self._guard:
            connections, self._connections = self._connections, []
        for db in connections:
            db.close()
        self._local = threading.local()

    # ------------------------------------------------------------------ writing (under the writer lock)
    def tokens(self, text: str, metadata: dict[str, Any] | None = None) -> str:
        """The indexed tokens of a chunk (its fields first), joined by spaces."""
        metadata = metadata or {}
        extra = " ".join(str(metadata[f]) for f in self.metadata_fields if metadata.get(f) is not None)
        return " ".join(tokenize(f"{extra} {text}" if extra else text, stem=self.stem, stop_words=self.stop_words))

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Write chunks (a chunk already indexed under its id is replaced), in one transaction."""
        rows = list(zip(ids, texts, metadatas, strict=True))
        if not rows:
            return
        db = self._db()
        with transaction(db):
            for start in range(0, len(rows), _BATCH):
                part = rows[start:start + _BATCH]
                self._delete(db, [r[0] for r in part])
                # the row numbers SQLite would give one insert at a time (the largest + 1), given here so that each
                # table takes its rows in one statement
                first = db.execute("SELECT coalesce(max(n), 0) + 1 FROM chunks").fetchone()[0]
                chunks, terms = [], []
                for n, (id_, text, metadata) in enumerate(part, first):
                    metadata = dict(metadata or {})
                    chunks.append((n, str(id_), _text_or_none(metadata.get("doc_id")),
                                   _int_or_none(metadata.get("chunk_index")), text, json.dumps(metadata, default=str)))
                    terms.append((n, self.tokens(text, metadata)))
                db.executemany("INSERT INTO chunks (n, id, doc_id, chunk_index, text, metadata) "
                               "VALUES (?, ?, ?, ?, ?, ?)", chunks)
                db.executemany("INSERT INTO terms (rowid, tokens) VALUES (?, ?)", terms)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete chunks by id (ids not indexed are ignored)."""
        if not len(ids):
            return
        db = self._db()
        with transaction(db):
            for start in range(0, len(ids), _BATCH):
                self._delete(db, [str(i) for i in ids[start:start + _BATCH]])

    def _delete(self, db: sqlite3.Connection, ids: list[str]) -> None:
        marks = ",".join("?" * len(ids))
        found = [r[0] for r in db.execute(f"SELECT n FROM chunks WHERE id IN ({marks})", ids)]
        if found:
            rows = ",".join("?" * len(found))
            db.execute(f"DELETE FROM terms WHERE rowid IN ({rows})", found)
            db.execute(f"DELETE FROM chunks WHERE n IN ({rows})", found)

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace chunks' metadata by id (their tokens follow: the title is indexed with the text)."""
        new = dict(zip(map(str, ids), metadatas, strict=True))
        found = self.get_by_ids(list(new))
        self.add([d.id for d in found], [d.page_content for d in found], [new[d.id] for d in found])

    def clear(self) -> None:
        """Delete every chunk (a store replaced by an empty one)."""
        db = self._db()
        with transaction(db):
            db.execute("DELETE FROM terms")
            db.execute("DELETE FROM chunks")

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        """How many chunks it holds."""
        return self.count_in(self._db())

    def ids(self) -> list[str]:
        """The ids of every chunk it holds."""
        return [row[0] for row in self._db().execute("SELECT id FROM chunks")]

    def __len__(self) -> int:
        return self.count()

    def _terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(tokenize(query, stem=self.stem, stop_words=self.stop_words)))

    def _match(self, query: str) -> str | None:
        terms = self._terms(query)
        return " OR ".join(f'"{t}"' for t in terms) if terms else None

    def search(self, query: str, *, k: int = 4,
               filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The top-`k` chunks for `query` among those the portable `filter` allows, as (document, score), best
        first; ``metadata["scores"] == {"bm25": score}``.

        A principal's permission conditions are checked in Python on the best-ranked matches of the request's
        own conditions (`rag.stores.permission_plan`): inside the statement they cost a `json_each` per
        matching chunk and group (+0.2 s for a principal of no group, +0.8 s of 5, at 100,000 chunks)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        canon = validate_filter(filter)
        match = self._match(query)
        if match is None:
            return []
        plan = PermissionPlan.of(canon)
        if plan is None:
            return self._ranked(match, canon, k)
        exact = self._permitted(query, plan, k)
        if exact is not None:
            return exact
        hits, _ = planned_search(
            plan, k, search=lambda n: (found := self._ranked(match, plan.rest, n), len(found)),
            ranked=lambda n: self._ranked(match, plan.rest, n, ids_only=True), read=self.get_by_ids,
            native=lambda: self._ranked(match, canon, k), stored=self.count, candidate_cost=FTS_CANDIDATE_COST,
            slack=FTS_SLACK, round_cost=FTS_ROUND_COST, memo=self, first=self._first_depth(plan, k))
        return [(_scored(doc, score), score) for doc, score in hits]

    def _permitted(self, query: str, plan: PermissionPlan, k: int) -> list[tuple[Document, float]] | None:
        """The search over the chunks a principal who may read few may read (`rag.stores.fts_permitted`), or None
        (another filter shape, a principal who may read many, tokens FTS5 must read itself)."""
        keys = plan.keys
        if keys is None or exact_too_many(self, plan) or not permission_index.ready(db := self._db()):
            return None
        start = time.perf_counter()
        most, stored = permission_index.share(db, keys)
        if len(self._shares) > 256:
            self._shares.clear()
        self._shares[id(plan.permission)] = (plan.permission, most / stored if stored else 1.0)
        if most > permission_index.EXACT_SHARE * stored:
            exact_too_many(self, plan, now=True)
            return None
        rows = permitted_ranking(db, self._terms(query), keys, k, keep=plan.allows, rest=plan.rest)
        if rows is None:
            return None
        note_exact(most, start)
        return [(_document(id_, text, md, score), score) for id_, text, md, score in rows]

    def _first_depth(self, plan: PermissionPlan, k: int) -> int | None:
        """How deep the first list of a principal whose share `_permitted` looked up goes (`FTS_FIRST_SIGMAS`), or
        None (not looked up, or under `FTS_FIRST_MIN_SHARE`: the plan's own). The share is at most its keys' counts' sum, so
        the depth errs short."""
        found = self._shares.get(id(plan.permission))
        if found is None or found[0] is not plan.permission or found[1] < FTS_FIRST_MIN_SHARE:
            return None   # (a smaller share's list would be long: the plan's rounds, or its native filter)
        return math.ceil((k + FTS_FIRST_SIGMAS * math.sqrt(k) + 4) / min(found[1], 1.0))

    def _ranked(self, match: str, canon: dict[str, Any] | None, k: int, *, ids_only: bool = False) -> list[Any]:
        """The top `k` matches the filter allows: (document, score), or (id, score) with `ids_only`."""
        # ranked first on row numbers alone, the text read for the top k only (sorting every match with its text
        # costs 50x more); the filter, when there is one, is a condition on each match before bm25() ranks it
        where, params, db = "", [], self._db()
        if canon is not None:
            matches = db.execute("SELECT count(*) FROM terms WHERE terms MATCH ?", (match,)).fetchone()[0]
            where, params = metadata_values.narrowed_sql(db, canon, "terms.rowid", matches)
        joined = f"WHERE terms MATCH ? AND {where}" if where else "WHERE terms MATCH ?"
        columns = "c.id, r.rank" if ids_only else "c.id, c.text, c.metadata, r.rank"
        sql = (f"SELECT {columns} FROM (SELECT terms.rowid AS n, bm25(terms) AS rank FROM terms "
               f"{joined} ORDER BY rank, terms.rowid LIMIT ?) AS r JOIN chunks AS c ON c.n = r.n ORDER BY r.rank, r.n")
        rows = db.execute(sql, [match, *params, k]).fetchall()
        if ids_only:
            return [(id_, -rank) for id_, rank in rows]
        return [(_document(id_, text, metadata, -rank), -rank) for id_, text, metadata, rank in rows]

    def search_documents(self, query: str, *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """`search` (the name every lexical index of `rag.retrieval` answers to)."""
        return self.search(query, k=k, filter=filter)

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word` (what document routing weighs a name by)."""
        match = self._match(word)
        if match is None:
            return Counter()
        rows = self._db().execute("SELECT c.doc_id, count(*) FROM terms JOIN chunks AS c ON c.n = terms.rowid "
                                  "WHERE terms MATCH ? GROUP BY c.doc_id", (match,))
        return Counter({doc_id: n for doc_id, n in rows})

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The indexed chunks with these ids."""
        out: list[Document] = []
        for start in range(0, len(ids), _BATCH):
            part = [str(i) for i in ids[start:start + _BATCH]]
            out += self._documents(f"SELECT id, text, metadata FROM chunks WHERE id IN ({','.join('?' * len(part))}) "
                                   "ORDER BY n", part)
        return out

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching a portable filter (all when None), in the order they were indexed."""
        canon = validate_filter(filter)
        where, params = ("", []) if canon is None else metadata_values.filter_sql(self._db(), canon, "chunks.n")
        return self._documents(f"SELECT id, text, metadata FROM chunks {'WHERE ' + where if where else ''} ORDER BY n",
                               params)

    def chunks_of(self, doc_id: Any, start: int, end: int) -> list[Document]:
        """Chunks of `doc_id` with ``start <= chunk_index < end``, in chunk order (neighbour lookups)."""
        if not isinstance(doc_id, str):
            return []
        return self._documents("SELECT id, text, metadata FROM chunks WHERE doc_id = ? AND chunk_index >= ? "
                               "AND chunk_index < ? ORDER BY chunk_index, n", [doc_id, start, end])

    def _documents(self, sql: str, params: Iterable[Any]) -> list[Document]:
        return [_document(*row) for row in self._db().execute(sql, list(params))]


def _document(id_: str, text: str, metadata: str, score: float | None = None) -> Document:
    md = json.loads(metadata)
    if score is not None:
        md["score"] = score
        md["scores"] = {"bm25": score}
    return Document(page_content=text, metadata=md, id=id_)


def _scored(doc: Document, score: float) -> Document:
    if doc.metadata.get("scores") != {"bm25": score}:   # (a chunk read back by id for a deeper list)
        doc.metadata["score"], doc.metadata["scores"] = score, {"bm25": score}
    return doc


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
