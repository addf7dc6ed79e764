"""The `Source` contract: a place that lists items (a stable id and a version each) and fetches the changed ones.

A knowledge base syncs a source (`KnowledgeBase.sync(source)`, `rag index s3://...`): it lists the
source's items, compares each item's version with what its records hold, fetches only the items that
are new or changed, and deletes the documents of items the source no longer lists. Fetching, loading,
chunking and embedding go through the knowledge base's one write path (`rag.indexing.write_path`), so
the writer lock, the per-file limits, OCR, tables and AutoContext apply to every source alike.

A source implements two methods (and may implement `previous`, to read what it kept with each item's
record at the last sync, its `SourceItem.state`):

- `items()`: every item, each a `SourceItem` with an `id` that stays the same while the item exists
  (it is the record key and the chunks' `source`) and a `version` that changes when its content
  does (an ETag, a `lastmod`, a git blob id, a content hash). An item that cannot be taken (a key that
  is a path traversal) is listed with its `error`; a listing that stopped early (a time limit, a
  failed page of a listing) raises `IncompleteListing` after what it found, and the sync then deletes
  nothing.
- `fetch(item)`: the item's content, as a local file (`Fetched.path`, read by the loader of its
  suffix within the run's limits) or as Documents (`Fetched.documents`); a `SourceError` for that item
  alone (too large, refused address) is reported and the run goes on.

Access metadata travels: an item's `access` (who may read it: users, groups, public) is put on every
chunk of it under `acl_users`, `acl_groups` (JSON lists of names) and `acl_public` (a bool); see
docs/sources.md.

Example:
    >>> class Notes(Source):
    ...     prefix = "notes:"
    ...     def items(self):
    ...         yield SourceItem("notes:a", version="1")
    ...     def fetch(self, item):
    ...         return Fetched(documents=[Document(page_content="Paris is in France.")])
    >>> [item.id for item in Notes().items()]
    ['notes:a']
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, LoaderError

__all__ = ["ACL_KEYS", "Access", "Fetched", "IncompleteListing", "Source", "SourceError", "SourceItem",
           "access_from", "access_map_from", "check_key", "check_patterns", "local_name", "write_temporary"]

#: the chunk metadata keys an item's access is written under (issue 40 reads them)
ACL_KEYS = ("acl_users", "acl_groups", "acl_public")


class SourceError(LoaderError):
    """One item of a source cannot be taken (refused address, too large, bad key): reported, the run goes on."""


class IncompleteListing(SourceError):
    """A source's listing stopped before its end (time limit, failed listing page): nothing is deleted this run."""


@dataclass(frozen=True)
class Access:
    """Who may read an item: users, groups, or everyone (`public`).

    Example:
        >>> Access(groups=("eng", "eng", "ops")).metadata()
        {'acl_users': '[]', 'acl_groups': '["eng", "ops"]', 'acl_public': False}
    """

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    public: bool = False

    def metadata(self) -> dict[str, Any]:
        """The chunk metadata (`ACL_KEYS`): sorted, de-duplicated JSON lists of names and a bool."""
        return {"acl_users": json.dumps(sorted(set(self.users))), "acl_groups": json.dumps(sorted(set(self.groups))),
                "acl_public": bool(self.public)}


def access_from(value: Any, *, where: str = "access") -> Access:
    """An `Access` from a mapping `{users: [...], groups: [...], public: bool}` (a sidecar file, a config, tags).

    Raises:
        SourceError: an unknown key or a value of the wrong type (the message says what is valid).

    Example:
        >>> access_from({"groups": ["eng"], "public": False}).groups
        ('eng',)
        >>> access_from({"group": ["eng"]})
        Traceback (most recent call last):
        ...
        rag.sources.base.SourceError: access: unknown key 'group'; valid: users, groups, public
    """
    if isinstance(value, Access):
        return value
    if not isinstance(value, Mapping):
        raise SourceError(f"{where}: expected a mapping of users, groups, public; got {type(value).__name__}")
    if unknown := [k for k in value if k not in ("users", "groups", "public")]:
        raise SourceError(f"{where}: unknown key {str(unknown[0])[:60]!r}; valid: users, groups, public")
    names: dict[str, tuple[str, ...]] = {}
    for key in ("users", "groups"):
        given = value.get(key, [])
        given = [given] if isinstance(given, str) else given
        if not isinstance(given, list | tuple) or not all(isinstance(n, str) and 0 < len(n) <= 256 for n in given):
            raise SourceError(f"{where}: {key} must be a list of names (1-256 characters each)")
        names[key] = tuple(given)
    public = value.get("public", False)
    if not isinstance(public, bool):
        raise SourceError(f"{where}: public must be true or false, got {str(public)[:60]!r}")
    return Access(users=names["users"], groups=names["groups"], public=public)


