"""Document permissions at indexing: which readers each document's chunks carry, and changing them in place.

A document's permissions come from, first to last: the `permissions=` argument of `add_documents`,
its source's metadata (`acl_users`, `acl_groups`, `acl_public`, as connectors set them), the first
rule whose pattern matches its source (`fnmatch`: `*` also matches `/`), then the knowledge base's
default (public when it is declared public by default). Every chunk of the document carries them
(`rag.base.acl`); permission keys a loader or a document's own metadata wrote are dropped first, so
content can never grant itself readers. A document none of these covers gets no permission keys:
under a principal only a request that declares unlabeled chunks public sees it.

Changing permissions (`set_permissions`, or a changed rule or argument on the next `add_documents`
of an unchanged document) is a metadata update of the stored chunks: nothing is embedded again.

Example:
    >>> rules = AccessRules.of(rules=[{"match": "*/team-a/*", "groups": ["team-a"]}])
    >>> rules.for_document("/srv/docs/team-a/plan.md", {})
    Permissions(users=frozenset(), groups=frozenset({'team-a'}), public=False)
    >>> rules.for_document("/srv/docs/readme.md", {}) is None
    True
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag.base.acl import Permissions, PermissionsLike, strip_permissions
from rag.base.errors import ConfigError, StoreError, short_repr
from rag.stores.chunk_store import Capability

__all__ = ["AccessRules", "refresh_permissions", "set_permissions", "stamp_metadatas"]


@dataclass(frozen=True)
class AccessRules:
    """How a knowledge base decides the readers of a document it indexes (see the module docstring)."""

    given: Permissions | None = None
    rules: tuple[tuple[str, Permissions], ...] = ()
    default: Permissions | None = None

    @classmethod
    def of(cls, *, permissions: PermissionsLike | None = None, rules: Sequence[Mapping[str, Any]] | None = None,
           public_by_default: bool = False) -> AccessRules:
        """From an argument's permissions, rules `[{"match": glob, "groups"?, "users"?, "public"?}]`, and the
        knowledge base's default.

        Raises:
            ConfigError: a rule without `match`, or bad permissions (the message says which rule).
        """
        parsed = []
        for i, rule in enumerate(rules or ()):
            if not isinstance(rule, Mapping) or not isinstance(rule.get("match"), str) or not rule["match"]:
                raise ConfigError(f"permissions rule {i}: expected {{match: GLOB, groups: [...], users: [...], "
                                  f"public: bool}}, got {short_repr(rule)}")
            parsed.append((rule["match"], Permissions.of({k: v for k, v in rule.items() if k != "match"})))
        return cls(None if permissions is None else Permissions.of(permissions), tuple(parsed),
                   Permissions(public=True) if public_by_default else None)

    def with_given(self, permissions: PermissionsLike | None) -> AccessRules:
        """These rules with `add_documents(permissions=...)` on top (None: unchanged)."""
        if permissions is None:
            return self
        return AccessRules(Permissions.of(permissions), self.rules, self.default)

    @property
    def decides_without_content(self) -> bool:
        """Whether an argument, a rule or a default can set permissions of documents it does not read again."""
        return self.given is not None or bool(self.rules) or self.default is not None

    def for_document(self, source: str, metadata: Mapping[str, Any]) -> Permissions | None:
        """The permissions of the document indexed from `source` whose first page has `metadata`."""
        if self.given is not None:
            return self.given
        from_source = Permissions.from_source(metadata)
        if from_source is not None:
            return from_source
        for pattern, permissions in self.rules:
            if fnmatch.fnmatchcase(source, pattern):
                return permissions
        return self.default

    def settings(self) -> dict[str, Any]:
        """Plain data rebuilding these rules (`from_settings`), for workers in other processes."""
        def plain(p: Permissions | None) -> dict[str, Any] | None:
            return None if p is None else {"users": sorted(p.users), "groups": sorted(p.groups), "public": p.public}
        return {"given": plain(self.given), "default": plain(self.default),
                "rules": [{"match": m, **plain(p)} for m, p in self.rules]}

    @classmethod
    def from_settings(cls, data: Mapping[str, Any] | None) -> AccessRules:
        if not data:
            return cls()
        rules = cls.of(rules=data.get("rules"))
        return cls(None if data.get("given") is None else Permissions.of(data["given"]), rules.rules,
                   None if data.get("default") is None else Permissions.of(data["default"]))


def stamp_metadatas(access: AccessRules | None, sources: Mapping[str, tuple[str, Mapping[str, Any]]],
                    metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chunk metadata with each document's permissions (by `doc_id`: its source and first page's metadata)."""
    access = access or AccessRules()
    decided: dict[str, Permissions | None] = {}
    out = []
    for md in metas:
        doc_id = md.get("doc_id")
        if doc_id not in decided:
            source, first = sources.get(doc_id, ("", {}))
            decided[doc_id] = access.for_document(source, first)
        permissions = decided[doc_id]
        out.append(permissions.stamp(md) if permissions is not None else strip_permissions(md))
    return out


def set_permissions(target: Any, record: Any, permissions: PermissionsLike) -> int:
    """Give the stored chunks of one document (`record`: its `DocumentRecord`) new permissions; returns chunks
    changed. The caller holds the writer lock. Nothing is embedded: the chunks' metadata is replaced.

    Raises:
        StoreError: the store cannot change metadata in place (index the document again instead).
    """
    wanted = Permissions.of(permissions)
    ids = list(record.chunk_ids)
    if not ids:
        return 0
    chunks = target.chunks
    if Capability.UPDATE_METADATA not in chunks.capabilities:
        raise StoreError(f"the {target.backend} store of knowledge base {target.name!r} cannot change metadata in "
                         "place; index the document again with add_documents(..., permissions=...)")
    stored = chunks.get_by_ids(ids)
    found = [doc for doc in stored if doc.id is not None]
    new = [wanted.stamp(doc.metadata) for doc in found]
    changed = [(doc.id, md) for doc, md in zip(found, new, strict=True) if md != doc.metadata]
    if changed:
        chunks.update_metadatas([i for i, _ in changed], [md for _, md in changed])
    return len(changed)


def refresh_permissions(target: Any, access: AccessRules, keys: Sequence[str],
                        grouped: Mapping[str, Sequence[Any]]) -> int:
    """After a sync: documents of `keys` whose stored permissions differ from what `access` now decides get
    the new ones in place (a changed rule or argument on an unchanged document); returns chunks changed.

    One chunk per document is read to compare; a document `access` decides nothing for is left as stored.
    """
    if not access.decides_without_content or Capability.UPDATE_METADATA not in target.chunks.capabilities:
        return 0
    records = target.records.all()
    changed = 0
    for key in keys:
        record = records.get(key)
        if record is None or record.state != "ok" or not record.chunk_ids:
            continue
        docs = grouped.get(key) or ()
        wanted = access.for_document(key, docs[0].metadata if docs else {})
        if wanted is None:
            continue
        first = target.chunks.get_by_ids(record.chunk_ids[:1])
        if first and wanted.stamp(first[0].metadata) == first[0].metadata:
            continue
        changed += set_permissions(target, record, wanted)
    return changed
