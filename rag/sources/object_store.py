"""`ObjectStoreSource`: the objects under a prefix of an object store, through fsspec (`s3://`, `gs://`, `az://`, ...).

The listing is one `find` under the prefix; each object's id is its URL and its version its ETag
(or, where a file system has none, its size and modification time), so a re-sync downloads only
the objects whose ETag changed, and an object deleted from the bucket is deleted from the knowledge
base. A changed object is downloaded (at most `max_bytes`) to a temporary file named after its key's
last segment and read by the loader of its suffix.

Hostile buckets: a key that is a path traversal (`../`), absolute, or holds control characters is
skipped with the reason (keys never become local paths anyway); compressed objects (`.zip`, `.gz`,
...) are not downloaded (the loaders do not open archives, so a zip or gzip bomb stays in the
bucket); an object over `max_bytes` is skipped unread.

Access: a sidecar object `<key>.acl.json` (`{"users": [...], "groups": [...], "public": false}`) says
who may read `<key>`; with `acl_from_tags=True` (S3) the object tags `acl-users`, `acl-groups`
(names separated by spaces: S3 tag values hold no commas) and `acl-public` (`true`) do; `access` maps globs over ids for the rest.

Needs fsspec and the file system's package (`pip install 'rag-runnables[sources]'` has s3fs; gcsfs and
adlfs for `gs://` and `az://`). Credentials come from the environment (`AWS_ACCESS_KEY_ID`, ...) or
`storage_options` given in code; a config names environment variables, never secrets.

Example:
    >>> ObjectStoreSource("s3://bucket/reports").prefix
    's3://bucket/reports/'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from fnmatch import fnmatch
from typing import Any

from rag.base.errors import ConfigError, MissingDependencyError
from rag.sources.base import (
    Access,
    Fetched,
    Source,
    SourceError,
    SourceItem,
    access_from,
    access_map_from,
    check_key,
    check_patterns,
    write_temporary,
)

__all__ = ["ObjectStoreSource"]

SIDECAR = ".acl.json"
_VERSION_KEYS = ("ETag", "etag", "md5Hash", "content_md5", "crc32c")


class ObjectStoreSource(Source):
    """Objects under a prefix of an fsspec file system (see the module docstring).

    Args:
        url: `s3://bucket/prefix`, `gs://...`, `az://...`, `memory://...`, `file:///...`.
        storage_options: passed to the file system (`endpoint_url`, `anon`, ...).
        include, exclude: globs over keys relative to the prefix.
        max_bytes: larger objects are skipped unread.
        acl_from_tags: read the `acl-*` object tags (S3; one request per object per listing).
        access: glob over ids -> `{users, groups, public}`.
    """

    def __init__(self, url: str, *, storage_options: Mapping[str, Any] | None = None,
                 include: str | Sequence[str] = "**/*", exclude: str | Sequence[str] = (),
                 max_bytes: int = 256 * 1024 * 1024, acl_from_tags: bool = False,
                 access: Mapping[str, Any] | None = None) -> None:
        text = str(url)
        protocol, sep, path = text.partition("://")
        if not sep or not protocol or not path.strip("/"):
            raise ConfigError(f"ObjectStoreSource needs a URL such as s3://bucket/prefix, got {text[:120]!r}")
        self.protocol, self.root = protocol.lower(), path.strip("/")
        self.location = f"{self.protocol}://{path.rstrip('/')}"   # (file:///data keeps its absolute path)
        self.prefix = self.location + "/"
        self.storage_options = dict(storage_options or {})
        self.include, self.exclude = check_patterns(include, "include"), check_patterns(exclude, "exclude")
        self.max_bytes, self.acl_from_tags = int(max_bytes), bool(acl_from_tags)
        self.access_map = access_map_from(access)
        self._fs: Any = None
        self._paths: dict[str, tuple[str, int]] = {}

    @property
    def fs(self) -> Any:
        """The fsspec file system, opened on first use."""
        if self._fs is None:
            try:
                import fsspec
            except ImportError as exc:
                raise MissingDependencyError.for_extra("fsspec", "sources", "object store sources") from exc
            try:
                self._fs = fsspec.filesystem(self.protocol, **self.storage_options)
            except ImportError as exc:
                raise MissingDependencyError(f"{self.protocol}:// needs its fsspec package ({exc}); "
                                             "pip install 'rag-runnables[sources]' installs s3fs") from exc
        return self._fs

    def items(self) -> Iterator[SourceItem]:
        """The objects under the prefix, versioned by ETag (see the module docstring)."""
        self.fs.invalidate_cache()   # (s3fs caches listings: a re-sync must see the bucket as it is now)
        found = self.fs.find(self.location, detail=True)   # (the file system strips its protocol)
        keys = {self._key(path) for path in found}
        self._paths = {}
        for path, info in sorted(found.items()):
            if info.get("type", "file") != "file":
                continue
            key = self._key(path)
            if key.endswith(SIDECAR) or not self._wanted(key):
                continue
            item_id = self.prefix + key
            if why := check_key(key):
                yield SourceItem(item_id, error=why)
                continue
            size = int(info.get("size") or 0)
            if size > self.max_bytes:
                yield SourceItem(item_id, error=f"{size:,} bytes is more than max_bytes={self.max_bytes:,}; not "
                                                "downloaded")
                continue
            try:
                access = self._access(path, key, keys)
            except SourceError as exc:
                yield SourceItem(item_id, error=str(exc))
                continue
            self._paths[item_id] = (path, size)
            yield SourceItem(item_id, version=_version(info), name=key.rsplit("/", 1)[-1], access=access)

    def _key(self, path: str) -> str:
        """The key of a listed path relative to the prefix (file systems differ on a leading "/")."""
        path = path.split("://", 1)[-1].lstrip("/")
        return path[len(self.root):].lstrip("/") if path.startswith(self.root + "/") else path

    def _wanted(self, key: str) -> bool:
        name = key.rsplit("/", 1)[-1]
        def matches(patterns: tuple[str, ...]) -> bool:
            return any(fnmatch(key, p) or fnmatch(name, p) or (p.startswith("**/") and fnmatch(key, p[3:]))
                       for p in patterns)
        return matches(self.include) and not matches(self.exclude)

    def _access(self, path: str, key: str, keys: set[str]) -> Access | None:
        """Who may read the object: its sidecar, else its tags (`acl_from_tags`), else None (the access map)."""
        if key + SIDECAR in keys:
            with self.fs.open(path + SIDECAR, "rb") as fh:
                raw = fh.read(65537)
            if len(raw) > 65536:
                raise SourceError(f"{key}{SIDECAR}: over 64 KiB")
            try:
                return access_from(json.loads(raw), where=key + SIDECAR)
            except ValueError as exc:
                raise SourceError(f"{key}{SIDECAR}: not JSON ({exc})") from exc
        if self.acl_from_tags and hasattr(self.fs, "get_tags"):
            tags = self.fs.get_tags(path)
            if any(k.startswith("acl-") for k in tags):
                names = {k: [n for n in re.split(r"[\s,]+", tags.get(f"acl-{k}", "")) if n] for k in ("users", "groups")}
                return access_from({**names, "public": tags.get("acl-public", "").lower() == "true"}, where=key)
        return None

    def fetch(self, item: SourceItem) -> Fetched:
        """The object's bytes (at most `max_bytes`) in a temporary file named after its key."""
        path, _size = self._paths.get(item.id, (None, 0))
        if path is None:
            raise SourceError(f"{item.id}: not in the last listing")
        with self.fs.open(path, "rb") as fh:
            data = fh.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise SourceError(f"{item.id}: more than max_bytes={self.max_bytes:,} bytes; not indexed")
        return write_temporary(item.name, data)


def _version(info: Mapping[str, Any]) -> str:
    """The object's ETag (or hash), else its size and modification time."""
    for key in _VERSION_KEYS:
        if info.get(key):
            return f"{key}:{str(info[key]).strip(chr(34))}"
    modified = info.get("LastModified") or info.get("last_modified") or info.get("mtime") or info.get("created")
    return f"size:{info.get('size')}:modified:{modified}"
