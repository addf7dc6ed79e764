"""A knowledge base whose chunks are in a Chroma store given to it (`store=`, `store: {kind: chroma, ...}`,
`--backend '{"kind": "chroma", ...}'`): its manifest says so (`StoreInfo.given`), and it opens with that store only.

Real Chroma stores in temporary directories, real manifests on disk. A manifest written before the field (every
existing knowledge base) reads as its directory's own store and is written back byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.manifest import MANIFEST_VERSION, EmbeddingInfo, Manifest, StoreInfo
from rag.stores.registry import local_client, new_vectorstore

EMB = DeterministicFakeEmbedding(size=16)
DOCS = [Document(page_content="Paris is in France.", metadata={"source": "paris.md"}),
        Document(page_content="Rome is in Italy.", metadata={"source": "rome.md"})]


def _given_store(path: Path, collection: str = "notes"):
    return new_vectorstore(collection, EMB, client=local_client(path))


def _manifest_json(directory: Path, name: str = "notes") -> dict:
    return json.loads((directory / "kb" / name / "manifest.json").read_text(encoding="utf-8"))


def test_a_given_chroma_store_is_recorded_and_needed_to_open_it(tmp_path: Path) -> None:
    kb = KnowledgeBase("notes", tmp_path / "kb", embedding=EMB, store=_given_store(tmp_path / "chroma", "elsewhere"))
    kb.add_documents(DOCS)
    manifest = _manifest_json(tmp_path / "kb")
    assert manifest["store"] == {"type": "chroma", "collection": "elsewhere", "space": "cosine", "given": True}
    assert manifest["format_version"] == 2   # a rag reading version 1 says "upgrade" instead of opening it wrongly
    # with its store again: the same chunks
    again = KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB, store=_given_store(tmp_path / "chroma", "elsewhere"))
    assert again.chunks.count() == 2
    assert [d.metadata["source"] for d in again.as_resource(search="bm25").retrieve("Rome", search_kwargs={"k": 1})] \
        == ["rome.md"]
    # without it: refused, saying how to open it (not the directory's own Chroma collection, silently empty)
    with pytest.raises(ConfigError, match="keeps its chunks in the Chroma collection 'elsewhere' of a store given"):
        KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB)


def test_a_given_store_named_as_the_knowledge_base_is_not_taken_for_its_directorys_own(tmp_path: Path) -> None:
    """The collection has the knowledge base's name, so only the manifest's field tells the two stores apart."""
    KnowledgeBase("notes", tmp_path / "kb", embedding=EMB, store=_given_store(tmp_path / "chroma")).add_documents(DOCS)
    with pytest.raises(ConfigError, match="store given to it"):
        KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB)
    assert not (tmp_path / "kb" / "chroma.sqlite3").exists()   # nothing was opened in its directory


def test_a_knowledge_base_of_its_own_directory_is_refused_with_a_given_store(tmp_path: Path) -> None:
    KnowledgeBase("notes", tmp_path / "kb", embedding=EMB).add_documents(DOCS)
    with pytest.raises(ConfigError, match="keeps its chunks in the Chroma store of its directory, not in a store given"):
        KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB, store=_given_store(tmp_path / "kb"))
    assert KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB).chunks.count() == 2


def test_an_existing_manifest_without_the_field_opens_and_is_written_unchanged(tmp_path: Path) -> None:
    kb = KnowledgeBase("notes", tmp_path / "kb", embedding=EMB)
    kb.add_documents(DOCS)
    path = tmp_path / "kb" / "kb" / "notes" / "manifest.json"
    before = path.read_bytes()
    data = json.loads(before)
    assert data["format_version"] == 1 and "given" not in data["store"]   # what every earlier rag wrote
    reopened = KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB, description="cities")
    reopened.add_documents([Document(page_content="Lyon is in France.", metadata={"source": "lyon.md"})])
    after = json.loads(path.read_bytes())
    assert reopened.chunks.count() == 3 and after["description"] == "cities"
    assert {k: v for k, v in after.items() if k != "description"} == {k: v for k, v in data.items() if k != "description"}
    assert MANIFEST_VERSION == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.integers(min_value=1, max_value=4), given_value=st.one_of(st.booleans(), st.none(), st.integers(),
                                                                            st.text(max_size=5)))
def test_a_manifests_given_field_and_version_are_read_as_data(tmp_path: Path, version: int, given_value: object) -> None:
    """Any `given` value and format version in a manifest file: a boolean opens or is refused, anything else is a
    damaged manifest, a version past this rag's asks for an upgrade; never a traceback of another kind."""
    from rag.base.errors import StoreError

    path = tmp_path / "manifest.json"
    store: dict = {"type": "chroma", "collection": "notes"}
    if given_value is not None:
        store["given"] = given_value
    path.write_text(json.dumps({"format_version": version, "name": "notes",
                                "embedding": {"id": "DeterministicFakeEmbedding(size=16)"}, "store": store}))
    try:
        manifest = Manifest.load(path)
    except (StoreError, ConfigError) as exc:
        assert ("damaged" in str(exc)) or ("upgrade rag" in str(exc) and version > MANIFEST_VERSION), exc
        return
    assert isinstance(manifest.store.given, bool) and version <= MANIFEST_VERSION
    assert manifest.format_version == (max(version, 2) if manifest.store.given else version)


def test_the_field_is_written_only_when_true() -> None:
    own = Manifest(name="docs", embedding=EmbeddingInfo(id="x"), store=StoreInfo(collection="docs"))
    elsewhere = Manifest(name="docs", embedding=EmbeddingInfo(id="x"), store=StoreInfo(collection="docs", given=True))
    assert "given" not in own.model_dump()["store"] and own.format_version == 1
    assert elsewhere.model_dump()["store"]["given"] is True and elsewhere.format_version == 2
    assert Manifest.model_validate_json(elsewhere.model_dump_json()) == elsewhere


def test_rag_index_and_ask_with_backend_chroma(tmp_path: Path, capsys) -> None:
    from rag import cli

    folder = tmp_path / "docs"
    folder.mkdir()
    for doc in DOCS:
        (folder / doc.metadata["source"]).write_text(f"# {doc.metadata['source']}\n\n{doc.page_content}\n")
    where = ["--store", str(tmp_path / "kb"), "--backend", json.dumps({"kind": "chroma", "path": str(tmp_path / "chroma")})]
    assert cli.main(["index", str(folder), "--embedding", "fake", *where]) == 0
    assert "2 chunk(s) written" in capsys.readouterr().err
    assert (tmp_path / "chroma" / "chroma.sqlite3").exists() and not (tmp_path / "kb" / "chroma.sqlite3").exists()
    assert cli.main(["ask", "Which city is in Italy?", "--json", "--search", "bm25", *where]) == 0
    assert [c["metadata"]["source"] for c in json.loads(capsys.readouterr().out)["context"]][0].endswith("rome.md")
    assert cli.main(["ask", "Which city is in Italy?", "--store", str(tmp_path / "kb")]) == 2
    assert "of a store given to it" in capsys.readouterr().err
