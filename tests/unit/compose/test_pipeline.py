"""One retrieval pipeline: `retrieve()` and a `RAG` with retrieval settings run the same stages."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableSequence

from rag import RAG, KnowledgeBase, Resource, rag_chain_from_docs, retrieve
from rag.base.errors import ConfigError
from rag.compose.defaults import RECOMMENDED, recommended_retrieval
from rag.config.rag_config import parse_config
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.routing import DocumentRouter

EMB = DeterministicFakeEmbedding(size=16)
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Tyrell", "Cyberdyne", "Soylent"]


def _pages(company: str) -> list[Document]:
    return [Document(page_content=f"{company} annual report page {p}: revenue, margin and cash flow of {company}.",
                     metadata={"source": f"{company.lower()}.md", "page": p % 3, "doc_name": company})
            for p in range(6)]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = KnowledgeBase("filings", tmp_path_factory.mktemp("kb"), embedding=EMB)
    for company in COMPANIES:
        kb.add_documents(_pages(company))
    return kb


SETTINGS = [
    {},
    {"page_diversity": 0.3, "max_tokens": 120, "token_counter": "approx"},
    {"k": 3, "fetch_k": 10},
    {"expand": 1, "k": 2},
    RECOMMENDED,
]


@pytest.mark.parametrize("settings", SETTINGS, ids=[str(i) for i in range(len(SETTINGS))])
def test_a_one_resource_rag_returns_exactly_what_retrieve_returns(kb, settings):
    resource = kb.as_resource(routing="off")
    question = "What was Globex revenue and margin?"
    expected = retrieve(question, resource, **settings).context
    rag = RAG(resources=[resource], retrieval=settings,
              generation_chain=rag_chain_from_docs(FakeListChatModel(responses=["ok [1]"])))
    got = rag.chain().invoke(question)["context"]
    assert [(d.id, d.page_content) for d in got] == [(d.id, d.page_content) for d in expected]
    assert got, "the pipeline returned nothing"


def test_chain_is_a_runnable_sequence_with_named_steps(kb):
    chain = RAG(resources=[kb.as_resource()], retrieval={**RECOMMENDED, "token_counter": "approx"},
                generation_chain=rag_chain_from_docs(FakeListChatModel(responses=["ok [1]"]))).chain(
        retrieval_chain={"filings": {"search_kwargs": {"filter": {"page": 0}}}})
    assert type(chain) is RunnableSequence and chain.name == "RAG"
    assert all(d.metadata["page"] == 0 for d in chain.invoke("Hooli cash flow")["context"])


def test_several_resources_are_combined_only_in_the_aggregate():
    a = Resource.from_retriever("a", BM25Retriever.from_documents(_pages("Acme")))
    b = Resource.from_retriever("b", BM25Retriever.from_documents(_pages("Globex")))
    rag = RAG(resources=[a, b], retrieval={"k": 4, "max_tokens": None})
    docs = rag.chain().invoke("Acme revenue")["context"]
    result = retrieve("Acme revenue", [a, b], k=4, max_tokens=None)
    assert [d.page_content for d in docs] == [d.page_content for d in result.context]
    assert set(result.stages) >= {"candidates/a", "candidates/b", "fused"}
    assert {d.metadata["resource"] for d in docs} <= {"a", "b"} and len(docs) == 4


def test_the_plain_setting_interleaves_by_rank_and_cuts_nothing():
    a = Resource.from_retriever("a", BM25Retriever.from_documents(_pages("Acme")))
    b = Resource.from_retriever("b", BM25Retriever.from_documents(_pages("Globex")))
    docs = RAG(resources=[a, b], retrieval="plain").chain(retrieval_chain={"a": {"search_kwargs": {"k": 3}},
                                                         "b": {"search_kwargs": {"k": 2}}}).invoke("revenue")["context"]
    assert [d.metadata["resource"] for d in docs] == ["a", "b", "a", "b", "a"]


def test_kb_resource_carries_a_router_when_it_holds_many_documents_and_the_pipeline_applies_it(kb, tmp_path):
    routed = kb.as_resource(routing="auto")
    assert isinstance(routed.router, DocumentRouter)
    assert isinstance(routed.retriever, HybridRetriever)          # the retriever itself does not route
    docs = retrieve("Tyrell revenue", routed, k=5).context
    assert docs and {d.metadata["doc_name"] for d in docs} == {"Tyrell"}
    unrouted = retrieve("Tyrell revenue", routed, k=30, routing="off").context
    assert len({d.metadata["doc_name"] for d in unrouted}) > 1   # the pipeline setting turns it off
    small = KnowledgeBase("small", tmp_path, embedding=EMB)
    small.add_documents(_pages("Acme"))
    assert small.as_resource(routing="auto").router is None
    assert kb.as_resource().router is not None                    # the default
    assert kb.as_resource(routing="off").router is None
    # only a word the question writes as a name routes: "tyrell" in lower case is an ordinary word
    assert len({d.metadata["doc_name"] for d in retrieve("tyrell revenue", routed, k=8).context}) > 1
    assert type(small.as_resource(search="dense").retriever).__name__ == "KnowledgeBaseRetriever"


def test_the_default_rag_runs_the_recommended_pipeline(kb):
    rag = RAG(resources=[kb.as_resource()])
    assert rag.retrieval == recommended_retrieval() and rag.retrieval.page_diversity == RECOMMENDED["page_diversity"]
    assert RAG(resources=[kb.as_resource()], retrieval="plain").retrieval is None
    with pytest.raises(ConfigError, match="unknown retrieval 'plane'"):
        RAG(resources=[kb.as_resource()], retrieval="plane")


def test_config_retrieval_block_sets_every_stage_and_defaults_to_the_recommended_pipeline(tmp_path):
    base = {"embedding": {"kind": "deterministic", "size": 16},
            "resources": [{"name": "n", "kind": "chroma", "path": str(tmp_path), "create": True}]}
    assert RAG.from_config(base).retrieval == recommended_retrieval()
    cfg = {**base, "retrieval": {"max_tokens": 500, "reranker": "embedding", "rerank_weight": 0.5, "expand": 1,
                                 "rephrase": ["keywords"], "page_diversity": 0}}
    settings = RAG.from_config(cfg).retrieval
    assert (settings.max_tokens, settings.reranker, settings.expand, settings.rephrase) == (500, "embedding", 1,
                                                                                             ["keywords"])
    assert RAG.from_config({**base, "retrieval": {"pipeline": False}}).retrieval is None
    with pytest.raises(ConfigError, match="unknown RSE preset 'huge'"):
        parse_config({**base, "retrieval": {"rse": "huge"}})
    with pytest.raises(ConfigError, match="retrieval"):
        parse_config({**base, "retrieval": {"rerankr": "embedding"}})


def test_a_callers_filter_that_excludes_the_routed_documents_wins(kb):
    routed = kb.as_resource()
    docs = retrieve("Tyrell revenue", routed, k=3, filter={"doc_name": "Acme"}).context
    assert docs and {d.metadata["doc_name"] for d in docs} == {"Acme"}




def test_a_comparison_searches_each_side_without_the_route_so_both_documents_come_back(kb):
    # a router whose cards name only Tyrell: a question naming Tyrell is routed to its filing alone
    router = DocumentRouter({c: c if c == "Tyrell" else "annual report" for c in COMPANIES}, key="doc_name")
    # lexical search: the fake embeddings rank pages at random, which decided whether a side's pages made the cut
    resource = kb.as_resource(routing="off", search="bm25")
    assert router.route("How does Tyrell revenue compare to Hooli revenue?").values == ["Tyrell"]
    plain = retrieve("What was Tyrell and Hooli revenue?", resource, k=12, router=router, routing="filter").context
    assert {d.metadata["doc_name"] for d in plain} == {"Tyrell"}   # the route holds for other questions
    compared = retrieve("How does Tyrell revenue compare to Hooli revenue?", resource, k=12, router=router,
                        side_searches=True,
                        routing="filter").context
    assert {"Tyrell", "Hooli"} <= {d.metadata["doc_name"] for d in compared}
