"""The permission plan (`rag.stores.permission_plan`) answers exactly what the store's own filter answers.

Real Chroma collections and real FTS5 files, generated chunks, permissions, principals (reading most of
the chunks, or few), request filters and `k`; every path of the plan (post-filter, deepened, native) is
forced in turn, and each answer is compared with the store's native filtered search over the whole filter
(the plan switched off): the same chunks in the same order, never only "no forbidden chunk".
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import retrieve
from rag.base.acl import Permissions, Principal, permission_filter
from rag.base.filters import and_filters, matches, matches_canonical, validate_filter
from rag.base.tracing import stage
from rag.compose.resource import Resource
from rag.stores import fts_index, permission_index, permission_plan, permission_vectors
from rag.stores.chroma import new_chroma
from rag.stores.chroma_chunks import ChromaChunkStore
from rag.stores.fts_index import FTSIndex
from rag.stores.permission_plan import PermissionPlan

_CLIENT = chromadb.EphemeralClient()
#: a directory's client: its collections keep their permission keys and vectors beside them (`chroma_permitted`)
_DIR_CLIENT = chromadb.PersistentClient(path=tempfile.mkdtemp(prefix="plan-chroma-"))
_EMBEDDING = DeterministicFakeEmbedding(size=16)
USERS = ["ann", "bob"]
GROUPS = ["team-a", "team.b", "ops", "hr"]   # "team.b" is written as a hashed key
WORDS = ["revenue", "costs", "growth", "risk"]


@contextlib.contextmanager
def plan_mode(mode: str) -> Iterator[None]:
    """"off": the store's native filter only; "deepen": a short first list and deeper lists whatever they cost;
    "native": a short first list, never deeper (too few permitted: the native filter); "exact": the search over the
    permitted chunks (`rag.stores.permission_index`) whatever their share, where it applies; "over-fetch": Chroma's
    list read deeper and checked in its permission file (`rag.stores.permission_vectors`), where it applies;
    "default": as shipped. "deepen" and "native" never search over the permitted chunks only."""
    saved = (permission_plan.ENABLED, permission_plan.FIRST_EXTRA, permission_plan.ROW_BRANCHES_PER_CANDIDATE,
             fts_index.FTS_CANDIDATE_COST, fts_index.FTS_ROUND_COST, permission_index.EXACT_SHARE,
             permission_vectors.FORCE, fts_index.FTS_FIRST_MIN_SHARE)
    if mode == "exact":
        permission_index.EXACT_SHARE = math.inf   # (a sum of key counts may exceed the chunks)
        permission_vectors.FORCE = "exact"
    elif mode == "over-fetch":
        permission_vectors.FORCE = "over-fetch"
    elif mode in ("deepen", "native"):
        permission_index.EXACT_SHARE = -1.0
        permission_vectors.FORCE = "lists"
        fts_index.FTS_FIRST_MIN_SHARE = math.inf   # (FTS5's first list as short as the plan's)
    if mode == "off":
        permission_plan.ENABLED = False
    elif mode in ("deepen", "native"):
        permission_plan.FIRST_EXTRA = 1
        cost = 0 if mode == "deepen" else math.inf
        permission_plan.ROW_BRANCHES_PER_CANDIDATE = fts_index.FTS_CANDIDATE_COST = fts_index.FTS_ROUND_COST = cost
    permission_plan._NATIVE.clear()   # (what earlier searches remembered: each test starts from the lists)
    permission_plan._MANY.clear()
    try:
        yield
    finally:
        permission_plan._NATIVE.clear()
        permission_plan._MANY.clear()
        (permission_plan.ENABLED, permission_plan.FIRST_EXTRA, permission_plan.ROW_BRANCHES_PER_CANDIDATE,
         fts_index.FTS_CANDIDATE_COST, fts_index.FTS_ROUND_COST, permission_index.EXACT_SHARE,
         permission_vectors.FORCE, fts_index.FTS_FIRST_MIN_SHARE) = saved


permissions = st.sampled_from([None, Permissions(public=True), Permissions(users=frozenset({"ann"})),
                               *(Permissions(groups=frozenset({g})) for g in GROUPS),
                               Permissions(groups=frozenset({"ops", "hr"})), Permissions()])
principals = st.one_of(
    st.builds(Principal, st.sampled_from([*USERS, "dave"]), st.frozensets(st.sampled_from(GROUPS), max_size=1)),
    st.just(Principal("ann", frozenset(GROUPS))))    # reads nearly every chunk
request_filters = st.one_of(st.none(), st.builds(lambda v: {"n": {"$lt": v}}, st.integers(5, 60)),
                            st.builds(lambda w: {"word": w}, st.sampled_from(WORDS)))
#: permission keys a hit may hold in a damaged or hand-written store: none of them grants anything but `True`
odd_values = st.sampled_from([True, False, 1, 0, 1.0, "true", "True", "1"])


@st.composite
def corpora(draw: st.DrawFn) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, text, metadata) of 10-60 chunks; permissions drawn per chunk, a few with odd permission values."""
    out = []
    for n in range(draw(st.integers(10, 60))):
        word = draw(st.sampled_from(WORDS))
        md: dict[str, Any] = {"doc_id": f"d{n // 3}", "chunk_index": n % 3, "n": n, "word": word}
        perm = draw(permissions)
        if perm is not None:
            md = perm.stamp(md)
        if draw(st.integers(0, 9)) == 0:
            md[draw(st.sampled_from(["acl_public", "acl_g_ops", "acl_u_ann"]))] = draw(odd_values)
        out.append((f"{n:032x}", f"zq{n} {word} {' '.join(WORDS[: n % 4])}", md))
    return out