@dataclass(frozen=True)
class SourceItem:
    """One item of a source.

    Attributes:
        id: stable while the item exists: the record key and the chunks' `source` (a URL, `s3://b/k`).
        version: changes when the content does (ETag, lastmod, blob id, content hash).
        name: a file name whose suffix chooses the loader ("report.pdf"); "" for items fetched as Documents.
        metadata: put on every chunk of the item (scalars), besides `source`.
        access: who may read it (None: the source does not know).
        error: why the item cannot be taken (it is reported as skipped, and never fetched).
        state: text the knowledge base keeps with the item's record and gives back to the next sync
            (`Source.previous`): a web page's ETag, Last-Modified and links. Not part of the version.
    """

    id: str
    version: str = ""
    name: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    access: Access | None = None
    error: str | None = None
    state: str = ""

    def digest(self) -> str:
        """A 64-character hash of the version, the access and the metadata: what a record compares."""
        payload = json.dumps([self.version, self.access.metadata() if self.access else None, dict(self.metadata)],
                             sort_keys=True, default=str)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Fetched:
    """A fetched item: a local file (read by the loader of its suffix) or Documents; `cleanup` removes the file."""

    path: Path | None = None
    documents: list[Document] | None = None
    temporary: Path | None = None   # a folder removed once the item is loaded

    def cleanup(self) -> None:
        """Remove the temporary folder, if any."""
        if self.temporary is not None:
            import shutil

            shutil.rmtree(self.temporary, ignore_errors=True)


class Source(ABC):
    """A place that lists items and fetches them (see the module docstring).

    Attributes:
        prefix: every item id starts with it; a sync deletes the documents under it that `items()` no longer
            lists (and nothing else in the knowledge base).
        access_map: glob (over item ids) -> `Access`, for items whose source does not say who may read them.
    """

    prefix: str = ""
    access_map: Mapping[str, Access] = {}

    @abstractmethod
    def items(self) -> Iterator[SourceItem]:
        """Every item (see the module docstring); `IncompleteListing` after what was found if it stopped early."""

    @abstractmethod
    def fetch(self, item: SourceItem) -> Fetched:
        """The content of one item; `SourceError` when that item cannot be taken."""

    def previous(self, states: Mapping[str, str]) -> None:  # noqa: B027 - an optional hook
        """Before `items()`: the `SourceItem.state` each item had at the last sync, by id (indexed items only).

        A source that can ask "changed since?" (a web page's conditional GET) keeps them; others ignore them.
        """

    def access_of(self, item: SourceItem) -> Access | None:
        """The item's own access, else the first `access_map` glob matching its id, else None."""
        if item.access is not None:
            return item.access
        return next((a for pattern, a in self.access_map.items() if fnmatch.fnmatchcase(item.id, pattern)), None)

    def close(self) -> None:  # noqa: B027 - an optional hook
        """Release what the source holds (connections, temporary files)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.prefix!r})"


def access_map_from(mapping: Mapping[str, Any] | None, *, where: str = "access") -> dict[str, Access]:
    """A validated `access_map` from `{glob: {users, groups, public}}` (None: empty)."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"{where}: expected a mapping of glob -> {{users, groups, public}}")
    return {str(glob): access_from(value, where=f"{where}[{str(glob)[:60]!r}]") for glob, value in mapping.items()}


_UNSAFE_KEY = re.compile(r"[\x00-\x1f\x7f\\]")


def check_key(key: str) -> str | None:
    """Why an object key or relative path cannot be an item (a path traversal, control characters), or None.

    Example:
        >>> check_key("reports/2025.pdf") is None
        True
        >>> check_key("../../etc/passwd")
        "key '../../etc/passwd' is a path traversal ('..' segment); keys are relative paths without '..'"
    """
    if not key or len(key) > 1024:
        return f"key of {len(key)} characters; keys are 1-1024 characters"
    if _UNSAFE_KEY.search(key):
        return f"key {key[:80]!r} holds control characters or a backslash; not taken"
    if key.startswith("/"):
        return f"key {key[:80]!r} is absolute; keys are relative paths"
    if ".." in PurePosixPath(key).parts:
        return f"key {key[:80]!r} is a path traversal ('..' segment); keys are relative paths without '..'"
    return None


_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def local_name(name: str, *, default_suffix: str = ".txt") -> str:
    """A safe local file name for an item (its last path segment, only `[A-Za-z0-9._-]`, at most 120 characters).

    Never a path: fetched bytes are written to `<temporary folder>/<local_name>`, whatever the key was.

    Example:
        >>> local_name("a/b/../Q3 report.PDF")
        'Q3_report.PDF'
    """
    base = _NAME_CHARS.sub("_", name.rsplit("/", 1)[-1]).strip("._") or "item"
    stem, dot, suffix = base.rpartition(".")
    if not dot or not stem:
        stem, suffix = base, default_suffix.lstrip(".")
    return f"{stem[:100]}.{suffix[:16]}"


def write_temporary(name: str, data: bytes) -> Fetched:
    """Write fetched bytes to a new temporary folder as `local_name(name)`: a `Fetched` to load and clean up."""
    folder = Path(tempfile.mkdtemp(prefix="rag-source-"))
    path = folder / local_name(name)
    path.write_bytes(data)
    return Fetched(path=path, temporary=folder)


def check_patterns(value: str | Sequence[str], label: str) -> tuple[str, ...]:
    """Globs as a tuple (a single string is one glob)."""
    patterns = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(p, str) for p in patterns):
        raise ConfigError(f"{label} must be a glob or a list of globs, got {str(value)[:80]!r}")
    return patterns
