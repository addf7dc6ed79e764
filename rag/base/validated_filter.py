"""`Filter`: a filter `rag.base.filters.validate_filter` returned, and the read-only parts it may share.

A request's filter is validated once, at its door; every later stage gets the same object back from
`validate_filter` without a second pass. The object may be shared by many requests (a principal's
permission filter of 1,000 groups serves all its requests, and a store's value index remembers its
answer for it), so it and its parts are read-only.

Example:
    >>> from rag.base.filters import validate_filter
    >>> flt = validate_filter({"year": {"$in": [2020, 2021]}})
    >>> type(flt).__name__, flt.depth, flt.size, validate_filter(flt) is flt
    ('Filter', 1, 3, True)
    >>> try:
    ...     flt["year"] = 2022
    ... except TypeError as err:
    ...     print(str(err).split(";")[0])
    a validated filter is read-only (it may be shared by requests)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Filter", "ReadOnlyDict", "ReadOnlyList", "measure"]

_READ_ONLY = ("a validated filter is read-only (it may be shared by requests); build a new one, e.g. "
              "rag.base.filters.and_filters(flt, {...})")


def _refuse(self: Any, *args: Any, **kwargs: Any) -> None:
    raise TypeError(_READ_ONLY)


class _Shared:
    """Copies of a read-only part are the part itself (nothing can change it)."""

    __slots__ = ()

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self


class ReadOnlyDict(_Shared, dict):
    """A comparison inside a shared `Filter` (the `{"$eq": True}` of a principal's clause)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


class ReadOnlyList(_Shared, list):
    """A list inside a shared `Filter` (a principal's `$or`, whose items are `Filter`s)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = clear = extend = insert = pop = remove = \
        reverse = sort = _refuse  # type: ignore

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))


class Filter(ReadOnlyDict):
    """A filter `validate_filter` returned: canonical and within the limits, so every later stage takes it as is.

    The stages after the door (every resource's search, the stores' translations, the refining reads)
    get this object back from `validate_filter` without a second pass, and `and_filters` combines such
    filters without validating them again. It is a dict to everything else (equal to, printed and
    serialised as the canonical dict). `depth` and `size` are what the limits count, so a combination is
    held to them. Only `validate_filter`, `and_filters` and builders whose output is canonical by
    construction (`rag.base.acl`) make one.
    """

    __slots__ = ("depth", "size")

    def __init__(self, canonical: Mapping[str, Any], depth: int | None = None, size: int | None = None) -> None:
        super().__init__(canonical)
        if depth is None or size is None:
            depth, size = measure(canonical, 1)
        self.depth, self.size = depth, size

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self), self.depth, self.size))


def measure(canonical: Mapping[str, Any], depth: int) -> tuple[int, int]:
    """(depth, size) of a canonical filter as `validate_filter` counts them: what validating it again would count."""
    deepest, size = depth, 0
    for key, value in canonical.items():
        size += 1
        if key in ("$and", "$or", "$not"):
            items = [value] if key == "$not" else value
            size += 0 if key == "$not" else len(items)
            for item in items:
                item_depth, item_size = measure(item, depth + 1)
                deepest, size = max(deepest, item_depth), size + item_size
        else:
            size += sum(len(operand) for op, operand in value.items() if op in ("$in", "$nin"))
    return deepest, size


