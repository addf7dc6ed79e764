"""`ValueIndex`: metadata value -> positions, the prefilter of the stores that match filters in Python.

`ExactVectorStore`, `FaissStore` and `BM25Index` check a portable filter against each chunk's
metadata (`rag.base.filters.matches_canonical`). Before that, the first top-level clause the index
can answer narrows the chunks to check: an `$eq` / `$in`, or an `$or` whose every branch it can
answer (the union; a principal's permission filter is one, `rag.base.acl`). The index is built per
key on first use; the permission keys (`acl_*`, one per group) all in one pass. A principal's filter
is one read-only object shared by its requests (`rag.base.filters.Filter`): `exact` remembers its
answer, so a principal of 1,000 groups costs one lookup per request, not 1,000. The arrays handed
out are read-only. It is keyed by
Python equality, so `1`, `1.0` and `True` share a bucket: the candidates are a superset of the
matches, which the caller then narrows with `matches_canonical`.

Example:
    >>> index = ValueIndex(lambda: enumerate([{"team": "a"}, {"team": "b"}, {"team": "a"}]))
    >>> index.candidates({"team": {"$in": ["a", "a"]}}).tolist()
    [0, 2]
    >>> index.candidates({"n": {"$gt": 1}}) is None
    True
    >>> index.candidates({"$or": [{"team": {"$eq": "b"}}, {"team": {"$eq": "c"}}]}).tolist()
    [1]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from rag.base.acl import ACL_PREFIX
from rag.base.filters import Filter

__all__ = ["ValueIndex"]

_SCALARS = (str, int, float, bool)


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "str" if isinstance(value, str) else "number"


_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False
#: How many `$or` filters' answers an index remembers, by identity: a principal's filter is one object shared
#: by its requests (`rag.base.acl`), answered once (each answer holds at most one position per chunk).
_ANSWERS = 32


def _frozen(positions: np.ndarray) -> np.ndarray:
    """`positions`, read-only: the index hands out its own arrays (and remembered answers), never copies."""
    positions.flags.writeable = False
    return positions


def _union(parts: list[np.ndarray]) -> np.ndarray:
    """The positions in any of `parts` (each ascending, each once), ascending and each once.

    One mark per position in a mask, not a sort: a principal's `$or` of 1,000 groups joins 1,000 lists.
    """
    parts = [part for part in parts if len(part)]
    if len(parts) <= 1:
        return parts[0] if parts else _NONE
    joined = np.concatenate(parts)
    mask = np.zeros(int(joined.max()) + 1, dtype=bool)
    mask[joined] = True
    return np.flatnonzero(mask)


class ValueIndex:
    """Per metadata key, which positions hold each value; `clear()` it when the chunks change.

    Args:
        rows: returns the (position, metadata) pairs of the chunks now held.
    """

    def __init__(self, rows: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]]) -> None:
        self._rows = rows
        self._keys: dict[str, dict[Any, np.ndarray]] = {}
        self._kinds: dict[str, set[str]] = {}
        self._answers: dict[int, tuple[Any, np.ndarray | None]] = {}   # id -> (Filter, its `exact`)

    def clear(self) -> None:
        """Forget every key's index and every remembered answer (the next lookup builds them again)."""
        self._keys.clear()
        self._kinds.clear()
        self._answers.clear()

    def positions(self, key: str) -> dict[Any, np.ndarray]:
        """Value -> positions holding it (ascending) for `key`, built once per key (every `acl_*` key at once:
        there is one per group, and a principal's filter names several)."""
        if key not in self._keys:
            acl = key.startswith(ACL_PREFIX)
            groups: dict[str, dict[Any, list[int]]] = {key: {}}
            kinds: dict[str, set[str]] = {key: set()}
            for position, metadata in self._rows():
                for name, value in (metadata.items() if acl else [(key, metadata.get(key))]):
                    if isinstance(value, _SCALARS) and (name == key or (acl and name.startswith(ACL_PREFIX)
                                                                        and name not in self._keys)):
                        groups.setdefault(name, {}).setdefault(value, []).append(position)
                        kinds.setdefault(name, set()).add(_kind(value))
            for name, values in groups.items():
                self._keys[name] = {v: _frozen(np.sort(np.array(ix, dtype=np.int64))) for v, ix in values.items()}
                self._kinds[name] = kinds[name]
        return self._keys[key]

    def exact(self, flt: Mapping[str, Any] | None) -> np.ndarray | None:
        """The positions matching a whole canonical filter, when the index alone decides it: every comparison an
        `$eq` / `$in` on a key whose values are all of the operands' kind (so `True` never stands for `1`), joined
        by `$and` / `$or`. None otherwise (the caller matches the candidates).

        Example:
            >>> index = ValueIndex(lambda: enumerate([{"a": True}, {"b": True}, {"a": 1}]))
            >>> index.exact({"$or": [{"b": {"$eq": True}}, {"c": {"$eq": True}}]}).tolist()
            [1]
            >>> index.exact({"a": {"$eq": True}}) is None    # 1 and True share a bucket
            True
        """
        if flt is None:
            return None
        if type(flt) is Filter and "$or" in flt:   # a principal's filter comes back request after request
            known = self._answers.get(id(flt))
            if known is not None and known[0] is flt:
                return known[1]
            if len(self._answers) >= _ANSWERS:
                self._answers.clear()
            found = self._exact(flt)
            found = found if found is None else _frozen(found)
            self._answers[id(flt)] = (flt, found)   # (the filter is held, so its id is not reused meanwhile)
            return found
        return self._exact(flt)

    def _exact(self, flt: Mapping[str, Any]) -> np.ndarray | None:
        (key, cond), = flt.items()
        if key in ("$and", "$or"):
            parts = [self.exact(branch) for branch in cond]
            if any(p is None for p in parts):
                return None
            if key == "$or":
                return _union(parts)
            out = parts[0]
            for part in parts[1:]:
                out = np.intersect1d(out, part, assume_unique=True)
            return out
        if key.startswith("$") or not set(cond) <= {"$eq", "$in"} or len(cond) != 1:
            return None
        values = cond["$in"] if "$in" in cond else [cond["$eq"]]
        index = self.positions(key)
        if not self._kinds[key] <= {_kind(v) for v in values} or len({_kind(v) for v in values}) != 1:
            return None if self._kinds[key] else _NONE
        return _union([index[v] for v in values if v in index])

    def candidates(self, flt: Mapping[str, Any] | None) -> np.ndarray | None:
        """Positions allowed by the first top-level clause of a canonical filter the index answers (an `$eq` /
        `$in`, or an `$or` of such clauses), ascending and each once; None when there is none (every position is
        a candidate)."""
        if flt is None:
            return None
        for clause in flt.get("$and", [flt]):
            found = self._clause(clause)
            if found is not None:
                return found
        return None

    def _clause(self, clause: Mapping[str, Any]) -> np.ndarray | None:
        (key, cond), = clause.items()
        if key == "$or":
            parts = [self._clause(branch) for branch in cond]
            if any(p is None for p in parts):
                return None
            return _union(parts)
        if key.startswith("$") or not set(cond) <= {"$eq", "$in"}:
            return None
        values = cond["$in"] if "$in" in cond else [cond["$eq"]]
        index = self.positions(key)
        return _union([index[v] for v in values if isinstance(v, _SCALARS) and v in index])
