"""A knowledge base's collection is its own: shared ones left by an older rag are found and separated.

A knowledge base in a store directory keeps its chunks in the default backend's collection
`rag.stores.registry.knowledge_base_store(name)`, which differs for distinct names. Before issue 37
the collection was the name cleaned (`store_name`): names that differ only by what cleaning changes
("x" and "rag-x"; "acme" and "acme_", "acme.", "acme-") got one collection, and each knowledge base
searched and counted the other's chunks. A knowledge base made then keeps opening the collection its
manifest records (`recorded_collection`: nothing is orphaned), unless another knowledge base of the
directory records the same one:

- a read (`IndexTarget.chunks`) then refuses with `SharedCollectionError`, naming both and the way out;
- a write (`rag index`, any `KnowledgeBase` write, under the directory's writer lock) runs `separate`
  first: each knowledge base sharing the collection whose own collection is another one gets its
  chunks copied there (texts, metadata and stored vectors: nothing is embedded), the copied chunks
  no remaining owner lists are deleted from the shared collection, and its manifest then names its
  own collection. Every step can be re-run after a crash.

Only knowledge bases in one directory are compared (a Chroma server shared by several directories is
not searched for other directories' manifests).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> sharers(Path(tempfile.mkdtemp()), "acme_", "acme")
    []
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.base.errors import StoreError
from rag.indexing.kb_settings import is_name
from rag.indexing.manifest import Manifest
from rag.indexing.records import RecordStore
from rag.stores.registry import DEFAULT, knowledge_base_store, open_local, store_name

logger = logging.getLogger(__name__)

__all__ = ["SharedCollectionError", "recorded_collection", "separate", "shared_error", "sharers"]

_BATCH = 1000


class SharedCollectionError(StoreError):
    """Two knowledge bases of one directory keep their chunks in one collection (made by an older rag)."""


def recorded_collection(name: str, recorded: str) -> str:
    """The collection knowledge base `name` may open when its manifest records `recorded`: its own, or the
    one an older rag gave it (its name cleaned); anything else is for `Manifest.check_owner` to refuse."""
    return recorded if recorded == store_name(name) else knowledge_base_store(name)


def sharers(directory: Path, name: str, collection: str) -> list[str]:
    """The other knowledge bases in `directory` whose manifests record the default backend's `collection`
    (only names an older or the current rule maps to it are read: one listing of the folder otherwise)."""
    try:
        names = sorted(entry.name for entry in (Path(directory) / "kb").iterdir())
    except OSError:
        return []
    found = []
    for other in names:
        if other == name or not is_name(other) or collection not in (store_name(other), knowledge_base_store(other)):
            continue
        try:
            manifest = Manifest.load(Path(directory) / "kb" / other / "manifest.json")
        except (StoreError, OSError, ValueError):   # not a knowledge base, or a damaged one: it opens nothing
            continue
        if manifest.store.type == DEFAULT and manifest.store.collection == collection:
            found.append(other)
    return found


def shared_error(name: str, directory: Path, collection: str, others: Sequence[str]) -> SharedCollectionError:
    """What a read says when the collection is shared: who shares it, why, and the command that separates them."""
    names = ", ".join(repr(n) for n in others)
    return SharedCollectionError(
        f"knowledge base {name!r} and {names} in {directory} keep their chunks in one Chroma collection "
        f"{collection!r} (an older rag gave names that differ only by '.', '_', '-' or a short name's 'rag-' "
        "one collection): each would answer from and count the other's chunks. Run rag index for any of them "
        f"once (rag index PATH ... --store {directory} --collection {name}): it first moves each into a "
        "collection of its own (its chunks are copied, nothing is embedded again), then every one opens")


def _chunk_ids(directory: Path, name: str) -> list[str]:
    records = RecordStore(Path(directory) / "kb" / name / "records.sqlite")
    try:
        return [cid for rec in records.all().values() for cid in rec.chunk_ids]
    finally:
        records.close()


def _copy(source: Any, dest: Any, ids: Sequence[str]) -> None:
    """Copy the chunks `ids` (those `source` holds and `dest` lacks) with their stored vectors, in batches."""
    for start in range(0, len(ids), _BATCH):
        part = list(ids[start:start + _BATCH])
        have = set(dest.get_vectors(part))
        docs = source.get_by_ids([i for i in part if i not in have])
        vectors = source.get_vectors([d.id for d in docs])
        docs = [d for d in docs if d.id in vectors]
        dest.add([d.id for d in docs], [vectors[d.id] for d in docs], [d.page_content for d in docs],
                 [d.metadata for d in docs])


def separate(directory: Path, name: str, manifest: Manifest, save: Any, *, client: Any = None) -> bool:
    """Give every knowledge base sharing `name`'s collection in `directory` a collection of its own (see the
    module docstring; the caller holds the directory's writer lock). `save(manifest)` saves `name`'s own
    manifest. Returns whether anything was shared."""
    collection = manifest.store.collection
    if manifest.store.type != DEFAULT or not (others := sharers(directory, name, collection)):
        return False
    group = [name, *others]
    movers = [n for n in group if knowledge_base_store(n) != collection]
    kept = {cid for n in group if n not in movers for cid in _chunk_ids(directory, n)}
    where = f"the Chroma collection {collection!r} in {directory}"
    source = open_local(directory, collection, client=client, where=where, marker=None)
    moved = {mover: _chunk_ids(directory, mover) for mover in movers}
    opened = [source]
    try:
        for mover, ids in moved.items():   # copy every one first, then delete: a chunk two of them list stays for both
            opened.append(open_local(directory, knowledge_base_store(mover), client=client, where=where, marker=None))
            _copy(source, opened[-1], ids)
        source.delete(sorted({i for ids in moved.values() for i in ids} - kept))
    finally:
        for store in opened:   # (the clients opened here)
            store.close()
    for mover, ids in moved.items():   # (last: a run that stops before this repeats the steps above, harmlessly)
        own = knowledge_base_store(mover)
        if mover == name:
            manifest.store.collection = own
            save(manifest)
        else:
            path = Path(directory) / "kb" / mover / "manifest.json"
            theirs = Manifest.load(path)
            theirs.store.collection = own
            theirs.save(path)
        logger.warning("knowledge base %r shared the Chroma collection %r with %s (an older rag's naming): its "
                       "%d chunk(s) were moved into its own collection %r", mover, collection,
                       ", ".join(repr(n) for n in group if n != mover), len(ids), own)
    return True
