"""`ValueIndex`: metadata value -> positions, the prefilter of the stores that match filters in Python.

`ExactVectorStore`, `FaissStore` and `BM25Index` check a portable filter against each chunk's
metadata (`rag.base.filters.matches_canonical`). Before that, the first top-level `$eq` / `$in`
clause of the filter narrows the chunks to check through this index, built per key on first use.
It is keyed by Python equality, so `1`, `1.0` and `True` share a bucket: the candidates are a
superset of the matches, which the caller then narrows with `matches_canonical`.

Example:
    >>> index = ValueIndex(lambda: enumerate([{"team": "a"}, {"team": "b"}, {"team": "a"}]))
    >>> index.candidates({"team": {"$in": ["a", "a"]}}).tolist()
    [0, 2]
    >>> index.candidates({"n": {"$gt": 1}}) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["ValueIndex"]

_SCALARS = (str, int, float, bool)


class ValueIndex:
    """Per metadata key, which positions hold each value; `clear()` it when the chunks change.

    Args:
        rows: returns the (position, metadata) pairs of the chunks now held.
    """

    def __init__(self, rows: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]]) -> None:
        self._rows = rows
        self._keys: dict[str, dict[Any, np.ndarray]] = {}

    def clear(self) -> None:
        """Forget every key's index (the next lookup builds it again)."""
        self._keys.clear()

    def positions(self, key: str) -> dict[Any, np.ndarray]:
        """Value -> positions holding it (ascending) for `key`, built once per key."""
        if key not in self._keys:
            groups: dict[Any, list[int]] = {}
            for position, metadata in self._rows():
                value = metadata.get(key)
                if isinstance(value, _SCALARS):
                    groups.setdefault(value, []).append(position)
            self._keys[key] = {v: np.array(ix, dtype=np.int64) for v, ix in groups.items()}
        return self._keys[key]

    def candidates(self, flt: Mapping[str, Any] | None) -> np.ndarray | None:
        """Positions allowed by the first top-level `$eq` / `$in` clause of a canonical filter, ascending and
        each once; None when there is no such clause (every position is a candidate)."""
        if flt is None:
            return None
        for clause in flt.get("$and", [flt]):
            (key, cond), = clause.items()
            if key.startswith("$") or not set(cond) <= {"$eq", "$in"}:
                continue
            values = cond["$in"] if "$in" in cond else [cond["$eq"]]
            index = self.positions(key)
            parts = [index[v] for v in values if isinstance(v, _SCALARS) and v in index]
            return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        return None
