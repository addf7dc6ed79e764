"""The filter dialect under generated input: it accepts or raises FilterError, and agrees with Chroma.

Example counts are fixed (see `settings` below) so the run is the same size in CI every time.
"""

from __future__ import annotations

import itertools
import json
import math

import chromadb
import pytest
from hypothesis import HealthCheck, given, settings

from rag.base.errors import MAX_MESSAGE_CHARS, FilterError
from rag.base.filters import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_SIZE,
    matches,
    validate_filter,
)
from rag.stores.chroma_where import to_chroma_where
from tests.unit.hostile import (
    any_json,
    hostile_filters,
    metadatas,
    nested,
    valid_filters,
)

_names = (f"prop-{i}" for i in itertools.count())


@settings(max_examples=400, deadline=None)
@given(any_json)
def test_validation_raises_nothing_but_filter_error(flt):
    try:
        canon = validate_filter(flt)
    except FilterError as err:
        assert len(str(err)) <= MAX_MESSAGE_CHARS
        return
    if canon is not None:  # an accepted filter translates and matches without error
        to_chroma_where(canon)
        matches({"a": 1, "b": "x"}, canon)


@settings(max_examples=300, deadline=None)
@given(hostile_filters)
def test_reported_classes_of_hostile_filters_are_filter_errors(flt):
    with pytest.raises(FilterError) as info:
        validate_filter(flt)
    assert len(str(info.value)) <= MAX_MESSAGE_CHARS
    str(info.value).encode("utf-8")  # the message itself is printable (surrogates are escaped)


@pytest.fixture(scope="module")
def chroma():
    return chromadb.EphemeralClient()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(flt=valid_filters, docs=metadatas)
def test_python_matching_agrees_with_real_chroma_on_every_accepted_filter(chroma, flt, docs):
    try:
        canon = validate_filter(flt)
    except FilterError:
        return
    collection = chroma.create_collection(next(_names), metadata={"hnsw:space": "cosine"})
    try:
        rows = [{**md, "i": i} for i, md in enumerate(docs)]  # Chroma refuses empty metadata
        collection.add(ids=[str(i) for i in range(len(rows))], embeddings=[[1.0, float(i)] for i in range(len(rows))],
                       metadatas=rows)
        expected = sorted(str(i) for i, md in enumerate(rows) if matches(md, canon))
        assert sorted(collection.get(where=to_chroma_where(canon))["ids"]) == expected
    finally:
        chroma.delete_collection(collection.name)


# ------------------------------------------------------------------ regression tests, one per reported class
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("shape", [lambda v: {"x": v}, lambda v: {"x": {"$gt": v}}, lambda v: {"x": {"$in": [1.5, v]}},
                                   lambda v: {"$or": [{"y": 1}, {"x": {"$ne": v}}]}])
def test_non_finite_numbers_are_rejected(shape, value):
    with pytest.raises(FilterError, match="not a finite number"):
        validate_filter(shape(value))


def test_non_finite_numbers_from_json_literals_are_rejected():
    for literal in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(FilterError, match="finite"):
            validate_filter(json.loads(f'{{"year": {{"$lt": {literal}}}}}'))


@pytest.mark.parametrize("values", [[1, "a"], ["a", True], [True, 1], [0, False], ["2024", 2024, 2025.0]])
def test_in_lists_mixing_kinds_are_rejected_with_the_valid_kinds(values):
    for op in ("$in", "$nin"):
        with pytest.raises(FilterError, match="mixes .* values; use one kind per list"):
            validate_filter({"year": {op: values}})


def test_in_lists_mixing_ints_and_floats_are_numbers_and_reach_chroma_as_floats():
    assert to_chroma_where({"x": {"$in": [1, 2.0]}}) == {"x": {"$in": [1.0, 2.0]}}
    # a fractional value gets its own exact clause (see test_fractional_values_compare_exactly...)
    assert to_chroma_where({"x": {"$in": [1, 2.5]}}) == {
        "$or": [{"$and": [{"x": {"$eq": 2.5}}, {"x": {"$ne": 2}}]}, {"x": {"$in": [1]}}]}
    assert matches({"x": 1}, {"x": {"$in": [1, 2.5]}}) and matches({"x": 2.5}, {"x": {"$in": [1, 2.5]}})


@pytest.mark.parametrize("flt", [{"a\ud800": 1}, {"a": "x\udfff"}, {"a": {"$in": ["ok", "\udc80"]}},
                                 {"$or": [{"a": 1}, {"b": {"$ne": "\ud83d"}}]}])
def test_lone_surrogates_in_keys_or_values_are_rejected(flt):
    with pytest.raises(FilterError, match="lone surrogate"):
        validate_filter(flt)


def test_valid_astral_characters_are_accepted():
    assert validate_filter({"emoji": "\U0001f600"}) == {"emoji": {"$eq": "\U0001f600"}}


@pytest.mark.parametrize("op", ["$and", "$or", "$not"])
def test_nesting_is_bounded_at_the_documented_depth(op):
    assert validate_filter(nested(MAX_FILTER_DEPTH - 1, op)) is not None
    for depth in (MAX_FILTER_DEPTH, 300, 100_000):
        with pytest.raises(FilterError, match=f"more than {MAX_FILTER_DEPTH} levels"):
            validate_filter(nested(depth, op))


