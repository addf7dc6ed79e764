"""`PGLexical`: a pgvector knowledge base's lexical index in PostgreSQL, in the chunks' own table, ranked by BM25.

The chunks' table gets two columns: ``rag_tokens``, a ``tsvector`` of the chunk's tokens (title,
section and text tokenised by `rag.base.text.tokenize`, the tokens of the in-process `BM25Index`,
written as lexemes with their positions, so PostgreSQL's parser never re-splits them) with a GIN
index, and ``rag_length``, the number of tokens. Triggers on the table keep, in the same
transaction as each statement's changes (per statement, from its transition tables: a batch's terms
are one grouped upsert), the document frequency of every term (``<table>_rag_terms``) and the number
and total length of the indexed rows (``<table>_rag_stats``). A search is one SQL
statement: the GIN index selects the rows holding a query term, among those the caller's filter
allows (`rag.stores.pgvector.where_clause`, inside the same statement), and they are scored with
Okapi BM25 as `BM25Index` scores, with the parameters of the other engines' indexes (k1 = 1.2, b = 0.75,
idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, each query term once). Nothing is read whole, nothing is rebuilt after a change, and every
process that opens the table sees every write at its next query.

Writes: the knowledge base writes the rows (vectors, text, metadata) through `PGVectorStore`, then
their tokens (`LexicalChunks`, `rag.stores.lexical_chunks`); a row deleted takes its tokens with it.
A row whose tokens were not written (a write cut short, a table filled before this index existed)
has ``rag_tokens IS NULL``: its count differs from the table's, and the knowledge base fills the
missing ones at its next search (`rag.indexing.lexical_sync`).
"""

from __future__ import annotations

import json
import math
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, StoreError
from rag.base.filters import validate_filter
from rag.base.text import tokenize
from rag.stores.fts_index import DEFAULT_FIELDS
from rag.stores.in_store_lexical import B, K1, InStoreLexical
from rag.stores.pgvector import _execute, _ident, _in_one_transaction, _inner, _rows, where_clause

__all__ = ["PGLexical", "tsvector_literal"]

_ID_TYPES = {"uuid": "uuid", "text": "text", "character varying": "varchar", "bigint": "bigint", "integer": "integer"}
_BATCH = 500


def _lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(tokens: Sequence[str]) -> str:
    """A ``tsvector`` of exactly these lexemes, each with its positions (so its count is the term frequency).

    Example:
        >>> tsvector_literal(["revenu", "grew", "revenu"])
        "'revenu':1,3 'grew':2"
    """
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens[:16383], start=1):   # (PostgreSQL's largest position)
        positions.setdefault(token, []).append(i)
    return " ".join(f"{_lexeme(t)}:{','.join(map(str, p[:256]))}" for t, p in positions.items())


