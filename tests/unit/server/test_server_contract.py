"""One error contract on every route (`rag.server.errors`), allowed hosts, the docs' token, conversation limits.

Every route answers the same failure with the same status and code, shows no server path, logs
one bounded record per failure, and refuses text that is not valid Unicode with a 422; the
`Host` allow-list stops DNS rebinding; the whole chat conversation is bounded.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel

from rag.compose.generator import RAG
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.server.guard import MAX_LOG_CHARS

_fixture_ok = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
_ABSOLUTE = re.compile(r"(?<![\w:/.])/(?:[\w.-]+/)+[\w.-]+")


def _ask(content, **extra) -> dict:
    return {"model": "rag", "messages": [{"role": "user", "content": content}], **extra}


def _post(client, route: str, body: dict):
    # json.dumps with ensure_ascii keeps a lone surrogate as the \ud800 escape a client would send
    return client.post(route, content=json.dumps(body), headers={"content-type": "application/json"})


def _broken_rag(make_rag, message: str) -> RAG:
    class Broken(GenericFakeChatModel):
        def _generate(self, messages, *args, **kwargs):
            raise RuntimeError(message)

        def _stream(self, messages, *args, **kwargs):
            raise RuntimeError(message)

    rag = make_rag()
    return RAG(resources=rag.resources, generation_chain=rag_chain_from_docs(Broken(messages=iter(["a"]))))


_ROUTES = {"/invoke": {"question": "q"}, "/stream": {"question": "q"}, "/batch": {"requests": [{"question": "q"}]},
           "/v1/chat/completions": _ask("q"), "/v1/chat/completions stream": _ask("q", stream=True)}


# ---------------------------------------------------------------- one error contract
@pytest.mark.parametrize("route", sorted(_ROUTES))
def test_a_crash_is_one_internal_error_and_one_bounded_log_record_on_every_route(make_client, make_rag, caplog,
                                                                                 route):
    secret = "/srv/private/db.sqlite password hunter2 " + "x" * 20_000
    client = make_client(_broken_rag(make_rag, secret))
    with caplog.at_level(logging.ERROR):
        r = _post(client, route.split()[0], _ROUTES[route])
    assert "hunter2" not in r.text and "/srv/private" not in r.text
    assert "the answer model failed; see the server log" in r.text and "model_error" in r.text
    if not route.endswith("stream") and route != "/batch":
        assert r.status_code == 502
    records = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(records) == 1, [rec.getMessage()[:200] for rec in records]
    formatted = logging.Formatter("%(message)s").format(records[0])   # with any traceback attached
    assert len(formatted) <= MAX_LOG_CHARS + 200, len(formatted)   # the bound, plus the one-line prefix


@pytest.mark.parametrize("route", ["/invoke", "/stream", "/v1/chat/completions"])
def test_a_bad_filter_gets_the_same_status_and_code_on_every_route(client, route):
    bad = {"year": {"$gtt": 1}}
    body = _ask("q", rag={"filter": bad}) if route.startswith("/v1") else {"question": "q", "filter": bad}
    r = _post(client, route, body)
    assert r.status_code == 422
    error = r.json()["error"]
    assert (error.get("code") or error["type"]) == "filter_error" and "$gtt" in error["message"]


# one or more lone surrogates of one kind (a high one followed by a low one would decode as a valid pair)
_surrogates = st.one_of(st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDBFF), min_size=1,
                                 max_size=3),
                        st.text(alphabet=st.characters(min_codepoint=0xDC00, max_codepoint=0xDFFF), min_size=1,
                                max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=_fixture_ok)
@given(before=st.text(max_size=20), bad=_surrogates, after=st.text(max_size=20),
       shape=st.sampled_from(["string", "part", "history", "invoke", "stream"]))
def test_text_that_is_not_unicode_is_a_422_on_every_route(client, before, bad, after, shape):
    text = before + bad + after
    if shape == "invoke" or shape == "stream":
        r = _post(client, f"/{shape}", {"question": text})
    elif shape == "part":
        r = _post(client, "/v1/chat/completions", _ask([{"type": "text", "text": text}]))
    elif shape == "history":
        r = _post(client, "/v1/chat/completions", {"model": "rag", "messages": [
            {"role": "user", "content": text}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]})
    else:
        r = _post(client, "/v1/chat/completions", _ask(text))
    assert r.status_code == 422, r.text


def test_paths_in_client_error_messages_are_shown_as_sources_are(client):
    r = _post(client, "/v1/chat/completions", _ask([{"type": "/srv/private/secret/image_url"}]))
    assert r.status_code == 422 and "/srv/private" not in r.text and "image_url" in r.text


# ---------------------------------------------------------------- hosts (DNS rebinding)
@settings(max_examples=40, deadline=None, suppress_health_check=_fixture_ok)
@given(host=st.one_of(st.from_regex(r"[a-z0-9-]{1,20}(\.[a-z]{2,5}){0,2}", fullmatch=True),
                      st.sampled_from(["evil.example", "127.0.0.1.nip.io", "localhost.evil.com", "0.0.0.0",
                                       "127.0.0.2", "[::2]", "LOCALHOST.", ""])),
       port=st.sampled_from(["", ":8000", ":80"]), route=st.sampled_from(["/health", "/invoke", "/v1/models", "/"]))
def test_a_request_for_another_host_is_refused_before_any_route(client, host, port, route):
    allowed = host.lower().strip("[]") in ("localhost", "127.0.0.1", "::1")
    r = client.request("POST" if route == "/invoke" else "GET", route, headers={"host": host + port},
                       json={"question": "q"} if route == "/invoke" else None)
    if allowed:
        assert r.status_code != 400 or "host" not in r.text
    else:
        assert r.status_code == 400 and r.json()["error"]["type"] == "host_not_allowed", (host, r.text)


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1", "[::1]:8000", "LocalHost"])
def test_loopback_names_are_served_by_default(client, host):
    assert client.get("/health", headers={"host": host}).status_code == 200


def test_allowed_hosts_are_configurable(make_client):
    client = make_client(allowed_hosts=["rag.example.com"])
    assert client.get("/health", headers={"host": "rag.example.com:443"}).status_code == 200
    assert client.get("/health", headers={"host": "localhost"}).status_code == 400
    assert make_client(allowed_hosts=["*"]).get("/health", headers={"host": "anything"}).status_code == 200


# ---------------------------------------------------------------- API docs and the token
@pytest.mark.parametrize("public", [False, True])
def test_the_api_docs_need_the_token_unless_public_docs(make_client, monkeypatch, public):
    monkeypatch.setenv("RAG_API_TOKEN", "s3cret")
    client = make_client(public_docs=public)
    for route in ("/openapi.json", "/docs"):
        assert client.get(route).status_code == (200 if public else 401)
        assert client.get(route, headers={"Authorization": "Bearer s3cret"}).status_code == 200


# ---------------------------------------------------------------- the whole conversation is bounded
@settings(max_examples=30, deadline=None, suppress_health_check=_fixture_ok)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=8))
def test_the_whole_conversation_is_bounded(make_client, sizes):
    client = make_client(max_question_chars=500, max_conversation_chars=4000)
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(len(sizes))]
    roles[-1] = "user"
    messages = [{"role": role, "content": "w " * (size // 2) + "q"} for role, size in zip(roles, sizes, strict=True)]
    r = _post(client, "/v1/chat/completions", {"model": "rag", "messages": messages})
    total = sum(len(m["content"]) for m in messages)
    if total > 4000 or len(messages[-1]["content"]) > 500:
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_input", r.text
    else:
        assert r.status_code == 200, r.text


def test_the_reported_77000_character_history_is_refused(make_client):
    client = make_client(max_request_bytes=1 << 20)   # under the body limit: the conversation bound refuses it
    r = _post(client, "/v1/chat/completions", {"model": "rag", "messages": [
        {"role": "user", "content": "x " * 38_500}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and then?"}]})
    assert r.status_code == 422 and "max_conversation_chars" in r.text


_words = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/\\"), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=_fixture_ok)
@given(turns=st.lists(_words, min_size=1, max_size=5), stream=st.booleans(), k=st.integers(1, 4),
       tenant=st.sampled_from([None, "acme", "globex"]))
def test_no_v1_response_carries_an_absolute_path(client, turns, stream, k, tenant):
    """Generated conversations that reach the pipeline; the served sources are all absolute paths."""
    turns = [t if t.strip() else "revenue" for t in turns]
    messages = [{"role": "user" if i % 2 == len(turns) % 2 - 1 or i == len(turns) - 1 else "assistant",
                 "content": t} for i, t in enumerate(turns)]
    messages[-1]["role"] = "user"
    options = {"k": k, **({"filter": {"tenant": tenant}} if tenant else {})}
    r = _post(client, "/v1/chat/completions", {"model": "rag", "messages": messages, "stream": stream, "rag": options})
    assert r.status_code == 200, r.text
    assert not _ABSOLUTE.search(r.text), _ABSOLUTE.search(r.text)
    assert "/data/" not in r.text