def test_size_is_bounded_for_wide_filters_and_long_lists():
    assert validate_filter({"id": {"$in": list(range(MAX_FILTER_SIZE - 2))}})
    with pytest.raises(FilterError, match=f"more than {MAX_FILTER_SIZE} conditions"):
        validate_filter({"id": {"$in": list(range(MAX_FILTER_SIZE + 1))}})
    with pytest.raises(FilterError, match=f"more than {MAX_FILTER_SIZE} conditions"):
        validate_filter({"$or": [{"a": i} for i in range(MAX_FILTER_SIZE)]})
    with pytest.raises(FilterError, match=f"more than {MAX_FILTER_SIZE} conditions"):
        validate_filter({f"f{i}": i for i in range(MAX_FILTER_SIZE + 1)})


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_integers_outside_64_bits_are_rejected(value):
    with pytest.raises(FilterError, match="64-bit"):
        validate_filter({"x": {"$lt": value}})


@pytest.mark.parametrize("huge", ["x" * 10_000_000, ["y"] * 1_000_000, {"k" * 100_000: {"n": [1] * 100_000}}])
def test_values_quoted_in_errors_are_truncated(huge):
    with pytest.raises(FilterError) as info:
        validate_filter({"x": {"$gt": huge}})
    assert len(str(info.value)) <= 300


def test_booleans_are_not_numbers_as_in_chroma():
    assert not matches({"x": True}, {"x": 1}) and not matches({"x": 1}, {"x": True})
    assert matches({"x": True}, {"x": {"$ne": 1}}) and matches({"x": 1.0}, {"x": 1})


def test_not_over_an_ordering_is_its_complement_only_where_the_field_is_a_number():
    assert matches({"x": 1}, {"$not": {"x": {"$gt": 5}}})
    assert not matches({}, {"$not": {"x": {"$gt": 5}}}) and not matches({"x": "a"}, {"$not": {"x": {"$gt": 5}}})
    assert math.isfinite(validate_filter({"x": {"$gt": 1e308}})["x"]["$gt"])


@pytest.mark.parametrize("op", ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"])
@pytest.mark.parametrize("value", [2.5, -2.5, 0.5, -0.5, 2.9, 1e-9])
def test_fractional_values_compare_exactly_with_integer_and_float_fields(chroma, op, value):
    # Chroma alone compares an integer field with int(value): {"a": {"$gte": 2.5}} would match a = 2.
    operand = [value, 7] if op in ("$in", "$nin") else value
    flt = {"a": {op: operand}}
    collection = chroma.create_collection(next(_names), metadata={"hnsw:space": "cosine"})
    try:
        rows = [{"a": a, "i": i} for i, a in enumerate([-3, -2, -1, 0, 1, 2, 3, 7, -2.5, 2.5, 2.0, 0.5])]
        rows.append({"i": len(rows)})  # no `a`: $ne / $nin are true, the rest false
        collection.add(ids=[str(r["i"]) for r in rows], embeddings=[[1.0, float(r["i"])] for r in rows], metadatas=rows)
        expected = sorted(str(r["i"]) for r in rows if matches(r, flt))
        assert sorted(collection.get(where=to_chroma_where(flt))["ids"]) == expected
    finally:
        chroma.delete_collection(collection.name)


def _plain(flt):
    return json.loads(json.dumps(flt))   # the same filter as plain dicts: what a door receives


@settings(max_examples=200, deadline=None)
@given(valid_filters, valid_filters)
def test_a_validated_filter_is_taken_as_is_and_combines_as_validating_again_would(first, second):
    """A `Filter` (what validation returned) is trusted by later stages: nothing they would have
    rejected or changed by validating it again gets through or changes (values, depth, size, errors)."""
    from rag.base.filters import Filter, and_filters

    canon = validate_filter(first)
    if canon is None:
        return
    assert type(canon) is Filter and validate_filter(canon) is canon
    again = validate_filter(_plain(canon))
    assert again == canon and (again.depth, again.size) == (canon.depth, canon.size)
    other = validate_filter(second)
    try:
        combined = and_filters(canon, other, canon)
    except FilterError:
        with pytest.raises(FilterError):   # validating the combination as plain dicts says the same
            validate_filter({"$and": [_plain(part) for part in (canon, other, canon) if part]})
        return
    fresh = validate_filter(_plain(combined))
    assert combined == fresh and (combined.depth, combined.size) == (fresh.depth, fresh.size)


@pytest.mark.parametrize("op", ["$and", "$or", "$not"])
def test_combining_validated_filters_keeps_the_depth_limit(op):
    from rag.base.filters import and_filters

    deepest = nested(MAX_FILTER_DEPTH - 1, op)   # at the limit: accepted alone
    assert validate_filter(deepest) is not None
    with pytest.raises(FilterError, match="nests more than"):
        and_filters(validate_filter(deepest), {"tenant": "acme"})   # one level more, as validating it would say
