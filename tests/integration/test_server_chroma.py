"""The same retrieval tests against embedded Chroma and a real Chroma server on loopback (MiniLM embeddings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import StoreError
from rag.compose.generator import RAG
from rag.config.rag_config import from_config

pytestmark = pytest.mark.integration

FILES = {
    "volcanoes.md": "Volcanoes erupt when magma rises through the crust. Lava flows can reach 1200 degrees.",
    "baking.md": "Bread rises because yeast ferments sugar and releases carbon dioxide in the dough.",
    "tides.md": "Ocean tides are caused by the gravitational pull of the moon and the sun on the sea.",
    "chess.md": "In chess the knight moves in an L shape and can jump over other pieces on the board.",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in FILES.items():
        (folder / name).write_text(f"# {name[:-3].title()}\n\n{text}\n")
    return folder


@pytest.fixture(scope="module")
def chroma_server_port(tmp_path_factory):
    from rag.testing.chroma_server import chroma_server

    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as server:
        yield server.port


@pytest.fixture(params=["embedded", "server"])
def resource_spec(request, corpus, tmp_path):
    """A resource config for the corpus: a persistent local store, or a collection on the Chroma server."""
    common = {"name": "notes", "index": {"paths": [str(corpus)], "glob": "*.md"}, "search_kwargs": {"k": 2}}
    if request.param == "embedded":
        return {**common, "kind": "chroma", "path": str(tmp_path / "store")}
    port = request.getfixturevalue("chroma_server_port")
    # A fresh collection per test, so the tests stay independent on the shared server.
    return {**common, "kind": "chroma_server", "port": port, "collection": f"notes-{tmp_path.name[-20:]}",
            "path": str(tmp_path / "records")}  # the knowledge base's manifest and records, per test


def _name(doc) -> str:
    return Path(doc.metadata["source"]).stem


def _rag(spec: dict) -> RAG:
    return from_config(RAG, {"resources": [spec]}, llm=FakeListChatModel(responses=["ok [1]"] * 10))


def test_top_hit_is_the_relevant_file(resource_spec):
    rag = _rag(resource_spec)
    docs = rag.resources[0].retrieve("Why does the sea level go up and down every day?")
    assert _name(docs[0]) == "tides"
    assert len(docs) == 2


def test_filter_selects_only_matching_documents(resource_spec):
    resource = _rag(resource_spec).resources[0]
    docs = resource.retrieve("hot lava", search_kwargs={"k": 4, "filter": {"title": {"$in": ["Chess", "Baking"]}}})
    assert {_name(d) for d in docs} == {"chess", "baking"}
    docs = resource.retrieve("hot lava", search_kwargs={"k": 4, "filter": {"$not": {"title": "Volcanoes"}}})
    assert len(docs) == 3 and "volcanoes" not in {_name(d) for d in docs}


def test_k_is_respected(resource_spec):
    resource = _rag(resource_spec).resources[0]
    assert [len(resource.retrieve("anything", search_kwargs={"k": k})) for k in (1, 3, 4)] == [1, 3, 4]


def test_reopening_does_not_index_twice(resource_spec):
    first = _rag(resource_spec).resources[0].retriever.chunks.count()
    second = _rag(resource_spec).resources[0].retriever.chunks.count()
    assert first == second == len(FILES)


def test_http_api_serves_the_store_with_a_tenant_filter(resource_spec):
    from fastapi.testclient import TestClient

    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    app = create_app(_rag(resource_spec), settings=ServerConfig(tenant_filter={"title": {"$ne": "Tides"}},
                                                                support_scoring="lexical"))
    with TestClient(app, base_url="http://localhost") as client:
        # the request's k is the context's size; the resource's own k (2 in its config) caps its chunks,
        # and a request raises that cap per resource under retrieval_chain
        capped = client.post("/invoke", json={"question": "What causes ocean tides?", "k": 3}).json()
        body = client.post("/invoke", json={"question": "What causes ocean tides?", "k": 3, "retrieval_chain": {
            "notes": {"search_kwargs": {"k": 3}}}}).json()
    assert len(capped["sources"]) == 2
    names = [Path(s["source"]).stem for s in body["sources"]]
    assert len(names) == 3 and "tides" not in names
    assert body["sources"][0]["label"] == f"{names[0]}.md"


def test_unreachable_server_is_a_store_error_naming_it():
    from rag.testing.chroma_server import free_port

    port = free_port()
    with pytest.raises(StoreError, match=f"cannot reach the Chroma server 127.0.0.1:{port}"):
        _rag({"name": "x", "kind": "chroma_server", "port": port, "create": True})


def _server_spec(corpus: Path, tmp_path: Path, port: int) -> dict:
    return {"name": "notes", "kind": "chroma_server", "port": port, "collection": f"given-{tmp_path.name[-20:]}",
            "path": str(tmp_path / "records"), "index": {"paths": [str(corpus)], "glob": "*.md"}}


def _manifest(spec: dict) -> Path:
    (found,) = Path(spec["path"]).glob("kb/*/manifest.json")
    return found


def test_a_knowledge_base_on_a_server_opens_with_its_server_only(chroma_server_port, corpus, tmp_path):
    import json

    from rag.base.errors import ConfigError

    spec = _server_spec(corpus, tmp_path, chroma_server_port)
    assert _rag(spec).resources[0].retriever.chunks.count() == len(FILES)
    assert json.loads(_manifest(spec).read_text())["store"]["given"] is True
    own_directory = {k: v for k, v in spec.items() if k != "port"} | {"kind": "chroma"}
    with pytest.raises(ConfigError, match="store given to it.*chroma_server"):
        _rag(own_directory)   # (before: its directory's own collection of that name, empty, indexed anew)
    from rag.stores.registry import collections, local_client

    assert collections(local_client(tmp_path / "records")) == []   # nothing was indexed into the directory
    assert _rag(spec).resources[0].retriever.chunks.count() == len(FILES)


def test_a_knowledge_base_built_on_a_server_by_an_older_rag_still_opens_with_it(chroma_server_port, corpus, tmp_path):
    import json

    spec = _server_spec(corpus, tmp_path, chroma_server_port)
    _rag(spec)
    path = _manifest(spec)
    old = json.loads(path.read_text())
    del old["store"]["given"]
    path.write_text(json.dumps({**old, "format_version": 1}))
    assert _rag(spec).resources[0].retriever.chunks.count() == len(FILES)
    assert "given" not in json.loads(path.read_text())["store"]   # (not upgraded: it may have been built locally)
