"""No chunk outside the principal's permissions, ever: a property of every stage and every door.

Generated corpora whose chunks carry generated permissions (they vary within a document, so a
stage that reads a document's other chunks, expansion or RSE, meets chunks the principal may not
read), generated principals, request filters and every retrieval setting, through `rag.retrieve`,
`RAG(...).chain()` (also with per-resource filters) and the HTTP routes (`/invoke`, `/batch`,
`/v1/chat/completions`) with API keys. The oracle decides visibility from the permissions as
generated, not through the filter. Every chunk's text holds a marker (``zq<doc>x<index>``), so
text merged from neighbours or segments is traced back to the chunks it came from.

Chroma answers a principal's permissions with a plan (`rag.stores.permission_plan`: checked on the hits
of a search with the request's own filter, or a deeper list, or Chroma's filter): the tests draw which
path runs (`plan_mode`) and compare the answer with the one of Chroma's filter alone, chunk for chunk.
"""

from __future__ import annotations

import itertools
import re
import tempfile
import uuid
from typing import Any

import chromadb
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

from rag import retrieve
from rag.base.acl import Permissions, Principal, strip_permissions
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index, BM25Retriever
from tests.unit.retrieval.test_retrieval_filter_isolation import pipeline_settings
from tests.unit.stores.test_permission_plan import plan_mode

MARKER = re.compile(r"zq(\d+)x(\d+)")
WORDS = ["revenue", "costs", "growth", "risk", "margin", "cash"]
SECTIONS = ["Revenue", "Costs", "Risk"]
USERS = ["ann", "bob", "carol"]
GROUPS = ["team-a", "team.b", "ops"]   # "team.b" is written as a hashed key
_CLIENT = chromadb.EphemeralClient()
#: a directory's client: a principal who may read few is answered over the permitted chunks (`chroma_permitted`;
#: written here behind its back, by LangChain: the file is built again when a search needs it)
_DIR_CLIENT = chromadb.PersistentClient(path=tempfile.mkdtemp(prefix="access-chroma-"))
_EMBEDDING = DeterministicFakeEmbedding(size=16)

permissions = st.one_of(st.none(), st.builds(Permissions, st.frozensets(st.sampled_from(USERS), max_size=2),
                                             st.frozensets(st.sampled_from(GROUPS), max_size=2),
                                             st.sampled_from([False, False, False, True])))   # (some read few)
principals = st.one_of(
    st.builds(Principal, st.sampled_from([*USERS, "dave"]), st.frozensets(st.sampled_from(GROUPS), max_size=2)),
    st.builds(Principal, st.sampled_from(USERS), st.just(frozenset(GROUPS))))   # reads most chunks: post-filter
#: which path the permission plan takes when the first list is short: "deepen" (deeper lists), "native" (Chroma's
#: filter), "exact" (over the permitted chunks only, where the store keeps them), "default" (as shipped: small corpora
#: mostly end in the first list, the permitted chunks or Chroma's filter)
plan_modes = st.sampled_from(["default", "deepen", "native", "exact"])


def _contexts(run: Any, mode: str) -> tuple[list[str], list[str]]:
    """The texts `run()` returns under the plan's `mode`, and with Chroma's filter alone (the plan off)."""
    with plan_mode(mode):
        planned = [d.page_content for d in run()]
    with plan_mode("off"):
        native = [d.page_content for d in run()]
    return planned, native


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[Document], dict[str, Permissions | None]]:
    """Documents of 1-6 chunks; each chunk's permissions drawn (None: unlabeled). Returns chunks and the oracle."""
    chunks, truth = [], {}
    for d in range(draw(st.integers(1, 4))):
        source = f"file{draw(st.integers(0, 2))}.md"
        for i in range(draw(st.integers(1, 6))):
            section = draw(st.sampled_from(SECTIONS))
            body = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)))
            perm = draw(permissions)
            md = {"doc_id": f"d{d}", "chunk_index": i, "source": source, "title": f"Report {source}",
                  "page": draw(st.integers(0, 2)), "section": section}
            truth[f"zq{d}x{i}"] = perm
            chunks.append(Document(page_content=f"{section}\nzq{d}x{i} {body}",
                                   metadata=perm.stamp(md) if perm is not None else md))
    return chunks, truth


request_filters = st.one_of(st.none(), st.builds(lambda v: {"page": {"$lte": v}}, st.integers(0, 2)),
                            st.builds(lambda v: {"section": {"$in": v}},
                                      st.lists(st.sampled_from(SECTIONS), min_size=1, max_size=2)))


