"""The portable metadata filter dialect: validate, match in Python, put in normal form for the backends.

One dialect for every backend, modelled on Chroma/Mongo::

    {"type": "edito"}                                  implicit equality
    {"year": {"$gt": 2024}}                            $eq $ne $gt $gte $lt $lte $in $nin
    {"$and": [{...}, {...}]}, {"$or": [...]}, {"$not": {...}}
    {"type": "edito", "year": {"$gte": 2020, "$lt": 2025}}   several keys = implicit $and

Validation happens before anything runs, so a typo never silently returns everything.

Example:
    >>> f = validate_filter({"year": {"$gt": 2024}, "type": "edito"})
    >>> f
    {'$and': [{'year': {'$gt': 2024}}, {'type': {'$eq': 'edito'}}]}
    >>> matches({"year": 2025, "type": "edito"}, f)
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from rag.base.errors import FilterError, short_repr
from rag.base.validated_filter import Filter, ReadOnlyDict, ReadOnlyList, measure

__all__ = [
    "COMPARISON_OPERATORS",
    "LOGICAL_OPERATORS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_SIZE",
    "Comparison",
    "Filter",
    "ReadOnlyDict",
    "ReadOnlyList",
    "and_filters",
    "matches",
    "matches_canonical",
    "normal_form",
    "validate_filter",
]

COMPARISON_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
LOGICAL_OPERATORS = ("$and", "$or", "$not")
_VALID = ", ".join(COMPARISON_OPERATORS + LOGICAL_OPERATORS)
_SCALARS = (str, int, float, bool)
_INT64 = (-(2**63), 2**63 - 1)
#: How deep `$and` / `$or` / `$not` may nest (a filter with no logical operator has depth 1).
MAX_FILTER_DEPTH = 32
#: How many conditions (field names and operators) and list values a filter may hold in all.
MAX_FILTER_SIZE = 4096
_NEGATION = {"$eq": "$ne", "$ne": "$eq", "$gt": "$lte", "$gte": "$lt", "$lt": "$gte",
             "$lte": "$gt", "$in": "$nin", "$nin": "$in"}


def validate_filter(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Check a filter and return it in canonical form (every comparison explicit).

    Besides the operators, validation enforces what every backend can store and compare:
    values are finite numbers (no NaN or +-Infinity), integers fit in 64 bits, strings are valid
    Unicode (no lone surrogates), an `$in` / `$nin` list holds one kind of value (strings, booleans
    or numbers), logical operators nest at most `MAX_FILTER_DEPTH` levels and a filter has at most
    `MAX_FILTER_SIZE` conditions and list values in all.

    Args:
        flt: a filter in the portable dialect, or None / {} for no filter.

    Returns:
        The canonical filter, or None when there is nothing to filter on.

    Raises:
        FilterError: with the path of the bad part and the valid operators; nothing else,
            whatever the input.

    Example:
        >>> validate_filter({"type": "edito"})
        {'type': {'$eq': 'edito'}}
    """
    if flt is None or type(flt) is Filter:   # a filter this function returned: trusted as it is
        return flt
    if not isinstance(flt, Mapping):
        raise FilterError(f"a filter must be a dict, got {type(flt).__name__}: {short_repr(flt)}")
    if not flt:
        return None
    canonical = _Canon().canon(flt, "filter", 1)
    return Filter(canonical, *measure(canonical, 1))


