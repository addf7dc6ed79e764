"""Two knowledge bases, one collection (issue 37, item 5): distinct names never share a Chroma collection,
and a collection an older rag let two knowledge bases share is found on open and separated by a write."""

from __future__ import annotations

import re

import chromadb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing import kb_parts
from rag.indexing.kb_settings import is_name
from rag.stores.registry import knowledge_base_store, store_name

ISSUE_PAIRS = [("x", "rag-x"), ("acme", "acme_"), ("acme", "acme."), ("acme", "acme-"), ("acme_", "acme-")]
_CHROMA = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]")

kb_names = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
# names built to collide under cleaning: a stem, then what cleaning strips or a 'rag-' prefix
near_names = st.builds(lambda stem, tail, prefix: (prefix + stem + tail)[:63],
                       st.from_regex(r"\A[a-z0-9]{1,4}\Z"), st.sampled_from(["", ".", "_", "-", "..", "-_", "--0123456789ab"]),
                       st.sampled_from(["", "rag-"]))


@pytest.mark.parametrize(("a", "b"), ISSUE_PAIRS)
def test_the_issue_pairs_get_distinct_collections(a, b):
    assert store_name(a) == store_name(b)   # what an older rag gave both
    assert knowledge_base_store(a) != knowledge_base_store(b)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(kb_names, near_names).filter(is_name), min_size=2, max_size=12, unique=True))
def test_generated_names_never_share_a_collection_and_each_is_valid_for_chroma(names):
    collections = [knowledge_base_store(n) for n in names]
    assert len(set(collections)) == len(names)
    for name, collection in zip(names, collections, strict=True):
        assert _CHROMA.fullmatch(collection) and ".." not in collection, collection
        if store_name(name) == name and ".." not in name and not re.fullmatch(r".*--[0-9a-f]{12}", name):
            assert collection == name   # a name cleaning leaves as it is keeps the collection it always had


def test_derived_names_are_accepted_by_chroma():
    client = chromadb.EphemeralClient()
    for name in ["x", "ab", "acme_", "a..b", "rag-x--2d711642b726", "z" * 63]:
        assert client.get_or_create_collection(knowledge_base_store(name)).name == knowledge_base_store(name)


def _docs(name: str, cities: list[str]) -> list[Document]:
    return [Document(page_content=f"{city} belongs to {name}.", metadata={"source": f"{name}/{city}"})
            for city in cities]


def _contents(kb: KnowledgeBase) -> list[str]:
    return sorted(d.page_content for d in kb.get_documents())


@pytest.mark.parametrize(("a", "b"), ISSUE_PAIRS)
def test_two_new_knowledge_bases_keep_to_their_own_chunks(tmp_path, a, b):
    emb = DeterministicFakeEmbedding(size=8)
    first, second = KnowledgeBase(a, tmp_path, embedding=emb), KnowledgeBase(b, tmp_path, embedding=emb)
    first.add_documents(_docs(a, ["Paris", "Rome"]))
    second.add_documents(_docs(b, ["Oslo"]))
    assert (first.count(), second.count()) == (2, 1)
    assert _contents(KnowledgeBase(b, tmp_path, embedding=emb)) == [f"Oslo belongs to {b}."]


def _legacy(monkeypatch, tmp_path, pairs, emb):
    """Knowledge bases made by the older rule (the collection is the name cleaned), as an older rag made them."""
    with monkeypatch.context() as patch:
        patch.setattr(kb_parts, "knowledge_base_store", store_name)
        patch.setattr(kb_parts, "separate", lambda *args, **kwargs: False)   # (it knew of no sharing)
        patch.setattr(kb_parts, "sharers", lambda *args: [])
        for name, cities in pairs:
            kb = KnowledgeBase(name, tmp_path, embedding=emb)
            kb.add_documents(_docs(name, cities) + _docs("common", ["Bern"]))
            kb.close()


