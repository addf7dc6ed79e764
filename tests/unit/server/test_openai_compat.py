"""The OpenAI-compatible routes over HTTP: shapes, extension fields, errors, limits and tenant filter."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.compose.generator import RAG
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.rag_with_source import rag_chain_from_docs

ERROR_KEYS = {"message", "type", "param", "code"}


def _ask(content: str, **extra) -> dict:
    return {"model": "rag", "messages": [{"role": "user", "content": content}], **extra}


def _chunks(text: str) -> list:
    lines = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_models_lists_the_served_pipeline(client):
    body = client.get("/v1/models").json()
    assert body["object"] == "list"
    assert [(m["id"], m["object"]) for m in body["data"]] == [("rag", "model")]


def test_completion_keeps_markers_and_carries_sources_in_the_message_extension(client):
    r = client.post("/v1/chat/completions", json=_ask("How did Acme revenue change?", rag={"k": 2}))
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "rag"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Revenue grew [1]."
    ext = choice["message"]["rag"]
    assert [s["n"] for s in ext["sources"]] == [1, 2] and ext["cited"] == [1]
    first = ext["sources"][0]
    assert {"id", "source", "page", "resource", "score", "label", "content", "cited", "citation_checks",
            "support"} <= set(first)
    assert first["cited"] is True and first["resource"] == "reports"
    assert first["citation_checks"][0]["citations"] == [1]
    assert ext["sources"][1]["cited"] is False
    assert ext["standalone_question"] == "How did Acme revenue change?"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_fake_model_without_token_counts_gets_estimated_usage(client):
    body = client.post("/v1/chat/completions", json=_ask("revenue")).json()
    assert body["choices"][0]["message"]["rag"]["usage"]["estimated"] is True
    assert body["usage"]["completion_tokens"] > 0


def test_stream_sends_chunks_then_usage_and_sources_in_the_last_chunk_then_done(client):
    r = client.post("/v1/chat/completions", json=_ask("revenue", stream=True, rag={"k": 2}))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = _chunks(r.text)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "Revenue grew [1]."
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["total_tokens"] > 0
    assert [s["n"] for s in last["choices"][0]["delta"]["rag"]["sources"]] == [1, 2]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_tenant_filter_applies_to_chat_completions(make_client):
    client = make_client(tenant_filter={"tenant": "globex"})
    body = client.post("/v1/chat/completions", json=_ask("revenue", rag={"filter": {"year": 2024}})).json()
    sources = body["choices"][0]["message"]["rag"]["sources"]
    assert [s["source"] for s in sources] == ["globex.md"]   # never the server's absolute path


def test_per_resource_settings_in_the_extension(client):
    body = client.post("/v1/chat/completions",
                       json=_ask("revenue", rag={"retrieval_chain": {"reports": {"search_kwargs": {"k": 1}}}})).json()
    assert len(body["choices"][0]["message"]["rag"]["sources"]) == 1


def test_unknown_model_is_404_in_openai_shape(client):
    r = client.post("/v1/chat/completions", json={**_ask("q"), "model": "gpt-4o"})
    assert r.status_code == 404
    error = r.json()["error"]
    assert set(error) == ERROR_KEYS and error["code"] == "model_not_found" and error["param"] == "model"
    assert "valid: rag" in error["message"]


def test_missing_token_is_401_in_openai_shape(make_client, monkeypatch):
    monkeypatch.setenv("RAG_API_TOKEN", "s3cret")
    client = make_client()
    r = client.post("/v1/chat/completions", json=_ask("q"))
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json()["error"]["type"] == "authentication_error" and set(r.json()["error"]) == ERROR_KEYS
    assert client.get("/v1/models").status_code == 401
    ok = client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_k_over_the_limit_is_422_with_the_valid_range(make_client):
    r = make_client(max_k=4).post("/v1/chat/completions", json=_ask("q", rag={"k": 5}))
    assert r.status_code == 422
    assert r.json()["error"] == {"message": "k=5 is over this server's limit; valid: 1..4",
                                 "type": "invalid_request_error", "param": None, "code": "invalid_setting"}


def test_unknown_extension_key_lists_the_valid_ones(client):
    r = client.post("/v1/chat/completions", json=_ask("q", rag={"top_k": 3}))
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "rag.top_k: unknown field; valid: k, filter, retrieval_chain"


def test_bad_filter_is_422_filter_error(client):
    r = client.post("/v1/chat/completions", json=_ask("q", rag={"filter": {"year": {"$gtt": 1}}}))
    assert r.status_code == 422 and r.json()["error"]["code"] == "filter_error"


def test_openai_fields_without_meaning_for_rag_are_ignored(client):
    r = client.post("/v1/chat/completions", json=_ask("revenue", temperature=0.2, top_p=1, user="u1",
                                                      stream_options={"include_usage": True}))
    assert r.status_code == 200


@pytest.mark.parametrize(("messages", "needle"), [
    ([{"role": "assistant", "content": "hi"}], "the last message must be the user's"),
    ([{"role": "tool", "content": "x", "tool_call_id": "1"}, {"role": "user", "content": "q"}],
     "messages[0].role 'tool' is not supported; valid: system, developer, user, assistant"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
     "content part of type 'image_url' is not supported; valid: text"),
    ([{"role": "user", "content": "   "}], "the question must not be blank"),
])
def test_messages_a_rag_cannot_answer_are_422(client, messages, needle):
    r = client.post("/v1/chat/completions", json={"model": "rag", "messages": messages})
    assert r.status_code == 422 and needle in r.json()["error"]["message"]


def test_malformed_json_and_n_above_one_are_refused(client):
    r = client.post("/v1/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"
    r = client.post("/v1/chat/completions", json=_ask("q", n=2))
    assert r.status_code == 422 and r.json()["error"]["param"] == "n"


def test_text_parts_are_joined_and_the_question_limit_applies(make_client):
    client = make_client(max_question_chars=20)
    parts = [{"type": "text", "text": "Acme"}, {"type": "text", "text": "revenue"}]
    ok = client.post("/v1/chat/completions", json={"model": "rag", "messages": [{"role": "user", "content": parts}]})
    assert ok.json()["choices"][0]["message"]["rag"]["standalone_question"] == "Acme\nrevenue"
    long = client.post("/v1/chat/completions", json=_ask("x" * 21))
    assert long.status_code == 422 and "the limit is 20" in long.json()["error"]["message"]


def test_follow_up_is_condensed_into_a_standalone_question_offline(make_client, make_rag):
    rag = make_rag()
    extractive = RAG(resources=rag.resources, generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    client = make_client(extractive)
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Where did Acme open a plant?"},
                {"role": "assistant", "content": "In Lyon [1]."},
                {"role": "user", "content": "When did it open?"}]
    body = client.post("/v1/chat/completions", json={"model": "rag", "messages": messages}).json()
    ext = body["choices"][0]["message"]["rag"]
    assert ext["standalone_question"] == "When did Acme open?"
    assert "[" in body["choices"][0]["message"]["content"]    # the extractive answer cites its sentence
    assert body["usage"]["prompt_tokens"] > 0


def test_several_named_pipelines_are_listed_and_chosen_by_model(make_rag):
    from fastapi.testclient import TestClient

    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    app = create_app(make_rag(), settings=ServerConfig(support_scoring="lexical"),
                     models={"main": make_rag(), "other": make_rag("Other answer [1].")})
    with TestClient(app, base_url="http://localhost") as client:
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["main", "other"]
        body = client.post("/v1/chat/completions", json={**_ask("q"), "model": "other"}).json()
        assert body["choices"][0]["message"]["content"] == "Other answer [1]." and body["model"] == "other"


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool", "bogus"]),
                                  "content": st.one_of(_TEXT, st.none(), st.lists(
                                      st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]),
                                                             "text": _TEXT}), max_size=2))})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_MESSAGE, max_size=4), stream=st.booleans())
def test_any_message_list_gets_an_answer_or_a_4xx_in_openai_shape(client, messages, stream):
    r = client.post("/v1/chat/completions", json={"model": "rag", "messages": messages, "stream": stream})
    if r.status_code == 200:
        if stream:
            assert "error" not in _chunks(r.text)[-1]
        else:
            assert r.json()["choices"][0]["message"]["content"]
    else:
        assert r.status_code in (400, 422) and set(r.json()["error"]) == ERROR_KEYS


def test_failure_after_the_stream_started_is_an_error_chunk_then_done(make_client, make_rag):
    from langchain_core.language_models import GenericFakeChatModel

    broken = make_rag()
    broken = RAG(resources=broken.resources, generation_chain=rag_chain_from_docs(GenericFakeChatModel(messages=iter(()))))
    client = make_client(broken)
    r = client.post("/v1/chat/completions", json=_ask("revenue", stream=True))
    assert r.status_code == 200
    chunks = _chunks(r.text)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert set(chunks[-1]) == {"error"} and chunks[-1]["error"]["type"] == "server_error"
    assert chunks[-1]["error"]["message"] == "the answer model failed; see the server log"
    r = client.post("/v1/chat/completions", json=_ask("revenue"))
    assert r.status_code == 502 and r.json()["error"]["code"] == "model_error"
