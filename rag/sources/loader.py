"""`LoaderSource`: any LangChain `BaseLoader` as a source, its items named by a metadata key.

LangChain has loaders for more than a hundred systems (Confluence, Notion, Google Drive, Slack,
databases, CSV files, ...); none of them lists items before loading, so this source loads the
documents (`lazy_load`), groups them by the value of `key` in their metadata (`source` for most
loaders: a file, a page, a row's origin), and versions each group by a hash of its texts and
metadata. A sync then embeds only the groups whose hash changed and deletes the groups that are gone.
The documents are held in memory between listing and fetching (one loader's output).

Example:
    >>> from langchain_core.document_loaders import BaseLoader
    >>> from langchain_core.documents import Document
    >>> class Two(BaseLoader):
    ...     def lazy_load(self):
    ...         yield Document(page_content="a", metadata={"source": "x"})
    ...         yield Document(page_content="b", metadata={"source": "y"})
    >>> [item.id for item in LoaderSource(Two(), name="two").items()]
    ['loader:two:x', 'loader:two:y']
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.sources.base import Fetched, Source, SourceError, SourceItem, access_map_from

__all__ = ["LoaderSource"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")


class LoaderSource(Source):
    """A LangChain document loader (see the module docstring).

    Args:
        loader: any `langchain_core.document_loaders.BaseLoader`.
        key: the metadata key whose value names an item (documents with the same value are one item).
        name: names this loader's items (`loader:<name>:<value>`); default: the loader's class name. Two
            loaders of one class syncing into one knowledge base need two names.
        access: glob over item ids -> `{users, groups, public}`.
    """

    def __init__(self, loader: BaseLoader, *, key: str = "source", name: str | None = None,
                 access: Mapping[str, Any] | None = None) -> None:
        if not isinstance(loader, BaseLoader):
            raise ConfigError(f"LoaderSource needs a langchain_core BaseLoader, got {type(loader).__name__}")
        if not isinstance(key, str) or not key:
            raise ConfigError(f"key must name a metadata key, got {key!r}")
        name = name or type(loader).__name__
        if not _NAME.match(name):
            raise ConfigError(f"name must be 1-63 letters, digits, '.', '_', '-'; got {str(name)[:80]!r}")
        self.loader, self.key, self.name = loader, key, name
        self.prefix = f"loader:{name}:"
        self.access_map = access_map_from(access)
        self._groups: dict[str, list[Document]] = {}

    def __repr__(self) -> str:
        return f"LoaderSource({type(self.loader).__name__}, key={self.key!r}, name={self.name!r})"

    def items(self) -> Iterator[SourceItem]:
        """One item per value of `key`, versioned by a hash of its documents (the loader runs once per listing)."""
        groups: dict[str, list[Document]] = {}
        missing = 0
        for doc in self.loader.lazy_load():
            value = doc.metadata.get(self.key)
            if value is None or value == "":
                missing += 1
                continue
            groups.setdefault(self.prefix + str(value), []).append(doc)
        self._groups = groups
        if missing:
            yield SourceItem(self.prefix + "(no key)", error=f"{missing} document(s) without metadata key "
                                                              f"{self.key!r}; not indexed (name items by another key)")
        for item_id, docs in groups.items():
            yield SourceItem(item_id, version=_hash(docs))

    def fetch(self, item: SourceItem) -> Fetched:
        """The item's documents, as the listing loaded them."""
        docs = self._groups.get(item.id)
        if docs is None:
            raise SourceError(f"{item.id}: not in the last listing")
        return Fetched(documents=list(docs))

    def close(self) -> None:
        """Drop the documents held since the listing."""
        self._groups = {}


def _hash(docs: list[Document]) -> str:
    payload = json.dumps([[d.page_content, d.metadata] for d in docs], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
