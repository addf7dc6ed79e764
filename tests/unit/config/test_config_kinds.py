"""Resource kinds built from configs: knowledge_base (incremental sync), bm25 and hybrid."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import ConfigError, StoreError
from rag.compose.generator import RAG
from rag.config.rag_config import from_config, parse_config
from rag.indexing.manifest import list_knowledge_bases

EMB = DeterministicFakeEmbedding(size=16)


def _docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "paris.md").write_text("# Paris\n\nParis is the capital of France. The Eiffel Tower opened in 1889.\n")
    (folder / "rome.md").write_text("# Rome\n\nRome is the capital of Italy. The Colosseum is in Rome.\n")
    (folder / "tides.md").write_text("# Tides\n\nOcean tides follow the pull of the moon.\n")
    return folder


def _rag(resource: dict) -> RAG:
    return from_config(RAG, {"resources": [resource]}, embedding=EMB, llm=FakeListChatModel(responses=["ok"] * 5))


def _titles(docs) -> set[str]:
    return {Path(d.metadata["source"]).stem for d in docs}


def test_knowledge_base_syncs_changes_on_every_build(tmp_path):
    docs = _docs(tmp_path / "docs")
    spec = {"name": "kb", "kind": "knowledge_base", "path": str(tmp_path / "store"), "autocontext": False,
            "index": {"paths": [str(docs)], "glob": "*.md"}}
    resource = _rag(spec).resources[0]
    assert _titles(resource.retrieve("capital", search_kwargs={"k": 10})) == {"paris", "rome", "tides"}
    (docs / "tides.md").unlink()
    (docs / "rome.md").write_text("# Rome\n\nRome has the Pantheon.\n")
    resource = _rag(spec).resources[0]
    found = resource.retrieve("Pantheon", search_kwargs={"k": 10})
    assert _titles(found) == {"paris", "rome"}
    assert any("Pantheon" in d.page_content for d in found) and not any("Colosseum" in d.page_content for d in found)


def test_knowledge_base_takes_portable_filters(tmp_path):
    docs = _docs(tmp_path / "docs")
    resource = _rag({"name": "kb", "kind": "knowledge_base", "path": str(tmp_path / "store"),
                     "index": {"paths": [str(docs)]}, "search_kwargs": {"filter": {"title": {"$ne": "Rome"}}}}
                    ).resources[0]
    assert "rome" not in _titles(resource.retrieve("capital", search_kwargs={"k": 10}))


def test_missing_knowledge_base_lists_the_available_ones(tmp_path):
    _rag({"name": "one", "kind": "knowledge_base", "path": str(tmp_path), "create": True})
    with pytest.raises(StoreError, match=r"no knowledge base 'two'.*existing: one"):
        _rag({"name": "two", "kind": "knowledge_base", "path": str(tmp_path)})


def test_knowledge_base_chunk_size_belongs_on_the_resource(tmp_path):
    with pytest.raises(ConfigError, match="sets chunk_size .in word pieces. on the resource"):
        parse_config({"resources": [{"name": "kb", "kind": "knowledge_base", "index": {"paths": ["d"], "chunk_size": 100}}]})


def test_knowledge_base_with_hybrid_search_fuses_bm25_and_follows_the_sync(tmp_path):
    docs = _docs(tmp_path / "docs")
    spec = {"name": "kb", "kind": "knowledge_base", "path": str(tmp_path / "store"), "autocontext": False,
            "index": {"paths": [str(docs)], "glob": "*.md"},
            "hybrid": {"fusion": "convex", "weights": {"dense": 0.2, "bm25": 0.8}}}
    resource = _rag(spec).resources[0]
    assert type(resource.retriever).__name__ == "HybridRetriever"
    top = resource.retrieve("Which city has the Colosseum?", search_kwargs={"k": 1})
    assert _titles(top) == {"rome"} and set(top[0].metadata["scores"]) == {"dense", "bm25", "convex"}
    assert _titles(resource.retrieve("capital", search_kwargs={"k": 5, "filter": {"title": "Paris"}})) == {"paris"}
    # the BM25 side is rebuilt from the knowledge base at every build: an edited file is found by its new words
    (docs / "rome.md").write_text("# Rome\n\nRome has the Pantheon.\n")
    resource = _rag(spec).resources[0]
    found = resource.retrieve("Pantheon", search_kwargs={"k": 1})
    assert _titles(found) == {"rome"} and "Pantheon" in found[0].page_content
    assert found[0].metadata["scores"]["bm25"] > 0
    assert not any("Colosseum" in d.page_content for d in resource.retrieve("Colosseum", search_kwargs={"k": 5}))


def test_knowledge_base_hybrid_settings_are_validated(tmp_path):
    base = {"name": "kb", "kind": "knowledge_base", "path": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"unknown weight key\(s\) \['sparse'\]; valid: dense, bm25"):
        parse_config({"resources": [{**base, "hybrid": {"weights": {"sparse": 1.0}}}]})
    with pytest.raises(ConfigError, match="hybrid.*rerank"):
        parse_config({"resources": [{**base, "hybrid": {"rerank": True}}]})
    _rag({**base, "create": True})
    with pytest.raises(ConfigError, match="knowledge base 'kb' is empty"):
        _rag({**base, "hybrid": {}})


def test_bm25_is_built_once_saved_and_reloaded(tmp_path):
    docs = _docs(tmp_path / "docs")
    spec = {"name": "words", "kind": "bm25", "path": str(tmp_path / "bm25"), "index": {"paths": [str(docs)]}}
    first = _rag(spec).resources[0].retrieve("Which city has the Colosseum?", search_kwargs={"k": 1})
    assert _titles(first) == {"rome"} and "words" in list_knowledge_bases(tmp_path / "bm25")
    (docs / "rome.md").unlink()  # without an index: block the knowledge base is used as it is
    again = _rag({**spec, "index": None}).resources[0]
    assert _titles(again.retrieve("Colosseum", search_kwargs={"k": 1})) == {"rome"}
    assert _titles(again.retrieve("capital", search_kwargs={"k": 5, "filter": {"title": "Paris"}})) == {"paris"}


def test_bm25_without_index_or_saved_data_says_how_to_build_it(tmp_path):
    with pytest.raises(ConfigError, match=r"no BM25 index at .*add an 'index:' block"):
        _rag({"name": "words", "kind": "bm25", "path": str(tmp_path / "none")})


def test_hybrid_fuses_both_retrievers_and_persists(tmp_path):
    docs = _docs(tmp_path / "docs")
    spec = {"name": "docs", "kind": "hybrid", "path": str(tmp_path / "hybrid"), "index": {"paths": [str(docs)]},
            "fusion": "convex", "weights": {"dense": 0.3, "bm25": 0.7}}
    top = _rag(spec).resources[0].retrieve("Which city has the Colosseum?", search_kwargs={"k": 1})
    assert _titles(top) == {"rome"} and set(top[0].metadata["scores"]) >= {"bm25"}
    reopened = _rag({**spec, "index": None}).resources[0]
    found = reopened.retrieve("capital", search_kwargs={"k": 5, "filter": {"title": {"$in": ["Paris", "Tides"]}}})
    assert _titles(found) == {"paris", "tides"}


def test_hybrid_weights_and_fusion_are_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown weight key\(s\) \['sparse'\]; valid: dense, bm25"):
        parse_config({"resources": [{"name": "h", "kind": "hybrid", "path": "x", "weights": {"sparse": 1.0}}]})
    with pytest.raises(ConfigError, match=r"fusion: Input should be 'rrf' or 'convex'"):
        parse_config({"resources": [{"name": "h", "kind": "hybrid", "path": "x", "fusion": "max"}]})


@pytest.mark.parametrize("kind", ["knowledge_base", "bm25", "hybrid"])
async def test_async_retrieval_keeps_k_and_filter(kind, tmp_path):
    # The server retrieves with ainvoke: k and the portable filter must survive the async path.
    docs = _docs(tmp_path / "docs")
    resource = _rag({"name": "r", "kind": kind, "path": str(tmp_path / "store"), "index": {"paths": [str(docs)]}}
                    ).resources[0]
    found = await resource.aretrieve("capital", search_kwargs={"k": 1, "filter": {"title": "Paris"}})
    assert _titles(found) == {"paris"}
    assert len(await resource.aretrieve("capital", search_kwargs={"k": 2})) == 2


def test_relative_store_paths_follow_the_working_directory(tmp_path, monkeypatch):
    # Chroma shares clients per path string in a process: ".rag" must not reuse another folder's store.
    spec = {"name": "kb", "kind": "knowledge_base", "path": ".rag", "autocontext": False, "index": {"paths": ["docs"]}}
    names = []
    for project, text in (("a", "Apples grow on trees."), ("b", "Boats float on water.")):
        (tmp_path / project / "docs").mkdir(parents=True)
        (tmp_path / project / "docs" / f"{project}.md").write_text(f"# {project}\n\n{text}\n")
        monkeypatch.chdir(tmp_path / project)
        names.append(_titles(_rag(spec).resources[0].retrieve("what?", search_kwargs={"k": 5})))
    assert names == [{"a"}, {"b"}]
    assert (tmp_path / "a" / ".rag").is_dir() and (tmp_path / "b" / ".rag").is_dir()


def test_errors_in_nested_bm25_settings_give_the_full_path():
    with pytest.raises(ConfigError, match=r"resources\[0\]\.bm25\.k1: Input should be greater than or equal to 0"):
        parse_config({"resources": [{"name": "w", "kind": "bm25", "path": "x", "bm25": {"k1": -1}}]})
    with pytest.raises(ConfigError, match=r"resources\[0\]\.bm25: unknown key 'kk'; valid: k1, b, stem"):
        parse_config({"resources": [{"name": "w", "kind": "hybrid", "path": "x", "bm25": {"kk": 1}}]})


def test_knowledge_base_sections_promote_a_named_heading_within_k(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    topics = ["Tides", "Volcanoes", "Glaciers", "Deserts", "Rivers", "Forests", "Islands", "Canyons"]
    text = "\n\n".join(f"## {t}\n\n" + f"{t} are studied by geographers in many countries. " * 3 for t in topics)
    (docs / "earth.md").write_text("# Earth\n\n" + text + "\n\n## Coral Reefs\n\nReefs grow in warm shallow seas.\n")
    spec = {"name": "kb", "kind": "knowledge_base", "path": str(tmp_path / "store"), "autocontext": False,
            "chunk_size": 32, "index": {"paths": [str(docs)]}, "sections": {"at": 1}}
    rag = _rag(spec)
    assert type(rag.resources[0].sections).__name__ == "SectionRouter" and rag.resources[0].sections.at == 1
    question = "What does the coral reefs section say?"
    found = rag.chain().invoke(question, config={"configurable": {"k": 2}})["context"]
    assert len(found) == 2 and any(d.metadata.get("section_match", {}).get("heading") == "Coral Reefs" for d in found)
    plain = _rag({**spec, "sections": None}).chain().invoke(question, config={"configurable": {"k": 2}})["context"]
    assert not any("section_match" in d.metadata for d in plain)
    with pytest.raises(ConfigError, match=r"sections.*top_n"):
        parse_config({"resources": [{**spec, "sections": {"top_n": 0}}]})
