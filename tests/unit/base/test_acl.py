"""Principals, document permissions as flattened metadata keys, and the permission filter (rag.base.acl)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.base.acl import (
    MAX_GROUPS,
    PUBLIC_KEY,
    Permissions,
    Principal,
    group_key,
    permission_filter,
    principal_of,
    strip_permissions,
    user_key,
)
from rag.base.errors import ConfigError
from rag.base.filters import matches, validate_filter

# names of any kind: plain ones, and ones with dots, spaces, slashes, unicode (written hashed)
names = st.one_of(st.sampled_from(["ann", "bob", "team-a", "team_b", "Ops1"]),
                  st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and s == s.strip()))


def _visible(principal: Principal, permissions: Permissions | None, public_by_default: bool) -> bool:
    """The oracle: what the filter must decide, written without it."""
    if permissions is None:
        return public_by_default
    return permissions.public or principal.id in permissions.users or bool(principal.groups & permissions.groups)


@settings(max_examples=300, deadline=None)
@given(users=st.frozensets(names, max_size=3), groups=st.frozensets(names, max_size=3), public=st.booleans(),
       labeled=st.booleans(), who=names, member_of=st.frozensets(names, max_size=4), default=st.booleans(),
       other=st.dictionaries(st.sampled_from(["source", "page", "acl_g_team-a", "acl_public", "acl_u_ann"]),
                             st.one_of(st.booleans(), st.integers(0, 3), st.text(max_size=3)), max_size=3))
def test_the_filter_admits_exactly_the_readers(users, groups, public, labeled, who, member_of, default, other):
    permissions = Permissions(users, groups, public) if labeled else None
    # whatever keys the content itself carried, the stamp decides (and an unlabeled chunk carries none)
    metadata = permissions.stamp(other) if permissions else strip_permissions(other)
    principal = Principal(who, member_of)
    flt = permission_filter(principal, public_by_default=default)
    assert validate_filter(flt) == flt   # canonical: ready for every store's translation
    assert matches(metadata, flt) == _visible(principal, permissions, default)


def test_a_principal_with_no_groups_sees_only_public_and_its_own_documents():
    nobody = Principal("carol")
    docs = {"public": Permissions(public=True), "team": Permissions(groups=frozenset({"team-a"})),
            "own": Permissions(users=frozenset({"carol"})), "none": Permissions()}
    seen = {name for name, p in docs.items() if matches(p.metadata(), nobody.filter())}
    assert seen == {"public", "own"}
    assert not matches({"source": "unlabeled.md"}, nobody.filter())
    assert matches({"source": "unlabeled.md"}, nobody.filter(public_by_default=True))


def test_names_outside_the_plain_alphabet_are_hashed_into_safe_keys():
    assert user_key("ann") == "acl_u_ann" and group_key("team-a") == "acl_g_team-a"
    for odd in ["a.b", "x y", "ou=eng,dc=corp", "équipe", "-lead", "a" * 65]:
        key = group_key(odd)
        assert key.startswith("acl_g__") and len(key) == len("acl_g__") + 32 and key.isascii()
    assert group_key("a.b") != group_key("a b") != user_key("a.b")


def test_permissions_are_read_from_every_shape_a_source_gives():
    assert Permissions.of("public") == Permissions(public=True)
    assert Permissions.of({"acl_groups": ["a", "b"], "acl_users": "ann, bob"}) == \
        Permissions(frozenset({"ann", "bob"}), frozenset({"a", "b"}))
    assert Permissions.of({"groups": '["a"]', "public": "false"}) == Permissions(groups=frozenset({"a"}))
    assert Permissions.from_source({"source": "x"}) is None
    assert Permissions.from_source({"acl_public": True}) == Permissions(public=True)
    meta = Permissions(groups=frozenset({"a"})).metadata()
    assert meta == {PUBLIC_KEY: False, "acl_g_a": True}


@pytest.mark.parametrize("bad", [{"grups": ["a"]}, {"groups": [""]}, {"groups": [3]}, {"public": "yes"},
                                 ["a"], 7, {"groups": {"a": 1}}, {"users": ["x" * 300]}])
def test_bad_permissions_say_what_is_valid(bad):
    with pytest.raises(ConfigError) as info:
        Permissions.of(bad)
    assert "users" in str(info.value) or "name" in str(info.value) or "public" in str(info.value)


def test_principals_are_validated_and_bounded():
    assert principal_of({"id": "ann", "groups": ["a"]}) == Principal("ann", frozenset({"a"}))
    assert principal_of(None) is None
    for bad in ["ann", {"id": ""}, {"id": "ann", "admin": True}, 3, {"groups": ["a"]}]:
        with pytest.raises(ConfigError):
            principal_of(bad)
    with pytest.raises(ConfigError, match="at most"):
        Principal("ann", [f"g{i}" for i in range(MAX_GROUPS + 1)])
    assert Principal("root", roles=["admin"]).is_admin and not Principal("ann").is_admin


def test_a_principals_filter_is_built_once_shared_by_equal_principals_and_read_only():
    """A server makes a Principal per request: equal ones get the same (read-only) filter, validated once."""
    import copy
    import json

    from rag.base.filters import and_filters, validate_filter

    groups = [f"g{i}" for i in range(1000)]
    first, second = Principal("ann", groups), Principal("ann", list(reversed(groups)))
    shared = first.filter()
    assert second.filter() is shared and validate_filter(shared) is shared
    assert first.filter(public_by_default=True) is not shared
    assert len(shared["$or"]) == 1002 and json.loads(json.dumps(shared)) == shared
    for change in (lambda f: f.update({"x": 1}), lambda f: f["$or"].append({"acl_g_x": {"$eq": True}}),
                   lambda f: f["$or"][0]["acl_public"].update({"$eq": False}), lambda f: f.pop("$or")):
        with pytest.raises(TypeError, match="read-only"):
            change(shared)
    assert copy.deepcopy(shared) == shared and dict(copy.copy(shared)) == shared
    combined = and_filters({"year": 2024}, shared)
    assert validate_filter(combined) is combined and combined["$and"][1] is shared
