"""The portable filter (`rag.base.filters`) as Chroma's `where`: `to_chroma_where`.

Chroma needs one key per dict, at least two clauses in `$and`/`$or`, and has no `$not`: negations
are pushed down to the comparisons (De Morgan). Chroma compares an integer field with a float
value truncated, so each comparison with a fractional value gets a clause that cancels the error.

Example:
    >>> to_chroma_where({"year": {"$gt": 2024}, "type": "edito"})
    {'$and': [{'year': {'$gt': 2024}}, {'type': {'$eq': 'edito'}}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag.base.filters import Comparison, normal_form, validate_filter

__all__ = ["chroma_where_from_canonical", "to_chroma_where"]

def to_chroma_where(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Translate a filter to Chroma's `where`, working around what Chroma rejects.

    Chroma needs one key per dict, at least two clauses in `$and`/`$or`, and has no `$not`;
    negations are pushed down to the comparisons (De Morgan).

    Example:
        >>> to_chroma_where({"$not": {"year": {"$in": [2020, 2021]}}})
        {'year': {'$nin': [2020, 2021]}}
    """
    canon = validate_filter(flt)
    return None if canon is None else chroma_where_from_canonical(canon)


def chroma_where_from_canonical(canon: dict[str, Any]) -> dict[str, Any]:
    """`to_chroma_where` for a filter already returned by `validate_filter` (no second validation)."""
    return _to_chroma(normal_form(canon))


def _to_chroma(node: dict[str, Any] | Comparison) -> dict[str, Any]:
    """A node of `normal_form` (negations already pushed down, no one-clause `$and`/`$or`) as Chroma `where`."""
    if isinstance(node, Comparison):
        return _chroma_compare(node.field, node.op, node.value)
    (op, parts), = node.items()
    return _nested(op, [_to_chroma(part) for part in parts])


#: Chroma joins an `$and` / `$or` list as a chain of binary SQL expressions, and SQLite refuses one more than
#: 1,000 deep ("Expression tree is too large"): a longer list is nested in groups of this many.
_FAN = 32


def _nested(op: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """`{op: parts}`, a long list nested in groups of `_FAN` (a principal of 1,000 groups is one `$or`).

    Example:
        >>> where = _nested("$or", [{f"g{i}": {"$eq": True}} for i in range(1000)])
        >>> len(where["$or"]), len(where["$or"][0]["$or"]), len(where["$or"][-1]["$or"]), where["$or"][0]["$or"][0]
        (32, 32, 8, {'g0': {'$eq': True}})
    """
    while len(parts) > _FAN:
        parts = [{op: parts[i:i + _FAN]} if len(parts) - i > 1 else parts[i] for i in range(0, len(parts), _FAN)]
    return {op: parts}


def _fractional(value: Any) -> bool:
    return isinstance(value, float) and not value.is_integer()


# Chroma compares an integer field with int(value) (truncated toward zero) when the value is a
# float: {"a": {"$gte": 2.5}} matches a = 2. Each comparison with a fractional value is paired
# with a clause on that truncated integer that cancels the error on integer fields and changes
# nothing on float fields: (join, extra operator), per operator and the value's sign.
_FRACTION_FIX: dict[tuple[str, bool], tuple[str, str] | None] = {
    ("$eq", True): ("$and", "$ne"), ("$eq", False): ("$and", "$ne"),
    ("$ne", True): ("$or", "$eq"), ("$ne", False): ("$or", "$eq"),
    ("$gt", True): None, ("$gt", False): ("$or", "$eq"),
    ("$gte", True): ("$and", "$ne"), ("$gte", False): None,
    ("$lt", True): ("$or", "$eq"), ("$lt", False): None,
    ("$lte", True): None, ("$lte", False): ("$and", "$ne"),
}


def _chroma_compare(key: str, op: str, value: Any) -> dict[str, Any]:
    """One comparison as Chroma `where`, exact on integer and float fields alike (see `_FRACTION_FIX`).

    Example:
        >>> _chroma_compare("a", "$gte", 2.5)
        {'$and': [{'a': {'$gte': 2.5}}, {'a': {'$ne': 2}}]}
        >>> _chroma_compare("a", "$in", [1, 2.5])
        {'$or': [{'$and': [{'a': {'$eq': 2.5}}, {'a': {'$ne': 2}}]}, {'a': {'$in': [1]}}]}
    """
    if isinstance(value, list):
        fractions = [v for v in value if _fractional(v)]
        rest = [v for v in value if not _fractional(v)]
        if not fractions:
            # Chroma wants one type per list; a list of ints and floats is compared as floats.
            return {key: {op: [float(v) for v in rest] if {type(v) for v in rest} == {int, float} else rest}}
        one = "$eq" if op == "$in" else "$ne"
        parts = [_chroma_compare(key, one, v) for v in fractions]
        if rest:
            parts.append(_chroma_compare(key, op, [float(v) if isinstance(v, float) else v for v in rest]))
        return parts[0] if len(parts) == 1 else {("$or" if op == "$in" else "$and"): parts}
    fix = _FRACTION_FIX.get((op, value > 0)) if _fractional(value) else None
    if fix is None:
        return {key: {op: value}}
    join, extra = fix
    return {join: [{key: {op: value}}, {key: {extra: int(value)}}]}
