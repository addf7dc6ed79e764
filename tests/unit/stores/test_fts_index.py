"""The embedded default's lexical index (SQLite FTS5): the filter inside its SQL is `matches`, ranking is BM25's."""

from __future__ import annotations

import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.base.filters import matches
from rag.retrieval.lexical import BM25Index
from rag.stores.fts_index import FTSIndex
from tests.unit.stores.test_store_translations import HOSTILE

KEYS = ["a", "b", "a.b", 'k"q', "k'q", "x$", "[0]", "é"]
_scalars = st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5, -2.5, 2**53 + 1]),
                     st.sampled_from(["", "1", "true", "x", *HOSTILE]))
_values = st.one_of(_scalars, st.none(), st.lists(st.integers(0, 2), max_size=2))
metadatas = st.dictionaries(st.sampled_from(KEYS), _values, max_size=4)


def _comparison(draw: st.DrawFn) -> dict:
    key, op = draw(st.sampled_from(KEYS)), draw(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte",
                                                                   "$in", "$nin"]))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return {key: {op: draw(st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1.0, 2**53])))}}
    if op in ("$in", "$nin"):
        kind = draw(st.sampled_from([st.booleans(), st.integers(-3, 3), st.sampled_from(["", "1", "x", *HOSTILE])]))
        return {key: {op: draw(st.lists(kind, min_size=1, max_size=3))}}
    return {key: {op: draw(_scalars)}}


filters = st.recursive(st.composite(_comparison)(), lambda inner: st.one_of(
    st.builds(lambda a, b: {"$and": [a, b]}, inner, inner),
    st.builds(lambda a, b: {"$or": [a, b]}, inner, inner),
    st.builds(lambda a: {"$not": a}, inner)), max_leaves=4)


def _index(tmp_path_factory, rows: list[dict]) -> FTSIndex:
    index = FTSIndex(tmp_path_factory.mktemp("fts") / "lexical.sqlite")
    index.add([str(i) for i in range(len(rows))], ["revenue grew"] * len(rows), rows)
    return index


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(metadatas, min_size=1, max_size=8), flt=filters)
def test_the_sql_filter_selects_exactly_what_matches_selects(tmp_path_factory, rows, flt):
    index = _index(tmp_path_factory, rows)
    expected = [str(i) for i, md in enumerate(rows) if matches(md, flt)]
    assert [d.id for d in index.get_documents(flt)] == expected
    found = index.search("revenue", k=len(rows), filter=flt)
    assert sorted(d.id for d, _ in found) == sorted(expected)   # inside the search, before its top k
    index.close()


def test_hostile_strings_are_values_never_syntax(tmp_path):
    index = FTSIndex(tmp_path / "lexical.sqlite")
    index.add([f"h{i}" for i in range(len(HOSTILE))], [f"{s} revenue" for s in HOSTILE],
              [{"s": s, "k'\"ey": s} for s in HOSTILE])
    for i, s in enumerate(HOSTILE):
        for flt in ({"s": s}, {"k'\"ey": s}, {"s": {"$in": [s, "none"]}}):
            assert [d.id for d, _ in index.search("revenue", k=20, filter=flt)] == [f"h{i}"]
    for query in HOSTILE + ['"', "AND OR NOT", "a* NEAR(b)", "col:x", "^x", "(", ""]:
        index.search(query, k=3)   # any text is a query: never an FTS5 syntax error


def _chunks() -> list[Document]:
    words = "revenue costs growth risk tenant margin cash debt 1,234.5 straße naïve income".split()
    return [Document(id=f"c{i}", page_content=" ".join(words[(i * j) % len(words)] for j in range(1 + i % 9)),
                     metadata={"doc_id": f"d{i % 4}", "chunk_index": i, "title": f"Report {i % 3}"})
            for i in range(120)]


def test_it_ranks_as_the_in_process_index_does_on_the_same_tokens(tmp_path):
    chunks = _chunks()
    index = FTSIndex(tmp_path / "lexical.sqlite")
    index.add([c.id for c in chunks], [c.page_content for c in chunks], [c.metadata for c in chunks])
    bm25 = BM25Index.from_documents(chunks, metadata_fields=["title", "section"])
    for query in ["revenue growth", "1,234.5 cash", "Straße", "naïve debt", "report 1 margin", "incomes"]:
        ours = [d.id for d, _ in index.search(query, k=10)]
        theirs = [d.id for d, _ in bm25.search_documents(query, k=10)]
        assert set(ours) == set(theirs), query   # same matches; k1 differs (1.2 vs 1.5), so order may
        assert index.mentions(query) == bm25.mentions(query)


