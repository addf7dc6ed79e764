"""Nothing a store's own files say leads outside the store: generated hostile `bm25.json` pointers.

Knowledge base A's `bm25.json` is rewritten, with A's current fingerprint, to name B's saved BM25
index in every spelling (absolute, ``../``, a symlinked ``bm25-*`` folder, ...) or garbage; A's
BM25 search must answer from A's chunks (the index is built again), never from B's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.store_files import store_child
from rag.retrieval.bm25_cache import BM25_POINTER, knowledge_base_bm25, records_fingerprint

SETTINGS = {"metadata_fields": ["title", "section"]}


def _kb(directory: Path, name: str) -> KnowledgeBase:
    return KnowledgeBase(name, directory, embedding=DeterministicFakeEmbedding(size=16))


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    kb_a, kb_b = _kb(a, "alpha"), _kb(b, "beta")
    kb_a.add_documents([Document(page_content="Rome is in Italy.", metadata={"source": "it"})])
    kb_b.add_documents([Document(page_content="Lisbon is secret in Portugal.", metadata={"source": "pt"})])
    knowledge_base_bm25(kb_b, SETTINGS)   # B's index is saved
    folder = json.loads((kb_b.home / BM25_POINTER).read_text())["directory"]
    return kb_a, kb_b, kb_b.home / folder


def _spellings(kb_a: KnowledgeBase, target: Path) -> st.SearchStrategy:
    rel = os.path.relpath(target, kb_a.home)
    return st.one_of(
        st.sampled_from([str(target), rel, f"./{rel}", f"bm25-x/../{rel}", str(target) + "/", f"{rel}/.",
                         target.name, "..", ".", "/", "bm25-evil", "bm25-evil/.."]),
        st.builds(lambda n: "../" * n + str(target).lstrip("/"), st.integers(1, 12)),
        st.text(max_size=40), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=3),
        st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data(), link=st.booleans())
def test_a_pointer_never_reads_another_knowledge_base_index(two_stores, data, link):
    kb_a, _, target = two_stores
    directory = data.draw(_spellings(kb_a, target))
    evil = kb_a.home / "bm25-evil"
    if link and not evil.is_symlink():
        evil.symlink_to(target, target_is_directory=True)
    (kb_a.home / BM25_POINTER).write_text(json.dumps(
        {"fingerprint": records_fingerprint(kb_a, SETTINGS), "directory": directory}))
    index = knowledge_base_bm25(kb_a, SETTINGS)
    texts = [index.document(i).page_content for i, _ in index.search("Lisbon Rome", k=5)]
    assert texts == ["Rome is in Italy."], (directory, texts)
    if evil.is_symlink():
        evil.unlink()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=200), st.builds(lambda n: b"[" * n, st.integers(1000, 200_000)),
                     st.just(b'{"fingerprint": "x", "directory": "' + b"a" * 10_000 + b'"}')))
def test_a_garbage_pointer_is_a_cache_miss(two_stores, raw):
    kb_a = two_stores[0]
    (kb_a.home / BM25_POINTER).write_bytes(raw)
    index = knowledge_base_bm25(kb_a, SETTINGS)
    assert [index.document(i).page_content for i, _ in index.search("Rome", k=5)] == ["Rome is in Italy."]


@pytest.mark.parametrize("name", ["../x", "/etc", "bm25-a/../../b", "bm25-a\\..", "bm25-\0", "", None, 3])
def test_store_child_refuses_names_that_are_not_one_plain_component(tmp_path, name):
    with pytest.raises(StoreError, match="store file naming it was edited"):
        store_child(tmp_path, name, pattern=r"bm25-[A-Za-z0-9_]{1,64}", what="folder")


def test_store_child_refuses_a_symlinked_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / "bm25-abc").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreError, match="symlink"):
        store_child(home, "bm25-abc", pattern=r"bm25-[A-Za-z0-9_]{1,64}", what="folder")
    shutil.rmtree(outside)