def test_a_collection_an_older_rag_shared_is_refused_on_open_then_separated_by_a_write(tmp_path, monkeypatch,
                                                                                      recording_embedding):
    emb = recording_embedding
    _legacy(monkeypatch, tmp_path, [("acme", ["Paris", "Rome"]), ("acme_", ["Oslo"])], emb)
    assert KnowledgeBase("acme", tmp_path, embedding=emb).storage.manifest.store.collection == "acme"
    assert KnowledgeBase("acme_", tmp_path, embedding=emb).storage.manifest.store.collection == "acme"
    for name in ("acme", "acme_"):   # the shared collection today: each would count the other's chunks
        with pytest.raises(StoreError, match=r"keep their chunks in one Chroma collection 'acme'.*rag index") as err:
            KnowledgeBase(name, tmp_path, embedding=emb).count()
        assert "'acme'" in str(err.value) and "'acme_'" in str(err.value) and "\n" not in str(err.value)
    embedded = sum(map(len, emb.batches))
    report = KnowledgeBase("acme_", tmp_path, embedding=emb).add_documents(_docs("acme_", ["Oslo"]) +
                                                                          _docs("common", ["Bern"]))
    assert len(report.unchanged) == 2 and sum(map(len, emb.batches)) == embedded   # moved, nothing embedded
    acme, acme_ = KnowledgeBase("acme", tmp_path, embedding=emb), KnowledgeBase("acme_", tmp_path, embedding=emb)
    assert acme_.storage.manifest.store.collection == knowledge_base_store("acme_") != "acme"
    assert _contents(acme) == ["Bern belongs to common.", "Paris belongs to acme.", "Rome belongs to acme."]
    assert _contents(acme_) == ["Bern belongs to common.", "Oslo belongs to acme_."]
    assert sorted(d.page_content for d in acme_.as_retriever(k=5).invoke("Oslo")) == _contents(acme_)


def test_a_write_of_the_clean_name_separates_the_other_and_no_shared_collection_is_left(tmp_path, monkeypatch):
    emb = DeterministicFakeEmbedding(size=8)
    _legacy(monkeypatch, tmp_path, [("x", ["Paris"]), ("rag-x", ["Oslo"]), ("acme.", ["Rome"]), ("acme-", ["Lima"])],
            emb)
    KnowledgeBase("rag-x", tmp_path, embedding=emb).add_documents(_docs("rag-x", ["Oslo"]))
    assert _contents(KnowledgeBase("x", tmp_path, embedding=emb)) == ["Bern belongs to common.", "Paris belongs to x."]
    assert _contents(KnowledgeBase("rag-x", tmp_path, embedding=emb)) == ["Bern belongs to common.",
                                                                          "Oslo belongs to rag-x."]
    KnowledgeBase("acme.", tmp_path, embedding=emb).add_documents(_docs("acme.", ["Rome"]))  # neither is 'acme'
    assert _contents(KnowledgeBase("acme-", tmp_path, embedding=emb)) == ["Bern belongs to common.",
                                                                          "Lima belongs to acme-."]
    client = chromadb.PersistentClient(path=str(tmp_path.resolve()))
    assert client.get_collection("acme").count() == 0   # nothing left that a new 'acme' would search


def test_an_older_knowledge_base_sharing_nothing_keeps_opening_its_collection(tmp_path, monkeypatch):
    emb = DeterministicFakeEmbedding(size=8)
    _legacy(monkeypatch, tmp_path, [("x", ["Paris"]), ("notes_", ["Rome"])], emb)
    for name in ("x", "notes_"):
        kb = KnowledgeBase(name, tmp_path, embedding=emb)
        assert kb.storage.manifest.store.collection == store_name(name) != knowledge_base_store(name)
        assert kb.count() == 2 and len(kb.add_documents(_docs(name, ["Paris"] if name == "x" else ["Rome"]) +
                                                        _docs("common", ["Bern"])).unchanged) == 2
