"""Reliability of `KnowledgeBase` writes: kill -9 at random points, concurrent writers, readers.

The indexer runs in a child process (the same `add_documents` call `rag index` makes) with a
fast fake embedding; it prints one line per progress event so the parent can kill it at a
random point of the work itself, not during interpreter start-up.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.chunking import TokenChunker
from rag.indexing.tokens import ApproximateTokenizer

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("revenue margin growth bank rates inflation cloud segment dividend cash flow guidance risk "
         "market share customer supplier tariff currency debt equity").split()

INDEXER = textwrap.dedent("""
    import sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from rag.indexing.chunking import TokenChunker
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.tokens import ApproximateTokenizer

    store, corpus = sys.argv[1], sys.argv[2]
    kb = KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=32),
                       chunker=TokenChunker(chunk_size=48, chunk_overlap=8, tokenizer=ApproximateTokenizer()),
                       lock_timeout=float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
    print("ready", flush=True)
    report = kb.add_documents(corpus, cleanup="incremental",
                              progress=lambda event, n: print(event, n, flush=True))
    print("done", len(report.added), len(report.updated), len(report.deleted), flush=True)
""")


def _text(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
                    for _ in range(sentences))


def _write_corpus(root: Path, rng: random.Random, files: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for i in range(files):
        (root / f"doc{i:03d}.md").write_text(f"# Document {i}\n\n{_text(rng, rng.randint(20, 60))}\n")


def _mutate(root: Path, rng: random.Random) -> None:
    files = sorted(root.iterdir())
    for path in rng.sample(files, len(files) // 2):
        path.write_text(path.read_text() + "\n\n## Update\n\n" + _text(rng, rng.randint(5, 30)))
    for path in rng.sample(files, 2):
        path.unlink()
    for i in range(3):
        (root / f"new{rng.randint(0, 10**6)}_{i}.md").write_text(_text(rng, rng.randint(10, 40)))


def _kb(store: Path) -> KnowledgeBase:
    return KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=32),
                         chunker=TokenChunker(chunk_size=48, chunk_overlap=8, tokenizer=ApproximateTokenizer()))


def _snapshot(kb: KnowledgeBase) -> dict[str, str]:
    got = kb.chunks.collection.get(include=["documents"])
    assert len(got["ids"]) == len(set(got["ids"])) == kb.count(), "count and get disagree or ids repeat"
    result = kb.chunks.collection.query(query_embeddings=[[0.1] * 32], n_results=max(kb.count(), 1), include=[])
    found = set(result["ids"][0])
    assert found <= set(got["ids"]), "the vector index holds chunks the metadata store does not"
    # HNSW search is approximate: even with k = count, hnswlib's multi-threaded build can leave a node that no
    # search reaches (seen once in ~20 clean builds in CI, never in 80 local ones). A lost vector would show
    # as a missing embedding below; a lost write batch would miss far more than this tolerance.
    missing = sorted(set(got["ids"]) - found)
    assert len(missing) <= max(2, len(got["ids"]) // 500), f"query misses {len(missing)} stored chunks"
    if missing:
        vectors = kb.chunks.collection.get(ids=missing, include=["embeddings"])
        assert len(vectors["ids"]) == len(missing) and all(len(v) == 32 for v in vectors["embeddings"])
    records = kb.list_documents()
    assert sorted(c for r in records for c in r.chunk_ids) == sorted(got["ids"]), "records and store disagree"
    return dict(zip(got["ids"], got["documents"], strict=True))


def _spawn(script: Path, store: Path, corpus: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"}
    return subprocess.Popen([sys.executable, str(script), str(store), str(corpus), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _pending(store: Path) -> int:
    with sqlite3.connect(store / "kb" / "docs" / "records.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM documents WHERE state != 'ok'").fetchone()[0]


@pytest.mark.slow
@pytest.mark.integration
def test_kill_9_at_random_points_then_rerun_gives_exactly_the_right_chunks(tmp_path):
    rng = random.Random(20261122)
    script = tmp_path / "indexer.py"
    script.write_text(INDEXER)
    corpus, template = tmp_path / "corpus", tmp_path / "template"
    _write_corpus(corpus, random.Random(1), files=40)
    child = _spawn(script, template, corpus)
    events, write_started = 0, None
    for line in child.stdout:
        events += line.split()[0] in ("file", "pages", "chunks", "embeddings")
        if line.startswith("chunks") and write_started is None:
            write_started = time.monotonic()
    write_seconds = time.monotonic() - write_started
    assert child.wait(timeout=120) == 0, child.stderr.read()
    interrupted = 0
    trial = 0
    # At least 10 trials; on a loaded machine a kill can land outside the write more often than
    # planned, so keep going (up to 20) until at least 3 kills interrupted a write.
    while trial < 10 or (interrupted < 3 and trial < 20):
        _write_corpus(corpus, random.Random(1), files=40)  # the template's content: only the mutation is new
        store = tmp_path / f"store{trial}"
        shutil.copytree(template, store)
        _mutate(corpus, rng)
        child = _spawn(script, store, corpus)
        # Even trials: after a random progress event (mostly while scanning and loading files);
        # odd trials: within a moment of the first embedding batch, i.e. while writing to Chroma.
        kill_after = rng.randint(1, events) if trial % 2 == 0 else None
        seen = 0
        for line in child.stdout:
            if kill_after is None and line.startswith("embeddings"):
                time.sleep(rng.uniform(0, min(0.3, write_seconds)))
                break
            if line.split()[0] in ("file", "pages", "chunks", "embeddings"):
                seen += 1
                if kill_after is not None and seen >= kill_after:
                    break
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        interrupted += _pending(store) > 0
        kb = _kb(store)
        kb.add_documents(corpus, cleanup="incremental")  # the re-run
        expected = _kb(tmp_path / f"fresh{trial}")
        expected.add_documents(corpus)
        assert _snapshot(kb) == _snapshot(expected), f"trial {trial}: store differs from a clean build"
        assert not kb.add_documents(corpus, cleanup="incremental").changed
        trial += 1
    print(f"{interrupted} of {trial} kills interrupted a write")
    assert interrupted >= 3, f"only {interrupted} of {trial} kills interrupted a write; the test lost its point"


@pytest.mark.slow
@pytest.mark.integration
def test_second_writer_process_gets_a_lock_error_then_waits_and_loses_nothing(tmp_path):
    script = tmp_path / "indexer.py"
    script.write_text(INDEXER)
    first, second, store = tmp_path / "first", tmp_path / "second", tmp_path / "store"
    _write_corpus(first, random.Random(2), files=30)
    _write_corpus(second, random.Random(3), files=5)
    _kb(store)  # create it, so both processes open an existing knowledge base
    writer = _spawn(script, store, first)
    for line in writer.stdout:
        if line.startswith("file"):
            break
    os.kill(writer.pid, signal.SIGSTOP)  # a slow writer, paused while holding the lock
    try:
        blocked = _spawn(script, store, second)
        _, err = blocked.communicate(timeout=60)
        assert blocked.returncode != 0 and "being written by process" in err and str(writer.pid) in err
        waiting = _spawn(script, store, second, "60")
        assert waiting.stdout.readline().startswith("ready")
    finally:
        os.kill(writer.pid, signal.SIGCONT)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    writer.communicate(timeout=120)
    assert writer.returncode == 0
    sources = {Path(r.source).parent.name for r in _kb(store).list_documents()}
    assert sources == {"first", "second"} and len(_kb(store).list_documents()) == 35
    _snapshot(_kb(store))


@pytest.mark.integration
def test_reader_threads_keep_working_while_one_writer_indexes(tmp_path):
    corpus = tmp_path / "corpus"
    _write_corpus(corpus, random.Random(4), files=10)
    kb = _kb(tmp_path / "store")
    kb.add_documents(corpus)
    _write_corpus(tmp_path / "more", random.Random(5), files=40)
    errors: list[BaseException] = []
    counts: list[list[int]] = [[] for _ in range(3)]
    stop = threading.Event()

    def read(seen: list[int]) -> None:
        retriever = kb.as_retriever(k=3)
        while not stop.is_set():
            try:
                assert len(retriever.invoke("revenue growth")) == 3
                seen.append(kb.count())
            except BaseException as exc:  # noqa: BLE001 - reported by the assert below
                errors.append(exc)
                return

    readers = [threading.Thread(target=read, args=(seen,)) for seen in counts]
    for t in readers:
        t.start()
    report = kb.add_documents(tmp_path / "more")
    stop.set()
    for t in readers:
        t.join()
    assert not errors and len(report.added) == 40
    for seen in counts:  # each reader saw the store grow, never shrink or fail
        assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] <= kb.count()
    assert max(seen[-1] for seen in counts) > min(seen[0] for seen in counts)