def _chroma(corpus: list[tuple[str, str, dict[str, Any]]], *, directory: bool = False) -> ChromaChunkStore:
    client = _DIR_CLIENT if directory else _CLIENT
    chunks = ChromaChunkStore.of(new_chroma(f"plan-{uuid.uuid4().hex}", _EMBEDDING, client=client))
    ids, texts, metas = zip(*corpus, strict=True)
    chunks.add(ids, _EMBEDDING.embed_documents(list(texts)), texts, metas)
    return chunks


def _fts(corpus: list[tuple[str, str, dict[str, Any]]]) -> FTSIndex:
    index = FTSIndex(Path(tempfile.mkdtemp(prefix="plan-fts-")) / "lexical.sqlite")
    ids, texts, metas = zip(*corpus, strict=True)
    index.add(ids, texts, metas)
    return index


def _planned(search: Any, mode: str) -> tuple[list[str], str | None]:
    with plan_mode(mode), stage("search") as current:
        found = search()
    return [doc.id for doc, _ in found], current.attributes.get("permission_plan")


_slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=60, deadline=None, suppress_health_check=_slow_ok)
@given(corpus=corpora(), principal=principals, flt=request_filters, default=st.booleans(), k=st.integers(1, 12),
       mode=st.sampled_from(["default", "deepen", "native", "exact", "over-fetch"]),
       store=st.sampled_from(["chroma", "chroma in a directory", "fts"]), question=st.sampled_from(WORDS))
def test_the_plan_answers_what_the_native_filter_answers(corpus, principal, flt, default, k, mode, store, question):
    whole = and_filters(flt, principal.filter(public_by_default=default))
    if store.startswith("chroma"):
        chunks, vector = _chroma(corpus, directory=store != "chroma"), _EMBEDDING.embed_query(question)
        search = lambda: chunks.search(vector, k=k, filter=whole)   # noqa: E731
    else:
        index = _fts(corpus)
        search = lambda: index.search(question, k=k, filter=whole)   # noqa: E731
    native, path = _planned(search, "off")
    assert path is None
    got, path = _planned(search, mode)
    event(f"{store}: {path}")
    assert got == native, (path, got, native)
    allowed = {id_ for id_, _, md in corpus if matches(md, whole)}
    assert set(got) <= allowed
    if mode == "native" and path != "post-filter":
        assert path == "native"
    if mode == "exact" and store != "chroma" and not default:   # (a principal's `$or` of keys that must be true)
        assert path == "exact"
    if mode == "over-fetch" and store == "chroma in a directory" and not default:
        assert path == "over-fetch"


