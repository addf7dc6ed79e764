"""Reads on a full disk, a read-only store, a locked database (issue 37, item 6): every read-side door
(`rag ask`, `rag serve` and `rag mcp` start-up) prints the one line `rag index` prints, never a traceback.

Real conditions where this machine allows them: a full and a read-only tmpfs mounted in a private mount
namespace (`unshare -rm`, skipped without it), a database held locked by another process. The class of
engine errors (SQLite's and Chroma's messages, the OS's errno values) is then injected where the store
is opened, as the engine raises it.
"""

from __future__ import annotations

import errno
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import chromadb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import cli
from rag.compose.knowledge_base import KnowledgeBase
from rag.stores import chroma
from rag.stores.files import store_write_error
from tests.unit.disks import private_tmpfs_available

ROOT = Path(__file__).resolve().parents[3]
#: what each condition's line says, and the advice `rag index` gives for it
SAYS = {"full": ("is full", "Free some space and run the same command again"),
        "read-only": ("is read-only", "make the store directory writable"),
        "locked": ("is locked by another process", "Wait for it to finish, or stop it, and run the same command again")}


def _one_line(stderr: str, command: str, condition: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(f"rag {command}: error: "), stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert all(phrase in lines[-1] for phrase in SAYS[condition]), lines[-1]


_DOORS = textwrap.dedent("""
    import shutil, subprocess, sys
    from pathlib import Path
    mount, condition = Path(sys.argv[1]), sys.argv[2]
    rag = [sys.executable, "-m", "rag.cli"]
    def run(*args):
        done = subprocess.run([*rag, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        return done.returncode, done.stderr
    (mount / "corpus").mkdir()
    for city in ("Paris", "Rome"):
        (mount / "corpus" / f"{city}.md").write_text(f"# {city}\\n\\n{city} is a capital.\\n")
    store = str(mount / "store")
    assert run("index", str(mount / "corpus"), "--store", store, "--embedding", "fake")[0] == 0
    if condition == "full":
        (mount / "filler").write_bytes(b"x" * shutil.disk_usage(mount).free)
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    results = {"ask": run("ask", "capital", "--store", store, "--search", "dense"),
               "serve": run("serve", "--store", store, "--port", "8765"),
               "mcp": run("mcp", "--store", store),
               "index": run("index", str(mount / "corpus"), "--store", store, "--embedding", "fake")}
    import json
    print("RESULTS " + json.dumps(results))
""")


@pytest.mark.skipif(not private_tmpfs_available(), reason="needs unshare -rm to mount a private tmpfs")
@pytest.mark.parametrize("condition", ["full", "read-only"])
def test_every_read_door_on_a_full_or_read_only_disk_prints_the_line_rag_index_prints(tmp_path, condition):
    import json
    import os

    mount = tmp_path / "mnt"
    mount.mkdir()
    (tmp_path / "doors.py").write_text(_DOORS)
    command = f"mount -t tmpfs -o size=24m tmpfs {mount} && {sys.executable} {tmp_path / 'doors.py'} {mount} {condition}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(["unshare", "-rm", "sh", "-c", command], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.split("RESULTS ", 1)[1])
    for door, (code, stderr) in results.items():
        assert code == 2, (door, stderr[-2000:])
        _one_line(stderr, door, condition)


def _kb_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    kb = KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=384))
    kb.add_documents([str(_write(tmp_path / "corpus" / "Paris.md", "# Paris\n\nParis is a capital.\n"))])
    kb.close()   # (its Chroma client too: as a new process finds it)
    return store


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_database_another_process_holds_locked_is_one_line_not_a_wait_without_end(tmp_path, capsys, monkeypatch):
    store = _kb_store(tmp_path)
    monkeypatch.setattr(chroma, "LOCK_WAIT", 0.5)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys, time
        db = sqlite3.connect({str(store / "chroma.sqlite3")!r}, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")
        print("held", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert cli.main(["ask", "capital", "--store", str(store), "--search", "dense"]) == 2
        _one_line(capsys.readouterr().err, "ask", "locked")
        _write(tmp_path / "corpus" / "Rome.md", "# Rome\n\nRome is a capital.\n")
        assert cli.main(["index", str(tmp_path / "corpus"), "--store", str(store), "--embedding", "fake"]) == 2
        _one_line(capsys.readouterr().err, "index", "locked")
    finally:
        holder.communicate("", timeout=30)


ENGINE_ERRORS = {
    "full": [sqlite3.OperationalError("database or disk is full"), OSError(errno.ENOSPC, "No space left on device"),
             chromadb.errors.InternalError("error returned from database: (code: 13) database or disk is full")],
    "locked": [sqlite3.OperationalError("database is locked"),
               chromadb.errors.InternalError("error returned from database: (code: 5) database is locked")],
    "read-only": [sqlite3.OperationalError("attempt to write a readonly database"),
                  OSError(errno.EROFS, "Read-only file system"),
                  chromadb.errors.InternalError("error returned from database: (code: 8) attempt to write a readonly "
                                                "database")],
}


@settings(max_examples=12, deadline=None)
@given(case=st.sampled_from([(c, e) for c, errors in ENGINE_ERRORS.items() for e in errors]))
def test_each_engine_error_at_the_store_open_is_the_line_rag_index_prints(tmp_path_factory, case):
    condition, error = case
    store = _kb_store(tmp_path_factory.mktemp("kb"))

    def refuse(*args, **kwargs):
        raise error

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chromadb, "PersistentClient", refuse)
        from contextlib import redirect_stderr
        from io import StringIO

        err = StringIO()
        with redirect_stderr(err):
            assert cli.main(["ask", "capital", "--store", str(store), "--search", "dense"]) == 2
    _one_line(err.getvalue(), "ask", condition)
    same = str(store_write_error(error, store.resolve(), "cannot open knowledge base 'docs'"))   # rag index's formatter
    free = re.compile(r" \([\d,]+ bytes free\)")
    assert free.sub("", err.getvalue().strip()) == free.sub("", f"rag ask: error: {same}")


@settings(max_examples=10, deadline=None)
@given(words=st.lists(st.from_regex(r"\Aqz[a-z]{3,8}\Z"), min_size=1, max_size=4))
def test_bm25_without_a_matching_word_says_so_not_that_the_collection_is_empty(tmp_path_factory, words):
    store = _kb_store(tmp_path_factory.mktemp("kb"))
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert cli.main(["ask", " ".join(words), "--store", str(store), "--search", "bm25"]) == 0
    said = err.getvalue()
    assert "no chunk of the 1 in collection 'docs' contains any of the question's words" in said, said
    assert "has no chunks" not in said + out.getvalue()
