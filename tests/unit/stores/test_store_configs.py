"""Config kinds pgvector, qdrant, milvus, lancedb and faiss: real stores, reopened, filtered natively; every backend's
kind, chroma's too, as the `store:` of a knowledge base."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import ConfigError, StoreError
from rag.compose.generator import RAG
from rag.config.rag_config import from_config, parse_config
from rag.stores.native import NativeFilterRetriever
from tests.unit.stores.backends import EMB, doc_id

TEXTS = ["Paris is in France.", "Rome is in Italy.", "Lyon is in France."]
METADATAS = [{"country": "fr"}, {"country": "it"}, {"country": "fr", "big": False}]


def _resource(spec: dict):
    return from_config(RAG, {"resources": [spec]}, embedding=EMB, llm=FakeListChatModel(responses=["ok"])).resources[0]


def _specs(tmp_path) -> dict[str, dict]:
    return {
        "pgvector": {"kind": "pgvector", "url_env": "TEST_PG_URL", "table": "cities"},
        "qdrant": {"kind": "qdrant", "path": str(tmp_path / "qdrant"), "collection": "cities"},
        "milvus": {"kind": "milvus", "path": str(tmp_path / "milvus.db"), "collection": "cities"},
        "lancedb": {"kind": "lancedb", "path": str(tmp_path / "lance"), "table": "cities"},
        "faiss": {"kind": "faiss", "path": str(tmp_path / "faiss")},
        "chroma": {"kind": "chroma", "path": str(tmp_path / "chroma"), "collection": "cities"},
    }


@pytest.mark.parametrize("kind", ["pgvector", "qdrant", "milvus", "lancedb", "faiss"])
def test_a_store_kind_is_created_filled_reopened_and_filtered_natively(request, tmp_path, monkeypatch, kind):
    if kind == "pgvector":
        monkeypatch.setenv("TEST_PG_URL", request.getfixturevalue("pg_url"))
    spec = {"name": "cities", **_specs(tmp_path)[kind]}
    created = _resource({**spec, "create": True})
    store = created.retriever.vectorstore
    store.add_texts(TEXTS, metadatas=METADATAS, ids=[doc_id(t) for t in TEXTS])
    if kind == "faiss":
        store.save(tmp_path / "faiss")
    if kind == "qdrant":
        store.client.close()   # local mode locks its directory while a client holds it
    reopened = _resource(spec)
    assert isinstance(reopened.retriever, NativeFilterRetriever) and reopened.retriever.store.backend == kind
    found = reopened.retrieve("city", search_kwargs={"k": 3, "filter": {"country": "fr", "big": {"$ne": True}}})
    assert sorted(d.page_content for d in found) == ["Lyon is in France.", "Paris is in France."]


@pytest.mark.parametrize("kind", ["qdrant", "milvus", "lancedb", "faiss"])
def test_a_missing_store_is_an_error_that_says_how_to_create_it(tmp_path, kind):
    spec = {"name": "cities", **_specs(tmp_path)[kind]}
    with pytest.raises((StoreError, ConfigError), match="create: true|no FAISS store"):
        _resource(spec)


def test_a_connection_string_is_read_from_the_named_variable(monkeypatch):
    monkeypatch.delenv("NOWHERE_URL", raising=False)
    with pytest.raises(ConfigError, match="the environment variable NOWHERE_URL .* is not set"):
        _resource({"name": "x", "kind": "pgvector", "url_env": "NOWHERE_URL"})


def test_a_secret_pasted_as_an_env_name_is_rejected():
    with pytest.raises(ConfigError, match="is not an environment variable name"):
        parse_config({"resources": [{"name": "x", "kind": "qdrant", "url_env": "http://host:6333"}]})


def test_path_and_server_together_are_rejected():
    with pytest.raises(ConfigError, match="exactly one of 'path' .* or 'uri_env'"):
        parse_config({"resources": [{"name": "x", "kind": "milvus", "path": "m.db", "uri_env": "MILVUS_URI"}]})


@pytest.mark.parametrize("kind", ["pgvector", "qdrant", "milvus", "lancedb", "faiss", "chroma"])
def test_a_knowledge_base_config_keeps_its_chunks_in_a_store_kind(request, tmp_path, monkeypatch, kind):
    if kind == "pgvector":
        monkeypatch.setenv("TEST_PG_URL", request.getfixturevalue("pg_url"))
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(TEXTS):
        (folder / f"city{i}.txt").write_text(text * 20, encoding="utf-8")
    store = {**_specs(tmp_path)[kind], **({"table": "kb_cities"} if kind == "pgvector" else {})}
    spec = {"name": "cities", "kind": "knowledge_base", "path": str(tmp_path / "kb"), "index": {"paths": [str(folder)]}}
    on_store = _resource({**spec, "store": store})
    on_chroma = _resource({**spec, "path": str(tmp_path / "chroma-kb")})
    for question in ("Paris France", "Rome", "Lyon is in"):
        got = on_store.retrieve(question, search_kwargs={"k": 2})
        assert [d.metadata["source"] for d in got] == \
               [d.metadata["source"] for d in on_chroma.retrieve(question, search_kwargs={"k": 2})] and got
    manifest = (tmp_path / "kb" / "kb" / "cities" / "manifest.json").read_text(encoding="utf-8")
    assert f'"type": "{kind}"' in manifest
    if kind != "qdrant":   # (Qdrant's local mode locks its directory while the first client is open)
        reopened = _resource({**spec, "store": store})
        assert [d.id for d in reopened.retrieve("Rome", search_kwargs={"k": 3})] == \
               [d.id for d in on_store.retrieve("Rome", search_kwargs={"k": 3})]
    if kind == "chroma":   # a Chroma store of its own, not the one of its path: the manifest says so
        assert '"given": true' in manifest and (tmp_path / "chroma" / "chroma.sqlite3").exists()
        assert not (tmp_path / "kb" / "chroma.sqlite3").exists()
        with pytest.raises(ConfigError, match="of a store given to it, not in the Chroma store of its directory"):
            _resource({**spec, "index": None})


@pytest.mark.parametrize(("store", "message"), [
    ({"kind": "chroma_server"}, "store: kind must be one of chroma, pgvector, qdrant, milvus, lancedb, faiss"),
    ({"kind": "chroma", "path": "x", "index": {"paths": ["docs"]}}, "store: takes no index"),
    ({"path": "x"}, "store: kind must be one of"),
    ({"kind": "faiss", "path": "x", "name": "other"}, "store: takes no name"),
    ({"kind": "qdrant", "path": "x", "url_env": "QDRANT_URL"}, "give exactly one of 'path'"),
    ({"kind": "pgvector", "url_env": "PG", "password": "hunter2"}, "password"),
])
def test_a_bad_knowledge_base_store_block_says_what_is_valid(store, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"resources": [{"name": "kb", "kind": "knowledge_base", "store": store}]})


def test_rag_index_and_ask_with_backend_pgvector_give_chromas_sources(pg_url, tmp_path, monkeypatch, capsys):
    import json

    from rag import cli

    monkeypatch.setenv("TEST_PG_URL", pg_url)
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(TEXTS):
        (folder / f"city{i}.md").write_text(f"# City {i}\n\n" + text * 30, encoding="utf-8")
    backend = json.dumps({"kind": "pgvector", "url_env": "TEST_PG_URL", "table": "cli_docs"})
    runs = {"pgvector": ["--store", str(tmp_path / "pg-kb"), "--backend", backend],
            "chroma": ["--store", str(tmp_path / "chroma-kb")]}
    for where in runs.values():
        assert cli.main(["index", str(folder), "--embedding", "fake", *where]) == 0
        assert "3 chunk(s) written" in capsys.readouterr().err
        assert cli.main(["index", str(folder), "--embedding", "fake", *where]) == 0   # a no-op the second time
        assert "0 chunk(s) written, 0 removed, 0 embedded" in capsys.readouterr().err
    sources = {}
    for name, where in runs.items():
        assert cli.main(["ask", "Which city is in Italy?", "--json", *where]) == 0
        sources[name] = [d["metadata"]["source"] for d in json.loads(capsys.readouterr().out)["context"]]
    assert sources["pgvector"] == sources["chroma"] and sources["chroma"]
    # the same knowledge base without --backend is refused with how to open it
    assert cli.main(["ask", "q", "--store", str(tmp_path / "pg-kb")]) == 2
    assert "keeps its chunks in pgvector" in capsys.readouterr().err


@pytest.mark.parametrize(("backend", "message"), [
    ('{"kind": "pgvector", "kind": "qdrant"}', "the key 'kind' is written twice"),
    ('{"kind": ', "--backend: not valid YAML"),
    ('["pgvector"]', "must be a JSON object"),
    ('{"kind": "mongo"}', "kind must be one of"),
    ("[" * 100_000, "values nest more than 64 levels deep"),
])
def test_a_bad_backend_option_is_one_clear_line(tmp_path, capsys, backend, message):
    from rag import cli

    assert cli.main(["ask", "q", "--store", str(tmp_path), "--backend", backend]) == 2
    assert pytest.importorskip("re").search(message, capsys.readouterr().err)


# ---------------------------------------------------------------- bad addresses and secrets
SECRET = "hunter2secret"
_BAD_ADDRESSES = [("pgvector", "url_env", "notaport"), ("pgvector", "url_env", f"mysql://u:{SECRET}@h/db"),
                  ("pgvector", "url_env", f"postgresql+psycopg://u:{SECRET}@127.0.0.1:1/db"),
                  ("pgvector", "url_env", f"postgresql+psycopg://u:{SECRET}@127.0.0.1:notaport/db"),
                  ("qdrant", "url_env", f"http://u:{SECRET}@127.0.0.1:1"), ("qdrant", "url_env", "notaport"),
                  ("milvus", "uri_env", f"notaport{SECRET}"), ("milvus", "uri_env", f"http://u:{SECRET}@127.0.0.1:1"),
                  ("lancedb", "uri_env", f"notaport://{SECRET}"), ("lancedb", "uri_env", f"/nonexistent/{SECRET}")]


def _open_error(monkeypatch, kind: str, field: str, value: str) -> str:
    from rag.config.stores import STORE_KINDS

    monkeypatch.setenv("X_STORE_ADDRESS", value)
    with pytest.raises((StoreError, ConfigError)) as info:
        STORE_KINDS[kind](kind=kind, name="docs", **{field: "X_STORE_ADDRESS"}).open(EMB)
    message = str(info.value)
    assert "\n" not in message and len(message) < 700, message
    return message


@pytest.mark.parametrize(("kind", "field", "value"), _BAD_ADDRESSES)
def test_a_bad_address_is_one_line_without_the_variable_value(monkeypatch, kind, field, value):
    message = _open_error(monkeypatch, kind, field, value)
    assert SECRET not in message and value not in message, message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.text(alphabet=st.characters(codec="ascii", exclude_characters="\x00"), min_size=1,
                               max_size=40),
                       st.builds(lambda s, h, p: f"{s}://u:{SECRET}@{h}:{p}/db",
                                 st.sampled_from(["postgresql+psycopg", "postgresql", "mysql", "sqlite", "x"]),
                                 st.sampled_from(["127.0.0.1", "[::1]", "", "a b"]),
                                 st.one_of(st.integers(0, 2), st.text(max_size=5)))))
def test_generated_pgvector_urls_are_one_line_errors_without_secrets(monkeypatch, value):
    message = _open_error(monkeypatch, "pgvector", "url_env", value)
    assert SECRET not in message


@pytest.mark.parametrize("table", ['docs"; DROP TABLE x; --', "a b", "1docs", "x" * 64, "docs\u00e9", ""])
def test_a_pgvector_table_that_is_not_a_plain_name_is_refused_before_any_sql(table):
    from rag.stores.pgvector import open_store

    with pytest.raises(ConfigError, match="is not a table name"):
        open_store("postgresql+psycopg://u@127.0.0.1:1/db", table, EMB)
    with pytest.raises(ConfigError, match="not a table or schema name"):
        parse_config({"resources": [{"name": "d", "kind": "pgvector", "url_env": "X", "table": table}]})
