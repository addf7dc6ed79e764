"""Config files: validation messages, safety (no code, no secrets) and building a RAG."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import ConfigError
from rag.compose.generator import RAG
from rag.config.models import LLMConfig, build_llm
from rag.config.rag_config import (
    EXTRAS,
    from_config,
    load_config,
    parse_config,
    register_extra,
)

EMB = DeterministicFakeEmbedding(size=16)


def _resource(tmp_path: Path, **extra) -> dict:
    return {"name": "docs", "kind": "chroma", "path": str(tmp_path / "store"), **extra}


def _write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "paris.md").write_text("# Paris\n\nParis is the capital of France. The Eiffel Tower opened in 1889.\n")
    (folder / "rome.md").write_text("# Rome\n\nRome is the capital of Italy. The Colosseum is in Rome.\n")
    return folder


def test_unknown_top_level_key_lists_valid_keys():
    with pytest.raises(ConfigError, match=r"unknown key 'resourcez'; valid: version, embedding, llm, .*resources"):
        parse_config({"resourcez": []})


def test_unknown_resource_kind_lists_kinds(tmp_path):
    kinds = "chroma, chroma_server, knowledge_base, bm25, hybrid, pgvector, qdrant, milvus, lancedb, faiss"
    with pytest.raises(ConfigError, match=rf"resources\[0\]: unknown kind 'chromadb'; valid: {kinds}$"):
        parse_config({"resources": [{**_resource(tmp_path), "kind": "chromadb"}]})


def test_missing_resource_kind_lists_kinds():
    with pytest.raises(ConfigError, match=r"missing 'kind'; valid: chroma"):
        parse_config({"resources": [{"name": "docs"}]})


def test_misspelled_resource_key_names_it_and_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError) as err:
        parse_config({"resources": [_resource(tmp_path, colection="x")]})
    assert "resources[0]: unknown key 'colection'" in str(err.value)
    assert "collection" in str(err.value).split("valid:")[1]


def test_secret_values_are_rejected_with_a_hint_to_use_env_names(tmp_path):
    with pytest.raises(ConfigError, match=r"llm: unknown key 'api_key'.*api_key_env"):
        parse_config({"llm": {"kind": "openai", "api_key": "sk-live-123"}, "resources": [_resource(tmp_path)]})
    with pytest.raises(ConfigError, match="not an environment variable name") as err:
        parse_config({"llm": {"kind": "openai", "api_key_env": "sk-live-123456"}, "resources": [_resource(tmp_path)]})
    assert "123456" not in str(err.value)  # the pasted secret is not echoed back


def test_python_tags_in_yaml_are_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(textwrap.dedent(f"""
        resources: !!python/object/apply:os.system ["touch {marker}"]
    """))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    assert not marker.exists()


def test_bad_filter_in_search_kwargs_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown operator '\$gtt'; valid: \$eq"):
        parse_config({"resources": [_resource(tmp_path, search_kwargs={"filter": {"year": {"$gtt": 1}}})]})


def test_unknown_extra_lists_registered_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown extra\(s\) \['nope'\]; registered: .*count_docs"):
        parse_config({"resources": [_resource(tmp_path)], "extras": ["nope"]})


def test_duplicate_resource_names_are_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"duplicated: \['docs'\]"):
        parse_config({"resources": [_resource(tmp_path, create=True), _resource(tmp_path, create=True)]})


def test_prompt_without_context_placeholder_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"must contain \{context\}"):
        parse_config({"resources": [_resource(tmp_path)], "generation": {"prompt": "Answer well."}})


def test_missing_file_and_non_mapping_file_give_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="no config file at"):
        load_config(tmp_path / "absent.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)


def test_missing_store_without_index_block_says_how_to_create_it(tmp_path):
    with pytest.raises(ConfigError, match="rag index PATH"):
        from_config(RAG, {"resources": [_resource(tmp_path)]}, embedding=EMB, llm=FakeListChatModel(responses=["x"]))


def test_missing_collection_lists_available_ones(tmp_path):
    from_config(RAG, {"resources": [_resource(tmp_path, collection="other", create=True)]}, embedding=EMB,
                llm=FakeListChatModel(responses=["x"]))
    with pytest.raises(ConfigError, match=r"no collection 'docs'.*available: other"):
        from_config(RAG, {"resources": [_resource(tmp_path)]}, embedding=EMB, llm=FakeListChatModel(responses=["x"]))


def test_index_block_builds_the_collection_once_and_retrieves(tmp_path):
    docs = _write_docs(tmp_path / "docs")
    config = {"resources": [_resource(tmp_path, index={"paths": [str(docs)], "glob": "*.md"},
                                      search_kwargs={"k": 1})],
              "extras": ["count_docs", "source_labels"]}
    rag = from_config(RAG, config, embedding=EMB, llm=FakeListChatModel(responses=["Rome [1]"] * 2))
    first = rag.resources[0].retriever.chunks.count()
    out = rag.chain().invoke({"question": "Where is the Colosseum?"})
    assert out["answer"] == "Rome [1]"
    assert out["count_docs"] == 1 and out["source_labels"][0].startswith("[1] ")
    # Reopening does not index the same files again.
    again = from_config(RAG, config, embedding=EMB, llm=FakeListChatModel(responses=["x"]))
    assert first == 2 and again.resources[0].retriever.chunks.count() == first


def test_config_search_kwargs_apply_and_resource_values_win(tmp_path):
    cfg = parse_config({"search_kwargs": {"k": 7, "filter": {"lang": "en"}},
                        "resources": [_resource(tmp_path, create=True, search_kwargs={"k": 2})]})
    rag = RAG.from_config(cfg, embedding=EMB, llm=FakeListChatModel(responses=["x"]))
    assert rag.resources[0].search_kwargs == {"k": 2, "filter": {"lang": {"$eq": "en"}}}


def test_from_config_builds_the_given_subclass(tmp_path):
    class MyRAG(RAG):
        pass

    rag = from_config(MyRAG, {"resources": [_resource(tmp_path, create=True)]}, embedding=EMB,
                      llm=FakeListChatModel(responses=["x"]))
    assert type(rag) is MyRAG


def test_generation_settings_reach_the_model(tmp_path):
    cfg = parse_config({"resources": [_resource(tmp_path, create=True)], "llm": {"kind": "openai", "base_url":
                        "http://127.0.0.1:9/v1"}, "generation": {"temperature": 0.3, "max_tokens": 50}})
    rag = RAG.from_config(cfg, embedding=EMB)
    assert rag.generation_chain.llm.temperature == 0.3
    assert rag.generation_chain.llm.max_tokens == 50


def test_openai_llm_needs_a_key_or_a_base_url(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="needs the environment variable OPENAI_API_KEY"):
        build_llm(LLMConfig(kind="openai"))
    monkeypatch.setenv("MY_KEY", "k-123")
    model = build_llm(LLMConfig(kind="openai", api_key_env="MY_KEY", model="m"))
    assert model.openai_api_key.get_secret_value() == "k-123" and model.model_name == "m"


def test_register_extra_makes_it_nameable_and_refuses_silent_replacement(tmp_path):
    register_extra("answer_chars_test", lambda out: len(out["answer"]))
    try:
        rag = from_config(RAG, {"resources": [_resource(tmp_path, create=True)], "extras": ["answer_chars_test"]},
                          embedding=EMB, llm=FakeListChatModel(responses=["four"]))
        assert rag.chain().invoke("q")["answer_chars_test"] == 4
        with pytest.raises(ConfigError, match="already registered"):
            register_extra("answer_chars_test", lambda out: 0)
    finally:
        EXTRAS.pop("answer_chars_test", None)


def test_server_tenant_filter_is_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"server.tenant_filter: filter.tenant: None is not a valid value"):
        parse_config({"resources": [_resource(tmp_path)], "server": {"tenant_filter": {"tenant": None}}})