def test_writes_replace_delete_and_update_chunk_by_chunk(tmp_path):
    index = FTSIndex(tmp_path / "lexical.sqlite")
    index.add(["a", "b"], ["Rome is in Italy.", "Paris is in France."], [{"doc_id": "x", "chunk_index": 0}] * 2)
    index.add(["a"], ["Lisbon is in Portugal."], [{"doc_id": "x", "chunk_index": 0}])   # same id: replaced
    assert index.count() == 2 and index.search("rome") == []
    index.update_metadatas(["b"], [{"doc_id": "y", "chunk_index": 3, "title": "Capitals"}])
    assert [d.id for d, _ in index.search("capitals")] == ["b"]
    assert [d.id for d in index.chunks_of("y", 0, 5)] == ["b"]
    index.delete(["b", "missing"])
    assert index.ids() == ["a"]
    index.clear()
    assert index.count() == 0


def test_another_connection_sees_a_write_at_its_next_query(tmp_path):
    reader, writer = FTSIndex(tmp_path / "l.sqlite"), FTSIndex(tmp_path / "l.sqlite")
    assert reader.search("lisbon") == []
    writer.add(["a"], ["Lisbon is in Portugal."], [{}])
    assert [d.id for d, _ in reader.search("lisbon")] == ["a"]
    found = []
    thread = threading.Thread(target=lambda: found.append(reader.count()))   # a connection per thread
    thread.start()
    thread.join()
    assert found == [1]


def _added_row_by_row(index: FTSIndex, ids: list[str], texts: list[str], metadatas: list[dict]) -> None:
    """What `add` wrote before it wrote a batch per statement: each chunk's row and then its tokens, one statement
    each, numbered by SQLite."""
    import json

    db = index._db()
    db.execute("BEGIN IMMEDIATE")
    index._delete(db, ids)
    for id_, text, md in zip(ids, texts, metadatas, strict=True):
        n = db.execute("INSERT INTO chunks (id, doc_id, chunk_index, text, metadata) VALUES (?, ?, ?, ?, ?)",
                       (id_, md.get("doc_id") if isinstance(md.get("doc_id"), str) else None,
                        md.get("chunk_index") if type(md.get("chunk_index")) is int else None, text,
                        json.dumps(md, default=str))).lastrowid
        db.execute("INSERT INTO terms (rowid, tokens) VALUES (?, ?)", (n, index.tokens(text, md)))
    db.execute("COMMIT")


def _rows(index: FTSIndex) -> list:
    db = index._db()
    return [db.execute("SELECT * FROM chunks ORDER BY n").fetchall(),
            db.execute("SELECT rowid, tokens FROM terms ORDER BY rowid").fetchall(),
            db.execute("SELECT * FROM meta_values ORDER BY n, key").fetchall(),
            db.execute("SELECT * FROM acl_keys ORDER BY n, key").fetchall()]


_chunk_rows = st.tuples(st.sampled_from("abcdefgh"),
                        st.sampled_from(["Rome rises", "the revenue", "1,234.5 costs", ""]),
                        metadatas.map(lambda md: {**md, "doc_id": "d", "chunk_index": 1, "acl_x": True}))
_writes = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(_chunk_rows, max_size=7, unique_by=lambda r: r[0])),
    st.tuples(st.just("delete"), st.lists(st.sampled_from("abcdefghz"), max_size=4))), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=_writes)
def test_a_batch_writes_the_rows_one_statement_per_chunk_wrote(tmp_path_factory, monkeypatch, writes):
    monkeypatch.setattr("rag.stores.fts_index._BATCH", 3)   # (several statements per add)
    folder = tmp_path_factory.mktemp("fts")
    batched, one_by_one = FTSIndex(folder / "a.sqlite"), FTSIndex(folder / "b.sqlite")
    for kind, rows in writes:
        if kind == "delete":
            batched.delete(rows)
            one_by_one.delete(rows)
            continue
        ids, texts, mds = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
        batched.add(ids, texts, mds)
        for start in range(0, len(rows), 3):
            _added_row_by_row(one_by_one, ids[start:start + 3], texts[start:start + 3], mds[start:start + 3])
    assert _rows(batched) == _rows(one_by_one)
    batched.close()
    one_by_one.close()
