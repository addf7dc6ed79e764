"""The portable metadata filter dialect: validate, translate to Chroma, match in Python.

One dialect for every backend, modelled on Chroma/Mongo::

    {"type": "edito"}                                  implicit equality
    {"year": {"$gt": 2024}}                            $eq $ne $gt $gte $lt $lte $in $nin
    {"$and": [{...}, {...}]}, {"$or": [...]}, {"$not": {...}}
    {"type": "edito", "year": {"$gte": 2020, "$lt": 2025}}   several keys = implicit $and

Validation happens before anything runs, so a typo never silently returns everything.

Example:
    >>> f = validate_filter({"year": {"$gt": 2024}, "type": "edito"})
    >>> to_chroma_where(f)
    {'$and': [{'year': {'$gt': 2024}}, {'type': {'$eq': 'edito'}}]}
    >>> matches({"year": 2025, "type": "edito"}, f)
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag.base.errors import FilterError

__all__ = [
    "COMPARISON_OPERATORS",
    "LOGICAL_OPERATORS",
    "and_filters",
    "chroma_where_from_canonical",
    "matches",
    "matches_canonical",
    "to_chroma_where",
    "validate_filter",
]

COMPARISON_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
LOGICAL_OPERATORS = ("$and", "$or", "$not")
_VALID = ", ".join(COMPARISON_OPERATORS + LOGICAL_OPERATORS)
_SCALARS = (str, int, float, bool)
_NEGATION = {"$eq": "$ne", "$ne": "$eq", "$gt": "$lte", "$gte": "$lt", "$lt": "$gte",
             "$lte": "$gt", "$in": "$nin", "$nin": "$in"}


def validate_filter(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Check a filter and return it in canonical form (every comparison explicit).

    Args:
        flt: a filter in the portable dialect, or None / {} for no filter.

    Returns:
        The canonical filter, or None when there is nothing to filter on.

    Raises:
        FilterError: with the path of the bad part and the valid operators.

    Example:
        >>> validate_filter({"type": "edito"})
        {'type': {'$eq': 'edito'}}
    """
    if flt is None:
        return None
    if not isinstance(flt, Mapping):
        raise FilterError(f"a filter must be a dict, got {type(flt).__name__}: {flt!r}")
    if not flt:
        return None
    return _canon(flt, "filter")


def _canon(flt: Any, path: str) -> dict[str, Any]:
    if not isinstance(flt, Mapping) or not flt:
        raise FilterError(f"{path}: expected a non-empty dict of conditions, got {flt!r}")
    clauses = []
    for key, value in flt.items():
        if not isinstance(key, str) or not key:
            raise FilterError(f"{path}: field names must be non-empty strings, got {key!r}")
        if key.startswith("$"):
            clauses.append(_canon_logical(key, value, f"{path}.{key}"))
        else:
            clauses.append({key: _canon_field(value, f"{path}.{key}")})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _canon_logical(op: str, value: Any, path: str) -> dict[str, Any]:
    if op == "$not":
        return {"$not": _canon(value, path)}
    if op not in ("$and", "$or"):
        raise FilterError(f"{path}: unknown operator {op!r}; valid: {_VALID}")
    if not isinstance(value, list) or not value:
        raise FilterError(f"{path}: {op} takes a non-empty list of filters, got {value!r}")
    return {op: [_canon(item, f"{path}[{i}]") for i, item in enumerate(value)]}


