from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.autocontext import AutoContext
from rag.indexing.tags import KeywordTagger, tag_filter, tag_key

DOCS = [Document(page_content="Cloud revenue grew as cloud margins improved.", metadata={"source": "a"}),
        Document(page_content="The bank raised interest rates twice this year.", metadata={"source": "b"}),
        Document(page_content="The bank opened a cloud data centre.", metadata={"source": "c"})]


def test_tfidf_tags_pick_distinctive_words_per_chunk():
    tagged = KeywordTagger(max_tags=2)(DOCS)
    assert "cloud" in tagged[0].metadata["tags"].split("|")
    assert all(len(d.metadata["tags"].strip("|").split("|")) <= 2 for d in tagged)
    assert all(all(isinstance(v, str | bool) for v in d.metadata.values()) for d in tagged)


def test_vocabulary_tags_match_stemmed_phrases():
    tagged = KeywordTagger(vocabulary=["interest rate", "Cloud"])(DOCS)
    assert [d.metadata["tags"] for d in tagged] == ["|cloud|", "|interest_rate|", "|cloud|"]
    assert tagged[1].metadata["tag_interest_rate"] is True and "tag_cloud" not in tagged[1].metadata


def test_tags_select_chunks_through_the_portable_filter(tmp_path):
    kb = KnowledgeBase("tagged", tmp_path, embedding=DeterministicFakeEmbedding(size=8),
                       autocontext=AutoContext(enabled=False), tagger=KeywordTagger(vocabulary=["cloud", "bank"]))
    kb.add_documents(DOCS)
    found = kb.as_retriever(k=10).invoke("anything", filter=tag_filter("cloud"))
    assert sorted(d.metadata["source"] for d in found) == ["a", "c"]
    both = kb.as_retriever(k=10).invoke("anything", filter=tag_filter("cloud", "bank", match="all"))
    assert [d.metadata["source"] for d in both] == ["c"]
    assert KnowledgeBase.open("tagged", tmp_path).tagger.settings()["vocabulary"] == ["cloud", "bank"]


def test_tag_names_are_normalised_and_validated():
    assert tag_key("Net-Income (GAAP)") == "tag_net_income_gaap"
    with pytest.raises(ConfigError, match="at least one letter"):
        tag_key("!!")
    with pytest.raises(ConfigError, match="'any' or 'all'"):
        tag_filter("x", match="some")
    with pytest.raises(ConfigError, match="max_tags"):
        KeywordTagger(max_tags=0)