def _labelled(n: int, readable: set[int]) -> list[tuple[str, str, dict[str, Any]]]:
    """`n` chunks, those in `readable` for team-a, the others for hr."""
    return [(f"{i:032x}", f"zq{i} revenue growth", Permissions(groups=frozenset({"team-a" if i in readable else "hr"}))
             .stamp({"doc_id": f"d{i}", "chunk_index": 0, "source": f"{i}.md"})) for i in range(n)]


def test_each_path_runs_when_it_should_and_says_so():
    """Reading everything: the first list suffices; a third: a deeper list; one chunk of 60: Chroma's filter."""
    ann = Principal("ann", frozenset({"team-a"}))
    vector = _EMBEDDING.embed_query("revenue")
    cases = [(set(range(60)), "default", "post-filter"), (set(range(0, 60, 3)), "deepen", "deepened"),
             ({7}, "native", "native"), ({7, 30}, "default", "exact")]
    for readable, mode, path in cases:
        chunks, index = _chroma(_labelled(60, readable), directory=path == "exact"), _fts(_labelled(60, readable))
        for search in (lambda: chunks.search(vector, k=5, filter=ann.filter()),
                       lambda: index.search("revenue", k=5, filter=ann.filter())):
            got, ran = _planned(search, mode)
            assert ran == path
            assert got == _planned(search, "off")[0]
            assert {int(i, 16) for i in got} <= readable and len(got) == min(5, len(readable))


def test_fts5_asks_a_first_list_as_deep_as_a_large_share_needs():
    """A principal reading a third of the chunks (over `EXACT_SHARE`: not searched over its chunks alone): FTS5,
    whose every deeper list ranks every match again, asks one first list deep enough for that share (its keys'
    counts, looked up for the exact path) and answers from it, what its native filter answers."""
    ann = Principal("ann", frozenset({"team-a"}))
    index = _fts(_labelled(60, set(range(0, 60, 3))))
    for k in (3, 5, 8):
        got, ran = _planned(lambda: index.search("revenue", k=k, filter=ann.filter()), "default")
        assert ran == "post-filter"
        assert got == _planned(lambda: index.search("revenue", k=k, filter=ann.filter()), "off")[0]
        assert len(got) == k and all(int(i, 16) % 3 == 0 for i in got)
    with plan_mode("deepen"):   # (the plan's short first list: a deeper one is needed)
        assert _planned(lambda: index.search("revenue", k=8, filter=ann.filter()), "deepen")[1] == "deepened"


def test_a_request_reports_the_path_in_its_timings():
    corpus = _labelled(40, {3})
    resource = Resource.from_vectorstore("docs", _chroma(corpus).vectorstore(_EMBEDDING))
    result = retrieve("revenue", resource, principal=Principal("ann", frozenset({"team-a"})), k=2, fetch_k=5)
    assert [d.metadata["doc_id"] for d in result.context] == ["d3"]
    assert "permission_plan.native" in result.timings and "search" in result.timings
    everyone = retrieve("revenue", resource, principal=Principal("bob", frozenset({"team-a", "hr"})), k=2, fetch_k=5)
    assert "permission_plan.post-filter" in everyone.timings and len(everyone.context) == 2
    kept = Resource.from_vectorstore("docs", _chroma(corpus, directory=True).vectorstore(_EMBEDDING))
    exact = retrieve("revenue", kept, principal=Principal("ann", frozenset({"team-a"})), k=2, fetch_k=5)
    assert [d.metadata["doc_id"] for d in exact.context] == ["d3"] and "permission_plan.exact" in exact.timings


