"""The server's error contract under hostile input: 4xx never 500, usable connections, bounded logs.

The keep-alive and logging tests run a real uvicorn server in a thread and talk to it with one
httpx client, since the failure they guard against (a reset connection after a 500) only shows
on a real socket.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel

from rag.base.filters import MAX_FILTER_DEPTH
from rag.compose.generator import RAG
from rag.config.models import ServerConfig
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.server.app import app_from_config, create_app
from rag.server.guard import MAX_LOG_CHARS
from tests.unit.hostile import any_json, hostile_filters, nested

_fixture_ok = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def _post(client, route: str, body: dict) -> httpx.Response:
    # json.dumps (not httpx's encoder) so NaN / Infinity literals reach the server as clients send them
    return client.post(route, content=json.dumps(body, allow_nan=True), headers={"content-type": "application/json"})


@settings(max_examples=120, deadline=None, suppress_health_check=_fixture_ok)
@given(flt=hostile_filters, route=st.sampled_from(["/invoke", "/stream", "/batch"]))
def test_reported_hostile_filters_are_4xx_on_every_route(client, flt, route):
    body = {"requests": [{"question": "q", "filter": flt}]} if route == "/batch" else {"question": "q", "filter": flt}
    r = _post(client, route, body)
    assert r.status_code < 500, r.text
    if route == "/batch" and r.status_code == 200:  # the one item failed in its place
        (item,) = r.json()["results"]
        assert item["error"]["type"] == "filter_error"
    elif r.status_code == 422:
        assert r.json()["error"]["type"] == "filter_error"
    else:  # too deep for the JSON parser or too large for the body limit: still a 4xx
        assert r.status_code in (400, 413) and "error" in r.json()


@pytest.mark.parametrize("op", ["$and", "$or", "$not"])
@pytest.mark.parametrize("depth", [MAX_FILTER_DEPTH, 300])
def test_nesting_a_few_hundred_levels_is_a_422_filter_error(client, op, depth):
    r = _post(client, "/invoke", {"question": "q", "filter": nested(depth, op)})
    assert r.status_code == 422 and "levels" in r.json()["error"]["message"]


@settings(max_examples=150, deadline=None, suppress_health_check=_fixture_ok)
@given(flt=any_json, k=st.one_of(st.none(), st.integers(-3, 30)))
def test_any_filter_value_gets_a_json_answer_never_a_500(client, flt, k):
    r = _post(client, "/invoke", {"question": "q", "filter": flt, "k": k})
    assert r.status_code in (200, 422), r.text
    assert "Traceback" not in r.text


# ---------------------------------------------------------------- /batch: per-item errors
def test_batch_items_fail_in_their_place_and_the_others_are_answered(make_client):
    client = make_client(max_k=5)
    items = [{"question": "ok"}, {"question": "q", "filter": {"a": {"$in": []}}}, {"question": "q", "kk": 1},
             {"k": 2}, "not an object", {"question": "q", "k": 50}, {"question": "   "},
             {"question": "q", "filter": {"year": float("nan")}}, {"question": "fine", "k": 1}]
    r = _post(client, "/batch", {"requests": items})
    assert r.status_code == 200
    results = r.json()["results"]
    assert [res.get("question") for res in (results[0], results[-1])] == ["ok", "fine"]
    kinds = [res["error"]["type"] for res in results[1:-1]]
    assert kinds == ["filter_error", "invalid_request", "invalid_request", "invalid_request", "invalid_setting",
                     "invalid_input", "filter_error"]
    assert results[2]["error"]["message"] == "kk: unknown field; valid: question, k, filter, retrieval_chain, checks"
    assert "over this server's limit" in results[5]["error"]["message"]


def test_a_batch_of_only_bad_items_is_answered_item_by_item(client):
    r = _post(client, "/batch", {"requests": [{"question": ""}, {"question": "q", "filter": {"a": float("-inf")}}]})
    assert r.status_code == 200 and [x["error"]["type"] for x in r.json()["results"]] == ["invalid_request",
                                                                                         "filter_error"]


def test_batch_level_problems_still_reject_the_batch(make_client):
    client = make_client(max_batch=2)
    assert client.post("/batch", json={"requests": []}).status_code == 422
    assert client.post("/batch", json={"requests": [{"question": "q"}] * 3}).status_code == 422
    assert client.post("/batch", json={"requests": {"question": "q"}}).status_code == 422


def test_batch_item_that_crashes_is_an_internal_error_in_its_place(make_client, make_rag):
    def crash(out):   # a crash outside the answer model (the model's own failures are 502 model_error)
        if "boom" in str(out["question"]):
            raise RuntimeError("database password is hunter2")

    rag = make_rag()
    rag = RAG(resources=rag.resources, generation_chain=rag_chain_from_docs(GenericFakeChatModel(messages=iter(["a"] * 10))),
              extras={"crash": crash})
    results = make_client(rag).post("/batch", json={"requests": [{"question": "boom"}, {"question": "fine"}]}).json()
    assert results["results"][0]["error"]["type"] == "internal_error" and "hunter2" not in json.dumps(results)
    assert results["results"][1]["answer"] == "a"


# ---------------------------------------------------------------- source paths
def test_sources_outside_every_root_show_only_the_file_name(client):
    body = client.post("/invoke", json={"question": "q", "filter": {"tenant": "acme"}}).json()
    assert {s["source"] for s in body["sources"]} == {"acme-2024.pdf", "acme-2023.pdf"}
    assert {s["metadata"]["source"] for s in body["sources"]} == {"acme-2024.pdf", "acme-2023.pdf"}
    assert "/data/" not in json.dumps(body)


def test_sources_are_relative_to_the_folder_a_config_resource_indexes(tmp_path, monkeypatch):
    docs = tmp_path / "srv" / "docs"
    (docs / "guides").mkdir(parents=True)
    (docs / "guides" / "serving.md").write_text("# Serving\n\nRun rag serve to start the HTTP API.\n")
    (docs / "filters.md").write_text("# Filters\n\nFilters select chunks by metadata.\n")
    config = tmp_path / "rag.yaml"
    config.write_text(f"embedding: {{kind: deterministic, size: 16}}\n"
                      f"resources:\n  - {{name: docs, kind: chroma, path: {tmp_path / 'store'}, "
                      f"index: {{paths: [{docs}]}}}}\nserver: {{support_scoring: lexical}}\n")
    monkeypatch.chdir(tmp_path)  # the working directory is a root too, but the resource's own root wins
    from fastapi.testclient import TestClient

    llm = GenericFakeChatModel(messages=iter(["Run rag serve [1]."] * 4))
    with TestClient(app_from_config(config, llm=llm), base_url="http://localhost") as client:
        body = client.post("/invoke", json={"question": "How do I start the HTTP API?", "k": 4}).json()
        assert {s["source"] for s in body["sources"]} == {"guides/serving.md", "filters.md"}
        assert {s["metadata"]["source"] for s in body["sources"]} == {"guides/serving.md", "filters.md"}
        for text in (json.dumps(body), client.post("/stream", json={"question": "How?", "k": 4}).text):
            assert str(tmp_path) not in text and "srv/docs" not in text


# ---------------------------------------------------------------- a real server: keep-alive and the log
class _Server:
    def __init__(self, app) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="info",
                                                    timeout_keep_alive=30))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:  # a readiness poll, not a timing assertion
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join()


def _deep_failure(depth: int) -> None:
    if depth == 0:
        raise RecursionError("maximum recursion depth exceeded " + "x" * 50_000)
    _deep_failure(depth - 1)


@pytest.fixture
def crashing_server(make_rag) -> Iterator[str]:
    def crash(out):   # a crash outside the answer model (the model's own failures are 502 model_error)
        if "boom" in str(out["question"]):
            _deep_failure(600)

    rag = make_rag()
    rag = RAG(resources=rag.resources, generation_chain=rag_chain_from_docs(GenericFakeChatModel(messages=iter(["ok"] * 100))),
              extras={"crash": crash})
    with _Server(create_app(rag, settings=ServerConfig(support_scoring="lexical"))) as url:
        yield url


def _local_port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def test_a_500_does_not_poison_the_keep_alive_connection(crashing_server):
    with httpx.Client(base_url=crashing_server, timeout=30) as http:
        first = http.post("/invoke", json={"question": "fine"})
        for _ in range(5):
            crash = http.post("/invoke", json={"question": "boom"})
            assert crash.status_code == 500 and crash.json()["error"]["type"] == "internal_error"
            assert crash.headers.get("connection", "").lower() != "close"
            after = http.post("/invoke", json={"question": "fine"})
            assert after.status_code == 200 and after.json()["answer"] == "ok"
            assert _local_port(crash) == _local_port(after) == _local_port(first)  # the same socket throughout


def test_a_500_is_logged_once_and_bounded(crashing_server, caplog):
    caplog.set_level(logging.INFO)
    body = json.dumps({"question": "boom", "filter": nested(20, "$or")})
    with httpx.Client(base_url=crashing_server, timeout=30) as http:
        assert http.post("/invoke", content=body, headers={"content-type": "application/json"}).status_code == 500
        assert http.get("/health").status_code == 200  # the request is finished and logged
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].name == "rag.server.app"
    text = errors[0].getMessage() + (logging.Formatter().formatException(errors[0].exc_info) if errors[0].exc_info else "")
    assert text.count("Traceback") == 1 and "RecursionError" in text
    assert len(text) <= MAX_LOG_CHARS + 200


@pytest.mark.parametrize("body", [
    '{"question": "q", "filter": ' + '{"a": ' * 20_000 + "1" + "}" * 20_001,
    '{"question": "q", "filter": {"a": ' + "[" * 20_000 + "]" * 20_000 + "}}",
    '{"requests": ' + "[" * 30_000 + "]" * 30_000 + "}",
], ids=["nested-objects", "nested-lists", "nested-batch"])
def test_json_too_deep_for_the_parser_is_a_4xx(client, body):
    for route in ("/invoke", "/batch", "/stream"):
        r = client.post(route, content=body, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500 and "error" in r.json()


def test_a_hostile_filter_inside_retrieval_chain_is_a_422(client):
    for flt in (nested(300), {"year": float("inf")}, {"t": {"$in": ["a", 1]}}):
        r = _post(client, "/invoke", {"question": "q", "retrieval_chain": {"reports": {"search_kwargs": {"filter": flt}}}})
        assert r.status_code == 422 and r.json()["error"]["type"] == "filter_error"