def _resource(kind: str, name: str, chunks: list[Document]) -> Resource:
    if kind == "bm25":
        return Resource.from_retriever(name, BM25Retriever.from_documents(chunks))
    store = Chroma(client=_DIR_CLIENT if kind.endswith("in a directory") else _CLIENT, collection_name=f"acl-{uuid.uuid4().hex}", embedding_function=_EMBEDDING,
                   collection_metadata={"hnsw:space": "cosine"})
    store.add_documents(chunks, ids=[f"{c.metadata['doc_id']}-{c.metadata['chunk_index']}" for c in chunks])
    if kind.startswith("chroma"):
        return Resource.from_retriever(name, store.as_retriever())
    return Resource.from_retriever(name, HybridRetriever(vectorstore=store, bm25=BM25Index.from_documents(chunks)))


def visible(principal: Principal, perm: Permissions | None, public_by_default: bool = False) -> bool:
    if perm is None:
        return public_by_default
    return perm.public or principal.id in perm.users or bool(principal.groups & perm.groups)


def assert_readable(texts: list[str], truth: dict[str, Permissions | None], principal: Principal,
                    public_by_default: bool = False) -> None:
    for text in texts:
        found = MARKER.findall(text)
        assert found, text
        for d, i in found:
            perm = truth[f"zq{d}x{i}"]
            assert visible(principal, perm, public_by_default), (principal, perm, text)


_slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
questions = st.lists(st.sampled_from(WORDS + SECTIONS), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=_slow_ok)
@given(data=st.data(), corpus=corpora(), principal=principals, flt=request_filters, default=st.booleans(),
       kind=st.sampled_from(["bm25", "chroma", "chroma in a directory", "hybrid", "hybrid in a directory"]),
       question=questions, mode=plan_modes)
def test_retrieve_returns_only_chunks_the_principal_may_read(data, corpus, principal, flt, default, kind, question,
                                                             mode):
    chunks, truth = corpus
    options = data.draw(pipeline_settings(chunks))
    if mode != "default":   # a first list shorter than the corpus, so that it may hold too few readable chunks
        options["fetch_k"] = data.draw(st.integers(1, 4))
    resource = _resource(kind, "docs", chunks)
    with plan_mode(mode):
        result = retrieve(question, resource, filter=flt, principal=principal, public_by_default=default, **options)
    assert_readable([d.page_content for d in result.context], truth, principal, default)
    for path in sorted(key for key in result.timings if key.startswith("permission_plan.")):
        event(path)   # (which paths the examples took: pytest --hypothesis-show-statistics)
    with plan_mode("off"):   # the plan's answer is Chroma's filter's, chunk for chunk
        native = retrieve(question, resource, filter=flt, principal=principal, public_by_default=default, **options)
    assert [d.page_content for d in result.context] == [d.page_content for d in native.context]
    route = result.extras.get("route")
    if route is not None:   # a route names only documents the principal could be given
        readable = {c.metadata["source"] for c in chunks
                    if visible(principal, truth[MARKER.search(c.page_content).group(0)], default)}
        assert set(route["values"]) <= readable and set(route["scores"]) <= readable, (route, readable)


@settings(max_examples=60, deadline=None, suppress_health_check=_slow_ok)
@given(corpus=corpora(), principal=principals, flt=request_filters, default=st.booleans(), question=questions,
       mode=plan_modes, k=st.integers(1, 3),
       kind=st.sampled_from(["chroma", "hybrid", "chroma in a directory", "hybrid in a directory"]))
def test_every_path_of_the_plan_gives_what_chromas_filter_gives(corpus, principal, flt, default, question, mode, k,
                                                                kind):
    """Short candidate lists (`fetch_k` = `k` of 1-3), so the first list often holds too few readable chunks:
    each path of the plan (post-filter, deepened, native) returns Chroma's own filter's context, chunk for chunk."""
    chunks, truth = corpus
    resource = _resource(kind, "docs", chunks)
    paths: list[str] = []

    def run() -> list[Document]:
        result = retrieve(question, resource, filter=flt, principal=principal, public_by_default=default, k=k,
                          fetch_k=k)
        paths.extend(key for key in result.timings if key.startswith("permission_plan."))
        return result.context

    planned, native = _contexts(run, mode)
    for path in sorted(set(paths)):
        event(path)
    assert_readable(planned, truth, principal, default)
    assert planned == native


@settings(max_examples=30, deadline=None, suppress_health_check=_slow_ok)
@given(data=st.data(), corpus=corpora(), principal=principals, first=request_filters, second=request_filters,
       plain=st.booleans(), question=questions)
