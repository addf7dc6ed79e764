"""rag.sources: places a knowledge base stays in sync with (docs/sources.md).

A `Source` lists items (a stable id and a version each) and fetches the changed ones;
`KnowledgeBase.sync(source)` (and `rag index s3://... | https://...`) adds what is new, replaces what
changed, deletes what vanished and does nothing when nothing changed, through the knowledge base's
one write path. Shipped: `ObjectStoreSource` (fsspec: s3://, gs://, az://), `WebSource` (a sitemap or a
bounded crawl), `GitSource`, `LoaderSource` (any LangChain `BaseLoader`); local folders are
`rag.indexing.folder_source.FolderSource`. `source_from` builds one from a URL or a config mapping.

Imports nothing heavy: fsspec, s3fs and git are used when a source lists.
"""

from __future__ import annotations

from rag.sources.base import (
    ACL_KEYS,
    Access,
    Fetched,
    IncompleteListing,
    Source,
    SourceError,
    SourceItem,
    access_from,
)
from rag.sources.git import GitSource
from rag.sources.loader import LoaderSource
from rag.sources.object_store import ObjectStoreSource
from rag.sources.specs import source_from
from rag.sources.web import WebSource

__all__ = ["ACL_KEYS", "Access", "Fetched", "GitSource", "IncompleteListing", "LoaderSource", "ObjectStoreSource",
           "Source", "SourceError", "SourceItem", "WebSource", "access_from", "source_from"]