class _Canon:
    """One validation pass; counts the filter's size as it goes."""

    def __init__(self) -> None:
        self.size = 0

    def grow(self, n: int, path: str) -> None:
        self.size += n
        if self.size > MAX_FILTER_SIZE:
            raise FilterError(f"{path}: the filter has more than {MAX_FILTER_SIZE} conditions and list values; "
                              "split the query or filter on a coarser field")

    def canon(self, flt: Any, path: str, depth: int) -> dict[str, Any]:
        if depth > MAX_FILTER_DEPTH:
            raise FilterError(f"{path}: the filter nests more than {MAX_FILTER_DEPTH} levels of $and / $or / $not")
        if not isinstance(flt, Mapping) or not flt:
            raise FilterError(f"{path}: expected a non-empty dict of conditions, got {short_repr(flt)}")
        clauses = []
        for key, value in flt.items():
            if not isinstance(key, str) or not key:
                raise FilterError(f"{path}: field names must be non-empty strings, got {short_repr(key)}")
            _check_text(key, path, "field name")
            self.grow(1, path)
            if key.startswith("$"):
                clauses.append(self.logical(key, value, f"{path}.{key}", depth))
            else:
                clauses.append({key: self.field(value, f"{path}.{key}")})
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def logical(self, op: str, value: Any, path: str, depth: int) -> dict[str, Any]:
        if op == "$not":
            return {"$not": self.canon(value, path, depth + 1)}
        if op not in ("$and", "$or"):
            raise FilterError(f"{path}: unknown operator {short_repr(op)}; valid: {_VALID}")
        if not isinstance(value, list) or not value:
            raise FilterError(f"{path}: {op} takes a non-empty list of filters, got {short_repr(value)}")
        self.grow(len(value), path)
        return {op: [self.canon(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]}

    def field(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            return {"$eq": _check_scalar(value, path)}
        if not value:
            raise FilterError(f"{path}: empty condition; use an operator, valid: {_VALID}")
        out = {}
        for op, operand in value.items():
            if op not in COMPARISON_OPERATORS:
                raise FilterError(f"{path}: unknown operator {short_repr(op)}; valid: {', '.join(COMPARISON_OPERATORS)}")
            if op in ("$in", "$nin"):
                if not isinstance(operand, list | tuple) or not operand:
                    raise FilterError(f"{path}.{op}: expected a non-empty list of values, got {short_repr(operand)}")
                self.grow(len(operand), path)
                out[op] = _check_list([_check_scalar(v, f"{path}.{op}[{i}]") for i, v in enumerate(operand)],
                                      f"{path}.{op}")
            else:
                out[op] = _check_scalar(operand, f"{path}.{op}")
                if op in ("$gt", "$gte", "$lt", "$lte") and isinstance(operand, bool | str):
                    raise FilterError(f"{path}.{op}: ordering needs a number, got {short_repr(operand)}")
        return out


def _check_scalar(value: Any, path: str) -> Any:
    if value is None:
        raise FilterError(f"{path}: None is not a valid value; valid values are str, int, float, bool")
    if not isinstance(value, _SCALARS):
        raise FilterError(f"{path}: {short_repr(value)} is a {type(value).__name__}; "
                          "valid values are str, int, float, bool")
    if isinstance(value, float) and not math.isfinite(value):
        raise FilterError(f"{path}: {value!r} is not a finite number; NaN and +-Infinity cannot be compared")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        raise FilterError(f"{path}: {short_repr(value)} does not fit in a 64-bit integer; "
                          f"valid: {_INT64[0]}..{_INT64[1]}")
    if isinstance(value, str):
        _check_text(value, path, "value")
    return value


def _check_text(text: str, path: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FilterError(f"{path}: the {what} {short_repr(text)} is not valid Unicode (a lone surrogate at "
                          f"position {exc.start}); send UTF-8 text") from None


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "str" if isinstance(value, str) else "number"


def _check_list(values: list[Any], path: str) -> list[Any]:
    kinds = sorted({_kind(v) for v in values})
    if len(kinds) > 1:
        raise FilterError(f"{path}: the list mixes {' and '.join(kinds)} values; use one kind per list "
                          "(strings, booleans or numbers), or $or two conditions")
    return values


def and_filters(*filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Combine filters with $and, skipping empty ones (used for server-side tenant filters).

    Example:
        >>> and_filters({"tenant": "a"}, None)
        {'tenant': {'$eq': 'a'}}
    """
    present = [validate_filter(f) for f in filters]   # a `Filter` is taken as it is
    present = [f for f in present if f]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    # what validating {"$and": present} would count: one operator, one item per part, the parts themselves
    depth, size = 1 + max(f.depth for f in present), 1 + len(present) + sum(f.size for f in present)
    if depth > MAX_FILTER_DEPTH:
        raise FilterError(f"filter.$and: the filter nests more than {MAX_FILTER_DEPTH} levels of $and / $or / $not")
    if size > MAX_FILTER_SIZE:
        raise FilterError(f"filter.$and: the filter has more than {MAX_FILTER_SIZE} conditions and list values; "
                          "split the query or filter on a coarser field")
    return Filter({"$and": ReadOnlyList(present)}, depth, size)


def matches(metadata: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Evaluate a filter against one document's metadata in Python.

    A comparison on a missing field, or between incomparable types, is false ($ne / $nin are
    true for a missing field, as in Chroma). Booleans are not numbers (`True` never equals `1`),
    and `$not` negates each comparison inside it, as in Chroma: `{"$not": {"year": {"$gt": 2024}}}`
    means `year <= 2024`, which a document without a year does not match.

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


class Comparison(NamedTuple):
    """One comparison of a filter in normal form: `field op value` (op is one of `COMPARISON_OPERATORS`)."""

    field: str
    op: str
    value: Any


def normal_form(canon: dict[str, Any]) -> dict[str, Any] | Comparison:
    """A canonical filter with every `$not` pushed down to the comparisons, as `matches` reads it.

    What store translations start from: only `{"$and": [...]}`, `{"$or": [...]}` and `Comparison`
    remain, so a backend needs the eight comparisons and two connectives, and a negated comparison
    is its opposite operator (`$not` of `$gt` is `$lte`, false on a missing field, as in Chroma).

    Example:
        >>> normal_form(validate_filter({"$not": {"a": 1, "b": {"$gt": 2}}}))
        {'$or': [Comparison(field='a', op='$ne', value=1), Comparison(field='b', op='$lte', value=2)]}
    """
    return _normal(canon, negate=False)


def _normal(flt: dict[str, Any], *, negate: bool) -> dict[str, Any] | Comparison:
    (key, value), = flt.items()
    if key == "$not":
        return _normal(value, negate=not negate)
    if key in ("$and", "$or"):
        op = key if not negate else ("$or" if key == "$and" else "$and")
        parts = [_normal(item, negate=negate) for item in value]
        return parts[0] if len(parts) == 1 else {op: parts}
    parts = [Comparison(key, _NEGATION[o] if negate else o, v) for o, v in value.items()]
    return parts[0] if len(parts) == 1 else {("$or" if negate else "$and"): parts}


def _match(md: Mapping[str, Any], flt: dict[str, Any], negate: bool = False) -> bool:
    # Negation is pushed down to the comparisons exactly as `rag.stores.chroma_where.to_chroma_where` does, so Python
    # matching and Chroma agree on every filter (an ordering never matches a missing field).
    (key, value), = flt.items()
    if key == "$not":
        return _match(md, value, not negate)
    if key in ("$and", "$or"):
        every = (key == "$and") != negate
        results = (_match(md, f, negate) for f in value)
        return all(results) if every else any(results)
    present = key in md
    actual = md.get(key)
    results = (_compare(_NEGATION[op] if negate else op, present, actual, operand) for op, operand in value.items())
    return any(results) if negate else all(results)


def _same(actual: Any, operand: Any) -> bool:
    # Booleans are not numbers here (as in Chroma): True never equals 1.
    return isinstance(actual, _SCALARS) and _kind(actual) == _kind(operand) and actual == operand


def _compare(op: str, present: bool, actual: Any, operand: Any) -> bool:
    if op == "$ne":
        return not present or not _same(actual, operand)
    if op == "$nin":
        return not present or not any(_same(actual, v) for v in operand)
    if not present:
        return False
    if op == "$eq":
        return _same(actual, operand)
    if op == "$in":
        return any(_same(actual, v) for v in operand)
    if isinstance(actual, bool) or not isinstance(actual, int | float):
        return False
    return {"$gt": actual > operand, "$gte": actual >= operand,
            "$lt": actual < operand, "$lte": actual <= operand}[op]