def test_a_chain_filters_every_resource_by_the_principal(data, corpus, principal, first, second, plain, question):
    """Two resources, a per-resource request filter each (which must not replace the permissions)."""
    chunks, truth = corpus
    options = data.draw(pipeline_settings(chunks))
    options.pop("router", None), options.pop("routing", None)
    resources = [_resource("bm25", "a", chunks), _resource("chroma", "b", chunks)]
    rag = RAG(resources=resources, retrieval="plain") if plain else RAG(resources=resources, retrieval=options)
    request = {name: {"search_kwargs": {"filter": f}} for name, f in (("a", first), ("b", second)) if f}
    out = rag.chain().invoke(question, config={"configurable": {"principal": principal, "retrieval_chain": request}})
    assert_readable([d.page_content for d in out["context"]], truth, principal)


@settings(max_examples=30, deadline=None, suppress_health_check=_slow_ok)
@given(data=st.data(), corpus=corpora(), principal=principals, other=principals, flt=request_filters,
       default=st.booleans(), plain=st.booleans(), door=st.sampled_from(["argument", "config", "both", "chain", "async"]),
       question=questions, mode=plan_modes)
def test_as_retriever_returns_only_chunks_the_principal_may_read(data, corpus, principal, other, flt, default, plain,
                                                                  door, question, mode):
    """`RAG.as_retriever()`: the principal given to it, in a call's config, both (only what both may read), in a
    chain the retriever runs in, and on the async path."""
    import asyncio

    from langchain_core.runnables import RunnableLambda

    chunks, truth = corpus
    options = data.draw(pipeline_settings(chunks))
    options.pop("router", None), options.pop("routing", None)
    if mode != "default":   # a first list shorter than the corpus, so that it may hold too few readable chunks
        options["fetch_k"] = data.draw(st.integers(1, 4))
    resources = [_resource("bm25", "a", chunks), _resource("chroma", "b", chunks)]
    rag = RAG(resources=resources, retrieval="plain") if plain else RAG(resources=resources, retrieval=options)
    config = {"configurable": {"principal": principal, "public_by_default": default}}
    readers = [principal]
    if door == "argument":
        run = lambda: rag.as_retriever(principal=principal, public_by_default=default).invoke(question, filter=flt)  # noqa: E731
    elif door == "config":
        run = lambda: rag.as_retriever(filter=flt).invoke(question, config=config)  # noqa: E731
    elif door == "both":
        run = lambda: rag.as_retriever(principal=other, filter=flt).invoke(question, config=config)  # noqa: E731
        readers.append(other)
    elif door == "chain":
        run = lambda: (rag.as_retriever(filter=flt) | RunnableLambda(lambda found: found)).invoke(  # noqa: E731
            question, config=config)
    else:
        run = lambda: asyncio.run(rag.as_retriever(filter=flt).ainvoke(question, config=config))  # noqa: E731
    texts, native = _contexts(run, mode)
    for reader in readers:
        assert_readable(texts, truth, reader, default)
    assert texts == native   # exactly what Chroma's own filter gives, whichever path the plan took


def test_as_retriever_refuses_what_is_not_a_principal_and_hides_unlabeled_chunks():
    from rag.base.errors import ConfigError

    chunks = [Document(page_content="zq0x0 revenue", metadata={"doc_id": "d0", "chunk_index": 0, "source": "a.md"}),
              Document(page_content="zq1x0 revenue", metadata=Permissions(groups=frozenset({"ops"})).stamp(
                  {"doc_id": "d1", "chunk_index": 0, "source": "b.md"}))]
    rag = RAG(resources=[_resource("bm25", "docs", chunks)])
    with pytest.raises((ConfigError, ValueError), match="principal"):
        rag.as_retriever(principal="ann")
    with pytest.raises(ConfigError, match="principal"):
        rag.as_retriever().invoke("revenue", config={"configurable": {"principal": "ann"}})
    with pytest.raises(ConfigError, match="principal"):
        rag.as_retriever().invoke("revenue", principal=["ann"])
    assert len(rag.as_retriever().invoke("revenue")) == 2   # no principal: as the chain, unfiltered
    assert rag.as_retriever(principal=Principal("carol")).invoke("revenue") == []
    dave = rag.as_retriever(principal={"id": "dave", "groups": ["ops"]})
    assert [d.metadata["doc_id"] for d in dave.invoke("revenue")] == ["d1"]
    loose = rag.as_retriever(principal=Principal("carol"), public_by_default=True)
    assert [d.metadata["doc_id"] for d in loose.invoke("revenue")] == ["d0"]
    assert dave.invoke("revenue", config={"configurable": {"principal": Principal("carol")}}) == []   # both: neither


def test_a_principal_that_is_not_one_is_refused_not_ignored():
    chunks = [Document(page_content="zq0x0 revenue", metadata={"doc_id": "d0", "chunk_index": 0})]
    chain = RAG(resources=[_resource("bm25", "docs", chunks)]).chain()
    with pytest.raises(Exception, match="principal"):
        chain.invoke("revenue", config={"configurable": {"principal": "ann"}})


