"""The portable filter as a SQLite `WHERE` over a JSON metadata column (JSON1's `json_each`).

The lexical index of the embedded default (`rag.stores.fts_index`) keeps each chunk's metadata as
a JSON object in one text column and applies the caller's filter inside its full-text query. This
module translates a canonical filter (`rag.base.filters.validate_filter`) after pushing its
negations down (`normal_form`), with the semantics of `rag.base.filters.matches`:

    $eq / $in       EXISTS (a member with this key whose JSON type is the operand's kind and whose value equals it)
    $ne / $nin      NOT EXISTS (the same): true on a missing key, as in Chroma
    $gt ...         EXISTS (a member with this key, a JSON number, compared with the operand)

Kinds never mix: a JSON ``true`` is not the number 1, the text ``"1"`` is not the number 1, and
1 equals 1.0. Keys are matched as `json_each`'s ``key`` column, so any key (dots, quotes,
brackets) works without a JSON path; keys and values are bound parameters, never spliced in.

Example:
    >>> from rag.base.filters import validate_filter
    >>> sql, params = where_sql(validate_filter({"year": {"$gt": 2020}}), "metadata")
    >>> print(sql)
    EXISTS (SELECT 1 FROM json_each(metadata) AS j WHERE j.key = ? AND j.type IN ('integer', 'real') AND j.atom > ?)
    >>> params
    ['year', 2020]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rag.base.filters import Comparison, normal_form

__all__ = ["ORDER", "boolean_sql", "exists_sql", "where_sql"]

#: the orderings and their SQL operators
ORDER = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def where_sql(canon: dict[str, Any], column: str) -> tuple[str, list[Any]]:
    """The SQL condition for the canonical filter `canon` over the JSON column `column`, and its parameters
    (in order). `column` is the caller's own column name, never user input."""
    params: list[Any] = []
    return _node(normal_form(canon), column, params), params


def _node(node: Any, column: str, params: list[Any]) -> str:
    return boolean_sql(node, lambda cmp: exists_sql(cmp, params, rows=f"json_each({column}) AS j", key="j.key",
                                                    number="j.type IN ('integer', 'real') AND j.atom", same=_same))


def boolean_sql(node: Any, comparison: Callable[[Comparison], str]) -> str:
    """A normal-form filter node as SQL: its comparisons by `comparison`, joined by AND / OR as the node says."""
    if isinstance(node, Comparison):
        return comparison(node)
    (op, parts), = node.items()
    return "(" + f" {op[1:].upper()} ".join(boolean_sql(part, comparison) for part in parts) + ")"


def exists_sql(cmp: Comparison, params: list[Any], *, rows: str, key: str, number: str,
               same: Callable[[Any, list[Any]], str]) -> str:
    """One comparison as ``[NOT] EXISTS`` a row of `rows` whose `key` column is the field (a bound parameter) and
    whose value passes: an ordering on `number` (the value, when it is a number), an equality by `same` (the
    value is the operand, of its kind); ``$ne`` / ``$nin`` are the negation, so true on a missing key."""
    params.append(cmp.field)
    if cmp.op in ORDER:
        params.append(cmp.value)
        test = f"{number} {ORDER[cmp.op]} ?"
    else:
        values = cmp.value if cmp.op in ("$in", "$nin") else [cmp.value]
        test = "(" + " OR ".join(same(v, params) for v in values) + ")"
    exists = f"EXISTS (SELECT 1 FROM {rows} WHERE {key} = ? AND {test})"
    return f"NOT {exists}" if cmp.op in ("$ne", "$nin") else exists


def _same(value: Any, params: list[Any]) -> str:
    """The member's value is `value`, of the same kind (booleans are not numbers)."""
    if isinstance(value, bool):
        return f"j.type = '{'true' if value else 'false'}'"
    params.append(value)
    if isinstance(value, str):
        return "(j.type = 'text' AND j.atom = ?)"
    return "(j.type IN ('integer', 'real') AND j.atom = ?)"
