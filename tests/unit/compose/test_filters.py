from __future__ import annotations

import chromadb
import pytest

from rag.base.errors import FilterError
from rag.base.filters import and_filters, matches, validate_filter
from rag.stores.chroma_where import to_chroma_where

DOCS = [
    {"id": "a", "type": "edito", "year": 2020, "lang": "fr"},
    {"id": "b", "type": "news", "year": 2024, "lang": "en"},
    {"id": "c", "type": "edito", "year": 2025, "lang": "en"},
    {"id": "d", "type": "news", "year": 2026},
]

FILTERS = [
    {"type": "edito"},
    {"year": {"$gt": 2024}},
    {"year": {"$gte": 2024, "$lt": 2026}},
    {"type": "edito", "lang": "en"},
    {"lang": {"$ne": "en"}},
    {"year": {"$in": [2020, 2026]}},
    {"year": {"$nin": [2020, 2026]}},
    {"$or": [{"type": "edito"}]},
    {"$and": [{"type": "news"}]},
    {"$or": [{"year": {"$lte": 2020}}, {"lang": "en", "type": "edito"}]},
    {"$not": {"type": "edito"}},
    {"$not": {"$or": [{"year": 2020}, {"year": {"$gt": 2025}}]}},
    {"$not": {"year": {"$gte": 2021, "$lte": 2025}}},
    {"$and": [{"$or": [{"type": "news"}, {"lang": "fr"}]}, {"year": {"$lt": 2026}}]},
]


def test_unknown_operator_lists_valid_ones():
    with pytest.raises(FilterError, match=r"unknown operator '\$gtt'.*\$eq, \$ne, \$gt"):
        validate_filter({"year": {"$gtt": 2024}})


def test_unknown_logical_operator_is_rejected():
    with pytest.raises(FilterError, match=r"unknown operator '\$xor'"):
        validate_filter({"$xor": [{"a": 1}, {"b": 2}]})


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"year": {"$in": []}}, "non-empty list"),
        ({"$and": {"a": 1}}, "non-empty list"),
        ({"$or": []}, "non-empty list"),
        ({"year": None}, "None is not a valid value"),
        ({"year": {"$eq": None}}, "None is not a valid value"),
        ({"year": {"$gt": "2024"}}, "ordering needs a number"),
        ({"year": {}}, "empty condition"),
        ({"year": [2020, 2021]}, "list"),
        ({"tags": {"$in": [["nested"]]}}, "list"),
        ("year=2024", "must be a dict"),
    ],
)
def test_invalid_filters_say_what_is_wrong(bad, message):
    with pytest.raises(FilterError, match=message):
        validate_filter(bad)


def test_filter_errors_are_value_errors():
    with pytest.raises(ValueError):
        validate_filter({"x": {"$bad": 1}})


def test_empty_filter_means_no_filter():
    assert validate_filter({}) is None and validate_filter(None) is None
    assert to_chroma_where({}) is None


def test_implicit_and_becomes_explicit():
    assert to_chroma_where({"type": "edito", "lang": "en"}) == {
        "$and": [{"type": {"$eq": "edito"}}, {"lang": {"$eq": "en"}}]
    }


def test_single_clause_or_is_unwrapped_for_chroma():
    assert to_chroma_where({"$or": [{"type": "edito"}]}) == {"type": {"$eq": "edito"}}


def test_not_is_pushed_down_with_de_morgan():
    assert to_chroma_where({"$not": {"$or": [{"a": 1}, {"b": {"$lt": 3}}]}}) == {
        "$and": [{"a": {"$ne": 1}}, {"b": {"$gte": 3}}]
    }


def test_and_filters_combines_and_skips_empty():
    assert and_filters({"tenant": "t1"}, {}, {"year": 2024}) == {
        "$and": [{"tenant": {"$eq": "t1"}}, {"year": {"$eq": 2024}}]
    }
    assert and_filters(None, {}) is None


@pytest.fixture(scope="module")
def collection():
    client = chromadb.EphemeralClient()
    col = client.get_or_create_collection("filters-test", metadata={"hnsw:space": "cosine"})
    col.add(ids=[d["id"] for d in DOCS], documents=[d["id"] for d in DOCS],
            metadatas=[{k: v for k, v in d.items() if k != "id"} for d in DOCS],
            embeddings=[[1.0, float(i)] for i in range(len(DOCS))])
    return col


@pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
def test_python_matching_agrees_with_real_chroma(collection, flt):
    expected = sorted(d["id"] for d in DOCS if matches({k: v for k, v in d.items() if k != "id"}, flt))
    got = sorted(collection.get(where=to_chroma_where(flt))["ids"])
    assert got == expected
    assert expected, "each fixture filter should select something"


def test_missing_field_never_matches_a_comparison():
    assert not matches({}, {"year": {"$gt": 1}})
    assert matches({}, {"year": {"$ne": 1}})
    assert not matches({"year": "2024"}, {"year": {"$gt": 1}})
