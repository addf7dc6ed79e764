"""Schemathesis fuzzes every route of the HTTP API from its own OpenAPI document.

Requests are generated from the schema, both valid (positive) and schema-violating (negative),
for three set-ups: a server without a token, one with a token and the right header, and the same
server with no header. No generated request may get a 500, a traceback or a server path.

Size: at most `FUZZ_EXAMPLES` examples per route, mode and set-up (5 routes positive + 3 POST
routes negative = 8, x 3 set-ups = 24 tests; GET routes have one distinct input each);
derandomized, so CI runs the same 636 requests every time. See docs/development.md for the run time.
The `/v1` routes (`/v1/models`, `/v1/chat/completions`, streaming or not) are fuzzed like the
others, with and without the token, and no response (JSON body or event stream) may carry an
absolute path anywhere but in text the request itself sent (the question, echoed back).

The strategies come from Schemathesis and run under plain Hypothesis (Schemathesis' own pytest
integration does not support pytest 9 yet).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.config.models import ServerConfig
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.server.app import create_app

schemathesis = pytest.importorskip("schemathesis")

FUZZ_EXAMPLES = 35
TOKEN = "fuzz-token-0123456789"
SCENARIOS = ("open", "with-token", "without-token")


ROUTES = ("GET /health", "GET /resources", "POST /invoke", "POST /batch", "POST /stream", "GET /v1/models",
          "POST /v1/chat/completions")
_LEAKS = ("Traceback", "site-packages", "/srv/private", str(Path(sys.prefix)))
_ABSOLUTE = re.compile(r"(?<![\w:/.~-])/(?:[^\s/'\"]+/)+[^\s/'\"]+")
_ECHOED = {"question", "standalone_question"}   # the request's own text, sent back


def _strings(value, key=None):
    """Every string of a JSON value, except those under keys that echo the request."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)
    elif isinstance(value, str) and key not in _ECHOED:
        yield value


def _payloads(text: str) -> list:
    """The JSON body, or the JSON of each `data:` line of an event stream."""
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line[len("data: "):]) for line in text.splitlines()
                if line.startswith("data: ") and line != "data: [DONE]"]


def _absolute_paths(text: str, sent: str) -> list[str]:
    found = [m for payload in _payloads(text) for s in _strings(payload) for m in _ABSOLUTE.findall(s)]
    return [m for m in found if m not in sent]   # a value the request carried may be quoted back


def _app(served_root: Path, token: str):
    texts = [("Acme revenue grew 10% in 2024.", {"tenant": "acme", "year": 2024, "page": 1,
                                                 "source": str(served_root / "reports" / "acme.pdf")}),
             ("Globex hired a CEO in 2023.", {"tenant": "globex", "year": 2023, "source": "/srv/private/globex.md"}),
             ("Initech moved to Austin.", {"tenant": "initech", "year": 2022, "source": "notes/initech.md"})]
    resource = Resource.from_texts("reports", [t for t, _ in texts], metadatas=[m for _, m in texts],
                                   embedding=DeterministicFakeEmbedding(size=16), search_kwargs={"k": 2})
    llm = GenericFakeChatModel(messages=itertools.cycle(["Revenue grew [1]. See [7]."]))
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm))
    previous = os.environ.get("RAG_API_TOKEN")
    os.environ["RAG_API_TOKEN"] = token
    try:  # the token is read once, when the app is built
        # Schemathesis' ASGI client sends `Host: testserver`: the one name this server is configured to answer
        return create_app(rag, settings=ServerConfig(support_scoring="lexical", max_k=5, max_batch=4,
                                                     allowed_hosts=["testserver"]),
                          source_roots={"reports": [served_root]})
    finally:
        os.environ.pop("RAG_API_TOKEN") if previous is None else os.environ.update(RAG_API_TOKEN=previous)


@pytest.fixture(scope="module")
def served_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("served") / "docs"


@pytest.fixture(scope="module")
def schemas(served_root: Path) -> dict[str, object]:
    """One schema per set-up: the open server, and the server with a token (used with and without it)."""
    return {"open": schemathesis.openapi.from_asgi("/openapi.json", _app(served_root, "")),
            "token": schemathesis.openapi.from_asgi("/openapi.json", _app(served_root, TOKEN),
                                                    headers={"Authorization": f"Bearer {TOKEN}"})}


def test_the_fuzzed_routes_are_every_route_of_the_schema(schemas):
    found = {f"{op.ok().method.upper()} {op.ok().path}" for op in schemas["open"].get_all_operations()}
    assert found == set(ROUTES)


@pytest.mark.parametrize(("route", "mode"), [(r, m) for r in ROUTES for m in ("positive", "negative")
                                             if m == "positive" or r.startswith("POST")])  # a GET has nothing to negate
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_generated_request_gets_a_500_a_traceback_or_a_server_path(schemas, served_root, scenario, route, mode):
    method, path = route.split(" ")
    schema = schemas["open" if scenario == "open" else "token"]
    strategy = schema[path][method].as_strategy(generation_mode=schemathesis.GenerationMode(mode))
    headers = {"Authorization": f"Bearer {TOKEN}"} if scenario == "with-token" else {}

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def check(case) -> None:
        response = case.call(headers=headers)
        assert response.status_code < 500, response.text
        for leak in (*_LEAKS, str(served_root)):
            assert leak not in response.text, f"{leak!r} in the response to {route}"
        sent = json.dumps(case.body, ensure_ascii=False, default=str) if isinstance(case.body, dict | list | str) else ""
        assert not _absolute_paths(response.text, sent), (route, _absolute_paths(response.text, sent))
        if scenario == "without-token" and path != "/health":  # only a body that is not JSON is judged first
            error = response.json()["error"] if response.status_code in (400, 413) else {}
            judged_first = {"malformed_json", "http_error", "request_too_large"} & {error.get("type"), error.get("code")}
            assert response.status_code == 401 or judged_first, response.text
        if response.status_code >= 400:
            body = response.json()
            # the /v1 routes answer in OpenAI's error shape (with param and code), the others in ours
            shape = {"type", "message", "param", "code"} if path.startswith("/v1/") else {"type", "message"}
            assert set(body) == {"error"} and set(body["error"]) == shape

    check()
