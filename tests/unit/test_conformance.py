"""Every retriever the library exports passes `rag.testing.conformance.PortableRetrieverTests`."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import RAG, Resource
from rag.compose.retriever import RAGRetriever
from rag.indexing.kb_retriever import KnowledgeBaseRetriever
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index, BM25Retriever
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.sections import SectionRouter
from rag.stores import PartitionedChroma, PartitionedRetriever
from rag.stores.chroma import open_client, open_collection
from rag.stores.chroma_chunks import ChromaChunkStore
from rag.testing.conformance import PortableRetrieverTests

EMB = DeterministicFakeEmbedding(size=16)


def _collection(documents, name):
    collection = open_collection(open_client(None), f"{name}-{id(documents)}")
    collection.add(ids=[d.id for d in documents], documents=[d.page_content for d in documents],
                   metadatas=[d.metadata for d in documents], embeddings=EMB.embed_documents(
                       [d.page_content for d in documents]))
    return collection


class TestBM25Retriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        return BM25Retriever.from_documents(documents)


class TestHybridRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        return HybridRetriever.from_documents(documents, embedding=EMB, collection_name=f"hy-{id(documents)}")


class TestKnowledgeBaseRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        return KnowledgeBaseRetriever(chunks=ChromaChunkStore(_collection(documents, "kbr")), embedding=EMB)


class TestPartitionedRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        store = PartitionedChroma(f"part-{id(documents)}", EMB, partition_key="topic")
        store.add_texts([d.page_content for d in documents], metadatas=[d.metadata for d in documents],
                        ids=[d.id for d in documents])
        return PartitionedRetriever(store=store)


# Routing, named sections, rephrasing and RSE are stages of the one pipeline (no wrapper retrievers):
# a RAG running each, seen as a LangChain retriever, keeps the contract.
class TestRAGRetrieverRouting(PortableRetrieverTests):
    def make_retriever(self, documents):
        router = DocumentRouter.from_documents(documents, key="source", fields=("source",))
        resource = Resource.from_retriever("docs", BM25Retriever.from_documents(documents), router=router)
        return RAGRetriever(rag=RAG(resources=[resource]))


class TestRAGRetrieverSections(PortableRetrieverTests):
    def make_retriever(self, documents):
        resource = Resource.from_retriever("docs", BM25Retriever.from_documents(documents),
                                           sections=SectionRouter(documents, key="doc_id"))
        return RAGRetriever(rag=RAG(resources=[resource]))


class TestRAGRetrieverRephrase(PortableRetrieverTests):
    def make_retriever(self, documents):
        resource = Resource.from_retriever("docs", BM25Retriever.from_documents(documents))
        return RAGRetriever(rag=RAG(resources=[resource], retrieval={"rephrase": ["keywords"]}))


class TestRAGRetrieverRSE(PortableRetrieverTests):
    returns_chunks = False

    def make_retriever(self, documents):
        resource = Resource.from_retriever("docs", BM25Retriever(index=BM25Index.from_documents(documents)))
        return RAGRetriever(rag=RAG(resources=[resource], retrieval={"rse": "balanced"}))


class TestRAGRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        half = len(documents) // 2
        rag = RAG(resources=[Resource.from_retriever("a", BM25Retriever.from_documents(documents[:half])),
                             Resource.from_retriever("b", BM25Retriever.from_documents(documents[half:]))])
        return RAGRetriever(rag=rag)


class TestNativeInMemoryRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        from langchain_core.vectorstores import InMemoryVectorStore

        store = InMemoryVectorStore(EMB)
        store.add_documents(documents, ids=[d.id for d in documents])
        return Resource.from_vectorstore("inmemory", store).retriever


class TestNativeFaissRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        from rag.stores.faiss import FaissStore

        store = FaissStore.from_texts([d.page_content for d in documents], EMB, [d.metadata for d in documents],
                                      ids=[d.id for d in documents])
        return Resource.from_vectorstore("faiss", store).retriever


class TestNativeLanceRetriever(PortableRetrieverTests):
    @pytest.fixture
    def retriever(self, corpus, tmp_path):
        self.directory = tmp_path / "lance"
        return self.make_retriever(corpus)

    def make_retriever(self, documents):
        from rag.stores.lancedb import LanceStore

        store = LanceStore(EMB, uri=self.directory)
        store.add_texts([d.page_content for d in documents], [d.metadata for d in documents],
                        ids=[d.id for d in documents])
        return Resource.from_vectorstore("lancedb", store).retriever
