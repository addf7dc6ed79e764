"""Who may read what: principals, document permissions written as chunk metadata, the permission filter.

A document's readers (users, groups, or everyone) are written on each of its chunks as flattened
boolean keys, the one shape every store's filter dialect can query (a list value is not filterable in
every backend):

```
acl_public: true | false          always written with permissions (false: restricted)
acl_u_<user>: true                one key per user who may read it
acl_g_<group>: true               one key per group
```

A name of 1-64 letters, digits, `_` and `-` (starting with a letter or digit) is kept as it is; any
other name is written as `acl_u__` / `acl_g__` and 32 hex digits of its SHA-256 (a dot, a space or a
slash means something else to some stores' key paths). A principal's filter is one `$or` of
equalities: `acl_public`, its own user key and one key per group. A chunk without permissions has
no `acl_public`: it matches only where unlabeled chunks are declared public (`public_by_default`,
then the first condition is `acl_public $ne false`, which every store reads as true on a missing key).

Example:
    >>> team = Permissions.of({"groups": ["team-a"]})
    >>> md = {"source": "plan.md", **team.metadata()}
    >>> md
    {'source': 'plan.md', 'acl_public': False, 'acl_g_team-a': True}
    >>> from rag.base.filters import matches
    >>> matches(md, Principal("ann", groups=["team-a"]).filter()), matches(md, Principal("bob").filter())
    (True, False)
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from rag.base.errors import ConfigError, short_repr
from rag.base.filters import Filter, ReadOnlyDict, ReadOnlyList

__all__ = ["ACL_PREFIX", "ADMIN_ROLE", "MAX_GROUPS", "PRINCIPAL_KEY", "PUBLIC_BY_DEFAULT_KEY", "PUBLIC_KEY",
           "SOURCE_KEYS", "Permissions", "PermissionsLike", "Principal", "group_key", "permission_filter", "principal_of",
           "strip_permissions", "user_key"]

#: Every metadata key this module writes starts with it; loaded metadata may not set such keys itself.
ACL_PREFIX = "acl_"
PUBLIC_KEY = "acl_public"
#: The keys a source's metadata carries its permissions in (lists, or comma-separated text; a bool).
SOURCE_KEYS = ("acl_users", "acl_groups", "acl_public")
#: Where a chain's request config carries who is asking (`config={"configurable": {"principal": ...}}`).
PRINCIPAL_KEY = "principal"
#: Request-config key: chunks without permissions are visible (the knowledge base is public by default).
PUBLIC_BY_DEFAULT_KEY = "public_by_default"
ADMIN_ROLE = "admin"
#: The most groups one principal may hold (each adds one condition to every search's filter).
MAX_GROUPS = 1000
MAX_NAME_CHARS = 256
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _key(prefix: str, name: str) -> str:
    if _PLAIN.fullmatch(name):
        return f"{prefix}{name}"
    return f"{prefix}_{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"


def user_key(user: str) -> str:
    """The metadata key that lets `user` read a chunk (`acl_u_ann`; other names hashed)."""
    return _key("acl_u_", user)


def group_key(group: str) -> str:
    """The metadata key that lets members of `group` read a chunk (`acl_g_team-a`; other names hashed)."""
    return _key("acl_g_", group)


def _names(value: Any, what: str) -> frozenset[str]:
    """Names from a list, a JSON list in text (stored metadata), or comma-separated text."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise ConfigError(f"{what}: {short_repr(value)} is not a JSON list of names") from None
        else:
            value = [part.strip() for part in text.split(",") if part.strip()]
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise ConfigError(f"{what} must be a list of names, got {type(value).__name__}: {short_repr(value)}")
    names = []
    for name in value:
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
            raise ConfigError(f"{what}: every name must be a non-empty string of at most {MAX_NAME_CHARS} "
                              f"characters, got {short_repr(name)}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{what}: {short_repr(name)} is not valid Unicode") from None
        names.append(name.strip())
    return frozenset(names)