def test_too_few_survivors_fall_back_to_the_native_filter_not_to_fewer_hits():
    """A principal reading 2 of 50 chunks, k=2: the first list (10) holds at most one of them; the answer is
    still both (Chroma's own filter), never a shorter list."""
    corpus = _labelled(50, {5, 44})
    chunks = _chroma(corpus)
    vector = _EMBEDDING.embed_query("zq5 revenue growth")
    got, path = _planned(lambda: chunks.search(vector, k=2, filter=Principal("x", frozenset({"team-a"})).filter()),
                         "native")
    assert path == "native" and sorted(got) == [f"{5:032x}", f"{44:032x}"]
    in_directory = _chroma(corpus, directory=True)
    got, path = _planned(lambda: in_directory.search(vector, k=2, filter=Principal("x", frozenset({"team-a"})).filter()),
                         "default")
    assert path == "exact" and sorted(got) == [f"{5:032x}", f"{44:032x}"]


@settings(max_examples=300, deadline=None)
@given(md=st.dictionaries(st.sampled_from(["acl_public", "acl_u_ann", "acl_g_ops", "acl_g_hr", "acl_g_team-a", "x"]),
                          odd_values, max_size=5),
       principal=principals, default=st.booleans())
def test_the_per_hit_check_is_matches(md, principal, default):
    """The set-lookup check of a principal's filter decides as `matches` does, on any value a key may hold."""
    flt = permission_filter(principal, public_by_default=default)
    plan = PermissionPlan.of(flt)
    assert plan is not None and plan.rest is None and plan.branches == 2 + len(principal.groups)
    assert plan.allows(md) == matches_canonical(md, flt) == matches(md, flt)


def test_the_plan_splits_only_conditions_on_permission_keys():
    ann = Principal("ann", frozenset({"ops"}))
    plan = PermissionPlan.of(and_filters({"$or": [{"year": 2024}, {"acl_public": True}]}, ann.filter()))
    assert plan.rest == validate_filter({"$or": [{"year": 2024}, {"acl_public": True}]})   # mixed: native
    both = PermissionPlan.of(and_filters(ann.filter(), Principal("bob").filter(), {"$not": {"acl_g_hr": True}}))
    assert both.rest is None
    md = {"acl_public": False, "acl_g_ops": True, "acl_u_bob": True}
    assert both.allows(md) and not both.allows({**md, "acl_g_hr": True}) and not both.allows({"acl_g_ops": True})
    assert PermissionPlan.of(None) is None and PermissionPlan.of({"acl": 1}) is None


def test_a_principal_of_a_thousand_groups_is_checked_without_reading_its_groups_per_hit():
    principal = Principal("ann", frozenset(f"g{i}" for i in range(1000)))
    plan = PermissionPlan.of(principal.filter())
    rng = np.random.default_rng(0)
    hits = [{"acl_public": False, f"acl_g_g{rng.integers(0, 2000)}": True} for _ in range(500)]
    assert [plan.allows(md) for md in hits] == [matches_canonical(md, principal.filter()) for md in hits]
    assert PermissionPlan.of(and_filters({"n": 1}, principal.filter())).allows is plan.allows   # remembered


def test_a_principal_that_went_native_goes_native_again_then_looks_again():
    """After a native search, the same principal on the same store skips the lists (`NATIVE_AGAIN` times); the
    answer is the native filter's all the same, also after its permissions changed; then the lists run again."""
    corpus = _labelled(60, {7})
    chunks, ann = _chroma(corpus), Principal("ann", frozenset({"team-a"}))
    vector = _EMBEDDING.embed_query("revenue")
    search = lambda: chunks.search(vector, k=5, filter=ann.filter())   # noqa: E731
    with plan_mode("default"):
        with stage("search") as first:
            search()
        assert first.attributes["permission_plan"] == "native"
        ids, _, metas = zip(*corpus, strict=True)
        chunks.update_metadatas(ids, [Permissions(groups=frozenset({"team-a"})).stamp(md) for md in metas])
        paths, answers = [], []
        for _ in range(permission_plan.NATIVE_AGAIN + 1):
            with stage("search") as current:
                answers.append([doc.id for doc, _ in search()])
            paths.append(current.attributes["permission_plan"])
    assert paths == ["native"] * (permission_plan.NATIVE_AGAIN - 1) + ["post-filter"] * 2
    with plan_mode("off"):
        assert answers == [[doc.id for doc, _ in search()]] * len(answers) and len(answers[0]) == 5
