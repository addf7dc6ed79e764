"""The seed's subclass example, with only its imports updated for LangChain 1.x."""

from __future__ import annotations

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import LLMChainFilter
from langchain_core.language_models import BaseLanguageModel, FakeListChatModel
from langchain_core.runnables import RunnableLambda, RunnableParallel

from rag import RAG, Resource, rag_chain_from_docs


class RerankedRAG(RAG):
    llm: BaseLanguageModel

    @property
    def resources_retrieval_chain(self):
        return ContextualCompressionRetriever(
            base_compressor=LLMChainFilter.from_llm(self.llm),
            base_retriever=RunnableParallel({r.name: r.as_runnable() for r in self.resources})
            | RunnableLambda(lambda x: [doc for docs in x.values() for doc in docs]),
        )


class YesNoJudge(FakeListChatModel):
    """Answers YES for documents that mention Italy, NO otherwise (a scripted relevance judge)."""

    def _call(self, messages, stop=None, run_manager=None, **kwargs):
        context = messages[-1].content.split(">>>")[1]
        return "YES" if "Italy" in context else "NO"


def make(fake_embedding):
    docs = Resource.from_texts("docs", ["Rome is in Italy.", "Paris is in France.", "Milan is in Italy."],
                               metadatas=[{"n": 1}, {"n": 2}, {"n": 3}], embedding=fake_embedding)
    return RerankedRAG(resources=[docs], llm=YesNoJudge(responses=["unused"]),
                       generation_chain=rag_chain_from_docs(FakeListChatModel(responses=["Italy [1]"] * 5)),
                       extras={"count_docs": lambda x: len(x["context"])})


def test_reranked_rag_keeps_only_documents_the_llm_accepts(fake_embedding):
    out = make(fake_embedding).chain().invoke("Which cities are in Italy?")
    assert sorted(d.page_content for d in out["context"]) == ["Milan is in Italy.", "Rome is in Italy."]
    assert out["answer"] == "Italy [1]" and out["count_docs"] == 2


def test_reranked_rag_honours_per_request_filters(fake_embedding):
    cfg = {"configurable": {"retrieval_chain": {"docs": {"search_kwargs": {"filter": {"n": {"$gt": 1}}}}}}}
    out = make(fake_embedding).chain().invoke("Which cities are in Italy?", config=cfg)
    assert [d.page_content for d in out["context"]] == ["Milan is in Italy."]


def test_reranked_rag_honours_build_time_settings(fake_embedding):
    chain = make(fake_embedding).get_chain(retrieval_chain={"docs": {"search_kwargs": {"k": 1, "filter": {"n": 1}}}})
    assert [d.page_content for d in chain.invoke("Italy?")["context"]] == ["Rome is in Italy."]