@dataclass(frozen=True)
class Permissions:
    """Who may read a document: users, groups, or everyone (`public`).

    `Permissions()` (nobody) is valid: such a document is readable by no principal at all.
    """

    users: frozenset[str] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)
    public: bool = False

    @classmethod
    def of(cls, value: Any) -> Permissions:
        """From `Permissions`, `"public"`, or a mapping with `users` / `groups` / `public` (or the source keys
        `acl_users` / `acl_groups` / `acl_public`).

        Raises:
            ConfigError: another shape, an unknown key, or a bad name (the message lists what is valid).
        """
        if isinstance(value, Permissions):
            return value
        if value == "public":
            return cls(public=True)
        if not isinstance(value, Mapping):
            raise ConfigError(f"permissions must be 'public' or a mapping with users / groups / public, got "
                              f"{short_repr(value)}")
        plain = {str(k).removeprefix(ACL_PREFIX): v for k, v in value.items()}
        unknown = sorted(set(plain) - {"users", "groups", "public"})
        if unknown:
            raise ConfigError(f"unknown permission key(s) {unknown}; valid: users, groups, public")
        public = plain.get("public", False)
        if isinstance(public, str) and public.lower() in ("true", "false"):
            public = public.lower() == "true"
        if not isinstance(public, bool):
            raise ConfigError(f"permissions' public must be true or false, got {short_repr(public)}")
        return cls(_names(plain.get("users"), "permissions' users"), _names(plain.get("groups"),
                                                                         "permissions' groups"), public)

    @classmethod
    def from_source(cls, metadata: Mapping[str, Any]) -> Permissions | None:
        """The permissions a source's metadata carries (`SOURCE_KEYS`), or None when it carries none."""
        given = {k: metadata[k] for k in SOURCE_KEYS if metadata.get(k) is not None}
        return cls.of(given) if given else None

    def metadata(self) -> dict[str, bool]:
        """The chunk metadata keys that say who may read (see the module docstring)."""
        out = {PUBLIC_KEY: self.public}
        out.update({user_key(u): True for u in sorted(self.users)})
        out.update({group_key(g): True for g in sorted(self.groups)})
        return out

    def stamp(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """`metadata` with its permission keys replaced by these."""
        return {**strip_permissions(metadata), **self.metadata()}


#: what `Permissions.of` reads: `Permissions`, `"public"`, or a mapping with users / groups / public
PermissionsLike = Union[Permissions, str, Mapping[str, Any]]  # noqa: UP007 - a runtime alias


def strip_permissions(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """`metadata` without any permission key (`acl_*`): loaded content can never grant itself readers."""
    return {k: v for k, v in metadata.items() if not (isinstance(k, str) and k.startswith(ACL_PREFIX))}


@dataclass(frozen=True)
class Principal:
    """Who is asking: an id, the groups it belongs to and its roles (`admin` may use the admin routes).

    Its `filter()` selects the chunks it may read; roles never widen what it reads.
    """

    id: str
    groups: frozenset[str] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip() or len(self.id) > MAX_NAME_CHARS:
            raise ConfigError(f"a principal's id must be a non-empty string of at most {MAX_NAME_CHARS} characters, "
                              f"got {short_repr(self.id)}")
        object.__setattr__(self, "groups", _names(self.groups, "a principal's groups"))
        object.__setattr__(self, "roles", _names(self.roles, "a principal's roles"))
        if len(self.groups) > MAX_GROUPS:
            raise ConfigError(f"a principal may belong to at most {MAX_GROUPS} groups, got {len(self.groups)}")

    @property
    def is_admin(self) -> bool:
        return ADMIN_ROLE in self.roles

    def filter(self, *, public_by_default: bool = False) -> dict[str, Any]:
        """The portable filter of the chunks this principal may read (see `permission_filter`).

        Built once per principal and mode and shared by equal principals (a server makes one per request),
        so a store that remembers a filter it has answered (`rag.stores.value_index`) meets the same object
        again; treat it as read-only.
        """
        return _shared_filter(self, public_by_default is True)


def permission_filter(principal: Principal, *, public_by_default: bool = False) -> dict[str, Any]:
    """One `$or`: public chunks, the principal's own, its groups' (canonical form, ready to AND).

    Example:
        >>> permission_filter(Principal("ann", groups=["ops"]))["$or"][1:]
        [{'acl_u_ann': {'$eq': True}}, {'acl_g_ops': {'$eq': True}}]
    """
    # canonical by construction (keys from `_key`, values True) and read-only throughout: it may be shared
    public = _clause(PUBLIC_KEY, "$ne", False) if public_by_default else _clause(PUBLIC_KEY, "$eq", True)
    return Filter({"$or": ReadOnlyList([public, _clause(user_key(principal.id), "$eq", True),
                                           *(_clause(group_key(g), "$eq", True) for g in sorted(principal.groups))])})


def _clause(key: str, op: str, value: bool) -> Filter:
    return Filter({key: ReadOnlyDict({op: value})})


@functools.lru_cache(maxsize=128)   # (a 1,000-group filter holds about 0.5 MB: at most 64 MB in all)
def _shared_filter(principal: Principal, public_by_default: bool) -> dict[str, Any]:
    return permission_filter(principal, public_by_default=public_by_default)


def principal_of(value: Any) -> Principal | None:
    """A request config's principal: a `Principal`, a mapping `{id, groups?, roles?}`, or None (nobody given).

    Raises:
        ConfigError: anything else; a request with an unreadable principal never runs unfiltered.
    """
    if value is None or isinstance(value, Principal):
        return value
    if isinstance(value, Mapping) and not set(value) - {"id", "groups", "roles"}:
        return Principal(value.get("id"), value.get("groups") or (), value.get("roles") or ())
    raise ConfigError(f"configurable['{PRINCIPAL_KEY}'] must be a rag.base.acl.Principal or a mapping with id, "
                      f"groups, roles; got {short_repr(value)}")
