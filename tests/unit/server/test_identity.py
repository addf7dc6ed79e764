"""Identities on every route: API keys (hashed) and bearer JWTs; 401 with the kind only; the audit line.

Two teams share one server: each sees its own documents and the public ones, a caller in no group
sees only the public ones; every route (`/invoke`, `/batch`, `/stream`, `/v1/chat/completions`,
`/resources`, MCP over HTTP) takes the same credentials.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

from rag.base.acl import Permissions
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.config.models import ServerConfig
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.server.app import create_app
from rag.server.identity import hash_key

DOCS = [("Team A plans to grow revenue in Lyon.", "a-plan.md", Permissions(groups=frozenset({"team-a"}))),
        ("Team B plans to cut costs in Oslo.", "b-plan.md", Permissions(groups=frozenset({"team-b"}))),
        ("The handbook says revenue and costs are reviewed monthly.", "handbook.md", Permissions(public=True)),
        ("An old memo about revenue, never labeled.", "memo.md", None)]
KEYS = {"key-ann": ("ann", ["team-a"], []), "key-bob": ("bob", ["team-b"], []), "key-carol": ("carol", [], []),
        "key-root": ("root", [], ["admin"])}
AUDIENCE, ISSUER = "rag", "https://login.example.com"


def _rag() -> RAG:
    metadatas = [(p.stamp({"source": s, "doc_id": s}) if p else {"source": s, "doc_id": s}) for _, s, p in DOCS]
    resource = Resource.from_texts("docs", [t for t, _, _ in DOCS], metadatas=metadatas,
                                   embedding=DeterministicFakeEmbedding(size=32), search_kwargs={"k": 4})
    llm = GenericFakeChatModel(messages=itertools.cycle(["Here [1]."]))
    return RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm))


@pytest.fixture(scope="module")
def rsa_key(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("jwks")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    (root / "jwks.json").write_text(json.dumps({"keys": [{**public, "kid": "k1", "alg": "RS256", "use": "sig"}]}))
    keys = [{"sha256": hash_key(k), "principal": p, "groups": g, "roles": r} for k, (p, g, r) in KEYS.items()]
    (root / "keys.yaml").write_text(json.dumps(keys))
    return {"root": root, "private": key, "pem": key.private_bytes(serialization.Encoding.PEM,
                                                                   serialization.PrivateFormat.PKCS8,
                                                                   serialization.NoEncryption())}


@pytest.fixture(scope="module")
def client(rsa_key) -> TestClient:
    root = rsa_key["root"]
    identities = {"api_keys_file": str(root / "keys.yaml"),
                  "jwt": {"jwks_file": str(root / "jwks.json"), "audience": AUDIENCE, "issuer": ISSUER}}
    app = create_app(_rag(), settings=ServerConfig(identities=identities, support_scoring="lexical"))
    with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as c:
        yield c


def token(rsa_key: dict[str, Any], **overrides: Any) -> str:
    now = int(time.time())
    claims = {"sub": "dana", "groups": ["team-b"], "aud": AUDIENCE, "iss": ISSUER, "iat": now, "nbf": now,
              "exp": now + 300, **overrides}
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, rsa_key["pem"], algorithm="RS256",
                      headers={"kid": "k1"})


def _sources(client: TestClient, credential: str, route: str = "/invoke") -> list[str]:
    r = client.post(route, json={"question": "revenue and costs plans", "k": 4},
                    headers={"Authorization": f"Bearer {credential}"})
    assert r.status_code == 200, r.text
    return sorted(s["source"] for s in r.json()["sources"])


def test_each_team_sees_its_documents_and_the_public_ones(client):
    assert _sources(client, "key-ann") == ["a-plan.md", "handbook.md"]
    assert _sources(client, "key-bob") == ["b-plan.md", "handbook.md"]
    assert _sources(client, "key-carol") == ["handbook.md"]   # no groups: only public documents
    assert _sources(client, "key-root") == ["handbook.md"]    # a role never widens what one reads


def test_a_jwt_gives_the_principal_and_its_groups(client, rsa_key):
    assert _sources(client, token(rsa_key)) == ["b-plan.md", "handbook.md"]
    assert _sources(client, token(rsa_key, groups=["team-a", "team-b"])) == ["a-plan.md", "b-plan.md", "handbook.md"]
    assert _sources(client, token(rsa_key, groups=None)) == ["handbook.md"]


def _forged(rsa_key):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    return jwt.encode({"sub": "eve", "groups": ["team-a"], "aud": AUDIENCE, "iss": ISSUER, "exp": now + 300},
                      other, algorithm="RS256", headers={"kid": "k1"})


def _alg_none(rsa_key):
    now = int(time.time())
    return jwt.encode({"sub": "eve", "groups": ["team-a"], "aud": AUDIENCE, "iss": ISSUER, "exp": now + 300},
                      None, algorithm="none")


def _hs256_with_the_public_key(rsa_key):
    import base64
    import hashlib
    import hmac
    public = rsa_key["private"].public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = b64(json.dumps({"sub": "eve", "groups": ["team-a"], "aud": AUDIENCE, "iss": ISSUER,
                           "exp": int(time.time()) + 300}).encode())
    return f"{head}.{body}.{b64(hmac.new(public, f'{head}.{body}'.encode(), hashlib.sha256).digest())}"


BAD = {
    "forged": (_forged, "invalid credential"),
    "alg none": (_alg_none, "invalid credential"),
    "HS256 signed with the public key": (_hs256_with_the_public_key, "invalid credential"),
    "expired": (lambda k: token(k, exp=int(time.time()) - 60), "expired token"),
    "not yet valid": (lambda k: token(k, nbf=int(time.time()) + 600), "token not yet valid"),
    "wrong audience": (lambda k: token(k, aud="other-app"), "wrong audience"),
    "no audience": (lambda k: token(k, aud=None), "invalid credential"),
    "wrong issuer": (lambda k: token(k, iss="https://evil.example.com"), "wrong issuer"),
    "no expiry": (lambda k: token(k, exp=None), "invalid credential"),
    "unknown key id": (lambda k: jwt.encode({"sub": "x", "aud": AUDIENCE, "iss": ISSUER, "exp": time.time() + 60},
                                            k["pem"], algorithm="RS256", headers={"kid": "k2"}), "invalid credential"),
    "a stored hash as the key": (lambda k: hash_key("key-ann"), "invalid credential"),
    "unknown API key": (lambda k: "key-mallory", "invalid credential"),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("route", ["/invoke", "/batch", "/stream", "/v1/chat/completions", "/resources"])
def test_bad_credentials_are_401_with_the_kind_only(client, rsa_key, case, route):
    make, kind = BAD[case]
    headers = {"Authorization": f"Bearer {make(rsa_key)}"}
    body = {"question": "revenue"}
    if route == "/batch":
        body = {"requests": [body]}
    elif route.startswith("/v1"):
        body = {"model": "rag", "messages": [{"role": "user", "content": "revenue"}]}
    r = client.get(route, headers=headers) if route == "/resources" else client.post(route, json=body, headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (case, r.text)
    error = r.json()["error"]
    assert error["message"] == f"unauthorized: {kind}", error
    assert error.get("type") in ("unauthorized", "authentication_error")


def test_no_credential_is_401_on_every_route(client):
    for route in ("/invoke", "/stream"):
        assert client.post(route, json={"question": "q"}).status_code == 401
    assert client.get("/resources").status_code == 401 and client.get("/v1/models").status_code == 401
    assert client.get("/health").status_code == 200 and client.get("/").status_code == 200   # the page itself


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.one_of(st.text(max_size=80), st.builds(lambda t: f"Bearer {t}", st.text(max_size=200)),
                        st.builds(lambda a, b, c: f"Bearer {a}.{b}.{c}", st.text("ab-_=", max_size=30),
                                  st.text("abcXYZ09-_", max_size=60), st.text("ab-_", max_size=30))))
def test_any_authorization_header_is_401_never_a_crash(client, header):
    try:
        raw = header.encode("latin-1")
    except UnicodeEncodeError:
        return   # not sendable as a header
    if any(c in raw for c in b"\r\n\x00") or raw != raw.strip():
        return   # the client refuses these (a header cannot hold them)
    r = client.post("/invoke", json={"question": "q"}, headers={"Authorization": raw})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["message"].startswith("unauthorized: ")


def test_each_request_writes_one_audit_line_without_text(client, caplog):
    caplog.set_level(logging.INFO, logger="rag.audit")
    _sources(client, "key-ann")
    _sources(client, "key-bob", route="/invoke")
    lines = [r.getMessage() for r in caplog.records if r.name == "rag.audit"]
    assert lines == ['audit principal="ann" route="/invoke" documents=["a-plan.md", "handbook.md"]'] or \
        lines[0].startswith('audit principal="ann" route="/invoke"')
    assert len(lines) == 2 and '"bob"' in lines[1]
    assert not any("Lyon" in line or "Oslo" in line for line in lines)
    assert set(json.loads(lines[0].split("documents=", 1)[1])) == {"a-plan.md", "handbook.md"}


def test_public_by_default_shows_unlabeled_documents(rsa_key):
    settings_ = ServerConfig(identities={"api_keys_file": str(rsa_key["root"] / "keys.yaml")}, public_by_default=True,
                             support_scoring="lexical")
    with TestClient(create_app(_rag(), settings=settings_), base_url="http://localhost") as c:
        assert _sources(c, "key-carol") == ["handbook.md", "memo.md"]


def test_admin_routes_need_the_admin_role(rsa_key, tmp_path):
    from rag.compose.knowledge_base import KnowledgeBase

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "plan.md").write_text("# Plan\n\nThe plan for revenue.\n")
    kb = KnowledgeBase("kb", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents(tmp_path / "docs", permissions={"groups": ["team-a"]})
    rag = RAG(resources=[kb.as_resource(name="kb", search="dense")],
              generation_chain=rag_chain_from_docs(GenericFakeChatModel(messages=itertools.cycle(["ok"]))))
    settings_ = ServerConfig(identities={"api_keys_file": str(rsa_key["root"] / "keys.yaml")}, support_scoring="lexical")
    app = create_app(rag, settings=settings_, knowledge_bases={"kb": kb})
    change = {"resource": "kb", "source": str(tmp_path / "docs" / "plan.md"), "permissions": {"groups": ["team-b"]}}
    with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as c:
        assert _sources(c, "key-ann") == ["docs/plan.md"] or len(_sources(c, "key-ann")) == 1
        assert _sources(c, "key-bob") == []
        denied = c.post("/admin/permissions", json=change, headers={"Authorization": "Bearer key-ann"})
        assert denied.status_code == 403 and denied.json()["error"]["type"] == "forbidden"
        assert c.post("/admin/permissions", json=change).status_code == 401
        done = c.post("/admin/permissions", json=change, headers={"Authorization": "Bearer key-root"})
        assert done.status_code == 200 and done.json()["changed_chunks"] >= 1, done.text
        assert _sources(c, "key-ann") == [] and len(_sources(c, "key-bob")) == 1


def test_mcp_over_http_takes_the_same_identities(rsa_key):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.unit.server.test_mcp import _post_status, _Uvicorn

    settings_ = ServerConfig(identities={"api_keys_file": str(rsa_key["root"] / "keys.yaml")}, support_scoring="lexical")

    async def listed(url: str, key: str) -> tuple[list[str], list[str]]:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        async with Client(streamable_http_client(url, http_client=http)) as mcp_client:
            found = await mcp_client.call_tool("search", {"question": "revenue and costs plans", "k": 4})
            docs = await mcp_client.call_tool("list_documents", {})
        return (sorted(c["source"] for c in found.structured_content["chunks"]),
                sorted(d["source"] for d in docs.structured_content["documents"]))

    with _Uvicorn(create_app(_rag(), settings=settings_)) as url:
        assert _post_status(url, {}) == (401, "unauthorized")
        assert _post_status(url, {"Authorization": "Bearer key-mallory"}) == (401, "unauthorized")
        assert asyncio.run(listed(url, "key-ann")) == (["a-plan.md", "handbook.md"], ["a-plan.md", "handbook.md"])
        assert asyncio.run(listed(url, "key-carol")) == (["handbook.md"], ["handbook.md"])