# ----------------------------------------------------------------------------- the HTTP routes
def _app(chunks: list[Document], default: bool) -> Any:
    from fastapi.testclient import TestClient

    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    keys = [{"sha256": _hash(f"key-{u}"), "principal": u, "groups": groups}
            for u, groups in (("ann", ["team-a"]), ("bob", ["team.b", "ops"]), ("carol", []), ("dave", ["ops"]))]
    import json
    import os
    env = f"RAG_TEST_KEYS_{uuid.uuid4().hex[:8]}"
    os.environ[env] = json.dumps(keys)
    llm = GenericFakeChatModel(messages=itertools.cycle(["It grew [1]."]))
    rag = RAG(resources=[_resource("hybrid", "docs", chunks)], generation_chain=rag_chain_from_docs(llm))
    settings_ = ServerConfig(identities={"api_keys_env": env}, public_by_default=default, support_scoring="lexical",
                             max_k=20)
    return TestClient(create_app(rag, settings=settings_), raise_server_exceptions=False, base_url="http://localhost")


def _hash(key: str) -> str:
    from rag.server.identity import hash_key
    return hash_key(key)


USER_GROUPS = {"ann": {"team-a"}, "bob": {"team.b", "ops"}, "carol": set(), "dave": {"ops"}}


@settings(max_examples=15, deadline=None, suppress_health_check=_slow_ok)
@given(corpus=corpora(), user=st.sampled_from(sorted(USER_GROUPS)), flt=request_filters, default=st.booleans(),
       k=st.integers(1, 6), question=questions)
def test_the_http_routes_return_only_chunks_the_caller_may_read(corpus, user, flt, default, k, question):
    pytest.importorskip("fastapi")
    chunks, truth = corpus
    principal = Principal(user, USER_GROUPS[user])
    body = {"question": question, "k": k, **({"filter": flt} if flt else {})}
    headers = {"Authorization": f"Bearer key-{user}"}
    with _app(chunks, default) as client:
        one = client.post("/invoke", json=body, headers=headers)
        assert one.status_code == 200, one.text
        batch = client.post("/batch", json={"requests": [body, body]}, headers=headers)
        chat = client.post("/v1/chat/completions", headers=headers, json={
            "model": "rag", "messages": [{"role": "user", "content": question}],
            "rag": {"k": k, **({"filter": flt} if flt else {})}})
        assert chat.status_code == 200, chat.text
    texts = [s["content"] for s in one.json()["sources"]]
    texts += [s["content"] for r in batch.json()["results"] for s in r["sources"]]
    texts += [s.get("content") or s.get("text") or "" for s in chat.json()["choices"][0]["message"]["rag"]["sources"]]
    assert_readable([t for t in texts if t], truth, principal, default)
    for source in one.json()["sources"]:   # who else may read a document is not shown
        assert not any(key.startswith("acl_") for key in source["metadata"])


def test_unlabeled_chunks_are_hidden_unless_public_by_default():
    chunks = [Document(page_content="zq0x0 revenue", metadata={"doc_id": "d0", "chunk_index": 0, "source": "a.md"}),
              Document(page_content="zq1x0 revenue", metadata=Permissions(public=True).stamp(
                  {"doc_id": "d1", "chunk_index": 0, "source": "b.md"}))]
    principal = Principal("carol")
    strict = retrieve("revenue", _resource("bm25", "docs", chunks), principal=principal)
    assert [d.metadata["doc_id"] for d in strict.context] == ["d1"]
    loose = retrieve("revenue", _resource("bm25", "docs", chunks), principal=principal, public_by_default=True)
    assert sorted(d.metadata["doc_id"] for d in loose.context) == ["d0", "d1"]
    assert strip_permissions(loose.context[0].metadata).keys() <= loose.context[0].metadata.keys()


def test_a_principal_of_a_thousand_groups_is_answered_by_chroma_and_the_memory_store():
    """Chroma refused an `$or` of 1,002 clauses ("Expression tree is too large"): it is sent nested now."""
    from rag.stores.memory import ExactVectorStore

    chunks = [Document(page_content=f"zq{d}x0 revenue", metadata=Permissions(groups=frozenset({f"g{d}"})).stamp(
        {"doc_id": f"d{d}", "chunk_index": 0, "source": f"{d}.md"})) for d in range(6)]
    principal = Principal("ann", frozenset(f"g{i}" for i in range(3, 1003)))
    memory = Resource.from_retriever("m", ExactVectorStore.from_documents(chunks, _EMBEDDING).as_retriever())
    for resource in (_resource("chroma", "docs", chunks), memory):
        found = retrieve("revenue", resource, principal=principal, k=6)
        assert sorted(d.metadata["doc_id"] for d in found.context) == ["d3", "d4", "d5"]