class PGLexical(InStoreLexical):
    """The lexical index in a `PGVectorStore`'s table (see the module docstring).

    Args:
        chunks: the table's `rag.stores.pgvector.PGVectorChunks`.
        metadata_fields: metadata keys indexed with each chunk's text.
    """

    def __init__(self, chunks: Any, *, metadata_fields: Sequence[str] = DEFAULT_FIELDS) -> None:
        super().__init__(chunks, metadata_fields=metadata_fields)
        self.stem = self.stop_words = True
        self.vs = _inner(chunks.store)
        if not self.vs.metadata_json_column or self.vs.metadata_columns:
            raise ConfigError("pgvector lexical search needs all metadata in the JSON column")
        table = f"{_ident(self.vs.schema_name)}.{_ident(self.vs.table_name)}"
        self.table = table
        #: how messages name it
        self.where = f"PostgreSQL full-text search (the table {self.vs.schema_name}.{self.vs.table_name})"
        self._names = {"terms": _ident(f"{self.vs.table_name}_rag_terms"),
                       "stats": _ident(f"{self.vs.table_name}_rag_stats"),
                       "count": _ident(f"{self.vs.table_name}_rag_count"),
                       "tokens_index": _ident(f"{self.vs.table_name}_rag_tokens"),
                       "schema": _ident(self.vs.schema_name)}
        self._id_type: str | None = None
        self._ready = False

    # ------------------------------------------------------------------ SQL helpers
    def _run(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        if not self._ready:
            self.ensure()
        return self.chunks.store._engine._run_as_sync(_rows(self.vs, sql, params or {}))

    def _write(self, sql: str, rows: list[dict[str, Any]]) -> None:
        if not self._ready:
            self.ensure()
        if rows:
            self.chunks.store._engine._run_as_sync(_execute(self.vs, sql, rows))

    def _t(self, name: str) -> str:
        return f"{self._names['schema']}.{self._names[name]}"

    def ensure(self) -> PGLexical:
        """Add the columns, the GIN index, the term and stats tables and the triggers, unless the table has them.

        The triggers are per statement (with its transition tables): a batch's tokens are one `UPDATE` and its
        terms' document frequencies one grouped upsert, where the triggers of earlier versions (per row, replaced
        here in one transaction) upserted every term of every row.
        """
        self._ready = True   # (the statements below run through _run / _write)
        found = self._run("SELECT count(*) AS n FROM pg_trigger WHERE tgrelid = CAST(:table AS regclass) AND "
                          "tgname = :name", {"table": self.table, "name": f"{self.vs.table_name}_rag_upd"})
        if found[0]["n"]:
            return self
        n = self._names
        delta = f"""
    INSERT INTO {self._t('terms')} AS t (term, df)
      SELECT lexeme, sum(d) FROM ({{rows}}) AS x GROUP BY lexeme HAVING sum(d) <> 0 ORDER BY lexeme
      ON CONFLICT (term) DO UPDATE SET df = t.df + EXCLUDED.df;
    UPDATE {self._t('stats')} AS s SET n = s.n + x.n, total = s.total + x.total
      FROM (SELECT coalesce(sum(d), 0) AS n, coalesce(sum(d * len), 0) AS total FROM ({{lengths}}) AS y) AS x
      WHERE s.one = 1;"""
        new_rows = "SELECT u.lexeme, 1 AS d FROM rag_new AS r, unnest(r.rag_tokens) AS u"
        old_rows = "SELECT u.lexeme, -1 AS d FROM rag_old AS r, unnest(r.rag_tokens) AS u"
        new_lengths = "SELECT 1 AS d, rag_length AS len FROM rag_new WHERE rag_tokens IS NOT NULL"
        old_lengths = "SELECT -1 AS d, rag_length AS len FROM rag_old WHERE rag_tokens IS NOT NULL"
        function = f"""
CREATE OR REPLACE FUNCTION {self._t('count')}() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
  IF TG_OP = 'INSERT' THEN{delta.format(rows=new_rows, lengths=new_lengths)}
  ELSIF TG_OP = 'DELETE' THEN{delta.format(rows=old_rows, lengths=old_lengths)}
  ELSE{delta.format(rows=f"{new_rows} UNION ALL {old_rows}", lengths=f"{new_lengths} UNION ALL {old_lengths}")}
  END IF;
  RETURN NULL;
END $body$"""
        statements = [
            f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS rag_tokens tsvector",
            f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS rag_length integer",
            f"CREATE INDEX IF NOT EXISTS {n['tokens_index']} ON {self.table} USING gin (rag_tokens)",
            f"CREATE TABLE IF NOT EXISTS {self._t('terms')} (term text PRIMARY KEY, df bigint NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self._t('stats')} (one integer PRIMARY KEY, n bigint NOT NULL, "
            "total bigint NOT NULL)",
            f"INSERT INTO {self._t('stats')} VALUES (1, 0, 0) ON CONFLICT DO NOTHING",
            function,
            f"DROP TRIGGER IF EXISTS {n['count']} ON {self.table}",   # (the per-row trigger of earlier versions)
        ]
        for event, name, tables in (("INSERT", "ins", "NEW TABLE AS rag_new"), ("DELETE", "del", "OLD TABLE AS rag_old"),
                                    ("UPDATE", "upd", "OLD TABLE AS rag_old NEW TABLE AS rag_new")):
            trigger = _ident(f"{self.vs.table_name}_rag_{name}")
            statements += [f"DROP TRIGGER IF EXISTS {trigger} ON {self.table}",
                           f"CREATE TRIGGER {trigger} AFTER {event} ON {self.table} REFERENCING {tables} "
                           f"FOR EACH STATEMENT EXECUTE FUNCTION {self._t('count')}()"]
        self.chunks.store._engine._run_as_sync(_in_one_transaction(self.vs, statements))
        return self

    def _id(self) -> str:
        if self._id_type is None:
            found = self._run("SELECT data_type FROM information_schema.columns WHERE table_schema = :s AND "
                              "table_name = :t AND column_name = :c",
                              {"s": self.vs.schema_name, "t": self.vs.table_name, "c": self.vs.id_column})
            kind = found[0]["data_type"] if found else "text"
            if kind not in _ID_TYPES:
                raise StoreError(f"pgvector lexical search: the id column is a {kind}, not one of {sorted(_ID_TYPES)}")
            self._id_type = _ID_TYPES[kind]
        return self._id_type

    def _ours(self, stored: Any) -> str:
        text = str(stored)
        return uuid.UUID(text).hex if self._id() == "uuid" and self.chunks.hex_ids else text

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Write the tokens of rows already written (by id)."""
        rows = []
        for id_, text, metadata in zip(ids, texts, metadatas, strict=True):
            tokens = self.tokens(text, dict(metadata or {}))
            rows.append({"id": str(id_), "tokens": tsvector_literal(tokens), "length": len(tokens)})
        sql = (f"UPDATE {self.table} AS t SET rag_tokens = CAST(v.tokens AS tsvector), rag_length = v.length "
               "FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS text[]), CAST(:lengths AS integer[])) "
               f"AS v(id, tokens, length) WHERE t.{_ident(self.vs.id_column)} = CAST(v.id AS {self._id()})")
        for start in range(0, len(rows), _BATCH):   # (one statement a batch: the triggers run once for it)
            part = rows[start:start + _BATCH]
            self._write(sql, [{"ids": [r["id"] for r in part], "tokens": [r["tokens"] for r in part],
                               "lengths": [r["length"] for r in part]}])

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        return int(self._run(f"SELECT count(*) AS n FROM {self.table} WHERE rag_tokens IS NOT NULL")[0]["n"])

    def ids(self) -> list[str]:
        rows = self._run(f"SELECT {_ident(self.vs.id_column)} AS id FROM {self.table} WHERE rag_tokens IS NOT NULL")
        return [self._ours(r["id"]) for r in rows]

    def _terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(tokenize(query)))

    def _rare_terms(self, terms: list[str]) -> tuple[list[str], float]:
        """The query terms held by at most half the rows, and the most the others can add to any row's score, when
        both kinds are there (else ``([], 0)``).

        A row holding none of the rare terms scores at most the sum of the common terms' largest contributions,
        ``idf * (k1 + 1)`` each (a term frequency without bound in a row of no length): when the k-th best score
        among the rows holding a rare term is above that, no other row can rank, and the common terms' rows (a
        pass over most of the table) are never scored. Exact, or the search over every term's rows."""
        found = self._run(f"SELECT t.term, t.df, s.n FROM {self._t('terms')} t, {self._t('stats')} s "
                          "WHERE t.term = ANY(:terms) AND t.df > 0", {"terms": terms})
        common = [r for r in found if 2 * int(r["df"]) > int(r["n"])]
        common_terms = {r["term"] for r in common}
        rare = [t for t in terms if t not in common_terms]
        if not common or not rare:
            return [], 0.0
        bound = sum(math.log(1 + (int(r["n"]) - int(r["df"]) + 0.5) / (int(r["df"]) + 0.5)) * (K1 + 1) for r in common)
        return rare, bound * 1.01 + 1e-9   # (a margin: the statistics may move between the two statements)

    def search(self, query: str, *, k: int = 4,
               filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The top-`k` chunks for `query` among those the portable `filter` allows, BM25-scored, best first
        (the rows holding only very common terms are skipped when they cannot rank: `_rare_terms`)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        canon = validate_filter(filter)
        terms = self._terms(query)
        if not terms:
            return []
        where, params = ("", {}) if canon is None else where_clause(canon, json_column=self.vs.metadata_json_column)
        idc, content, md = (_ident(c) for c in (self.vs.id_column, self.vs.content_column,
                                                 self.vs.metadata_json_column))
        sql = (f"WITH s AS (SELECT n, CASE WHEN n > 0 THEN total::float8 / n ELSE 1 END AS avg FROM {self._t('stats')}), "
               f"q AS (SELECT t.term, ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS idf FROM {self._t('terms')} t, s "
               "WHERE t.term = ANY(:terms) AND t.df > 0), "
               f"c AS (SELECT {idc} AS id, rag_tokens, rag_length FROM {self.table} "
               f"WHERE rag_tokens @@ CAST(:query AS tsquery) {'AND ' + where if where else ''}), "
               "r AS (SELECT c.id, sum(q.idf * (cardinality(u.positions) * (:k1 + 1)) / (cardinality(u.positions) + "
               ":k1 * (1 - :b + :b * c.rag_length / s.avg))) AS score FROM c CROSS JOIN s "
               # only the query's lexemes are unnested: marked by setweight and kept by ts_filter, in C, where
               # unnesting each row's whole tsvector sent every lexeme of it through the join (2.2x the time)
               "CROSS JOIN LATERAL unnest(ts_filter(setweight(setweight(c.rag_tokens, 'D'), 'A', "
               "CAST(:terms AS text[])), '{a}')) AS u JOIN q ON q.term = u.lexeme GROUP BY c.id "
               "ORDER BY score DESC, c.id LIMIT :limit_k) "
               f"SELECT r.id, r.score, t.{content} AS content, t.{md} AS metadata FROM r JOIN {self.table} t "
               f"ON t.{idc} = r.id ORDER BY r.score DESC, r.id")
        args = {**params, "terms": terms, "k1": K1, "b": B, "limit_k": k}
        rare, bound = self._rare_terms(terms)
        rows = None
        if rare:   # the rows holding a rare term, scored on every term; exact when the k-th beats the common terms'
            rows = self._run(sql, {**args, "query": " | ".join(map(_lexeme, rare))})
            if len(rows) < k or float(rows[-1]["score"]) <= bound:
                rows = None
        if rows is None:
            rows = self._run(sql, {**args, "query": " | ".join(map(_lexeme, terms))})
        out = []
        for row in rows:
            metadata = dict(row["metadata"] or {}) if not isinstance(row["metadata"], str) else json.loads(row["metadata"])
            score = float(row["score"])
            doc = Document(page_content=row["content"], metadata={**metadata, "score": score,
                                                                   "scores": {"bm25": score}}, id=self._ours(row["id"]))
            out.append((doc, score))
        return out

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word`."""
        terms = self._terms(word)
        if not terms:
            return Counter()
        md = _ident(self.vs.metadata_json_column)
        rows = self._run(f"SELECT {md} ->> 'doc_id' AS doc_id, count(*) AS n FROM {self.table} "
                         "WHERE rag_tokens @@ CAST(:query AS tsquery) GROUP BY 1",
                         {"query": " | ".join(map(_lexeme, terms))})
        return Counter({r["doc_id"]: int(r["n"]) for r in rows})
