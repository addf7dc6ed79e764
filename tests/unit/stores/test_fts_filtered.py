"""A filtered FTS5 search by the indexed metadata values returns exactly what the filter on the JSON returned.

`rag.stores.metadata_values` answers a filter by index lookups inside FTS5's statement, after
membership in the filter's candidates when they are few; the JSON path (`rag.stores.sqlite_where`)
is what every filtered search did before and what a file without the values still gets. Generated
metadata, filters and texts: the same ids, the same scores to the bit, the same order.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.base.filters import matches, validate_filter
from rag.stores import metadata_values
from rag.stores.fts_index import FTSIndex
from rag.stores.sqlite_where import where_sql
from tests.unit.stores.test_fts_index import KEYS, filters

LONG = "L" * (metadata_values.MAX_TEXT + 1)
_scalars = st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5, -2.5, 2**53 + 1]),
                     st.sampled_from(["", "1", "x", "é ü", LONG, LONG[:-1]]))
_values = st.one_of(_scalars, st.none(), st.lists(st.integers(0, 2), max_size=2), st.just({"a": 1}))
metadatas = st.dictionaries(st.sampled_from(KEYS), _values, max_size=4)
long_filters = st.sampled_from(KEYS).flatmap(lambda key: st.sampled_from([
    {key: LONG}, {key: {"$ne": LONG}}, {key: {"$in": [LONG, "x"]}}, {key: {"$nin": [LONG[:-1]]}}]))
WORDS = "revenue costs growth risk margin cash debt 1,234.5 straße e-mail".split()
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


def _table(rows: list[dict]) -> sqlite3.Connection:
    import json

    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript("CREATE TABLE chunks (n INTEGER PRIMARY KEY, metadata TEXT); CREATE TABLE settings (key, value);"
                     + metadata_values.schema("chunks", "metadata"))
    for md in rows:
        db.execute("INSERT INTO chunks (metadata) VALUES (?)", (json.dumps(md),))
    return db


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(metadatas, min_size=1, max_size=8), flt=st.one_of(filters, long_filters))
def test_the_values_select_what_the_json_selects_and_the_candidates_hold_it(rows, flt):
    db, canon = _table(rows), validate_filter(flt)
    expected = [i + 1 for i, md in enumerate(rows) if matches(md, flt)]
    sql, params = where_sql(canon, "chunks.metadata")
    assert [n for n, in db.execute(f"SELECT n FROM chunks WHERE {sql} ORDER BY n", params)] == expected
    found = metadata_values.where_sql(canon, "chunks.n")
    if found is None:   # only a text operand too long for the values
        assert LONG in repr(flt)
    else:
        assert [n for n, in db.execute(f"SELECT n FROM chunks WHERE {found[0]} ORDER BY n", found[1])] == expected
    candidates = metadata_values.candidates_sql(canon)
    if candidates is not None:
        assert set(expected) <= {n for n, in db.execute(candidates[0], candidates[1])}


def _json_only(index: FTSIndex, query: str, k: int, flt: dict) -> tuple[list[tuple[str, float]], list[str]]:
    """The search and the chunks a filter selects as before the values: the filter on the metadata's JSON."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metadata_values, "ready", lambda db, **_: False)
        return ([(d.id, s) for d, s in index.search(query, k=k, filter=flt)],
                [d.id for d in index.get_documents(flt)])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(texts, metadatas), min_size=1, max_size=12), flt=st.one_of(filters, long_filters),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join), k=st.integers(1, 6),
       most=st.sampled_from([None, 0, 10**9]))
def test_a_filtered_search_returns_exactly_what_the_json_filter_returned(tmp_path_factory, rows, flt, query, k,
                                                                        most):
    index = FTSIndex(tmp_path_factory.mktemp("fts") / "lexical.sqlite")
    index.add([f"c{i}" for i in range(len(rows))], [t for t, _ in rows], [md for _, md in rows])
    before, selected = _json_only(index, query, k, flt)
    assert selected == [f"c{i}" for i, (_, md) in enumerate(rows) if matches(md, flt)] == [
        d.id for d in index.get_documents(flt)]
    narrowed = metadata_values.narrowed_sql
    with pytest.MonkeyPatch.context() as patch:   # None: as planned; 0: never narrowed to the candidates; 1e9: always
        if most is not None:
            patch.setattr(metadata_values, "narrowed_sql", lambda db, canon, row, _: narrowed(db, canon, row, most))
        assert [(d.id, s) for d, s in index.search(query, k=k, filter=flt)] == before
    index.close()


def test_a_file_written_before_the_values_gets_them_once(tmp_path, caplog):
    path = tmp_path / "lexical.sqlite"
    index = FTSIndex(path)
    index.add(["a", "b"], ["revenue grew", "revenue fell"], [{"year": 2023}, {"year": 2024, "doc_id": "d"}])
    index.close()
    with sqlite3.connect(path) as db:   # as a file of before: no values, no triggers
        db.executescript("DROP TABLE meta_values; DROP TRIGGER meta_chunk_added; DROP TRIGGER meta_chunk_removed; "
                         "DROP TRIGGER meta_chunk_changed; DELETE FROM settings WHERE key = 'metadata_values';")
    index = FTSIndex(path)
    assert [d.id for d, _ in index.search("revenue", filter={"year": {"$gte": 2024}})] == ["b"]
    assert "indexed the metadata values of its 2 chunks" in caplog.text
    index.add(["c"], ["revenue held"], [{"year": 2025}])   # later writes keep them
    assert [d.id for d, _ in index.search("revenue", filter={"year": 2025})] == ["c"]
    assert [d.id for d in index.get_documents({"doc_id": "d"})] == ["b"]
    index.update_metadatas(["c"], [{"year": 2026}])
    assert [d.id for d, _ in index.search("revenue", filter={"year": {"$gt": 2025}})] == ["c"]
    index.delete(["c"])
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT DISTINCT n FROM meta_values ORDER BY n").fetchall() == [(1,), (2,)]
