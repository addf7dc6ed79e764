"""Opening a Qdrant collection embeds nothing (langchain-qdrant's own check embeds a text, loading the document
model on every `rag ask`); the collection's vector size is checked against each query's vector instead."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

pytest.importorskip("qdrant_client")

from rag.base.errors import StoreError  # noqa: E402
from rag.stores.qdrant import open_store  # noqa: E402
from rag.stores.registry import chunks_of  # noqa: E402


class CountingEmbedding(DeterministicFakeEmbedding):
    calls: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += len(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return super().embed_query(text)


@pytest.fixture
def path(tmp_path):
    store = open_store("notes", DeterministicFakeEmbedding(size=16), path=str(tmp_path / "q"), create=True)
    store.add_texts(["the tide rises", "bread rises"], metadatas=[{"n": 1}, {"n": 2}])
    store.client.close()
    return str(tmp_path / "q")


def test_opening_an_existing_collection_embeds_nothing(path):
    embedding = CountingEmbedding(size=16)
    store = open_store("notes", embedding, path=path)
    assert embedding.calls == 0
    found = chunks_of(store).search(DeterministicFakeEmbedding(size=16).embed_query("the tide rises"), k=1,
                                    filter=None)
    assert [d.page_content for d, _ in found] == ["the tide rises"]
    store.client.close()


@pytest.mark.parametrize("size", [8, 32])
def test_a_query_vector_of_another_size_is_a_clear_store_error(path, size):
    store = open_store("notes", DeterministicFakeEmbedding(size=size), path=path)
    with pytest.raises(StoreError, match=r"holds 16-dimensional vectors and the query's embedding has "
                                         rf"{size}: search it with the embedding model it was built with"):
        chunks_of(store).search([0.1] * size, k=1, filter=None)
    store.client.close()


def test_a_collection_of_named_vectors_only_is_refused_with_their_names(tmp_path):
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("named", vectors_config={"image": models.VectorParams(size=4,
                                                                                   distance=models.Distance.COSINE)})
    client.close()
    with pytest.raises(StoreError, match=r"only named dense vectors \(image\)"):
        open_store("named", DeterministicFakeEmbedding(size=4), path=str(tmp_path / "q"))


def test_the_collections_distance_is_the_stores(tmp_path):
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("dot", vectors_config=models.VectorParams(size=4, distance=models.Distance.DOT))
    client.close()
    store = open_store("dot", DeterministicFakeEmbedding(size=4), path=str(tmp_path / "q"))
    assert store.distance == models.Distance.DOT
    store.client.close()


def test_stores_opened_on_one_folder_in_one_process_share_its_client(path):
    first = open_store("notes", DeterministicFakeEmbedding(size=16), path=path)
    second = open_store("notes", DeterministicFakeEmbedding(size=16), path=path)   # (before: "already accessed")
    assert second.client is first.client and chunks_of(second).count() == 2
    first.client.close()
    third = open_store("notes", DeterministicFakeEmbedding(size=16), path=path)   # a closed one is not reused
    assert chunks_of(third).count() == 2
    third.client.close()


@pytest.mark.integration
def test_rag_index_then_ask_on_a_qdrant_folder_in_one_process(tmp_path, capsys):
    import json

    from rag import cli

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tides.md").write_text("# Tides\n\nThe moon's pull raises the tides twice a day.\n")
    backend = json.dumps({"kind": "qdrant", "path": str(tmp_path / "qdrant")})
    store = ["--store", str(tmp_path / "store"), "--collection", "notes", "--backend", backend]
    assert cli.main(["index", str(corpus), *store]) == 0
    capsys.readouterr()
    assert cli.main(["ask", "What raises the tides?", *store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context"][0]["metadata"]["source"].endswith("tides.md")