def _canon_field(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {"$eq": _check_scalar(value, path)}
    if not value:
        raise FilterError(f"{path}: empty condition; use an operator, valid: {_VALID}")
    out = {}
    for op, operand in value.items():
        if op not in COMPARISON_OPERATORS:
            raise FilterError(f"{path}: unknown operator {op!r}; valid: {', '.join(COMPARISON_OPERATORS)}")
        if op in ("$in", "$nin"):
            if not isinstance(operand, list | tuple) or not operand:
                raise FilterError(f"{path}.{op}: expected a non-empty list of values, got {operand!r}")
            out[op] = [_check_scalar(v, f"{path}.{op}") for v in operand]
        else:
            out[op] = _check_scalar(operand, f"{path}.{op}")
            if op in ("$gt", "$gte", "$lt", "$lte") and isinstance(operand, bool | str):
                raise FilterError(f"{path}.{op}: ordering needs a number, got {operand!r}")
    return out


def _check_scalar(value: Any, path: str) -> Any:
    if value is None:
        raise FilterError(f"{path}: None is not a valid value; valid values are str, int, float, bool")
    if not isinstance(value, _SCALARS):
        raise FilterError(f"{path}: {value!r} is a {type(value).__name__}; valid values are str, int, float, bool")
    return value


def and_filters(*filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Combine filters with $and, skipping empty ones (used for server-side tenant filters).

    Example:
        >>> and_filters({"tenant": "a"}, None)
        {'tenant': {'$eq': 'a'}}
    """
    present = [validate_filter(f) for f in filters]
    present = [f for f in present if f]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def to_chroma_where(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Translate a filter to Chroma's `where`, working around what Chroma rejects.

    Chroma needs one key per dict, at least two clauses in `$and`/`$or`, and has no `$not`;
    negations are pushed down to the comparisons (De Morgan).

    Example:
        >>> to_chroma_where({"$not": {"year": {"$in": [2020, 2021]}}})
        {'year': {'$nin': [2020, 2021]}}
    """
    canon = validate_filter(flt)
    return None if canon is None else _to_chroma(canon, negate=False)


def chroma_where_from_canonical(canon: dict[str, Any]) -> dict[str, Any]:
    """`to_chroma_where` for a filter already returned by `validate_filter` (no second validation)."""
    return _to_chroma(canon, negate=False)


def _to_chroma(flt: dict[str, Any], *, negate: bool) -> dict[str, Any]:
    (key, value), = flt.items()
    if key == "$not":
        return _to_chroma(value, negate=not negate)
    if key in ("$and", "$or"):
        op = key if not negate else ("$or" if key == "$and" else "$and")
        parts = [_to_chroma(item, negate=negate) for item in value]
        return parts[0] if len(parts) == 1 else {op: parts}
    ops = [{key: {(_NEGATION[o] if negate else o): v}} for o, v in value.items()]
    if len(ops) == 1:
        return ops[0]
    return {("$or" if negate else "$and"): ops}


def matches(metadata: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Evaluate a filter against one document's metadata in Python.

    A comparison on a missing field, or between incomparable types, is false ($ne / $nin are
    true for a missing field, as in Chroma).

    Example:
        >>> matches({"year": 2020}, {"year": {"$in": [2020, 2021]}})
        True
    """
    canon = validate_filter(flt)
    return True if canon is None else _match(metadata, canon)


def matches_canonical(metadata: Mapping[str, Any], canon: dict[str, Any]) -> bool:
    """`matches` for a filter already returned by `validate_filter`: no validation per document.

    Validate once, then match many documents (lexical indexes filter thousands of chunks per query).

    Example:
        >>> canon = validate_filter({"year": {"$gte": 2020}})
        >>> [matches_canonical({"year": y}, canon) for y in (2019, 2021)]
        [False, True]
    """
    return _match(metadata, canon)


def _match(md: Mapping[str, Any], flt: dict[str, Any]) -> bool:
    (key, value), = flt.items()
    if key == "$and":
        return all(_match(md, f) for f in value)
    if key == "$or":
        return any(_match(md, f) for f in value)
    if key == "$not":
        return not _match(md, value)
    present = key in md
    actual = md.get(key)
    return all(_compare(op, present, actual, operand) for op, operand in value.items())


def _compare(op: str, present: bool, actual: Any, operand: Any) -> bool:
    if op == "$ne":
        return not present or actual != operand
    if op == "$nin":
        return not present or actual not in operand
    if not present:
        return False
    if op == "$eq":
        return actual == operand
    if op == "$in":
        return actual in operand
    if isinstance(actual, bool) or not isinstance(actual, int | float):
        return False
    return {"$gt": actual > operand, "$gte": actual >= operand,
            "$lt": actual < operand, "$lte": actual <= operand}[op]
