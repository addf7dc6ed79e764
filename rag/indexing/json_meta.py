"""Structured values indexing writes into a chunk's metadata as JSON strings (tables, definitions), read back.

Metadata is plain JSON scalars in every store, so a list of records travels as one JSON string; a reader must
take anything a store holds (another writer, an older version, a hand edit) without failing.

Example:
    >>> json_list({"rows": '[{"a": 1}, 2]'}, "rows")
    [{'a': 1}, 2]
    >>> json_list({"rows": "not json"}, "rows"), json_list({}, "rows"), json_list({"rows": '{"a": 1}'}, "rows")
    ([], [], [])
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["json_list"]


def json_list(metadata: Mapping[str, Any], key: str) -> list[Any]:
    """The JSON list under `key` (`[]` when there is none, or the value is not a JSON list in a string)."""
    raw = metadata.get(key)
    if not isinstance(raw, str) or not raw:
        return []
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    return data if isinstance(data, list) else []
