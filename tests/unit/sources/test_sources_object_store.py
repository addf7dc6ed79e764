"""`ObjectStoreSource` against a real S3-compatible server (moto's server mode on loopback) and fsspec's memory store."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from source_helpers import CountsReads, chunk_sources

from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.text_safety import clean_text
from rag.sources.base import check_key, local_name
from rag.sources.object_store import ObjectStoreSource
from rag.base.acl import group_key, user_key

def _acl(meta, kind: str) -> set[str]:
    """The flattened permission keys of one kind ("u" users, "g" groups) a chunk carries (rag.base.acl)."""
    return {k for k, v in meta.items() if k.startswith(f"acl_{kind}_") and v is True}



@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    moto_server = pytest.importorskip("moto.server", reason="needs moto[server] (the dev extra)")
    pytest.importorskip("s3fs", reason="needs s3fs (the sources extra)")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint, monkeypatch, request) -> Iterator[tuple[object, str]]:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    import boto3

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    name = "b" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    client.create_bucket(Bucket=name)
    yield client, name
    for obj in client.list_objects_v2(Bucket=name).get("Contents", []):
        client.delete_object(Bucket=name, Key=obj["Key"])
    client.delete_bucket(Bucket=name)


class _Counting(CountsReads, ObjectStoreSource):
    pass


def _source(s3_endpoint: str, name: str, **kwargs) -> _Counting:
    return _Counting(f"s3://{name}/docs", storage_options={"endpoint_url": s3_endpoint}, **kwargs)


def _put(client, name: str, key: str, body: bytes | str, **kwargs) -> None:
    client.put_object(Bucket=name, Key=key, Body=body.encode() if isinstance(body, str) else body, **kwargs)


def test_a_bucket_prefix_is_synced_by_etag(kb, bucket, s3_endpoint, counting):
    client, name = bucket
    _put(client, name, "docs/a.md", "# Alpha\n\nThe alpha report grew.\n")
    _put(client, name, "docs/sub/b.txt", "Beta notes on storage.\n")
    _put(client, name, "docs/c.md", "# Gamma\n\nGamma text.\n")
    _put(client, name, "other/d.md", "# Outside the prefix\n")
    source = _source(s3_endpoint, name)
    report = kb.sync(source)
    assert sorted(report.added) == [f"s3://{name}/docs/{k}" for k in ("a.md", "c.md", "sub/b.txt")]
    assert kb.get_documents({"source": f"s3://{name}/docs/a.md"})[0].metadata["title"] == "Alpha"
    source.read.clear()
    counting.texts.clear()
    again = kb.sync(source)
    assert source.read == [] and again.embedded == 0 and not again.changed
    _put(client, name, "docs/a.md", "# Alpha\n\nThe alpha report shrank.\n")
    client.delete_object(Bucket=name, Key="docs/c.md")
    report = kb.sync(source)
    assert source.read == ["a.md"] and report.updated == [f"s3://{name}/docs/a.md"]
    assert report.deleted == [f"s3://{name}/docs/c.md"] and f"s3://{name}/docs/c.md" not in chunk_sources(kb)


def test_hostile_objects_are_each_an_error_and_the_run_goes_on(kb, bucket, s3_endpoint):
    client, name = bucket
    _put(client, name, "docs/good.md", "# Good\n\nA good document.\n")
    _put(client, name, "docs/../../escape.md", "# Escape\n")
    _put(client, name, "docs/x/../../../etc/passwd.md", "# Escape\n")
    bomb = gzip.compress(b"0" * 20_000_000)
    _put(client, name, "docs/bomb.txt.gz", bomb)
    _put(client, name, "docs/bomb.zip", bomb)
    _put(client, name, "docs/disguised.txt", bomb)   # gzip bytes under a text name
    _put(client, name, "docs/huge.md", b"# Huge\n" + b"x" * 300_000)
    source = _source(s3_endpoint, name, max_bytes=200_000)
    report = kb.sync(source)
    assert report.added == [f"s3://{name}/docs/good.md"]
    reasons = " | ".join(s.reason for s in report.skipped)
    traversals = [s.path for s in report.skipped if "is a path traversal" in s.reason]
    assert sorted(traversals) == [f"s3://{name}/docs/../../escape.md", f"s3://{name}/docs/x/../../../etc/passwd.md"]
    assert not any(".." in s for s in chunk_sources(kb))
    assert "more than max_bytes=200,000" in reasons
    assert sorted(u.rsplit("/", 1)[-1] for u in report.unsupported) == ["bomb.txt.gz", "bomb.zip"]
    assert "bomb.zip" not in source.read and "bomb.txt.gz" not in source.read and "huge.md" not in source.read
    assert any("disguised.txt" in s.path for s in report.skipped)


def test_a_sidecar_and_object_tags_say_who_may_read(kb, bucket, s3_endpoint):
    client, name = bucket
    _put(client, name, "docs/hr.md", "# HR\n\nSalaries.\n")
    _put(client, name, "docs/hr.md.acl.json", json.dumps({"groups": ["hr"], "users": ["ann"]}))
    _put(client, name, "docs/eng.md", "# Eng\n\nBuild notes.\n", Tagging="acl-groups=eng%20ops&acl-public=false")
    _put(client, name, "docs/pub.md", "# Public\n\nAnyone.\n")
    report = kb.sync(_source(s3_endpoint, name, acl_from_tags=True, access={"*/pub.md": {"public": True}}))
    assert len(report.added) == 3   # the sidecar is not a document
    meta = {d.metadata["source"].rsplit("/", 1)[-1]: d.metadata for d in kb.get_documents()}
    assert _acl(meta["hr.md"], "g") == {group_key("hr")} and _acl(meta["hr.md"], "u") == {user_key("ann")}
    assert _acl(meta["eng.md"], "g") == {group_key("eng"), group_key("ops")}
    assert meta["pub.md"]["acl_public"] is True
    _put(client, name, "docs/hr.md.acl.json", json.dumps({"groups": ["hr", "finance"]}))
    again = kb.sync(_source(s3_endpoint, name, acl_from_tags=True, access={"*/pub.md": {"public": True}}))
    assert again.updated == [f"s3://{name}/docs/hr.md"] and again.embedded == 0


def test_a_bad_sidecar_is_an_error_for_its_object(kb, bucket, s3_endpoint):
    client, name = bucket
    _put(client, name, "docs/a.md", "# A\n\nText.\n")
    _put(client, name, "docs/a.md.acl.json", json.dumps({"group": ["typo"]}))
    report = kb.sync(_source(s3_endpoint, name))
    assert report.added == [] and "unknown key 'group'" in report.skipped[0].reason


def test_a_local_folder_by_file_url_carries_sidecar_access(kb, tmp_path):
    folder = tmp_path / "share"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "pay.md").write_text("# Pay\n\nSalary bands are reviewed in May.\n")
    (folder / "hr" / "pay.md.acl.json").write_text(json.dumps({"groups": ["hr"], "public": False}))
    (folder / "open.md").write_text("# Open\n\nThe canteen opens at eight.\n")
    source = ObjectStoreSource(f"file://{folder}")
    report = kb.sync(source)
    assert sorted(report.added) == [f"file://{folder}/hr/pay.md", f"file://{folder}/open.md"]
    pay = kb.get_documents({"source": f"file://{folder}/hr/pay.md"})[0].metadata
    assert _acl(pay, "g") == {group_key("hr")} and not _acl(kb.get_documents(
        {"source": f"file://{folder}/open.md"})[0].metadata, "g")
    (folder / "open.md").unlink()
    assert kb.sync(source).deleted == [f"file://{folder}/open.md"]


_keys = st.lists(st.text(st.sampled_from(list("ab./\\~\x00\n ")), min_size=1, max_size=12), min_size=1,
                 max_size=6, unique=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=_keys)
def test_any_key_is_indexed_under_its_own_id_or_skipped_with_a_reason(tmp_path_factory, keys):
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/gen{abs(hash(tuple(keys)))}"
    for key in keys:
        try:
            fs.pipe(f"{root}/{key}.md", f"# K\n\ntext of {key!r}\n".encode())
        except (OSError, ValueError):
            continue
    kb = KnowledgeBase("gen", tmp_path_factory.mktemp("gen"), embedding=DeterministicFakeEmbedding(size=8))
    source = ObjectStoreSource(f"memory://{root}")
    listed = list(source.items())
    report = kb.sync(source)
    for item in listed:
        key, shown = item.id.removeprefix(source.prefix), clean_text(item.id)
        if check_key(key) is None:
            assert shown in report.added or any(s.path == shown for s in report.skipped)
        else:
            assert any(s.path == shown and s.reason for s in report.skipped)
    for path in list(fs.store):
        if path.startswith(root):
            fs.store.pop(path)


@settings(max_examples=300, deadline=None)
@given(key=st.text(max_size=40))
def test_no_key_becomes_a_path_outside_the_temporary_folder(key):
    name = local_name(key)
    assert "/" not in name and "\\" not in name and name not in (".", "..") and not name.startswith(".")
    assert len(name) <= 120
    if check_key(key) is None:
        assert ".." not in key.split("/") and not key.startswith("/")
