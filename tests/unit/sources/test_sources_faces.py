"""The faces of sources: `rag index URL`, `sources:` in a config, `rag serve`'s background writer and `/health`."""

from __future__ import annotations

import shutil
import subprocess
import threading

import pytest
import yaml

from rag import cli
from rag.base.errors import ConfigError
from rag.config.rag_config import load_config
from rag.config.sources import source_spec
from rag.server.sync_schedule import SyncScheduler, scheduled_syncs


def _pages(site) -> None:
    for n in range(3):
        site.page(f"/p{n}", f"Page {n}", f"Page {n} explains topic number {n}.")
    site.sitemap("/sitemap.xml", {f"/p{n}": "2025-01-01" for n in range(3)})


def test_rag_index_syncs_a_sitemap_url(site, tmp_path, capsys):
    _pages(site)
    store = str(tmp_path / "store")
    args = ["index", site.base + "/sitemap.xml", "--store", store, "--embedding", "fake", "--allow-private"]
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert f"{site.base}/sitemap.xml: added 3" in err and "3 chunk(s) in total" in err
    assert cli.main(args) == 0
    assert "added 0, updated 0, unchanged 3" in capsys.readouterr().err


def test_rag_index_refuses_loopback_without_allow_private(site, tmp_path, capsys):
    _pages(site)
    assert cli.main(["index", site.base + "/sitemap.xml", "--store", str(tmp_path / "s"), "--embedding",
                     "fake"]) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1 is a loopback address" in err and site.requests == []


def test_rag_index_syncs_a_bucket_prefix(tmp_path, monkeypatch, capsys):
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        for name, value in (("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t"),
                            ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ENDPOINT_URL", f"http://{host}:{port}")):
            monkeypatch.setenv(name, value)
        client = boto3.client("s3")
        client.create_bucket(Bucket="reports")
        client.put_object(Bucket="reports", Key="q3/summary.md", Body=b"# Q3\n\nRevenue grew.\n")
        store = str(tmp_path / "store")
        assert cli.main(["index", "s3://reports/q3", "--store", store, "--embedding", "fake"]) == 0
        assert "s3://reports/q3: added 1" in capsys.readouterr().err
    finally:
        server.stop()


def _git_repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e.org", "PATH": "/usr/bin:/bin"}
    (repo / "guide.md").write_text("# Guide\n\nThe handbook says to sync sources hourly.\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    return repo


def _config(tmp_path, sources) -> str:
    path = tmp_path / "rag.yaml"
    path.write_text(yaml.safe_dump({
        "embedding": {"kind": "deterministic", "size": 16}, "llm": {"kind": "extractive"},
        "resources": [{"name": "handbook", "kind": "knowledge_base", "path": str(tmp_path / "store"),
                       "sources": sources}]}))
    return str(path)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_config_source_without_schedule_is_synced_when_the_config_is_built(tmp_path):
    from rag.compose.generator import RAG

    config = load_config(_config(tmp_path, [{"name": "wiki", "kind": "git", "repository": str(_git_repo(tmp_path)),
                                             "revision": "main"}]))
    rag = RAG.from_config(config)
    docs = rag.resources[0].retrieve("How often are sources synced?")
    assert any("hourly" in d.page_content for d in docs)
    assert scheduled_syncs(config) == []


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_scheduled_sources_are_synced_by_one_background_writer_and_reported_in_health(tmp_path):
    from fastapi.testclient import TestClient

    from rag.compose.generator import RAG
    from rag.server.app import create_app

    config = load_config(_config(tmp_path, [
        {"name": "wiki", "kind": "git", "repository": str(_git_repo(tmp_path)), "schedule": {"every": 3600}},
        {"name": "broken", "kind": "git", "repository": str(tmp_path / "missing"), "schedule": {"every": 60}}]))
    rag = RAG.from_config(config)
    assert rag.resources[0].retrieve("hourly") == []   # scheduled: not synced at build
    now = [1000.0]
    scheduler = SyncScheduler(scheduled_syncs(config), clock=lambda: now[0])
    assert scheduler.run_due() == 2 and scheduler.run_due() == 0
    status = scheduler.status()
    assert status["handbook/wiki"]["ok"] is True and status["handbook/wiki"]["added"] == 1
    assert status["handbook/broken"]["ok"] is True and status["handbook/broken"]["skipped"] == 1   # listing failed
    now[0] += 61
    assert scheduler.run_due() == 1   # only the one due
    client = TestClient(create_app(rag, syncs=scheduler), base_url="http://127.0.0.1")
    health = client.get("/health").json()
    assert health["sync"]["handbook/wiki"]["added"] == 1 and str(tmp_path) not in str(health)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_background_writer_thread_syncs_at_start_and_stops(tmp_path):
    from rag.compose.generator import RAG

    config = load_config(_config(tmp_path, [
        {"name": "wiki", "kind": "git", "repository": str(_git_repo(tmp_path)), "schedule": {"every": 3600}}]))
    rag = RAG.from_config(config)
    scheduler = SyncScheduler(scheduled_syncs(config)).start()
    try:
        for _ in range(600):   # (up to a minute on a loaded machine; the sync itself takes well under a second)
            if scheduler.status():
                break
            threading.Event().wait(0.1)
    finally:
        scheduler.stop()
    assert scheduler.status()["handbook/wiki"]["added"] == 1 and scheduler.runs == 1
    assert any("hourly" in d.page_content for d in rag.resources[0].retrieve("hourly"))


@pytest.mark.parametrize("spec, message", [
    ({"kind": "ftp"}, "valid: object_store, web, git"),
    ({"kind": "web", "url": "https://a.org/", "schedule": {"every": 0}}, "schedule.every must be seconds"),
    ({"kind": "web", "url": "https://a.org/", "max_page": 3}, "option 'max_page' is not valid for kind web"),
    ({"kind": "object_store", "url": "s3://b/p", "storage_options": {"secret": "x"}}, "secret_env"),
    ({"kind": "object_store", "url": "s3://b/p", "storage_options": {"key_env": "NO_SUCH_VAR_39"}}, "not set"),
    ({"kind": "folder", "path": "docs", "access": {}}, "option 'access' is not valid for kind folder"),
    ({"kind": "git", "repository": "ext::sh -c id"}, "repository must be a path or a URL"),
])
def test_a_bad_source_in_a_config_is_one_clear_error(spec, message):
    with pytest.raises(ConfigError, match=message):
        source_spec(spec)


def test_sources_in_a_config_are_checked_when_it_is_loaded(tmp_path):
    with pytest.raises(ConfigError, match="same name"):
        load_config(_config(tmp_path, [{"kind": "web", "url": "https://a.org/"},
                                       {"kind": "web", "url": "https://b.org/"}]))
