"""The HTTP API: answers, validation, limits, tenant isolation, auth and streaming."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langchain_core.language_models import GenericFakeChatModel

from rag.base.errors import ConfigError
from rag.compose.generator import RAG
from rag.generation.rag_with_source import rag_chain_from_docs


def _events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_invoke_returns_answer_numbered_sources_citations_and_extras(client):
    r = client.post("/invoke", json={"question": "How did Acme revenue change?", "k": 2})
    assert r.status_code == 200
    body = r.json()
    assert body["answer"] == "Revenue grew [1]."
    assert [s["n"] for s in body["sources"]] == [1, 2]
    assert body["cited"] == [1] and body["invalid"] == []
    assert body["extras"] == {"count_docs": 2}


def test_sources_carry_file_and_one_based_page(client):
    body = client.post("/invoke", json={"question": "q", "filter": {"source": "/data/acme-2024.pdf"}}).json()
    (source,) = body["sources"]
    assert source["label"] == "acme-2024.pdf, page 3" and source["page"] == 2  # metadata stays zero-based
    assert source["content"] == "Acme revenue grew 10% in 2024." and source["resource"] == "reports"


def test_citations_pointing_at_nothing_are_removed_and_reported(make_client, make_rag):
    client = make_client(make_rag("Revenue grew [1]. It also rained [9]."))
    body = client.post("/invoke", json={"question": "revenue", "k": 1}).json()
    assert body["invalid"] == [9] and body["cited"] == [1]
    assert body["answer"] == "Revenue grew [1]. It also rained."


def test_request_filter_narrows_results(client):
    body = client.post("/invoke", json={"question": "revenue", "filter": {"year": 2023}}).json()
    assert body["sources"] and all(s["metadata"]["year"] == 2023 for s in body["sources"])


def test_k_over_the_limit_is_422_with_the_valid_range(make_client):
    client = make_client(max_k=4)
    r = client.post("/invoke", json={"question": "revenue", "k": 5})
    assert r.status_code == 422
    assert r.json()["error"] == {"type": "invalid_setting",
                                 "message": "k=5 is over this server's limit; valid: 1..4"}
    assert client.post("/invoke", json={"question": "revenue", "k": 0}).status_code == 422
    over = {"question": "revenue", "retrieval_chain": {"reports": {"search_kwargs": {"k": 5}}}}
    assert client.post("/invoke", json=over).json()["error"]["message"] == \
        "k=5 for resource 'reports' is over this server's limit; valid: 1..4"


def test_a_requests_k_is_the_number_of_chunks_in_the_context(make_client):
    client = make_client()
    for k in (1, 2, 3):
        assert len(client.post("/invoke", json={"question": "revenue", "k": k}).json()["sources"]) == k


def test_bad_filter_is_422_listing_valid_operators(client):
    r = client.post("/invoke", json={"question": "q", "filter": {"year": {"$gtt": 1}}})
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "filter_error"
    assert "unknown operator '$gtt'; valid: $eq, $ne" in r.json()["error"]["message"]


def test_unknown_body_field_is_422_listing_valid_fields(client):
    r = client.post("/invoke", json={"question": "q", "top_k": 3})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "top_k: unknown field; valid: question, k, filter, retrieval_chain, checks"


def test_missing_question_and_blank_question_are_422(client):
    assert "question: Field required" in client.post("/invoke", json={}).json()["error"]["message"]
    assert client.post("/invoke", json={"question": "   "}).status_code == 422


def test_malformed_json_is_400(client):
    r = client.post("/invoke", content=b'{"question": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "malformed_json"


def test_body_over_the_size_limit_is_413(make_client):
    client = make_client(max_request_bytes=2048)
    r = client.post("/invoke", json={"question": "q" * 5000})
    assert r.status_code == 413
    assert r.json()["error"]["message"] == "the request body is over the limit of 2048 bytes"


def test_chunked_body_over_the_size_limit_is_413(make_client):
    client = make_client(max_request_bytes=2048)

    def chunks():
        yield b'{"question": "'
        for _ in range(10):
            yield b"q" * 500
        yield b'"}'

    r = client.post("/invoke", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_question_over_the_length_limit_is_422(make_client):
    client = make_client(max_question_chars=10)
    r = client.post("/invoke", json={"question": "x" * 11})
    assert r.status_code == 422 and "the limit is 10" in r.json()["error"]["message"]


def test_per_request_settings_are_limited_to_k_and_filter(client):
    r = client.post("/invoke", json={"question": "q", "retrieval_chain": {"reports": {"search_kwargs": {"fetch_k": 99}}}})
    assert r.status_code == 422
    assert "['fetch_k'] cannot be set per request; valid: k, filter" in r.json()["error"]["message"]
    r = client.post("/invoke", json={"question": "q", "retrieval_chain": {"nope": {"search_kwargs": {"k": 1}}}})
    assert r.status_code == 422 and "unknown resource(s) ['nope']" in r.json()["error"]["message"]


def test_per_resource_settings_win_over_shared_ones(client):
    body = client.post("/invoke", json={"question": "q", "k": 4,
                                        "retrieval_chain": {"reports": {"search_kwargs": {"k": 1}}}}).json()
    assert len(body["sources"]) == 1


def test_tenant_filter_cannot_be_overridden_or_widened(make_client):
    client = make_client(tenant_filter={"tenant": "acme"})
    attempts = [
        {"question": "revenue"},
        {"question": "revenue", "filter": {"tenant": "globex"}},
        {"question": "revenue", "filter": {"$or": [{"tenant": "globex"}, {"tenant": "acme"}]}},
        {"question": "revenue", "filter": {"$not": {"tenant": "acme"}}},
        {"question": "revenue", "retrieval_chain": {"reports": {"search_kwargs": {"filter": {"tenant": {"$ne": "acme"}}}}}},
    ]
    tenants = [{s["metadata"]["tenant"] for s in client.post("/invoke", json=a).json()["sources"]} for a in attempts]
    assert tenants[0] == {"acme"} and tenants[2] == {"acme"}
    assert tenants[1] == set() and tenants[3] == set() and tenants[4] == set()


def test_tenant_filter_applies_to_batch_and_stream(make_client):
    client = make_client(tenant_filter={"tenant": "globex"})
    batch = client.post("/batch", json={"requests": [{"question": "a"}, {"question": "b", "filter": {"year": 2024}}]})
    for result in batch.json()["results"]:
        assert {s["metadata"]["tenant"] for s in result["sources"]} == {"globex"}
    sources = _events(client.post("/stream", json={"question": "q"}).text)[0]["sources"]
    assert sources and {s["source"] for s in sources} == {"globex.md"}  # no server paths (see test_server_hostile)


def test_auth_token_is_required_when_configured(make_client, monkeypatch):
    monkeypatch.setenv("RAG_API_TOKEN", "s3cret")
    client = make_client()
    no_token = client.post("/invoke", json={"question": "q"})
    assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
    assert no_token.json()["error"]["type"] == "unauthorized"
    assert client.post("/invoke", json={"question": "q"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/resources").status_code == 401
    assert client.post("/stream", json={"question": "q"}).status_code == 401
    ok = client.post("/invoke", json={"question": "q"}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert client.get("/health").status_code == 200  # liveness stays open


def test_auth_token_variable_name_comes_from_the_config(make_client, monkeypatch):
    monkeypatch.setenv("TEAM_TOKEN", "abc")
    client = make_client(auth_token_env="TEAM_TOKEN")
    assert client.post("/invoke", json={"question": "q"}).status_code == 401
    assert client.post("/invoke", json={"question": "q"}, headers={"Authorization": "bearer abc"}).status_code == 200


def test_require_auth_without_a_token_refuses_to_start(monkeypatch, make_rag):
    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    monkeypatch.delenv("RAG_API_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="RAG_API_TOKEN is empty"):
        create_app(make_rag(), settings=ServerConfig(require_auth=True))


def test_batch_answers_in_order_and_enforces_its_limit(make_client):
    client = make_client(max_batch=2)
    body = client.post("/batch", json={"requests": [{"question": "one", "k": 1}, {"question": "two", "k": 2}]}).json()
    assert [r["question"] for r in body["results"]] == ["one", "two"]
    assert [len(r["sources"]) for r in body["results"]] == [1, 2]
    r = client.post("/batch", json={"requests": [{"question": "q"}] * 3})
    assert r.status_code == 422 and "the limit is 2" in r.json()["error"]["message"]


def test_batch_bad_item_gets_its_error_in_its_place(client):
    r = client.post("/batch", json={"requests": [{"question": "ok"}, {"question": "q", "filter": {"a": {"$in": []}}}]})
    ok, bad = r.json()["results"]
    assert r.status_code == 200 and ok["question"] == "ok"
    assert bad["error"]["type"] == "filter_error" and "non-empty list" in bad["error"]["message"]


def test_stream_emits_the_protocol_in_order(client):
    r = client.post("/stream", json={"question": "How did revenue change?", "k": 2})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    types = [e["type"] for e in events]
    assert types[0] == "sources" and types[-4:] == ["citations", "support", "usage", "done"]
    assert set(types[1:-4]) == {"token"}
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) > 1 and "".join(tokens) == events[-1]["answer"] == "Revenue grew [1]."
    by_type = {e["type"]: e for e in events}
    assert len(by_type["sources"]["sources"]) == 2 and by_type["citations"]["cited"] == [1]
    assert [s["sentence"] for s in by_type["support"]["sentences"]] == ["Revenue grew."]
    assert by_type["support"]["sentences"][0]["label"] in ("supported", "partial", "unsupported")
    assert "event: sources\n" in r.text


def test_stream_validates_before_streaming(client):
    r = client.post("/stream", json={"question": "q", "filter": {"$and": {}}})
    assert r.status_code == 422 and r.json()["error"]["type"] == "filter_error"


def test_stream_reports_a_failure_midway_as_an_error_event(make_client, make_rag):
    class Broken(GenericFakeChatModel):
        def _stream(self, *args, **kwargs):
            raise RuntimeError("database password is hunter2")

    rag = make_rag()
    rag = RAG(resources=rag.resources, generation_chain=rag_chain_from_docs(Broken(messages=iter(["x"]))))
    events = _events(make_client(rag).post("/stream", json={"question": "q"}).text)
    assert events[0]["type"] == "sources" and events[-1]["type"] == "error"
    assert "hunter2" not in json.dumps(events[-1])


def test_model_errors_are_502_and_internal_errors_500_without_details(make_client, make_rag):
    class Broken(GenericFakeChatModel):
        def _generate(self, *args, **kwargs):
            raise RuntimeError("database password is hunter2")

    rag = make_rag()
    rag = RAG(resources=rag.resources, generation_chain=rag_chain_from_docs(Broken(messages=iter(["x"]))))
    r = make_client(rag).post("/invoke", json={"question": "q"})
    assert r.status_code == 502
    assert r.json() == {"error": {"type": "model_error", "message": "the answer model failed; see the server log"}}
    crashing = RAG(resources=rag.resources, generation_chain=make_rag().generation_chain,
                   extras={"boom": lambda out: 1 / 0})   # a crash outside the model
    r = make_client(crashing).post("/invoke", json={"question": "q"})
    assert r.status_code == 500
    assert r.json() == {"error": {"type": "internal_error", "message": "internal error; see the server log"}}


def test_unknown_route_and_wrong_method_are_json_errors(client):
    assert client.get("/nope").json()["error"]["type"] == "not_found"
    r = client.get("/invoke")
    assert r.status_code == 405 and r.json()["error"]["type"] == "method_not_allowed"


def test_resources_and_health_describe_the_server(make_client):
    client = make_client(max_k=7, tenant_filter={"tenant": "acme"})
    body = client.get("/resources").json()
    assert body["resources"][0]["name"] == "reports" and body["resources"][0]["search_kwargs"] == {"k": 4}
    assert body["limits"]["max_k"] == 7 and body["server_filter"] is True
    assert "acme" not in json.dumps(body)  # the tenant value is not disclosed
    assert client.get("/health").json()["status"] == "ok"


def test_openapi_documents_every_endpoint(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/invoke", "/batch", "/stream", "/resources", "/health"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_page_and_static_files_are_served_with_a_strict_csp(client):
    page = client.get("/")
    assert page.status_code == 200 and '<script src="/static/app.js"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN or remote assets
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200


async def test_concurrent_requests_keep_their_own_settings(make_rag):
    from rag.server.app import create_app

    app = create_app(make_rag())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        async def ask(i: int) -> tuple[int, dict]:
            year, k = (2023, 1) if i % 2 else (2024, 2)
            r = await http.post("/invoke", json={"question": f"q{i}", "k": k, "filter": {"year": year}})
            return i, r.json()

        results = await asyncio.gather(*(ask(i) for i in range(24)))
    for i, body in results:
        year, k = (2023, 1) if i % 2 else (2024, 2)
        assert len(body["sources"]) == k
        assert {s["metadata"]["year"] for s in body["sources"]} == {year}


def test_the_chain_is_built_once_per_app_not_per_request(make_client, make_rag):
    built = []

    class CountingRAG(RAG):
        def chain(self, *args, **kwargs):
            built.append(1)
            return super().chain(*args, **kwargs)

    base = make_rag()
    client = make_client(CountingRAG(resources=base.resources, generation_chain=base.generation_chain))
    assert len(built) == 2   # the API's chain, and the chat route's (ConversationalRAG runs the same chain)
    for path in ("/invoke", "/stream", "/invoke"):
        assert client.post(path, json={"question": "q", "k": 1}).status_code == 200
    assert client.post("/batch", json={"requests": [{"question": "a"}, {"question": "b"}]}).status_code == 200
    assert client.post("/v1/chat/completions", json={"model": "rag", "messages": [
        {"role": "user", "content": "q"}]}).status_code == 200
    assert len(built) == 2


def test_unknown_fields_in_batch_and_per_resource_settings_list_the_valid_ones(client):
    r = client.post("/batch", json={"requests": [{"question": "q"}], "parallel": True})
    assert r.json()["error"]["message"] == "parallel: unknown field; valid: requests"
    r = client.post("/batch", json={"requests": [{"question": "q", "kk": 1}]})
    assert r.json()["results"][0]["error"]["message"] == "kk: unknown field; valid: question, k, filter, retrieval_chain, checks"
    r = client.post("/invoke", json={"question": "q", "retrieval_chain": {"reports": {"k": 1}}})
    assert r.json()["error"]["message"] == "retrieval_chain.reports.k: unknown field; valid: search_kwargs"


def test_a_resource_default_k_over_max_k_is_refused_at_startup(make_rag):
    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    with pytest.raises(ConfigError, match=r"resource default k \{'reports': 4\} is over server.max_k=3"):
        create_app(make_rag(), settings=ServerConfig(max_k=3))


def test_invoke_checks_report_support_and_citation_quality(make_client, make_rag):
    client = make_client(make_rag("Acme revenue grew 10% in 2024 [1]. Cats can fly [1]."))
    body = client.post("/invoke", json={"question": "Acme revenue", "filter": {"source": "/data/acme-2024.pdf"},
                                        "checks": True}).json()
    labels = [s["label"] for s in body["checks"]["support"]]
    assert labels[0] == "supported" and labels[1] == "unsupported"
    assert body["checks"]["citations"]["precision"] == 0.5
    assert "unsupported_sentences" in body["checks"]["flags"]
    assert "checks" not in client.post("/invoke", json={"question": "q"}).json()


def test_openapi_docs_page_is_served_without_a_cdn(client):
    page = client.get("/docs")
    assert page.status_code == 200 and "/docs-static/swagger-ui-bundle.js" in page.text
    assert "cdn." not in page.text
    assert client.get("/docs-static/swagger-ui-bundle.js").status_code == 200
    assert client.get("/openapi.json").json()["paths"].keys() >= {"/invoke", "/stream", "/health"}


def test_invoke_lists_the_cited_sources_first_and_marks_the_rest_unused(make_client, make_rag):
    client = make_client(make_rag("Acme revenue grew 10% in 2024 [3]."))
    body = client.post("/invoke", json={"question": "How did Acme revenue change?", "k": 4}).json()
    assert body["sources"][0]["n"] == 3 and body["sources"][0]["cited"] is True
    assert sorted(s["n"] for s in body["sources"][1:]) == [1, 2, 4]
    assert not any(s["cited"] for s in body["sources"][1:])


def test_invoke_checks_keep_quoted_and_answers_the_question_apart(make_client, make_rag):
    question = {"question": "In which city did Acme open a plant?", "checks": True}
    off = make_client(make_rag("Acme revenue grew 10% in 2024. [1]")).post("/invoke", json=question).json()["checks"]
    (sentence,) = off["support"]
    assert sentence["quoted"] is True and sentence["label"] == "supported" and sentence["answers"] is False
    assert "does_not_answer" in off["flags"] and off["summary"]["answering"] == 0
    on = make_client(make_rag("Acme opened a plant in Lyon in 2023. [1]")).post("/invoke", json=question).json()["checks"]
    assert on["support"][0]["quoted"] is True and on["support"][0]["answers"] is True
    assert "does_not_answer" not in on["flags"]
